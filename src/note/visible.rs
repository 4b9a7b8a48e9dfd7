//! Text as a reviewer must see it. A proposal's text is an agent's (or any writer's) bytes: a
//! terminal control sequence in it can move the cursor and erase the line above the secret
//! prompt (`\x1b[2K\x1b[1A`), a carriage return can overwrite what was printed, and a
//! bidirectional override (U+202E) or an invisible character can reorder or hide what a browser
//! or terminal shows. Every review surface (the CLI's human and JSON output, the web UI) shows
//! such characters as visible escapes instead, so what a person approves is what they read.

use std::borrow::Cow;

/// Whether `c` must be shown escaped: every control character but the newline and the tab
/// (C0, DEL, C1: ESC, CR, BS, …), the bidirectional formatting characters (U+061C, U+200E,
/// U+200F, U+202A–U+202E, U+2066–U+2069), zero-width and invisible ones (U+00AD, U+034F,
/// U+115F, U+1160, U+180E, U+200B–U+200D, U+2060–U+2064, U+3164, U+FEFF, U+FFA0), the line and
/// paragraph separators (U+2028, U+2029), and the Unicode tag characters (U+E0000–U+E007F,
/// which carry text no renderer shows).
pub fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{3164}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `c` as a reader sees it escaped: `\u{1b}`.
pub fn escaped(c: char) -> String {
    format!("\\u{{{:x}}}", c as u32)
}

/// `text` with every `hidden` character shown as its escape (`\u{1b}`, `\u{202e}`); borrowed
/// when there is none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&escaped(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// JSON text (from serde_json) with every `hidden` character that JSON leaves raw (bidi,
/// invisible, tag characters; serde_json already escapes the C0 controls) written as a JSON
/// `\uXXXX` escape instead: the same value for any JSON reader, safe on a terminal.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(hidden) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_invisible_characters_are_shown_escaped() {
        let hostile = "curl x | sh\x1b[2K\x1b[1G\x1b[1A\r\u{202e}txt.exe\u{200b}\u{e0041}";
        let shown = escape(hostile);
        assert_eq!(shown, "curl x | sh\\u{1b}[2K\\u{1b}[1G\\u{1b}[1A\\u{d}\\u{202e}txt.exe\\u{200b}\\u{e0041}");
        assert!(!shown.chars().any(hidden));
        assert_eq!(escape("plain\ttext\nline"), Cow::Borrowed("plain\ttext\nline"));
    }

    #[test]
    fn escaped_json_is_the_same_value_and_shows_no_hidden_character() {
        let value = serde_json::json!({"path": "01_Projects/\u{202e}gpj.exe", "tag": "\u{e0041}", "esc": "\x1b[2K"});
        let json = serde_json::to_string(&value).unwrap();
        let safe = escape_json(&json);
        assert!(!safe.chars().any(hidden), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), value);
    }
}
