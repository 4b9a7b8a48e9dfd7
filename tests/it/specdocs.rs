//! vaultspec documents through the engine API: create batches (order, lifecycle, index),
//! edit guards, plan editing and progress, the ledger, status and check with safe fixes.

use paravault::Vault;
use paravault::specdocs::authoring::{self, CreateSpec, EditOperation, FindRequest};
use paravault::specdocs::health;
use paravault::specdocs::ledger::{self, LogRequest};
use paravault::specdocs::plan::{self, PlanEditOperation, StepChange};
use serde_json::{Value, json};

use crate::support::{snapshot_tree, vault};

// The engine's reports as the JSON the vaultspec tools send (`find`'s rows without the
// `result` wrapper).

fn json<T: serde::Serialize>(report: paravault::Result<T>) -> paravault::Result<Value> {
    report.map(|r| serde_json::to_value(r).unwrap())
}

fn create(vault: &Vault, specs: &[CreateSpec]) -> paravault::Result<Value> {
    json(authoring::create(vault, specs))
}

fn edit(vault: &Vault, operations: &[EditOperation]) -> paravault::Result<Value> {
    json(authoring::edit(vault, operations))
}

fn find(vault: &Vault, request: &FindRequest) -> paravault::Result<Value> {
    json(authoring::find(vault, request)).map(|found| found["result"].clone())
}

fn plan_edit(vault: &Vault, plan_ref: &str, operations: &[PlanEditOperation]) -> paravault::Result<Value> {
    json(plan::plan_edit(vault, plan_ref, operations))
}

fn plan_progress(vault: &Vault, plan_ref: &str, changes: &[StepChange]) -> paravault::Result<Value> {
    json(plan::plan_progress(vault, plan_ref, changes))
}

fn log(vault: &Vault, request: &LogRequest) -> paravault::Result<Value> {
    json(ledger::log(vault, request))
}

fn status(vault: &Vault, target: Option<&str>) -> paravault::Result<Value> {
    json(health::status(vault, target))
}

fn check(vault: &Vault, feature: Option<&str>, fix: bool) -> paravault::Result<Value> {
    json(health::check(vault, feature, fix))
}

fn spec(feature: &str, doc_type: &str) -> CreateSpec {
    CreateSpec { feature: feature.into(), doc_type: Some(doc_type.into()), date: Some("2026-05-30".into()), ..Default::default() }
}

const PLAN: &str = "2026-05-30-search-api-plan";

fn seeded() -> (tempfile::TempDir, paravault::Vault) {
    let (dir, vault) = vault("");
    let out = create(&vault, &[spec("search-api", "research"), spec("search-api", "plan")]).unwrap();
    assert_eq!(out["status"], "ok", "{out:?}");
    let ops: Vec<PlanEditOperation> = ["one", "two", "three"]
        .iter()
        .map(|a| PlanEditOperation {
            operation: "add".into(),
            action: Some((*a).into()),
            scope: Some("src/lib.rs".into()),
            ..Default::default()
        })
        .collect();
    let out = plan_edit(&vault, PLAN, &ops).unwrap();
    assert_eq!(out["status"], "ok", "{out:?}");
    (dir, vault)
}

#[test]
fn a_create_batch_applies_in_order_and_fails_items_alone() {
    let (dir, vault) = vault("");
    let mut adr = spec("#search-api", "adr");
    adr.related = Some(vec!["2026-05-30-search-api-research".into()]);
    adr.content = Some("Why we chose BM25.".into());
    let out = create(
        &vault,
        &[spec("search-api", "exec"), spec("search-api", "research"), adr, spec("Bad Feature", "adr"), spec("search-api", "research")],
    )
    .unwrap();
    assert_eq!(out["status"], "mixed");
    assert_eq!(out["counts"], json!({"created": 2, "failed": 3}));
    assert_eq!(out["submitted"], 5);
    let items = out["items"].as_array().unwrap();
    assert!(items[0]["error"]["message"].as_str().unwrap().contains("requires a plan"));
    assert_eq!(items[1]["path"], "01_Projects/search-api/research/2026-05-30-search-api-research.md");
    assert!(items[4]["error"]["message"].as_str().unwrap().contains("already exists"));
    let adr_text = std::fs::read_to_string(dir.path().join("01_Projects/search-api/adr/2026-05-30-search-api-adr.md")).unwrap();
    assert!(adr_text.contains("[[2026-05-30-search-api-research]]"), "{adr_text}");
    assert!(adr_text.contains("## Context\n\nWhy we chose BM25."));
    assert_eq!(items[2]["blob_hash"].as_str().unwrap(), paravault::specdocs::blob_hash(adr_text.as_bytes()));
    let index = std::fs::read_to_string(dir.path().join("01_Projects/search-api/search-api.index.md")).unwrap();
    assert!(index.contains("[[2026-05-30-search-api-adr]]") && index.contains("[[2026-05-30-search-api-research]]"), "{index}");
    assert!(!vault.lint().unwrap().blocking, "{:?}", vault.lint().unwrap().findings);
    let features = find(&vault, &FindRequest { limit: 20, ..Default::default() }).unwrap();
    assert_eq!(features[0]["name"], "search-api");
    assert_eq!(features[0]["doc_count"], 2);
    let rows = find(&vault, &FindRequest { feature: Some("search-api".into()), limit: 1, ..Default::default() }).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert!(create(&vault, &[]).is_err(), "an empty batch is a whole-call error");
}

#[test]
fn edit_refuses_a_stale_blob_hash_and_chains_within_a_batch() {
    let (dir, vault) = seeded();
    let path = dir.path().join("01_Projects/search-api/research/2026-05-30-search-api-research.md");
    let before = std::fs::read(&path).unwrap();
    let stale = EditOperation {
        target: "2026-05-30-search-api-research".into(),
        operation: "set_body".into(),
        content: "x".into(),
        expected_blob_hash: Some("0".repeat(40)),
        ..Default::default()
    };
    let out = edit(&vault, &[stale]).unwrap();
    assert_eq!(out["status"], "failed");
    assert_eq!(out["items"][0]["error"]["conflict"], true);
    assert_eq!(std::fs::read(&path).unwrap(), before, "a conflict writes nothing");
    let hash = paravault::specdocs::blob_hash(&before);
    let ops = [
        EditOperation {
            target: "[[2026-05-30-search-api-research]]".into(),
            operation: "replace_section".into(),
            section: Some("## Findings".into()),
            content: "BM25 wins.".into(),
            expected_blob_hash: Some(hash),
        },
        EditOperation {
            target: "2026-05-30-search-api-research.md".into(),
            operation: "append_section".into(),
            section: Some("## Findings".into()),
            content: "Also fast.".into(),
            expected_blob_hash: None,
        },
        EditOperation {
            target: "2026-05-30-search-api-research".into(),
            operation: "append_section".into(),
            section: Some("## Nowhere".into()),
            content: "x".into(),
            expected_blob_hash: None,
        },
    ];
    let out = edit(&vault, &ops).unwrap();
    assert_eq!(out["status"], "mixed", "{out:?}");
    assert_eq!(out["items"][2]["error"]["section_not_found"], true);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("## Findings\n\nBM25 wins.\n\nAlso fast.\n"), "{text}");
    assert!(
        text.starts_with(std::str::from_utf8(&before).unwrap().split("---\n").take(2).collect::<Vec<_>>().join("---\n").as_str()),
        "frontmatter untouched"
    );
}

#[test]
fn plan_progress_writes_once_and_only_on_change() {
    let (dir, vault) = seeded();
    let plan = dir.path().join("01_Projects/search-api/plan/2026-05-30-search-api-plan.md");
    let changes = [
        StepChange { step_id: "S01".into(), state: "checked".into() },
        StepChange { step_id: "S09".into(), state: "checked".into() },
        StepChange { step_id: "S02".into(), state: "done".into() },
    ];
    let out = plan_progress(&vault, "search-api", &changes).unwrap();
    assert_eq!(out["status"], "mixed");
    assert_eq!(out["counts"], json!({"updated": 1, "failed": 2}));
    assert_eq!(out["next_open_step"], "S02");
    assert_eq!(out["completion_percent"], 33.3);
    let after = std::fs::read(&plan).unwrap();
    let out = plan_progress(&vault, PLAN, &changes[..1]).unwrap();
    assert_eq!(out["counts"], json!({"unchanged": 1}));
    assert_eq!(std::fs::read(&plan).unwrap(), after, "nothing changed, nothing written");
    assert!(plan_progress(&vault, PLAN, &[]).is_err());
    assert!(plan_progress(&vault, "no-such-feature", &changes[..1]).is_err());
}

#[test]
fn removed_step_ids_stay_retired_across_calls() {
    let (dir, vault) = seeded();
    let remove = PlanEditOperation { operation: "remove".into(), step_id: Some("S03".into()), ..Default::default() };
    assert_eq!(plan_edit(&vault, PLAN, &[remove]).unwrap()["status"], "ok");
    let add = PlanEditOperation { operation: "add".into(), action: Some("four".into()), scope: Some("x".into()), ..Default::default() };
    let out = plan_edit(&vault, PLAN, &[add]).unwrap();
    assert_eq!(out["items"][0]["step_id"], "S04", "S03 is retired, never reused");
    let text = std::fs::read_to_string(dir.path().join("01_Projects/search-api/plan/2026-05-30-search-api-plan.md")).unwrap();
    assert!(text.contains("retired_steps: [\"S03\"]"), "{text}");
    // A second plan of the feature makes the feature tag ambiguous.
    let mut second = paravault::specdocs::authoring::CreateSpec {
        feature: "search-api".into(),
        doc_type: Some("plan".into()),
        date: Some("2026-05-31".into()),
        ..Default::default()
    };
    second.tier = Some("L2".into());
    assert_eq!(create(&vault, &[second]).unwrap()["status"], "ok");
    let err =
        plan_progress(&vault, "search-api", &[StepChange { step_id: "S01".into(), state: "checked".into() }]).unwrap_err().to_string();
    assert!(err.contains("2026-05-30-search-api-plan") && err.contains("2026-05-31-search-api-plan"), "{err}");
}

#[test]
fn the_ledger_is_idempotent_and_refuses_malformed_rows() {
    let (dir, vault) = seeded();
    let request = LogRequest {
        feature: "#search-api".into(),
        plan: PLAN.into(),
        step: "S01".into(),
        rows: Some(vec!["A:src/new.rs".into(), "M: src/lib.rs".into(), "R:a.rs->b.rs".into()]),
        verify: Some("cargo test=pass".into()),
        by: Some("coder".into()),
        notes: None,
    };
    let first = log(&vault, &request).unwrap();
    assert_eq!(first["created"], true);
    assert_eq!(first["rows"], 3);
    assert_eq!(first["path"], "01_Projects/search-api/exec/2026-05-30-search-api/2026-05-30-search-api-ledger.md");
    let snapshot = snapshot_tree(dir.path());
    let again = log(&vault, &request).unwrap();
    assert_eq!((again["changed"].clone(), again["created"].clone()), (json!(false), json!(false)));
    let bad = LogRequest { rows: Some(vec!["A:ok.rs".into(), "Q:bad".into()]), ..request.clone() };
    assert!(log(&vault, &bad).is_err());
    let bad_verify = LogRequest { verify: Some("cargo test".into()), ..request.clone() };
    assert!(log(&vault, &bad_verify).is_err());
    let bad_step = LogRequest { step: "S77".into(), ..request };
    assert!(log(&vault, &bad_step).is_err());
    assert_eq!(snapshot_tree(dir.path()), snapshot, "re-logging and refused calls write nothing");
    let trace = status(&vault, Some(PLAN)).unwrap();
    assert_eq!(trace["plans"][0]["steps"][0]["row_count"], 3);
    assert_eq!(trace["plans"][0]["steps"][0]["last_verify"], "cargo test=pass");
    assert_eq!(trace["plans"][0]["steps"][0]["record_stem"], "2026-05-30-search-api-ledger");
}

#[test]
fn status_rolls_up_and_check_fixes_only_safe_things() {
    let (dir, vault) = seeded();
    let rollup = status(&vault, None).unwrap();
    assert_eq!(rollup["kind"], "rollup");
    assert_eq!(rollup["plans_in_flight"][0]["next_open_step"], "S01");
    assert_eq!(rollup["features"][0]["status"], "Planned");
    assert!(status(&vault, Some("nothing-here")).is_err());
    let clean = check(&vault, None, false).unwrap();
    assert_eq!(clean["status"], "ok", "{clean:?}");
    // A person drops the feature tag; check reports it, fix restores it and leaves prose alone.
    let path = dir.path().join("01_Projects/search-api/research/2026-05-30-search-api-research.md");
    let text = std::fs::read_to_string(&path).unwrap().replace("- '#search-api'\n", "");
    std::fs::write(&path, &text).unwrap();
    vault.reload();
    let report = check(&vault, Some("search-api"), false).unwrap();
    assert_eq!(report["status"], "failed");
    assert_eq!(report["findings"][0]["fixable"], true);
    let fixed = check(&vault, Some("search-api"), true).unwrap();
    assert_eq!((fixed["status"].clone(), fixed["total_fixed"].clone()), (json!("ok"), json!(1)), "{fixed:?}");
    let repaired = std::fs::read_to_string(&path).unwrap();
    assert_eq!(repaired.split("---\n").nth(2), text.split("---\n").nth(2), "the body is untouched");
    let again = check(&vault, Some("search-api"), true).unwrap();
    assert_eq!(again["total_fixed"], 0, "fixing converges");
}

/// Every documented rule of the vaultspec seed, through MCP with the official Python SDK
/// (tests/sdk/vaultspec_behaviour.py). Fails loudly when python3 or the `mcp` package is missing.
#[test]
fn vaultspec_behaviour_through_the_python_sdk() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/vaultspec_behaviour.py");
    let probe = std::process::Command::new("python3").args(["-c", "import mcp"]).output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("python3 cannot import the `mcp` package (pip install mcp): {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("python3 is required to run the vaultspec SDK behaviour tests: {e}"),
    }
    let out = std::process::Command::new("python3").arg(&script).arg(env!("CARGO_BIN_EXE_paravault")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "vaultspec_behaviour.py failed\nstdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ok read_only_serves_status_find_and_check_without_fix"), "{stdout}");
}
