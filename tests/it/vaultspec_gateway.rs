//! vaultspec's `invoke` against the built binary: a verb that works (and writes as the agent),
//! verbs and arguments refused before anything spawns, a non-zero exit, output over the bound,
//! and a timeout that kills a verb blocked on the vault's writer lock.

use std::path::Path;
use std::time::{Duration, Instant};

use clap::CommandFactory;
use paravault::mcp::vaultspec_gateway::{InvokeRequest, invoke};
use paravault::policy::specdocs::SpecdocsPolicy;
use serde_json::{Value, json};

use crate::support::vault;

const BIN: &str = env!("CARGO_BIN_EXE_paravault");

fn request(verb: &str, arguments: Value, positionals: &[&str]) -> InvokeRequest {
    InvokeRequest {
        verb: verb.into(),
        arguments: arguments.as_object().cloned(),
        positionals: Some(positionals.iter().map(|p| p.to_string()).collect()),
        timeout: None,
    }
}

fn run(root: &Path, policy: &SpecdocsPolicy, exe: &str, request: &InvokeRequest) -> paravault::error::Result<Value> {
    // The report as the tool sends it.
    invoke(&paravault::cli::Cli::command(), Path::new(exe), root, policy, request).map(|report| serde_json::to_value(report).unwrap())
}

#[test]
fn a_verb_runs_with_json_and_writes_as_the_agent() {
    let (dir, vault) = vault("");
    let policy = vault.policy().policy.specdocs.clone();
    let ingest = request(
        "ingest",
        json!({"title": "Gateway note", "description": "Written through invoke.", "content": "Body text.", "tag": ["gateway"]}),
        &["03_Resources/gateway-note"],
    );
    let out = run(dir.path(), &policy, BIN, &ingest).unwrap();
    assert_eq!((out["ok"].clone(), out["exit_code"].clone(), out["format"].clone()), (json!(true), json!(0), json!("json")), "{out}");
    assert_eq!(out["error"], Value::Null);
    assert_eq!(out["stdout"], Value::Null);
    assert_eq!(out["command"].as_array().unwrap()[..4], json!(["paravault", "--vault", "<root>", "--json"]).as_array().unwrap()[..]);
    assert!(out["command"].as_array().unwrap().iter().any(|w| w == "--tag=gateway"), "{out}");
    let text = std::fs::read_to_string(dir.path().join("03_Resources/gateway-note.md")).unwrap();
    assert!(text.contains("Body text."), "{text}");
    let history = run(dir.path(), &policy, BIN, &request("history", json!({"limit": 1}), &[])).unwrap();
    assert_eq!(history["ok"], true, "{history}");
    let receipt = history["data"].as_array().and_then(|r| r.last()).cloned().unwrap_or_else(|| history["data"].clone());
    assert!(receipt.to_string().contains("\"actor\":\"agent\""), "the gateway writes for the agent, never as a person: {history}");
}

#[test]
fn denylisted_verbs_and_bad_arguments_are_refused_before_anything_spawns() {
    let (dir, vault) = vault("");
    let policy = vault.policy().policy.specdocs.clone();
    // A binary that does not exist: any call that got as far as spawning would fail with io_error.
    let nothing = "/nonexistent/paravault";
    let code = |r: &InvokeRequest| run(dir.path(), &policy, nothing, r).unwrap_err().code();
    for verb in ["approve", "reject", "approver add", "mcp", "init", "infra", "vaults add", "vaults remove"] {
        assert_eq!(code(&request(verb, json!({}), &[])), "verb_denied", "{verb}");
    }
    let cases = [
        request("lint", json!({"vault": "/tmp"}), &[]),
        request("lint", json!({"--json": true}), &[]),
        request("lint", json!({"help": true}), &[]),
        request("ingest", json!({"content-file": "/etc/passwd", "title": "t", "description": "d"}), &["03_Resources/x"]),
        request("lint", json!({"no-such-flag": true}), &[]),
        request("history", json!({"limit": [1, 2]}), &[]),
        request("history", json!({"verify": "yes"}), &[]),
        request("search", json!({}), &["one", "two"]),
        request("goals apply-plan", json!({}), &["@/etc/passwd"]),
        request("no-such-verb", json!({}), &[]),
        request("goals", json!({}), &[]),
        request("", json!({}), &[]),
        InvokeRequest { timeout: Some(0.0), ..request("lint", json!({}), &[]) },
        InvokeRequest { timeout: Some(policy.gateway_timeout_max_s + 1.0), ..request("lint", json!({}), &[]) },
    ];
    for case in &cases {
        assert_eq!(code(case), "invalid_argument", "{case:?}");
    }
    // The same arguments reach a spawn when they are valid: the missing binary is then the error.
    assert_eq!(code(&request("lint", json!({}), &[])), "io_error");
}

#[test]
fn a_failing_verb_is_a_result_with_its_exit_code_and_stderr() {
    let (dir, vault) = vault("");
    let policy = vault.policy().policy.specdocs.clone();
    // Missing required operand: clap refuses it on stderr with status 2.
    let out = run(dir.path(), &policy, BIN, &request("search", json!({}), &[])).unwrap();
    assert_eq!((out["ok"].clone(), out["exit_code"].clone()), (json!(false), json!(2)), "{out}");
    assert_eq!(out["error"]["kind"], "nonzero_exit");
    assert_eq!(out["error"]["exit_code"], 2);
    assert!(out["error"]["stderr"].as_str().unwrap().contains("required"), "{out}");
    assert_eq!(out["error"]["message"], "verb exited with status 2");
    // A typed engine error: paravault prints it as JSON on stdout, so it arrives as data.
    let out = run(dir.path(), &policy, BIN, &request("read-sub-index", json!({}), &["no-such-category"])).unwrap();
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error"]["kind"], "nonzero_exit");
    assert_ne!(out["exit_code"], 0);
    assert_eq!(out["format"], "json");
    let code = out["data"]["error"]["code"].as_str().unwrap();
    assert!(out["error"]["message"].as_str().unwrap().contains(code), "{out}");
}

#[test]
fn output_over_the_bound_is_dropped_and_reported_as_json_parse() {
    let (dir, vault) = vault("");
    let mut policy = vault.policy().policy.specdocs.clone();
    policy.gateway_stdout_bytes_max = 16;
    // `lint` of a clean vault exits 0 with a report longer than the bound.
    let out = run(dir.path(), &policy, BIN, &request("lint", json!({}), &[])).unwrap();
    assert_eq!((out["ok"].clone(), out["exit_code"].clone(), out["format"].clone()), (json!(false), json!(0), json!("text")), "{out}");
    assert_eq!(out["error"]["kind"], "json_parse");
    assert!(out["error"]["message"].as_str().unwrap().contains("exceeded 16 bytes"), "{out}");
    assert!(out["stdout"].as_str().unwrap().len() <= 16, "{out}");
}

#[test]
fn a_verb_past_its_timeout_is_killed_with_its_process_group() {
    let (dir, vault) = vault("");
    let policy = vault.policy().policy.specdocs.clone();
    // `index` writes, so it waits for the writer lock this test holds: a verb made slow for real.
    let writer = vault.lock_writer().unwrap();
    let started = Instant::now();
    let slow = InvokeRequest { timeout: Some(1.0), ..request("index", json!({}), &[]) };
    let out = run(dir.path(), &policy, BIN, &slow).unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(20), "{took:?}");
    assert_eq!((out["ok"].clone(), out["exit_code"].clone(), out["data"].clone()), (json!(false), Value::Null, Value::Null), "{out}");
    assert_eq!(out["error"]["kind"], "timeout");
    assert!(out["error"]["message"].as_str().unwrap().contains("killed"), "{out}");
    drop(writer);
    // The killed verb left nothing half done: the same verb now runs to the end.
    let out = run(dir.path(), &policy, BIN, &request("index", json!({}), &[])).unwrap();
    assert_eq!(out["ok"], true, "{out}");
}
