//! The folder journal's protocol and a live journal over a temporary vault.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::*;
use crate::error::Error;

/// An answer's changes as the lines the protocol gives them (`d <folder>`, `e <path>`).
fn told(answer: Option<JournalAnswer>) -> Option<BTreeSet<String>> {
    let answer = answer.expect("the journal answers");
    let changed = answer.changed()?;
    let entry = |dir: &str, name: &str| if dir.is_empty() { format!("e {name}") } else { format!("e {dir}/{name}") };
    Some(
        changed
            .iter()
            .flat_map(|(dir, change)| match change {
                FolderChange::Whole => vec![format!("d {dir}")],
                FolderChange::Entries(names) => names.iter().map(|name| entry(dir, name)).collect(),
            })
            .collect(),
    )
}

fn lines(lines: &[&str]) -> Option<BTreeSet<String>> {
    Some(lines.iter().map(|line| line.to_string()).collect())
}

#[test]
fn answers_read_back_exactly_and_anything_else_is_no_answer() {
    let now = JournalToken { epoch: 0xdead_beef_0000_0001, seq: 42 };
    let entries = |names: &[&str]| FolderChange::Entries(names.iter().map(|n| n.to_string()).collect());
    let changed = BTreeMap::from([
        (String::new(), entries(&["_index.md", "log.md"])),
        ("02_Areas/home".to_string(), FolderChange::Whole),
        ("03_Resources".to_string(), entries(&["a b.md", ".pv-tmp-1"])),
    ]);
    let text = render_answer(now, Some(&changed));
    assert!(
        text.contains("\ne _index.md\n") && text.contains("\nd 02_Areas/home\n") && text.contains("\ne 03_Resources/a b.md\n"),
        "{text}"
    );
    assert_eq!(parse_answer(&text), Some(JournalAnswer::new(now, Some(changed))));
    assert_eq!(parse_answer(&render_answer(now, None)), Some(JournalAnswer::new(now, None)));
    assert_eq!(parse_question(&question(Some(now))), Some(Some(now)));
    assert_eq!(parse_question(&question(None)), Some(None));
    // Truncated, another version, a stray line, a folder both whole and by entries, an empty
    // name, an unknown state, a question that is not one.
    let truncated = text.strip_suffix("end\n").unwrap();
    assert_eq!(parse_answer(truncated), None);
    assert_eq!(parse_answer(&text.replace("journal 3", "journal 2")), None);
    assert_eq!(parse_answer(&text.replace("d 02_Areas/home", "x 02_Areas/home")), None);
    assert_eq!(parse_answer(&text.replace("end\n", "d 03_Resources\nend\n")), None);
    assert_eq!(parse_answer(&text.replace("end\n", "e 02_Areas/home/x.md\nend\n")), None);
    assert_eq!(parse_answer(&text.replace("end\n", "e 03_Resources/\nend\n")), None);
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
    assert_eq!(first.changed(), None);
    // Nothing changed since.
    assert_eq!(told(ask(root, Some(first.now))), lines(&[]));

    // An edit finished before the question is in the answer, by entry, with no wait.
    std::fs::write(root.join("01_Projects/alpha/new.md"), "new").unwrap();
    let second = ask(root, Some(first.now)).unwrap();
    assert_eq!(told(Some(second.clone())), lines(&["e 01_Projects/alpha/new.md"]));
    // A removal, a rename in place, and a change of an entry's attributes.
    std::fs::remove_file(root.join("03_Resources/a.md")).unwrap();
    std::fs::rename(root.join("01_Projects/alpha/new.md"), root.join("01_Projects/alpha/renamed.md")).unwrap();
    let third = ask(root, Some(second.now)).unwrap();
    let since_second = ["e 01_Projects/alpha/new.md", "e 01_Projects/alpha/renamed.md", "e 03_Resources/a.md"];
    assert_eq!(told(Some(third.clone())), lines(&since_second));
    std::fs::set_permissions(root.join("01_Projects/alpha/renamed.md"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    assert_eq!(told(ask(root, Some(third.now))), lines(&["e 01_Projects/alpha/renamed.md"]));
    // A write in place (the same file, through a handle opened before the position): its
    // folder does not move, the journal names it.
    let mut opened = std::fs::OpenOptions::new().append(true).open(root.join("01_Projects/alpha/renamed.md")).unwrap();
    let before_write = ask(root, Some(third.now)).unwrap().now;
    std::io::Write::write_all(&mut opened, b" more").unwrap();
    assert_eq!(told(ask(root, Some(before_write))), lines(&["e 01_Projects/alpha/renamed.md"]));
    drop(opened);
    // The earlier position still sees everything since it.
    assert_eq!(told(ask(root, Some(first.now))), lines(&since_second));
    // The folder's own attributes changed: the folder as a whole, for every position before.
    let before_chmod = ask(root, Some(third.now)).unwrap().now;
    std::fs::set_permissions(root.join("03_Resources"), std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    // (The root's watch tells the same change as one of its entries'.)
    assert_eq!(told(ask(root, Some(before_chmod))), lines(&["d 03_Resources", "e 03_Resources"]));
    assert!(told(ask(root, Some(first.now))).unwrap().contains("d 03_Resources"));
    // A name the protocol cannot carry (a control character) tells its folder as a whole.
    let before_tab = ask(root, Some(third.now)).unwrap().now;
    std::fs::write(root.join("01_Projects/alpha/a\tb.md"), "tab").unwrap();
    assert_eq!(told(ask(root, Some(before_tab))), lines(&["d 01_Projects/alpha"]));
    // The engine's own folder is not watched.
    let before_scratch = ask(root, Some(third.now)).unwrap().now;
    std::fs::write(root.join(".paravault/scratch"), "x").unwrap();
    assert_eq!(told(ask(root, Some(before_scratch))), lines(&[]));

    // A folder made with folders inside: its parent, itself and what it holds are named, and
    // a file made inside it later is seen.
    std::fs::create_dir_all(root.join("02_Areas/home/deep")).unwrap();
    let fourth = ask(root, Some(before_scratch)).unwrap();
    let named = fourth.changed().cloned().unwrap();
    let root_tells_it = match named.get("") {
        Some(FolderChange::Entries(names)) => names.contains("02_Areas"),
        other => other == Some(&FolderChange::Whole),
    };
    assert!(root_tells_it && named.get("02_Areas") == Some(&FolderChange::Whole), "{named:?}");
    std::fs::write(root.join("02_Areas/home/deep/x.md"), "x").unwrap();
    assert_eq!(told(ask(root, Some(fourth.now))), lines(&["e 02_Areas/home/deep/x.md"]));

    // A folder removed or moved voids the run: every earlier position is unknown.
    let before = ask(root, Some(fourth.now)).unwrap().now;
    std::fs::rename(root.join("02_Areas/home"), root.join("02_Areas/house")).unwrap();
    let after = ask(root, Some(before)).unwrap();
    assert_eq!(after.changed(), None);
    assert_ne!(after.now.epoch, before.epoch);
    // The new run watches the moved folder under its new name.
    std::fs::write(root.join("02_Areas/house/deep/y.md"), "y").unwrap();
    assert_eq!(told(ask(root, Some(after.now))), lines(&["e 02_Areas/house/deep/y.md"]));
    std::fs::remove_dir_all(root.join("02_Areas/house")).unwrap();
    assert_eq!(ask(root, Some(after.now)).unwrap().changed(), None);

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
        std::io::Write::write_all(&mut stream, b"paravault-folder-journal 3 00000000000000ff 3 changed\nd a\n").unwrap();
        line
    });
    assert_eq!(ask(root, None), None);
    assert_eq!(server.join().unwrap(), "since -\n");
}

#[test]
fn a_journal_keeps_a_folders_newest_entries_by_name_and_tells_an_older_position_the_whole_folder() {
    let (dir, _socket) = vault_with_only_its_engine_folder();
    let root = dir.path();
    std::fs::create_dir_all(root.join("00_Inbox")).unwrap();
    let (stop, handle) = serve(root, 2);
    let start = ask(root, None).unwrap().now;
    let make = |from: usize, to: usize| {
        for i in from..to {
            std::fs::write(root.join(format!("00_Inbox/n{i:04}.md")), "n").unwrap();
        }
    };
    make(0, 300);
    let middle = ask(root, Some(start)).unwrap();
    assert_eq!(told(Some(middle.clone())).unwrap().len(), 300);
    // 600 entries in all: more than the journal keeps (512), so the oldest are forgotten.
    make(300, 600);
    let later: BTreeSet<String> = (300..600).map(|i| format!("e 00_Inbox/n{i:04}.md")).collect();
    assert_eq!(told(ask(root, Some(middle.now))), Some(later), "a position after the forgotten ones still gets every entry");
    assert_eq!(told(ask(root, Some(start))), lines(&["d 00_Inbox"]), "a position before them gets the whole folder");
    stop.stop();
    handle.join().unwrap().unwrap();
}
