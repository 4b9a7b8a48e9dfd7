//! One vault on several devices over git (docs/replication.md), driven as a person drives it:
//! the `paravault` binary on replicas of one bare remote, real `git` underneath. A transaction
//! is one commit and engine state is never committed; replicas converge; an outside edit
//! travels as itself; overlapping edits become a conflict proposal on every replica that a
//! person decides; a lint-refused merge is held, not applied; an unreachable remote and a
//! rewritten one are typed errors that change nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::paravault;
use crate::support::paravault_with_input;

/// `git` in `dir`, asserting it succeeded; its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).env("GIT_TERMINAL_PROMPT", "0").output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// `paravault --json …` on `vault`, asserting the exit code; its JSON.
fn pv(vault: &Path, args: &[&str], exit: i32) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = paravault(vault, &all);
    assert_eq!(out.status.code(), Some(exit), "paravault {args:?}: {}\n{}", text(&out), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A bare remote and a first replica `a` (a new vault, one note) pushed to it.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "--bare", "remote.git"]);
        let site = Site { dir };
        let a = site.path("a");
        pv(&a, &["init"], 0);
        let added = pv(&a, &["remote", "add", "origin", site.remote().to_str().unwrap()], 0);
        assert_eq!(added["initialised_repository"], true);
        ingest(&a, "03_Resources/alpha.md", "Alpha", "Alpha body line one.");
        let report = pv(&a, &["replicate"], 0);
        assert_eq!(report["pushed"], true, "{report}");
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn remote(&self) -> PathBuf {
        self.path("remote.git")
    }

    /// A second replica, cloned.
    fn clone(&self, name: &str) -> PathBuf {
        let folder = self.path(name);
        let out = Command::new(env!("CARGO_BIN_EXE_paravault"))
            .args(["--json", "clone"])
            .arg(self.remote())
            .arg(&folder)
            .env("PARAVAULT_TODAY", "2026-06-01")
            .env_remove("PARAVAULT_VAULT_DIR")
            .output()
            .unwrap();
        assert!(out.status.success(), "clone: {}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(report["notes_indexed"].as_u64().unwrap() >= 1, "{report}");
        folder
    }
}

fn ingest(vault: &Path, name: &str, title: &str, body: &str) -> Value {
    pv(vault, &["ingest", name, "--title", title, "--description", &format!("{title} note"), "--content", body], 0)
}

fn edit(vault: &Path, path: &str, from: &str, to: &str) {
    let file = vault.join(path);
    let before = std::fs::read_to_string(&file).unwrap();
    assert!(before.contains(from), "{path} lacks {from:?}");
    std::fs::write(&file, before.replace(from, to)).unwrap();
}

fn read(vault: &Path, path: &str) -> String {
    std::fs::read_to_string(vault.join(path)).unwrap()
}

/// The files git tracks and their blob ids (what "identical trees" compares).
fn tree(vault: &Path) -> String {
    git(vault, &["ls-tree", "-r", "HEAD"])
}

fn assert_clean(vault: &Path) {
    let status = git(vault, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(status.is_empty(), "git sees uncommitted files in {}:\n{status}", vault.display());
}

/// Replicates every replica until a whole round changes nothing; returns the rounds.
fn converge(replicas: &[&Path]) -> usize {
    for round in 1..=4 {
        let before: Vec<String> = replicas.iter().map(|r| git(r, &["rev-parse", "HEAD"])).collect();
        for replica in replicas {
            let report = pv(replica, &["replicate"], 0);
            assert_eq!(report["in_sync"], true, "{report}");
        }
        let after: Vec<String> = replicas.iter().map(|r| git(r, &["rev-parse", "HEAD"])).collect();
        if before == after && after.windows(2).all(|w| w[0] == w[1]) {
            return round;
        }
    }
    panic!("the replicas did not converge in 4 rounds");
}

#[test]
fn a_transaction_is_one_commit_and_engine_state_is_never_committed() {
    let site = Site::new();
    let a = site.path("a");
    let before = git(&a, &["rev-parse", "HEAD"]);
    let receipt = ingest(&a, "03_Resources/beta.md", "Beta", "Beta body, private words.");
    let commits = git(&a, &["rev-list", &format!("{before}..HEAD")]);
    assert_eq!(commits.lines().count(), 1, "one transaction, one commit: {commits}");
    let changed = git(&a, &["diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD"]);
    let changed: Vec<&str> = changed.lines().collect();
    assert!(changed.contains(&"03_Resources/beta.md") && changed.contains(&"03_Resources/_index.md"), "{changed:?}");
    assert!(changed.iter().any(|p| p.starts_with(".paravault/replicas/")), "the receipt travels in the commit: {changed:?}");
    // The message names the operation, the path and the receipt, never the note's words.
    let message = git(&a, &["log", "-1", "--format=%an%n%B"]);
    let seq = receipt["seq"].as_u64().unwrap();
    assert!(message.contains("cli.ingest 03_Resources/beta.md") && message.contains(&format!(":{seq} blake3:")), "{message}");
    assert!(!message.contains("private words"), "{message}");
    // Nothing derived or per machine is tracked: only the mirrors and paravault's ignore rules.
    let tracked = git(&a, &["ls-files", ".paravault"]);
    for path in tracked.lines() {
        assert!(path == ".paravault/.gitignore" || path.starts_with(".paravault/replicas/"), "engine state committed: {path}");
    }
    assert_clean(&a);
    // The mirror is the local chain byte for byte.
    let id = std::fs::read_to_string(a.join(".paravault/replica.json")).unwrap();
    let id: Value = serde_json::from_str(&id).unwrap();
    let mirror = a.join(format!(".paravault/replicas/{}/receipts-000001.jsonl", id["replica_id"].as_str().unwrap()));
    assert_eq!(std::fs::read(mirror).unwrap(), std::fs::read(a.join(".paravault/receipts.jsonl")).unwrap());
}

#[test]
fn two_replicas_converge_and_every_chain_verifies_on_each() {
    let site = Site::new();
    let (a, b) = (site.path("a"), site.clone("b"));
    assert_eq!(read(&b, "03_Resources/alpha.md"), read(&a, "03_Resources/alpha.md"));
    // Writes on both sides, and a person's edit of another note on one.
    ingest(&a, "03_Resources/from-a.md", "From A", "Written on device A.");
    ingest(&b, "01_Projects/from-b.md", "From B", "Written on device B.");
    edit(&b, "03_Resources/alpha.md", "Alpha body line one.", "Alpha body, edited by hand on B.");
    let rounds = converge(&[&a, &b]);
    assert!(rounds <= 3, "{rounds} rounds");
    assert_eq!(tree(&a), tree(&b), "identical trees");
    for replica in [&a, &b] {
        assert_clean(replica);
        assert!(read(replica, "03_Resources/alpha.md").contains("edited by hand on B"));
        assert!(replica.join("03_Resources/from-a.md").exists() && replica.join("01_Projects/from-b.md").exists());
        let found = pv(replica, &["search", "device"], 0);
        let paths: Vec<&str> = found["results"].as_array().unwrap().iter().filter_map(|r| r["source"]["path"].as_str()).collect();
        assert!(paths.contains(&"03_Resources/from-a.md") && paths.contains(&"01_Projects/from-b.md"), "{found}");
        let history = pv(replica, &["history", "--verify"], 0);
        assert_eq!(history["ok"], true, "{history}");
        let chains = history["replicas"].as_array().unwrap();
        assert_eq!(chains.len(), 2, "{history}");
        assert!(chains.iter().all(|c| c["ok"] == true && c["receipts"].as_u64().unwrap() >= 2), "{history}");
        let status = pv(replica, &["replicate", "--status"], 0);
        assert_eq!((status["ahead"].as_u64(), status["behind"].as_u64()), (Some(0), Some(0)), "{status}");
        assert_eq!(status["uncommitted"], 0);
    }
    // The person's edit travelled as its own commit, with its own receipt.
    let log = git(&a, &["log", "--format=%an|%s"]);
    assert!(log.lines().any(|l| l.starts_with("outside editor|outside edit: 1 file(s), 03_Resources/alpha.md")), "{log}");
    // Each replica's receipts are its own chain, and both travelled.
    let mirrors = git(&a, &["ls-files", ".paravault/replicas"]);
    assert_eq!(mirrors.lines().map(|p| p.split('/').nth(2).unwrap()).collect::<std::collections::BTreeSet<_>>().len(), 2, "{mirrors}");
}

#[test]
fn overlapping_edits_become_one_conflict_on_both_replicas_and_a_person_decides() {
    let site = Site::new();
    let (a, b) = (site.path("a"), site.clone("b"));
    edit(&a, "03_Resources/alpha.md", "Alpha body line one.", "Alpha body as A wrote it.");
    edit(&b, "03_Resources/alpha.md", "Alpha body line one.", "Alpha body as B wrote it.");
    pv(&a, &["replicate"], 0);
    let report = pv(&b, &["replicate"], 1);
    let conflict = &report["conflicts"][0];
    assert_eq!(conflict["path"], "03_Resources/alpha.md", "{report}");
    assert_eq!(conflict["reason"], "overlapping edits");
    let id = conflict["proposal_id"].as_str().unwrap().to_string();
    // B keeps its own text; A's is held whole, with the base.
    assert!(read(&b, "03_Resources/alpha.md").contains("as B wrote it"));
    let review = pv(&b, &["approvals", "show", &id], 0);
    assert_eq!(review["state"], "pending", "{review}");
    assert!(review.to_string().contains("as A wrote it"), "{review}");
    // A takes B's integration and holds the same conflict: nothing is silently gone there.
    pv(&a, &["replicate"], 1);
    let listed = pv(&a, &["approvals", "--pending"], 0);
    assert!(listed.as_array().unwrap().iter().any(|p| p["proposal_id"] == id.as_str()), "{listed}");
    let held = std::fs::read_to_string(a.join(format!(".paravault/approvals/batches/{id}.json"))).unwrap();
    assert!(held.contains("as A wrote it") && held.contains("Alpha body line one."), "both texts and the base: {held}");
    // A person on A approves: A's text wins everywhere.
    let config = tempfile::tempdir().unwrap();
    let secret = "correct horse battery staple";
    assert!(paravault_with_input(&a, config.path(), &["approver", "add", "alice"], &format!("{secret}\n")).status.success());
    // A replica honours only signed decisions: the approver's key goes in the vault's registry
    // first (the registry's root, here), and travels with the vault.
    let registered = paravault_with_input(&a, config.path(), &["approver", "register", "alice"], &format!("{secret}\n"));
    assert!(registered.status.success(), "{}", String::from_utf8_lossy(&registered.stderr));
    let approved = paravault_with_input(&a, config.path(), &["approve", &id, "--approver", "alice"], &format!("{secret}\n"));
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    pv(&a, &["apply", &id, "--approve"], 0);
    converge(&[&a, &b]);
    for replica in [&a, &b] {
        assert!(read(replica, "03_Resources/alpha.md").contains("as A wrote it"));
        assert_eq!(pv(replica, &["replicate", "--status"], 0)["conflicts_waiting"], 0);
    }
    assert_eq!(tree(&a), tree(&b));
}

#[test]
fn an_outside_edit_is_committed_as_itself_before_a_write_of_the_same_note() {
    let site = Site::new();
    let a = site.path("a");
    edit(&a, "03_Resources/alpha.md", "Alpha body line one.", "Alpha body, a person's words.");
    let before = git(&a, &["rev-parse", "HEAD"]);
    let current = read(&a, "03_Resources/alpha.md");
    let sha = paravault::hex::sha256_hex(current.as_bytes());
    let next = current.replace("a person's words.", "a person's words.\n\nAn agent's addition.");
    let file = site.path("next.md");
    std::fs::write(&file, &next).unwrap();
    let proposal = pv(&a, &["propose", "03_Resources/alpha.md", "--content-file", file.to_str().unwrap(), "--expected-sha256", &sha], 0);
    pv(&a, &["apply", proposal["proposal_id"].as_str().unwrap(), "--approve"], 0);
    let log = git(&a, &["log", "--format=%H|%an|%s", &format!("{before}..HEAD")]);
    let lines: Vec<&str> = log.lines().collect();
    // The proposal travels as its own commit (it names no note), then the person's edit as
    // itself, then the agent's transaction.
    assert_eq!(lines.len(), 3, "{log}");
    assert!(lines[2].contains("|paravault|proposal "), "the stored proposal, committed when made: {log}");
    assert!(lines[1].contains("|outside editor|outside edit"), "the person's edit first, as itself: {log}");
    let person = lines[1].split('|').next().unwrap();
    let theirs = git(&a, &["show", &format!("{person}:03_Resources/alpha.md")]);
    assert!(theirs.contains("a person's words.") && !theirs.contains("An agent's addition"), "{theirs}");
    assert!(lines[0].contains("cli.apply 03_Resources/alpha.md"), "{log}");
    assert_clean(&a);
}

#[test]
fn a_merge_the_lint_gate_refuses_is_held_for_a_person_not_applied() {
    let site = Site::new();
    let a = site.path("a");
    // Someone with plain git pushes a note without its metadata.
    let scratch = site.path("scratch");
    git(site.dir.path(), &["clone", "-q", "-b", "main", site.remote().to_str().unwrap(), scratch.to_str().unwrap()]);
    std::fs::write(scratch.join("03_Resources/bare.md"), "just words, no frontmatter\n").unwrap();
    git(&scratch, &["add", "03_Resources/bare.md"]);
    git(&scratch, &["-c", "user.name=someone", "-c", "user.email=s@example.invalid", "commit", "-q", "-m", "a bare note"]);
    git(&scratch, &["push", "-q", "origin", "HEAD:main"]);
    let report = pv(&a, &["replicate"], 1);
    assert!(!a.join("03_Resources/bare.md").exists(), "a refused note is never put in place: {report}");
    let conflict = &report["conflicts"][0];
    assert_eq!(conflict["path"], "03_Resources/bare.md", "{report}");
    assert!(conflict["reason"].as_str().unwrap().starts_with("lint gate"), "{report}");
    assert!(conflict["proposal_id"].is_string());
    assert_clean(&a);
}

#[test]
fn an_unreachable_or_rewritten_remote_is_a_typed_error_that_changes_nothing() {
    let site = Site::new();
    let a = site.path("a");
    ingest(&a, "03_Resources/local.md", "Local", "Committed here, not pushed yet.");
    let head = git(&a, &["rev-parse", "HEAD"]);
    // Unreachable: the remote's folder is gone for a while.
    std::fs::rename(site.remote(), site.path("away.git")).unwrap();
    let out = paravault(&a, &["--json", "replicate"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["error"]["code"], "replication_failed");
    assert_eq!(git(&a, &["rev-parse", "HEAD"]), head, "nothing changed locally");
    let status = pv(&a, &["replicate", "--status"], 0);
    assert_eq!(status["remote_reachable"], false);
    assert_eq!(status["ahead"], 1, "{status}");
    assert!(status["last_error"].as_str().unwrap().starts_with("replication_failed"), "{status}");
    std::fs::rename(site.path("away.git"), site.remote()).unwrap();
    assert_eq!(pv(&a, &["replicate"], 0)["pushed"], true);
    // Rewritten: someone force-pushes a history without ours.
    let scratch = site.path("scratch");
    git(site.dir.path(), &["init", "-q", "-b", "main", scratch.to_str().unwrap()]);
    std::fs::write(scratch.join("other.md"), "another history\n").unwrap();
    git(&scratch, &["add", "other.md"]);
    git(&scratch, &["-c", "user.name=x", "-c", "user.email=x@example.invalid", "commit", "-q", "-m", "rewrite"]);
    git(&scratch, &["push", "-q", "--force", site.remote().to_str().unwrap(), "HEAD:main"]);
    let head = git(&a, &["rev-parse", "HEAD"]);
    let out = paravault(&a, &["--json", "replicate"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["error"]["code"], "remote_history_rewritten");
    assert_eq!(git(&a, &["rev-parse", "HEAD"]), head);
    assert!(!a.join("other.md").exists());
    assert_clean(&a);
}

#[test]
fn a_travelled_chain_that_was_altered_fails_verification_on_every_replica() {
    let site = Site::new();
    let (a, b) = (site.path("a"), site.clone("b"));
    ingest(&b, "03_Resources/from-b.md", "From B", "Written on B.");
    ingest(&b, "03_Resources/again-b.md", "Again B", "Written on B again.");
    converge(&[&a, &b]);
    let id: Value = serde_json::from_slice(&std::fs::read(b.join(".paravault/replica.json")).unwrap()).unwrap();
    let mirror = a.join(format!(".paravault/replicas/{}/receipts-000001.jsonl", id["replica_id"].as_str().unwrap()));
    let honest = std::fs::read_to_string(&mirror).unwrap();
    // Someone rewrites B's first ingest receipt in A's copy: the chain no longer holds.
    assert!(honest.lines().count() >= 2, "{honest}");
    std::fs::write(&mirror, honest.replacen("cli.ingest", "cli.forged", 1)).unwrap();
    let out = paravault(&a, &["--json", "history", "--verify"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false, "{report}");
    let chain = report["replicas"].as_array().unwrap().iter().find(|c| c["replica_id"] == id["replica_id"]).unwrap();
    assert_eq!(chain["ok"], false, "{report}");
    assert_ne!(out.status.code(), Some(0));
}

/// `paravault --json replicate` on `vault`, which may exit 0 (in sync) or 1 (conflicts wait).
fn replicate_any(vault: &Path) -> Value {
    let out = paravault(vault, &["--json", "replicate"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "replicate: {}\n{}", text(&out), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Three replicas of one bare remote under a seeded random workload: agents' writes through
/// the CLI, people appending to notes by hand (often the same note on two replicas: conflicts),
/// `replicate` at random (a tenth of the steps a `replicate` killed by SIGKILL at a random
/// instant). At quiescence:
/// every acknowledged write is on every replica or held in a conflict proposal there (no
/// silent loss), the trees are identical, git sees nothing uncommitted, every chain verifies
/// and search finds every note an agent wrote. `PARAVAULT_SIM_SEED` replays a seed,
/// `PARAVAULT_SIM_STEPS` lengthens the run.
#[test]
fn a_seeded_random_workload_on_three_replicas_loses_nothing() {
    let seed: u64 = std::env::var("PARAVAULT_SIM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_2026);
    let steps: u64 = std::env::var("PARAVAULT_SIM_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(36);
    // A tenth of the steps kill a `replicate` (PARAVAULT_SIM_KILLS=0 turns them off to tell
    // a kill's damage from a merge's).
    let kills = std::env::var("PARAVAULT_SIM_KILLS").map_or(true, |v| v != "0");
    let mut rng = crate::support::Rng(seed | 1);
    let site = Site::new();
    let replicas = [site.path("a"), site.clone("b"), site.clone("c")];
    // (path, the unique word the write put there)
    let mut written: Vec<(String, String)> = vec![];
    let mut ingested: Vec<String> = vec![];
    let mut notes: Vec<String> = vec!["03_Resources/alpha.md".into()];
    for step in 0..steps {
        let replica = &replicas[rng.below(3) as usize];
        let word = format!("zq{seed:x}w{step}");
        match rng.below(10) {
            0..=2 => {
                let path = format!("03_Resources/n{step}.md");
                ingest(replica, &path, &format!("Note {step}"), &format!("Written by an agent: {word}."));
                written.push((path.clone(), word.clone()));
                ingested.push(word);
                notes.push(path);
            }
            3..=5 => {
                let candidates: Vec<&String> = notes.iter().filter(|p| replica.join(p).exists()).collect();
                let path = candidates[rng.below(candidates.len() as u64) as usize].clone();
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new().append(true).open(replica.join(&path)).unwrap();
                writeln!(file, "\nA person adds {word}.").unwrap();
                written.push((path, word));
            }
            6..=8 => {
                replicate_any(replica);
            }
            _ if !kills => {
                replicate_any(replica);
            }
            _ => {
                let mut child = Command::new(env!("CARGO_BIN_EXE_paravault"))
                    .arg("--vault")
                    .arg(replica)
                    .args(["--json", "replicate"])
                    .env("PARAVAULT_TODAY", "2026-06-01")
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                std::thread::sleep(std::time::Duration::from_millis(rng.below(250)));
                let _ = child.kill(); // SIGKILL; the git it ran finishes on its own
                let _ = child.wait();
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
        }
    }
    // Quiescence: replicate everywhere until a whole round changes nothing.
    let mut settled = false;
    let mut last: Vec<Value> = Vec::new();
    for _ in 0..8 {
        let before: Vec<String> = replicas.iter().map(|r| git(r, &["rev-parse", "HEAD"])).collect();
        last = replicas.iter().map(|r| replicate_any(r)).collect();
        let after: Vec<String> = replicas.iter().map(|r| git(r, &["rev-parse", "HEAD"])).collect();
        if before == after && after.windows(2).all(|w| w[0] == w[1]) {
            settled = true;
            break;
        }
    }
    assert!(settled, "seed {seed}: the replicas did not converge; the last round: {last:#?}");
    let first = tree(&replicas[0]);
    for replica in &replicas {
        assert_eq!(tree(replica), first, "seed {seed}: trees differ");
        assert_clean(replica);
        let history = pv(replica, &["history", "--verify"], 0);
        assert_eq!(history["ok"], true, "seed {seed}: {history}");
        // Every conflict proposal this replica holds (pending, decided or stale).
        let held: String = std::fs::read_dir(replica.join(".paravault/approvals/batches"))
            .map(|d| d.filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok()).collect())
            .unwrap_or_default();
        for (path, word) in &written {
            let on_disk = std::fs::read_to_string(replica.join(path)).unwrap_or_default();
            assert!(
                on_disk.contains(word.as_str()) || held.contains(word.as_str()),
                "seed {seed}: {word} written to {path} is neither there nor in a conflict on {}",
                replica.display()
            );
        }
        for word in &ingested {
            let found = pv(replica, &["search", word], 0);
            if found["result_count"].as_u64().unwrap() == 0 {
                let holder = written.iter().find(|(_, w)| w == word).map(|(p, _)| p.clone()).unwrap();
                let status = text(&paravault(replica, &["--json", "doctor"]));
                if let Some(keep) = std::env::var_os("PARAVAULT_SIM_KEEP") {
                    let kept = Command::new("cp").arg("-a").arg(site.dir.path()).arg(&keep).status().unwrap();
                    eprintln!("kept the replicas in {} ({kept})", Path::new(&keep).display());
                }
                panic!(
                    "seed {seed}: {word} not found on {} ({holder}: {:?}); doctor: {status}",
                    replica.display(),
                    std::fs::read_to_string(replica.join(&holder)).ok()
                );
            }
        }
    }
}

/// `replicate` says how far it is (issue 46): fetching, integrating the changed paths, pushing.
#[test]
fn replicate_reports_progress_stage_by_stage() {
    let site = Site::new();
    let (a, b) = (site.path("a"), site.clone("b"));
    ingest(&a, "03_Resources/from-a.md", "From A", "Written on device A.");
    pv(&a, &["replicate"], 0);
    ingest(&b, "01_Projects/from-b.md", "From B", "Written on device B.");
    let vault = paravault::vault::Vault::open(&b, crate::support::options()).unwrap();
    let reports = std::cell::RefCell::new(Vec::new());
    let report = vault.replicate_with_progress(&|s, d, t| reports.borrow_mut().push((s, d, t))).unwrap();
    assert!(report.pushed && report.in_sync, "{report:?}");
    let reports = reports.into_inner();
    let stages: Vec<&str> = reports.iter().map(|r| r.0).collect();
    let first = |stage: &str| stages.iter().position(|s| *s == stage).unwrap_or_else(|| panic!("{stage}: {reports:?}"));
    assert!(first("fetching") < first("integrating") && first("integrating") < first("pushing"), "{reports:?}");
    let integrating: Vec<_> = reports.iter().filter(|r| r.0 == "integrating").collect();
    let last = integrating.last().unwrap();
    assert!(last.1 == last.2 && last.2 >= 1, "every changed path counted: {reports:?}");
    assert_eq!(reports.last(), Some(&("pushing", 1, 1)));
}

/// Issue 49 scope 4: a replica's answers (search, doctor and so `get_server_info`) name the team
/// commit they reflect and how far behind the remote the replica was when it last looked; a
/// vault that is not a replica says nothing of the kind.
#[test]
fn answers_say_which_team_commit_they_reflect_and_how_far_behind_the_remote_was() {
    let site = Site::new();
    let (a, b) = (site.path("a"), site.clone("b"));
    let head = |v: &Path| git(v, &["rev-parse", "HEAD"]);
    let remote_head = || git(&site.remote(), &["rev-parse", "refs/heads/main"]);

    // A pushed, so its answers reflect the remote's head and it was behind by nothing.
    let found = pv(&a, &["search", "alpha"], 0);
    let replica = &found["replica"];
    assert_eq!(replica["remote"], "origin", "{found}");
    assert_eq!(replica["team_commit"], remote_head(), "{found}");
    assert_eq!(replica["remote_head_seen"], remote_head(), "{found}");
    assert_eq!(replica["behind_when_looked"], 0, "{found}");
    assert!(replica["looked_at"].is_string() && replica["last_error"].is_null(), "{found}");

    // B moves the remote on by two commits; A has not looked yet, so it still says what it saw.
    ingest(&b, "03_Resources/b-one.md", "B one", "First from B.");
    ingest(&b, "03_Resources/b-two.md", "B two", "Second from B.");
    assert_eq!(pv(&b, &["replicate"], 0)["pushed"], true);
    let seen_before = pv(&a, &["search", "alpha"], 0)["replica"].clone();
    assert_eq!(seen_before["behind_when_looked"], 0);
    assert_ne!(seen_before["team_commit"], remote_head());

    // `replicate --status` looks (without integrating): the answers now say how far behind.
    let status = pv(&a, &["replicate", "--status"], 0);
    assert_eq!(status["behind"], 2, "{status}");
    let looked = pv(&a, &["search", "alpha"], 0)["replica"].clone();
    assert_eq!(looked["behind_when_looked"], 2, "{looked}");
    assert_eq!(looked["remote_head_seen"], remote_head(), "{looked}");
    assert_eq!(looked["team_commit"], seen_before["team_commit"], "nothing integrated yet: {looked}");
    let doctor = pv(&a, &["doctor"], 0);
    assert_eq!(doctor["replica"], looked, "doctor (get_server_info's report) says the same");

    // After replicate, A reflects the remote's head again.
    assert_eq!(pv(&a, &["replicate"], 0)["in_sync"], true);
    let after = pv(&a, &["search", "alpha"], 0)["replica"].clone();
    assert_eq!(after["team_commit"], remote_head(), "{after}");
    assert_eq!(after["team_commit"], head(&a), "{after}");
    assert_eq!(after["behind_when_looked"], 0, "{after}");

    // An unreachable remote: the answer keeps the last look and names the failure.
    git(&a, &["remote", "set-url", "origin", site.path("gone.git").to_str().unwrap()]);
    let out = paravault(&a, &["--json", "replicate"]);
    assert_ne!(out.status.code(), Some(0));
    let failed = pv(&a, &["search", "alpha"], 0)["replica"].clone();
    assert_eq!(failed["looked_at"], after["looked_at"], "{failed}");
    assert!(failed["last_error"].as_str().is_some_and(|e| e.starts_with("replication_failed")), "{failed}");
    let human = text(&paravault(&a, &["search", "alpha"]));
    assert!(human.contains("replica of origin: team commit") && human.contains("the last replicate failed"), "{human}");

    // A vault that is not a replica says nothing about replicas.
    let alone = site.path("alone");
    pv(&alone, &["init"], 0);
    ingest(&alone, "03_Resources/solo.md", "Solo", "Alpha alone.");
    let found = pv(&alone, &["search", "alpha"], 0);
    assert!(found.get("replica").is_none(), "{found}");
    assert!(pv(&alone, &["doctor"], 0).get("replica").is_none());
}

/// git carries no empty folder: a clone still has every P.A.R.A. folder, so a write into one
/// that is empty on the remote works on the new device (the contention run found it).
#[test]
fn a_clone_has_every_para_folder_even_the_empty_ones() {
    let site = Site::new();
    let listed = git(&site.remote(), &["ls-tree", "--name-only", "refs/heads/main"]);
    let b = site.clone("b");
    for folder in ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs"] {
        assert!(b.join(folder).is_dir(), "{folder} missing on the clone (the remote's tree: {listed})");
    }
    let empty_there = ["00_Inbox", "01_Projects", "02_Areas"].into_iter().find(|f| !listed.lines().any(|l| l == *f));
    let folder = empty_there.expect("the site leaves at least one P.A.R.A. folder empty");
    ingest(&b, &format!("{folder}/on-b.md"), "On B", "Written into a folder the remote has no file in.");
    assert_eq!(pv(&b, &["replicate"], 0)["pushed"], true);
}

/// Waits up to 60 s for `ready`; false when it never held.
fn eventually(mut ready: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < until {
        if ready() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    ready()
}

/// A long-running `paravault ARGS` on `vault` (stdin held open), killed when dropped.
struct Running(std::process::Child);

impl Running {
    fn start(vault: &Path, args: &[&str]) -> Running {
        let child = Command::new(env!("CARGO_BIN_EXE_paravault"))
            .arg("--vault")
            .arg(vault)
            .args(args)
            .env("PARAVAULT_TODAY", "2026-06-01")
            .env_remove("PARAVAULT_VAULT_DIR")
            .env_remove("POWER_VAULT_DIR")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Running(child)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn watch_and_the_mcp_server_replicate_on_the_policys_interval() {
    let site = Site::new();
    let b = site.clone("b");
    let c = site.clone("c");
    // Off by default: the replica's own policy turns it on (and the override travels as an
    // outside edit, like any file a person changed).
    for replica in [&b, &c] {
        std::fs::write(replica.join(".paravault/policy.yaml"), "replication:\n  interval_s: 5\n").unwrap();
    }
    let on_remote = |path: &str| {
        let listed = git(&site.remote(), &["ls-tree", "-r", "--name-only", "refs/heads/main"]);
        listed.lines().any(|l| l == path)
    };
    {
        let _watch = Running::start(&b, &["watch"]);
        let _server = Running::start(&c, &["mcp"]);
        // A write on `a`, pushed: both long-running replicas pull it by themselves.
        ingest(&site.path("a"), "03_Resources/from-a.md", "From A", "Written on a while b watches.");
        assert_eq!(pv(&site.path("a"), &["replicate"], 0)["pushed"], true);
        for replica in [&b, &c] {
            assert!(
                eventually(|| replica.join("03_Resources/from-a.md").is_file()),
                "{} never pulled a's note on its own (replica state: {:?})",
                replica.display(),
                std::fs::read_to_string(replica.join(".paravault/replica-state.json")).ok()
            );
        }
        // A write on each, through the CLI beside the running process: pushed by itself.
        ingest(&b, "03_Resources/from-b.md", "From B", "Written on b, pushed by its watch.");
        ingest(&c, "03_Resources/from-c.md", "From C", "Written on c, pushed by its MCP server.");
        assert!(eventually(|| on_remote("03_Resources/from-b.md")), "b's watch never pushed its write");
        assert!(eventually(|| on_remote("03_Resources/from-c.md")), "c's MCP server never pushed its write");
    }
    // Without the setting nothing moves by itself: `a` has not replicated since.
    assert!(!site.path("a").join("03_Resources/from-b.md").exists());
    let status = pv(&b, &["replicate", "--status"], 0);
    assert!(status["last_success_at"].is_string(), "{status}");
}

/// `paravault --json …` as on a large vault: git's own index is not told per commit
/// (`PARAVAULT_GIT_INDEX_EAGER_MAX_BYTES=0`); its JSON.
fn pv_large(vault: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(vault)
        .arg("--json")
        .args(args)
        .env("PARAVAULT_TODAY", "2026-06-01")
        .env("PARAVAULT_GIT_INDEX_EAGER_MAX_BYTES", "0")
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "paravault {args:?}: {}\n{}", text(&out), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The tree of the whole work tree through a scratch index (`git add -A`): what HEAD must hold.
fn work_tree_tree(vault: &Path) -> String {
    let index = vault.join(".git/scratch-index");
    let run = |args: &[&str]| {
        let out = Command::new("git").arg("-C").arg(vault).args(args).env("GIT_INDEX_FILE", &index).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    run(&["read-tree", "HEAD"]);
    run(&["add", "-A"]);
    let tree = run(&["write-tree"]);
    std::fs::remove_file(&index).unwrap();
    tree
}

#[test]
fn a_large_vaults_git_index_learns_engine_commits_at_replicate_and_nothing_is_misattributed() {
    let site = Site::new();
    let a = site.path("a");
    let before = git(&a, &["rev-parse", "HEAD"]);
    // Writes whose commits do not tell git's index: each is one commit of exactly its files.
    pv_large(&a, &["ingest", "03_Resources/beta.md", "--title", "Beta", "--description", "Beta note", "--content", "Beta body."]);
    pv_large(&a, &["ingest", "02_Areas/gamma.md", "--title", "Gamma", "--description", "Gamma note", "--content", "Gamma body."]);
    let log = git(&a, &["log", "--format=%an|%s", &format!("{before}..HEAD")]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(!log.contains("outside edit"), "a stale git index is never taken for a person's edit: {log}");
    assert_eq!(git(&a, &["rev-parse", "HEAD^{tree}"]), work_tree_tree(&a), "HEAD holds the work tree exactly");
    assert!(git(&a, &["diff-tree", "--name-only", "-r", "HEAD"]).contains("02_Areas/gamma.md"));
    assert!(!git(&a, &["status", "--porcelain"]).is_empty(), "git's index has not learnt the commits yet (the deferral)");
    // A person's edit meanwhile is committed as itself before the agent's write of that note.
    edit(&a, "03_Resources/beta.md", "Beta body.", "Beta body, a person's words.");
    let current = read(&a, "03_Resources/beta.md");
    let sha = paravault::hex::sha256_hex(current.as_bytes());
    let file = site.path("next.md");
    std::fs::write(&file, current.replace("a person's words.", "a person's words.\n\nAn agent's addition.")).unwrap();
    let mark = git(&a, &["rev-parse", "HEAD"]);
    let proposal = pv_large(&a, &["propose", "03_Resources/beta.md", "--content-file", file.to_str().unwrap(), "--expected-sha256", &sha]);
    pv_large(&a, &["apply", proposal["proposal_id"].as_str().unwrap(), "--approve"]);
    let log = git(&a, &["log", "--format=%H|%an|%s", &format!("{mark}..HEAD")]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(lines[1].contains("|outside editor|outside edit: 1 file(s), 03_Resources/beta.md"), "{log}");
    let person = lines[1].split('|').next().unwrap();
    let theirs = git(&a, &["show", &format!("{person}:03_Resources/beta.md")]);
    assert!(theirs.contains("a person's words.") && !theirs.contains("An agent's addition"), "{theirs}");
    assert!(lines[0].contains("cli.apply 03_Resources/beta.md"), "{log}");
    // `replicate` brings git's index up to the branch first: no engine commit becomes an
    // outside edit, and afterwards git sees nothing uncommitted.
    let mark = git(&a, &["rev-parse", "HEAD"]);
    let report = pv_large(&a, &["replicate"]);
    assert_eq!(report["pushed"], true, "{report}");
    let log = git(&a, &["log", "--format=%an|%s", &format!("{mark}..HEAD")]);
    assert!(!log.contains("outside edit"), "{log}");
    assert_clean(&a);
    assert_eq!(git(&a, &["rev-parse", "HEAD^{tree}"]), work_tree_tree(&a));
    assert!(!a.join(".paravault/git.index").exists(), "no private index is kept");
}

#[test]
fn a_servers_commits_reach_a_large_git_index_once_it_is_idle() {
    let site = Site::new();
    let a = site.path("a");
    let mut server = crate::mcp::Server::start_with_env(
        &a,
        &[],
        &[("PARAVAULT_GIT_INDEX_EAGER_MAX_BYTES", Path::new("0")), ("PARAVAULT_TODAY", Path::new("2026-06-01"))],
    );
    server.initialize();
    let before = git(&a, &["rev-parse", "HEAD"]);
    server.ok(
        "ingest_note",
        serde_json::json!({"name": "03_Resources/served", "note_type": "Resource", "title": "Served", "description": "A served note", "content": "Served body."}),
    );
    assert_eq!(git(&a, &["rev-list", "--count", &format!("{before}..HEAD")]), "1", "the write is one commit");
    // The commit did not tell git's large index; the server's idle tick (every second) does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !git(&a, &["status", "--porcelain", "--untracked-files=all"]).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "git's index never learnt the server's commit: {}",
            git(&a, &["status", "--porcelain"])
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_clean(&a);
    assert_eq!(git(&a, &["rev-parse", "HEAD^{tree}"]), work_tree_tree(&a), "HEAD holds the work tree exactly");
}

/// Outside edits of every kind a person makes on `vault` (in place, created, removed, renamed,
/// a new folder tree, an attachment, a file in a folder the engine leaves out, the policy
/// override), and an engine file that travels left uncommitted as a killed run leaves it.
/// Returns the paths git must see changed.
fn outside_edits_of_every_kind(vault: &Path, tag: &str) -> Vec<String> {
    use std::io::Write as _;
    let mut changed = Vec::new();
    let mut append = std::fs::OpenOptions::new().append(true).open(vault.join("03_Resources/alpha.md")).unwrap();
    writeln!(append, "\nA person adds {tag} in place.").unwrap();
    changed.push("03_Resources/alpha.md".to_string());
    let note = |title: &str| format!("---\ntype: Resource\ntitle: {title}\ndescription: d\n---\nBody {tag}.\n");
    std::fs::write(vault.join(format!("03_Resources/new-{tag}.md")), note("New")).unwrap();
    changed.push(format!("03_Resources/new-{tag}.md"));
    std::fs::create_dir_all(vault.join(format!("01_Projects/tree-{tag}/deep/deeper"))).unwrap();
    for file in ["a.md", "deep/b.md", "deep/deeper/c.md"] {
        std::fs::write(vault.join(format!("01_Projects/tree-{tag}/{file}")), note(file)).unwrap();
        changed.push(format!("01_Projects/tree-{tag}/{file}"));
    }
    std::fs::write(vault.join(format!("03_Resources/picture-{tag}.png")), [0x89, b'P', b'N', b'G']).unwrap();
    changed.push(format!("03_Resources/picture-{tag}.png"));
    std::fs::create_dir_all(vault.join(".obsidian")).unwrap();
    std::fs::write(vault.join(".obsidian/workspace.json"), format!("{{\"tag\": \"{tag}\"}}")).unwrap();
    changed.push(".obsidian/workspace.json".to_string());
    let policy = vault.join(".paravault/policy.yaml");
    let text = std::fs::read_to_string(&policy).unwrap_or_else(|_| "replication:\n  network_timeout_s: 30\n".to_string());
    std::fs::write(&policy, format!("{text}# {tag}\n")).unwrap();
    changed.push(".paravault/policy.yaml".to_string());
    std::fs::create_dir_all(vault.join(".paravault/proposals")).unwrap();
    std::fs::write(vault.join(format!(".paravault/proposals/left-{tag}.json")), "{}").unwrap();
    changed.push(format!(".paravault/proposals/left-{tag}.json"));
    changed.sort();
    changed
}

/// Removes one note and renames another (notes committed by an earlier run).
fn remove_and_rename(vault: &Path, tag: &str) -> Vec<String> {
    std::fs::remove_file(vault.join(format!("03_Resources/new-{tag}.md"))).unwrap();
    std::fs::rename(vault.join(format!("01_Projects/tree-{tag}/a.md")), vault.join(format!("01_Projects/tree-{tag}/renamed.md"))).unwrap();
    vec![format!("01_Projects/tree-{tag}/a.md"), format!("01_Projects/tree-{tag}/renamed.md"), format!("03_Resources/new-{tag}.md")]
}

/// The paths the last commit before HEAD's integration changed that are not engine-made
/// (the outside edit's and the travelling leftovers' commits), sorted.
fn committed_since(vault: &Path, before: &str) -> Vec<String> {
    let listed = git(vault, &["diff", "--name-only", "--no-renames", before, "HEAD"]);
    let mut paths: Vec<String> = listed
        .lines()
        .filter(|p| !p.starts_with(".paravault/replicas/") && !p.ends_with("_index.md") && *p != "index.md" && *p != "log.md")
        .map(str::to_string)
        .collect();
    paths.sort();
    paths
}

/// Issue 48 rule 6: with the folder journal running (`paravault watch`), `replicate` asks it what
/// changed since its last check instead of comparing the whole work tree, and commits every kind
/// of outside edit the whole-tree check commits: afterwards `git status` finds nothing left. Where
/// the journal cannot say (a folder removed, an ignore file changed), git compares every file,
/// and the next run asks the journal again.
#[test]
fn replicate_takes_outside_edits_from_the_folder_journal_and_leaves_nothing_uncommitted() {
    let site = Site::new();
    let a = site.path("a");
    let _journal = crate::keyed_inventory::FolderJournalProcess::start(&a);
    // No position recorded yet: every file is compared once, and the position is kept.
    assert_eq!(pv(&a, &["replicate"], 0)["outside_edits_from"], "work tree");
    assert_clean(&a);
    for (round, tag) in ["one", "two"].iter().enumerate() {
        let before = git(&a, &["rev-parse", "HEAD"]);
        let changed = if round == 0 { outside_edits_of_every_kind(&a, tag) } else { remove_and_rename(&a, "one") };
        let report = pv(&a, &["replicate"], 0);
        assert_eq!(report["outside_edits_from"], "folder journal", "{report}");
        assert_eq!(committed_since(&a, &before), changed, "round {tag}: {report}");
        assert_clean(&a);
    }
    // A folder removed whole: the journal cannot say what it held; git compares every file.
    std::fs::remove_dir_all(a.join("01_Projects/tree-one/deep")).unwrap();
    pv(&a, &["replicate"], 0);
    assert_clean(&a);
    assert!(!git(&a, &["ls-tree", "-r", "--name-only", "HEAD"]).contains("tree-one/deep/"));
    // The journal answers again from the position that run recorded.
    edit(&a, "03_Resources/alpha.md", "Alpha body line one.", "Alpha body, edited again.");
    assert_eq!(pv(&a, &["replicate"], 0)["outside_edits_from"], "folder journal");
    assert_clean(&a);
    // An ignore file changed: what git leaves out may have too, so git compares every file.
    std::fs::write(a.join("03_Resources/.gitignore"), "*.tmp\n").unwrap();
    std::fs::write(a.join("03_Resources/scratch.tmp"), "ignored").unwrap();
    assert_eq!(pv(&a, &["replicate"], 0)["outside_edits_from"], "work tree");
    assert_clean(&a);
    assert!(git(&a, &["ls-tree", "-r", "--name-only", "HEAD"]).contains("03_Resources/.gitignore"));
    // With nothing changed, nothing is committed, and the other replica receives every edit.
    let head = git(&a, &["rev-parse", "HEAD"]);
    let idle = pv(&a, &["replicate"], 0);
    assert_eq!(idle["committed_before"], 0, "{idle}\n{}", git(&a, &["log", "--stat", "-3", "--format=%s"]));
    assert_eq!(git(&a, &["rev-parse", "HEAD"]), head);
    let b = site.clone("b");
    assert_eq!(tree(&a), tree(&b));
}

/// The same for a long-lived process with a file watcher (the MCP server's replication on an
/// interval): `replicate` takes what its watcher saw since the last check.
#[test]
fn a_process_with_a_watcher_takes_outside_edits_from_it_and_leaves_nothing_uncommitted() {
    let site = Site::new();
    let a = site.path("a");
    let vault = paravault::vault::Vault::open(&a, paravault::vault::VaultOptions::default()).unwrap();
    vault.watch_disk();
    assert_eq!(vault.replicate().unwrap().outside_edits_from, "work tree");
    for (round, tag) in ["one", "two"].iter().enumerate() {
        let before = git(&a, &["rev-parse", "HEAD"]);
        let changed = if round == 0 { outside_edits_of_every_kind(&a, tag) } else { remove_and_rename(&a, "one") };
        let report = vault.replicate().unwrap();
        assert_eq!(report.outside_edits_from, "watcher", "{report:?}");
        assert_eq!(committed_since(&a, &before), changed, "round {tag}: {report:?}");
        assert_clean(&a);
    }
    // A run that fails (the remote gone) loses nothing the watcher saw: the edit it committed
    // before it failed is pushed by the run after the remote is back.
    edit(&a, "03_Resources/alpha.md", "Alpha body line one.", "Alpha body, edited while the remote was away.");
    let remote = site.remote();
    let away = site.path("remote-away.git");
    std::fs::rename(&remote, &away).unwrap();
    assert!(vault.replicate().is_err());
    std::fs::rename(&away, &remote).unwrap();
    let report = vault.replicate().unwrap();
    assert!(report.in_sync, "{report:?}");
    assert_clean(&a);
    assert!(git(&site.remote(), &["show", "refs/heads/main:03_Resources/alpha.md"]).contains("edited while the remote was away"));
}
