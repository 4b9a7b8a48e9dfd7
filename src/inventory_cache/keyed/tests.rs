//! Tests of the keyed copy: a write's partial model folded back in place (`fold`) leaves every
//! table exactly as `fill` writes it from a whole load of the same disk (folder identities
//! aside: the fold keeps the ones its load proved), and the next write's load then reads only
//! the pages still unsettled.

// Fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

use std::path::Path;

use redb::ReadableMultimapTable;

use super::*;
use crate::inventory::testing::{put, settle};
use crate::store::{durable, layout};

fn note(note_type: &str, title: &str, body: &str) -> String {
    format!("---\ntype: {note_type}\ntitle: {title}\ndescription: About {title}\ntimestamp: 2026-01-01T00:00:00Z\n---\n{body}")
}

/// Everything a keyed copy holds, comparable: the header, each folder's subtree and direct
/// counts, the snapshot's top-level lines, and the raw rows of the other tables.
#[derive(Debug, PartialEq)]
struct Tables {
    header: Header,
    /// Each folder's row without its identity (the fold keeps the ones its load proved).
    folders: Vec<(String, FolderRow)>,
    snapshot_lines: String,
    records: Vec<(String, Vec<u8>)>,
    files: Vec<String>,
    linkers: Vec<(String, String)>,
    names: Vec<(String, String)>,
}

fn tables(database: &redb::ReadOnlyDatabase) -> Tables {
    let t = database.begin_read().expect("read");
    let header: Header = unseal(HEADER_KEY, t.open_table(META).expect("meta").get(HEADER_KEY).expect("get").expect("header").value())
        .expect("header decodes");
    let mut rows: Vec<(String, FolderRow)> = every_row(&t.open_table(FOLDERS).expect("folders")).expect("rows decode");
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    // The header lists exactly the rows not settled (identities aside, as below).
    let unsettled: Vec<String> = rows.iter().filter(|(_, row)| !row.settled()).map(|(dir, _)| dir.clone()).collect();
    let mut header = header;
    assert_eq!(std::mem::take(&mut header.unsettled_folders), unsettled);
    let folders = rows.into_iter().map(|(dir, row)| (dir, FolderRow { seen: None, ..row })).collect();
    let lines = t.open_table(META).expect("meta").get(SNAPSHOT_KEY).expect("get").expect("snapshot lines").value().to_vec();
    let lines = unseal_bytes(SNAPSHOT_KEY, &lines).expect("the seal holds").to_vec();
    let snapshot_lines = String::from_utf8(lines).expect("lines are text");
    let records = t
        .open_table(RECORDS)
        .expect("records")
        .iter()
        .expect("iter")
        .map(|e| {
            let (k, v) = e.expect("row");
            // When a record was read differs between two loads; what it records must not.
            let mut record: PersistedRecord = unseal(k.value(), v.value()).expect("record decodes");
            record.read_at_ns = 0;
            (k.value().to_string(), seal(k.value(), &record))
        })
        .collect();
    let files = t
        .open_table(FILES)
        .expect("files")
        .iter()
        .expect("iter")
        .map(|e| {
            let (key, seal) = e.expect("row");
            unseal_bytes(key.value(), seal.value()).expect("the seal holds");
            key.value().to_string()
        })
        .collect();
    let pairs = |table: MultimapTableDefinition<&str, &[u8]>| -> Vec<(String, String)> {
        let mut out = Vec::new();
        for entry in t.open_multimap_table(table).expect("multimap").iter().expect("iter") {
            let (key, values) = entry.expect("row");
            for value in values {
                let path = unseal_pair(key.value(), value.expect("value").value()).expect("the seal holds");
                out.push((key.value().to_string(), path.to_string()));
            }
        }
        out.sort();
        out
    };
    Tables { header, folders, snapshot_lines, records, files, linkers: pairs(LINKERS), names: pairs(NAMES) }
}

/// A vault of `files` (path, text), settled, with its keyed copy filled from a whole load;
/// returns the folder, the policy and the keyed copy's path.
fn keyed_vault(files: &[(&str, String)]) -> (tempfile::TempDir, LoadedPolicy, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let policy = LoadedPolicy::from_texts(None).expect("policy");
    std::fs::create_dir_all(root.join(".paravault")).expect("state folder");
    for (path, text) in files {
        put(root, path, text);
    }
    settle();
    let index = layout::join(root, layout::INVENTORY_INDEX);
    let whole = Inventory::load(root, &policy).expect("whole load");
    durable::write_keyed_cache(root, &index, |t| fill(&whole, &policy.digest, t)).expect("fill");
    (dir, policy, index)
}

/// A fresh keyed copy filled from a whole load of `root` now.
fn filled_from_disk(root: &Path, policy: &LoadedPolicy, at: &Path) -> Tables {
    let whole = Inventory::load(root, policy).expect("whole load");
    durable::write_keyed_cache(root, at, |t| fill(&whole, &policy.digest, t)).expect("fill");
    tables(&durable::open_keyed_cache(root, at).expect("open"))
}

#[test]
fn a_folded_partial_model_leaves_the_keyed_copy_exactly_as_a_whole_fill_of_the_disk() {
    let (dir, policy, index) = keyed_vault(&[
        ("01_Projects/alpha/a.md", note("Project", "A", "links [[b]] and [[shared]]\n")),
        ("01_Projects/alpha/deep/d.md", note("Project", "D", "deep [[a]]\n")),
        ("02_Areas/b.md", note("Area", "B", "back to [[a]] and ![[pic.png]]\n")),
        ("02_Areas/shared.md", note("Area", "Shared", "one\n")),
        ("03_Resources/refs/shared.md", note("Resource", "Shared two", "two\n")),
        ("03_Resources/refs/pic.png", "PNG\n".to_string()),
        ("03_Resources/gone.md", note("Resource", "Gone", "soon removed [[b]]\n")),
        ("02_Areas/broken.md", "---\ntype: Area\ntitle: Broken\n---\nno description\n".to_string()),
        ("2026-01-01_standup.md", note("Daily Log", "Root", "root [[a]]\n")),
    ]);
    let root = dir.path();

    // Outside the engine: an edit in place, a new note, a removal, a new nested folder.
    put(root, "02_Areas/b.md", &note("Area", "B", "now also [[d]] and [[nowhere]]\n"));
    put(root, "01_Projects/alpha/new.md", &note("Project", "New", "new [[shared]]\n"));
    std::fs::remove_file(root.join("03_Resources/gone.md")).expect("remove");
    put(root, "03_Resources/made/inner/m.md", &note("Resource", "M", "made [[a]]\n"));
    settle();

    // One write into 02_Areas, on the partial model, then folded back.
    let written = VaultPath::parse("02_Areas/w.md").expect("path");
    let text = note("Area", "W", "written [[a]] [[m]]\n");
    let database = durable::open_keyed_cache(root, &index).expect("open");
    let load = load_for_write(root, &policy, &database, &[(written.clone(), Some(text.as_str()))], 1000, FolderChecks::Now, None)
        .expect("keyed load");
    drop(database);
    assert!(load.counts.folders_relisted >= 3, "the changed folders are listed again: {:?}", load.counts);
    let mut model = load.inventory;
    // As the write's plan does (`write::recheck_consulted`): the written folder's records
    // stat'ed, and those that moved read again (an edit in place leaves the folder as it was).
    let consulted = model.direct_records("02_Areas").expect("the written folder is held");
    let told = crate::inventory::changes::ChangeSet::of_paths(consulted.iter().map(VaultPath::as_str));
    assert_eq!(model.apply(root, &policy, &told).reread, 1, "the note edited in place is read again");
    put(root, written.as_str(), &text);
    let mut record = NoteRecord::empty(written.clone(), PageKind::Note);
    inventory::analyse_bytes(&mut record, text.as_bytes(), &policy);
    record.content_hash = *blake3::hash(text.as_bytes()).as_bytes();
    model.upsert(record);
    assert!(model.in_view().is_ok());
    // What the plan reads of it is the whole model's: the snapshot, and the subtree counts of
    // the folders it holds, their ancestors and their subfolders (the root's categories).
    let whole = Inventory::load(root, &policy).expect("whole load");
    assert_eq!((model.snapshot.hash(), model.snapshot.len()), (whole.snapshot.hash(), whole.snapshot.len()));
    for dir in ["01_Projects", "02_Areas", "03_Resources"] {
        assert_eq!(model.counts.valid_per_dir.get(dir), whole.counts.valid_per_dir.get(dir), "{dir}");
    }
    for (dir, notes) in &model.counts.valid_per_dir {
        assert_eq!(whole.counts.valid_per_dir.get(dir), Some(notes), "{dir}");
    }
    durable::update_keyed_cache(root, &index, |t| fold(&model, t)).expect("fold");

    let folded = tables(&durable::open_keyed_cache(root, &index).expect("open"));
    // A whole fill lists the note just written as unsettled only inside the racy window (20 ms
    // past its mtime), which a loaded machine can pass before the fill runs: its mtime is put
    // ahead for the fill, so the comparison never depends on the machine's speed, then put back.
    let just_written = std::fs::File::options().write(true).open(root.join(written.as_str())).expect("open");
    let mtime = just_written.metadata().and_then(|m| m.modified()).expect("mtime");
    just_written.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(3600)).expect("set mtime");
    let fresh = filled_from_disk(root, &policy, &root.join(".paravault/fresh.redb"));
    just_written.set_modified(mtime).expect("restore mtime");
    drop(just_written);
    assert_eq!(folded, fresh, "the folded copy differs from a whole fill of the same disk");
    assert!(folded.header.unread_pages.iter().any(|(path, _)| path == written.as_str()), "the write's own note is listed as not settled");

    // The next write reads again only what is still unsettled (the note just written).
    settle();
    let next = VaultPath::parse("01_Projects/alpha/next.md").expect("path");
    let database = durable::open_keyed_cache(root, &index).expect("open");
    let load = load_for_write(root, &policy, &database, &[(next, Some("x"))], 1000, FolderChecks::Now, None).expect("keyed load");
    assert_eq!(load.counts.read, 1, "{:?}", load.counts);
}

#[test]
fn a_keyed_copy_left_mid_fold_by_a_killed_process_is_refused_never_trusted() {
    let (dir, policy, index) = keyed_vault(&[("01_Projects/a.md", note("Project", "A", "a\n"))]);
    let root = dir.path();
    // A fold whose process is killed while the copy is open for writing: the bytes on disk
    // at that instant (redb marks the file as needing recovery until it is closed).
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&index).expect("open");
    let database = redb::Builder::new().create_file(file).expect("writable");
    let transaction = database.begin_write().expect("write");
    transaction.open_table(META).expect("meta").insert("interrupted", &b"x"[..]).expect("insert");
    transaction.commit().expect("commit");
    let killed = root.join(".paravault/killed.redb");
    std::fs::copy(&index, &killed).expect("copy");
    drop(database);
    assert!(durable::open_keyed_cache(root, &killed).is_err(), "a copy that needs recovery is never opened");
    // The copy closed cleanly still serves.
    let database = durable::open_keyed_cache(root, &index).expect("a cleanly closed copy opens");
    let change = VaultPath::parse("01_Projects/b.md").expect("path");
    assert!(load_for_write(root, &policy, &database, &[(change, Some("x"))], 1000, FolderChecks::Now, None).is_ok());
}

/// What a write's plan can see of a partial model, comparable between two loads (when a
/// record was read aside).
fn seen_by_the_plan(model: &PartialModel) -> Vec<String> {
    let mut out: Vec<String> = model.records.values().map(|r| format!("record {} {:?} {}", r.path, r.content_hash, r.valid)).collect();
    out.extend(model.files.iter().map(|p| format!("file {p}")));
    let mut names: Vec<String> = model.by_name.iter().map(|(name, paths)| format!("name {name} {paths:?}")).collect();
    let mut linkers: Vec<String> = model.linkers.iter().map(|(key, paths)| format!("linkers {key} {paths:?}")).collect();
    let mut subtrees: Vec<String> = model.counts.valid_per_dir.iter().map(|(dir, n)| format!("subtree {dir} {n}")).collect();
    names.sort();
    linkers.sort();
    subtrees.sort();
    out.extend(names.into_iter().chain(linkers).chain(subtrees));
    out.push(format!("counts {} {} {:?} {:?}", model.counts.notes, model.counts.valid, model.counts.root_notes, model.counts.invalid));
    out.push(format!("snapshot {}", model.snapshot.hash()));
    out.extend(model.dirs.keys().map(|dir| format!("folder {dir}")));
    out
}

#[test]
fn deferred_folder_checks_load_what_checking_first_loads_and_catch_a_folder_that_moved() {
    // (path, body): each note's type from its top folder, its title from its name.
    let bodies = [
        ("01_Projects/alpha/a.md", "links [[b]] and [[target]]\n"),
        ("02_Areas/b.md", "back to [[a]]\n"),
        ("03_Resources/refs/target.md", "linked\n"),
        ("03_Resources/refs/deep/d.md", "deep [[a]]\n"),
        ("04_Archive/old/o.md", "old\n"),
    ];
    let type_of = |path: &str| match path.split('/').next() {
        Some("01_Projects") => "Project",
        Some("02_Areas") => "Area",
        Some("04_Archive") => "Archive",
        _ => "Resource",
    };
    let files: Vec<(&str, String)> =
        bodies.iter().map(|(path, body)| (*path, note(type_of(path), path.rsplit('/').next().unwrap_or(path), body))).collect();
    let (dir, policy, index) = keyed_vault(&files);
    let root = dir.path();
    let written = VaultPath::parse("02_Areas/w.md").expect("path");
    let text = note("Area", "W", "written [[target]]\n");
    let changes = [(written, Some(text.as_str()))];
    let none = BTreeSet::new();
    let deferred = |expected_moved| FolderChecks::Deferred { expected_moved, from: 0 };
    let load = |checks| {
        let database = durable::open_keyed_cache(root, &index).expect("open");
        load_for_write(root, &policy, &database, &changes, 1000, checks, None).expect("keyed load")
    };

    // Nothing moved: the deferred load is the load that checked every folder first.
    let first = load(FolderChecks::Now);
    assert!(first.pending.is_none(), "checking first leaves nothing pending");
    let later = load(deferred(&none));
    let pending = later.pending.expect("the folders the write does not load are checked later");
    assert_eq!(pending.confirm(), Ok(()));
    assert_eq!(seen_by_the_plan(&later.inventory), seen_by_the_plan(&first.inventory));

    // A note made outside in a folder the write does not load: the deferred checks catch it.
    put(root, "03_Resources/refs/target-two.md", &note("Resource", "Target two", "new\n"));
    settle();
    let later = load(deferred(&none));
    assert_eq!(later.counts.folders_relisted, 0, "{:?}", later.counts);
    let moved = later.pending.expect("pending").confirm().expect_err("the moved folder is caught");
    assert!(moved.contains("03_Resources/refs"), "{moved}");
    // Checked first, the same folder is listed again and its new note read.
    let first = load(FolderChecks::Now);
    assert_eq!((first.counts.folders_relisted, first.counts.read), (1, 1), "{:?}", first.counts);
    // Expected to move (the journal names it), it is checked at once and listed again.
    let expected = BTreeSet::from(["03_Resources/refs".to_string()]);
    let later = load(deferred(&expected));
    assert_eq!(later.pending.expect("pending").confirm(), Ok(()));
    assert_eq!(later.counts.folders_relisted, 1, "{:?}", later.counts);
    assert_eq!(seen_by_the_plan(&later.inventory), seen_by_the_plan(&first.inventory));

    // A folder removed outside, and one whose identity is not settled: caught, and checked
    // at once.
    std::fs::remove_dir_all(root.join("04_Archive/old")).expect("remove");
    settle();
    let later = load(deferred(&expected));
    let moved = later.pending.expect("pending").confirm().expect_err("the removed folder is caught");
    assert!(moved.contains("04_Archive"), "{moved}");
    assert!(
        matches!(load_for_write(root, &policy, &durable::open_keyed_cache(root, &index).expect("open"), &changes, 1000, FolderChecks::Now, None), Err(e) if e.reason.contains("vanished"))
    );

    // Fewer folders to defer than `from`: every folder is checked first.
    let database = durable::open_keyed_cache(root, &index).expect("open");
    let few = FolderChecks::Deferred { expected_moved: &none, from: 1000 };
    assert!(matches!(load_for_write(root, &policy, &database, &changes, 1000, few, None), Err(e) if e.reason.contains("vanished")));
}

/// Rewrites the keyed copy at `index`: `01_Projects`'s identity forgotten (not settled), and
/// the header's list of folders not settled set to `listed`.
fn unsettle_projects(root: &Path, index: &Path, listed: Vec<String>) {
    durable::update_keyed_cache(root, index, |t| {
        let mut meta = t.open_table(META)?;
        let mut header: Header = unseal(HEADER_KEY, meta.get(HEADER_KEY)?.expect("header").value()).expect("decodes");
        header.unsettled_folders = listed;
        meta.insert(HEADER_KEY, seal(HEADER_KEY, &header).as_slice())?;
        let mut folders = t.open_table(FOLDERS)?;
        let mut row = folder_row(&folders, "01_Projects").expect("row decodes").expect("a row of 01_Projects");
        row.seen = None;
        let key = folder_key("01_Projects");
        folders.insert(key.as_str(), seal(&key, &row).as_slice())?;
        Ok(())
    })
    .expect("copy rewritten");
}

#[test]
fn a_folder_not_settled_is_checked_at_once_and_a_header_that_does_not_list_it_voids_the_deferred_checks() {
    let (dir, policy, index) =
        keyed_vault(&[("01_Projects/a.md", note("Project", "A", "a\n")), ("02_Areas/b.md", note("Area", "B", "b\n"))]);
    let root = dir.path();
    let text = note("Area", "W", "w\n");
    let changes = [(VaultPath::parse("02_Areas/w.md").expect("path"), Some(text.as_str()))];
    let none = BTreeSet::new();
    let load = || {
        let database = durable::open_keyed_cache(root, &index).expect("open");
        load_for_write(root, &policy, &database, &changes, 1000, FolderChecks::Deferred { expected_moved: &none, from: 0 }, None)
            .expect("keyed load")
    };
    let settled = load();
    assert_eq!(settled.counts.folders_relisted, 0, "{:?}", settled.counts);
    assert_eq!(settled.pending.expect("pending").confirm(), Ok(()));

    // A folder the header lists as not settled is checked at once and listed again.
    unsettle_projects(root, &index, vec!["01_Projects".into()]);
    let listed = load();
    assert_eq!(listed.counts.folders_relisted, 1, "{:?}", listed.counts);
    assert_eq!(listed.pending.expect("pending").confirm(), Ok(()));

    // A header whose list leaves it out (the list and the rows disagree): the helper meets
    // the row not settled and voids the load, so the write checks every folder first.
    unsettle_projects(root, &index, Vec::new());
    let voided = load().pending.expect("pending").confirm().expect_err("a row not settled, not checked at once");
    assert!(voided.contains("not settled"), "{voided}");
}

/// A keyed load of `changes` from the copy at `index` that asks `journal` (checks deferred
/// from the first folder on, none expected to move).
fn load_asking(
    root: &Path,
    policy: &LoadedPolicy,
    index: &Path,
    changes: &[(VaultPath, Option<&str>)],
    journal: AskJournal<'_>,
) -> WriteLoad {
    let database = durable::open_keyed_cache(root, index).expect("open");
    let none = BTreeSet::new();
    load_for_write(root, policy, &database, changes, 1000, FolderChecks::Deferred { expected_moved: &none, from: 0 }, Some(journal))
        .expect("keyed load")
}

#[test]
fn a_folder_journal_spares_the_stat_of_every_folder_it_vouches_for_and_names_the_ones_to_check() {
    let (dir, policy, index) = keyed_vault(&[
        ("01_Projects/a.md", note("Project", "A", "a\n")),
        ("02_Areas/b.md", note("Area", "B", "b\n")),
        ("03_Resources/refs/r.md", note("Resource", "R", "r\n")),
    ]);
    let root = dir.path();
    let text = note("Area", "W", "w\n");
    let changes = [(VaultPath::parse("02_Areas/w.md").expect("path"), Some(text.as_str()))];
    let load = |journal: AskJournal<'_>| load_asking(root, &policy, &index, &changes, journal);
    let position = |seq| JournalToken { epoch: 7, seq };

    // A copy filled whole records no position: the journal cannot say what changed since, so
    // every folder is checked, and the load asks for a fold that records the journal's position.
    let cannot_say = |_since: Option<JournalToken>| Some(JournalAnswer::new(position(3), None));
    let first = load(&cannot_say);
    assert!(first.journal_behind);
    assert_eq!(first.counts.folders_by_journal, 0, "{:?}", first.counts);
    assert_eq!(first.pending.expect("the other folders are checked").confirm(), Ok(()));
    durable::update_keyed_cache(root, &index, |t| fold(&first.inventory, t)).expect("fold");
    assert_eq!(tables(&durable::open_keyed_cache(root, &index).expect("open")).header.journal_token, Some(position(3)));

    // A note made outside in a folder the write does not load. A journal that names nothing
    // is asked since the recorded position and trusted: no folder but the loaded ones is
    // stat'ed, nothing is checked later, nothing listed again.
    put(root, "03_Resources/refs/target-two.md", &note("Resource", "Target two", "new\n"));
    settle();
    let asked = std::cell::Cell::new(None);
    let names_nothing = |since: Option<JournalToken>| {
        asked.set(Some(since));
        Some(JournalAnswer::new(position(5), Some(BTreeMap::new())))
    };
    let trusting = load(&names_nothing);
    assert_eq!(asked.get(), Some(Some(position(3))), "asked since the copy's position");
    assert!(trusting.pending.is_none() && !trusting.journal_behind);
    // The root and 02_Areas are loaded (stat'ed); 01_Projects, 03_Resources and its refs are not.
    assert_eq!(trusting.counts.folders_by_journal, 3, "{:?}", trusting.counts);
    assert_eq!((trusting.counts.folders_relisted, trusting.counts.read), (0, 0), "{:?}", trusting.counts);
    assert_eq!(trusting.inventory.journal_token, Some(position(5)));

    // Named as a whole by the journal, the folder is stat'ed at once, listed again and its new
    // note read.
    let names_refs = |_since: Option<JournalToken>| {
        Some(JournalAnswer::new(position(6), Some(BTreeMap::from([("03_Resources/refs".to_string(), FolderChange::Whole)]))))
    };
    let named = load(&names_refs);
    assert!(named.pending.is_none());
    assert_eq!((named.counts.folders_relisted, named.counts.read, named.counts.folders_by_journal), (1, 1, 2), "{:?}", named.counts);

    // No journal answering: the deferred checks of every folder, as before.
    let silent = |_since: Option<JournalToken>| None;
    let unproven = load(&silent);
    assert!(!unproven.journal_behind);
    assert!(unproven.pending.expect("checked later").confirm().expect_err("the moved folder is caught").contains("03_Resources/refs"));
}

#[test]
fn a_folder_journal_that_names_entries_spares_their_folder_a_listing_and_loads_what_a_listing_would() {
    let (dir, policy, index) = keyed_vault(&[
        ("01_Projects/a.md", note("Project", "A", "links [[r]] and [[t]]\n")),
        ("03_Resources/refs/r.md", note("Resource", "R", "r\n")),
        ("03_Resources/refs/gone.md", note("Resource", "Gone", "soon removed\n")),
        ("03_Resources/refs/pic.png", "PNG\n".to_string()),
        ("03_Resources/refs/deep/d.md", note("Resource", "D", "d\n")),
    ]);
    let root = dir.path();
    let text = note("Resource", "W", "written [[t]]\n");
    let changes = [(VaultPath::parse("03_Resources/refs/w.md").expect("path"), Some(text.as_str()))];
    let load = |journal: AskJournal<'_>| load_asking(root, &policy, &index, &changes, journal);
    let position = |seq| JournalToken { epoch: 9, seq };
    let fold_into_copy = |model: &PartialModel| durable::update_keyed_cache(root, &index, |t| fold(model, t)).expect("fold");
    let first = load(&|_since: Option<JournalToken>| Some(JournalAnswer::new(position(1), None)));
    assert_eq!(first.pending.expect("checked").confirm(), Ok(()));
    fold_into_copy(&first.inventory);

    // Outside the engine, in the folder the write loads: a new note, a note replaced by a
    // rename (as editors save), a removal, and a temporary file that came and went.
    put(root, "03_Resources/refs/t.md", &note("Resource", "T", "new\n"));
    put(root, "03_Resources/refs/.r.md.swp", &note("Resource", "R", "r, edited\n"));
    std::fs::rename(root.join("03_Resources/refs/.r.md.swp"), root.join("03_Resources/refs/r.md")).expect("rename");
    std::fs::remove_file(root.join("03_Resources/refs/gone.md")).expect("remove");
    settle();
    let entries = |names: &[&str]| FolderChange::Entries(names.iter().map(|n| n.to_string()).collect());
    let named = entries(&["t.md", ".r.md.swp", "r.md", "gone.md", ".pv-tmp-0000"]);
    let answer = Some(JournalAnswer::new(position(2), Some(BTreeMap::from([("03_Resources/refs".to_string(), named)]))));
    let by_entries = load(&|since| {
        assert_eq!(since, Some(position(1)));
        answer.clone()
    });
    assert!(by_entries.pending.is_none());
    let counts = by_entries.counts;
    assert_eq!((counts.folders_relisted, counts.folders_by_entries, counts.read, counts.forgotten), (0, 1, 2, 1), "{counts:?}");
    // What the plan sees is what a listing of the folder gives (the journal naming it whole).
    let whole = load(&|_since| {
        Some(JournalAnswer::new(position(2), Some(BTreeMap::from([("03_Resources/refs".to_string(), FolderChange::Whole)]))))
    });
    assert_eq!(whole.counts.folders_relisted, 1, "{:?}", whole.counts);
    assert_eq!(seen_by_the_plan(&by_entries.inventory), seen_by_the_plan(&whole.inventory));
    let from_disk = Inventory::load(root, &policy).expect("whole load");
    assert_eq!(by_entries.inventory.snapshot.hash(), from_disk.snapshot.hash());

    // Folded, the copy is a whole fill of the disk (identities aside: the folder keeps the one
    // of its last listing).
    fold_into_copy(&by_entries.inventory);
    let folded = tables(&durable::open_keyed_cache(root, &index).expect("open"));
    assert_eq!(folded.header.journal_token, Some(position(2)));
    let mut folded = folded;
    folded.header.journal_token = None;
    assert_eq!(folded, filled_from_disk(root, &policy, &root.join(".paravault/fresh.redb")));

    // The journal names nothing since: the folder is as the copy holds it, although its row
    // holds no identity (its entries changed since its last listing), so nothing is listed or
    // read.
    settle();
    let trusted = load(&|_since| Some(JournalAnswer::new(position(3), Some(BTreeMap::new()))));
    assert_eq!((trusted.counts.folders_relisted, trusted.counts.read), (0, 0), "{:?}", trusted.counts);
    // Without a journal, the folder's identity decides: it has none, so it is listed again
    // (checked at once).
    let unproven = load(&|_since| None);
    assert_eq!(unproven.counts.folders_relisted, 1, "{:?}", unproven.counts);
    assert_eq!(unproven.pending.expect("checked later").confirm(), Ok(()));

    // Folded after that listing, the folder's row holds its identity again. An edit in place
    // whose tool then sets the file's times (`touch`, `cp -p`, rsync: an attribute change the
    // journal names) leaves the folder's identity as it was; the named entry is read again
    // although the folder's stat matches its row.
    fold_into_copy(&unproven.inventory);
    settle();
    std::fs::write(root.join("03_Resources/refs/r.md"), note("Resource", "R", "r, edited in place\n")).expect("edit");
    settle();
    let in_place = load(&|_since| {
        Some(JournalAnswer::new(position(4), Some(BTreeMap::from([("03_Resources/refs".to_string(), entries(&["r.md"]))]))))
    });
    assert_eq!(
        (in_place.counts.folders_relisted, in_place.counts.folders_by_entries, in_place.counts.read),
        (0, 1, 1),
        "{:?}",
        in_place.counts
    );

    // An entry whose bookkeeping only a listing redoes (a link in place of a note): the folder
    // is listed again.
    std::fs::remove_file(root.join("03_Resources/refs/t.md")).expect("remove");
    std::os::unix::fs::symlink("r.md", root.join("03_Resources/refs/t.md")).expect("link");
    settle();
    let linked = load(&|_since| {
        Some(JournalAnswer::new(position(4), Some(BTreeMap::from([("03_Resources/refs".to_string(), entries(&["t.md"]))]))))
    });
    assert_eq!((linked.counts.folders_relisted, linked.counts.folders_by_entries), (1, 0), "{:?}", linked.counts);
    assert!(linked.inventory.symlinked_notes.iter().any(|p| p.as_str() == "03_Resources/refs/t.md"));
    // A new folder named as an entry of its parent is listed whole.
    put(root, "03_Resources/refs/new/n.md", &note("Resource", "N", "n\n"));
    settle();
    let made =
        load(&|_since| Some(JournalAnswer::new(position(5), Some(BTreeMap::from([("03_Resources/refs".to_string(), entries(&["new"]))])))));
    assert_eq!((made.counts.folders_relisted, made.counts.folders_by_entries, made.counts.read), (1, 1, 1), "{:?}", made.counts);
    assert!(made.inventory.records.keys().any(|p| p.as_str() == "03_Resources/refs/new/n.md"));
}

/// What the old whole-file copy held of `inventory`, and what a whole load must read back:
/// the settled records (as persisted, by path), the pages not settled, the attachments, the
/// symbolic links, the names no vault path may hold, every folder's identity, the ignore flag.
type KnownSummary = (Vec<(String, Vec<u8>)>, Vec<(String, PageKind)>, Vec<String>, Vec<String>, Vec<String>, Vec<(String, String)>, bool);

fn known_summary(known: &KnownVault) -> KnownSummary {
    let mut records: Vec<(String, Vec<u8>)> = known
        .records
        .iter()
        .map(|r| (r.path.to_string(), postcard::to_stdvec(&persisted_record(r).expect("settled")).expect("encodes")))
        .collect();
    records.sort();
    let mut unread: Vec<(String, PageKind)> = known.unread_pages.iter().map(|(p, kind)| (p.to_string(), *kind)).collect();
    unread.sort_by(|a, b| a.0.cmp(&b.0));
    let sorted = |paths: &[VaultPath]| {
        let mut out: Vec<String> = paths.iter().map(ToString::to_string).collect();
        out.sort();
        out
    };
    let mut unusable: Vec<String> = known.unusable_names.iter().map(UnusableName::shown).collect();
    unusable.sort();
    let mut dirs: Vec<(String, String)> = known.dirs.iter().map(|(dir, seen)| (dir.clone(), format!("{seen:?}"))).collect();
    dirs.sort();
    (records, unread, sorted(&known.attachments), sorted(&known.symlinked_notes), unusable, dirs, known.ignore_files)
}

fn expected_summary(inventory: &Inventory) -> KnownSummary {
    let known = KnownVault {
        records: inventory.records.values().filter(|r| settled(r)).cloned().collect(),
        unread_pages: inventory.records.values().filter(|r| !settled(r)).map(|r| (r.path.clone(), r.kind)).collect(),
        attachments: inventory.files.iter().filter(|p| !inventory.records.contains_key(*p)).cloned().collect(),
        symlinked_notes: inventory.symlinked_notes.to_vec(),
        unusable_names: inventory.unusable_names.clone(),
        dirs: inventory.dirs.iter().map(|(dir, seen)| (dir.clone(), *seen)).collect(),
        ignore_files: inventory.ignore_files,
    };
    known_summary(&known)
}

#[test]
fn a_whole_load_reads_back_from_the_keyed_copy_everything_the_model_persisted() {
    let (dir, policy, index) = keyed_vault(&[
        ("01_Projects/alpha/a.md", note("Project", "A", "links [[b]]\n")),
        ("01_Projects/alpha/deep/d.md", note("Project", "D", "deep [[a]]\n")),
        ("02_Areas/b.md", note("Area", "B", "back to [[a]] and ![[pic.png]]\n")),
        ("02_Areas/broken.md", "---\ntype: Area\ntitle: Broken\n---\nno description\n".to_string()),
        ("03_Resources/refs/pic.png", "PNG\n".to_string()),
        ("03_Resources/empty/.keep", String::new()),
        ("02_Areas/line\nbreak.md", note("Area", "L", "l\n")),
        ("2026-01-01_standup.md", note("Daily Log", "Root", "root [[a]]\n")),
    ]);
    let root = dir.path();
    std::os::unix::fs::symlink("/etc/hostname", root.join("01_Projects/link.md")).expect("symlink");
    settle();
    // A page written just before the load is racy: listed as not settled, its record not kept.
    put(root, "02_Areas/fresh.md", &note("Area", "Fresh", "new\n"));
    let whole = Inventory::load(root, &policy).expect("whole load");
    assert!(whole.records.values().any(|r| !settled(r)), "the fixture holds a page not settled");
    assert!(!whole.symlinked_notes.is_empty() && !whole.unusable_names.is_empty());
    durable::write_keyed_cache(root, &index, |t| fill(&whole, &policy.digest, t)).expect("fill");
    let database = durable::open_keyed_cache(root, &index).expect("open");
    let known = read_known(&database, &policy).expect("a copy this engine wrote is read");
    assert_eq!(known_summary(&known), expected_summary(&whole));

    // After a write's fold the copy is read back as a whole fill of the same disk would be.
    settle();
    put(root, "02_Areas/later.md", &note("Area", "Later", "later\n"));
    settle();
    let change = VaultPath::parse("02_Areas/next.md").expect("path");
    let load = load_for_write(root, &policy, &database, &[(change, None)], 1000, FolderChecks::Now, None).expect("keyed load");
    drop(database);
    durable::update_keyed_cache(root, &index, |t| fold(&load.inventory, t)).expect("fold");
    let folded = read_known(&durable::open_keyed_cache(root, &index).expect("open"), &policy).expect("read after the fold");
    let whole = Inventory::load(root, &policy).expect("whole load");
    let (mut got, mut want) = (known_summary(&folded), expected_summary(&whole));
    // Folder identities: the fold keeps the ones its load proved, a fresh load takes new ones.
    (got.5, want.5) =
        (got.5.iter().map(|(d, _)| (d.clone(), String::new())).collect(), want.5.iter().map(|(d, _)| (d.clone(), String::new())).collect());
    // When a record was read differs between two loads; what it records must not.
    for (_, bytes) in got.0.iter_mut().chain(want.0.iter_mut()) {
        let mut record: PersistedRecord = postcard::from_bytes(bytes).expect("decodes");
        record.read_at_ns = 0;
        *bytes = postcard::to_stdvec(&record).expect("encodes");
    }
    assert_eq!(got, want);
}

/// A fresh copy of a two-file vault with one value rewritten raw by `change`, as damage at rest
/// would leave it; returns why the whole load and a write's load each refuse it.
fn refusals_after(change: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>) -> (String, String) {
    let (dir, policy, index) =
        keyed_vault(&[("01_Projects/a.md", note("Project", "Alpha", "a\n")), ("01_Projects/pic.png", "PNG\n".to_string())]);
    let root = dir.path();
    durable::update_keyed_cache(root, &index, change).expect("copy damaged");
    let database = durable::open_keyed_cache(root, &index).expect("open");
    let whole = read_known(&database, &policy).expect_err("the whole load refuses it");
    let written = VaultPath::parse("01_Projects/b.md").expect("path");
    let partial = load_for_write(root, &policy, &database, &[(written, Some("x"))], 1000, FolderChecks::Now, None);
    (whole, partial.err().expect("the write's load refuses it").reason)
}

#[test]
fn a_damaged_value_or_key_or_a_foreign_header_is_refused_never_trusted() {
    // A record whose bytes changed under its seal (the title `Alpha` became `alpha`).
    let (whole, partial) = refusals_after(|t| {
        let mut records = t.open_table(RECORDS)?;
        let key = entry_key("01_Projects/a.md");
        let mut bytes = records.get(key.as_str())?.expect("the record").value().to_vec();
        let at = bytes.windows(5).position(|w| w == b"Alpha").expect("the title");
        bytes[at] = b'a';
        records.insert(key.as_str(), bytes.as_slice())?;
        Ok(())
    });
    assert!(whole.starts_with("checksum mismatch") && partial.starts_with("checksum mismatch"), "{whole} / {partial}");

    // A key changed under its value (an attachment's name, one byte off).
    let (whole, partial) = refusals_after(|t| {
        let mut table = t.open_table(FILES)?;
        let seal = table.remove(entry_key("01_Projects/pic.png").as_str())?.expect("the file").value().to_vec();
        table.insert(entry_key("01_Projects/pic.pnh").as_str(), seal.as_slice())?;
        Ok(())
    });
    assert!(whole.starts_with("checksum mismatch") && partial.starts_with("checksum mismatch"), "{whole} / {partial}");

    // Another format, sealed as this engine seals: never read as this one.
    let (whole, partial) = refusals_after(|t| {
        let mut meta = t.open_table(META)?;
        let mut header: Header = unseal(HEADER_KEY, meta.get(HEADER_KEY)?.expect("header").value()).expect("decodes");
        header.format = 8;
        meta.insert(HEADER_KEY, seal(HEADER_KEY, &header).as_slice())?;
        Ok(())
    });
    assert_eq!((whole.as_str(), partial.as_str()), ("format version 8, this engine reads 10", "format version 8, this engine reads 10"));
}

/// The link and name tables are sealed as every other value: a path damaged at rest under a
/// link key or a file name is refused by the write's load that consults it, never taken as a
/// note linking there or a file of that name.
#[test]
fn a_damaged_linker_or_name_is_refused_by_the_write_that_consults_it() {
    let damaged = |table: MultimapTableDefinition<&'static str, &'static [u8]>, key: &'static str, from: &'static str| {
        let (dir, policy, index) =
            keyed_vault(&[("01_Projects/a.md", note("Project", "Alpha", "See [[b]].\n")), ("02_Areas/b.md", note("Area", "Beta", "b\n"))]);
        let root = dir.path();
        durable::update_keyed_cache(root, &index, |t| {
            let mut pairs = t.open_multimap_table(table)?;
            assert!(pairs.remove(key, seal_pair(key, from).as_slice())?, "the pair {key} → {from} is in the copy");
            // The path's last byte changed under its seal, as damage at rest would leave it.
            let mut bytes = seal_pair(key, from);
            bytes[from.len() - 1] = b'x';
            pairs.insert(key, bytes.as_slice())?;
            Ok(())
        })
        .expect("copy damaged");
        let database = durable::open_keyed_cache(root, &index).expect("open");
        // A whole load does not read these tables (it derives them from the records).
        read_known(&database, &policy).expect("the whole load derives links and names from the records");
        let written = VaultPath::parse("02_Areas/b.md").expect("path");
        let partial = load_for_write(root, &policy, &database, &[(written, Some("x"))], 1000, FolderChecks::Now, None);
        partial.err().expect("the write's load refuses it").reason
    };
    let linker = damaged(LINKERS, "b", "01_Projects/a.md");
    assert!(linker.starts_with("checksum mismatch"), "{linker}");
    let name = damaged(NAMES, "b.md", "02_Areas/b.md");
    assert!(name.starts_with("checksum mismatch"), "{name}");
}
