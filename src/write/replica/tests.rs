//! Tests of `ReplicaConfig::load_seen`: a remembered configuration is read again whenever its
//! file or folder moved, and never hides a link `load` refuses.

use std::time::{Duration, SystemTime};

use super::*;

fn config(remote: &str) -> ReplicaConfig {
    ReplicaConfig { schema: CONFIG_SCHEMA.into(), replica_id: "0123456789abcdef".into(), remote: remote.into(), branch: "main".into() }
}

/// Writes `config` over the file in place (same inode) and sets its modification time to `mtime`.
fn write_in_place(root: &Path, config: &ReplicaConfig, mtime: SystemTime) {
    let path = layout::join(root, layout::REPLICA_CONFIG);
    std::fs::write(&path, serde_json::to_vec_pretty(config).unwrap()).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
}

fn remembered(root: &Path) -> bool {
    SEEN_CONFIGS.lock().unwrap().contains_key(root)
}

/// A vault whose replica configuration is remembered by `load_seen` (its stamp old enough to
/// trust), with its remote `origin`.
fn remembered_vault() -> (tempfile::TempDir, SystemTime) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(layout::join(dir.path(), layout::STATE_DIR)).unwrap();
    let old = SystemTime::now() - Duration::from_secs(60);
    write_in_place(dir.path(), &config("origin"), old);
    // The change time cannot be set back: wait until it is past the racy window.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(ReplicaConfig::load_seen(dir.path()).unwrap(), Some(config("origin")));
    assert!(remembered(dir.path()), "an old enough stamp is remembered");
    assert_eq!(ReplicaConfig::load_seen(dir.path()).unwrap(), Some(config("origin")));
    (dir, old)
}

#[test]
fn a_configuration_edited_in_place_with_its_length_and_modification_time_kept_is_read_again() {
    let (dir, old) = remembered_vault();
    // Same length, same inode, same modification time: only the change time moves.
    write_in_place(dir.path(), &config("upst2e"), old);
    assert_eq!(ReplicaConfig::load_seen(dir.path()).unwrap(), Some(config("upst2e")));
    assert_eq!(ReplicaConfig::load_seen(dir.path()).unwrap(), ReplicaConfig::load(dir.path()).unwrap());
}

#[test]
fn a_configuration_replaced_or_removed_is_read_again() {
    let (dir, _) = remembered_vault();
    let path = layout::join(dir.path(), layout::REPLICA_CONFIG);
    let replacement = dir.path().join("replacement.json");
    std::fs::write(&replacement, serde_json::to_vec_pretty(&config("mirror")).unwrap()).unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    assert_eq!(ReplicaConfig::load_seen(dir.path()).unwrap(), Some(config("mirror")));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(ReplicaConfig::load_seen(dir.path()).unwrap(), None);
    assert!(!remembered(dir.path()));
}

#[test]
fn a_link_planted_for_a_remembered_configuration_or_its_folder_is_refused_as_load_refuses_it() {
    let (dir, _) = remembered_vault();
    let path = layout::join(dir.path(), layout::REPLICA_CONFIG);
    // The file becomes a link to a copy of itself (same bytes).
    let copy = dir.path().join("copy.json");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&copy, &path).unwrap();
    assert!(ReplicaConfig::load(dir.path()).is_err(), "load refuses a linked configuration");
    assert!(ReplicaConfig::load_seen(dir.path()).is_err(), "a remembered configuration never hides a planted link");
    assert!(freshness(dir.path()).is_none());

    // The state folder becomes a link to a copy of itself, the configuration a hard link to the
    // remembered file (same inode, same stamp).
    let (dir, _) = remembered_vault();
    let state = layout::join(dir.path(), layout::STATE_DIR);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::hard_link(layout::join(dir.path(), layout::REPLICA_CONFIG), elsewhere.join("replica.json")).unwrap();
    std::fs::remove_file(layout::join(dir.path(), layout::REPLICA_CONFIG)).unwrap();
    std::fs::remove_dir(&state).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &state).unwrap();
    assert!(ReplicaConfig::load(dir.path()).is_err(), "load refuses a linked state folder");
    assert!(ReplicaConfig::load_seen(dir.path()).is_err(), "a remembered configuration never hides a planted link");
}
