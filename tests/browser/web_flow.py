#!/usr/bin/env python3
"""The issue 21 flow in a real browser: headless Chromium driven by selenium against
`paravault web`, with an MCP agent (official `mcp` Python SDK over `paravault mcp`).

Usage: web_flow.py PATH_OF_THE_PARAVAULT_BINARY SCREENSHOT_FOLDER

Builds a vault with a `human` approval rule and `approvals.review_url`, registers approver
alice (secret on standard input) in a temporary PARAVAULT_CONFIG_DIR, serves it with
`paravault web` on a free loopback port, and then: logs in; browses to a note; searches; the
agent proposes and tries approved=true and gets human_approval_required with the review URL;
the person approves in the browser; the agent's apply succeeds and its receipt names the
approver; a rejection path; a forged POST without the CSRF token is refused; a note carrying
<script>/onerror= runs nothing (checked in the browser); logout. Prints one line per step and
exits 1 on the first failure. Screenshots go to SCREENSHOT_FOLDER.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

BINARY = os.path.abspath(sys.argv[1])
SHOTS = os.path.abspath(sys.argv[2])
SECRET = "correct horse battery staple"
FOLDERS = ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "PROTOCOLS"]


def note(note_type, title, body):
    return f"---\ntype: {note_type}\ntitle: {title}\ndescription: About {title}\ntimestamp: 2026-01-01T00:00:00Z\n---\n{body}"


HOSTILE = note(
    "Resource",
    "Hostile",
    "# A hostile note\n\n<script>document.title='pwned'; window.pwned = 1;</script>\n\n"
    "<img src=x onerror=\"document.title='pwned'; window.pwned = 2;\">\n\n"
    "[click me](javascript:window.pwned=3) <a href=\"javascript:window.pwned=4\" onclick=\"window.pwned=5\">raw link</a>\n\n"
    "<svg onload=\"window.pwned=6\"></svg> Plain text after the hostile markup.\n",
)


def chord(driver, modifier, key):
    """Presses modifier+key on the page, as a person would on the keyboard."""
    ActionChains(driver).key_down(modifier).send_keys(key).key_up(modifier).perform()


def step(name):
    print(f"PASS {name}", flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def attr(obj, snake, camel):
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel, None)


async def call(session, tool, **args):
    result = await session.call_tool(tool, args)
    data = attr(result, "structured_content", "structuredContent")
    if data is None:
        data = json.loads(result.content[0].text)
    return bool(attr(result, "is_error", "isError")), data


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,900"]:
        options.add_argument(flag)
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def wait_for(predicate, what, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if predicate():
                return
        except (StaleElementReferenceException, NoSuchElementException):
            pass  # the page is being replaced by the one the click loads
        except WebDriverException as e:
            # chromedriver's other word for a stale element, when the document it was found
            # in is replaced between the lookup and the read.
            if "does not belong to the document" not in str(e):
                raise
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def flow(base, vault, env, driver):
    by_id = lambda i: driver.find_element(By.ID, i)
    # 1. Log in.
    driver.get(base + "/")
    check(driver.current_url.endswith("/login"), f"an anonymous visitor is sent to /login, got {driver.current_url}")
    by_id("approver").send_keys("alice")
    by_id("secret").send_keys(SECRET)
    by_id("login").click()
    wait_for(lambda: driver.find_elements(By.ID, "who"), "the dashboard after login")
    check("alice" in by_id("who").text, "the header names the logged-in approver")
    cookie = driver.get_cookie("paravault_session")
    check(cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", f"session cookie flags: {cookie}")
    step("log in (session cookie HttpOnly, SameSite=Strict)")

    # 2. Browse to a note.
    driver.find_element(By.LINK_TEXT, "Notes").click()
    driver.find_element(By.LINK_TEXT, "01_Projects").click()
    driver.find_element(By.LINK_TEXT, "plan.md").click()
    check("zebras" in by_id("note-body").text, "the note's body is rendered")
    check("03_Resources/linker.md" in by_id("backlinks").text, "its backlinks are listed")
    step("browse to a note (rendered body, frontmatter, backlinks)")

    # 3. Search.
    driver.find_element(By.LINK_TEXT, "Search").click()
    by_id("q").send_keys("zebras")
    driver.find_element(By.CSS_SELECTOR, "input[name=mode][value=fts]").click()
    by_id("search-button").click()
    wait_for(lambda: driver.find_elements(By.ID, "results"), "search results")
    check("01_Projects/plan.md" in by_id("results").text, "the note is found")
    check(by_id("actual-mode").text == "fts", "the mode actually run is shown")
    driver.save_screenshot(os.path.join(SHOTS, "search.png"))
    step("search (each result with its provenance)")

    params = StdioServerParameters(command=BINARY, args=["--vault", vault, "mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            # 4. The agent proposes and tries to approve itself.
            wanted = note("Project", "Plan", "The plan body mentions zebras and lions.\n")
            is_error, proposal = await call(session, "propose_memory_change", path="01_Projects/plan.md", content=wanted)
            check(not is_error, f"propose: {proposal}")
            pid = proposal["proposal_id"]
            strings = {k: v for k, v in proposal.items() if isinstance(v, str)}
            is_error, refused = await call(session, "apply_memory_change", proposal=strings, approved=True)
            check(is_error and refused["error"]["code"] == "human_approval_required", f"apply under a human rule: {refused}")
            review_url = refused["error"]["details"]["review_url"]
            check(review_url == f"{base}/proposals/{pid}", f"the review URL: {review_url}")
            step("agent: approved=true under a human rule -> human_approval_required with the review URL")

            # 5. The person approves in the browser.
            driver.get(base + "/")
            check(by_id("pending-count").text == "1", "the dashboard counts one pending approval")
            driver.save_screenshot(os.path.join(SHOTS, "dashboard.png"))
            driver.get(review_url)
            check(by_id("state").text.lower() == "pending", "the proposal is pending")
            check("+ The plan body mentions zebras and lions." in driver.find_element(By.CSS_SELECTOR, "pre.diff").text, "the diff")
            check(by_id("gate-verdict").text == "passes", "the lint gate's verdict")
            by_id("comment").send_keys("Reviewed in the browser")
            driver.save_screenshot(os.path.join(SHOTS, "proposal.png"))
            by_id("approve").click()
            wait_for(lambda: by_id("state").text.lower() == "approved", "the approved state")
            check("alice" in by_id("decision").text and "web" in by_id("decision").text, "the decision names alice and the web")
            step("person approves in the browser")

            # 6. The agent's apply succeeds; the receipt names the approver.
            is_error, receipt = await call(session, "apply_memory_change", proposal=strings, approved=True)
            check(not is_error, f"apply after approval: {receipt}")
            check(receipt["approval"]["approver"] == "alice" and receipt["approval"]["channel"] == "web", f"receipt: {receipt}")
            with open(os.path.join(vault, "01_Projects/plan.md"), encoding="utf-8") as f:
                check(f.read() == wanted, "the note holds the approved text")
            driver.get(base + "/receipts")
            check("alice" in driver.find_element(By.TAG_NAME, "table").text, "the receipts page names the approver")
            check("verified" in by_id("chain").text, "the receipt chain verifies")
            step("agent applies; the receipt names approver alice and channel web")
            driver.get(review_url)
            check(by_id("state").text.lower() == "applied", "the applied proposal says applied")
            check(driver.find_elements(By.ID, "before-kept"), "the applied proposal shows the text it replaced")
            check("+ The plan body mentions zebras and lions." in driver.find_element(By.CSS_SELECTOR, "pre.diff").text, "the kept diff")
            check("via MCP" in by_id("proposal-status").text, f"proposed by the agent via MCP: {by_id('proposal-status').text}")
            step("the applied proposal keeps its diff and names who proposed it")

            # 7. A rejection.
            is_error, second = await call(session, "propose_memory_change", path="01_Projects/plan.md",
                                          content=note("Project", "Plan", "Remove the lions.\n"))
            check(not is_error, f"second propose: {second}")
            second_strings = {k: v for k, v in second.items() if isinstance(v, str)}
            is_error, refused = await call(session, "apply_memory_change", proposal=second_strings, approved=True)
            check(is_error and refused["error"]["code"] == "human_approval_required", f"{refused}")
            driver.get(refused["error"]["details"]["review_url"])
            by_id("comment").send_keys("Keep the lions")
            by_id("reject").click()
            wait_for(lambda: by_id("state").text.lower() == "rejected", "the rejected state")
            is_error, refused = await call(session, "apply_memory_change", proposal=second_strings, approved=True)
            check(is_error and refused["error"]["code"] == "proposal_rejected", f"apply after rejection: {refused}")
            check(refused["error"]["details"]["comment"] == "Keep the lions", "the agent reads the person's comment")
            step("rejection: the agent's apply fails with proposal_rejected")

            # 8. A forged POST without the CSRF token (same browser, same cookie) is refused.
            is_error, third = await call(session, "propose_memory_change", path="01_Projects/plan.md",
                                         content=note("Project", "Plan", "A forged approval target.\n"))
            third_id = third["proposal_id"]
            driver.get(base + "/")
            driver.execute_script(
                "const f = document.createElement('form'); f.method = 'post'; f.action = arguments[0];"
                "const d = document.createElement('input'); d.name = 'decision'; d.value = 'approve'; f.appendChild(d);"
                "document.body.appendChild(f); f.submit();",
                f"/proposals/{third_id}/decide",
            )
            wait_for(lambda: driver.find_elements(By.ID, "error"), "the refusal page")
            check("CSRF" in by_id("error").text, f"the refusal names the CSRF token: {by_id('error').text}")
            is_error, status = await call(session, "get_proposal_status", proposal_id=third_id)
            check(status["state"] == "pending", f"the forged approval decided nothing: {status}")
            step("forged POST without the CSRF token refused (403); nothing decided")

            # 8a. The review keys: Alt+A approves the pending proposal, Alt+P applies it (the
            # browser's access keys, named in aria-keyshortcuts and the page's key line).
            driver.get(f"{base}/proposals/{third_id}")
            check(by_id("approve").get_attribute("aria-keyshortcuts") == "Alt+A", "Approve names its key")
            chord(driver, Keys.ALT, "a")
            wait_for(lambda: by_id("state").text.lower() == "approved", "Alt+A approves")
            check(by_id("apply").get_attribute("aria-keyshortcuts") == "Alt+P", "Apply names its key")
            chord(driver, Keys.ALT, "p")
            wait_for(lambda: by_id("state").text.lower() == "applied", "Alt+P applies")
            with open(os.path.join(vault, "01_Projects/plan.md"), encoding="utf-8") as f:
                check("A forged approval target." in f.read(), "the note holds the text applied by keyboard")
            # A proposal left pending for the tour's proposal page.
            is_error, fourth = await call(session, "propose_memory_change", path="01_Projects/plan.md",
                                          content=note("Project", "Plan", "A proposal left for the tour.\n"))
            check(not is_error, f"fourth propose: {fourth}")
            step("keys: Alt+A approves, Alt+P applies")

    # 8b. An edit conflict: the person types while the note changes on disk; the 409 keeps the
    # typed text and shows theirs and yours against the version the person opened.
    driver.get(base + "/edit/03_Resources/linker.md")
    linker = os.path.join(vault, "03_Resources/linker.md")
    with open(linker, encoding="utf-8") as f:
        opened = f.read()
    with open(linker, "w", encoding="utf-8") as f:
        f.write(opened.replace("See [the plan]", "Their line.\n\nSee [the plan]"))
    box = by_id("content")
    box.clear()
    box.send_keys(opened.replace("See [the plan]", "My line. See [the plan]"))
    by_id("propose").click()
    wait_for(lambda: driver.find_elements(By.ID, "three-way"), "the three-way view")
    check("+ Their line." in by_id("conflict-theirs").text, "theirs: the line added on disk")
    check("+ My line." in by_id("conflict-yours").text and "Their line" not in by_id("conflict-yours").text, "yours: the typed change")
    check("My line." in by_id("content").get_attribute("value"), "the typed text is kept")
    driver.save_screenshot(os.path.join(SHOTS, "edit-conflict.png"))
    step("edit conflict: typed text kept, three-way view (theirs, yours)")

    # 9. A hostile note runs nothing.
    driver.get(base + "/note/03_Resources/hostile.md")
    time.sleep(1.0)
    check("pwned" not in driver.title, f"no script changed the title: {driver.title}")
    check(driver.execute_script("return typeof window.pwned") == "undefined", "no script set window.pwned")
    for link in driver.find_elements(By.CSS_SELECTOR, "#note-body a"):
        if link.text in ("click me", "raw link") or "javascript" in (link.get_attribute("href") or ""):
            check(not (link.get_attribute("href") or "").lower().startswith("javascript"), "no javascript: link survives")
            link.click()
            time.sleep(0.3)
    check(driver.execute_script("return typeof window.pwned") == "undefined", "clicking the links ran nothing")
    count = driver.execute_script("return document.querySelectorAll('#note-body script, #note-body img, #note-body svg, #note-body [onclick]').length")
    check(count == 0, f"no script, img, svg or handler element in the rendered note ({count})")
    check("<script>" in by_id("note-body").text, "the raw HTML is shown as text")
    driver.save_screenshot(os.path.join(SHOTS, "hostile_note.png"))
    step("hostile note renders inert (checked in the browser)")

    # 10. Every page, as a person reads it: Obsidian's Markdown, no horizontal overflow at
    # 390 px, no serious or critical axe-core violation, screenshots at 1280 and 390 px in light
    # and dark mode.
    tour(base, driver)

    # 11. Log out.
    driver.get(base + "/")
    by_id("logout").click()
    wait_for(lambda: driver.current_url.endswith("/login"), "the login page after logout")
    driver.get(base + "/proposals")
    check(driver.current_url.endswith("/login"), "after logout pages need a login again")
    step("logout")


GARDEN = note("Resource", "Garden", "# Beds\n\nThe garden has three raised beds and a compost heap.\n")
DAILY = note("Resource", "Daily", "Go to [[garden]], [[garden|the beds]] and [[garden#Beds]]; [[nowhere]] is broken.\n\n"
             "- [ ] weed the beds\n- [x] water the roses\n\n"
             "> [!warning] Mind the frost\n> Cover the beds before the night.\n\n"
             "Roses need sun.[^sun]\n\n[^sun]: At least six hours a day.\n\n"
             "Filed under #gardening and #plants/roses.\n\n![[garden]]\n").replace(
    "timestamp:", "tags: [gardening, outdoors]\ntimestamp:")

# Pages the tour visits: (name, path, a CSS selector that must be on the page).
PAGES = [
    ("dashboard", "/", "#doctor"),
    ("browse", "/browse/03_Resources", "#notes"),
    ("note", "/note/03_Resources/daily.md", ".callout"),
    ("tags", "/tags", "#tags"),
    ("tag", "/tags/gardening", "#tagged"),
    ("graph", "/graph", "svg.graph"),
    ("charts", "/charts", "svg.chart"),
    ("switch", "/switch?q=gar", "#switch-results"),
    ("neighbourhood", "/graph?note=03_Resources/daily.md", "svg.graph"),
    ("search", "/search?q=garden+beds&mode=fts", "#results"),
    ("proposals", "/proposals", "#proposals"),
    ("receipts", "/receipts", "#chain"),
    ("tasks", "/tasks", "main"),
    ("maintenance", "/maintenance", "#rot"),
]
# The pages whose screenshots are kept in docs/screenshots/.
SHOWN = ["dashboard", "note", "graph", "charts", "search", "proposal"]


def axe_violations(driver):
    """Serious and critical axe-core violations of the page (axe injected through the driver,
    which the CSP does not govern). None when PARAVAULT_AXE_JS names no file."""
    path = os.environ.get("PARAVAULT_AXE_JS", "")
    if not path or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        driver.execute_script(f.read())
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations.map(v => "
        "({id: v.id, impact: v.impact, nodes: v.nodes.length, target: v.nodes[0] && v.nodes[0].target.join(' ')}))))"
        ".catch(e => done([{id: 'axe-error', impact: 'critical', nodes: 0, target: String(e)}]));")
    return [v for v in result if v["impact"] in ("serious", "critical")]


def look(driver, width, dark):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 900 if width > 600 else 844, "deviceScaleFactor": 1, "mobile": width < 600})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                           {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})


def tour(base, driver):
    by_id = lambda i: driver.find_element(By.ID, i)
    driver.get(base + "/proposals?state=pending")
    links = driver.find_elements(By.CSS_SELECTOR, "#proposals a[href^='/proposals/']")
    pages = list(PAGES)
    if links:
        pages.append(("proposal", links[0].get_attribute("href")[len(base):], "#gate"))
    axe_ran = False
    for width in (1280, 390):
        for dark in (False, True):
            look(driver, width, dark)
            for name, path, selector in pages:
                driver.get(base + path)
                check(driver.find_elements(By.CSS_SELECTOR, selector), f"{name}: {selector} on {path}")
                check("Not found" not in driver.title and "Refused" not in driver.title, f"{name}: {driver.title}")
                overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
                check(overflow <= 0, f"{name} at {width} px is {overflow} px wider than the window")
                if not dark:
                    violations = axe_violations(driver)
                    if violations is not None:
                        axe_ran = True
                        check(not violations, f"{name} at {width} px: axe-core serious/critical violations: {violations}")
                if name in SHOWN:
                    driver.save_screenshot(os.path.join(SHOTS, f"{name}-{width}-{'dark' if dark else 'light'}.png"))
                if name == "charts":
                    # The activity charts and the rot by folder, further down the page.
                    for part in ("activity", "rot-by-folder"):
                        driver.execute_script("document.getElementById(arguments[0]).scrollIntoView()", part)
                        driver.save_screenshot(os.path.join(SHOTS, f"charts-{part}-{width}-{'dark' if dark else 'light'}.png"))
    look(driver, 1280, False)
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    step(f"tour: {len(pages)} pages at 1280 and 390 px, light and dark, no overflow"
         + ("; axe-core: no serious or critical violation" if axe_ran else "; axe-core not installed (PARAVAULT_AXE_JS)"))
    # The Obsidian note as rendered in the browser.
    driver.get(base + "/note/03_Resources/daily.md")
    body = by_id("note-body")
    check(body.find_element(By.LINK_TEXT, "the beds").get_attribute("href").endswith("/note/03_Resources/garden.md"), "an aliased wikilink")
    check(len(body.find_elements(By.CSS_SELECTOR, "input[type=checkbox][disabled]")) == 2, "two disabled task checkboxes")
    check(body.find_elements(By.CSS_SELECTOR, "a.wikilink.broken"), "the broken link is marked")
    check("three raised beds" in body.find_element(By.CSS_SELECTOR, ".embed").text, "the embedded note's excerpt")
    body.find_element(By.LINK_TEXT, "#gardening").click()
    wait_for(lambda: driver.find_elements(By.ID, "tagged"), "the tag page")
    check("03_Resources/daily.md" in by_id("tagged").text, "the tag page lists the note")
    by_id("quick-q").send_keys("compost\n")
    wait_for(lambda: driver.find_elements(By.ID, "results"), "the header search's results")
    check(driver.find_elements(By.CSS_SELECTOR, "#results mark"), "the query's words are marked")
    step("Obsidian note: wikilinks, tasks, broken link, embed, tag page, header search with marked terms")

    # The quick switcher by keyboard only: "/" reaches the box, typing lists notes by title,
    # ArrowDown chooses, Enter opens; Ctrl+K reaches the box too; "?" opens the shortcut list.
    driver.get(base + "/receipts")
    ActionChains(driver).send_keys("/").perform()
    wait_for(lambda: driver.switch_to.active_element.get_attribute("id") == "quick-q", "/ focusing the search box")
    ActionChains(driver).send_keys("gard").perform()
    options = lambda: driver.find_elements(By.CSS_SELECTOR, "#quick-q-list [role=option]")
    wait_for(lambda: by_id("quick-q-list").is_displayed() and options(), "the switcher's list")
    check(by_id("quick-q").get_attribute("aria-expanded") == "true", "the combobox says it is expanded")
    check("Garden" in options()[0].text and "03_Resources/garden.md" in options()[0].text, f"the match: {options()[0].text}")
    look(driver, 390, False)
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    check(overflow <= 0, f"the open list at 390 px is {overflow} px wider than the window")
    driver.save_screenshot(os.path.join(SHOTS, "switcher-390-light.png"))
    look(driver, 1280, False)
    driver.save_screenshot(os.path.join(SHOTS, "switcher-1280-light.png"))
    ActionChains(driver).send_keys(Keys.ARROW_DOWN).perform()
    first = options()[0]
    check(first.get_attribute("aria-selected") == "true", "ArrowDown chooses the first match")
    check(by_id("quick-q").get_attribute("aria-activedescendant") == first.get_attribute("id"), "the box names the chosen match")
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    wait_for(lambda: driver.current_url.endswith("/note/03_Resources/garden.md"), "Enter opening the chosen note")
    check("three raised beds" in by_id("note-body").text, "the note opened")
    chord(driver, Keys.CONTROL, "k")
    wait_for(lambda: driver.switch_to.active_element.get_attribute("id") == "quick-q", "Ctrl+K focusing the search box")
    ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    driver.find_element(By.TAG_NAME, "h1").click()
    check(not by_id("shortcuts").get_attribute("open"), "the shortcut list starts closed")
    ActionChains(driver).send_keys("?").perform()
    wait_for(lambda: by_id("shortcuts").get_attribute("open") is not None, "? opening the shortcut list")
    check("Alt+P" in by_id("shortcuts").text, "the list names Apply's key")
    # Without a choice, Enter still searches the text.
    by_id("quick-q").send_keys("compost")
    by_id("quick-q").send_keys(Keys.ENTER)
    wait_for(lambda: driver.find_elements(By.ID, "results"), "Enter without a choice searching")
    step("quick switcher by keyboard: / then type, ArrowDown, Enter opens the note; Ctrl+K; ? lists the shortcuts")


def main():
    os.makedirs(SHOTS, exist_ok=True)
    work = tempfile.mkdtemp(prefix="paravault-web-flow-")
    vault, config, profile = (os.path.join(work, n) for n in ("vault", "config", "profile"))
    for folder in FOLDERS:
        os.makedirs(os.path.join(vault, folder))
    os.makedirs(os.path.join(vault, ".paravault"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with open(os.path.join(vault, ".paravault/policy.yaml"), "w", encoding="utf-8") as f:
        f.write("approvals:\n  review_url: " + base + "\n  rules:\n"
                "    - { operations: [apply, archive], paths: [\"01_Projects/**\"], approver: human }\n")
    files = {
        "01_Projects/plan.md": note("Project", "Plan", "The plan body mentions zebras.\n"),
        "03_Resources/linker.md": note("Resource", "Linker", "See [the plan](../01_Projects/plan.md).\n"),
        "03_Resources/hostile.md": HOSTILE,
        "03_Resources/garden.md": GARDEN,
        "03_Resources/daily.md": DAILY,
        # Past its expiry: stale, so the charts' rot by folder has a bar to draw.
        "02_Areas/fence.md": note("Area", "Fence", "Replace the fence before spring.\n").replace(
            "timestamp:", "expiry: 2026-01-15\ntimestamp:"),
    }
    for path, text in files.items():
        with open(os.path.join(vault, path), "w", encoding="utf-8") as f:
            f.write(text)
    env = dict(os.environ, PARAVAULT_CONFIG_DIR=config)
    env.pop("PARAVAULT_VAULT_DIR", None)
    subprocess.run([BINARY, "--vault", vault, "sync"], env=env, check=True, capture_output=True)
    subprocess.run([BINARY, "approver", "add", "alice"], env=env, input=SECRET + "\n", text=True, check=True, capture_output=True)
    server = subprocess.Popen([BINARY, "--vault", vault, "web", "--bind", f"127.0.0.1:{port}"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    driver = None
    try:
        def up():
            try:
                return urllib.request.urlopen(base + "/login", timeout=2).status == 200
            except OSError:
                return False
        wait_for(up, "paravault web to listen", 30)
        driver = browser(profile)
        anyio.run(flow, base, vault, env, driver)
    except Exception as error:  # noqa: BLE001 - report any failure as the flow's failure
        # anyio wraps a failure inside the MCP session's task group: name the real one.
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        print(f"FAIL {type(error).__name__}: {error}", flush=True)
        if driver is not None:
            driver.save_screenshot(os.path.join(SHOTS, "failure.png"))
        return 1
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    print("ALL PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
