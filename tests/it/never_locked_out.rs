//! Issue 46's lock-outs, as a person at a shell and an agent in a new process meet them: a
//! dense vault whose embedding model went missing keeps writing (the note's vectors owed) and
//! answers every reader; a dense sync with the model back embeds what is owed; readers answer
//! while another process holds the writer lock, and a writer that must wait says for whom.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::model::model_dir;
use crate::support::{note, paravault, run_sdk_script_with, write_fixture};

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn ok(out: std::process::Output, what: &str) -> std::process::Output {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A vault whose policy finds the model through `<dir>/model`, a link to the real one.
fn dense_vault() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    let link = dir.path().join("model");
    std::os::unix::fs::symlink(model_dir(), &link).unwrap();
    write_fixture(
        &vault,
        &format!(
            "-- .paravault/policy.yaml --\nembedding:\n  local_dir: {}\n-- 03_Resources/knives.md --\n{}",
            link.display(),
            note("Resource", "Knife care", "Hone the blade before each use and sharpen it on a whetstone.")
        ),
    );
    ok(paravault(&vault, &["sync", "--dense"]), "first dense sync");
    (dir, vault)
}

#[test]
fn a_missing_model_never_locks_the_vault_and_a_dense_sync_pays_what_is_owed() {
    let (dir, vault) = dense_vault();
    std::fs::remove_file(dir.path().join("model")).unwrap();

    // The write lands whole and says its vectors are owed.
    let ingest = ok(
        paravault(
            &vault,
            &[
                "--json",
                "ingest",
                "03_Resources/bread",
                "--type",
                "Resource",
                "--title",
                "Sourdough",
                "--description",
                "Baking",
                "--content",
                "Feed the sourdough starter and let the dough rise overnight.",
            ],
        ),
        "ingest without the model",
    );
    let receipt = json(&ingest);
    assert_eq!(receipt["status"], "ok", "{receipt}");
    assert_eq!(receipt["vectors_owed"], serde_json::json!(["03_Resources/bread.md"]), "{receipt}");
    assert_eq!(receipt["search_mode"], "fts", "indexed by keyword only: {receipt}");
    assert!(vault.join("03_Resources/bread.md").is_file());
    let again =
        paravault(&vault, &["ingest", "03_Resources/bread", "--type", "Resource", "--title", "T", "--description", "D", "--content", "x"]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already_exists"), "the first write landed");

    // Every reader answers.
    let doctor = json(&paravault(&vault, &["--json", "doctor"]));
    let issues: Vec<&str> = doctor["issues"].as_array().unwrap().iter().filter_map(|i| i["code"].as_str()).collect();
    assert!(issues.contains(&"vectors_owed") && issues.contains(&"embedding_model_missing"), "{doctor}");
    assert_eq!(doctor["embedding"]["dense_index"]["owed"], serde_json::json!(["03_Resources/bread.md"]), "{doctor}");
    ok(paravault(&vault, &["lint"]), "lint");
    let history = String::from_utf8(ok(paravault(&vault, &["history", "--verify"]), "history").stdout).unwrap();
    assert!(history.contains("chain verified"), "{history}");
    let found = json(&ok(paravault(&vault, &["--json", "search", "sourdough starter"]), "search"));
    assert_eq!(found["results"][0]["source"]["path"], "03_Resources/bread.md", "{found}");
    assert!(found["fallback_reason"].as_str().unwrap_or("").contains("model_unavailable"), "{found}");
    run_sdk_script_with("no_model.py", &[&vault]);

    // The model back: a dense sync embeds exactly what was owed, and semantic search finds it.
    std::os::unix::fs::symlink(model_dir(), dir.path().join("model")).unwrap();
    let sync = json(&ok(paravault(&vault, &["--json", "sync", "--dense"]), "dense sync"));
    assert_eq!(sync["owed_embedded"], 1, "{sync}");
    assert_eq!(sync["dense"]["embedded_now"], 1, "{sync}");
    assert_eq!(sync["dense"]["notes_owing_vectors"], 0, "{sync}");
    let semantic = json(&ok(paravault(&vault, &["--json", "search", "--mode", "semantic", "baking a loaf of bread"]), "semantic search"));
    assert_eq!(semantic["results"][0]["source"]["path"], "03_Resources/bread.md", "{semantic}");
    assert!(semantic["fallback_reason"].is_null(), "{semantic}");
    let doctor = json(&paravault(&vault, &["--json", "doctor"]));
    assert!(doctor["embedding"]["dense_index"]["owed"].is_null(), "{doctor}");
}

#[test]
fn the_next_write_with_the_model_embeds_what_an_earlier_one_owed() {
    let (dir, vault) = dense_vault();
    std::fs::remove_file(dir.path().join("model")).unwrap();
    let write = |name: &str, body: &str| {
        json(&ok(
            paravault(&vault, &["--json", "ingest", name, "--type", "Resource", "--title", "T", "--description", "D", "--content", body]),
            "ingest",
        ))
    };
    assert_eq!(
        write("03_Resources/a", "Tomatoes want deep watering twice a week.")["vectors_owed"],
        serde_json::json!(["03_Resources/a.md"])
    );
    std::os::unix::fs::symlink(model_dir(), dir.path().join("model")).unwrap();
    let receipt = write("03_Resources/b", "The borrow checker rejects two mutable references.");
    assert!(receipt.get("vectors_owed").is_none(), "{receipt}");
    assert_eq!(receipt["search_mode"], "semantic", "{receipt}");
    let doctor = json(&paravault(&vault, &["--json", "doctor"]));
    assert!(doctor["embedding"]["dense_index"]["owed"].is_null(), "the owed note was embedded with the write: {doctor}");
    let semantic = json(&ok(paravault(&vault, &["--json", "search", "--mode", "semantic", "growing vegetables in a garden"]), "semantic"));
    assert_eq!(semantic["results"][0]["source"]["path"], "03_Resources/a.md", "{semantic}");
}

/// Runs `paravault` in the background.
fn spawn(vault: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(vault)
        .args(args)
        .env("PARAVAULT_TODAY", "2026-06-01")
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn readers_answer_while_another_process_holds_the_writer_lock() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path();
    write_fixture(vault, &format!("-- 03_Resources/knives.md --\n{}", note("Resource", "Knife care", "Sharpen it on a whetstone.")));
    ok(paravault(vault, &["sync"]), "sync");
    ok(
        paravault(
            vault,
            &["ingest", "03_Resources/bread", "--type", "Resource", "--title", "T", "--description", "D", "--content", "Bake."],
        ),
        "ingest",
    );

    // Another process (this test) holds the writer lock, as a long `sync --dense` does.
    let mut lock = std::fs::OpenOptions::new().write(true).open(vault.join(".paravault/writer.lock")).unwrap();
    lock.lock().unwrap();
    lock.set_len(0).unwrap();
    writeln!(lock, "`paravault sync --dense` (pid {})", std::process::id()).unwrap();

    for args in [&["search", "whetstone"][..], &["lint"], &["history"], &["doctor"], &["read-sub-index", "03_Resources"], &["approvals"]] {
        let started = Instant::now();
        let mut child = spawn(vault, args);
        // Generous: a reader answers in well under a second; one that waited would hang.
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("`paravault {}` waited for the writer lock", args.join(" "));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = child.wait_with_output().unwrap();
        assert!(status.code().is_some_and(|c| c <= 1), "{args:?}: {status}: {}", String::from_utf8_lossy(&output.stderr));
        eprintln!("{args:?} answered in {:?} with the writer lock held elsewhere", started.elapsed());
    }

    // A writer waits, and says once for whom.
    let mut writer =
        spawn(vault, &["ingest", "03_Resources/cake", "--type", "Resource", "--title", "T", "--description", "D", "--content", "Whisk."]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(writer.try_wait().unwrap().is_none(), "the writer waits for the lock");
    lock.unlock().unwrap();
    let output = writer.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stderr.matches("waiting for `paravault sync --dense` (pid ").count(), 1, "{stderr}");
    assert!(!stderr.contains('\x1b'), "no colour codes off a terminal: {stderr:?}");
    assert!(vault.join("03_Resources/cake.md").is_file());
}

#[test]
fn a_write_lands_while_a_dense_sync_embeds() {
    // 1,500 notes: about 1,500 chunks, 20 s or more of embedding on two cores.
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    let words = ["river", "mountain", "forest", "ocean", "cloud", "stone", "garden", "kitchen", "engine", "harbor", "bridge", "meadow"];
    write_fixture(&vault, &format!("-- .paravault/policy.yaml --\nembedding:\n  local_dir: {}\n", model_dir().display()));
    std::fs::create_dir_all(vault.join("03_Resources")).unwrap();
    for i in 0..1500usize {
        let body: Vec<&str> = (0..120).map(|j| words[(i * 7 + j * j * 3 + j) % words.len()]).collect();
        std::fs::write(vault.join(format!("03_Resources/n{i:04}.md")), note("Resource", &format!("Note {i}"), &body.join(" "))).unwrap();
    }
    ok(paravault(&vault, &["sync"]), "fts sync");

    let mut sync = spawn(&vault, &["--json", "sync", "--dense"]);
    // Off a terminal the sync prints a progress line every few seconds; the first one about
    // embedding says it is in its slow part.
    let stderr = sync.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            if line.starts_with("embedding ") {
                let _ = tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    rx.recv_timeout(Duration::from_secs(300)).expect("a progress line about embedding");
    let started = Instant::now();
    let receipt = json(&ok(
        paravault(
            &vault,
            &[
                "--json",
                "ingest",
                "03_Resources/during",
                "--type",
                "Resource",
                "--title",
                "T",
                "--description",
                "D",
                "--content",
                "Written while the dense sync embeds.",
            ],
        ),
        "ingest during the dense sync",
    ));
    let took = started.elapsed();
    assert_eq!(receipt["status"], "ok");
    assert!(sync.try_wait().unwrap().is_none(), "the sync still embeds after the write landed in {took:?}");
    let output = sync.wait_with_output().unwrap();
    let lines = reader.join().unwrap();
    assert!(output.status.success(), "{lines:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["counts"]["indexed"], 1501, "the write is in the sync's generation: {report}");
    assert_eq!(report["dense"]["chunks"], 1501, "{report}");
    assert_eq!(report["dense"]["embedded_now"], 1501, "every chunk embedded by this sync (outside the lock but the last): {report}");
    assert!(lines.iter().any(|l| l.contains("/s, ETA ")), "{lines:?}");
    eprintln!("a write took {took:?} during a dense sync of 1,500 notes");
}

#[test]
fn a_dense_sync_over_mcp_reports_progress_to_a_client_that_asks() {
    let (_dir, vault) = dense_vault();
    for i in 0..40 {
        std::fs::write(
            vault.join(format!("03_Resources/p{i}.md")),
            note("Resource", &format!("P {i}"), &format!("Paragraph number {i} about rivers.")),
        )
        .unwrap();
    }
    run_sdk_script_with("progress.py", &[&vault]);
}

#[test]
fn the_next_shell_finds_the_model_an_earlier_dense_sync_used() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    let config = dir.path().join("config");
    write_fixture(
        &vault,
        &format!("-- 03_Resources/knives.md --\n{}", note("Resource", "Knife care", "Sharpen the blade on a whetstone.")),
    );
    let run = |args: &[&str], model_dir: Option<&Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_paravault"));
        command
            .arg("--vault")
            .arg(&vault)
            .args(args)
            .env("PARAVAULT_CONFIG_DIR", &config)
            // No Hugging Face cache of this machine, no model folder unless given.
            .env("HOME", dir.path())
            .env_remove("HF_HOME")
            .env_remove("HF_HUB_CACHE")
            .env_remove("PARAVAULT_MODEL_DIR")
            .env_remove("PARAVAULT_VAULT_DIR")
            .env_remove("POWER_VAULT_DIR");
        if let Some(model) = model_dir {
            command.env("PARAVAULT_MODEL_DIR", model);
        }
        command.output().unwrap()
    };
    // Without the model anywhere, a dense sync is refused before any work.
    let refused = run(&["sync", "--dense"], None);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("egress_denied"));
    // One shell names the model folder; its dense sync records where it was found.
    ok(run(&["sync", "--dense"], Some(model_dir())), "dense sync with PARAVAULT_MODEL_DIR");
    let remembered: serde_json::Value = serde_json::from_slice(&std::fs::read(config.join("models.json")).unwrap()).unwrap();
    assert_eq!(remembered.as_object().unwrap().len(), 1, "{remembered}");
    // The next shell, without the variable, finds it there.
    let found = json(&ok(run(&["--json", "search", "--mode", "semantic", "honing a knife"], None), "semantic search in the next shell"));
    assert_eq!(found["results"][0]["source"]["path"], "03_Resources/knives.md", "{found}");
    let ingest = json(&ok(
        run(
            &["--json", "ingest", "03_Resources/b", "--type", "Resource", "--title", "T", "--description", "D", "--content", "Bread."],
            None,
        ),
        "a write in the next shell",
    ));
    assert_eq!(ingest["search_mode"], "semantic", "embedded with the remembered model: {ingest}");
}
