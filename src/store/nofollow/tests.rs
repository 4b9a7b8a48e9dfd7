//! Unit tests for `nofollow`: links are refused, regular files and folders pass.

use super::*;

#[test]
fn reading_through_a_link_fails_with_eloop_and_maps_to_vault_boundary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("target.txt"), b"outside").unwrap();
    std::os::unix::fs::symlink(dir.path().join("target.txt"), dir.path().join("link.txt")).unwrap();
    let error = read(&dir.path().join("link.txt")).unwrap_err();
    assert!(is_link_refusal(&error), "{error:?}");
    assert_eq!(io_error("reading", "link.txt", error).code(), "vault_boundary");
    assert_eq!(read(&dir.path().join("target.txt")).unwrap(), b"outside");
}

#[test]
fn a_link_at_any_engine_path_is_refused_and_a_plain_vault_passes() {
    let outside = tempfile::tempdir().unwrap();
    for rel in STATE_FOLDERS.iter().chain(STATE_FILES.iter()) {
        let vault = tempfile::tempdir().unwrap();
        assert!(refuse_symlinked_state(vault.path()).is_ok(), "an empty vault has no links");
        let at = layout::join(vault.path(), rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(outside.path(), &at).unwrap();
        let error = refuse_symlinked_state(vault.path()).unwrap_err();
        assert_eq!(error.code(), "vault_boundary", "{rel}");
        assert!(error.to_string().contains(rel), "{error}");
    }
}

#[test]
fn an_engine_folder_that_is_a_file_is_refused() {
    let vault = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(vault.path().join(".paravault")).unwrap();
    std::fs::write(vault.path().join(".paravault/search"), b"not a folder").unwrap();
    assert_eq!(refuse_symlinked_state(vault.path()).unwrap_err().code(), "vault_boundary");
}
