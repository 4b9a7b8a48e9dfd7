//! Line-level edits of a frontmatter YAML block that keep every untouched key's exact text.
//!
//! A top-level entry is a line starting at column 0 with `key:` plus the following lines that
//! are indented, blank, or list items of a block sequence. Setting a key replaces exactly that
//! entry (or appends one); renaming rewrites only the key. Values are rendered by the caller.
//! Pure: no I/O.

/// One top-level entry: its key and the byte range of its lines in the block.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    key: String,
    start: usize,
    end: usize,
}

fn key_of(line: &str) -> Option<String> {
    let first = line.chars().next()?;
    if first.is_whitespace() || first == '#' || first == '-' {
        return None;
    }
    let (key, _) = line.split_once(':')?;
    let key = key.trim().trim_matches(['"', '\'']);
    (!key.is_empty()).then(|| key.to_string())
}

fn entries(yaml: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut offset = 0;
    for line in yaml.split_inclusive('\n') {
        if let Some(key) = key_of(line) {
            out.push(Entry { key, start: offset, end: offset + line.len() });
        } else if let Some(last) = out.last_mut() {
            let continues = line.starts_with([' ', '\t', '-']) || line.trim().is_empty();
            if continues && last.end == offset {
                last.end = offset + line.len();
            }
        }
        offset += line.len();
    }
    out
}

/// Replaces (or appends) top-level `key` with `rendered`, which must be complete YAML lines for
/// that key (e.g. `status: archived\n`).
pub(crate) fn set_entry(yaml: &str, key: &str, rendered: &str) -> String {
    let mut rendered = rendered.to_string();
    if !rendered.ends_with('\n') {
        rendered.push('\n');
    }
    match entries(yaml).into_iter().find(|e| e.key == key) {
        Some(entry) => {
            // Keep blank lines that trailed the old entry.
            let old = &yaml[entry.start..entry.end];
            let trailing_blank: String = old.split_inclusive('\n').rev().take_while(|l| l.trim().is_empty()).collect();
            format!("{}{}{}{}", &yaml[..entry.start], rendered, trailing_blank, &yaml[entry.end..])
        }
        None => {
            let mut out = yaml.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&rendered);
            out
        }
    }
}

/// Renames top-level `from` to `to`, keeping the value text exactly.
pub(crate) fn rename_key(yaml: &str, from: &str, to: &str) -> String {
    match entries(yaml).into_iter().find(|e| e.key == from) {
        Some(entry) => {
            let line = &yaml[entry.start..entry.end];
            let colon = line.find(':').unwrap_or(0);
            format!("{}{}{}{}", &yaml[..entry.start], to, &line[colon..], &yaml[entry.end..])
        }
        None => yaml.to_string(),
    }
}

/// `text` as a YAML double-quoted scalar that reads back as exactly `text`: JSON's escapes
/// (which YAML's double-quoted style shares) plus `\uXXXX` for what JSON leaves raw but YAML
/// does not read as itself: NEL, LS and PS are line breaks to it (folded, or stripping the
/// spaces after them), DEL, the C1 controls, a BOM and U+FFFE / U+FFFF are refused raw.
pub fn quoted(text: &str) -> String {
    let json = serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into());
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if matches!(c, '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}') {
            out.push_str(&format!("\\u{:04X}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
