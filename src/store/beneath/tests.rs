//! Unit tests for `beneath`: writes land inside the folder handle, links are never followed.

use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn replace_creates_folders_and_an_owner_only_file_then_reads_it_back() {
    let root = tempfile::tempdir().unwrap();
    replace_unsynced(root.path(), "01_Projects/a/b/note.md", b"hello", true).unwrap();
    assert_eq!(std::fs::read(root.path().join("01_Projects/a/b/note.md")).unwrap(), b"hello");
    let mode = std::fs::metadata(root.path().join("01_Projects/a/b/note.md")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(read(root.path(), "01_Projects/a/b/note.md").unwrap().as_deref(), Some(&b"hello"[..]));
    replace_deferred_dir_sync(root.path(), "01_Projects/a/b/note.md", b"again").unwrap();
    assert_eq!(std::fs::read(root.path().join("01_Projects/a/b/note.md")).unwrap(), b"again");
    let leftovers: Vec<_> = std::fs::read_dir(root.path().join("01_Projects/a/b")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    assert_eq!(read(root.path(), "01_Projects/missing/x.md").unwrap(), None);
    remove_unsynced(root.path(), "01_Projects/a/b/note.md").unwrap();
    remove_unsynced(root.path(), "01_Projects/a/b/note.md").unwrap();
    remove_unsynced(root.path(), "01_Projects/nowhere/note.md").unwrap();
    assert!(!root.path().join("01_Projects/a/b/note.md").exists());
    assert!(replace_unsynced(root.path(), "01_Projects/new/x.md", b"x", false).is_err(), "folders are made only on request");
}

#[test]
fn a_linked_folder_is_never_walked_through() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.md"), b"outside").unwrap();
    std::fs::create_dir(root.path().join("01_Projects")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("01_Projects/race")).unwrap();
    for error in [
        replace_unsynced(root.path(), "01_Projects/race/x.md", b"IN", true).unwrap_err(),
        remove_unsynced(root.path(), "01_Projects/race/x.md").unwrap_err(),
        read(root.path(), "01_Projects/race/x.md").unwrap_err(),
    ] {
        assert_eq!(error.code(), "vault_boundary", "{error}");
    }
    assert_eq!(std::fs::read(outside.path().join("x.md")).unwrap(), b"outside");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
}

#[test]
fn a_linked_file_is_replaced_not_followed_and_never_read() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("precious.txt"), b"outside").unwrap();
    std::fs::create_dir(root.path().join("01_Projects")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("precious.txt"), root.path().join("01_Projects/_index.md")).unwrap();
    assert_eq!(read(root.path(), "01_Projects/_index.md").unwrap_err().code(), "vault_boundary");
    replace_unsynced(root.path(), "01_Projects/_index.md", b"catalog", false).unwrap();
    assert!(!std::fs::symlink_metadata(root.path().join("01_Projects/_index.md")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(outside.path().join("precious.txt")).unwrap(), b"outside");
}

#[test]
fn the_cursor_reads_each_folder_through_one_handle_and_never_through_a_link() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.md"), b"outside").unwrap();
    for (rel, bytes) in [("01_Projects/a/one.md", "one"), ("01_Projects/a/two.md", "two"), ("01_Projects/b/three.md", "three")] {
        replace_unsynced(root.path(), rel, bytes.as_bytes(), true).unwrap();
    }
    std::os::unix::fs::symlink(outside.path(), root.path().join("01_Projects/race")).unwrap();
    let mut cursor = FolderCursor::new(root.path());
    assert_eq!(cursor.read("01_Projects/a/one.md").unwrap().as_deref(), Some(&b"one"[..]));
    // The held folder is moved away and a link put in its place: the cursor still reads the
    // folder its handle names (the vault's own bytes), never the link's target.
    std::fs::rename(root.path().join("01_Projects/a"), root.path().join("01_Projects/a-moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("01_Projects/a")).unwrap();
    assert_eq!(cursor.read("01_Projects/a/two.md").unwrap().as_deref(), Some(&b"two"[..]));
    assert_eq!(cursor.read("01_Projects/a/x.md").unwrap(), None, "the held folder has no x.md; the link's target does");
    assert_eq!(cursor.read("01_Projects/b/three.md").unwrap().as_deref(), Some(&b"three"[..]));
    assert_eq!(cursor.read("01_Projects/b/missing.md").unwrap(), None);
    assert_eq!(cursor.read("01_Projects/nowhere/x.md").unwrap(), None);
    // Reopened from the root, both links fail the walk.
    assert_eq!(cursor.read("01_Projects/a/x.md").unwrap_err().code(), "vault_boundary");
    assert_eq!(cursor.read("01_Projects/race/x.md").unwrap_err().code(), "vault_boundary");
    assert!(exists(root.path(), "01_Projects/b/three.md").unwrap());
    assert!(!exists(root.path(), "01_Projects/b/four.md").unwrap());
    assert!(!exists(root.path(), "01_Projects/nowhere/x.md").unwrap());
    assert!(exists(root.path(), "01_Projects/race/x.md").is_err(), "a linked folder is never walked to answer");
    assert_eq!(std::fs::read(outside.path().join("x.md")).unwrap(), b"outside");
}

#[test]
fn deferred_fsyncs_never_open_through_a_link() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.md"), b"outside").unwrap();
    replace_unsynced(root.path(), "01_Projects/a/x.md", b"inside", true).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("01_Projects/race")).unwrap();
    let (inside, linked) = (root.path().join("01_Projects/a"), root.path().join("01_Projects/race"));
    crate::store::durable::sync_all_paths(root.path(), &[inside.join("x.md"), inside.join("gone.md")], std::slice::from_ref(&inside))
        .unwrap();
    let through_file = crate::store::durable::sync_all_paths(root.path(), &[linked.join("x.md")], &[]).unwrap_err();
    let through_folder = crate::store::durable::sync_all_paths(root.path(), &[], std::slice::from_ref(&linked)).unwrap_err();
    assert_eq!((through_file.code(), through_folder.code()), ("vault_boundary", "vault_boundary"));
    // The folder fsync by path refuses a link in its last component and anything not a folder.
    assert!(crate::store::durable::fsync_dir(&linked).is_err());
    assert!(crate::store::durable::fsync_dir(&inside.join("x.md")).is_err());
    crate::store::durable::fsync_dir(&inside).unwrap();
}
