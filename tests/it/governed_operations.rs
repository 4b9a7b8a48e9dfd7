//! The governed operations added after issue 21's first cut: the goal lifecycle tools
//! (`goals_complete`/`reopen`/`archive`/`delete`), link-rot egress and infra replicate under a
//! `human` rule (human_approval_required → a person approves → exactly that runs; a rejection
//! binds), what a person is shown before deciding (diff and lint verdict, through the CLI), a
//! worklist that does not parse as a lint finding, and the worklist's capacity.

use std::path::Path;
use std::sync::atomic::Ordering;

use paravault::Vault;
use paravault::approvals::{ApprovalChannel, Decision, DecisionRequest, ProposalState, secrets};
use paravault::goals::{self, AddInput, ConfirmedInput, GoalRequest, Lifecycle};
use paravault::maintenance::rot::RotRequest;
use serde_json::{Value, json};

use crate::support::paravault_with_input;
use crate::support::{note, paravault, vault};

const SECRET: &str = "correct horse battery staple";

fn approvers() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    secrets::add_approver(dir.path(), "alice", SECRET).unwrap();
    dir
}

fn decide(vault: &Vault, config: &Path, id: &str, decision: Decision) {
    let request = DecisionRequest {
        proposal_id: id.into(),
        decision,
        approver: "alice".into(),
        secret: SECRET.into(),
        channel: ApprovalChannel::Cli,
        comment: "checked".into(),
    };
    vault.decide_with_approvers(config, &request).unwrap();
}

fn add(vault: &Vault, title: &str) -> String {
    let envelope = goals::run(
        vault,
        GoalRequest::Add(AddInput { title: title.into(), description: None, group: None, depends_on: None, links: None }),
    );
    assert!(envelope.ok, "{}", envelope.json());
    envelope.json()["result"]["goal"]["id"].as_str().unwrap().to_string()
}

fn lifecycle(vault: &Vault, kind: Lifecycle, id: &str) -> Value {
    goals::run(vault, GoalRequest::Lifecycle(kind, ConfirmedInput { id: id.into(), confirm: Some(json!(true)), expected_updated_at: None }))
        .json()
}

fn goal_status(vault: &Vault, id: &str) -> String {
    goals::run(vault, GoalRequest::Show { id: id.into() }).json()["result"]["goal"]["status"].as_str().unwrap().to_string()
}

const WORKLIST: &str = "01_Projects/Project Goals.md";

#[test]
fn a_goal_lifecycle_change_under_a_human_rule_applies_exactly_what_a_person_approved() {
    let rule = "-- .paravault/policy.yaml --\napprovals:\n  rules:\n    - { operations: [goals_complete, goals_delete], paths: [\"01_Projects/**\"], approver: human }\n";
    let (dir, vault) = vault(rule);
    let config = approvers();
    let first = add(&vault, "First");
    let second = add(&vault, "Second");
    let worklist = dir.path().join(WORKLIST);
    let before = std::fs::read(&worklist).unwrap();

    // Confirmation is checked first; the person's approval applies on top of confirm=true.
    let unconfirmed = goals::run(
        &vault,
        GoalRequest::Lifecycle(Lifecycle::Complete, ConfirmedInput { id: first.clone(), confirm: None, expected_updated_at: None }),
    );
    assert_eq!(unconfirmed.json()["error"]["code"], "APPROVAL_REQUIRED");
    let waiting = lifecycle(&vault, Lifecycle::Complete, &first);
    assert_eq!(waiting["ok"], false);
    assert_eq!(waiting["error"]["code"], "HUMAN_APPROVAL_REQUIRED", "{waiting}");
    assert_eq!(waiting["error"]["retryable"], false);
    assert_eq!(waiting["error"]["details"]["engineCode"], "human_approval_required");
    assert_eq!(waiting["error"]["details"]["operation"], "complete");
    let proposal = waiting["error"]["details"]["proposalId"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(&worklist).unwrap(), before, "nothing is written before a person approves");
    assert_eq!(vault.proposal_status(&proposal).unwrap().state, ProposalState::Pending);
    // The identical call (by prefix) names the same proposal; another goal is another proposal.
    assert_eq!(lifecycle(&vault, Lifecycle::Complete, &first[..5])["error"]["details"]["proposalId"], proposal.as_str());
    let other = lifecycle(&vault, Lifecycle::Complete, &second);
    assert_ne!(other["error"]["details"]["proposalId"], proposal.as_str(), "an approval of one goal never completes another");
    // A tool the rule does not name keeps the caller's confirmation.
    assert_eq!(lifecycle(&vault, Lifecycle::Archive, &second)["ok"], true);
    let after_archive = std::fs::read(&worklist).unwrap();
    // The worklist changed since: the pending proposal is stale and cannot be approved.
    assert_eq!(vault.proposal_status(&proposal).unwrap().state, ProposalState::Stale);
    let refused = vault
        .decide_with_approvers(
            config.path(),
            &DecisionRequest {
                proposal_id: proposal.clone(),
                decision: Decision::Approved,
                approver: "alice".into(),
                secret: SECRET.into(),
                channel: ApprovalChannel::Cli,
                comment: String::new(),
            },
        )
        .unwrap_err();
    assert_eq!(refused.code(), "approval_stale");

    // Proposed again from the current worklist, reviewed, approved, applied.
    let waiting = lifecycle(&vault, Lifecycle::Complete, &first);
    let proposal = waiting["error"]["details"]["proposalId"].as_str().unwrap().to_string();
    let review = vault.proposal_review(&proposal).unwrap();
    assert_eq!(review.changes.len(), 1);
    assert!(review.changes[0].diff.contains("-- status: open") && review.changes[0].diff.contains("+- status: done"), "{review:?}");
    assert!(review.gate.as_ref().unwrap().passes, "{review:?}");
    decide(&vault, config.path(), &proposal, Decision::Approved);
    assert_eq!(std::fs::read(&worklist).unwrap(), after_archive, "a decision alone writes nothing");
    let done = lifecycle(&vault, Lifecycle::Complete, &first);
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(done["result"]["goal"]["status"], "done");
    assert_eq!(done["meta"]["approval"]["approver"], "alice");
    assert_eq!(done["meta"]["approval"]["channel"], "cli");
    assert_eq!(vault.proposal_status(&proposal).unwrap().state, ProposalState::Applied);
    let receipts = std::fs::read_to_string(dir.path().join(".paravault/receipts.jsonl")).unwrap();
    let receipt: Value = serde_json::from_str(receipts.lines().rfind(|l| l.contains("goals.complete")).unwrap()).unwrap();
    assert_eq!(receipt["approval"]["approver"], "alice", "the receipt names the approver: {receipt}");
    assert_eq!(receipt["approval"]["channel"], "cli");
    assert!(vault.verify_history().unwrap().ok);

    // A rejection binds: the identical call fails with PROPOSAL_REJECTED and writes nothing.
    let waiting = lifecycle(&vault, Lifecycle::Delete, &first);
    assert_eq!(waiting["error"]["code"], "HUMAN_APPROVAL_REQUIRED");
    let proposal = waiting["error"]["details"]["proposalId"].as_str().unwrap().to_string();
    decide(&vault, config.path(), &proposal, Decision::Rejected);
    let before = std::fs::read(&worklist).unwrap();
    let rejected = lifecycle(&vault, Lifecycle::Delete, &first);
    assert_eq!(rejected["error"]["code"], "PROPOSAL_REJECTED", "{rejected}");
    assert_eq!(rejected["error"]["details"]["approver"], "alice");
    assert_eq!(rejected["error"]["details"]["proposalId"], proposal.as_str());
    assert_eq!(std::fs::read(&worklist).unwrap(), before);
    assert_eq!(goal_status(&vault, &first), "done");
}

#[test]
fn a_worklist_that_does_not_parse_is_a_lint_finding_in_lint_vault_and_the_cli() {
    let (dir, vault) = vault("");
    let id = add(&vault, "Parse me");
    assert!(!vault.lint_vault().unwrap().findings.iter().any(|f| f.rule == "goals-worklist-invalid"), "a valid worklist is clean");
    let worklist = dir.path().join(WORKLIST);
    let text = std::fs::read_to_string(&worklist).unwrap();
    let broken = text.replace("- status: open", "- status: someday");
    assert_ne!(broken, text);
    std::fs::write(&worklist, &broken).unwrap();
    let line = broken.lines().position(|l| l.contains("someday")).unwrap() + 1;

    let report = vault.lint_vault().unwrap();
    let worklist_findings: Vec<_> = report.findings.iter().filter(|f| f.rule == "goals-worklist-invalid").collect();
    assert!(!worklist_findings.is_empty(), "a worklist finding: {:?}", report.findings);
    assert!(worklist_findings.iter().all(|f| f.path == WORKLIST && f.line.is_some()), "{worklist_findings:?}");
    // One finding per parse problem; the one on the edited line names the bad value.
    let finding = worklist_findings.iter().find(|f| f.line == Some(line)).unwrap_or_else(|| panic!("line {line}: {worklist_findings:?}"));
    assert!(finding.message.contains("someday"), "the parse error is named: {}", finding.message);
    assert_eq!(report.counts.get("goals-worklist-invalid"), Some(&worklist_findings.len()));
    assert!(report.blocking, "the default policy makes it blocking");

    let cli = paravault(dir.path(), &["--json", "lint"]);
    let json: Value = serde_json::from_slice(&cli.stdout).unwrap();
    let findings = json["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["rule"] == "goals-worklist-invalid" && f["path"] == WORKLIST && f["line"] == line),
        "paravault lint: {json}"
    );
    let text = String::from_utf8_lossy(&paravault(dir.path(), &["lint"]).stdout).into_owned();
    assert!(text.contains("goals-worklist-invalid"), "{text}");

    // The goal tools still refuse to write it, and nothing is lost.
    let refused = goals::run(&vault, GoalRequest::Show { id });
    assert_eq!(refused.json()["error"]["code"], "WORKLIST_INVALID");
    assert_eq!(std::fs::read_to_string(&worklist).unwrap(), broken);
}

#[test]
fn link_rot_egress_under_a_human_rule_waits_for_a_person_and_runs_the_approved_urls() {
    let (base, connections) = crate::link_rot::server();
    let port = base.rsplit(':').next().unwrap();
    let body = format!("See [the docs](http://localhost:{port}/ok) and <http://127.0.0.1:{port}/gone>.\n");
    let fixture = format!(
        "-- .paravault/policy.yaml --\negress: allow-public\napprovals:\n  rules:\n    - {{ operations: [link_rot], paths: [\"03_Resources/**\"], approver: human }}\n-- 03_Resources/links.md --\n{}\n",
        note("Resource", "Links", &body)
    );
    let (dir, vault) = vault(&fixture);
    let config = approvers();
    let request = RotRequest { allow_link_rot: true, approved: true, ..Default::default() };
    let error = vault.rot_audit(&request).unwrap_err();
    let proposal = match &error {
        paravault::error::Error::HumanApprovalRequired { operation, proposal_id } => {
            assert_eq!(*operation, "rot_audit");
            proposal_id.clone()
        }
        other => panic!("expected human_approval_required, got {other:?}"),
    };
    // The same request names the same proposal; what a person reviews is the URL list.
    assert_eq!(vault.rot_audit(&request).unwrap_err().to_string(), error.to_string());
    let review = vault.proposal_review(&proposal).unwrap();
    assert_eq!(review.status.paths, vec!["03_Resources/links.md".to_string()]);
    let urls = review.request.as_ref().unwrap()["urls"].as_array().unwrap().clone();
    assert_eq!(urls.len(), 2, "{urls:?}");
    assert!(review.gate.is_none() && review.changes.is_empty());
    // Without approved=true nothing is asked and nothing contacted (the section is skipped).
    let unapproved = vault.rot_audit(&RotRequest { allow_link_rot: true, ..Default::default() }).unwrap();
    assert!(unapproved.link_rot.is_empty());

    decide(&vault, config.path(), &proposal, Decision::Approved);
    assert_eq!(vault.proposal_status(&proposal).unwrap().state, ProposalState::Approved);
    let report = vault.rot_audit(&request).unwrap();
    assert_eq!(report.link_rot.len(), 2, "the approved checks ran: {:?}", report.link_rot);
    let approval = report.link_rot_approval.as_ref().expect("the report names the approval");
    assert_eq!(approval["approver"], "alice");
    assert_eq!(approval["channel"], "cli");
    // Loopback targets are still refused at connect time: an approval never widens egress.
    assert_eq!(connections.load(Ordering::SeqCst), 0);

    // A new URL is a new request: it needs its own decision; a rejection binds.
    drop(vault);
    let more = format!("{body}Also <http://localhost:{port}/moved>.\n");
    std::fs::write(dir.path().join("03_Resources/links.md"), note("Resource", "Links", &more)).unwrap();
    let vault = Vault::open(dir.path(), Default::default()).unwrap();
    let again = vault.rot_audit(&request).unwrap_err();
    let paravault::error::Error::HumanApprovalRequired { proposal_id: second, .. } = &again else { panic!("{again:?}") };
    assert_ne!(second, &proposal);
    decide(&vault, config.path(), second, Decision::Rejected);
    assert_eq!(vault.rot_audit(&request).unwrap_err().code(), "proposal_rejected");
    // Notes outside the rule's paths keep the caller's approval.
    assert_eq!(
        paravault::approvals::approver_for(&vault.policy().policy.approvals, paravault::approvals::Operation::LinkRot, ["02_Areas/x.md"]),
        paravault::policy::Approver::Caller
    );
}

#[test]
fn infra_replicate_under_a_human_rule_reaches_the_broker_only_after_a_person_approves() {
    let sockdir = tempfile::tempdir().unwrap();
    // One connection: the approved replicate. The unapproved and rejected calls never connect.
    let (socket, handle) = crate::infra::broker(sockdir.path(), 1, |request| crate::infra::response(request, crate::infra::receipt()));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".paravault")).unwrap();
    std::fs::write(
        dir.path().join(".paravault/policy.yaml"),
        format!(
            "infra:\n  broker_socket: '{}'\n  timeout_ms: 5000\napprovals:\n  rules:\n    - {{ operations: [infra_replicate], approver: human }}\n",
            socket.display()
        ),
    )
    .unwrap();
    let vault = Vault::open(dir.path(), Default::default()).unwrap();
    let config = approvers();
    let replicate = |key: &str| -> paravault::infra::InfraRequest {
        serde_json::from_value(json!({"operation": "replicate", "target": "backup-1", "idempotency_key": key})).unwrap()
    };
    let error = vault.infra_action(replicate("nightly-1")).unwrap_err();
    let paravault::error::Error::HumanApprovalRequired { operation, proposal_id } = &error else { panic!("{error:?}") };
    assert_eq!(*operation, "infra_action");
    let review = vault.proposal_review(proposal_id).unwrap();
    assert_eq!(review.request.as_ref().unwrap()["idempotency_key"], "nightly-1", "{review:?}");
    assert_eq!(review.request.as_ref().unwrap()["operation"], "replicate");
    decide(&vault, config.path(), proposal_id, Decision::Approved);
    let result = serde_json::to_value(vault.infra_action(replicate("nightly-1")).unwrap()).unwrap();
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["approval"]["approver"], "alice");
    assert_eq!(result["approval"]["channel"], "cli");
    // Another request (another idempotency key) is another proposal; rejected, it never runs.
    let other = vault.infra_action(replicate("nightly-2")).unwrap_err();
    let paravault::error::Error::HumanApprovalRequired { proposal_id: second, .. } = &other else { panic!("{other:?}") };
    assert_ne!(second, proposal_id);
    decide(&vault, config.path(), second, Decision::Rejected);
    assert_eq!(vault.infra_action(replicate("nightly-2")).unwrap_err().code(), "proposal_rejected");
    let seen = handle.join().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["idempotency_key"], "nightly-1", "only the approved request reached the broker");
    // A replicate rule takes no path patterns: it could never match a note.
    let refused = paravault::policy::LoadedPolicy::from_texts(Some(
        "approvals:\n  rules:\n    - { operations: [infra_replicate], paths: [\"01_Projects/**\"], approver: human }\n",
    ));
    assert!(refused.is_err());
}

#[test]
fn approve_and_approvals_show_print_the_diff_and_the_lint_verdict_before_the_secret() {
    let rule =
        "-- .paravault/policy.yaml --\napprovals:\n  rules:\n    - { operations: [apply], paths: [\"01_Projects/**\"], approver: human }\n";
    let (dir, vault) = vault(&format!("{rule}-- 01_Projects/plan.md --\n{}", note("Project", "Plan", "keep\nv0\n")));
    let config = approvers();
    let proposal = vault.propose_memory_change("01_Projects/plan.md", &note("Project", "Plan", "keep\nv1\n"), None, None).unwrap();
    let id = proposal.proposal_id.clone();

    let shown = paravault_with_input(dir.path(), config.path(), &["approvals", "show", &id], "");
    assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
    let text = String::from_utf8_lossy(&shown.stdout);
    for expected in
        ["--- a/01_Projects/plan.md", "+++ b/01_Projects/plan.md", "-v0", "+v1", " keep", "lint gate on the after-image: passes"]
    {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let json: Value =
        serde_json::from_slice(&paravault_with_input(dir.path(), config.path(), &["--json", "approvals", "show", &id], "").stdout).unwrap();
    assert_eq!(json["proposal_id"], id.as_str());
    assert_eq!(json["state"], "pending");
    assert!(json["changes"][0]["diff"].as_str().unwrap().contains("+v1"), "{json}");
    assert_eq!(json["gate"]["passes"], true);

    // A wrong secret: the person still saw the review first, and nothing is decided.
    let wrong = paravault_with_input(dir.path(), config.path(), &["approve", &id, "--approver", "alice"], "not the secret\n");
    assert_eq!(wrong.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("+v1"), "the diff comes before the secret");
    assert_eq!(vault.proposal_status(&id).unwrap().state, ProposalState::Pending);
    let approved =
        paravault_with_input(dir.path(), config.path(), &["--json", "approve", &id, "--approver", "alice"], &format!("{SECRET}\n"));
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    let review = String::from_utf8_lossy(&approved.stderr);
    assert!(review.contains("-v0") && review.contains("+v1") && review.contains("lint gate on the after-image: passes"), "{review}");
    let record: Value = serde_json::from_slice(&approved.stdout).unwrap();
    assert_eq!(record["decision"], "approved", "stdout holds only the decision record: {record}");

    // A proposal whose after-image the gate would refuse says so before the person decides.
    let broken =
        vault.propose_memory_change("01_Projects/other.md", &note("Project", "Other", "See [[nowhere-at-all]].\n"), None, None).unwrap();
    let shown = paravault_with_input(dir.path(), config.path(), &["--json", "approvals", "show", &broken.proposal_id], "");
    let json: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(json["gate"]["passes"], false, "{json}");
    assert!(json["gate"]["blocking"].as_array().unwrap().iter().any(|f| f["rule"] == "broken-link"), "{json}");
    assert!(!dir.path().join("01_Projects/other.md").exists(), "a review writes nothing");
}

#[test]
fn an_add_beyond_the_worklist_capacity_is_worklist_full_and_loses_nothing() {
    let (dir, vault) = vault("-- .paravault/policy.yaml --\nlimits:\n  note_bytes_max: 4096\n");
    let worklist = dir.path().join(WORKLIST);
    let mut added = Vec::new();
    let full = loop {
        let envelope = goals::run(
            &vault,
            GoalRequest::Add(AddInput {
                title: format!("Goal number {}", added.len()),
                description: Some("A short description of what done means.".into()),
                group: None,
                depends_on: None,
                links: None,
            }),
        );
        if !envelope.ok {
            break envelope.json();
        }
        added.push(envelope.json()["result"]["goal"]["id"].as_str().unwrap().to_string());
        assert!(added.len() < 100, "4 KiB cannot hold 100 goals");
    };
    assert!(added.len() >= 5, "the worklist held {} goals before it was full", added.len());
    assert_eq!(full["error"]["code"], "WORKLIST_FULL", "{full}");
    assert_eq!(full["error"]["details"]["goals"], added.len());
    assert_eq!(full["error"]["details"]["noteBytesMax"], 4096);
    assert!(full["error"]["details"]["bytes"].as_u64().unwrap() > 4096);
    assert!(full["error"]["message"].as_str().unwrap().contains("nothing was written"), "{full}");
    let kept = std::fs::read(&worklist).unwrap();
    assert!(kept.len() <= 4096);
    // A plan that does not fit adds nothing either, and every earlier goal is still there.
    let plan = json!([{"title": "Plan entry a"}, {"title": "Plan entry b"}]);
    let refused = goals::run(&vault, GoalRequest::ApplyPlan(goals::ApplyPlanInput { plan, dry_run: None }));
    assert_eq!(refused.json()["error"]["code"], "WORKLIST_FULL", "{}", refused.json());
    assert_eq!(std::fs::read(&worklist).unwrap(), kept, "a refused add changed the worklist");
    let listed = goals::run(&vault, GoalRequest::List).json();
    let ids: Vec<&str> = listed["result"]["goals"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap()).collect();
    assert_eq!(ids, added.iter().map(String::as_str).collect::<Vec<_>>());
    // Room made by a deletion is usable again.
    assert_eq!(lifecycle(&vault, Lifecycle::Delete, &added[0])["ok"], true);
    assert!(
        goals::run(
            &vault,
            GoalRequest::Add(AddInput { title: "Fits again".into(), description: None, group: None, depends_on: None, links: None })
        )
        .ok
    );
}
