//! Markdown facts of a note body, from one pulldown-cmark pass: links, embeds, and the
//! Markdown style findings (links of a body whose only link syntax is `[text](<destination>)`,
//! as catalog pages are rendered, by a plain scan equal to the parser's reading). Code spans
//! and fenced/indented code are never scanned for links.
//! Pure: no I/O.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd};

/// What kind of reference a link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum LinkKind {
    /// `[[target]]`, `[[target|alias]]`, `[[target#heading]]`.
    Wiki,
    /// `![[file]]`.
    Embed,
    /// `[text](path)` or `![alt](path)` to a local file.
    Markdown,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Wiki => "wikilink",
            LinkKind::Embed => "embed",
            LinkKind::Markdown => "markdown",
        }
    }
}

/// One outgoing reference, with its target stripped of alias, heading and query.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Link {
    pub kind: LinkKind,
    pub target: String,
    /// 1-based line within the note.
    pub line: usize,
}

/// A Markdown style finding (never blocking by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StyleFinding {
    pub rule: &'static str,
    pub line: usize,
    pub message: String,
}

/// Byte offset → 1-based line number.
struct Lines {
    starts: Vec<usize>,
    first_line: usize,
}

impl Lines {
    fn new(body: &str, first_line: usize) -> Self {
        let mut starts = vec![0];
        starts.extend(body.match_indices('\n').map(|(i, _)| i + 1));
        Lines { starts, first_line }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset) - 1 + self.first_line
    }
}

fn has_scheme(target: &str) -> bool {
    match target.split_once(':') {
        Some((scheme, _)) => {
            scheme.len() > 1
                && scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// A wikilink's or an embed's target: its destination without alias, heading and block id.
pub fn wiki_target(dest: &str) -> String {
    let dest = dest.split('|').next().unwrap_or(dest);
    let dest = dest.split('#').next().unwrap_or(dest);
    dest.split('^').next().unwrap_or(dest).trim().to_string()
}

fn markdown_target(dest: &str) -> Option<String> {
    let dest = dest.trim();
    if dest.is_empty() || dest.starts_with('#') || dest.starts_with("//") || has_scheme(dest) {
        return None;
    }
    let dest = dest.split(['#', '?']).next().unwrap_or(dest);
    let decoded = percent_encoding::percent_decode_str(dest).decode_utf8().map_or_else(|_| dest.to_string(), |d| d.into_owned());
    (!decoded.is_empty()).then_some(decoded)
}

fn options() -> Options {
    Options::ENABLE_WIKILINKS | Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// Extracts every outgoing link of a body. `first_line` is the note line of the body's first line.
pub fn links(body: &str, first_line: usize) -> Vec<Link> {
    plain_links(body, first_line).unwrap_or_else(|| parsed_links(body, first_line))
}

/// `links` read without a Markdown parser, for a body whose only link syntax is inline links
/// written `[text](<destination>)` (the form catalog pages are rendered in: a 20 KiB page took
/// pulldown-cmark ~0.4 ms, issue 52); `None` for any other body, which the parser reads.
///
/// Equal to `parsed_links` wherever it answers
/// (`note::body::tests::plain_links_are_the_parsers_links`), because it answers only where
/// nothing else can start or hide a link: no backslash (escapes), backtick (code), `|`
/// (tables), tab or line indented four spaces (indented code), `~~~` fence, carriage return
/// or NUL anywhere; no `<`, `>`, `[` or `]` outside those links (autolinks, raw HTML,
/// wikilinks, images, reference links, task boxes); no `!` before a link (an image); and the
/// link text and destination hold none of them, nor a line break, nor `&` in the
/// destination (entities), so the destination is the text between the angle brackets.
fn plain_links(body: &str, first_line: usize) -> Option<Vec<Link>> {
    let b = body.as_bytes();
    if b.iter().any(|&c| matches!(c, b'\\' | b'`' | b'|' | b'\t' | b'\r' | 0)) {
        return None;
    }
    for line in body.split('\n') {
        let unindented = line.trim_start_matches(' ');
        if (line.len() - unindented.len() >= 4 && !unindented.is_empty()) || unindented.starts_with("~~~") {
            return None;
        }
    }
    let mut out = Vec::new();
    let mut lines = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'[' => {
                if i > 0 && b[i - 1] == b'!' {
                    return None;
                }
                let close = i + 1 + b[i + 1..].iter().position(|&c| matches!(c, b']' | b'[' | b'<' | b'>' | b'\n'))?;
                if b[close] != b']' || !b[close + 1..].starts_with(b"(<") {
                    return None;
                }
                let from = close + 3;
                let to = from + b[from..].iter().position(|&c| matches!(c, b'>' | b'<' | b'[' | b']' | b'\n' | b'&'))?;
                if b[to] != b'>' || b.get(to + 1) != Some(&b')') {
                    return None;
                }
                if let Some(target) = markdown_target(&body[from..to]) {
                    let lines = lines.get_or_insert_with(|| Lines::new(body, first_line));
                    out.push(Link { kind: LinkKind::Markdown, target, line: lines.line_of(i) });
                }
                i = to + 2;
            }
            b']' | b'<' | b'>' => return None,
            _ => i += 1,
        }
    }
    Some(out)
}

/// `links` as pulldown-cmark parses the body.
fn parsed_links(body: &str, first_line: usize) -> Vec<Link> {
    let lines = Lines::new(body, first_line);
    let mut out = Vec::new();
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        let (kind, dest, link_type) = match event {
            Event::Start(Tag::Link { link_type, dest_url, .. }) => {
                let kind = if matches!(link_type, LinkType::WikiLink { .. }) { LinkKind::Wiki } else { LinkKind::Markdown };
                (kind, dest_url, link_type)
            }
            Event::Start(Tag::Image { link_type, dest_url, .. }) => {
                let kind = if matches!(link_type, LinkType::WikiLink { .. }) { LinkKind::Embed } else { LinkKind::Markdown };
                (kind, dest_url, link_type)
            }
            _ => continue,
        };
        if matches!(link_type, LinkType::Autolink | LinkType::Email) {
            continue;
        }
        let target = match kind {
            LinkKind::Wiki | LinkKind::Embed => Some(wiki_target(&dest)).filter(|t| !t.is_empty()),
            LinkKind::Markdown => markdown_target(&dest),
        };
        if let Some(target) = target {
            out.push(Link { kind, target, line: lines.line_of(range.start) });
        }
    }
    out
}

/// External `http`/`https` link destinations (inline, reference and autolinks), with their
/// 1-based line, in order of appearance. Links inside code are not links.
pub(crate) fn external_urls(body: &str, first_line: usize) -> Vec<(String, usize)> {
    let lines = Lines::new(body, first_line);
    let mut out = Vec::new();
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        let dest = match event {
            Event::Start(Tag::Link { link_type, dest_url, .. }) | Event::Start(Tag::Image { link_type, dest_url, .. })
                if !matches!(link_type, LinkType::WikiLink { .. } | LinkType::Email) =>
            {
                dest_url
            }
            _ => continue,
        };
        let lower = dest.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            out.push((dest.to_string(), lines.line_of(range.start)));
        }
    }
    out
}

fn heading_number(level: HeadingLevel) -> usize {
    level as usize
}

/// The Markdown style checks: trailing whitespace, mixed list markers at one indent, heading
/// level jumps, fenced code without a language.
pub(crate) fn style_findings(body: &str, first_line: usize) -> Vec<StyleFinding> {
    let lines = Lines::new(body, first_line);
    let mut out = Vec::new();
    for (i, line) in body.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.ends_with([' ', '\t']) {
            out.push(StyleFinding { rule: "trailing-whitespace", line: first_line + i, message: "line ends with whitespace".into() });
        }
    }
    let mut max_level = 0usize;
    let mut markers: std::collections::BTreeMap<usize, (char, usize)> = std::collections::BTreeMap::new();
    let mut mixed_reported = std::collections::BTreeSet::new();
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                let n = heading_number(level);
                if max_level > 0 && n > max_level + 1 {
                    out.push(StyleFinding {
                        rule: "header-jump",
                        line: lines.line_of(range.start),
                        message: format!("heading level {n} follows level {max_level}"),
                    });
                }
                max_level = max_level.max(n);
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) if info.trim().is_empty() => {
                out.push(StyleFinding {
                    rule: "missing-code-language",
                    line: lines.line_of(range.start),
                    message: "fenced code block has no language".into(),
                });
            }
            Event::Start(Tag::Item) => {
                let line_start = lines.starts[lines.line_of(range.start) - first_line];
                let indent = range.start - line_start;
                let marker = body[range.start..].chars().next().unwrap_or(' ');
                if matches!(marker, '-' | '*' | '+') {
                    let line = lines.line_of(range.start);
                    match markers.get(&indent) {
                        Some(&(seen, seen_line)) if seen != marker && mixed_reported.insert(indent) => {
                            out.push(StyleFinding {
                                rule: "inconsistent-list-markers",
                                line,
                                message: format!("list marker '{marker}' mixed with '{seen}' (line {seen_line}) at indent {indent}"),
                            });
                        }
                        Some(_) => {}
                        None => {
                            markers.insert(indent, (marker, line));
                        }
                    }
                }
            }
            Event::End(TagEnd::Heading(_)) | Event::End(_) | Event::Start(_) | Event::Text(_) => {}
            _ => {}
        }
    }
    out.sort_by_key(|f| f.line);
    out
}

/// The body's headings (level, text), for chunking and catalogs.
pub fn headings(body: &str) -> Vec<(usize, String, usize)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String, usize)> = None;
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => current = Some((heading_number(level), String::new(), range.start)),
            Event::Text(text) | Event::Code(text) => {
                if let Some((_, buffer, _)) = current.as_mut() {
                    buffer.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => out.extend(current.take()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
