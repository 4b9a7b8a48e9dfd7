//! The folder index (`Inventory::by_folder`) against the range scans it replaced, and the
//! counters' subfolder index (`Counts::valid_children`) against the pass over every folder's
//! counter it replaced.

use super::*;
use proptest::prelude::*;

/// Folders whose names sort around one another (`a` before `a-b` before `a/…` before `a0`),
/// so a range scan's seeks past subfolders are exercised, and files of each kind.
const FOLDERS: [&str; 7] = ["", "a", "a-b", "a/b", "a/b/c", "a0", "b"];
const NAMES: [&str; 4] = ["x.md", "y.md", "_index.md", "z.png"];

#[derive(Debug, Clone)]
enum Op {
    Upsert(usize, usize),
    UpsertValid(usize, usize),
    Remove(usize, usize),
    Attach(usize, usize),
}

fn path(folder: usize, name: usize) -> VaultPath {
    let folder = FOLDERS[folder];
    let rel = if folder.is_empty() { NAMES[name].to_string() } else { format!("{folder}/{}", NAMES[name]) };
    VaultPath::parse_walked(&rel).expect("a vault path")
}

fn op() -> impl Strategy<Value = Op> {
    let at = (0..FOLDERS.len(), 0..NAMES.len());
    prop_oneof![
        at.clone().prop_map(|(f, n)| Op::Upsert(f, n)),
        at.clone().prop_map(|(f, n)| Op::UpsertValid(f, n)),
        at.clone().prop_map(|(f, n)| Op::Remove(f, n)),
        at.prop_map(|(f, n)| Op::Attach(f, n)),
    ]
}

/// `direct_files` and `direct_records` of every folder (and of ones the model never held)
/// equal the range scans over `files` and `records` that skip each subfolder.
fn assert_folders_answer_as_range_scans(inventory: &Inventory) {
    for dir in FOLDERS.iter().chain(&["a/b/c/d", "c"]) {
        let files = direct_in(|range| inventory.files.range(range).next(), dir);
        assert_eq!(inventory.direct_files(dir), files, "files of {dir:?}");
        let records = direct_in(|range| inventory.records.range(range).next().map(|(path, _)| path), dir);
        assert_eq!(inventory.direct_records(dir).expect("a whole model answers"), records, "records of {dir:?}");
    }
}

/// Each folder's subfolders with a valid note, as the catalog planner found them before
/// the index: a pass over every folder's counter, keeping those whose parent is the folder.
fn assert_valid_children_are_the_counters_pass(counts: &Counts) {
    let mut pass: BTreeMap<&str, Vec<(&str, usize)>> = BTreeMap::new();
    for (child, notes) in &counts.valid_per_dir {
        if let Some((parent, _)) = child.rsplit_once('/') {
            pass.entry(parent).or_default().push((child.as_str(), *notes));
        }
    }
    for children in pass.values_mut() {
        children.sort();
    }
    let asked: BTreeSet<&str> =
        FOLDERS.iter().copied().chain(["a/b/c/d", "c"]).chain(counts.valid_per_dir.keys().map(String::as_str)).collect();
    for dir in asked {
        let indexed: Vec<(&str, usize)> = counts.valid_children(dir).collect();
        assert_eq!(indexed, pass.get(dir).cloned().unwrap_or_default(), "subfolders of {dir:?}");
    }
    // No folder is indexed with no subfolder left.
    assert_eq!(counts.valid_children.len(), pass.len());
}

/// Both indexes, and the subfolder index of counters taken in whole (a partial model's).
fn assert_indexes(inventory: &Inventory) {
    assert_folders_answer_as_range_scans(inventory);
    assert_valid_children_are_the_counters_pass(&inventory.counts);
    let mut taken = Counts::default();
    let counted: Vec<(String, usize)> =
        inventory.counts.valid_per_dir.iter().map(|(d, n)| (d.clone(), *n)).chain([("zero/folder".to_string(), 0)]).collect();
    taken.extend_valid(counted);
    assert_eq!(taken.valid_per_dir, inventory.counts.valid_per_dir);
    assert_valid_children_are_the_counters_pass(&taken);
}

proptest! {
    #[test]
    fn a_folders_own_entries_are_what_the_range_scans_found(ops in proptest::collection::vec(op(), 1..60)) {
        let mut inventory = Inventory::default();
        for op in ops {
            match op {
                Op::Upsert(f, n) => {
                    inventory.upsert(NoteRecord::empty(path(f, n), PageKind::Note));
                }
                Op::UpsertValid(f, n) => {
                    let mut record = NoteRecord::empty(path(f, n), PageKind::Note);
                    record.valid = true;
                    inventory.upsert(record);
                }
                Op::Remove(f, n) => {
                    inventory.remove(&path(f, n));
                }
                Op::Attach(f, n) => inventory.add_attachment(path(f, n)),
            }
            assert_indexes(&inventory);
        }
        // A model assembled from the same records and files answers alike.
        let files: Vec<VaultPath> = inventory.files.iter().cloned().collect();
        let records: Vec<NoteRecord> = inventory.records.values().cloned().collect();
        let assembled = Inventory::default().assemble(records, files);
        assert_indexes(&assembled);
    }
}

/// A derivative kept at a key catches up by the paths changed since, is current at the same
/// key, and is rebuilt whole when it was never built or was built from another model.
#[test]
fn a_derivative_catches_up_by_the_paths_changed_since_its_key() {
    let mut inventory = Inventory { origin: changes::next_origin(), ..Default::default() };
    inventory.upsert(NoteRecord::empty(path(1, 0), PageKind::Note));
    let seen = inventory.key();
    assert_eq!(inventory.catch_up_from(Some(seen)), CatchUp::Current);
    assert_eq!(inventory.catch_up_from(None), CatchUp::Whole);
    inventory.upsert(NoteRecord::empty(path(2, 1), PageKind::Note));
    inventory.remove(&path(1, 0));
    inventory.upsert(NoteRecord::empty(path(2, 1), PageKind::Note));
    let mut changed = [path(1, 0), path(2, 1)];
    changed.sort();
    assert_eq!(inventory.catch_up_from(Some(seen)), CatchUp::Changed(changed.iter().collect()));
    let other = Inventory { origin: changes::next_origin(), ..Default::default() };
    assert_eq!(other.catch_up_from(Some(seen)), CatchUp::Whole, "another model's key");
}
