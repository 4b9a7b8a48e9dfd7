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
