// paravault web: the quick switcher and the keyboard shortcuts. The one script the server sends,
// from its own origin (the CSP's default-src 'self'; no inline script anywhere). Every page
// works without it: the header box searches, /switch lists notes by title, access keys
// approve, reject and apply.
(function () {
  "use strict";

  function editable(element) {
    if (!element || !element.tagName) return false;
    var tag = element.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || element.isContentEditable;
  }

  // A search box that lists the notes whose title starts with what is typed (GET
  // /switch/titles): ArrowDown and ArrowUp choose, Enter opens the chosen note (without a
  // choice Enter submits the form as before), Escape closes the list.
  function switcher(input) {
    var list = document.createElement("ul");
    list.id = input.id + "-list";
    list.className = "switcher";
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "Notes by title");
    list.hidden = true;
    input.parentNode.appendChild(list);
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("aria-controls", list.id);
    input.setAttribute("autocomplete", "off");
    var items = [];
    var active = -1;
    var timer = null;
    var asked = 0;

    function close() {
      list.hidden = true;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
      active = -1;
    }

    function choose(index) {
      var options = list.querySelectorAll("[role=option]");
      for (var i = 0; i < options.length; i++) {
        options[i].setAttribute("aria-selected", i === index ? "true" : "false");
      }
      active = index;
      if (index >= 0 && options[index]) {
        input.setAttribute("aria-activedescendant", options[index].id);
        options[index].scrollIntoView({ block: "nearest" });
      } else {
        input.removeAttribute("aria-activedescendant");
      }
    }

    function open(index) {
      if (items[index]) window.location.assign(items[index].url);
    }

    function show(found) {
      items = found.matches || [];
      list.textContent = "";
      if (items.length === 0) {
        close();
        return;
      }
      items.forEach(function (item, i) {
        var option = document.createElement("li");
        option.id = list.id + "-" + i;
        option.setAttribute("role", "option");
        option.setAttribute("aria-selected", "false");
        var title = document.createElement("span");
        title.className = "switcher-title";
        title.textContent = item.title;
        var path = document.createElement("span");
        path.className = "switcher-path";
        path.textContent = item.path;
        option.appendChild(title);
        option.appendChild(path);
        // mousedown, not click: the box's blur would close the list first.
        option.addEventListener("mousedown", function (event) {
          event.preventDefault();
          open(i);
        });
        list.appendChild(option);
      });
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
      choose(-1);
    }

    input.addEventListener("input", function () {
      window.clearTimeout(timer);
      var query = input.value.trim();
      if (!query) {
        close();
        return;
      }
      timer = window.setTimeout(function () {
        var ticket = ++asked;
        fetch("/switch/titles?q=" + encodeURIComponent(query), { credentials: "same-origin", headers: { Accept: "application/json" } })
          .then(function (answer) { return answer.ok ? answer.json() : null; })
          .then(function (found) { if (found && ticket === asked) show(found); })
          .catch(close);
      }, 80);
    });

    input.addEventListener("keydown", function (event) {
      if (list.hidden || items.length === 0) return;
      if (event.key === "ArrowDown") {
        event.preventDefault();
        choose((active + 1) % items.length);
      } else if (event.key === "ArrowUp") {
        event.preventDefault();
        choose(active <= 0 ? items.length - 1 : active - 1);
      } else if (event.key === "Enter" && active >= 0) {
        event.preventDefault();
        open(active);
      } else if (event.key === "Escape") {
        event.preventDefault();
        close();
      }
    });

    input.addEventListener("blur", function () { window.setTimeout(close, 150); });
  }

  document.querySelectorAll("input[data-switcher]").forEach(switcher);

  var quick = document.getElementById("quick-q");
  if (quick) quick.setAttribute("aria-keyshortcuts", "Control+K / Alt+K");

  document.addEventListener("keydown", function (event) {
    if (quick && (event.ctrlKey || event.metaKey) && !event.altKey && (event.key === "k" || event.key === "K")) {
      event.preventDefault();
      quick.focus();
      quick.select();
      return;
    }
    if (editable(event.target) || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "/" && quick) {
      event.preventDefault();
      quick.focus();
      quick.select();
    } else if (event.key === "?") {
      var legend = document.getElementById("shortcuts");
      if (legend) {
        event.preventDefault();
        legend.open = !legend.open;
        if (legend.open) {
          legend.scrollIntoView({ block: "nearest" });
          legend.querySelector("summary").focus();
        }
      }
    }
  });
})();
