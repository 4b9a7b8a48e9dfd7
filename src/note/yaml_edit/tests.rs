//! Unit tests of `yaml_edit`.

use super::*;

#[test]
fn set_replaces_only_its_entry() {
    let yaml = "type: project # keep\ntags:\n  - a\n  - b\nexpiry: 2020-01-01\n";
    assert_eq!(set_entry(yaml, "tags", "tags: [a, b]"), "type: project # keep\ntags: [a, b]\nexpiry: 2020-01-01\n");
    assert_eq!(set_entry(yaml, "status", "status: archived"), format!("{yaml}status: archived\n"));
    assert_eq!(set_entry("a: 1", "b", "b: 2"), "a: 1\nb: 2\n");
}

#[test]
fn rename_keeps_the_value_text() {
    assert_eq!(rename_key("status: Done  # x\nb: 1\n", "status", "x-status"), "x-status: Done  # x\nb: 1\n");
}
