//! The folder journal's protocol and a live journal over a temporary vault.

use std::collections::BTreeSet;
use std::path::Path;

use super::*;
use crate::error::Error;

fn set(dirs: &[&str]) -> BTreeSet<String> {
    dirs.iter().map(|d| d.to_string()).collect()
}

#[test]
fn answers_read_back_exactly_and_anything_else_is_no_answer() {
    let now = JournalToken { epoch: 0xdead_beef_0000_0001, seq: 42 };
    let changed = set(&["", "02_Areas/home", "03_Resources"]);
    let text = render_answer(now, Some(&changed));
    assert_eq!(parse_answer(&text), Some(JournalAnswer { now, changed: Some(changed) }));
    assert_eq!(parse_answer(&render_answer(now, None)), Some(JournalAnswer { now, changed: None }));
    assert_eq!(parse_question(&question(Some(now))), Some(Some(now)));
    assert_eq!(parse_question(&question(None)), Some(None));
    // Truncated, another version, a stray line, an unknown state, a question that is not one.
    let truncated = text.strip_suffix("end\n").unwrap();
    assert_eq!(parse_answer(truncated), None);
    assert_eq!(parse_answer(&text.replace("journal 1", "journal 2")), None);
    assert_eq!(parse_answer(&text.replace("d 03_Resources", "x 03_Resources")), None);
    assert_eq!(parse_answer(&render_answer(now, None).replace("unknown", "maybe")), None);
    assert_eq!(parse_answer(&render_answer(now, None).replace("end\n", "d a\nend\n")), None);
    assert_eq!(parse_question("since zz 1\n"), None);
    assert_eq!(parse_question("until - \n"), None);
}

/// A journal over `root`, served on a thread until the returned stop is set.
fn serve(root: &Path, folders: usize) -> (Stop, std::thread::JoinHandle<Result<(), String>>) {
    let mut journal = FolderJournal::start(root).expect("the journal starts");
    assert_eq!(journal.ready().folders, folders, "every folder but the engine's is watched");
    let stop = Stop::default();
    let stopping = stop.clone();
    let handle = std::thread::spawn(move || journal.run(Some(&stopping)).map_err(|e| e.to_string()));
    (stop, handle)
}

#[test]
fn a_live_journal_names_every_folder_changed_since_a_position_and_voids_a_run_that_lost_track() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for folder in ["01_Projects/alpha", "03_Resources", ".paravault"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    std::fs::write(root.join("03_Resources/a.md"), "a").unwrap();
    // The root, 01_Projects, its alpha and 03_Resources.
    let (stop, handle) = serve(root, 4);

    // No position yet: the journal cannot say, but gives its position now.
    let first = ask(root, None).expect("the journal answers");
    assert_eq!(first.changed, None);
    // Nothing changed since.
    assert_eq!(ask(root, Some(first.now)).unwrap().changed, Some(BTreeSet::new()));

    // An edit finished before the question is in the answer, with no wait.
    std::fs::write(root.join("01_Projects/alpha/new.md"), "new").unwrap();
    let second = ask(root, Some(first.now)).unwrap();
    assert_eq!(second.changed, Some(set(&["01_Projects/alpha"])));
    // A removal and a rename in place, and a change of attributes.
    std::fs::remove_file(root.join("03_Resources/a.md")).unwrap();
    std::fs::rename(root.join("01_Projects/alpha/new.md"), root.join("01_Projects/alpha/renamed.md")).unwrap();
    let third = ask(root, Some(second.now)).unwrap();
    assert_eq!(third.changed, Some(set(&["01_Projects/alpha", "03_Resources"])));
    // The earlier position still sees everything since it.
    assert_eq!(ask(root, Some(first.now)).unwrap().changed, Some(set(&["01_Projects/alpha", "03_Resources"])));
    // The engine's own folder is not watched.
    std::fs::write(root.join(".paravault/scratch"), "x").unwrap();
    assert_eq!(ask(root, Some(third.now)).unwrap().changed, Some(BTreeSet::new()));

    // A folder made with folders inside: its parent, itself and what it holds are named, and
    // a file made inside it later is seen.
    std::fs::create_dir_all(root.join("02_Areas/home/deep")).unwrap();
    let fourth = ask(root, Some(third.now)).unwrap();
    let named = fourth.changed.clone().unwrap();
    assert!(named.contains("") && named.contains("02_Areas"), "{named:?}");
    std::fs::write(root.join("02_Areas/home/deep/x.md"), "x").unwrap();
    assert_eq!(ask(root, Some(fourth.now)).unwrap().changed, Some(set(&["02_Areas/home/deep"])));

    // A folder removed or moved voids the run: every earlier position is unknown.
    let before = ask(root, Some(fourth.now)).unwrap().now;
    std::fs::rename(root.join("02_Areas/home"), root.join("02_Areas/house")).unwrap();
    let after = ask(root, Some(before)).unwrap();
    assert_eq!(after.changed, None);
    assert_ne!(after.now.epoch, before.epoch);
    // The new run watches the moved folder under its new name.
    std::fs::write(root.join("02_Areas/house/deep/y.md"), "y").unwrap();
    assert_eq!(ask(root, Some(after.now)).unwrap().changed, Some(set(&["02_Areas/house/deep"])));
    std::fs::remove_dir_all(root.join("02_Areas/house")).unwrap();
    assert_eq!(ask(root, Some(after.now)).unwrap().changed, None);

    // One journal per vault.
    assert!(matches!(FolderJournal::start(root), Err(Error::NotConfigured { .. })));

    stop.stop();
    handle.join().unwrap().unwrap();
    assert!(!root.join(crate::store::layout::FOLDER_JOURNAL_SOCKET).exists(), "a stopped journal removes its socket");
    assert_eq!(ask(root, None), None);
}

/// A vault holding only the engine's folder, and where its journal's socket goes.
fn vault_with_only_its_engine_folder() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".paravault")).unwrap();
    let socket = dir.path().join(crate::store::layout::FOLDER_JOURNAL_SOCKET);
    (dir, socket)
}

#[test]
fn a_socket_left_by_a_killed_journal_is_replaced_and_anything_else_in_its_place_is_refused() {
    let (dir, socket) = vault_with_only_its_engine_folder();
    let root = dir.path();
    // A killed journal's socket: bound, nobody listening.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert_eq!(ask(root, None), None, "a dead socket is no journal");
    let (stop, handle) = serve(root, 1);
    assert!(ask(root, None).is_some());
    stop.stop();
    handle.join().unwrap().unwrap();

    // A file or a link in the socket's place is never removed, and no journal starts.
    std::fs::write(&socket, "a person's file").unwrap();
    assert!(matches!(FolderJournal::start(root), Err(Error::VaultBoundary { .. })));
    assert_eq!(std::fs::read_to_string(&socket).unwrap(), "a person's file");
    std::fs::remove_file(&socket).unwrap();
    std::os::unix::fs::symlink("/tmp", &socket).unwrap();
    assert!(FolderJournal::start(root).is_err());
    assert!(std::fs::symlink_metadata(&socket).unwrap().file_type().is_symlink());
    assert_eq!(ask(root, None), None, "a link is never asked");
}

#[test]
fn a_journal_that_never_answers_or_answers_nonsense_is_no_journal() {
    let (dir, socket) = vault_with_only_its_engine_folder();
    let root = dir.path();
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // Accepted by the kernel, never answered: the write gives up after its timeout.
    let started = std::time::Instant::now();
    assert_eq!(ask(root, None), None);
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
    drop(listener);
    std::fs::remove_file(&socket).unwrap();
    // Answered with something that is not a whole answer (no `end`).
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&stream), &mut line).unwrap();
        std::io::Write::write_all(&mut stream, b"paravault-folder-journal 1 00000000000000ff 3 changed\nd a\n").unwrap();
        line
    });
    assert_eq!(ask(root, None), None);
    assert_eq!(server.join().unwrap(), "since -\n");
}
