//! Tests of the source snapshot digest: a snapshot that holds some folders in full and knows
//! the others by their persisted top-level lines (a write's partial model) hashes and counts
//! exactly as the whole one, and persisted lines that are not well formed are refused.

use proptest::prelude::*;

use super::{SourceSnapshot, check_lines, merge_lines};
use crate::inventory::NoteRecord;
use crate::note::path::VaultPath;
use crate::scan::PageKind;

fn note(path: &str, byte: u8) -> NoteRecord {
    let mut record = NoteRecord::empty(VaultPath::parse(path).expect("path"), PageKind::Note);
    record.valid = true;
    record.content_hash = [byte; 32];
    record
}

/// A partial snapshot of `whole` holding `held` (their notes among `records` inserted).
fn partial_of(whole: &SourceSnapshot, records: &[NoteRecord], held: &[&str]) -> SourceSnapshot {
    let lines = String::from_utf8(whole.lines()).expect("lines are text");
    let mut partial = SourceSnapshot::partial(lines, whole.len());
    for dir in held {
        let notes = whole.directory_digests().find(|(d, _, _)| d == dir).map_or(0, |(_, _, n)| n);
        partial.hold(dir, notes);
    }
    for record in records.iter().filter(|r| held.contains(&r.path.parent())) {
        partial.insert(record);
    }
    partial
}

#[test]
fn a_snapshot_known_by_its_lines_outside_its_held_folders_hashes_as_the_whole_one() {
    let records = vec![note("01_Projects/a.md", 1), note("01_Projects/b.md", 2), note("02_Areas/x/c.md", 3), note("root.md", 4)];
    let whole = SourceSnapshot::of(&records);
    let mut partial = partial_of(&whole, &records, &["01_Projects", "01_Projects/new"]);
    assert_eq!(partial.hash(), whole.hash());
    assert_eq!(partial.len(), whole.len());
    assert!(!partial.overrun());

    // A change in a folder it holds moves both alike, a new folder and an emptied one too.
    let added = note("01_Projects/new/d.md", 5);
    partial.insert(&added);
    assert_eq!(partial.hash(), SourceSnapshot::of(records.iter().chain([&added])).hash());
    partial.remove(&records[0]);
    partial.remove(&records[1]);
    let left = SourceSnapshot::of(records.iter().skip(2).chain([&added]));
    assert_eq!((partial.hash(), partial.len()), (left.hash(), left.len()));
    assert!(!partial.overrun());

    // A hash asked for before a change is never served after it (a whole snapshot's too).
    let mut grown = SourceSnapshot::of(&records);
    let before = grown.hash();
    grown.insert(&added);
    assert_ne!(grown.hash(), before);
    assert_eq!(grown.hash(), SourceSnapshot::of(records.iter().chain([&added])).hash());
    grown.remove(&added);
    assert_eq!(grown.hash(), before);

    // A change in a folder known only by its line cannot be hashed truthfully.
    partial.insert(&note("02_Areas/x/e.md", 6));
    assert!(partial.overrun(), "a change beyond the held folders is an overrun");
}

/// A whole snapshot whose lines were built keeps them in place as folders come and go (a
/// line spliced in or out, never every line rebuilt): the hash is the one a snapshot built
/// from scratch gives, after every change, a folder first, last, in the middle and emptied.
#[test]
fn folders_that_come_and_go_are_spliced_into_the_lines_as_built_from_scratch() {
    let mut records: Vec<NoteRecord> = (0..40).map(|i| note(&format!("03_Resources/topic{i}/n.md"), i as u8)).collect();
    let mut snapshot = SourceSnapshot::of(&records);
    assert_eq!(snapshot.hash(), SourceSnapshot::of(&records).hash());
    for (i, path) in ["03_Resources/topic25/m.md", "00_Inbox/first.md", "06_Daily_Logs/last.md", "03_Resources/topic4/a/b.md", "root.md"]
        .iter()
        .enumerate()
    {
        let added = note(path, 100 + i as u8);
        snapshot.insert(&added);
        records.push(added);
        assert_eq!(snapshot.hash(), SourceSnapshot::of(&records).hash(), "after {path}");
        assert_eq!(snapshot.lines(), SourceSnapshot::of(&records).lines(), "after {path}");
    }
    for gone in [0, 17, 39, 41] {
        let record = records.remove(gone);
        snapshot.remove(&record);
        assert_eq!(snapshot.hash(), SourceSnapshot::of(&records).hash(), "after removing {}", record.path);
        assert_eq!(snapshot.lines(), SourceSnapshot::of(&records).lines(), "after removing {}", record.path);
    }
    assert_eq!(snapshot.top.lock().unwrap().builds, 1, "the lines are kept in place, never built whole again");
}

#[test]
fn persisted_lines_that_are_not_well_formed_are_refused() {
    let whole = SourceSnapshot::of(&[note("a/x.md", 1), note("b/y.md", 2)]);
    let lines = whole.lines();
    assert!(check_lines(&lines).is_ok());
    assert_eq!(check_lines(b""), Ok(""));
    let half = &lines[..lines.len() - 3];
    assert!(check_lines(half).is_err(), "a torn line");
    let mut swapped = lines[lines.len() / 2..].to_vec();
    swapped.extend_from_slice(&lines[..lines.len() / 2]);
    assert!(check_lines(&swapped).is_err(), "out of order");
    let mut twice = lines[..lines.len() / 2].to_vec();
    twice.extend_from_slice(&lines[..lines.len() / 2]);
    assert!(check_lines(&twice).is_err(), "a directory twice");
    let mut not_hex = lines.clone();
    not_hex[3] = b'g';
    assert!(check_lines(&not_hex).is_err(), "a digest that is not hex");
    assert!(check_lines(b"no digest\n").is_err());
    let mut not_text = lines.clone();
    not_text[0] = 0xff;
    assert!(check_lines(&not_text).is_err(), "not UTF-8");
    let mut wide = lines.clone();
    wide[2..4].copy_from_slice("é".as_bytes());
    assert!(check_lines(&wide).is_err(), "a digest with a character outside ASCII");
    // Merging nothing into well-formed lines gives them back.
    assert_eq!(merge_lines(check_lines(&lines).expect("well formed"), |_| false, []), lines);
}

proptest! {
    /// Any folders held, any inserts and removals within them (folders made and emptied
    /// included): the partial snapshot's hash and count are the whole snapshot's after the
    /// same changes.
    #[test]
    fn a_partial_snapshot_hashes_and_counts_as_the_whole_one(
        notes in proptest::collection::vec((0u8..6, 0u8..5, any::<u8>()), 0..30),
        held in proptest::collection::btree_set(0u8..6, 0..6),
        changes in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..5, any::<u8>(), any::<bool>()), 0..12),
    ) {
        let folder = |d: u8| match d { 0 => String::new(), 1 => "a".into(), 2 => "a/b".into(), 3 => "a-b".into(), 4 => "a0".into(), _ => "z/y/x".into() };
        let path = |d: u8, n: u8| if d == 0 { format!("n{n}.md") } else { format!("{}/n{n}.md", folder(d)) };
        let mut records: std::collections::BTreeMap<String, NoteRecord> =
            notes.iter().map(|(d, n, byte)| (path(*d, *n), note(&path(*d, *n), *byte))).collect();
        let whole = SourceSnapshot::of(records.values());
        let held: Vec<u8> = held.into_iter().collect();
        let held_dirs: Vec<String> = held.iter().map(|d| folder(*d)).collect();
        let held_refs: Vec<&str> = held_dirs.iter().map(String::as_str).collect();
        let before: Vec<NoteRecord> = records.values().cloned().collect();
        let mut partial = partial_of(&whole, &before, &held_refs);
        prop_assert_eq!(partial.hash(), whole.hash());
        for (which, n, byte, remove) in changes {
            let Some(d) = (!held.is_empty()).then(|| held[which.index(held.len())]) else { break };
            let p = path(d, n);
            if remove {
                if let Some(old) = records.remove(&p) {
                    partial.remove(&old);
                }
            } else {
                let new = note(&p, byte);
                if let Some(old) = records.get(&p) {
                    partial.remove(old);
                }
                partial.insert(&new);
                records.insert(p, new);
            }
        }
        let after = SourceSnapshot::of(records.values());
        prop_assert!(!partial.overrun());
        prop_assert_eq!(partial.hash(), after.hash());
        prop_assert_eq!(partial.len(), after.len());
    }
}
