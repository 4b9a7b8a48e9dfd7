//! Unit tests of the write path's pure decisions: where an append goes.

use super::{AppendState, append_state};

#[test]
fn an_append_lands_at_the_planned_end_or_after_what_others_wrote_never_over_it() {
    let text = "- entry\n";
    // As planned.
    assert_eq!(append_state(b"# Log\n", 6, text), AppendState::AtPlannedEnd);
    // Our own torn append: cut and redone.
    assert_eq!(append_state(b"# Log\n- en", 6, text), AppendState::AtPlannedEnd);
    // Already in place (recovery of an applied intent), also with someone's text after it.
    assert_eq!(append_state(b"# Log\n- entry\n", 6, text), AppendState::Done);
    assert_eq!(append_state(b"# Log\n- entry\nperson\n", 6, text), AppendState::Done);
    // A person appended since the plan: our text goes after theirs; theirs is never cut.
    assert_eq!(append_state(b"# Log\nperson line\n", 6, text), AppendState::AtCurrentEnd);
    // A person shortened the file: append at its current end.
    assert_eq!(append_state(b"# L", 6, text), AppendState::AtCurrentEnd);
    // A person rewrote the file and our entry ended up last: nothing to do.
    assert_eq!(append_state(b"rewritten\n- entry\n", 6, text), AppendState::Done);
}

/// The receipts' evidence source: a note another process wrote is an entry of its folder, with
/// the catalog pages of each of its folders up to the first missing one, and the root index.
#[test]
fn other_processes_receipts_name_their_notes_and_the_catalog_pages_above_them() {
    use crate::inventory::changes::ChangeSet;
    let dir = tempfile::tempdir().expect("tempdir");
    let (vault, _) = crate::vault::Vault::init(dir.path(), Default::default()).expect("init");
    std::fs::create_dir_all(dir.path().join("01_Projects/alpha")).expect("folder");
    let request = crate::write::operations::IngestRequest {
        name: "01_Projects/alpha/x.md".into(),
        note_type: "Project".into(),
        title: "X".into(),
        description: "d".into(),
        content: "x\n".into(),
        ..Default::default()
    };
    vault.ingest_note(&request).expect("ingest");
    let told = super::writer::receipt_changes(&vault, &["01_Projects/alpha/x.md".to_string()]);
    let expected = ChangeSet::of_paths([
        "01_Projects/alpha/x.md",
        "01_Projects/alpha/_index.md",
        "01_Projects/alpha/_index-2.md",
        "01_Projects/_index.md",
        "01_Projects/_index-2.md",
        "index.md",
    ]);
    assert_eq!(told, expected);
    assert!(dir.path().join("01_Projects/alpha/_index.md").is_file(), "the write rendered its folder's catalog");
}
