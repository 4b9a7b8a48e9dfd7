//! Tests of the source snapshot digest: a snapshot that holds some folders in full and knows
//! the others by their digests (a write's partial model) hashes exactly as the whole one.

use super::SourceSnapshot;
use crate::inventory::NoteRecord;
use crate::note::path::VaultPath;
use crate::scan::PageKind;

fn note(path: &str, byte: u8) -> NoteRecord {
    let mut record = NoteRecord::empty(VaultPath::parse(path).expect("path"), PageKind::Note);
    record.valid = true;
    record.content_hash = [byte; 32];
    record
}

#[test]
fn a_snapshot_known_by_digests_outside_its_held_folders_hashes_as_the_whole_one() {
    let records = vec![note("01_Projects/a.md", 1), note("01_Projects/b.md", 2), note("02_Areas/x/c.md", 3), note("root.md", 4)];
    let whole = SourceSnapshot::of(&records);
    let mut partial = SourceSnapshot::of_opaque(
        whole.directory_digests().filter(|(dir, _, _)| *dir != "01_Projects").map(|(dir, digest, notes)| (dir, (digest, notes))),
    );
    for record in records.iter().filter(|r| r.path.parent() == "01_Projects") {
        partial.insert(record);
    }
    assert_eq!(partial.hash(), whole.hash());
    assert_eq!(partial.len(), whole.len());
    assert!(!partial.overrun());

    // A change in a folder it holds moves both alike.
    let added = note("01_Projects/d.md", 5);
    partial.insert(&added);
    assert_eq!(partial.hash(), SourceSnapshot::of(records.iter().chain([&added])).hash());
    partial.remove(&records[0]);
    assert_eq!(partial.hash(), SourceSnapshot::of(records.iter().skip(1).chain([&added])).hash());
    assert!(!partial.overrun());

    // A change in a folder known only by its digest cannot be hashed truthfully.
    partial.insert(&note("02_Areas/x/e.md", 6));
    assert!(partial.overrun(), "a change beyond the held folders is an overrun");
}
