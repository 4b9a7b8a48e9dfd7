//! Unit tests for `VaultPath` parsing.

use super::*;
use proptest::prelude::*;

#[test]
fn accepts_plain_relative_paths() {
    let p = VaultPath::parse("01_Projects/alpha/plan.md").unwrap();
    assert_eq!(p.as_str(), "01_Projects/alpha/plan.md");
    assert_eq!(p.top_folder(), "01_Projects");
    assert_eq!(p.parent(), "01_Projects/alpha");
    assert_eq!(p.file_name(), "plan.md");
}

#[test]
fn decodes_percent_encoding_once() {
    let p = VaultPath::parse("01_Projects/my%20note.md").unwrap();
    assert_eq!(p.as_str(), "01_Projects/my note.md");
}

proptest! {
    #[test]
    fn parse_is_idempotent_and_never_escapes(raw in "[a-zA-Z0-9_./%\\\\:-]{0,40}") {
        if let Ok(p) = VaultPath::parse(&raw) {
            prop_assert!(!p.as_str().starts_with('/'));
            prop_assert!(!p.as_str().split('/').any(|c| c == ".." || c == "." || c.is_empty()));
            prop_assert!(!p.as_str().contains('\\'));
            // A normal path without '%' parses to itself.
            if !p.as_str().contains('%') {
                prop_assert_eq!(VaultPath::parse(p.as_str()).unwrap(), p.clone());
            }
        }
    }
}

#[test]
fn a_bare_dot_md_file_name_is_not_markdown() {
    // Found by tests/it/path_battery.rs: the length test looked at the whole path, not the name.
    assert!(!VaultPath::parse("01_Projects/.md").unwrap().has_md_extension());
    assert!(!VaultPath::parse(".md").unwrap().has_md_extension());
    assert!(VaultPath::parse("01_Projects/a.md").unwrap().has_md_extension());
}
