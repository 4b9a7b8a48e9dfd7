//! Edits made outside the engine (a person's editor, a shell) are seen and never lost: a
//! long-lived vault's watcher sees creates, edits, deletes and renames before the next
//! operation; previews equal their live runs; writes that meet an outside edit are refused,
//! recovery leaves such files alone; leftovers of killed writes are removed; reports are
//! bounded and say what they were computed from.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use paravault::Vault;
use paravault::maintenance::heal::HealRequest;
use paravault::maintenance::rot::RotRequest;
use serde_json::{Value, json};

use crate::support::{ingest, note, vault};

fn watched(fixture: &str) -> (tempfile::TempDir, Vault) {
    let (dir, vault) = vault(fixture);
    vault.watch_disk();
    assert_eq!(vault.freshness().mode, "watch", "the watcher must start on this machine");
    vault.lint().unwrap();
    (dir, vault)
}

fn lint_rules(vault: &Vault) -> Vec<(String, String)> {
    vault.observe_disk().unwrap();
    crate::support::rules(&vault.lint().unwrap())
}

const BASE: &str = "-- 01_Projects/hub.md --\n---\ntype: Project\ntitle: Hub\ndescription: The hub\ntimestamp: 2026-01-01T00:00:00Z\n---\nSee [[spoke]].\n-- 01_Projects/spoke.md --\n---\ntype: Project\ntitle: Spoke\ndescription: A spoke\ntimestamp: 2026-01-01T00:00:00Z\n---\nBack to [[hub]].\n";

#[test]
fn a_watched_vault_sees_outside_creates_edits_deletes_and_renames_without_waiting() {
    let (dir, vault) = watched(BASE);
    let root = dir.path();
    assert!(lint_rules(&vault).iter().all(|(rule, _)| rule != "metadata-missing"));

    // Create: an invalid note written by a shell is a finding on the very next call.
    std::fs::write(root.join("03_Resources/bad.md"), "no frontmatter here\n").unwrap();
    let rules = lint_rules(&vault);
    assert!(rules.contains(&("metadata-missing".into(), "03_Resources/bad.md".into())), "{rules:?} {:?}", vault.freshness());

    // Edit: the hub now links to a note that does not exist.
    std::fs::write(root.join("01_Projects/hub.md"), note("Project", "Hub", "See [[nowhere]].\n")).unwrap();
    assert!(lint_rules(&vault).iter().any(|(rule, path)| rule == "broken-link" && path == "01_Projects/hub.md"));

    // Delete: the spoke goes, so the link back to it from nowhere remains and the invalid note goes.
    std::fs::remove_file(root.join("03_Resources/bad.md")).unwrap();
    assert!(!lint_rules(&vault).iter().any(|(_, path)| path == "03_Resources/bad.md"));

    // Rename a file: the old path vanishes, the new one appears.
    std::fs::rename(root.join("01_Projects/spoke.md"), root.join("01_Projects/wheel.md")).unwrap();
    vault.observe_disk().unwrap();
    let paths: Vec<String> = vault.with_inventory(|inv| inv.notes().map(|r| r.path.to_string()).collect()).unwrap();
    assert!(paths.contains(&"01_Projects/wheel.md".to_string()) && !paths.contains(&"01_Projects/spoke.md".to_string()), "{paths:?}");

    // Rename a folder: everything under it moves (a folder event: a stat walk of the vault).
    std::fs::create_dir_all(root.join("03_Resources/old")).unwrap();
    std::fs::write(root.join("03_Resources/old/inner.md"), note("Resource", "Inner", "x\n")).unwrap();
    vault.observe_disk().unwrap();
    std::fs::rename(root.join("03_Resources/old"), root.join("03_Resources/new")).unwrap();
    vault.observe_disk().unwrap();
    let paths: Vec<String> = vault.with_inventory(|inv| inv.notes().map(|r| r.path.to_string()).collect()).unwrap();
    assert!(paths.contains(&"03_Resources/new/inner.md".to_string()), "{paths:?}");
    assert!(!paths.iter().any(|p| p.starts_with("03_Resources/old/")), "{paths:?}");
    let freshness = vault.freshness();
    assert!(freshness.paths_refreshed >= 4, "{freshness:?}");
    assert!(freshness.stat_walks >= 1, "a moved folder needs a stat walk: {freshness:?}");
}

/// A folder made outside and still empty at the next call (as a client makes one before
/// writing a note into it) costs no stat walk of the vault: the watcher watches it from its
/// creation (issue 52: a new folder among 2,500 siblings cost a walk of 100,000 notes). What
/// is made in it later is seen all the same (an event, or the second look the next call takes
/// at a folder created empty); a folder made with a note already in it is walked.
#[test]
fn a_new_empty_folder_costs_no_walk_and_what_is_made_in_it_is_seen() {
    let (dir, vault) = watched(BASE);
    let root = dir.path();
    vault.observe_disk().unwrap();
    let walks = vault.freshness().stat_walks;
    let notes = |vault: &Vault| -> Vec<String> { vault.with_inventory(|inv| inv.notes().map(|r| r.path.to_string()).collect()).unwrap() };

    std::fs::create_dir(root.join("03_Resources/fresh")).unwrap();
    vault.observe_disk().unwrap();
    assert_eq!(vault.freshness().stat_walks, walks, "an empty new folder needs no walk: {:?}", vault.freshness());
    // The engine writes into it: the note and the folder's catalog page, no walk either.
    let receipt = vault.ingest_note(&ingest("03_Resources/fresh/by-engine", "Written by the engine.\n")).unwrap();
    assert_eq!(receipt.status, "ok");
    assert!(root.join("03_Resources/fresh/_index.md").is_file());
    vault.observe_disk().unwrap();
    assert_eq!(vault.freshness().stat_walks, walks, "{:?}", vault.freshness());

    // A note a shell writes into a new folder right after making it is seen by the next call.
    std::fs::create_dir(root.join("03_Resources/shell")).unwrap();
    vault.observe_disk().unwrap();
    std::fs::write(root.join("03_Resources/shell/by-shell.md"), note("Resource", "By shell", "x\n")).unwrap();
    vault.observe_disk().unwrap();
    assert!(notes(&vault).contains(&"03_Resources/shell/by-shell.md".to_string()), "{:?}", vault.freshness());

    // A folder moved in whole with a note in it is walked, and the note is seen.
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("moved")).unwrap();
    std::fs::write(outside.path().join("moved/inner.md"), note("Resource", "Inner", "x\n")).unwrap();
    let before = vault.freshness().stat_walks;
    if std::fs::rename(outside.path().join("moved"), root.join("03_Resources/moved")).is_ok() {
        vault.observe_disk().unwrap();
        assert!(notes(&vault).contains(&"03_Resources/moved/inner.md".to_string()));
        assert_eq!(vault.freshness().stat_walks, before + 1, "{:?}", vault.freshness());
    }
    // A folder made with a note in it before the next call: the note is seen.
    std::fs::create_dir(root.join("03_Resources/filled")).unwrap();
    std::fs::write(root.join("03_Resources/filled/first.md"), note("Resource", "First", "x\n")).unwrap();
    vault.observe_disk().unwrap();
    assert!(notes(&vault).contains(&"03_Resources/filled/first.md".to_string()));
    // Lint agrees with a fresh read of the vault.
    let fresh = Vault::open(root, Default::default()).unwrap();
    assert_eq!(crate::support::rules(&vault.lint().unwrap()), crate::support::rules(&fresh.lint().unwrap()));
}

/// A record as a read of the disk gives it, less when it was taken.
fn analysis(record: &paravault::inventory::NoteRecord) -> String {
    let mut record = record.clone();
    record.stamp = None;
    format!("{record:?}")
}

/// After a write the watcher reports the catalog pages the engine itself just rewrote, their
/// stamps racy. The model already holds each as the engine wrote it, so one whose bytes are
/// still those is not parsed again, and what the model holds then equals a fresh read of the
/// disk. A person's edit of such a page within the same tick differs in a byte: it is read and
/// parsed as any outside edit.
#[test]
fn the_engines_own_pages_are_not_parsed_again_and_an_edit_in_the_same_tick_is_seen() {
    let (dir, vault) = watched(BASE);
    let root = dir.path();
    let page = paravault::note::path::VaultPath::parse("03_Resources/_index.md").unwrap();
    let held = |vault: &Vault, path: &paravault::note::path::VaultPath| vault.with_inventory(|inv| inv.records.get(path).cloned()).unwrap();
    let policy = paravault::policy::LoadedPolicy::from_texts(None).unwrap();
    let fresh = |path: &paravault::note::path::VaultPath, kind| paravault::inventory::read_record(root, path, kind, &policy);

    vault
        .ingest_note(&ingest(
            "03_Resources/first",
            "Written by the engine.
",
        ))
        .unwrap();
    vault.observe_disk().unwrap();
    for (path, kind) in [
        (page.clone(), paravault::scan::PageKind::Catalog),
        (paravault::note::path::VaultPath::parse("index.md").unwrap(), paravault::scan::PageKind::RootIndex),
    ] {
        let record = held(&vault, &path).expect("the page is held");
        assert_eq!(analysis(&record), analysis(&fresh(&path, kind)), "{path} as a fresh read gives it");
        assert!(record.stamp.is_some(), "{path}: its stat identity was taken");
    }

    // The engine rewrites the page; a person edits it at once, within the same clock tick.
    vault
        .ingest_note(&ingest(
            "03_Resources/second",
            "Written by the engine too.
",
        ))
        .unwrap();
    let written = std::fs::read_to_string(root.join(page.as_str())).unwrap();
    assert!(written.contains("second"), "{written}");
    let edited = format!(
        "{written}
A person's line: see [[nowhere-at-all]].
"
    );
    std::fs::write(root.join(page.as_str()), &edited).unwrap();
    vault.observe_disk().unwrap();
    let record = held(&vault, &page).expect("the page is held");
    assert_eq!(record.content_hash, *blake3::hash(edited.as_bytes()).as_bytes(), "the edit is in the model");
    assert!(record.links.iter().any(|l| l.target == "nowhere-at-all"), "{record:?}");
    assert_eq!(analysis(&record), analysis(&fresh(&page, paravault::scan::PageKind::Catalog)));
    let fresh_vault = Vault::open(root, Default::default()).unwrap();
    assert_eq!(crate::support::rules(&vault.lint().unwrap()), crate::support::rules(&fresh_vault.lint().unwrap()));
}

/// Markdown files and folders whose names no vault path may hold (not UTF-8, a control
/// character, a backslash) are never read, and never hidden without a word either: lint names
/// each, escaped, in a watched process, in a fresh one and after CLI writes planned on the
/// keyed copy; the files stay as they are; renamed, they are notes like any other.
#[test]
fn names_no_vault_path_may_hold_are_named_by_lint_and_left_as_they_are() {
    use std::os::unix::ffi::OsStrExt;
    let (dir, vault) = watched(BASE);
    let root = dir.path();
    let at = |rel: &[u8]| root.join(std::ffi::OsStr::from_bytes(rel));
    let text = note("Resource", "Odd", "body\n");
    let planted: [&[u8]; 4] =
        [b"03_Resources/line\nbreak.md", b"03_Resources/latin\xe9.md", b"03_Resources/back\\slash.md", b"02_Areas/R\xe9sum\xe9/cv.md"];
    std::fs::create_dir_all(at(b"02_Areas/R\xe9sum\xe9")).unwrap();
    for rel in planted {
        std::fs::write(at(rel), &text).unwrap();
    }
    // Not notes (an attachment, a root file that is no daily log): nobody names them.
    std::fs::write(at(b"03_Resources/photo\xe9.png"), b"png").unwrap();
    std::fs::write(at(b"stray\n.md"), &text).unwrap();
    let expected: Vec<(String, String)> =
        ["02_Areas/R\\xE9sum\\xE9/", "03_Resources/back\\\\slash.md", "03_Resources/latin\\xE9.md", "03_Resources/line\\nbreak.md"]
            .into_iter()
            .map(|shown| ("unusable-name".to_string(), shown.to_string()))
            .collect();
    let unusable = |rules: Vec<(String, String)>| rules.into_iter().filter(|(rule, _)| rule == "unusable-name").collect::<Vec<_>>();
    assert_eq!(unusable(lint_rules(&vault)), expected, "a watched process: {:?}", vault.freshness());

    // CLI writes, the later ones planned on the keyed copy's partial model, then a fresh process.
    let mut keyed = false;
    for i in 0..3 {
        let out = Command::new(env!("CARGO_BIN_EXE_paravault"))
            .arg("--vault")
            .arg(root)
            .args(["ingest", &format!("03_Resources/w{i}"), "--title", "W", "--description", "d", "--content", "b"])
            .env("PARAVAULT_LOG", "paravault::state::model=debug")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        keyed |= String::from_utf8_lossy(&out.stderr).contains("partial model loaded by key");
    }
    assert!(keyed, "a CLI write planned on the keyed copy");
    let fresh = Vault::open(root, crate::support::options()).unwrap();
    assert_eq!(unusable(crate::support::rules(&fresh.lint().unwrap())), expected, "a fresh process");
    let cli = crate::support::paravault(root, &["lint"]);
    let printed = String::from_utf8_lossy(&cli.stdout);
    assert!(expected.iter().all(|(_, shown)| printed.contains(&format!("[unusable-name] {shown}: "))), "{printed}");
    for rel in planted {
        assert_eq!(std::fs::read(at(rel)).unwrap(), text.as_bytes(), "never rewritten");
    }

    // Renamed to names a vault path may hold: notes like any other, nothing left to name.
    std::fs::rename(at(b"03_Resources/line\nbreak.md"), root.join("03_Resources/line-break.md")).unwrap();
    std::fs::rename(at(b"03_Resources/latin\xe9.md"), root.join("03_Resources/latin.md")).unwrap();
    std::fs::rename(at(b"03_Resources/back\\slash.md"), root.join("03_Resources/back-slash.md")).unwrap();
    std::fs::rename(at(b"02_Areas/R\xe9sum\xe9"), root.join("02_Areas/Resume")).unwrap();
    assert!(unusable(lint_rules(&vault)).is_empty(), "{:?}", lint_rules(&vault));
    let notes: Vec<String> = vault.with_inventory(|inv| inv.notes().map(|r| r.path.to_string()).collect()).unwrap();
    for renamed in ["03_Resources/line-break.md", "03_Resources/latin.md", "03_Resources/back-slash.md", "02_Areas/Resume/cv.md"] {
        assert!(notes.iter().any(|n| n == renamed), "{renamed} in {notes:?}");
    }
}

#[test]
fn a_heal_preview_equals_its_live_run_after_outside_edits() {
    let (dir, vault) = watched(BASE);
    for name in ["a", "b"] {
        std::fs::write(dir.path().join(format!("03_Resources/{name}.md")), "---\ntype: resource\ntitle: T\n---\nbody text\n").unwrap();
    }
    vault.observe_disk().unwrap();
    let preview = vault.heal_frontmatter(&HealRequest { dry_run: true, approved: false }).unwrap();
    let live = vault.heal_frontmatter(&HealRequest { dry_run: false, approved: true }).unwrap();
    let paths = |r: &paravault::maintenance::heal::HealReport| r.notes.iter().map(|n| n.path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(&preview).len(), 2, "{preview:?}");
    assert_eq!(paths(&preview), paths(&live));
}

#[test]
fn the_fallback_stat_walk_finds_what_the_watcher_missed() {
    let (dir, vault) = vault(BASE);
    vault.lint().unwrap();
    // Written after the model was read and before the watcher is placed: no event will ever
    // name it, so the first operation after the watcher is placed walks the vault.
    std::fs::write(dir.path().join("03_Resources/unseen.md"), "no frontmatter\n").unwrap();
    vault.watch_disk();
    assert!(lint_rules(&vault).contains(&("metadata-missing".into(), "03_Resources/unseen.md".into())));
    let freshness = vault.freshness();
    assert_eq!(freshness.stat_walks, 1, "{freshness:?}");
    assert!(freshness.last_stat_walk_reason.unwrap().contains("before the file watcher was placed"));
    // Settled: the next operation trusts the watcher (no walk).
    vault.lint().unwrap();
    assert_eq!(vault.freshness().stat_walks, 1);
    // A watcher that cannot vouch for the disk (its queue overflowed) costs a walk, never a
    // stale answer.
    vault.disk_watch().unwrap().simulate_overflow();
    std::fs::remove_file(dir.path().join("03_Resources/unseen.md")).unwrap();
    assert!(!lint_rules(&vault).iter().any(|(_, p)| p == "03_Resources/unseen.md"));
    let freshness = vault.freshness();
    assert_eq!(freshness.stat_walks, 2, "{freshness:?}");
    assert!(freshness.last_stat_walk_reason.unwrap().contains("overflow"));
}

#[test]
fn an_outside_edit_between_plan_and_apply_refuses_the_write_and_keeps_the_edit() {
    let (dir, vault) = vault(BASE);
    let victim = dir.path().join("01_Projects/hub.md");
    let before = std::fs::read_to_string(&victim).unwrap();
    let sha = paravault::write::sha256_hex(before.as_bytes());
    let edited = format!("{before}A PERSON'S EDIT\n");
    let (path, text) = (victim.clone(), edited.clone());
    paravault::store::faults::arm_hook("after_commit", move || std::fs::write(&path, &text).unwrap());
    let error = vault
        .propose_memory_change("01_Projects/hub.md", &note("Project", "Hub", "agent text\n"), None, Some(&sha))
        .and_then(|proposal| vault.apply_stored_proposal(&proposal.proposal_id, true))
        .unwrap_err();
    assert_eq!(error.code(), "precondition_failed", "{error}");
    assert!(error.to_string().contains("01_Projects/hub.md"), "{error}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), edited, "the person's edit is on disk");
    // The refused intent is never finished by anyone: reopen (recovery) keeps the edit too.
    drop(vault);
    let reopened = Vault::open(dir.path(), Default::default()).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), edited);
    let history = reopened.read_memory_history(10, 0).unwrap();
    let last = history.last().unwrap();
    assert_eq!((last["status"].as_str(), last["phase"].as_str()), (Some("aborted"), Some("apply")), "{last}");
    assert_eq!(last["error_code"], "precondition_failed");
    assert!(reopened.verify_history().unwrap().ok);
    // A later write works and the search tail never serves the refused text.
    reopened.ingest_note(&ingest("01_Projects/after", "later\n")).unwrap();
    reopened.sync_vault(&Default::default()).unwrap();
    let hits = reopened.search(&paravault::retrieval::SearchParams::fts("agent", 10)).unwrap();
    assert!(hits.results.is_empty(), "the refused text is never served");
}

/// An MCP server is killed right after acknowledging a write; a person then edits the note;
/// every later process (a read-only lint included) must keep the edit.
#[test]
fn an_edit_after_a_killed_servers_write_survives_every_later_process() {
    let (dir, vault) = vault(BASE);
    drop(vault);
    let root = dir.path();
    for round in 0..6 {
        let name = format!("03_Resources/victim{round}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_paravault"))
            .arg("--vault")
            .arg(root)
            .arg("mcp")
            .env("PARAVAULT_STDIO_WATCHDOG", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut call = |message: Value| {
            writeln!(stdin, "{message}").unwrap();
            stdin.flush().unwrap();
            if message.get("id").is_none() {
                return Value::Null;
            }
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            serde_json::from_str::<Value>(&line).unwrap()
        };
        call(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        );
        call(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let reply = call(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ingest_note", "arguments": {
            "name": name, "note_type": "Resource", "title": format!("Victim {round}"), "description": "a note a person edits next", "content": "agent text\n"}}}));
        assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        let file = root.join(format!("{name}.md"));
        let mut edited = std::fs::read_to_string(&file).unwrap();
        edited.push_str(&format!("PERSON EDIT {round}\n"));
        std::fs::write(&file, &edited).unwrap();
        // Half the rounds SIGKILL (no checkpoint), half SIGTERM (checkpoint on the way out).
        if round % 2 == 0 {
            child.kill().unwrap();
        } else {
            Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
        }
        let _ = child.wait();
        let lint = Command::new(env!("CARGO_BIN_EXE_paravault")).arg("--vault").arg(root).arg("lint").output().unwrap();
        assert!(lint.status.code().is_some(), "lint ran");
        std::thread::sleep(Duration::from_millis(20));
        let search = Command::new(env!("CARGO_BIN_EXE_paravault")).arg("--vault").arg(root).args(["search", "victim"]).output().unwrap();
        assert!(search.status.code().is_some());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), edited, "round {round}: the person's edit was reverted");
    }
    let reopened = Vault::open(root, Default::default()).unwrap();
    assert!(reopened.verify_history().unwrap().ok);
}

#[test]
fn recovery_leaves_a_file_that_holds_neither_image_and_names_it() {
    let (dir, vault) = vault(BASE);
    drop(vault);
    let root = dir.path();
    // A CLI ingest killed right after its commit point: the intent is in the journal, the
    // note is not in place yet.
    let mut child = Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(root)
        .args(["ingest", "01_Projects/clash", "--type", "Project", "--title", "Clash", "--description", "d", "--content", "engine text"])
        .env("PARAVAULT_CRASH_AT", "after_commit")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    assert!(BufReader::new(stderr).lines().map_while(Result::ok).any(|l| l.contains("PARAVAULT_CRASH_POINT")));
    child.kill().unwrap();
    let _ = child.wait();
    // A person creates the same file meanwhile.
    let file = root.join("01_Projects/clash.md");
    std::fs::write(&file, "my own notes\n").unwrap();
    let reopened = Vault::open(root, Default::default()).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "my own notes\n");
    let history = reopened.read_memory_history(10, 0).unwrap();
    let recovered = history.iter().find(|r| r["recovered"] == "true").expect("a recovered receipt");
    assert_eq!(recovered["conflicts"], json!(["01_Projects/clash.md"]), "{recovered}");
    assert!(reopened.verify_history().unwrap().ok);
}

#[test]
fn leftover_temporary_files_of_killed_writes_are_removed_at_open_and_counted() {
    let (dir, vault) = vault(BASE);
    vault.lint().unwrap();
    drop(vault);
    let root = dir.path();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    let mut leftovers = Vec::new();
    for rel in ["01_Projects/.pv-tmp-abc123", ".paravault/.pv-tmp-def456"] {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "half a note").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
        leftovers.push(path);
    }
    // A temporary file younger than the leftover age may be a write in flight: kept.
    let young = root.join("02_Areas/.pv-tmp-young");
    std::fs::write(&young, "in flight").unwrap();
    let reopened = Vault::open(root, Default::default()).unwrap();
    let doctor = reopened.doctor().unwrap().vault_check.unwrap();
    assert_eq!(doctor.freshness.leftover_temps_removed, 2, "{:?}", doctor.freshness);
    assert!(leftovers.iter().all(|p| !p.exists()));
    assert!(young.exists());
    assert!(!doctor.invalid_notes.iter().any(|e| e.path.contains(".pv-tmp-")));
    let files = reopened.with_inventory(|inv| inv.files.iter().map(ToString::to_string).collect::<Vec<_>>()).unwrap();
    assert!(!files.iter().any(|f| f.contains(".pv-tmp-")), "temporary files are no attachments: {files:?}");
}

#[test]
fn rot_audit_lists_are_bounded_with_exact_totals_and_a_cursor_through_every_page() {
    let mut fixture = String::new();
    for i in 0..25 {
        fixture.push_str(&format!("-- 03_Resources/tiny{i:02}.md --\n{}", note("Resource", &format!("Tiny {i}"), "x\n")));
    }
    let (_dir, vault) = vault(&fixture);
    let first = vault.rot_audit(&RotRequest { max_items: Some(10), ..Default::default() }).unwrap();
    assert_eq!((first.trivial.len(), first.totals.trivial), (10, 25));
    assert!(first.page.truncated);
    let mut seen: Vec<String> = first.trivial.iter().map(|t| t.path.clone()).collect();
    let mut cursor = first.page.next_cursor.clone();
    while let Some(next) = cursor {
        let page = vault.rot_audit(&RotRequest { max_items: Some(10), cursor: Some(next), ..Default::default() }).unwrap();
        assert_eq!(page.totals.trivial, 25);
        seen.extend(page.trivial.iter().map(|t| t.path.clone()));
        cursor = page.page.next_cursor.clone();
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!((seen.len(), sorted.len()), (25, 25), "every item exactly once");
    let default = vault.rot_audit(&RotRequest::default()).unwrap();
    assert_eq!(default.page.max_items, vault.policy().policy.maintenance.report_items_default);
    let all = vault.rot_audit(&RotRequest { unbounded: true, ..Default::default() }).unwrap();
    assert_eq!((all.trivial.len(), all.page.truncated), (25, false));
    for bad in [RotRequest { max_items: Some(0), ..Default::default() }, RotRequest { cursor: Some("x".into()), ..Default::default() }] {
        assert_eq!(vault.rot_audit(&bad).unwrap_err().code(), "invalid_argument");
    }
    let from = all.computed_from.expect("computed_from");
    assert_eq!(from.notes, 25);
    assert_eq!(from.disk_watch, "loaded");
}

#[test]
fn reports_name_the_generation_and_model_state_they_were_computed_from() {
    let (_dir, vault) = vault(BASE);
    let before = vault.lint().unwrap().computed_from.unwrap();
    assert_eq!(before.generation, None);
    vault.sync_vault(&Default::default()).unwrap();
    let after = vault.doctor().unwrap().vault_check.unwrap().computed_from;
    assert!(after.generation.is_some(), "{after:?}");
    assert_eq!(after.source_snapshot_hash, before.source_snapshot_hash);
    assert!(after.observed_at.is_some());
}

/// The first-run screen: what paravault is, the doctor summary, and client configurations
/// naming this binary's absolute path.
#[test]
fn paravault_without_a_command_explains_itself_and_prints_mcp_configurations() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_paravault"))
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .env("XDG_DATA_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_paravault")).canonicalize().unwrap();
    assert!(text.contains("governed knowledge vault"), "{text}");
    // A new default vault is healthy: initialised and searchable (its first generation).
    assert!(text.contains("status: ok"), "{text}");
    assert!(text.contains("search: generation "), "{text}");
    assert!(text.contains(&format!("\"command\": \"{}\"", binary.display())), "{text}");
    assert!(text.contains("[mcp_servers.paravault]"), "{text}");
    assert!(home.path().join("paravault/vault/index.md").exists(), "the default vault was initialised");
}

#[test]
fn the_persisted_inventory_is_reused_after_a_stat_walk_and_rebuilt_when_untrusted() {
    let (dir, vault) = vault(BASE);
    let root = dir.path().to_path_buf();
    drop(vault);
    // Files changed within a timestamp tick of being read are racy and never persisted.
    std::thread::sleep(Duration::from_millis(60));
    let open = || Vault::open(&root, crate::support::options()).unwrap();
    let first = open();
    first.lint().unwrap();
    assert_eq!(first.freshness().inventory_cache, "absent");
    drop(first);
    assert!(root.join(".paravault/inventory.redb").is_file());

    let second = open();
    second.lint().unwrap();
    let freshness = second.freshness();
    assert_eq!(freshness.inventory_cache, "reused");
    assert_eq!((freshness.load.reused, freshness.load.read), (2, 0), "{freshness:?}");
    drop(second);

    // An outside edit of the same size between two processes: the stat walk catches it.
    let hub = root.join("01_Projects/hub.md");
    let text = std::fs::read_to_string(&hub).unwrap().replace("See [[spoke]].", "See [[spake]].");
    std::fs::write(&hub, text).unwrap();
    let third = open();
    let rules = crate::support::rules(&third.lint().unwrap());
    assert!(rules.contains(&("broken-link".into(), "01_Projects/hub.md".into())), "{rules:?}");
    assert_eq!(third.freshness().load.read, 1, "{:?}", third.freshness());
    drop(third);

    // A corrupt file is never trusted: the inventory is rebuilt from the notes, then rewritten.
    let cache = root.join(".paravault/inventory.redb");
    crate::support::damage_persisted_inventory(&root, b"Spoke");
    std::thread::sleep(Duration::from_millis(60));
    let fourth = open();
    let rules = crate::support::rules(&fourth.lint().unwrap());
    assert!(rules.contains(&("broken-link".into(), "01_Projects/hub.md".into())), "{rules:?}");
    let freshness = fourth.freshness();
    assert!(freshness.inventory_cache.starts_with("rebuilt: checksum"), "{freshness:?}");
    assert_eq!(freshness.load.read, 2);
    drop(fourth);
    for garbage in [&b"PVINVENT"[..], b"", b"not an inventory at all, just text"] {
        std::fs::write(&cache, garbage).unwrap();
        let vault = open();
        vault.lint().unwrap();
        assert!(vault.freshness().inventory_cache.starts_with("rebuilt"), "{:?}", vault.freshness());
    }
    // Another policy: the records were judged under other rules, so they are read again.
    std::thread::sleep(Duration::from_millis(60));
    let fifth = open();
    fifth.lint().unwrap();
    assert_eq!(fifth.freshness().inventory_cache, "reused");
    drop(fifth);
    std::fs::write(root.join(".paravault/policy.yaml"), "maintenance:\n  trivial_body_chars: 10\n").unwrap();
    let sixth = open();
    sixth.lint().unwrap();
    assert_eq!(sixth.freshness().inventory_cache, "rebuilt: computed under another policy");
}
