//! Kill tests: a child `paravault` process is SIGKILLed at every named crash point (and at
//! random instants); after reopening, no note is torn, every ok receipt's after_sha256 is the
//! file on disk, the receipt chain verifies and the vault lints clean. Also the concurrency
//! test: several processes writing at once.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use paravault::store::faults::CRASH_POINTS;
use serde_json::Value;

use crate::support::{note, write_fixture};

fn runs_per_point() -> usize {
    std::env::var("PARAVAULT_KILL_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(20)
}

fn fresh_vault() -> tempfile::TempDir {
    let dir = crate::support::para_dir();
    write_fixture(dir.path(), &format!("-- log.md --\n# Log\n-- 01_Projects/hub.md --\n{}", note("Project", "Hub", "x\n")));
    dir
}

fn ingest_command(vault: &Path, name: &str, body: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_paravault"));
    cmd.arg("--vault").arg(vault).args([
        "ingest",
        name,
        "--type",
        "Project",
        "--title",
        name,
        "--description",
        "kill test",
        "--content",
        body,
    ]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
    cmd
}

/// Runs an ingest that stops at `point`, then SIGKILLs it.
fn kill_at(vault: &Path, name: &str, point: &str) {
    let mut child = ingest_command(vault, name, "[[hub]]").env("PARAVAULT_CRASH_AT", point).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut reached = false;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap_or_default();
        if line.contains("PARAVAULT_CRASH_POINT") {
            reached = true;
            break;
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert!(reached, "the child never reached crash point {point}");
}

/// The invariants every reopened vault must satisfy.
fn check_invariants(vault_dir: &Path, context: &str) {
    let vault = paravault::Vault::open(vault_dir, Default::default()).unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    let chain = vault.verify_history().unwrap();
    assert!(chain.ok, "{context}: {chain:?}");
    let receipts = vault.read_memory_history(1000, 0).unwrap();
    let mut latest: std::collections::BTreeMap<String, String> = Default::default();
    for r in receipts.iter().filter(|r| r["status"] == "ok") {
        latest.insert(r["path"].as_str().unwrap().to_string(), r["after_sha256"].as_str().unwrap().to_string());
    }
    for (path, sha) in &latest {
        let bytes = std::fs::read(vault_dir.join(path)).unwrap_or_else(|_| panic!("{context}: {path} has an ok receipt but is missing"));
        assert_eq!(&paravault::write::sha256_hex(&bytes), sha, "{context}: {path} differs from its receipt");
    }
    // The served search generation (the active one plus the journal's tail) holds exactly the
    // committed notes.
    let active = paravault::search::generation::read_active(vault_dir).unwrap();
    if active.is_some() {
        let served = paravault::search::generation::acquire(vault_dir, vault.policy()).unwrap().generation;
        let expected = vault.with_inventory(|inv| paravault::search::snapshot_hash(inv.notes().filter(|r| r.valid))).unwrap();
        assert_eq!(
            served.manifest.source_snapshot_hash,
            expected,
            "{context}: the served generation {} does not match the notes on disk",
            served.id()
        );
        let searcher = served.searcher().unwrap();
        for path in latest.keys() {
            let term = tantivy::Term::from_field_text(served.fields.path, path);
            let query = tantivy::query::TermQuery::new(term, tantivy::schema::IndexRecordOption::Basic);
            let hits = searcher.search(&query, &tantivy::collector::Count).unwrap();
            assert!(hits > 0, "{context}: {path} has an ok receipt but is not in generation {}", served.id());
        }
    } else {
        assert!(latest.is_empty(), "{context}: ok receipts but no search generation");
    }
    let report = vault.lint().unwrap();
    let bad: Vec<_> = report.findings.iter().filter(|f| f.rule.starts_with("metadata") || f.rule == "note-unreadable").collect();
    assert!(bad.is_empty(), "{context}: torn or invalid notes {bad:?}");
    // Every note on disk that is not the fixture's has an ok receipt (no write without one).
    for entry in std::fs::read_dir(vault_dir.join("01_Projects")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.starts_with('n') && name.ends_with(".md") {
            assert!(latest.contains_key(&format!("01_Projects/{name}")), "{context}: {name} exists without a receipt");
        }
    }
}

#[test]
fn kill_at_every_named_crash_point() {
    let runs = runs_per_point();
    for point in CRASH_POINTS {
        let dir = fresh_vault();
        for run in 0..runs {
            kill_at(dir.path(), &format!("01_Projects/n{run}"), point);
            check_invariants(dir.path(), &format!("{point} run {run}"));
        }
        // After the kills, the vault is writable and every committed note is in place.
        let status = ingest_command(dir.path(), "01_Projects/after", "done").status().unwrap();
        assert!(status.success(), "{point}: a write after recovery failed");
        let committed = !matches!(*point, "after_lock" | "after_plan");
        let present = (0..runs).filter(|r| dir.path().join(format!("01_Projects/n{r}.md")).exists()).count();
        assert_eq!(present, if committed { runs } else { 0 }, "{point}: committed transactions complete, uncommitted vanish");
    }
}

#[test]
fn kill_at_random_instants() {
    let dir = fresh_vault();
    let runs = runs_per_point();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for run in 0..runs {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % 40_000);
        let mut child = ingest_command(dir.path(), &format!("01_Projects/n{run}"), "[[hub]]").spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        check_invariants(dir.path(), &format!("random run {run} after {delay:?}"));
    }
}

/// P.O.W.E.R.'s lost-commit scenario: a crash during a write of X, then a later successful
/// write of X, then reopen: X and its receipt survive.
#[test]
fn recovery_never_undoes_a_later_commit() {
    for point in ["after_plan", "after_commit", "after_apply"] {
        let dir = fresh_vault();
        kill_at(dir.path(), "01_Projects/x", point);
        let vault = paravault::Vault::open(dir.path(), Default::default()).unwrap();
        let text = note("Project", "X final", "final content [[hub]]\n");
        let proposal = vault.propose_memory_change("01_Projects/x.md", &text, None, None).unwrap();
        let map: std::collections::BTreeMap<String, Value> = serde_json::from_value(serde_json::to_value(&proposal).unwrap()).unwrap();
        let receipt = vault.apply_memory_change(&map, true).unwrap().to_value();
        drop(vault);
        let reopened = paravault::Vault::open(dir.path(), Default::default()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("01_Projects/x.md")).unwrap(), text, "{point}");
        let last = reopened.read_memory_history(1, 0).unwrap();
        assert_eq!(last[0]["seq"], receipt["seq"], "{point}");
        check_invariants(dir.path(), point);
    }
}

/// Four processes write at once (distinct paths, and one shared note guarded by preconditions):
/// no lost update, no "locked" failure, the chain verifies.
#[test]
fn four_processes_write_at_once() {
    let dir = fresh_vault();
    let root = dir.path().to_path_buf();
    let started = Instant::now();
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut conflicts = 0;
                for i in 0..6 {
                    let out = ingest_command(&root, &format!("01_Projects/n{w}-{i}"), "[[hub]]").output().unwrap();
                    assert!(out.status.success(), "worker {w} ingest {i}: {}", String::from_utf8_lossy(&out.stderr));
                    // Everyone proposes an edit of the shared hub from the version they saw.
                    let hub = std::fs::read_to_string(root.join("01_Projects/hub.md")).unwrap();
                    let edited = format!("{}w{w} i{i}\n", hub);
                    let file = root.join(format!(".edit-{w}"));
                    std::fs::write(&file, &edited).unwrap();
                    let propose = Command::new(env!("CARGO_BIN_EXE_paravault"))
                        .arg("--vault")
                        .arg(&root)
                        .args(["--json", "propose", "01_Projects/hub.md", "--expected-sha256"])
                        .arg(paravault::write::sha256_hex(hub.as_bytes()))
                        .arg("--content-file")
                        .arg(&file)
                        .output()
                        .unwrap();
                    if !propose.status.success() {
                        let body: Value = serde_json::from_slice(&propose.stdout).unwrap();
                        assert_eq!(body["error"]["code"], "precondition_failed", "only stale preconditions may fail: {body}");
                        conflicts += 1;
                        continue;
                    }
                    let id = serde_json::from_slice::<Value>(&propose.stdout).unwrap()["proposal_id"].as_str().unwrap().to_string();
                    let apply = Command::new(env!("CARGO_BIN_EXE_paravault"))
                        .arg("--vault")
                        .arg(&root)
                        .args(["--json", "apply", &id, "--approve"])
                        .output()
                        .unwrap();
                    if !apply.status.success() {
                        let body: Value = serde_json::from_slice(&apply.stdout).unwrap();
                        assert_eq!(body["error"]["code"], "precondition_failed", "only stale preconditions may fail: {body}");
                        conflicts += 1;
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let vault = paravault::Vault::open(&root, Default::default()).unwrap();
    let receipts = vault.read_memory_history(1000, 0).unwrap();
    let ok_ingests = receipts.iter().filter(|r| r["status"] == "ok" && r["operation"] == "cli.ingest").count();
    let ok_applies = receipts.iter().filter(|r| r["status"] == "ok" && r["operation"] == "cli.apply").count();
    assert_eq!(ok_ingests, 24);
    assert_eq!(ok_applies + conflicts, 24);
    // No lost update: every applied edit's line is in the final hub (each built on the last).
    let hub = std::fs::read_to_string(root.join("01_Projects/hub.md")).unwrap();
    assert_eq!(hub.lines().filter(|l| l.starts_with('w')).count(), ok_applies, "{hub}");
    check_invariants(&root, "concurrency");
    assert!(started.elapsed() < Duration::from_secs(120));
}

/// A write whose search generation is published on disk (not served from the journal's tail:
/// here a recovered write that found its file changed by hand) publishes the tail before it
/// too. It once published only its own paths with `covers_seq` past the tail, so the notes of
/// the earlier writes vanished from search until a `sync` (the seeded replication workload
/// with kills found it).
#[test]
fn a_published_write_keeps_the_journal_tail_before_it_searchable() {
    let dir = fresh_vault();
    let vault = dir.path();
    let search = |word: &str| -> u64 {
        let out = crate::support::paravault(vault, &["--json", "search", word]);
        let found: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        found["result_count"].as_u64().unwrap()
    };
    assert!(crate::support::paravault(vault, &["sync"]).status.success());
    for (name, word) in [("01_Projects/first", "zqfirst"), ("01_Projects/second", "zqsecond")] {
        let out = ingest_command(vault, name, word).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!((search("zqfirst"), search("zqsecond")), (1, 1), "served from the tail");
    // A write killed after its commit point, before it put its note in place; a person then
    // writes that note by hand, so recovery leaves it as they wrote it and publishes on disk.
    kill_at(vault, "01_Projects/third", "after_commit");
    std::fs::write(vault.join("01_Projects/third.md"), note("Project", "Third", "zqbyhand\n")).unwrap();
    let out = ingest_command(vault, "01_Projects/fourth", "zqfourth").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for word in ["zqfirst", "zqsecond", "zqbyhand", "zqfourth"] {
        assert_eq!(search(word), 1, "{word} is searchable after the recovered write's publish");
    }
    // The recovered write names the note it left as the person wrote it.
    let history = crate::support::paravault(vault, &["--json", "history"]);
    let history: Value = serde_json::from_slice(&history.stdout).unwrap();
    let recovered = history["receipts"].as_array().unwrap().iter().find(|r| r["path"] == "01_Projects/third.md").unwrap();
    assert_eq!(recovered["recovered"], true, "{recovered}");
    assert_eq!(recovered["conflicts"], serde_json::json!(["01_Projects/third.md"]), "{recovered}");
}
