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

/// Every record's head, as a write consults them.
fn heads_of(records: &[StoredRecord]) -> Vec<(u64, bool, Option<bool>, Vec<String>)> {
    records.iter().map(|r| (r.seq(), r.is_intent(), r.done(), r.paths().to_vec())).collect()
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
    assert_eq!(
        heads_of(&records),
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

/// Two transactions, the second abandoned, appended by one handle and dropped.
fn two_transactions(root: &Path) -> (Intent, Intent) {
    let (first, second) = (intent(7, &["03_Resources/a.md"]), intent(8, &["index.md"]));
    let (mut journal, _) = Journal::open(root).unwrap();
    journal.append(&Record::Intent(first.clone()), true).unwrap();
    journal.append(&Record::Done { seq: 7, abandoned: false }, false).unwrap();
    journal.append(&Record::Intent(second.clone()), true).unwrap();
    journal.append(&Record::Done { seq: 8, abandoned: true }, false).unwrap();
    (first, second)
}

#[test]
fn a_writer_that_finds_the_journal_as_its_frame_index_says_reads_no_record_and_gets_the_same_ones() {
    let root = journal_root();
    let (first, second) = two_transactions(root.path());
    let (journal, kept) = Journal::open(root.path()).unwrap();
    assert!(journal.opened_from_heads(), "the journal is as its last writer left it");
    drop(journal);
    std::fs::remove_file(layout::join(root.path(), layout::JOURNAL_HEADS)).unwrap();
    let (journal, read) = Journal::open(root.path()).unwrap();
    assert!(!journal.opened_from_heads(), "no index: the journal is read");
    assert_eq!(heads_of(&kept), heads_of(&read));
    assert_eq!(kept[0].intent().unwrap(), Some(&first));
    assert_eq!(kept[2].intent().unwrap(), Some(&second));
    assert_eq!(kept[1].intent().unwrap(), None);
    assert_eq!(abandoned_seqs(&kept), abandoned_seqs(&read));
    // Reading it whole wrote the index again; appending after an index-opened journal keeps it.
    drop(journal);
    let (mut journal, _) = Journal::open(root.path()).unwrap();
    assert!(journal.opened_from_heads());
    journal.append(&Record::Intent(intent(9, &["02_Areas/b.md"])), true).unwrap();
    journal.append(&Record::Done { seq: 9, abandoned: false }, false).unwrap();
    drop(journal);
    let (mut journal, records) = Journal::open(root.path()).unwrap();
    assert!(journal.opened_from_heads());
    assert_eq!(records.iter().map(StoredRecord::seq).collect::<Vec<_>>(), vec![7, 7, 8, 8, 9, 9]);
    assert_eq!(records[4].paths(), ["02_Areas/b.md".to_string(), "gone.md".to_string()]);
    // Emptied, and the index says so.
    journal.reset().unwrap();
    drop(journal);
    let (journal, records) = Journal::open(root.path()).unwrap();
    assert!(journal.opened_from_heads() && records.is_empty());
}

#[test]
fn a_frame_index_that_does_not_describe_the_journal_as_it_is_is_never_trusted() {
    let root = journal_root();
    let path = layout::join(root.path(), layout::JOURNAL);
    let heads = layout::join(root.path(), layout::JOURNAL_HEADS);
    two_transactions(root.path());
    let good_heads = std::fs::read(&heads).unwrap();
    let good_journal = std::fs::read(&path).unwrap();
    let restore = || {
        std::fs::write(&path, &good_journal).unwrap();
        std::fs::write(&heads, &good_heads).unwrap();
    };

    // Torn, foreign or emptied indexes: the journal is read, and its records are all there.
    for bad in [good_heads[..good_heads.len() / 2].to_vec(), b"not an index".to_vec(), Vec::new()] {
        restore();
        std::fs::write(&heads, bad).unwrap();
        let (journal, records) = Journal::open(root.path()).unwrap();
        assert!(!journal.opened_from_heads());
        assert_eq!(records.len(), 4);
    }
    // Appended by a writer that kept no index (an older engine, or one killed before it kept
    // it): the new record is read.
    restore();
    let mut appended = good_journal.clone();
    appended.extend(frame(br#"{"kind":"done","seq":10}"#));
    std::fs::write(&path, &appended).unwrap();
    let (journal, records) = Journal::open(root.path()).unwrap();
    assert!(!journal.opened_from_heads());
    assert_eq!(records.last().map(StoredRecord::seq), Some(10));
    drop(journal);

    // Rewritten to the same length with its modification time put back: the last frame's
    // header no longer matches, so the index is not trusted (and the torn record is cut).
    restore();
    let stamp = |path: &Path| std::fs::metadata(path).unwrap().modified().unwrap();
    let (journal, _) = Journal::open(root.path()).unwrap();
    drop(journal);
    let before = stamp(&path);
    let last = good_journal.len() - frame(br#"{"kind":"done","seq":8,"abandoned":true}"#).len();
    let mut rewritten = good_journal.clone();
    rewritten[last + 4] ^= 0xff;
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&rewritten, 0).unwrap();
    file.set_modified(before).unwrap();
    drop(file);
    let (journal, records) = Journal::open(root.path()).unwrap();
    assert!(!journal.opened_from_heads());
    assert_eq!(records.len(), 3, "the last record, no longer whole, is cut");
    drop(journal);

    // A record in the middle changed the same way: the index fits, and the intent whose bytes
    // changed is refused when it is decoded, never read as something it is not.
    restore();
    let (journal, _) = Journal::open(root.path()).unwrap();
    drop(journal);
    let before = stamp(&path);
    let mut rewritten = good_journal.clone();
    let at = rewritten.windows(7).position(|w| w == b"line on").unwrap();
    rewritten[at] = b'L';
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&rewritten, 0).unwrap();
    file.set_modified(before).unwrap();
    drop(file);
    let (journal, records) = Journal::open(root.path()).unwrap();
    assert!(journal.opened_from_heads());
    let error = records[0].intent().unwrap_err().to_string();
    assert!(error.contains("no longer match their checksum"), "{error}");
}

/// A record's head and decoded intent.
type ReadRecord = (u64, bool, Option<bool>, Vec<String>, Option<Intent>);

/// Every record's head and decoded intent: what a reader makes of a read.
fn read_as(records: &[StoredRecord]) -> Vec<ReadRecord> {
    records.iter().map(|r| (r.seq(), r.is_intent(), r.done(), r.paths().to_vec(), r.intent().unwrap().cloned())).collect()
}

#[test]
fn a_read_from_where_the_last_one_ended_gives_what_a_whole_read_gives() {
    let root = journal_root();
    let path = layout::join(root.path(), layout::JOURNAL);
    let (mut journal, _) = Journal::open(root.path()).unwrap();
    let mut seq = 0;
    let mut append = |journal: &mut Journal, intents: usize| {
        for _ in 0..intents {
            seq += 1;
            journal.append(&Record::Intent(intent(seq, &["03_Resources/a.md", "index.md"])), true).unwrap();
            journal.append(&Record::Done { seq, abandoned: seq % 3 == 0 }, false).unwrap();
        }
    };
    let (mut seen, mut cursor) = (Vec::new(), None);
    // What each step does to the journal, and whether the read after it must start over.
    for step in 0..9 {
        let whole = match step {
            0 | 1 => {
                append(&mut journal, 2);
                step == 0
            }
            // Unchanged: nothing new.
            2 => false,
            // Emptied by a fold and grown past where the last read ended: never read from there.
            3 => {
                journal.reset().unwrap();
                append(&mut journal, 9);
                true
            }
            4 => {
                append(&mut journal, 1);
                false
            }
            // A torn frame at the end: neither read takes it; the next read starts before it.
            5 => {
                let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
                file.write_all(&frame(br#"{"kind":"done","seq":99}"#)[..20]).unwrap();
                false
            }
            // The writer cuts the torn frame away and appends.
            6 => {
                drop(std::mem::replace(&mut journal, Journal::open(root.path()).unwrap().0));
                append(&mut journal, 1);
                false
            }
            // Replaced by another file holding more: read whole.
            7 => {
                let other = journal_root();
                let (mut replacement, _) = Journal::open(other.path()).unwrap();
                append(&mut replacement, 16);
                std::fs::rename(layout::join(other.path(), layout::JOURNAL), &path).unwrap();
                journal = Journal::open(root.path()).unwrap().0;
                true
            }
            _ => {
                append(&mut journal, 1);
                false
            }
        };
        let read = read_committed_since(root.path(), cursor.as_ref()).unwrap().unwrap();
        assert_eq!(read.whole, whole, "step {step}");
        if read.whole {
            seen.clear();
        }
        seen.extend(read_as(&read.records));
        let (stamp, records) = read_committed(root.path()).unwrap().unwrap();
        assert_eq!(seen, read_as(&records), "step {step}");
        assert_eq!(read.stamp, stamp, "step {step}");
        assert!(!seen.is_empty());
        cursor = Some(read.cursor);
    }
}
