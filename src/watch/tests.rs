//! The watcher's own tests: a settle names every edit finished before it, reads queue nothing,
//! created folders are listed whole, moved ones ask for a walk.

use super::*;

/// The watcher's evidence source: its paths are entries of their folders; a watcher that
/// cannot name the changes says why, and only a walk can tell.
#[test]
fn the_watchers_paths_are_entries_and_its_rescan_is_unknown() {
    let paths: BTreeSet<String> = ["01_Projects/a.md", "01_Projects/b.md", "index.md"].map(String::from).into();
    let named = DiskChanges { paths: paths.clone(), ..Default::default() };
    assert_eq!(named.into_change_set(), ChangeSet::of_paths(["01_Projects/a.md", "01_Projects/b.md", "index.md"]));
    // A created folder is listed whole.
    let created = DiskChanges { paths: paths.clone(), created_dirs: ["03_Resources/new".to_string()].into(), ..Default::default() };
    let ChangeSet::Known(mut expected) = ChangeSet::of_paths(["01_Projects/a.md", "01_Projects/b.md", "index.md"]) else { unreachable!() };
    expected.folders.insert("03_Resources/new".into(), FolderChange::Whole);
    assert_eq!(created.into_change_set(), ChangeSet::Known(expected));
    let overflowed = DiskChanges { paths, rescan: Some("the event queue overflowed".into()), ..Default::default() };
    assert_eq!(overflowed.into_change_set(), ChangeSet::unknown("the event queue overflowed"));
    assert!(DiskChanges::default().into_change_set().is_empty());
}

fn vault() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("03_Resources/topic")).unwrap();
    std::fs::create_dir_all(root.join(layout::STATE_DIR)).unwrap();
    std::fs::write(root.join("03_Resources/topic/a.md"), "# A\n").unwrap();
    (dir, root)
}

fn taken(watch: &DiskWatch) -> u64 {
    watch.lock().events_taken
}

/// Reading the vault queues nothing: a note read and folders listed (what every search and
/// every plan does) put no event in the queue, while an edit is still named.
#[test]
fn reads_queue_no_event_and_edits_still_do() {
    let (_dir, root) = vault();
    let watch = DiskWatch::start(&root).unwrap();
    assert!(watch.settle().is_empty());
    let before = taken(&watch);
    for _ in 0..3 {
        assert_eq!(std::fs::read_to_string(root.join("03_Resources/topic/a.md")).unwrap(), "# A\n");
        assert_eq!(std::fs::read_dir(root.join("03_Resources")).unwrap().count(), 1);
        assert_eq!(std::fs::read_dir(root.join("03_Resources/topic")).unwrap().count(), 1);
    }
    assert!(watch.settle().is_empty());
    assert_eq!(taken(&watch), before, "reads of the vault queued events");
    std::fs::write(root.join("03_Resources/topic/a.md"), "# A, edited\n").unwrap();
    assert_eq!(watch.settle(), ChangeSet::of_paths(["03_Resources/topic/a.md"]));
}

/// An edit finished before `settle` began is in what it returns, every time, with no wait:
/// the kernel queues the event inside the writing call.
#[test]
fn every_edit_finished_before_a_settle_is_named_by_it() {
    let (_dir, root) = vault();
    let watch = DiskWatch::start(&root).unwrap();
    for i in 0..300 {
        let name = format!("03_Resources/topic/n{}.md", i % 7);
        std::fs::write(root.join(&name), format!("# {i}\n")).unwrap();
        assert_eq!(watch.settle(), ChangeSet::of_paths([name.as_str()]), "edit {i}");
    }
}

/// The engine's own folder is not watched: its files (journal, receipts, generations) queue
/// nothing, and a temporary file of an atomic replace is not named.
#[test]
fn the_engines_folder_and_temporary_files_are_not_named() {
    let (_dir, root) = vault();
    let watch = DiskWatch::start(&root).unwrap();
    let before = taken(&watch);
    std::fs::create_dir_all(root.join(".paravault/search")).unwrap();
    std::fs::write(root.join(".paravault/search/x"), "x").unwrap();
    std::fs::write(root.join(".paravault/journal"), "x").unwrap();
    assert!(watch.settle().is_empty());
    let temp = root.join(format!("03_Resources/topic/{}1", layout::TEMP_PREFIX));
    std::fs::write(&temp, "# B\n").unwrap();
    std::fs::rename(&temp, root.join("03_Resources/topic/b.md")).unwrap();
    assert_eq!(watch.settle(), ChangeSet::of_paths(["03_Resources/topic/b.md"]));
    // Only the root's own event for `.paravault/search` (an entry of a watched folder's
    // unwatched child is never queued).
    assert!(taken(&watch) - before <= 4, "{} events", taken(&watch) - before);
}

/// A folder created with folders and notes already in it (as `mkdir -p` and a copy do, faster
/// than any watch can be placed) is listed whole with every folder below it, and what is
/// made in them afterwards is named.
#[test]
fn a_created_folder_is_listed_whole_with_everything_below_it() {
    let (_dir, root) = vault();
    let watch = DiskWatch::start(&root).unwrap();
    std::fs::create_dir_all(root.join("02_Areas/a/b/c")).unwrap();
    std::fs::write(root.join("02_Areas/a/b/c/n.md"), "# N\n").unwrap();
    let ChangeSet::Known(changes) = watch.settle() else { panic!("a walk") };
    let whole: Vec<&str> = changes.whole_folders().collect();
    for dir in ["02_Areas", "02_Areas/a", "02_Areas/a/b", "02_Areas/a/b/c"] {
        assert!(whole.contains(&dir), "{dir} not listed whole: {changes:?}");
    }
    std::fs::write(root.join("02_Areas/a/b/c/m.md"), "# M\n").unwrap();
    assert_eq!(watch.settle(), ChangeSet::of_paths(["02_Areas/a/b/c/m.md"]));
}

/// A folder moved or removed makes the next settle ask for a walk, and the watches are placed
/// again: an edit under the folder's new path is named afterwards.
#[test]
fn a_moved_folder_asks_for_a_walk_and_is_watched_at_its_new_path() {
    let (_dir, root) = vault();
    let watch = DiskWatch::start(&root).unwrap();
    std::fs::rename(root.join("03_Resources/topic"), root.join("03_Resources/moved")).unwrap();
    assert!(matches!(watch.settle(), ChangeSet::Unknown(_)));
    std::fs::write(root.join("03_Resources/moved/a.md"), "# A, moved and edited\n").unwrap();
    assert_eq!(watch.settle(), ChangeSet::of_paths(["03_Resources/moved/a.md"]));
    std::fs::remove_dir_all(root.join("03_Resources/moved")).unwrap();
    assert!(matches!(watch.settle(), ChangeSet::Unknown(_)));
    assert!(watch.settle().is_empty());
}

/// Between operations the helper thread takes the queue in (so an idle process's queue does
/// not overflow), and `settle` still returns what it took.
#[test]
fn the_helper_thread_takes_the_queue_in_between_operations() {
    let (_dir, root) = vault();
    let watch = DiskWatch::start(&root).unwrap();
    let before = taken(&watch);
    std::fs::write(root.join("03_Resources/topic/a.md"), "# A, edited\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while taken(&watch) == before {
        assert!(std::time::Instant::now() < deadline, "the helper thread never read the queue");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(watch.settle(), ChangeSet::of_paths(["03_Resources/topic/a.md"]));
    drop(watch);
}
