//! Unit tests for `journal`: records read back by their heads, intents decoded whole only when
//! asked, a record this engine cannot decode named rather than cut away.

use super::*;

fn intent(seq: u64, paths: &[&str]) -> Intent {
    Intent {
        seq,
        changes: paths
            .iter()
            .map(|p| FileChange::Write {
                path: (*p).to_string(),
                text: format!("---\ntitle: \"{p}\"\n---\n\nline one\nline \"two\"\n"),
                before: Some(PreImage::Absent),
            })
            .chain(std::iter::once(FileChange::Delete { path: "gone.md".into(), before: Some(PreImage::of(Some(b"old"))) }))
            .collect(),
        search_changed: paths.iter().map(|p| (*p).to_string()).collect(),
        search_removed: vec!["gone.md".into()],
        receipt: serde_json::json!({"seq": seq, "operation": "test"}),
        search_snapshot: Some(SearchSnapshot { source_snapshot_hash: "ab".repeat(32), scanned: 3, indexed: 2, excluded: 1 }),
    }
}

fn journal_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join(layout::STATE_DIR)).unwrap();
    root
}

#[test]
fn records_read_back_by_their_heads_and_each_intent_decodes_to_what_was_appended() {
    let root = journal_root();
    let (mut journal, records) = Journal::open(root.path()).unwrap();
    assert!(records.is_empty());
    let (first, second) = (intent(7, &["03_Resources/a.md", "03_Resources/_index.md"]), intent(8, &["index.md"]));
    journal.append(&Record::Intent(first.clone()), true).unwrap();
    journal.append(&Record::Done { seq: 7, abandoned: false }, false).unwrap();
    journal.append(&Record::Intent(second.clone()), true).unwrap();
    journal.append(&Record::Done { seq: 8, abandoned: true }, false).unwrap();
    drop(journal);

    let (_, records) = Journal::open(root.path()).unwrap();
    let heads: Vec<(u64, bool, Option<bool>, Vec<String>)> =
        records.iter().map(|r| (r.seq(), r.is_intent(), r.done(), r.paths().to_vec())).collect();
    assert_eq!(
        heads,
        vec![
            (7, true, None, vec!["03_Resources/a.md".into(), "03_Resources/_index.md".into(), "gone.md".into()]),
            (7, false, Some(false), vec![]),
            (8, true, None, vec!["index.md".into(), "gone.md".into()]),
            (8, false, Some(true), vec![]),
        ]
    );
    assert_eq!(records[0].intent().unwrap(), Some(&first));
    assert_eq!(records[2].intent().unwrap(), Some(&second));
    assert_eq!(records[1].intent().unwrap(), None, "a done record has no intent");
    assert_eq!(abandoned_seqs(&records), std::collections::BTreeSet::from([8]));
    let (_, read) = read_committed(root.path()).unwrap().unwrap();
    assert_eq!(read.iter().map(StoredRecord::seq).collect::<Vec<_>>(), vec![7, 7, 8, 8]);

    // A record appended by this process is at hand whole, never decoded again.
    let appended = StoredRecord::from(Record::Intent(first.clone()));
    assert_eq!((appended.seq(), appended.paths().len()), (7, 3));
    assert_eq!(appended.intent().unwrap(), Some(&first));
}

/// Frames `payload` as `append` does.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&blake3::hash(payload).as_bytes()[..8]);
    out.extend_from_slice(payload);
    out
}

#[test]
fn an_intent_whose_head_reads_but_whole_does_not_is_kept_and_named_never_cut_away() {
    let root = journal_root();
    let path = layout::join(root.path(), layout::JOURNAL);
    // Checksummed and whole, but not an intent this engine writes (a change without `action`).
    let foreign = br#"{"kind":"intent","seq":5,"changes":[{"path":"01_Projects/x.md","text":"body"}]}"#;
    let mut bytes = frame(foreign);
    bytes.extend(frame(br#"{"kind":"done","seq":4}"#));
    std::fs::write(&path, &bytes).unwrap();

    let (_, records) = Journal::open(root.path()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing after a readable head is truncated");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].paths(), ["01_Projects/x.md".to_string()]);
    let error = records[0].intent().unwrap_err().to_string();
    assert!(error.contains("intent 5 cannot be decoded"), "{error}");
    // Asked again, the same answer (decoded once).
    assert!(records[0].intent().is_err());
}

#[test]
fn a_torn_tail_is_cut_at_the_last_whole_record() {
    let root = journal_root();
    let path = layout::join(root.path(), layout::JOURNAL);
    let good = frame(br#"{"kind":"done","seq":1}"#);
    for tail in [frame(br#"{"kind":"done","seq":2}"#)[..20].to_vec(), frame(b"not json")] {
        let mut bytes = good.clone();
        bytes.extend(&tail);
        std::fs::write(&path, &bytes).unwrap();
        let (journal, records) = Journal::open(root.path()).unwrap();
        assert_eq!(records.iter().map(StoredRecord::seq).collect::<Vec<_>>(), vec![1]);
        assert_eq!(journal.len_bytes(), good.len() as u64);
        assert_eq!(std::fs::read(&path).unwrap(), good);
    }
}
