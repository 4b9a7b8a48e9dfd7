//! A write's model proven by folder checks (`Inventory::load_checking_folders`): a process
//! that starts and writes reuses the persisted inventory after a stat of every folder, not of
//! every file. These tests change the vault outside the engine between processes and check
//! that the write still sees every create, delete and rename (its link check), every edit of
//! a file it consults (the touched note, its folder's catalog rows), and that a model it
//! cannot trust is rebuilt.

use std::path::Path;
use std::time::Duration;

use paravault::Vault;
use paravault::inventory::{Inventory, NoteRecord};
use paravault::note::path::VaultPath;

use crate::support::{ingest, note, vault};

const BASE: &str = "-- 01_Projects/hub.md --\n---\ntype: Project\ntitle: Hub\ndescription: The hub\ntimestamp: 2026-01-01T00:00:00Z\n---\nSee [[spoke]].\n-- 01_Projects/spoke.md --\n---\ntype: Project\ntitle: Spoke\ndescription: A spoke\ntimestamp: 2026-01-01T00:00:00Z\n---\nBack to [[hub]].\n-- 02_Areas/area.md --\n---\ntype: Area\ntitle: Area\ndescription: An area\ntimestamp: 2026-01-01T00:00:00Z\n---\nAn area note.\n";

/// A vault whose persisted inventory holds settled records and folder identities (written by a
/// whole-vault reader more than a timestamp tick after the files were).
fn persisted(fixture: &str) -> tempfile::TempDir {
    let (dir, vault) = vault(fixture);
    drop(vault);
    std::thread::sleep(Duration::from_millis(60));
    let reader = open(dir.path());
    reader.lint().unwrap();
    drop(reader);
    assert!(dir.path().join(".paravault/inventory.redb").is_file());
    dir
}

fn open(root: &Path) -> Vault {
    Vault::open(root, crate::support::options()).unwrap()
}

/// A fresh process writes one note linking `[[target]]`; returns the error code, if refused.
/// Asserts the write's model was loaded by folder checks (the path under test).
fn write_linking(root: &Path, name: &str, target: &str) -> Option<String> {
    let vault = open(root);
    let result = vault.ingest_note(&ingest(name, &format!("See [[{target}]].\n")));
    let load = vault.freshness().load;
    assert!(load.by_folders, "the write's model was loaded by folder checks: {load:?}");
    result.err().map(|e| {
        assert!(e.code() != "lint_gate_rejected" || e.to_string().contains(target), "{e}");
        e.code().to_string()
    })
}

#[test]
fn a_writes_link_check_sees_outside_creates_deletes_and_renames_in_other_folders() {
    let dir = persisted(BASE);
    let root = dir.path();
    let refused = Some("lint_gate_rejected".to_string());
    assert_eq!(write_linking(root, "01_Projects/first", "target"), refused, "no target yet");

    // Created outside, in another folder and in a new subfolder.
    std::fs::write(root.join("02_Areas/target.md"), note("Area", "Target", "x\n")).unwrap();
    std::fs::create_dir_all(root.join("02_Areas/sub/deeper")).unwrap();
    std::fs::write(root.join("02_Areas/sub/deeper/deep.md"), note("Area", "Deep", "x\n")).unwrap();
    assert_eq!(write_linking(root, "01_Projects/first", "target"), None, "the outside create is seen");
    assert_eq!(write_linking(root, "01_Projects/second", "sub/deeper/deep"), None, "a new subfolder is listed whole");

    // Deleted outside.
    std::fs::remove_file(root.join("02_Areas/target.md")).unwrap();
    assert_eq!(write_linking(root, "01_Projects/third", "target"), refused, "the outside delete is seen");

    // Renamed outside: a file within its folder, then a whole folder.
    std::fs::rename(root.join("02_Areas/area.md"), root.join("02_Areas/renamed.md")).unwrap();
    assert_eq!(write_linking(root, "01_Projects/fourth", "area"), refused, "the old name is gone");
    assert_eq!(write_linking(root, "01_Projects/fourth", "renamed"), None, "the new name resolves");
    std::fs::rename(root.join("02_Areas/sub"), root.join("02_Areas/moved")).unwrap();
    assert_eq!(write_linking(root, "01_Projects/fifth", "sub/deeper/deep"), refused, "the moved folder's old path is gone");
    assert_eq!(write_linking(root, "01_Projects/fifth", "moved/deeper/deep"), None, "its new path resolves");

    // A whole-vault reader in the same process as a folder-checked write walks the vault
    // first, so it sees an edit no folder identity shows (an edit in place).
    let area = root.join("02_Areas/renamed.md");
    std::fs::write(&area, "no frontmatter at all\n").unwrap();
    let vault = open(root);
    vault.ingest_note(&ingest("01_Projects/sixth", "plain\n")).unwrap();
    assert!(vault.freshness().load.by_folders);
    let rules = crate::support::rules(&vault.lint().unwrap());
    assert!(rules.contains(&("metadata-missing".into(), "02_Areas/renamed.md".into())), "{rules:?}");
    assert_eq!(vault.freshness().stat_walks, 1, "{:?}", vault.freshness());
}

#[test]
fn an_outside_edit_of_the_touched_note_is_refused_and_kept() {
    let dir = persisted(BASE);
    let root = dir.path();
    let hub = root.join("01_Projects/hub.md");
    let before = std::fs::read_to_string(&hub).unwrap();
    let sha = paravault::write::sha256_hex(before.as_bytes());
    // Same length, so only the content (and the stat identity) tells it apart.
    let edited = before.replace("See [[spoke]].", "See [[spake]].");
    assert_eq!(edited.len(), before.len());
    std::fs::write(&hub, &edited).unwrap();

    // Before the write began: the caller's expected pre-image no longer holds.
    let vault = open(root);
    let error = vault
        .propose_memory_change("01_Projects/hub.md", &note("Project", "Hub", "agent text\n"), None, Some(&sha))
        .and_then(|proposal| vault.apply_stored_proposal(&proposal.proposal_id, true))
        .unwrap_err();
    assert_eq!(error.code(), "precondition_failed", "{error}");
    assert!(error.to_string().contains("01_Projects/hub.md"), "{error}");
    assert_eq!(std::fs::read_to_string(&hub).unwrap(), edited, "the person's edit is on disk");
    drop(vault);

    // Between the plan and the apply, in a process whose model was loaded by folder checks.
    std::thread::sleep(Duration::from_millis(60));
    let current = paravault::write::sha256_hex(edited.as_bytes());
    let again = format!("{edited}A SECOND EDIT\n");
    let (path, text) = (hub.clone(), again.clone());
    let vault = open(root);
    paravault::store::faults::arm_hook("after_commit", move || std::fs::write(&path, &text).unwrap());
    let error = vault
        .propose_memory_change("01_Projects/hub.md", &note("Project", "Hub", "agent text\n"), None, Some(&current))
        .and_then(|proposal| vault.apply_stored_proposal(&proposal.proposal_id, true))
        .unwrap_err();
    assert!(vault.freshness().load.by_folders, "{:?}", vault.freshness());
    assert_eq!(error.code(), "precondition_failed", "{error}");
    assert_eq!(std::fs::read_to_string(&hub).unwrap(), again, "the second edit is on disk");
}

#[test]
fn a_write_rechecks_the_records_its_catalog_lists() {
    let dir = persisted(BASE);
    let root = dir.path();
    // An edit in place (the folder's identity does not move): the new title must reach the
    // folder's catalog that the next write regenerates.
    let spoke = root.join("01_Projects/spoke.md");
    let text = std::fs::read_to_string(&spoke).unwrap().replace("title: Spoke", "title: Wheel");
    std::fs::write(&spoke, text).unwrap();
    let vault = open(root);
    vault.ingest_note(&ingest("01_Projects/new", "body\n")).unwrap();
    assert!(vault.freshness().load.by_folders);
    let catalog = std::fs::read_to_string(root.join("01_Projects/_index.md")).unwrap();
    assert!(catalog.contains("Wheel") && !catalog.contains("Spoke"), "{catalog}");
}

#[test]
fn a_corrupt_or_foreign_persisted_inventory_is_rebuilt_by_a_write() {
    let dir = persisted(BASE);
    let root = dir.path();
    // A byte damaged at rest inside one record (the title `Spoke` becomes `spoke`: still a
    // record that decodes, so only its seal tells).
    crate::support::damage_persisted_inventory(root, b"Spoke");
    std::fs::write(root.join("02_Areas/target.md"), note("Area", "Target", "x\n")).unwrap();
    let vault = open(root);
    vault.ingest_note(&ingest("01_Projects/first", "See [[target]].\n")).unwrap();
    let freshness = vault.freshness();
    assert!(freshness.inventory_cache.starts_with("rebuilt: checksum"), "{freshness:?}");
    assert!(!freshness.load.by_folders, "an untrusted model is rebuilt by a walk: {freshness:?}");
    assert!(vault.ingest_note(&ingest("01_Projects/second", "See [[missing]].\n")).is_err());
    let catalog = std::fs::read_to_string(root.join("01_Projects/_index.md")).unwrap();
    assert!(catalog.contains("Spoke"), "the catalog row comes from the note, not the damaged copy: {catalog}");
    drop(vault);
    // A file that is not a copy at all (another engine's, or a torn one) is never read as one.
    std::fs::write(root.join(".paravault/inventory.redb"), b"PVINVENT\x03\x00\x00\x00 not a redb database").unwrap();
    let vault = open(root);
    vault.ingest_note(&ingest("01_Projects/third", "See [[target]].\n")).unwrap();
    assert!(vault.freshness().inventory_cache.starts_with("rebuilt: unreadable"), "{:?}", vault.freshness());
}

/// Writes `inventory` as the persisted inventory of `root`, as a process does; returns its path.
fn persist(root: &Path, inventory: &Inventory, policy: &paravault::policy::LoadedPolicy) -> std::path::PathBuf {
    use paravault::store::{durable, layout};
    let index = layout::join(root, layout::INVENTORY_INDEX);
    durable::write_keyed_cache(root, &index, |t| paravault::inventory_cache::keyed::fill(inventory, &policy.digest, t)).unwrap();
    index
}

/// The whole model as the persisted inventory at `index` holds it.
fn read_known(root: &Path, index: &Path, policy: &paravault::policy::LoadedPolicy) -> paravault::inventory::KnownVault {
    let database = paravault::store::durable::open_keyed_cache(root, index).unwrap();
    paravault::inventory_cache::keyed::read_known(&database, policy).unwrap()
}

/// What a model says is on disk: every file, each page's content hash, the symbolic links,
/// the names no vault path may hold.
type ModelSummary = (Vec<String>, Vec<(String, [u8; 32])>, Vec<String>, Vec<String>);

fn summary(inventory: &Inventory) -> ModelSummary {
    let files = inventory.files.iter().map(ToString::to_string).collect();
    let records = inventory.records.values().map(|r: &NoteRecord| (r.path.to_string(), r.content_hash)).collect();
    let symlinks = inventory.symlinked_notes.iter().map(ToString::to_string).collect();
    let unusable = inventory.unusable_names.iter().map(paravault::scan::UnusableName::shown).collect();
    (files, records, symlinks, unusable)
}

/// The folder-checked model equals a fresh walk after every kind of outside change, once the
/// files it reused without a stat (edits in place) are re-checked.
#[test]
fn a_folder_checked_model_equals_a_walk_after_outside_changes() {
    let (dir, vault) =
        vault(&format!("{BASE}-- 03_Resources/a/b/c.md --\n{}-- 03_Resources/img.png --\npng\n", note("Resource", "C", "c\n")));
    let root = dir.path();
    let policy = vault.policy();
    std::thread::sleep(Duration::from_millis(60));
    let known = Inventory::load(root, policy).unwrap();
    let index = persist(root, &known, policy);

    std::fs::write(root.join("02_Areas/new.md"), note("Area", "New", "n\n")).unwrap();
    std::fs::remove_file(root.join("03_Resources/img.png")).unwrap();
    std::fs::write(root.join("03_Resources/a/doc.pdf"), "pdf").unwrap();
    std::fs::rename(root.join("03_Resources/a/b"), root.join("03_Resources/a/z")).unwrap();
    std::fs::create_dir_all(root.join("00_Inbox/x/y")).unwrap();
    std::fs::write(root.join("00_Inbox/x/y/inbox.md"), note("Resource", "In", "i\n")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", root.join("01_Projects/link.md")).unwrap();
    std::fs::write(root.join("01_Projects/hub.md"), "edited in place\n").unwrap();
    // Names no vault path may hold: a note, and a folder hiding a note.
    std::fs::write(root.join("02_Areas/line\nbreak.md"), note("Area", "L", "l\n")).unwrap();
    std::fs::create_dir_all(root.join("00_Inbox/x/tab\tdir")).unwrap();
    std::fs::write(root.join("00_Inbox/x/tab\tdir/hidden.md"), note("Resource", "H", "h\n")).unwrap();

    let decoded = read_known(root, &index, policy);
    let (mut checked, _, load) = Inventory::load_checking_folders(root, policy, decoded).unwrap().expect("checkable by folders");
    assert!(load.by_folders && load.folders_relisted >= 4, "{load:?}");
    assert!(!checked.files_checked);
    let hub = VaultPath::parse("01_Projects/hub.md").unwrap();
    let rechecked = checked.apply(root, policy, &paravault::inventory::changes::ChangeSet::of_paths([hub.as_str()])).expect("re-check");
    // Read again either way; `confirmed` when the load's relisting had already read the edit
    // (its stamp racy, so the re-check reads the bytes and finds the record's own).
    assert_eq!(rechecked.reread + rechecked.confirmed, 1, "the edit in place is looked at by the re-check: {rechecked:?} {load:?}");
    let walked = Inventory::load(root, policy).unwrap();
    assert_eq!(summary(&checked), summary(&walked));
    assert_eq!(summary(&walked).3, ["00_Inbox/x/tab\\tdir/", "02_Areas/line\\nbreak.md"]);
    assert_eq!(checked.snapshot.hash(), walked.snapshot.hash());
    assert_eq!(checked.counts.valid_per_dir, walked.counts.valid_per_dir);

    // An ignore file makes scope depend on its rules: the folder check steps aside.
    persist(root, &checked, policy);
    std::fs::write(root.join("02_Areas/.paravaultignore"), "new.md\n").unwrap();
    let decoded = read_known(root, &index, policy);
    assert!(Inventory::load_checking_folders(root, policy, decoded).unwrap().is_err());
}

/// A whole load that meets another process's fold in flight (it holds the persisted copy open
/// for writing, so `redb` refuses a reader) waits for it to end and reuses the copy; held past
/// the wait, the load walks and rewrites the copy beside it, never blocked for good.
#[test]
fn a_whole_load_waits_for_a_fold_in_flight_then_walks() {
    let dir = persisted(BASE);
    let root = dir.path().to_path_buf();
    let index = root.join(".paravault/inventory.redb");
    let hold = |for_how_long: Duration| {
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&index).unwrap();
        let database = redb::Builder::new().create_file(file).expect("opened for writing, as a fold does");
        std::thread::spawn(move || {
            std::thread::sleep(for_how_long);
            drop(database);
        })
    };

    let released = hold(Duration::from_millis(300));
    let vault = open(&root);
    vault.lint().unwrap();
    assert_eq!(vault.freshness().inventory_cache, "reused", "{:?}", vault.freshness());
    drop(vault);
    released.join().unwrap();

    let released = hold(Duration::from_secs(4));
    let vault = open(&root);
    vault.lint().unwrap();
    let freshness = vault.freshness();
    assert!(freshness.inventory_cache.starts_with("rebuilt: unreadable"), "{freshness:?}");
    assert!(!released.is_finished(), "the load gave up before the writer let go");
    drop(vault);
    released.join().unwrap();
    let vault = open(&root);
    vault.lint().unwrap();
    assert_eq!(vault.freshness().inventory_cache, "reused", "the copy written beside it is whole: {:?}", vault.freshness());
}

/// The whole-file copy an older engine kept beside the keyed one (`inventory.bin`) is removed
/// when the persisted inventory is next written; nothing reads it.
#[test]
fn an_older_engines_whole_file_copy_is_removed_when_the_copy_is_next_written() {
    let dir = persisted(BASE);
    let root = dir.path();
    let legacy = root.join(".paravault/inventory.bin");
    std::fs::write(&legacy, b"PVINVENT\x03\x00\x00\x00 an older engine's copy").unwrap();
    // Still there while nothing is written: a reused copy is not rewritten.
    let vault = open(root);
    vault.lint().unwrap();
    assert_eq!(vault.freshness().inventory_cache, "reused");
    drop(vault);
    assert!(legacy.is_file());
    std::fs::remove_file(root.join(".paravault/inventory.redb")).unwrap();
    let vault = open(root);
    vault.lint().unwrap();
    assert_eq!(vault.freshness().inventory_cache, "absent");
    drop(vault);
    assert!(!legacy.exists(), "the older engine's copy is gone once the copy is written");
    assert!(root.join(".paravault/inventory.redb").is_file());
}
