//! stepstone's MCP contract through the official MCP Python SDK: runs
//! `tests/sdk/stepstone_behaviour.py` (one test per documented rule of the seed) against the
//! built binary. Needs `python3` with the `mcp` package (`.ci/run` installs it); the test
//! fails, saying so, without them.

use std::process::Command;

#[test]
fn stepstone_behaviour_through_the_python_sdk() {
    let probe = Command::new("python3").args(["-c", "import mcp, anyio"]).output();
    match probe {
        Ok(output) if output.status.success() => {}
        Ok(output) => panic!("python3 lacks the mcp package (pip install mcp): {}", String::from_utf8_lossy(&output.stderr)),
        Err(error) => panic!("python3 is needed to run tests/sdk/stepstone_behaviour.py: {error}"),
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/stepstone_behaviour.py");
    let output = Command::new("python3").arg(script).arg(env!("CARGO_BIN_EXE_paravault")).output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "stepstone behaviour tests failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(" passed") && !stdout.contains("FAIL "), "{stdout}");
}

fn goals_cli(vault: &std::path::Path, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["--json", "goals"];
    all.extend_from_slice(args);
    let output = crate::support::paravault(vault, &all);
    let json = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("goals {args:?}: not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)));
    (output.status.code().unwrap_or(-1), json)
}

#[test]
fn the_cli_prints_the_same_envelope_and_refuses_an_unconfirmed_lifecycle_change() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    assert!(crate::support::paravault(&vault, &["init"]).status.success());
    let (code, ready) = goals_cli(&vault, &["ready"]);
    assert_eq!(code, 0);
    assert_eq!(ready["result"]["goals"], serde_json::json!([]));
    assert_eq!(ready["meta"]["revisions"]["project"], "0");
    assert_eq!(ready["meta"]["cliVersion"], env!("CARGO_PKG_VERSION"), "the CLI adds meta.cliVersion");
    let (code, added) = goals_cli(&vault, &["add", "First goal", "--link", "https://example.com/x"]);
    assert_eq!(code, 0, "{added}");
    let id = added["result"]["goal"]["id"].as_str().unwrap().to_string();
    let (_, second) = goals_cli(&vault, &["add", "Second goal", "--depends-on", &id[..6]]);
    assert_eq!(second["result"]["goal"]["dependsOn"], serde_json::json!([id]));
    let note = vault.join("01_Projects/Project Goals.md");
    let before = std::fs::read(&note).unwrap();
    let (code, refused) = goals_cli(&vault, &["complete", &id]);
    assert_eq!(code, 2, "{refused}");
    assert_eq!(refused["error"]["code"], "APPROVAL_REQUIRED");
    assert_eq!(refused["error"]["details"]["resolution"], "request-explicit-user-confirmation");
    assert_eq!(std::fs::read(&note).unwrap(), before, "a refused call wrote the worklist");
    let (code, done) = goals_cli(&vault, &["complete", &id, "--confirm"]);
    assert_eq!(code, 0, "{done}");
    let (_, next) = goals_cli(&vault, &["next"]);
    assert_eq!(next["result"]["goal"]["title"], "Second goal");
    let (code, waves) = goals_cli(&vault, &["waves"]);
    assert_eq!(code, 0);
    assert_eq!(waves["result"]["waves"][0]["goals"][0]["title"], "Second goal");
    // Written by a person: the receipts say so.
    let receipts = std::fs::read_to_string(vault.join(".paravault/receipts.jsonl")).unwrap();
    assert!(receipts.lines().filter(|l| l.contains("goals.add")).count() == 2, "{receipts}");
}

/// Two writers (two vault handles, as two processes would hold) add goals at once: the
/// worklist's read-modify-write is serialised (the goals lock), so every add succeeds the first
/// time — a mutation without a precondition never fails with CONFLICT because another writer
/// was faster (issue 50 item 9) — and no added goal is lost or added twice.
#[test]
fn concurrent_writers_lose_no_goal() {
    use paravault::goals::{self, AddInput, GoalRequest};
    let (dir, first) = crate::support::vault("");
    let second = paravault::Vault::open(dir.path(), crate::support::options()).unwrap();
    let add = |vault: &paravault::Vault, label: &str| {
        let mut added = Vec::new();
        for i in 0..12 {
            let title = format!("{label} {i}");
            let request =
                GoalRequest::Add(AddInput { title: title.clone(), description: None, group: None, depends_on: None, links: None });
            let envelope = goals::run(vault, request);
            assert!(envelope.ok, "an add without a precondition failed: {}", envelope.json());
            added.push(title);
        }
        added
    };
    let (from_first, from_second) = std::thread::scope(|scope| {
        let a = scope.spawn(|| add(&first, "first"));
        let b = scope.spawn(|| add(&second, "second"));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(from_first.len() + from_second.len(), 24, "every add eventually succeeded");
    let listing = goals::run(&first, GoalRequest::List);
    let mut titles: Vec<String> =
        listing.json()["result"]["goals"].as_array().unwrap().iter().map(|g| g["title"].as_str().unwrap().to_string()).collect();
    titles.sort();
    let mut expected: Vec<String> = from_first.into_iter().chain(from_second).collect();
    expected.sort();
    assert_eq!(titles, expected, "a goal was lost or duplicated");
    assert_eq!(listing.json()["meta"]["revisions"]["project"], "24");
}
