//! YAML frontmatter: split a note into frontmatter and body, parse it, render it back.
//!
//! The split keeps the exact bytes of every part, so rendering an unchanged parse reproduces the
//! original file byte for byte (CRLF, BOM, quoting and key order included). Never does I/O.

use serde_yaml::{Mapping, Value};

/// How a note's text failed to yield a frontmatter mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrontmatterProblem {
    /// The text does not start with a `---` line.
    Missing,
    /// A `---` opening line without a closing `---` (or `...`) line.
    Unterminated,
    /// The YAML does not parse; `line` is 1-based within the note.
    Yaml { line: usize, message: String },
    /// The YAML parses but is not a mapping.
    NotAMapping { found: &'static str },
    /// A changed mapping cannot be written back as YAML (e.g. a tagged or mapping key).
    Unrenderable { message: String },
}

impl std::fmt::Display for FrontmatterProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrontmatterProblem::Missing => f.write_str("no YAML frontmatter block (the note must start with a '---' line)"),
            FrontmatterProblem::Unterminated => f.write_str("the frontmatter block has no closing '---' line"),
            FrontmatterProblem::Yaml { line, message } => write!(f, "malformed YAML at line {line}: {message}"),
            FrontmatterProblem::NotAMapping { found } => write!(f, "frontmatter is a {found}, not a mapping of keys to values"),
            FrontmatterProblem::Unrenderable { message } => write!(f, "the frontmatter cannot be written as YAML: {message}"),
        }
    }
}

/// The byte layout of a note: `[bom][open line][yaml][close line][body]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    pub bom: bool,
    pub open: &'a str,
    pub yaml: &'a str,
    pub close: &'a str,
    pub body: &'a str,
    /// 1-based line number of the first YAML line.
    pub yaml_first_line: usize,
    /// 1-based line number of the first body line.
    pub body_first_line: usize,
}

/// A parsed frontmatter block that remembers its source text.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontmatter {
    pub mapping: Mapping,
    /// The exact text between the delimiters, used to render an unchanged block byte-identically.
    source_yaml: String,
}

fn is_delimiter(line: &str, marker: &str) -> bool {
    let trimmed = line.trim_end_matches(['\n', '\r']);
    trimmed.strip_prefix(marker).is_some_and(|rest| rest.chars().all(|c| c == ' ' || c == '\t'))
}

/// Splits the note text. A missing frontmatter block is `Missing`; no closing line is
/// `Unterminated`. A closing `---` at end of file without a newline is accepted.
pub fn split(text: &str) -> Result<Split<'_>, FrontmatterProblem> {
    let (bom, rest) = match text.strip_prefix('\u{feff}') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let open_len = rest.find('\n').map_or(rest.len(), |i| i + 1);
    let open = &rest[..open_len];
    if !is_delimiter(open, "---") {
        return Err(FrontmatterProblem::Missing);
    }
    let mut offset = open_len;
    let mut line_no = 2;
    while offset < rest.len() {
        let line_len = rest[offset..].find('\n').map_or(rest.len() - offset, |i| i + 1);
        let line = &rest[offset..offset + line_len];
        if is_delimiter(line, "---") || is_delimiter(line, "...") {
            return Ok(Split {
                bom,
                open,
                yaml: &rest[open_len..offset],
                close: line,
                body: &rest[offset + line_len..],
                yaml_first_line: 2,
                body_first_line: line_no + 1,
            });
        }
        offset += line_len;
        line_no += 1;
    }
    Err(FrontmatterProblem::Unterminated)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Sequence(_) => "list",
        Value::Mapping(_) => "mapping",
        Value::Tagged(_) => "tagged value",
    }
}

/// Parses the YAML of a split note into a mapping. An empty block (only YAML whitespace:
/// space, tab, CR, LF) is an empty mapping.
pub fn parse(split: &Split<'_>) -> Result<Frontmatter, FrontmatterProblem> {
    let yaml = split.yaml;
    // Not `str::trim`: Unicode whitespace such as U+00A0 is content to YAML, and a block
    // taken as empty here must also re-read as empty in `yaml_text` to render byte-identically.
    if yaml.trim_matches([' ', '\t', '\r', '\n']).is_empty() {
        return Ok(Frontmatter { mapping: Mapping::new(), source_yaml: yaml.to_string() });
    }
    check_nesting(yaml, split.yaml_first_line)?;
    if let Some(mapping) = LAST_PARSED.with(|last| last.borrow().as_ref().filter(|(text, _)| text == yaml).map(|(_, m)| m.clone())) {
        return Ok(Frontmatter { mapping, source_yaml: yaml.to_string() });
    }
    let value: Value = serde_yaml::from_str(yaml).map_err(|e| FrontmatterProblem::Yaml {
        line: e.location().map_or(split.yaml_first_line, |l| l.line() + split.yaml_first_line - 1),
        message: yaml_message(&e),
    })?;
    match value {
        Value::Mapping(mapping) => {
            LAST_PARSED.with(|last| *last.borrow_mut() = Some((yaml.to_string(), mapping.clone())));
            Ok(Frontmatter { mapping, source_yaml: yaml.to_string() })
        }
        other => Err(FrontmatterProblem::NotAMapping { found: kind_of(&other) }),
    }
}

/// Deepest flow-collection nesting (`[` / `{`) a frontmatter block may have. Real notes nest
/// two or three levels; the YAML parser's time grows with the square of the depth (100k levels:
/// 22 s), so a deeper block is refused before it is parsed.
pub(crate) const FLOW_DEPTH_MAX: usize = 32;

/// Most compact block indicators (`- - - x`, `? ? x`) one line may open, for the same reason.
pub(crate) const COMPACT_INDICATORS_MAX: usize = 32;

/// A cheap, linear pre-scan that refuses a block whose nesting would make the YAML parser's
/// work blow up, before it is parsed. It counts a `[` / `{` only where the parser could read
/// it as opening a flow collection: never inside a quoted scalar, a comment or a block-context
/// plain scalar, including a plain scalar's continuation lines (serde_yaml's emitter wraps long
/// plain values onto lines indented deeper than their key). Where the parser's reading is
/// uncertain, the scan counts (it may refuse a valid block, never pass a bomb).
fn check_nesting(yaml: &str, first_line: usize) -> Result<(), FrontmatterProblem> {
    let refuse = |line: usize, message: String| FrontmatterProblem::Yaml { line: first_line + line, message };
    // The parser also breaks lines at a lone CR, NEL, LS and PS: the scan reads them as `\n`.
    let normalized;
    let yaml = if yaml.contains(['\r', '\u{85}', '\u{2028}', '\u{2029}']) {
        normalized = yaml.replace("\r\n", "\n").replace(['\r', '\u{85}', '\u{2028}', '\u{2029}'], "\n");
        normalized.as_str()
    } else {
        yaml
    };
    // Bytes, not chars: every byte that matters is ASCII, and UTF-8 continuation bytes never are.
    let bytes = yaml.as_bytes();
    let (mut depth, mut line, mut compact) = (0usize, 0usize, 0usize);
    let (mut single, mut double, mut comment, mut escaped, mut line_start) = (false, false, false, false, true);
    // `previous`: the byte before; `significant`: the last byte that was not a space or tab
    // (a quote or a plain scalar starts only where a node may start).
    let (mut previous, mut significant) = (b'\n', b'\n');
    // Columns on the current line: `column` of this byte, `indent` (leading spaces), `node`
    // (the first byte after the compact indicators: a key's column), `indicator` (the last
    // `- ` / `? `'s column).
    let (mut column, mut indent, mut node, mut indicator) = (0usize, 0usize, 0usize, 0usize);
    // `plain`: inside a block-context plain scalar on this line; `continues`: the column a line
    // must be indented past to continue the plain scalar the previous line ended inside.
    let (mut plain, mut continues): (bool, Option<usize>) = (false, None);
    let mut plain_from: Option<usize> = None;
    // A block scalar (`|` / `>`): `block_header` is the column its lines must be indented past,
    // set on its header line; `block` holds it and, once the first content line is seen, that
    // line's indent (later lines indented less end the scalar). Its lines are text.
    // A header with an indentation indicator (`|2-`, `>-1`) fixes the content's indent at
    // `from` plus the digit, whatever the first line's indent (which may then hold spaces).
    type BlockIndent = (usize, Option<usize>);
    let (mut block_header, mut block): (Option<BlockIndent>, Option<BlockIndent>) = (None, None);
    // The line opened with `: ` (an explicit key's value) and no node has started after it.
    let mut explicit_value = false;
    // Inside a node's tag or anchor (`!t `, `&a `), which ends at a space: the node itself
    // starts after it, so its bytes neither start a scalar nor end the place a node may start.
    let mut property = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            if !single && !double {
                significant = b'\n';
                // A line ending inside a plain scalar may be continued by deeper lines; a blank
                // line keeps the continuation open.
                if let Some(header) = block_header.take() {
                    block = Some(header);
                }
                continues = match (plain, plain_from) {
                    (true, Some(from)) => Some(from),
                    _ if line_start => continues,
                    _ => None,
                };
            }
            (line, comment, line_start, compact, previous) = (line + 1, false, true, 0, b);
            (column, indent, plain, plain_from, explicit_value, property) = (0, 0, false, None, false, false);
            continue;
        }
        let at = column;
        column += 1;
        if line_start && !single && !double {
            if b == b' ' && compact == 0 && indent == at {
                indent += 1;
                previous = b;
                continue;
            }
            if let Some((from, content)) = block
                && compact == 0
                && b != b'\t'
            {
                if content.map_or(indent > from, |c| indent >= c) {
                    // A line of the block scalar: text to its end.
                    block = Some((from, Some(content.unwrap_or(indent))));
                    (line_start, comment) = (false, true);
                    previous = b;
                    continue;
                }
                block = None;
            }
            if let Some(from) = continues
                && compact == 0
                && indent > from
                && b != b'\t'
            {
                // A continuation line of a multi-line plain scalar: its brackets are text.
                (line_start, plain, plain_from) = (false, true, Some(from));
            } else {
                // `- ` and `? ` open a block entry, `: ` an explicit key's value.
                let is_indicator = matches!(b, b'-' | b'?' | b':') && matches!(bytes.get(i + 1), None | Some(b' ' | b'\t' | b'\r' | b'\n'));
                if b == b' ' || b == b'\t' || is_indicator {
                    if is_indicator {
                        (significant, indicator, explicit_value) = (b, at, b == b':');
                        compact += 1;
                        if compact > COMPACT_INDICATORS_MAX {
                            return Err(refuse(line, format!("a line opens more than {COMPACT_INDICATORS_MAX} nested block collections")));
                        }
                    }
                    previous = b;
                    continue;
                }
                (line_start, node, continues) = (false, at, None);
            }
        }
        if comment {
            continue;
        }
        if property {
            property = !matches!(b, b' ' | b'\t' | b'\r');
            previous = b;
            continue;
        }
        if double {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => double = false,
                _ => {}
            }
        } else if single {
            // `''` is a quote inside a single-quoted scalar, not its end.
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\'') if bytes.get(i + 1) == Some(&b'\'') => escaped = true,
                (false, b'\'') => single = false,
                _ => {}
            }
        } else if plain {
            match b {
                b'#' if previous == b' ' || previous == b'\t' => (comment, plain, plain_from) = (true, false, None),
                // `key: value`: the plain scalar was a key; a value may start after it.
                b':' if matches!(bytes.get(i + 1), None | Some(b' ' | b'\t' | b'\r' | b'\n')) => (plain, plain_from) = (false, None),
                _ => {}
            }
        } else {
            let node_start = matches!(significant, b'\n' | b':' | b'-' | b'?' | b'[' | b'{' | b',');
            // The column a scalar starting here must have its further lines indented past: its
            // key's (after a key's `:`), its `- ` / `? ` / `: ` indicator's, or its own.
            let from = match significant {
                b':' if explicit_value => indicator,
                b':' => node,
                b'-' | b'?' => indicator,
                _ => at,
            };
            match b {
                b'#' if previous.is_ascii_whitespace() => comment = true,
                b'"' if node_start => double = true,
                b'\'' if node_start => single = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > FLOW_DEPTH_MAX {
                        return Err(refuse(line, format!("flow collections nest deeper than {FLOW_DEPTH_MAX} levels")));
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                b' ' | b'\t' | b'\r' => {}
                // A block scalar's header: the lines after it, indented past `from`, are text.
                b'|' | b'>' if depth == 0 && matches!(significant, b'\n' | b':' | b'-' | b'?') => {
                    // The chomping (`+` / `-`) and indentation (`1`-`9`) indicators, either order.
                    let header = bytes[i + 1..].iter().take(2).take_while(|d| matches!(d, b'+' | b'-' | b'1'..=b'9'));
                    let indicator = header.copied().find(u8::is_ascii_digit);
                    block_header = Some((from, indicator.map(|d| from + usize::from(d - b'0'))));
                }
                // libyaml refuses a tag or an anchor that a flow indicator ends, before any
                // nesting: skipping the property to the next space never hides a bracket.
                b'!' | b'&' if node_start => {
                    (property, previous) = (true, b);
                    continue;
                }
                b'&' | b'*' | b'!' | b'|' | b'>' | b'%' | b'@' | b'`' | b',' => {}
                // A value indicator, never the start of a plain scalar.
                b':' if matches!(bytes.get(i + 1), None | Some(b' ' | b'\t' | b'\r' | b'\n')) => {}
                // A plain scalar in block context: the brackets it holds are text, and so are
                // those of its continuation lines (indented past `from`).
                _ if depth == 0 && matches!(significant, b'\n' | b':' | b'-' | b'?') => (plain, plain_from) = (true, Some(from)),
                _ => {}
            }
            if !matches!(b, b' ' | b'\t' | b'\r' | b':') {
                explicit_value = false;
            }
        }
        if b != b' ' && b != b'\t' {
            significant = b;
        }
        previous = b;
    }
    Ok(())
}

thread_local! {
    /// The last block this thread parsed: a write validates its note's frontmatter, then plans
    /// with the same bytes, and serde_yaml costs ~80 µs per small block here.
    static LAST_PARSED: std::cell::RefCell<Option<(String, Mapping)>> = const { std::cell::RefCell::new(None) };
}

/// serde_yaml's message without its own " at line N column M" suffix (we report note lines).
fn yaml_message(error: &serde_yaml::Error) -> String {
    let text = error.to_string();
    match text.find(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

impl Frontmatter {
    /// Builds a block from a mapping; it renders with serde_yaml. A mapping serde_yaml cannot
    /// emit is an error, never a silently empty block.
    pub fn from_mapping(mapping: Mapping) -> Result<Self, FrontmatterProblem> {
        let source_yaml = render_mapping(&mapping)?;
        Ok(Frontmatter { mapping, source_yaml })
    }

    /// Returns the YAML text to put between the delimiters: the original text when the
    /// mapping is unchanged since parsing, a fresh rendering otherwise.
    pub(crate) fn yaml_text(&self) -> Result<String, FrontmatterProblem> {
        match serde_yaml::from_str::<Value>(&self.source_yaml) {
            Ok(Value::Mapping(original)) if original == self.mapping => Ok(self.source_yaml.clone()),
            Err(_) | Ok(Value::Null) if self.mapping.is_empty() => Ok(self.source_yaml.clone()),
            _ => render_mapping(&self.mapping),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.mapping.get(key)
    }
}

/// The YAML text of a mapping, ending in a newline, or a typed refusal when the emitter's
/// output would not read back as the same mapping.
pub(crate) fn render_mapping(mapping: &Mapping) -> Result<String, FrontmatterProblem> {
    if mapping.is_empty() {
        return Ok(String::new());
    }
    let mut text = serde_yaml::to_string(mapping).map_err(|e| FrontmatterProblem::Unrenderable { message: e.to_string() })?;
    // The emitter ends a literal block scalar with the value's own last line break, which may
    // be U+2028 or U+2029 (line breaks to YAML, not to the `---` delimiter scan): the closing
    // delimiter needs a `\n` before it.
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // serde_yaml's emitter writes some tags verbatim that are not valid YAML (`!%5bt` decodes to
    // `![t`, a flow indicator): what it writes must read back as the same mapping, or nothing
    // is written.
    match serde_yaml::from_str::<Value>(&text) {
        Ok(Value::Mapping(back)) if back == *mapping => Ok(text),
        _ => Err(FrontmatterProblem::Unrenderable {
            message: "the YAML emitter's output does not read back as the same mapping (a tag or key it cannot write)".into(),
        }),
    }
}

/// Renders a note: delimiters and body of `split` around the frontmatter's YAML text.
pub fn render(split: &Split<'_>, frontmatter: &Frontmatter) -> Result<String, FrontmatterProblem> {
    let mut out = String::with_capacity(split.open.len() + split.yaml.len() + split.close.len() + split.body.len() + 3);
    if split.bom {
        out.push('\u{feff}');
    }
    out.push_str(split.open);
    out.push_str(&frontmatter.yaml_text()?);
    let close = if split.close.ends_with('\n') || split.body.is_empty() { split.close.to_string() } else { format!("{}\n", split.close) };
    out.push_str(&close);
    out.push_str(split.body);
    Ok(out)
}

/// Renders a brand-new note from a frontmatter mapping and a body.
pub fn render_new(frontmatter: &Frontmatter, body: &str) -> Result<String, FrontmatterProblem> {
    Ok(format!("---\n{}---\n{}", frontmatter.yaml_text()?, body))
}

#[cfg(test)]
mod tests;
