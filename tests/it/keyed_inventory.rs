//! A one-shot write process's partial model (`inventory_cache::keyed`) against the whole
//! model: two copies of one vault take the same CLI writes and the same outside edits, one
//! writing on the keyed copy of the persisted inventory, the other with that copy removed
//! before every write (so it loads the whole model). Every answer, every file of the vault and
//! every published snapshot must be the same, and the keyed path must really be taken (and the
//! partial model folded back into the keyed copy once the pages it read again add up).

use std::path::Path;
use std::time::Duration;

use crate::support::{note, para_dir, paravault, write_fixture};

/// A small deterministic generator (the sequence must be the same for both copies).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

const FOLDERS: &[&str] = &[
    "01_Projects",
    "01_Projects/alpha",
    "01_Projects/alpha/deep",
    "02_Areas",
    "02_Areas/home",
    "03_Resources",
    "03_Resources/refs",
    "06_Daily_Logs",
];

fn type_of(folder: &str) -> &'static str {
    match folder.split('/').next() {
        Some("01_Projects") => "Project",
        Some("02_Areas") => "Area",
        Some("06_Daily_Logs") => "Daily Log",
        _ => "Resource",
    }
}

/// The fixture: notes linking to each other (by name, by path, to an attachment, to a name
/// two folders share), an invalid note, a root note and an attachment.
fn fixture() -> String {
    let mut out = String::new();
    for (i, folder) in FOLDERS.iter().cycle().take(40).enumerate() {
        let body = format!("Note {i} links [[n{}]] and [[n{}]] and [[shared]].\n", (i + 1) % 40, (i * 7) % 40);
        out.push_str(&format!("-- {folder}/n{i}.md --\n{}", note(type_of(folder), &format!("N {i}"), &body)));
    }
    out.push_str(&format!("-- 02_Areas/shared.md --\n{}", note("Area", "Shared one", "one\n")));
    out.push_str(&format!("-- 03_Resources/refs/shared.md --\n{}", note("Resource", "Shared two", "two ![[pic.png]]\n")));
    out.push_str("-- 03_Resources/refs/pic.png --\nPNG\n");
    out.push_str("-- 02_Areas/broken.md --\n---\ntype: Area\ntitle: Broken\n---\nno description\n");
    out.push_str(&format!("-- root-note.md --\n{}", note("Daily Log", "Root", "root [[n3]]\n")));
    out
}

/// The receipt (or error) with what differs between two runs of the same write masked.
fn answer(output: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&output.stdout);
    let Ok(serde_json::Value::Object(mut receipt)) = serde_json::from_str::<serde_json::Value>(&text) else {
        return format!("exit {:?}: {}", output.status.code(), String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or(""));
    };
    for volatile in ["at", "duration_ms", "phase_ms", "search_generation", "span_id", "trace_id", "prev", "hash", "receipt_id"] {
        receipt.remove(volatile);
    }
    serde_json::Value::Object(receipt).to_string()
}

/// The vault's files, engine state aside.
fn notes_of(root: &Path) -> Vec<(String, Vec<u8>)> {
    crate::support::snapshot_tree(root).into_iter().filter(|(path, _)| !path.starts_with(".paravault")).collect()
}

/// The published generation's source snapshot digest and counts.
fn published(root: &Path) -> serde_json::Value {
    let active = std::fs::read_to_string(root.join(".paravault/search/ACTIVE")).unwrap_or_default();
    let manifest = root.join(".paravault/search/generations").join(format!("{}.json", active.trim()));
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).unwrap_or_default()).unwrap_or_default();
    serde_json::json!([manifest["source_snapshot_hash"], manifest["counts"], manifest["exclusions"]])
}

/// One CLI write, returning its output and whether it planned on a partial model.
fn cli_write(root: &Path, args: &[&str]) -> (std::process::Output, bool) {
    let (output, keyed, _) = cli_write_folding(root, args);
    (output, keyed)
}

/// `cli_write`, and whether the write folded its partial model back into the keyed copy.
fn cli_write_folding(root: &Path, args: &[&str]) -> (std::process::Output, bool, bool) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(root)
        // The receipt (or the error) as JSON on stdout, to compare.
        .arg("--json")
        .args(args)
        .env("PARAVAULT_TODAY", "2026-06-01")
        .env("PARAVAULT_NOW", "2026-06-01T10:00:00Z")
        .env("PARAVAULT_LOG", "paravault::state::model=debug,paravault::write=debug")
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let keyed = stderr.contains("partial model loaded by key") && !stderr.contains("loading it whole");
    let folded = stderr.contains("partial model folded into the keyed inventory");
    (output, keyed, folded)
}

/// `cli_write`, with what the write process logged.
fn cli_write_logging(root: &Path, args: &[&str]) -> (std::process::Output, String) {
    let (output, _, _) = cli_write_folding(root, args);
    // The log without its terminal colours.
    let mut log = String::new();
    let mut rest = String::from_utf8_lossy(&output.stderr).into_owned();
    while let Some(at) = rest.find('\u{1b}') {
        log.push_str(&rest[..at]);
        rest = rest[at..].split_once('m').map_or(String::new(), |(_, after)| after.to_string());
    }
    log.push_str(&rest);
    (output, log)
}

/// One outside edit, the same on both copies.
fn outside_edit(root: &Path, step: usize, pick: usize) {
    let target = format!("{}/n{}.md", FOLDERS[pick % FOLDERS.len()], pick % 40);
    let path = root.join(&target);
    match step % 4 {
        0 if path.is_file() => {
            let mut text = std::fs::read_to_string(&path).unwrap();
            text.push_str(&format!("Edited outside, now also [[n{}]].\n", (pick * 3) % 40));
            std::fs::write(&path, text).unwrap();
        }
        1 => {
            let folder = FOLDERS[(pick + 3) % FOLDERS.len()];
            let body = format!("Made outside, links [[n{}]].\n", pick % 40);
            std::fs::write(root.join(format!("{folder}/outside{step}.md")), note(type_of(folder), &format!("Outside {step}"), &body))
                .unwrap();
        }
        2 if path.is_file() => std::fs::remove_file(&path).unwrap(),
        3 => {
            std::fs::create_dir_all(root.join("03_Resources/made/inner")).unwrap();
            std::fs::write(
                root.join(format!("03_Resources/made/inner/m{step}.md")),
                note("Resource", &format!("M {step}"), "new folder\n"),
            )
            .unwrap();
        }
        _ => {}
    }
}

/// `paravault watch` on a vault, killed when dropped.
pub(crate) struct FolderJournalProcess(std::process::Child);

impl FolderJournalProcess {
    /// Starts it and waits for the line it prints once every folder is watched.
    pub(crate) fn start(root: &Path) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
            .arg("--vault")
            .arg(root)
            .arg("watch")
            .env_remove("PARAVAULT_VAULT_DIR")
            .env_remove("POWER_VAULT_DIR")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let ready: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert_eq!(ready["state"], "watching", "{ready}");
        FolderJournalProcess(child)
    }

    fn still_running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for FolderJournalProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_write_on_the_keyed_partial_model_answers_and_writes_exactly_as_on_the_whole_model() {
    keyed_writes_equal_whole_writes(false);
}

/// The same, with the keyed copy's vault kept by a folder journal (`paravault watch`): the
/// writes that trust it instead of a stat of each folder answer and write exactly as the whole
/// model does, through the same outside creates, edits, removals and new folders.
#[test]
fn a_write_proven_by_the_folder_journal_answers_and_writes_exactly_as_on_the_whole_model() {
    keyed_writes_equal_whole_writes(true);
}

fn keyed_writes_equal_whole_writes(with_journal: bool) {
    let keyed_dir = para_dir();
    let whole_dir = para_dir();
    let (keyed_root, whole_root) = (keyed_dir.path(), whole_dir.path());
    for root in [keyed_root, whole_root] {
        write_fixture(root, &fixture());
    }
    std::thread::sleep(Duration::from_millis(60));
    for root in [keyed_root, whole_root] {
        assert!(paravault(root, &["lint"]).status.code().is_some_and(|c| c <= 1));
        assert!(root.join(".paravault/inventory.redb").is_file(), "a whole-vault reader writes the keyed copy");
    }
    let mut journal = with_journal.then(|| FolderJournalProcess::start(keyed_root));
    let mut journal_writes = 0;
    // Keyed writes that brought a folder up to the disk by the entries the journal named in it.
    let mut entries_writes = 0;
    // Journal writes whose plan stat'ed none of the files it consulted (the load had proven them).
    let mut statless_writes = 0;
    let mut rng = Lcg(7);
    let mut keyed_writes = 0;
    let mut writes = 0;
    let mut folds = 0;
    for step in 0..36 {
        match rng.below(10) {
            0 | 1 => {
                let pick = rng.below(1000);
                for root in [keyed_root, whole_root] {
                    outside_edit(root, step, pick);
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            2 => {
                for root in [keyed_root, whole_root] {
                    paravault(root, &["lint"]);
                }
            }
            _ => {
                let folder = match rng.below(5) {
                    // A folder made outside (the write lists it as new), once it exists.
                    0 => "03_Resources/made/inner".to_string(),
                    _ => FOLDERS[rng.below(FOLDERS.len())].to_string(),
                };
                let earlier = format!("k{}", step.saturating_sub(1 + rng.below(4)));
                let targets = ["n1", "N2", "shared", "pic.png", "nothing-here", "n39", earlier.as_str(), "03_Resources/refs/shared", "m3"];
                let links: Vec<String> = (0..rng.below(4)).map(|_| format!("[[{}]]", targets[rng.below(targets.len())])).collect();
                let name = format!("{folder}/k{step}");
                let content = format!("Written by step {step}: {}\n", links.join(" "));
                let title = format!("K {step}");
                let args = [
                    "ingest",
                    name.as_str(),
                    "--title",
                    title.as_str(),
                    "--description",
                    "A keyed test note",
                    "--content",
                    content.as_str(),
                ];
                let (keyed_output, log) = cli_write_logging(keyed_root, &args);
                let keyed = log.contains("partial model loaded by key") && !log.contains("loading it whole");
                folds += usize::from(log.contains("partial model folded into the keyed inventory"));
                journal_writes += usize::from(log.contains("folders proven by the folder journal"));
                entries_writes += usize::from(log.contains("folders_by_entries: ") && !log.contains("folders_by_entries: 0"));
                statless_writes += usize::from(log.contains("consulted files proven by the folder journal"));
                std::fs::remove_file(whole_root.join(".paravault/inventory.redb")).ok();
                let (whole_output, whole_keyed) = cli_write(whole_root, &args);
                assert!(!whole_keyed, "step {step}: the copy without a keyed inventory loads the whole model");
                assert_eq!(answer(&keyed_output), answer(&whole_output), "step {step}: {name} answered differently");
                assert_eq!(published(keyed_root), published(whole_root), "step {step}: the published snapshot differs");
                writes += 1;
                keyed_writes += usize::from(keyed);
            }
        }
        assert_eq!(notes_of(keyed_root), notes_of(whole_root), "step {step}: the vaults' files differ");
    }
    assert!(writes >= 20, "the sequence wrote {writes} times");
    assert!(keyed_writes * 2 >= writes, "only {keyed_writes} of {writes} writes planned on the keyed partial model");
    // The pages the writes left unsettled add up; a write then folds its model back into the
    // keyed copy (and the comparisons above hold after each fold).
    assert!(folds >= 1, "no write folded its partial model back into the keyed copy");
    match journal.as_mut() {
        Some(journal) => {
            assert!(journal.still_running(), "the folder journal stopped");
            let doctor: serde_json::Value = serde_json::from_slice(&paravault(keyed_root, &["doctor", "--json"]).stdout).unwrap();
            assert_eq!(doctor["vault_check"]["folder_journal_running"], true, "{doctor}");
            assert!(journal_writes * 2 >= keyed_writes, "only {journal_writes} of {keyed_writes} keyed writes trusted the folder journal");
            assert!(
                entries_writes * 2 >= journal_writes,
                "only {entries_writes} of {journal_writes} journal writes looked at named entries"
            );
            // Every write the journal proved planned without a stat of what it consulted, and
            // answered as the whole model did (checked at each step above).
            assert_eq!(statless_writes, journal_writes, "journal writes that still stat'ed what they consulted");
        }
        None => assert_eq!((journal_writes, entries_writes, statless_writes), (0, 0, 0)),
    }
}

/// Outside edits in place (the same file, its folder's identity unchanged) of notes a write
/// consults are in that write's answer: a note its folder's catalog lists (retitled) and a
/// note in a folder the write does not load that linked to the new note (the link removed, so
/// the new note is an orphan). With the folder journal, which names each edited entry (the
/// load reads it, and nothing consulted is stat'ed again), and without, where the folder
/// checks cannot see them and the stat of each consulted file does.
#[test]
fn edits_in_place_of_notes_a_write_consults_are_in_its_answer_with_and_without_the_folder_journal() {
    for with_journal in [false, true] {
        let dir = para_dir();
        let root = dir.path();
        let linker = format!("-- 02_Areas/home/linker.md --\n{}", note("Area", "Linker", "links [[k2]]\n"));
        write_fixture(root, &(fixture() + &linker));
        std::thread::sleep(Duration::from_millis(60));
        assert!(paravault(root, &["lint"]).status.code().is_some_and(|c| c <= 1));
        let _journal = with_journal.then(|| FolderJournalProcess::start(root));
        let ingest = |name: &str| {
            cli_write_logging(root, &["ingest", name, "--title", "K", "--description", "A keyed test note", "--content", "body\n"])
        };
        // The first write publishes the vault's first search generation (on the whole model),
        // the second records the journal's position in the keyed copy.
        for name in ["03_Resources/k0", "03_Resources/k1"] {
            let (output, log) = ingest(name);
            assert!(output.status.success(), "{log}");
        }
        let folders = || ["03_Resources", "02_Areas/home"].map(|f| std::fs::metadata(root.join(f)).unwrap().modified().unwrap());
        let before = folders();
        let edit = |path: &str, from: &str, to: &str| {
            let text = std::fs::read_to_string(root.join(path)).unwrap();
            assert!(text.contains(from), "{path}: {text}");
            std::fs::write(root.join(path), text.replace(from, to)).unwrap();
        };
        edit("03_Resources/n5.md", "title: N 5\n", "title: N 5 edited in place\n");
        edit("02_Areas/home/linker.md", "links [[k2]]", "links nothing");
        assert_eq!(before, folders(), "a folder moved");
        // Past the racy window of every stamp involved.
        std::thread::sleep(Duration::from_millis(60));
        let (second, log) = ingest("03_Resources/k2");
        assert!(second.status.success(), "{log}");
        // (Without the journal, the keyed load's own stat of the linker outside its folders
        // finds the edit and loads the model whole.)
        if with_journal {
            assert!(log.contains("partial model loaded by key") && !log.contains("loading it whole"), "{log}");
        }
        let catalog = std::fs::read_to_string(root.join("03_Resources/_index.md")).unwrap();
        assert!(catalog.contains("### N 5 edited in place"), "journal {with_journal}: the catalog missed the edit:\n{log}");
        let receipt: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
        assert_eq!(receipt["lint_orphans"], 1, "journal {with_journal}: the removed link still counted:\n{receipt}\n{log}");
        assert_eq!(log.contains("consulted files proven by the folder journal"), with_journal, "{log}");
    }
}

/// A write on the keyed partial model whose publish needs every note (the active index is an
/// older engine's: the write rebuilds it) publishes from the whole model, as a sync of the
/// vault does: never an index of only the notes the partial model holds.
#[test]
fn a_publish_that_needs_every_note_is_made_from_the_whole_model() {
    let dir = para_dir();
    let root = dir.path();
    write_fixture(root, &fixture());
    std::thread::sleep(Duration::from_millis(60));
    assert!(paravault(root, &["lint"]).status.code().is_some_and(|c| c <= 1));
    let ingest = |name: &str| {
        cli_write_logging(root, &["ingest", name, "--title", "K", "--description", "A keyed test note", "--content", "body\n"])
    };
    for name in ["03_Resources/k0", "03_Resources/k1"] {
        let (output, log) = ingest(name);
        assert!(output.status.success(), "{log}");
    }
    // The active generation as an older engine left it.
    let active = std::fs::read_to_string(root.join(".paravault/search/ACTIVE")).unwrap();
    let manifest_path = root.join(".paravault/search/generations").join(format!("{}.json", active.trim()));
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["index_schema_version"] = 0.into();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let (output, log) = ingest("03_Resources/k2");
    assert!(output.status.success(), "{log}");
    assert!(log.contains("partial model loaded by key"), "{log}");
    assert!(log.contains("the partial model did not hold what the write's step needs"), "{log}");
    let rebuilt = published(root);
    let sync = paravault(root, &["sync", "--allow-partial", "--force-rebuild"]);
    assert!(sync.status.success(), "{}", String::from_utf8_lossy(&sync.stderr));
    assert_eq!(rebuilt, published(root), "the write's rebuild is not what a sync of every note publishes:\n{log}");
}

#[test]
fn a_link_planted_as_the_keyed_inventory_is_never_followed() {
    let dir = para_dir();
    let root = dir.path();
    write_fixture(root, &fixture());
    assert!(paravault(root, &["lint"]).status.code().is_some_and(|c| c <= 1));
    let outside = tempfile::tempdir().unwrap();
    let canary = outside.path().join("precious.redb");
    std::fs::write(&canary, b"not yours").unwrap();
    let index = root.join(".paravault/inventory.redb");
    std::fs::remove_file(&index).unwrap();
    std::os::unix::fs::symlink(&canary, &index).unwrap();
    let args = ["ingest", "01_Projects/linked", "--title", "Linked", "--description", "d", "--content", "body"];
    let (output, keyed) = cli_write(root, &args);
    assert!(!keyed, "a linked keyed inventory is never read");
    assert!(String::from_utf8_lossy(&output.stdout).contains("vault_boundary"), "{}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(std::fs::read(&canary).unwrap(), b"not yours", "the file outside the vault is untouched");
    assert!(std::fs::symlink_metadata(&index).unwrap().file_type().is_symlink(), "the refused open leaves the link for a person to see");
}

/// A vault of many folders (a write then checks those it does not load on a helper thread
/// while it plans): outside edits in such folders, made before the write, are caught before
/// its commit point, and the write answers exactly as on the whole model.
#[test]
fn a_folder_that_moved_while_its_check_was_deferred_is_caught_before_the_commit() {
    let keyed_dir = para_dir();
    let whole_dir = para_dir();
    let (keyed_root, whole_root) = (keyed_dir.path(), whole_dir.path());
    let mut fixture = String::new();
    for i in 0..300 {
        let body = format!("Folder {i} links [[n{}]].\n", (i + 1) % 300);
        fixture.push_str(&format!("-- 02_Areas/f{i:03}/n{i}.md --\n{}", note("Area", &format!("N {i}"), &body)));
    }
    for root in [keyed_root, whole_root] {
        write_fixture(root, &fixture);
    }
    std::thread::sleep(Duration::from_millis(60));
    for root in [keyed_root, whole_root] {
        assert!(paravault(root, &["lint"]).status.code().is_some_and(|c| c <= 1));
    }
    let retried = "loading the partial model again with every folder checked first";
    // (outside edit, the note the write links to, whether the write is refused)
    type Edit = fn(&Path);
    let cases: [(&str, Edit, &str, bool); 4] = [
        ("nothing moved", |_| {}, "n5", false),
        ("a linked note removed", |root| std::fs::remove_file(root.join("02_Areas/f007/n7.md")).unwrap(), "n7", true),
        (
            "a second note of a linked name made",
            |root| std::fs::write(root.join("02_Areas/f008/n9.md"), note("Area", "Twin", "twin\n")).unwrap(),
            "n9",
            true,
        ),
        (
            "a linked note made",
            |root| std::fs::write(root.join("02_Areas/f010/fresh.md"), note("Area", "Fresh", "fresh\n")).unwrap(),
            "fresh",
            false,
        ),
    ];
    for (step, (what, edit, target, refused)) in cases.into_iter().enumerate() {
        for root in [keyed_root, whole_root] {
            edit(root);
        }
        std::thread::sleep(Duration::from_millis(25));
        let name = format!("03_Resources/w{step}");
        let content = format!("Links [[{target}]].\n");
        let args = ["ingest", name.as_str(), "--title", "W", "--description", "d", "--content", content.as_str()];
        let (keyed_output, log) = cli_write_logging(keyed_root, &args);
        std::fs::remove_file(whole_root.join(".paravault/inventory.redb")).ok();
        let (whole_output, _) = cli_write(whole_root, &args);
        assert_eq!(answer(&keyed_output), answer(&whole_output), "{what}: the write answered differently");
        assert_eq!(keyed_output.status.success(), !refused, "{what}: {}", answer(&keyed_output));
        assert!(log.contains("deferred=true"), "{what}: the folder checks were not deferred: {log}");
        assert_eq!(log.contains(retried), step > 0, "{what}: {log}");
        if step > 0 {
            // The copy's rows are stale beyond what the journal names: the write folds them.
            assert!(log.contains("partial model folded into the keyed inventory"), "{what}: {log}");
        }
        assert_eq!(notes_of(keyed_root), notes_of(whole_root), "{what}: the vaults' files differ");
        assert_eq!(published(keyed_root), published(whole_root), "{what}: the published snapshot differs");
    }
}
