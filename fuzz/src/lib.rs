//! The fuzz targets' assertions, shared with `tests/it/fuzz_corpus.rs` (which includes this file
//! with `#[path]`), so the committed seed corpora are replayed by `cargo test` on stable.
//!
//! Each check takes the raw fuzzer bytes and panics when an invariant breaks.

use paravault::note::frontmatter::{self, Frontmatter};
use paravault::note::path::VaultPath;

/// Bytes as text: valid UTF-8 as is, anything else lossily (so binary input still exercises
/// the parsers instead of being skipped).
fn text_of(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// `split` and `parse` never panic; whatever parses renders back byte-identically; and a
/// brand-new note rendered from the parsed mapping parses back to the same mapping.
pub fn check_frontmatter(data: &[u8]) {
    let text = text_of(data);
    let Ok(split) = frontmatter::split(&text) else { return };
    // The split is a partition of the input.
    let bom = if split.bom { "\u{feff}" } else { "" };
    assert_eq!(format!("{bom}{}{}{}{}", split.open, split.yaml, split.close, split.body), *text, "split lost bytes");
    let Ok(parsed) = frontmatter::parse(&split) else { return };
    let rendered = frontmatter::render(&split, &parsed).expect("an unchanged parse always renders");
    assert_eq!(rendered, *text, "an unchanged parse did not render byte-identically");

    // serde_yaml cannot emit a mapping with a tagged or mapping key (`? !t a`, `{a: 1}: 2`):
    // `from_mapping` must then refuse with a typed problem, never render an empty block.
    let fresh = match Frontmatter::from_mapping(parsed.mapping.clone()) {
        Ok(fresh) => fresh,
        Err(problem) => {
            assert!(serde_yaml::to_string(&parsed.mapping).is_err(), "from_mapping refused a renderable mapping: {problem}");
            return;
        }
    };
    let note = frontmatter::render_new(&fresh, split.body).expect("a mapping from_mapping accepted renders");
    let resplit = frontmatter::split(&note).unwrap_or_else(|p| panic!("render_new output does not split ({p}): {note:?}"));
    let reparsed = frontmatter::parse(&resplit).unwrap_or_else(|p| panic!("render_new output does not parse ({p}): {note:?}"));
    assert_eq!(reparsed.mapping, parsed.mapping, "render_new(from_mapping(m)) did not parse back to m: {note:?}");
    assert_eq!(resplit.body, split.body, "render_new changed the body");
}

/// `VaultPath::parse` never panics; an accepted path is relative, has no '.', '..' or empty
/// component, no backslash or control character, and (without '%') parses to itself.
pub fn check_note_path(data: &[u8]) {
    let text = text_of(data);
    let Ok(path) = VaultPath::parse(&text) else { return };
    let s = path.as_str();
    assert!(!s.is_empty(), "accepted an empty path from {text:?}");
    assert!(!s.starts_with('/'), "accepted an absolute path {s:?} from {text:?}");
    assert!(!s.split('/').any(|c| c.is_empty() || c == "." || c == ".."), "accepted {s:?} from {text:?}");
    assert!(!s.contains('\\'), "accepted a backslash in {s:?} from {text:?}");
    assert!(!s.chars().any(char::is_control), "accepted a control character in {s:?} from {text:?}");
    let b = s.as_bytes();
    assert!(!(b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'), "accepted a drive letter in {s:?}");
    assert!(s.len() <= 1024, "accepted a path of {} bytes", s.len());
    // Lexically, joining onto a root never leaves it.
    let root = std::path::Path::new("/vault-root");
    let joined = path.under(root);
    assert!(joined.starts_with(root) && joined != root, "{s:?} joins to {joined:?}");
    assert!(joined.components().skip(2).all(|c| matches!(c, std::path::Component::Normal(_))), "{s:?} joins to {joined:?}");
    if !s.contains('%') {
        let again = VaultPath::parse(s).unwrap_or_else(|e| panic!("{s:?} was accepted but does not re-parse: {e}"));
        assert_eq!(again, path, "parse is not idempotent on {s:?}");
    }
}
