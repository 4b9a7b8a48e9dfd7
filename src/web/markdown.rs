//! Note bodies as Obsidian users write them, rendered to sanitised HTML: `[[wikilinks]]` (with
//! alias and heading) as links resolved by the engine (`Vault::resolve_wikilinks`), broken and
//! ambiguous ones marked; `![[embeds]]` of images (served by `/file/…`) and of notes (a bounded
//! excerpt, never expanded further); `- [ ]` / `- [x]` as disabled checkboxes; `> [!type]
//! Title` callouts; footnotes; `#tags` as links to the tag view. Raw HTML in the Markdown is
//! turned into text first, and ammonia then keeps only the tags, attributes and classes listed
//! in `sanitizer` (every id is a footnote's, every input a disabled checkbox).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use maud::{Markup, PreEscaped, html};
use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd, TextMergeStream};

use crate::api::note::wiki_target;
use crate::vault::LinkTarget;

/// Image types an embed shows (and `/file/…` serves, with this content type).
pub(crate) const IMAGE_TYPES: [(&str, &str); 6] = [
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
];

/// Callout families (the CSS colours them); every Obsidian callout type maps to one.
const CALLOUTS: [(&str, &str); 27] = [
    ("note", "note"),
    ("abstract", "note"),
    ("summary", "note"),
    ("tldr", "note"),
    ("info", "note"),
    ("todo", "note"),
    ("tip", "tip"),
    ("hint", "tip"),
    ("important", "tip"),
    ("success", "tip"),
    ("check", "tip"),
    ("done", "tip"),
    ("question", "warning"),
    ("help", "warning"),
    ("faq", "warning"),
    ("warning", "warning"),
    ("caution", "warning"),
    ("attention", "warning"),
    ("failure", "danger"),
    ("fail", "danger"),
    ("missing", "danger"),
    ("danger", "danger"),
    ("error", "danger"),
    ("bug", "danger"),
    ("example", "quote"),
    ("quote", "quote"),
    ("cite", "quote"),
];

/// How a note's links resolved and the excerpts of the notes it embeds.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    /// (target, embed?) → where it leads. A target missing here is shown as text, unresolved.
    pub targets: HashMap<(String, bool), LinkTarget>,
    /// Embedded note path → the start of its body (Markdown), already bounded.
    pub excerpts: HashMap<String, String>,
}

/// The wikilink and embed targets of a body, each once, in order (`true` for an embed).
pub(crate) fn wiki_targets(markdown: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for event in Parser::new_ext(markdown, options()) {
        let (embed, dest) = match event {
            Event::Start(Tag::Link { link_type: LinkType::WikiLink { .. }, dest_url, .. }) => (false, dest_url),
            Event::Start(Tag::Image { link_type: LinkType::WikiLink { .. }, dest_url, .. }) => (true, dest_url),
            _ => continue,
        };
        let target = wiki_target(&dest);
        if !target.is_empty() && !out.iter().any(|(t, e)| *t == target && *e == embed) {
            out.push((target, embed));
        }
    }
    out
}

fn options() -> Options {
    Options::ENABLE_WIKILINKS
        | Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
}

/// What a URL's path component percent-encodes: all but letters, digits and `-._~` (RFC 3986's
/// unreserved characters).
const COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The URL of a vault path under `prefix` (each component percent-encoded).
pub(crate) fn path_url(prefix: &str, path: &str) -> String {
    let encoded: Vec<String> = path.split('/').map(|c| percent_encoding::utf8_percent_encode(c, COMPONENT).to_string()).collect();
    format!("{prefix}/{}", encoded.join("/"))
}

/// The tag view's URL of `tag`.
pub(crate) fn tag_url(tag: &str) -> String {
    format!("/tags/{}", percent_encoding::utf8_percent_encode(&crate::vault::tag_key(tag), percent_encoding::NON_ALPHANUMERIC))
}

/// A search for `text`.
pub(crate) fn search_url(text: &str) -> String {
    format!("/search?q={}", percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC))
}

/// Whether `path` names an image an embed shows.
pub(crate) fn image_type(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.')?.1.to_lowercase();
    IMAGE_TYPES.iter().find(|(e, _)| *e == extension).map(|(_, t)| *t)
}

fn tag_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '/')
}

/// Splits text into plain runs and `#tags` (after the start or whitespace; at least one
/// character that is no digit, as Obsidian has it).
fn split_tags(text: &str) -> Vec<(bool, &str)> {
    let mut out = Vec::new();
    let mut plain_start = 0;
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '#' && previous.is_none_or(char::is_whitespace) {
            let rest = &text[i + 1..];
            let len: usize = rest.chars().take_while(|&c| tag_char(c)).map(char::len_utf8).sum();
            let tag = rest[..len].trim_end_matches('/');
            if tag.chars().any(|c| !c.is_ascii_digit()) {
                if plain_start < i {
                    out.push((false, &text[plain_start..i]));
                }
                out.push((true, &text[i..i + 1 + tag.len()]));
                plain_start = i + 1 + tag.len();
                while chars.peek().is_some_and(|(j, _)| *j < plain_start) {
                    chars.next();
                }
                previous = text[..plain_start].chars().next_back();
                continue;
            }
        }
        previous = Some(c);
    }
    if plain_start < text.len() {
        out.push((false, &text[plain_start..]));
    }
    out
}

/// `[!type]` (with an optional fold marker) and the title after it, from a callout's first line.
fn callout_head(text: &str) -> Option<(&'static str, String)> {
    let rest = text.strip_prefix("[!")?;
    let (kind, after) = rest.split_once(']')?;
    if kind.is_empty() || !kind.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_') {
        return None;
    }
    let kind = kind.to_lowercase();
    let family = CALLOUTS.iter().find(|(k, _)| *k == kind).map_or("note", |(_, f)| *f);
    let title = after.trim_start_matches(['+', '-']).trim();
    let title = if title.is_empty() {
        let mut chars = kind.chars();
        chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
    } else {
        title.to_string()
    };
    Some((family, title))
}

fn html_event(markup: Markup) -> Event<'static> {
    Event::Html(CowStr::from(markup.into_string()))
}

/// A body as sanitised HTML, its links resolved by `resolved`. A note embedded in another is
/// rendered with `nested` (its embeds shown as text, its footnotes without ids).
pub(crate) fn render(markdown: &str, resolved: &Resolved, nested: bool) -> Markup {
    let events: Vec<Event> = TextMergeStream::new(Parser::new_ext(markdown, options()).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    }))
    .collect();
    let mut footnotes: Vec<String> = Vec::new();
    let mut number = |label: &str| -> usize {
        match footnotes.iter().position(|l| l == label) {
            Some(i) => i + 1,
            None => {
                footnotes.push(label.to_string());
                footnotes.len()
            }
        }
    };
    let mut referenced: Vec<usize> = Vec::new();
    let mut out: Vec<Event> = Vec::with_capacity(events.len());
    // Per open blockquote: whether it is a callout (closed by `</div>`).
    let mut quotes: Vec<bool> = Vec::new();
    // Per open link: the closing markup a wikilink needs instead of `</a>`.
    let mut links: Vec<Option<&'static str>> = Vec::new();
    let mut definitions: Vec<usize> = Vec::new();
    let mut code = 0usize;
    let mut i = 0;
    while i < events.len() {
        let event = &events[i];
        i += 1;
        match event {
            Event::Start(Tag::BlockQuote(_)) => {
                let head = match (events.get(i), events.get(i + 1)) {
                    (Some(Event::Start(Tag::Paragraph)), Some(Event::Text(text))) => callout_head(text),
                    _ => None,
                };
                match head {
                    Some((family, title)) => {
                        quotes.push(true);
                        let class = format!("callout callout-{family}");
                        out.push(html_event(html! { div class=(class) { p.callout-title { (title) } } }));
                        // The closing `</div>` comes at the blockquote's end: drop it here.
                        if let Some(Event::Html(opened)) = out.last_mut() {
                            let open = opened.trim_end_matches("</div>").to_string();
                            *opened = CowStr::from(open);
                        }
                        // Skip the title line: the paragraph goes on after its line break.
                        i += 2;
                        if matches!(events.get(i), Some(Event::SoftBreak | Event::HardBreak)) {
                            i += 1;
                        }
                        if matches!(events.get(i), Some(Event::End(TagEnd::Paragraph))) {
                            i += 1;
                        } else {
                            out.push(Event::Start(Tag::Paragraph));
                        }
                    }
                    None => {
                        quotes.push(false);
                        out.push(event.clone());
                    }
                }
            }
            Event::End(TagEnd::BlockQuote(_)) => {
                if quotes.pop() == Some(true) {
                    out.push(Event::Html(CowStr::from("</div>")));
                } else {
                    out.push(event.clone());
                }
            }
            Event::Start(Tag::CodeBlock(_)) => {
                code += 1;
                out.push(event.clone());
            }
            Event::End(TagEnd::CodeBlock) => {
                code = code.saturating_sub(1);
                out.push(event.clone());
            }
            Event::Start(Tag::Link { link_type: LinkType::WikiLink { .. }, dest_url, .. }) => {
                let target = wiki_target(dest_url);
                match resolved.targets.get(&(target.clone(), false)) {
                    Some(LinkTarget::Note(path)) => {
                        links.push(None);
                        out.push(html_event(html! { a.wikilink href=(path_url("/note", path)) {} }));
                    }
                    Some(LinkTarget::File(path)) => {
                        links.push(None);
                        out.push(html_event(html! { a.wikilink href=(path_url("/file", path)) {} }));
                    }
                    Some(LinkTarget::Broken) => {
                        links.push(None);
                        let title = format!("Broken link: no note named “{target}” in the vault");
                        out.push(html_event(html! { a.wikilink.broken href=(search_url(&target)) title=(title) {} }));
                    }
                    Some(LinkTarget::Ambiguous(paths)) => {
                        links.push(None);
                        let title = format!("Ambiguous link: {} notes are named “{target}” ({})", paths.len(), paths.join(", "));
                        out.push(html_event(html! { a.wikilink.broken href=(search_url(&target)) title=(title) {} }));
                    }
                    None => {
                        links.push(Some("</span>"));
                        out.push(html_event(html! { span.wikilink {} }));
                    }
                }
                // The opening tags above were rendered closed: reopen them.
                if let Some(Event::Html(opened)) = out.last_mut() {
                    let open = opened.trim_end_matches("</a>").trim_end_matches("</span>").to_string();
                    *opened = CowStr::from(open);
                }
            }
            Event::Start(Tag::Link { .. }) => {
                links.push(None);
                out.push(event.clone());
            }
            Event::End(TagEnd::Link) => match links.pop().flatten() {
                Some(close) => out.push(Event::Html(CowStr::from(close))),
                None => out.push(event.clone()),
            },
            Event::Start(Tag::Image { link_type: LinkType::WikiLink { .. }, dest_url, .. }) => {
                // The image's inner events are its text: gather them, up to its end.
                let mut alt = String::new();
                let mut depth = 1usize;
                while let Some(inner) = events.get(i) {
                    i += 1;
                    match inner {
                        Event::Start(Tag::Image { .. }) => depth += 1,
                        Event::End(TagEnd::Image) => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        Event::Text(text) | Event::Code(text) => alt.push_str(text),
                        _ => {}
                    }
                }
                let target = wiki_target(dest_url);
                out.push(html_event(embed(&target, &alt, resolved.targets.get(&(target.clone(), true)), resolved, nested)));
            }
            Event::Text(text) if code == 0 && links.is_empty() && text.contains('#') => {
                for (is_tag, piece) in split_tags(text) {
                    if is_tag {
                        out.push(html_event(html! { a.tag href=(tag_url(&piece[1..])) { (piece) } }));
                    } else {
                        out.push(Event::Text(CowStr::from(piece.to_string())));
                    }
                }
            }
            Event::TaskListMarker(done) => {
                let label = if *done { "done" } else { "to do" };
                out.push(html_event(html! { input type="checkbox" disabled checked[*done] aria-label=(label); }));
            }
            Event::FootnoteReference(label) => {
                let n = number(label);
                let first = !nested && !referenced.contains(&n);
                referenced.push(n);
                let href = format!("#fn-{n}");
                out.push(html_event(html! { sup.fnref { a href=(href) id=[first.then(|| format!("fnref-{n}"))] { (n) } } }));
            }
            Event::Start(Tag::FootnoteDefinition(label)) => {
                let n = number(label);
                definitions.push(n);
                let id = (!nested).then(|| format!("fn-{n}"));
                out.push(html_event(html! { div.footnote id=[id] { span.fnlabel { (n) "." } } }));
                if let Some(Event::Html(opened)) = out.last_mut() {
                    let open = opened.trim_end_matches("</div>").to_string();
                    *opened = CowStr::from(open);
                }
            }
            Event::End(TagEnd::FootnoteDefinition) => {
                let n = definitions.pop().unwrap_or(0);
                let back = (!nested && referenced.contains(&n)).then(|| format!("#fnref-{n}"));
                out.push(html_event(html! {
                    @if let Some(back) = back { a.fnback href=(back) aria-label="back to the reference" { "↩" } }
                }));
                out.push(Event::Html(CowStr::from("</div>")));
            }
            other => out.push(other.clone()),
        }
    }
    let mut unsafe_html = String::new();
    pulldown_cmark::html::push_html(&mut unsafe_html, out.into_iter());
    PreEscaped(SANITIZER.clean(&unsafe_html).to_string())
}

/// An embed: an image of the vault, a note's excerpt, or text saying why it shows nothing.
fn embed(target: &str, alt: &str, found: Option<&LinkTarget>, resolved: &Resolved, nested: bool) -> Markup {
    let label = if alt.is_empty() { target } else { alt };
    match found {
        Some(LinkTarget::File(path)) if image_type(path).is_some() => {
            html! { img.embed-image src=(path_url("/file", path)) alt=(label); }
        }
        Some(LinkTarget::File(path)) => html! { a.wikilink href=(path_url("/file", path)) { (label) } },
        Some(LinkTarget::Note(path)) if !nested => match resolved.excerpts.get(path) {
            Some(excerpt) => html! {
                div.embed {
                    p.embed-title { a.wikilink href=(path_url("/note", path)) { (path) } }
                    (render(excerpt, &Resolved::default(), true))
                }
            },
            None => html! { a.wikilink href=(path_url("/note", path)) { (label) } },
        },
        Some(LinkTarget::Note(path)) => html! { a.wikilink href=(path_url("/note", path)) { (label) } },
        Some(LinkTarget::Broken) => {
            let title = format!("Broken embed: no file named “{target}” in the vault");
            html! { span.wikilink.broken title=(title) { "![[" (label) "]]" } }
        }
        Some(LinkTarget::Ambiguous(paths)) => {
            let title = format!("Ambiguous embed: {} files are named “{target}”", paths.len());
            html! { span.wikilink.broken title=(title) { "![[" (label) "]]" } }
        }
        None => html! { span.wikilink { "![[" (label) "]]" } },
    }
}

/// Whether `value` is an id the renderer gives (a footnote's or its reference's).
fn footnote_id(value: &str) -> bool {
    let digits = value.strip_prefix("fnref-").or_else(|| value.strip_prefix("fn-"));
    digits.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The sanitiser: ammonia's harmless tags and http(s)/mailto URLs, plus the renderer's own
/// classes, footnote ids and disabled checkboxes; nothing else.
static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::default();
    builder
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .add_tags(["input"])
        .add_tag_attributes("input", ["type", "checked", "disabled", "aria-label"])
        .add_tag_attributes("a", ["id", "aria-label"])
        .add_tag_attributes("div", ["id"])
        .add_allowed_classes("a", ["wikilink", "broken", "tag", "fnback"])
        .add_allowed_classes("span", ["wikilink", "broken", "fnlabel"])
        .add_allowed_classes(
            "div",
            ["callout", "callout-note", "callout-tip", "callout-warning", "callout-danger", "callout-quote", "embed", "footnote"],
        )
        .add_allowed_classes("p", ["callout-title", "embed-title"])
        .add_allowed_classes("sup", ["fnref"])
        .add_allowed_classes("img", ["embed-image"])
        .attribute_filter(|element, attribute, value| match (element, attribute) {
            ("input", "type") => (value == "checkbox").then_some(Cow::Borrowed(value)),
            ("input", "disabled") => Some(Cow::Borrowed("")),
            (_, "id") => footnote_id(value).then_some(Cow::Borrowed(value)),
            _ => Some(Cow::Borrowed(value)),
        });
    builder
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_need_a_boundary_before_and_a_character_that_is_no_digit() {
        assert_eq!(split_tags("a #tag b"), vec![(false, "a "), (true, "#tag"), (false, " b")]);
        assert_eq!(split_tags("#x/y-z."), vec![(true, "#x/y-z"), (false, ".")]);
        assert_eq!(split_tags("C# #1 page#frag"), vec![(false, "C# #1 page#frag")]);
        assert_eq!(split_tags("#a #b"), vec![(true, "#a"), (false, " "), (true, "#b")]);
    }

    #[test]
    fn callout_heads_map_types_to_families_and_default_the_title() {
        assert_eq!(callout_head("[!WARNING]- Careful"), Some(("warning", "Careful".to_string())));
        assert_eq!(callout_head("[!tip]"), Some(("tip", "Tip".to_string())));
        assert_eq!(callout_head("[!custom] x"), Some(("note", "x".to_string())));
        assert_eq!(callout_head("[!a b] x"), None);
        assert_eq!(callout_head("[x] y"), None);
    }
}
