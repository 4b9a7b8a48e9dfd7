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

proptest::proptest! {
    /// Any text, YAML's own line breaks and refused characters included, reads back exactly
    /// from `quoted` as a value and as a flow-sequence item.
    #[test]
    fn quoted_text_reads_back_exactly(text in "(\\PC|[\\x00-\\x1f\\x7f-\\x9f\\u{2028}\\u{2029}\\u{feff}\\u{fffe}\\u{ffff} ]){0,40}") {
        let value: serde_yaml::Value = serde_yaml::from_str(&format!("k: {}\nl: [{}]\n", quoted(&text), quoted(&text))).unwrap();
        proptest::prop_assert_eq!(value["k"].as_str(), Some(text.as_str()));
        proptest::prop_assert_eq!(value["l"][0].as_str(), Some(text.as_str()));
    }
}
