//! The change protocol: each evidence source's account, in → the `ChangeSet` it yields, out;
//! and `Inventory::apply` of a `ChangeSet` leaves the model a fresh walk gives.

use std::collections::{BTreeMap, BTreeSet};

use crate::inventory::changes::{ChangeSet, Changes, FolderChange};
use crate::inventory::testing::{put, settle};
use crate::inventory::{Inventory, JournalToken, NoteRecord, folder_stamp_changes};
use crate::inventory_cache::keyed::JournalAnswer;
use crate::policy::LoadedPolicy;

fn note(title: &str) -> String {
    format!("---\ntype: Resource\ntitle: {title}\ndescription: d\n---\nBody of {title}.\n")
}

fn entries(pairs: &[(&str, &[&str])]) -> BTreeMap<String, FolderChange> {
    pairs.iter().map(|(folder, names)| (folder.to_string(), FolderChange::Entries(names.iter().map(|n| n.to_string()).collect()))).collect()
}

/// What a model says is on disk: every file, each page's content hash, the links, the names no
/// vault path may hold, the folder counts.
type Summary = (Vec<String>, Vec<(String, [u8; 32])>, Vec<String>, BTreeMap<String, usize>);

fn summary(inventory: &Inventory) -> Summary {
    (
        inventory.files.iter().map(ToString::to_string).collect(),
        inventory.records.values().map(|r: &NoteRecord| (r.path.to_string(), r.content_hash)).collect(),
        inventory.symlinked_notes.iter().map(ToString::to_string).collect(),
        inventory.counts.valid_per_dir.iter().map(|(dir, n)| (dir.clone(), *n)).collect(),
    )
}

fn vault(files: &[(&str, String)]) -> (tempfile::TempDir, LoadedPolicy) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = LoadedPolicy::from_texts(None).expect("policy");
    for (path, text) in files {
        put(dir.path(), path, text);
    }
    settle();
    (dir, policy)
}

#[test]
fn paths_become_entries_of_their_folders_and_a_whole_folder_stays_whole() {
    let set = ChangeSet::of_paths(["index.md", "01_Projects/a.md", "01_Projects/b.md", "03_Resources/x/y.md"]);
    let expected = entries(&[("", &["index.md"]), ("01_Projects", &["a.md", "b.md"]), ("03_Resources/x", &["y.md"])]);
    assert_eq!(set, ChangeSet::Known(Changes { folders: expected, position: None }));
    let ChangeSet::Known(changes) = &set else { unreachable!() };
    assert_eq!(changes.entries().collect::<Vec<_>>(), ["index.md", "01_Projects/a.md", "01_Projects/b.md", "03_Resources/x/y.md"]);

    let mut changes = Changes::default();
    changes.folders.insert("01_Projects".into(), FolderChange::Whole);
    changes.entry("01_Projects/a.md");
    assert_eq!(changes.whole_folders().collect::<Vec<_>>(), ["01_Projects"], "a folder listed whole needs no entry of it");
    assert_eq!(changes.entries().count(), 0);
    assert!(ChangeSet::of_paths([]).is_empty());
    assert!(!ChangeSet::unknown("why").is_empty());
}

#[test]
fn the_folder_journal_source_is_known_at_its_position_or_unknown() {
    let now = JournalToken { epoch: 7, seq: 42 };
    let told = entries(&[("02_Areas", &["n.md"])]);
    let mut whole = told.clone();
    whole.insert("03_Resources".into(), FolderChange::Whole);
    let cases: [(Option<BTreeMap<String, FolderChange>>, ChangeSet); 3] = [
        (None, ChangeSet::unknown("the folder journal cannot say what changed since that position")),
        (Some(BTreeMap::new()), ChangeSet::Known(Changes { folders: BTreeMap::new(), position: Some(now) })),
        (Some(whole.clone()), ChangeSet::Known(Changes { folders: whole, position: Some(now) })),
    ];
    for (changed, expected) in cases {
        let answer = JournalAnswer::new(now, changed.clone());
        assert_eq!(answer.changes, expected);
        assert_eq!(answer.changed(), changed.as_ref());
    }
}

#[test]
fn the_folder_stamp_source_names_each_moved_racy_or_vanished_folder_whole() {
    let (dir, policy) = vault(&[
        ("01_Projects/still/a.md", note("A")),
        ("01_Projects/moved/b.md", note("B")),
        ("01_Projects/gone/c.md", note("C")),
        ("02_Areas/racy/d.md", note("D")),
    ]);
    let root = dir.path();
    let known = Inventory::load(root, &policy).expect("load");
    let mut dirs: Vec<(String, Option<(crate::inventory::FileStamp, i128)>)> = known.dirs.clone().into_iter().collect();
    // A folder whose identity was taken just now is racy: its listing is not trusted.
    for (dir, seen) in &mut dirs {
        if dir == "02_Areas/racy" {
            *seen = seen.map(|(stamp, _)| (stamp, stamp.mtime_ns.max(stamp.ctime_ns)));
        }
    }
    put(root, "01_Projects/moved/new.md", &note("New"));
    std::fs::remove_dir_all(root.join("01_Projects/gone")).expect("remove");
    let (proven, changes) = folder_stamp_changes(root, dirs);
    // `01_Projects` moved too: an entry of it (`gone/`) went.
    assert_eq!(changes, ChangeSet::of_folders(["01_Projects", "01_Projects/gone", "01_Projects/moved", "02_Areas/racy"]));
    assert_eq!(proven.get("01_Projects/still").map(Option::is_some), Some(true), "an unchanged folder keeps its identity");
    assert_eq!(proven.get("01_Projects/moved"), Some(&None), "a moved folder is listed again");
    assert_eq!(proven.get("02_Areas/racy"), Some(&None));
    assert!(!proven.contains_key("01_Projects/gone"), "a vanished folder is no longer one of the model's");
    assert_eq!(proven.get("").map(Option::is_some), Some(true));
}

#[test]
fn applying_entries_leaves_the_model_a_walk_gives() {
    let (dir, policy) = vault(&[
        ("01_Projects/a.md", note("A")),
        ("01_Projects/b.md", note("B")),
        ("02_Areas/c.md", note("C")),
        ("02_Areas/img.png", "png".into()),
    ]);
    let root = dir.path();
    let mut model = Inventory::load(root, &policy).expect("load");
    put(root, "01_Projects/a.md", &note("A, edited"));
    std::fs::remove_file(root.join("01_Projects/b.md")).expect("remove");
    put(root, "02_Areas/new.md", &note("New"));
    std::fs::remove_file(root.join("02_Areas/img.png")).expect("remove");
    put(root, "02_Areas/doc.pdf", "pdf");
    let told = ChangeSet::of_paths(["01_Projects/a.md", "01_Projects/b.md", "02_Areas/new.md", "02_Areas/img.png", "02_Areas/doc.pdf"]);
    let applied = model.apply(root, &policy, &told).expect("apply");
    assert_eq!(applied.walked, None, "entries alone need no walk");
    assert_eq!(applied.reread, 5);
    let walked = Inventory::load(root, &policy).expect("walk");
    assert_eq!(summary(&model), summary(&walked));
    assert_eq!(model.snapshot.hash(), walked.snapshot.hash());

    // Nothing moved: looking again, once the files read are past the racy window, reads nothing.
    settle();
    model.apply(root, &policy, &told).expect("settled");
    assert_eq!(model.apply(root, &policy, &told).expect("again").reread, 0);
}

#[test]
fn an_entry_only_a_walk_settles_walks_and_unknown_walks() {
    let (dir, policy) = vault(&[("01_Projects/sub/a.md", note("A")), ("02_Areas/c.md", note("C"))]);
    let root = dir.path();
    let mut model = Inventory::load(root, &policy).expect("load");
    std::fs::rename(root.join("01_Projects/sub"), root.join("01_Projects/moved")).expect("rename");
    let cases = [
        (ChangeSet::of_paths(["01_Projects/sub"]), "01_Projects/sub held a folder of the vault"),
        (ChangeSet::of_paths(["02_Areas/.paravaultignore"]), "02_Areas/.paravaultignore is an ignore file"),
        (ChangeSet::unknown("the watcher overflowed"), "the watcher overflowed"),
    ];
    for (told, reason) in cases {
        let applied = model.apply(root, &policy, &told).expect("apply");
        assert_eq!(applied.walked.as_deref(), Some(reason));
        assert!(applied.catalog_changed, "a walk makes the remembered catalog state suspect");
        assert_eq!(summary(&model), summary(&Inventory::load(root, &policy).expect("walk")));
    }
}

#[test]
fn applying_whole_folders_lists_them_again_new_subfolders_whole_and_forgets_vanished_ones() {
    let (dir, policy) = vault(&[("01_Projects/a.md", note("A")), ("01_Projects/old/b.md", note("B")), ("02_Areas/c.md", note("C"))]);
    let root = dir.path();
    let mut model = Inventory::load(root, &policy).expect("load");
    put(root, "01_Projects/fresh/deep/d.md", &note("D"));
    std::fs::remove_dir_all(root.join("01_Projects/old")).expect("remove");
    std::fs::remove_file(root.join("01_Projects/a.md")).expect("remove");
    let applied = model.apply(root, &policy, &ChangeSet::of_folders(["01_Projects", "01_Projects/old"])).expect("apply");
    assert_eq!(applied.walked, None);
    assert_eq!(applied.relisted, 3, "01_Projects, then the new fresh/ and fresh/deep/ whole: {applied:?}");
    let walked = Inventory::load(root, &policy).expect("walk");
    assert_eq!(summary(&model), summary(&walked));
    let folders: BTreeSet<&String> = model.dirs.keys().collect();
    assert_eq!(folders, walked.dirs.keys().collect::<BTreeSet<_>>());
    assert!(model.dirs.values().all(Option::is_some), "every folder listed is proven: {:?}", model.dirs);
}

/// A page whose bytes hash equal to those its record was analysed from (the engine's own page
/// after a write: its stamp is racy, so only its bytes can tell) is not parsed again, only its
/// stat identity taken; a byte that differs, even written within the same clock tick and at
/// the same length, is read and parsed as any outside edit.
#[test]
fn a_page_holding_the_bytes_its_record_was_analysed_from_is_not_parsed_again() {
    let page_text = |target: &str| format!("---\nx-generated-by: paravault\n---\n# Projects\n\n- [[a]] and [[{target}]]\n");
    let (dir, policy) = vault(&[("01_Projects/a.md", note("A")), ("01_Projects/_index.md", page_text("x"))]);
    let root = dir.path();
    let mut model = Inventory::load(root, &policy).expect("load");
    let page = crate::note::path::VaultPath::parse_walked("01_Projects/_index.md").expect("path");
    let told = ChangeSet::of_paths([page.as_str()]);
    let (held, edited) =
        held_then_edited(&mut model, root, &policy, (&page, crate::scan::PageKind::Catalog), &told, &page_text("b"), &page_text("c"));
    assert_eq!((held.confirmed, held.reread, held.catalog_changed), (1, 0, false), "{held:?}");
    assert_eq!((edited.confirmed, edited.reread, edited.catalog_changed), (0, 1, true), "{edited:?}");
    assert!(model.records[&page].links.iter().any(|l| l.target == "c"), "{:?}", model.records[&page]);
}

/// A folder listed again (a new folder the engine wrote a note into) compares the files the
/// model holds records of by their bytes, notes as pages: the engine's own note is not parsed
/// again, and a person's same-length edit of it right after is read and parsed.
#[test]
fn a_relisted_folders_held_note_is_compared_by_its_bytes() {
    let (dir, policy) = vault(&[("03_Resources/a.md", note("A"))]);
    let root = dir.path();
    let mut model = Inventory::load(root, &policy).expect("load");
    std::fs::create_dir(root.join("03_Resources/new")).expect("mkdir");
    let path = crate::note::path::VaultPath::parse_walked("03_Resources/new/b.md").expect("path");
    let told = ChangeSet::of_folders(["03_Resources/new"]);
    let (held, edited) = held_then_edited(&mut model, root, &policy, (&path, crate::scan::PageKind::Note), &told, &note("B"), &note("C"));
    assert_eq!((held.confirmed, held.reread), (1, 0), "{held:?}");
    assert_eq!((edited.confirmed, edited.reread), (0, 1), "{edited:?}");
}

/// The engine writes `written` at `path` and holds the record of those bytes, with no stamp
/// and a marker no parse of the file yields; applying `told` keeps that analysis (not parsed
/// again) and takes the file's stat identity. Then a person's edit right after, `edited`, of
/// the same length: applying `told` again reads and parses it (the marker gone), and the model
/// is what a walk gives. Returns the two applications.
fn held_then_edited(
    model: &mut Inventory,
    root: &std::path::Path,
    policy: &LoadedPolicy,
    (path, kind): (&crate::note::path::VaultPath, crate::scan::PageKind),
    told: &ChangeSet,
    written: &str,
    edited: &str,
) -> (super::Applied, super::Applied) {
    use crate::inventory::{FileProblem, analyse_bytes, read_record};
    put(root, path.as_str(), written);
    let mut held = NoteRecord::empty(path.clone(), kind);
    held.size_bytes = written.len() as u64;
    held.content_hash = *blake3::hash(written.as_bytes()).as_bytes();
    analyse_bytes(&mut held, written.as_bytes(), policy);
    held.problems.push(FileProblem { rule: "marker", line: None, message: "the held analysis".into() });
    model.upsert(held);
    let first = model.apply(root, policy, told).expect("apply");
    let record = &model.records[path];
    assert!(record.problems.iter().any(|p| p.rule == "marker"), "not parsed again: {record:?}");
    let fresh = read_record(root, path, kind, policy);
    assert_eq!(record.stamp.map(|(stamp, _)| stamp), fresh.stamp.map(|(stamp, _)| stamp), "its stat identity is taken");

    assert_eq!(edited.len(), written.len());
    put(root, path.as_str(), edited);
    let second = model.apply(root, policy, told).expect("apply the edit");
    let record = &model.records[path];
    assert_eq!(record.content_hash, read_record(root, path, kind, policy).content_hash);
    assert!(!record.problems.iter().any(|p| p.rule == "marker"), "{record:?}");
    let walked = Inventory::load(root, policy).expect("walk");
    assert_eq!(summary(model), summary(&walked));
    (first, second)
}
