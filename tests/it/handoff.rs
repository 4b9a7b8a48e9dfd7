//! `handoff_work`: transitions, revisions, idempotency, maintenance phases, receipts, journal integrity.

use paravault::Error;
use paravault::handoff::HandoffRequest;
use paravault::vault::Vault;
use paravault::write::operations::IngestRequest;
use serde_json::{Value, json};

fn vault() -> (tempfile::TempDir, Vault) {
    crate::support::vault("")
}

fn req(value: Value) -> HandoffRequest {
    serde_json::from_value(value).unwrap()
}

fn call(vault: &Vault, value: Value) -> paravault::Result<Value> {
    vault.handoff_work(req(value)).map(|report| serde_json::to_value(report).unwrap())
}

fn create(vault: &Vault, id: &str, profile: &str) -> Value {
    call(vault, json!({"action": "create", "task_id": id, "objective": "Tidy the inbox", "owner": "ops", "profile": profile})).unwrap()
}

fn step(vault: &Vault, id: &str, action: &str, key: &str, revision: u64, extra: Value) -> paravault::Result<Value> {
    let mut value = json!({"action": action, "task_id": id, "idempotency_key": key, "expected_revision": revision});
    for (k, v) in extra.as_object().unwrap() {
        value[k] = v.clone();
    }
    call(vault, value)
}

fn events(root: &std::path::Path, id: &str) -> Vec<String> {
    std::fs::read_to_string(root.join(format!(".paravault/tasks/events/{id}.jsonl"))).unwrap().lines().map(str::to_string).collect()
}

/// An ok receipt in the vault's receipt log; returns (seq, trace_id).
fn receipt(vault: &Vault) -> (u64, String) {
    let r = vault
        .ingest_note(&IngestRequest {
            name: "01_Projects/done".into(),
            note_type: "Project".into(),
            title: "Done".into(),
            description: "A finished piece of work".into(),
            content: "Finished.\n".into(),
            ..Default::default()
        })
        .unwrap()
        .to_value();
    (r["seq"].as_u64().unwrap(), r["trace_id"].as_str().unwrap().to_string())
}

#[test]
fn create_show_list_and_the_snapshot_on_disk() {
    let (dir, vault) = vault();
    let task = create(&vault, "t1", "standard");
    assert_eq!(task["state"], "submitted");
    assert_eq!(task["revision"], 1);
    assert_eq!(task["authority"], "read-only");
    assert_eq!(task["source_revision"], "unknown");
    assert_eq!(task["content_capture"], "disabled");
    let on_disk: Value = serde_json::from_slice(&std::fs::read(dir.path().join(".paravault/tasks/t1.json")).unwrap()).unwrap();
    assert_eq!(on_disk, task);
    assert_eq!(call(&vault, json!({"action": "show", "task_id": "t1"})).unwrap(), task);
    let list = call(&vault, json!({"action": "list"})).unwrap();
    assert_eq!(list["tasks"][0]["task_id"], "t1");
    assert_eq!(list["tasks"][0]["state"], "submitted");
    let again = call(&vault, json!({"action": "create", "task_id": "t1", "objective": "x", "owner": "ops"})).unwrap_err();
    assert!(matches!(again, Error::TaskExists { .. }), "{again}");
    let missing = call(&vault, json!({"action": "show", "task_id": "nope"})).unwrap_err();
    assert_eq!(missing.code(), "task_not_found");
}

#[test]
fn requests_are_validated() {
    let (_dir, vault) = vault();
    for bad in [
        json!({"action": "create", "task_id": "../x", "objective": "o", "owner": "a"}),
        json!({"action": "create", "task_id": ".hidden", "objective": "o", "owner": "a"}),
        json!({"action": "create", "task_id": "t", "objective": "x".repeat(1001), "owner": "a"}),
        json!({"action": "create", "task_id": "t", "objective": "o", "owner": "a", "scope": vec!["s"; 65]}),
        json!({"action": "create", "task_id": "t", "owner": "a"}),
        json!({"action": "create", "task_id": "t", "objective": "o", "owner": "a", "phase": "detect"}),
    ] {
        let error = call(&vault, bad.clone()).unwrap_err();
        assert_eq!(error.code(), "invalid_argument", "{bad}: {error}");
    }
    assert!(serde_json::from_value::<HandoffRequest>(json!({"action": "create", "authority": "root"})).is_err());
    assert!(serde_json::from_value::<HandoffRequest>(json!({"action": "create", "surprise": 1})).is_err());
    create(&vault, "t", "standard");
    // P.O.W.E.R.'s contract has neither: without a key the transition is not replayable, without
    // a revision it advances the current one; given, each keeps its check.
    let no_key = call(&vault, json!({"action": "resume", "task_id": "t", "expected_revision": 1})).unwrap();
    assert_eq!((no_key["revision"].as_u64(), no_key["last_idempotency_key"].as_str()), (Some(2), Some("")));
    let no_revision = call(&vault, json!({"action": "checkpoint", "task_id": "t", "idempotency_key": "k"})).unwrap();
    assert_eq!(no_revision["revision"], 3);
    let bare = json!({"action": "checkpoint", "task_id": "t"});
    assert_eq!(call(&vault, bare.clone()).unwrap()["revision"], 4);
    assert_eq!(call(&vault, bare).unwrap()["revision"], 5, "no key: the same call again is a new transition");
    let replay = call(&vault, json!({"action": "checkpoint", "task_id": "t", "idempotency_key": "k"})).unwrap();
    assert_eq!(replay, no_revision, "a key still replays the original result");
    let stale = call(&vault, json!({"action": "checkpoint", "task_id": "t", "expected_revision": 2})).unwrap_err();
    assert_eq!(stale.code(), "revision_conflict");
    assert!(call(&vault, json!({"action": "resume"})).is_err_and(|e| e.code() == "invalid_argument"), "task_id is still needed");
}

#[test]
fn transitions_allowed_and_refused() {
    let (dir, vault) = vault();
    let (seq, _) = receipt(&vault);
    create(&vault, "t", "standard");
    // checkpoint only records progress of a working task
    let early = step(&vault, "t", "checkpoint", "k0", 1, json!({})).unwrap_err();
    assert_eq!(early.code(), "transition_refused");
    // complete from submitted is not in the map
    let skip = step(&vault, "t", "complete", "k0b", 1, json!({"receipt_id": format!("seq:{seq}")})).unwrap_err();
    assert_eq!(skip.code(), "transition_refused");
    let working = step(&vault, "t", "resume", "k1", 1, json!({})).unwrap();
    assert_eq!(working["state"], "working");
    assert_eq!(working["revision"], 2);
    let checkpoint =
        step(&vault, "t", "checkpoint", "k2", 2, json!({"changed_artifacts": ["01_Projects/done.md"], "next_action": "review"})).unwrap();
    assert_eq!(checkpoint["changed_artifacts"], json!(["01_Projects/done.md"]));
    // input-required needs a blocker; resuming from it needs approval
    assert_eq!(step(&vault, "t", "input-required", "k3", 3, json!({})).unwrap_err().code(), "invalid_argument");
    let waiting = step(&vault, "t", "input-required", "k3b", 3, json!({"blocker": "which folder?"})).unwrap();
    assert_eq!(waiting["state"], "input-required");
    assert_eq!(waiting["required_input"], json!({"blocker": "which folder?", "required_approval": "caller"}));
    assert_eq!(step(&vault, "t", "resume", "k4", 4, json!({})).unwrap_err().code(), "approval_required");
    let resumed = step(&vault, "t", "resume", "k4b", 4, json!({"approved": true})).unwrap();
    assert_eq!(resumed["state"], "working");
    assert_eq!(resumed["required_input"], Value::Null);
    assert_eq!(resumed["human_interventions"], 2);
    // cancel needs approval; after cancel, nothing moves
    assert_eq!(step(&vault, "t", "cancel", "k5", 5, json!({})).unwrap_err().code(), "approval_required");
    let canceled = step(&vault, "t", "cancel", "k5b", 5, json!({"approved": true})).unwrap();
    assert_eq!(canceled["state"], "canceled");
    let after = step(&vault, "t", "resume", "k6", 6, json!({"approved": true})).unwrap_err();
    assert_eq!(after.code(), "transition_refused");
    // refused calls append nothing: one event per successful change
    assert_eq!(events(dir.path(), "t").len(), 6);
    // fail needs a blocker and records it
    create(&vault, "f", "standard");
    assert_eq!(step(&vault, "f", "fail", "f1", 1, json!({})).unwrap_err().code(), "invalid_argument");
    let failed = step(&vault, "f", "fail", "f1b", 1, json!({"blocker": "broker down"})).unwrap();
    assert_eq!(failed["state"], "failed");
    assert_eq!(failed["error_ref"], "broker down");
}

#[test]
fn expected_revision_conflicts() {
    let (dir, vault) = vault();
    create(&vault, "t", "standard");
    step(&vault, "t", "resume", "a", 1, json!({})).unwrap();
    let stale = step(&vault, "t", "checkpoint", "b", 1, json!({})).unwrap_err();
    assert!(matches!(stale, Error::RevisionConflict { expected: 1, found: 2, .. }), "{stale}");
    let ahead = step(&vault, "t", "checkpoint", "c", 7, json!({})).unwrap_err();
    assert_eq!(ahead.code(), "revision_conflict");
    assert_eq!(events(dir.path(), "t").len(), 2);
    step(&vault, "t", "checkpoint", "d", 2, json!({})).unwrap();
}

#[test]
fn idempotent_replay_and_fingerprint_conflict() {
    let (dir, vault) = vault();
    create(&vault, "t", "standard");
    let first = step(&vault, "t", "resume", "key-1", 1, json!({"next_action": "scan"})).unwrap();
    let journal_before = events(dir.path(), "t");
    let replay = step(&vault, "t", "resume", "key-1", 1, json!({"next_action": "scan"})).unwrap();
    assert_eq!(replay, first, "the replay returns the original result");
    assert_eq!(events(dir.path(), "t"), journal_before, "a replay appends no event");
    let different = step(&vault, "t", "resume", "key-1", 1, json!({"next_action": "something else"})).unwrap_err();
    assert!(matches!(different, Error::IdempotencyConflict { .. }), "{different}");
    // A replay still answers after the task moved on.
    step(&vault, "t", "checkpoint", "key-2", 2, json!({})).unwrap();
    assert_eq!(step(&vault, "t", "resume", "key-1", 1, json!({"next_action": "scan"})).unwrap(), first);
    // Keyed create replays too.
    let body = json!({"action": "create", "task_id": "c", "objective": "o", "owner": "a", "idempotency_key": "ck"});
    let created = call(&vault, body.clone()).unwrap();
    assert_eq!(call(&vault, body).unwrap(), created);
    let other =
        call(&vault, json!({"action": "create", "task_id": "c", "objective": "other", "owner": "a", "idempotency_key": "ck"})).unwrap_err();
    assert_eq!(other.code(), "idempotency_conflict");
}

#[test]
fn maintenance_phase_order_is_enforced() {
    let (_dir, vault) = vault();
    let (seq, _) = receipt(&vault);
    create(&vault, "m", "maintenance");
    // a phase must start at detect
    let skip = step(&vault, "m", "resume", "m0", 1, json!({"phase": "dry-run"})).unwrap_err();
    assert!(matches!(skip, Error::PhaseOrder { .. }), "{skip}");
    step(&vault, "m", "resume", "m1", 1, json!({"phase": "detect"})).unwrap();
    step(&vault, "m", "checkpoint", "m2", 2, json!({"phase": "dry-run"})).unwrap();
    // verify before repair is refused (the 3.7.4 drift)
    assert_eq!(step(&vault, "m", "checkpoint", "m3", 3, json!({"phase": "verify"})).unwrap_err().code(), "maintenance_phase_order");
    // repair needs approval
    assert_eq!(step(&vault, "m", "checkpoint", "m3b", 3, json!({"phase": "repair"})).unwrap_err().code(), "approval_required");
    let repair = step(&vault, "m", "checkpoint", "m3c", 3, json!({"phase": "repair", "approved": true})).unwrap();
    assert_eq!(repair["maintenance_phase"], "repair");
    assert_eq!(repair["human_interventions"], 1);
    // completing from repair is refused
    let early = step(&vault, "m", "complete", "m4", 4, json!({"receipt_id": format!("seq:{seq}")})).unwrap_err();
    assert_eq!(early.code(), "transition_refused");
    // no stepping back
    assert_eq!(step(&vault, "m", "checkpoint", "m4b", 4, json!({"phase": "detect"})).unwrap_err().code(), "maintenance_phase_order");
    step(&vault, "m", "checkpoint", "m5", 4, json!({"phase": "verify"})).unwrap();
    step(&vault, "m", "checkpoint", "m6", 5, json!({"phase": "receipt"})).unwrap();
    let done = step(&vault, "m", "complete", "m7", 6, json!({"receipt_id": format!("seq:{seq}")})).unwrap();
    assert_eq!(done["state"], "completed");
    assert_eq!(done["receipt_ids"], json!([format!("seq:{seq}")]));
    // a standard task takes no phase
    create(&vault, "s", "standard");
    assert_eq!(step(&vault, "s", "resume", "s1", 1, json!({"phase": "detect"})).unwrap_err().code(), "invalid_argument");
}

#[test]
fn complete_requires_an_existing_receipt_and_no_open_gates() {
    let (_dir, vault) = vault();
    create(&vault, "t", "standard");
    step(&vault, "t", "resume", "r", 1, json!({"open_gates": ["review"]})).unwrap();
    assert_eq!(step(&vault, "t", "complete", "c0", 2, json!({})).unwrap_err().code(), "transition_refused", "open gates first");
    let no_receipt = step(&vault, "t", "complete", "c1", 2, json!({"open_gates": []})).unwrap_err();
    assert_eq!(no_receipt.code(), "invalid_argument");
    for unknown in ["seq:1", "seq:x", "0123456789abcdef0123456789abcdef"] {
        let error =
            step(&vault, "t", "complete", &format!("c-{unknown}"), 2, json!({"open_gates": [], "receipt_id": unknown})).unwrap_err();
        assert!(matches!(error, Error::ReceiptNotFound { .. }), "{unknown}: {error}");
    }
    let (seq, trace_id) = receipt(&vault);
    let done = step(&vault, "t", "complete", "c2", 2, json!({"open_gates": [], "receipt_id": trace_id})).unwrap();
    assert_eq!(done["state"], "completed");
    assert_eq!(done["receipt_ids"], json!([format!("seq:{seq}")]), "a trace_id is recorded as its canonical seq id");
}

#[test]
fn an_aborted_receipt_cannot_complete_a_task() {
    let (dir, vault) = vault();
    let bad = IngestRequest {
        name: "01_Projects/missing/x".into(),
        note_type: "Project".into(),
        title: "T".into(),
        description: "D".into(),
        content: "x".into(),
        ..Default::default()
    };
    vault.ingest_note(&bad).unwrap_err();
    let line = std::fs::read_to_string(dir.path().join(".paravault/receipts.jsonl")).unwrap();
    assert!(line.contains("\"aborted\""));
    create(&vault, "t", "standard");
    step(&vault, "t", "resume", "r", 1, json!({})).unwrap();
    assert_eq!(step(&vault, "t", "complete", "c", 2, json!({"receipt_id": "seq:1"})).unwrap_err().code(), "receipt_not_found");
}

fn snapshot_all(root: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in [".paravault/tasks", ".paravault/tasks/events"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                out.push((entry.path().display().to_string(), std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

type Tamper = Box<dyn Fn(&[String]) -> String>;

#[test]
fn journal_tampering_is_an_integrity_error_with_zero_mutation() {
    let tamperings: Vec<(&str, Tamper)> = vec![
        ("edited result", Box::new(|l| format!("{}\n{}\n", l[0], l[1].replace("\"working\"", "\"completed\"")))),
        ("malformed JSON", Box::new(|l| format!("{}\n{{not json\n", l[0]))),
        ("sequence gap", Box::new(|l| format!("{}\n", l[1]))),
        ("wrong task id", Box::new(|l| format!("{}\n{}\n", l[0], l[1].replace("\"task_id\":\"t\"", "\"task_id\":\"u\"")))),
        ("incomplete last line", Box::new(|l| format!("{}\n{}", l[0], l[1]))),
    ];
    for (name, tamper) in tamperings {
        let (dir, vault) = vault();
        create(&vault, "t", "standard");
        step(&vault, "t", "resume", "k1", 1, json!({})).unwrap();
        let path = dir.path().join(".paravault/tasks/events/t.jsonl");
        let lines = events(dir.path(), "t");
        std::fs::write(&path, tamper(&lines)).unwrap();
        let before = snapshot_all(dir.path());
        for attempt in [
            json!({"action": "checkpoint", "task_id": "t", "idempotency_key": "k2", "expected_revision": 2}),
            json!({"action": "resume", "task_id": "t", "idempotency_key": "k1", "expected_revision": 1}),
            json!({"action": "show", "task_id": "t"}),
        ] {
            let error = call(&vault, attempt).unwrap_err();
            assert_eq!(error.code(), "task_journal_integrity", "{name}: {error}");
        }
        assert_eq!(snapshot_all(dir.path()), before, "{name}: nothing changed");
        let list = call(&vault, json!({"action": "list"})).unwrap();
        assert_eq!(list["tasks"][0]["error"]["code"], "task_journal_integrity", "{name}");
    }
}

#[test]
fn an_edited_snapshot_is_detected_and_a_stale_one_is_repaired() {
    let (dir, vault) = vault();
    create(&vault, "t", "standard");
    let path = dir.path().join(".paravault/tasks/t.json");
    let original = std::fs::read(&path).unwrap();
    std::fs::write(&path, String::from_utf8(original.clone()).unwrap().replace("Tidy the inbox", "Delete everything")).unwrap();
    assert_eq!(call(&vault, json!({"action": "show", "task_id": "t"})).unwrap_err().code(), "task_journal_integrity");
    // A missing snapshot (crash after the journal append) is rebuilt from the journal.
    std::fs::remove_file(&path).unwrap();
    let resumed = step(&vault, "t", "resume", "k", 1, json!({})).unwrap();
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(on_disk, resumed);
}

#[test]
fn request_schema_is_precise() {
    let schema = serde_json::to_value(schemars::schema_for!(HandoffRequest)).unwrap();
    let text = schema.to_string();
    for word in ["input-required", "dry-run", "read-only", "maintenance", "expected_revision"] {
        assert!(text.contains(word), "schema lacks {word}");
    }
}

#[test]
fn cli_parity() {
    let (dir, _vault) = vault();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_paravault")).arg("--vault").arg(dir.path()).args(args).output().unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, stdout) =
        run(&["--json", "handoff", "--request", r#"{"action":"create","task_id":"cli-1","objective":"From the CLI","owner":"ops"}"#]);
    assert_eq!(code, 0, "{stdout}");
    let task: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(task["state"], "submitted");
    let (code, stdout) = run(&["handoff", "--request", r#"{"action":"list"}"#]);
    assert_eq!(code, 0);
    assert!(stdout.contains("cli-1"));
    let (code, _) = run(&["handoff", "--request", r#"{"action":"resume","task_id":"cli-1","idempotency_key":"k","expected_revision":9}"#]);
    assert_eq!(code, 2, "a revision conflict is a usage error");
    let (code, _) = run(&["handoff", "--request", r#"{"action":"launch"}"#]);
    assert_eq!(code, 2);
    let (code, stdout) = run(&["--json", "infra", "--request", r#"{"operation":"replicate"}"#]);
    assert_eq!(code, 2);
    assert!(stdout.contains("invalid_argument"), "{stdout}");
    if std::env::var_os("PARAVAULT_INFRA_SOCKET").is_none() {
        let (code, stdout) = run(&["infra", "--request", r#"{"operation":"status"}"#]);
        assert_eq!(code, 0);
        assert!(stdout.contains("MISSING_EXECUTION_CAPABILITY"), "{stdout}");
    }
}
