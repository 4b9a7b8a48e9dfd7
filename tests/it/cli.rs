//! CLI snapshot tests: exit codes and output of the real binary on fixture vaults.

use std::process::Command;

use crate::support::{note, write_fixture};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(vault: &std::path::Path, args: &[&str]) -> Run {
    let output = crate::support::paravault(vault, args);
    let clean = |b: Vec<u8>| String::from_utf8(b).unwrap().replace(&vault.display().to_string(), "[VAULT]");
    Run { code: output.status.code().unwrap_or(-1), stdout: clean(output.stdout), stderr: clean(output.stderr) }
}

/// Replaces the clock reading of a `computed_from` or `freshness` object (present, RFC 3339).
fn redact_observed_at(value: &mut serde_json::Value) {
    let at = value["observed_at"].as_str().expect("observed_at is set once the vault was read");
    assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{at}");
    value["observed_at"] = "[OBSERVED_AT]".into();
}

fn fixture_vault() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = format!(
        "-- 01_Projects/a.md --\n{}-- 01_Projects/b.md --\n{}-- 02_Areas/stale.md --\n{}",
        note("Project", "A", "[[b]] [[missing]]  \n"),
        note("Project", "B", "[[a]]\n"),
        "---\ntype: Area\ntitle: Stale\ndescription: D\ntimestamp: 2026-01-01T00:00:00Z\nexpiry: 2026-02-01\n---\n[[a]]\n",
    );
    write_fixture(dir.path(), &fixture);
    dir
}

#[test]
fn lint_human_and_json() {
    let dir = fixture_vault();
    let human = run(dir.path(), &["lint"]);
    assert_eq!(human.code, 1);
    insta::assert_snapshot!("lint_human", human.stdout);
    let json = run(dir.path(), &["lint", "--json"]);
    assert_eq!(json.code, 1);
    let mut value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    redact_observed_at(&mut value["computed_from"]);
    insta::assert_json_snapshot!("lint_json", value);
}

#[test]
fn index_then_read_sub_index() {
    let dir = fixture_vault();
    let first = run(dir.path(), &["index"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    insta::assert_snapshot!("index_first", first.stdout);
    let second = run(dir.path(), &["index"]);
    insta::assert_snapshot!("index_second", second.stdout);
    let page = run(dir.path(), &["read-sub-index", "01_Projects"]);
    assert_eq!(page.code, 0);
    insta::assert_snapshot!("read_sub_index", page.stdout);
    let missing = run(dir.path(), &["read-sub-index", "01_Projects", "--page", "2"]);
    assert_eq!(missing.code, 2);
    insta::assert_snapshot!("read_sub_index_missing", missing.stderr);
}

#[test]
fn check_markdown_and_doctor() {
    let dir = fixture_vault();
    let md = run(dir.path(), &["check-markdown"]);
    assert_eq!(md.code, 0);
    insta::assert_snapshot!("check_markdown", md.stdout);
    let doctor = run(dir.path(), &["doctor", "--json"]);
    let mut value: serde_json::Value = serde_json::from_str(&doctor.stdout).unwrap();
    // The fixture has blocking lint findings: a degraded report, and the command exits with
    // the report's own exit code (0 only when the status is ok).
    assert_eq!(value["status"], "degraded");
    assert_eq!(value["exit_code"], 1);
    assert_eq!(doctor.code, 1);
    value["runtime"]["version"] = "[VERSION]".into();
    value["runtime"]["platform"] = "[PLATFORM]".into();
    value["configuration"]["embed_threads"] = "[THREADS]".into();
    value["embedding"]["model_cached"] = "[MODEL_CACHED]".into();
    // Where the vault is: a temporary folder's name and the hash of its path.
    // `run` masks the vault's folder: vault.path (doctor report v1) reads [VAULT].
    assert_eq!(value["vault"]["path"], "[VAULT]");
    value["vault"]["path_hint"] = "[PATH_HINT]".into();
    value["vault"]["vault_id"] = "[VAULT_ID]".into();
    let check = &mut value["vault_check"];
    // Machine facts: where the model may be found and how many threads are configured.
    let configured = &mut check["embedding_configured"];
    assert!(configured["sources"].as_array().is_some_and(|s| !s.is_empty()), "{configured}");
    assert!(configured["bound"].is_null(), "doctor never loads the model");
    configured["sources"] = "[SOURCES]".into();
    configured["threads"] = "[THREADS]".into();
    configured["threads_source"] = "[THREADS_SOURCE]".into();
    redact_observed_at(&mut check["computed_from"]);
    redact_observed_at(&mut check["freshness"]);
    // Whether the previous command could persist the inventory depends on how long after the
    // fixture was written it ran (racy files are never persisted): a machine fact.
    assert!(check["freshness"]["inventory_cache"].as_str().is_some_and(|s| s == "absent" || s == "reused"), "{value}");
    check["freshness"]["inventory_cache"] = "[CACHE]".into();
    check["freshness"]["load"] = "[LOAD]".into();
    insta::assert_json_snapshot!("doctor_json", value);
}

#[test]
fn bad_vault_and_bad_policy_have_typed_errors() {
    let missing = run(std::path::Path::new("/nonexistent/vault"), &["lint", "--json"]);
    assert_eq!(missing.code, 3);
    assert!(missing.stdout.contains("\"code\": \"vault_unusable\""), "{}", missing.stdout);
    let dir = fixture_vault();
    std::fs::create_dir_all(dir.path().join(".paravault")).unwrap();
    std::fs::write(dir.path().join(".paravault/policy.yaml"), "lint:\n  rules:\n    orphan: loud\n").unwrap();
    let bad = run(dir.path(), &["lint"]);
    assert_eq!(bad.code, 3);
    insta::assert_snapshot!("bad_policy", bad.stderr);
}

#[test]
fn default_vault_is_initialised_on_first_use() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("lint")
        .env("XDG_DATA_HOME", home.path())
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(home.path().join("paravault/vault/00_Inbox/welcome.md").is_file());
    assert!(home.path().join("paravault/vault/index.md").is_file());
    // ... and searchable at once: the first search finds a starter note.
    let found = Command::new(env!("CARGO_BIN_EXE_paravault"))
        .args(["--json", "search", "welcome"])
        .env("XDG_DATA_HOME", home.path())
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .output()
        .unwrap();
    assert_eq!(found.status.code(), Some(0), "{}", String::from_utf8_lossy(&found.stderr));
    let envelope: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert!(envelope.to_string().contains("00_Inbox/welcome.md"), "{envelope}");
}

#[test]
fn mcp_refuses_an_unknown_surface_before_serving() {
    let vault = fixture_vault();
    let out = run(vault.path(), &["mcp", "--surface", "power,notion"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("invalid_argument") && out.stderr.contains("\"notion\""), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "nothing is served: {}", out.stdout);
}

/// A person at the terminal, command by command: what each prints (stdout, then stderr) and
/// its exit code, with what differs between runs masked (the vault's folder, hashes, commit and
/// replica ids, generation ids, clock readings). No JSON, no tool parameter names, no colour
/// codes.
struct Session {
    dir: tempfile::TempDir,
    vault: std::path::PathBuf,
    transcript: String,
}

impl Session {
    fn new() -> Session {
        let dir = tempfile::tempdir().unwrap();
        let vault = dir.path().join("notes");
        Session { dir, vault, transcript: String::new() }
    }

    /// Runs `paravault --vault VAULT ARGS` with `stdin` and adds it to the transcript.
    fn step_with_input(&mut self, args: &[&str], stdin: &str) -> std::process::Output {
        let mut command = crate::support::paravault_command(&self.vault, &self.dir.path().join("config"), args);
        command.env("PARAVAULT_NOW", "2026-06-01T10:00:00Z");
        let output = crate::support::run_with_input(command, stdin);
        let masks = [
            (regex::Regex::new(r"\d{8}T\d{9}Z-[0-9a-f]{12}(\+\d+)?").unwrap(), "[GENERATION]"),
            (regex::Regex::new(r"[0-9a-f]{64}").unwrap(), "[SHA256]"),
            (regex::Regex::new(r"\b[0-9a-f]{40}\b").unwrap(), "[COMMIT]"),
            (regex::Regex::new(r"\b[0-9a-f]{16}\b").unwrap(), "[REPLICA]"),
            (regex::Regex::new(r"\b[0-9a-f]{12}\b").unwrap(), "[SHORT-COMMIT]"),
            (regex::Regex::new(r"\b[0-9a-f]{10}\b").unwrap(), "[GOAL]"),
            (regex::Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)").unwrap(), "[TIME]"),
        ];
        let mut text = format!(
            "$ paravault {}\n{}{}[exit {}]\n\n",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            output.status.code().unwrap_or(-1)
        )
        .replace(&self.vault.display().to_string(), "[VAULT]")
        .replace(&self.dir.path().display().to_string(), "[TMP]");
        for (pattern, mask) in &masks {
            text = pattern.replace_all(&text, *mask).into_owned();
        }
        assert!(!text.contains('\u{1b}'), "colour codes off a terminal: {text}");
        self.transcript.push_str(&text);
        output
    }

    fn step(&mut self, args: &[&str]) -> std::process::Output {
        self.step_with_input(args, "")
    }

    /// Runs a step whose output is not part of the transcript (an id to pick up, JSON).
    fn quietly(&mut self, args: &[&str]) -> std::process::Output {
        let kept = self.transcript.len();
        let output = self.step(args);
        self.transcript.truncate(kept);
        output
    }

    /// The id of the first proposal `approvals` lists in state `state`.
    fn proposal_id(&mut self, state: &str) -> String {
        let listed = self.quietly(&["--json", "approvals"]);
        let list: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
        let found = list.as_array().unwrap().iter().find(|p| p["state"] == state).unwrap_or_else(|| panic!("a {state} proposal in {list}"));
        found["proposal_id"].as_str().unwrap().to_string()
    }
}

#[test]
fn a_persons_session_in_human_words() {
    let mut s = Session::new();
    s.step(&["init"]);
    let bread = ["03_Resources/bread", "--title", "Sourdough", "--description", "Baking bread"];
    s.step(&[&["ingest"][..], &bread, &["--content", "Feed the starter; bake hot."]].concat());
    s.step(&[&["ingest"][..], &bread, &["--type", "project", "--content", "again"]].concat());
    s.step(&["ingest", "03_resources/rye", "--title", "Rye", "--description", "D", "--content", "x"]);
    s.step(&["search", "starter"]);
    let edited = s.dir.path().join("edited.md");
    std::fs::write(&edited, note("Resource", "Sourdough", "Feed the starter twice a day; bake hot.")).unwrap();
    s.step(&["propose", "03_Resources/bread.md", "--content-file", edited.to_str().unwrap()]);
    s.step(&["approvals"]);
    let id = s.proposal_id("pending");
    s.step(&["apply", &id]);
    s.step(&["apply", &id, "--approve"]);
    s.step(&["history"]);
    s.step(&["lint"]);
    s.step(&["heal"]);
    s.step(&["archive"]);
    s.step(&["read-sub-index", "03_Resources"]);
    s.step(&["sync"]);
    s.step(&["goals", "list"]);
    insta::assert_snapshot!("a_persons_session", s.transcript);
}

/// Every other command a person runs, in words: a daily log, an approver deciding proposals
/// on the terminal, the chain checked, catalogs, Markdown, doctor, the rot audit, the vault
/// registry, goals, a work packet, the broker, and a second device over git.
#[test]
fn the_rest_of_the_commands_in_human_words() {
    let mut s = Session::new();
    s.quietly(&["init"]);
    s.step(&["synthesize", "06_Daily_Logs/monday", "--title", "Monday", "--description", "What happened", "--content", "Baked bread."]);
    // `--json` receipts carry counts and durations as numbers (the stored line keeps
    // P.O.W.E.R.'s strings: `history --verify` below still holds).
    let history: serde_json::Value = serde_json::from_slice(&s.quietly(&["--json", "history"]).stdout).unwrap();
    let receipt = &history["receipts"][0];
    for key in ["notes_scanned", "notes_indexed", "notes_excluded", "lint_orphans"] {
        assert!(receipt[key].is_u64(), "{key} is a number: {receipt}");
    }
    assert!(receipt["duration_ms"].is_f64(), "duration_ms is a number: {receipt}");
    s.step_with_input(&["approver", "add", "alice"], "a long approver secret\n");
    s.step(&["approver", "list"]);
    let daily = s.dir.path().join("daily.md");
    std::fs::write(&daily, note("Daily Log", "Monday", "Baked bread and rye.")).unwrap();
    s.step(&["propose", "06_Daily_Logs/monday.md", "--content-file", daily.to_str().unwrap()]);
    let id = s.proposal_id("pending");
    s.step(&["approvals", "show", &id]);
    s.step_with_input(&["approve", &id, "--approver", "alice"], "a long approver secret\n");
    s.step(&["apply", &id, "--approve"]);
    std::fs::write(&daily, note("Daily Log", "Monday", "Nothing happened.")).unwrap();
    s.step(&["propose", "06_Daily_Logs/monday.md", "--content-file", daily.to_str().unwrap()]);
    let id = s.proposal_id("pending");
    s.step_with_input(&["reject", &id, "--approver", "alice", "--comment", "it did"], "a long approver secret\n");
    s.step(&["history", "--verify"]);
    s.step(&["index"]);
    s.step(&["check-markdown"]);
    s.step(&["doctor"]);
    s.step(&["rot-audit", "--extended"]);
    let root = s.vault.display().to_string();
    s.step(&["vaults", "add", "notes", &root, "--description", "my notes"]);
    s.step(&["vaults", "list"]);
    s.step(&["vaults", "remove", "notes"]);
    s.step(&["goals", "add", "Bake every day", "--description", "a loaf a day"]);
    s.step(&["goals", "list"]);
    s.step(&["handoff", "--request", r#"{"action":"create","task_id":"bake-1","objective":"Bake a loaf","owner":"alice"}"#]);
    s.step(&["handoff", "--request", r#"{"action":"list"}"#]);
    s.step(&["infra", "--request", r#"{"operation":"status"}"#]);
    let remote = s.dir.path().join("remote.git");
    let made = Command::new("git").args(["init", "--quiet", "--bare"]).arg(&remote).status().unwrap();
    assert!(made.success());
    let remote = remote.display().to_string();
    s.step(&["remote", "add", "origin", &remote]);
    s.step(&["replicate"]);
    s.step(&["replicate", "--status"]);
    let second = s.dir.path().join("laptop").display().to_string();
    s.step(&["clone", &remote, &second]);
    insta::assert_snapshot!("the_rest_of_the_commands", s.transcript);
}
