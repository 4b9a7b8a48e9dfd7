//! Unit tests for policy loading and override merging.

use super::*;

#[test]
fn default_policy_loads_and_knows_every_rule() {
    let loaded = LoadedPolicy::from_texts(None).unwrap();
    assert_eq!(loaded.policy.layout.para_folders.len(), 6);
    assert_eq!(loaded.severity("orphan"), Severity::Warning);
    assert_eq!(loaded.severity("broken-link"), Severity::Blocking);
    assert_eq!(loaded.policy.rate_limits["ingest_note"], 10);
    assert!(loaded.root_daily_log.is_match("2024-05-01_standup.md"));
    assert!(!loaded.root_daily_log.is_match("notes.md"));
}

#[test]
fn override_merges_maps_by_key() {
    let loaded = LoadedPolicy::from_texts(Some("lint:\n  rules:\n    orphan: blocking\n")).unwrap();
    assert_eq!(loaded.severity("orphan"), Severity::Blocking);
    assert_eq!(loaded.severity("stale"), Severity::Blocking);
    assert_eq!(loaded.policy.layout.para_folders.len(), 6);
}

#[test]
fn invalid_override_names_file_line_and_reason() {
    let err = LoadedPolicy::from_texts(Some("lint:\n  rules:\n    orphan: sometimes\n")).unwrap_err();
    match err {
        Error::PolicyInvalid { file, line, reason } => {
            assert_eq!(file, ".paravault/policy.yaml");
            assert_eq!(line, 3);
            assert!(reason.contains("sometimes") || reason.contains("variant"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = LoadedPolicy::from_texts(Some("lint:\n  rules:\n    no-such-rule: warning\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 3, .. }), "{err:?}");
    let err = LoadedPolicy::from_texts(Some("limits:\n  unknown_limit: 3\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 2, .. }), "{err:?}");
    let err = LoadedPolicy::from_texts(Some("rate_limits:\n  ingest_note: 0\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 2, .. }), "{err:?}");
    let err = LoadedPolicy::from_texts(Some("- just\n- a list\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 1, .. }), "{err:?}");
}
