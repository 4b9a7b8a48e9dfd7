//! Human approval (src/approvals): a `human` rule turns an agent's approved=true into
//! human_approval_required, a person's decision is an immutable record made with their approver
//! secret, receipts name the approver, rejections bind, stale approvals are refused, concurrent
//! decisions leave exactly one, and no MCP call can create a decision.

use std::collections::BTreeMap;
use std::path::Path;

use paravault::Vault;
use paravault::approvals::{ApprovalChannel, Decision, DecisionRequest, ProposalState, secrets};
use paravault::error::Error;
use paravault::maintenance::archive::ArchiveRequest;
use paravault::store::layout;
use serde_json::Value;

use crate::support::paravault_with_input;
use crate::support::{note, options, paravault, vault};

const SECRET: &str = "correct horse battery staple";
const HUMAN_PROJECTS: &str = "-- .paravault/policy.yaml --\napprovals:\n  rules:\n    - { operations: [apply, archive], paths: [\"01_Projects/**\"], approver: human }\n";

fn approvers() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    secrets::add_approver(dir.path(), "alice", SECRET).unwrap();
    dir
}

fn request(id: &str, decision: Decision, secret: &str) -> DecisionRequest {
    DecisionRequest {
        proposal_id: id.into(),
        decision,
        approver: "alice".into(),
        secret: secret.into(),
        channel: ApprovalChannel::Cli,
        comment: "looks right".into(),
    }
}

fn as_map(proposal: &paravault::write::operations::Proposal) -> BTreeMap<String, Value> {
    serde_json::from_value(serde_json::to_value(proposal).unwrap()).unwrap()
}

fn propose(vault: &Vault, path: &str, body: &str) -> paravault::write::operations::Proposal {
    vault.propose_memory_change(path, &note("Project", "Plan", body), None, None).unwrap()
}

fn decision_file(root: &Path, id: &str) -> std::path::PathBuf {
    layout::join(root, &format!("{}/{id}.json", layout::APPROVAL_DECISIONS_DIR))
}

#[test]
fn under_a_human_rule_approved_true_waits_for_a_person_and_the_receipt_names_them() {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let config = approvers();
    let proposal = propose(&vault, "01_Projects/plan.md", "v1\n");
    let error = vault.apply_memory_change(&as_map(&proposal), true).unwrap_err();
    match &error {
        Error::HumanApprovalRequired { proposal_id, operation } => {
            assert_eq!(proposal_id, &proposal.proposal_id);
            assert_eq!(*operation, "apply_memory_change");
        }
        other => panic!("expected human_approval_required, got {other:?}"),
    }
    assert_eq!(error.code(), "human_approval_required");
    assert!(!dir.path().join("01_Projects/plan.md").exists(), "nothing is written without a person");
    assert_eq!(vault.pending_approvals().unwrap(), 1);
    assert_eq!(vault.doctor().unwrap().vault.pending_approvals, Some(1));
    assert_eq!(vault.server_info().unwrap().vault.pending_approvals, Some(1));
    assert_eq!(vault.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Pending);
    // A wrong secret decides nothing.
    let refused = vault.decide_with_approvers(config.path(), &request(&proposal.proposal_id, Decision::Approved, "guess")).unwrap_err();
    assert_eq!(refused.code(), "approver_refused");
    assert!(!decision_file(dir.path(), &proposal.proposal_id).exists());
    let record = vault.decide_with_approvers(config.path(), &request(&proposal.proposal_id, Decision::Approved, SECRET)).unwrap();
    assert_eq!((record.approver.as_str(), record.channel), ("alice", ApprovalChannel::Cli));
    assert_eq!(vault.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Approved);
    assert_eq!(vault.pending_approvals().unwrap(), 0);
    // The caller's own approval is still needed to run it.
    assert_eq!(vault.apply_memory_change(&as_map(&proposal), false).unwrap_err().code(), "approval_required");
    let receipt = vault.apply_memory_change(&as_map(&proposal), true).unwrap().to_value();
    assert_eq!(receipt["status"], "ok");
    assert_eq!(receipt["approval"]["approver"], "alice", "{receipt}");
    assert_eq!(receipt["approval"]["channel"], "cli");
    assert_eq!(receipt["approval"]["decision_sha256"].as_str().unwrap().len(), 64);
    assert!(std::fs::read_to_string(dir.path().join("01_Projects/plan.md")).unwrap().contains("v1"));
    assert_eq!(vault.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Applied);
    // A replay returns the original receipt; the chain (which hashes the approval) verifies.
    assert_eq!(vault.apply_memory_change(&as_map(&proposal), true).unwrap().to_value(), receipt);
    assert!(vault.verify_history().unwrap().ok);
    let history = vault.read_memory_history(10, 0).unwrap();
    assert!(history.iter().any(|r| r["approval"]["approver"] == "alice"), "{history:?}");
}

#[test]
fn paths_outside_the_human_rule_keep_the_callers_approval() {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let proposal = propose(&vault, "03_Resources/ref.md", "free\n");
    let receipt = vault.apply_memory_change(&as_map(&proposal), true).unwrap().to_value();
    assert!(receipt.get("approval").is_none(), "{receipt}");
    assert!(dir.path().join("03_Resources/ref.md").exists());
    assert_eq!(vault.pending_approvals().unwrap(), 0, "a caller-approved proposal waits for no one");
}

#[test]
fn a_rejection_binds_every_later_apply_and_records_are_immutable() {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let config = approvers();
    let proposal = propose(&vault, "01_Projects/plan.md", "v1\n");
    let mut reject = request(&proposal.proposal_id, Decision::Rejected, SECRET);
    reject.comment = "not this quarter".into();
    vault.decide_with_approvers(config.path(), &reject).unwrap();
    let record_bytes = std::fs::read(decision_file(dir.path(), &proposal.proposal_id)).unwrap();
    let error = vault.apply_memory_change(&as_map(&proposal), true).unwrap_err();
    assert_eq!(error.code(), "proposal_rejected");
    assert!(error.to_string().contains("alice") && error.to_string().contains("not this quarter"), "{error}");
    assert!(!dir.path().join("01_Projects/plan.md").exists());
    assert_eq!(vault.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Rejected);
    // A second decision, either way, is refused and the record keeps its bytes.
    for decision in [Decision::Approved, Decision::Rejected] {
        let again = vault.decide_with_approvers(config.path(), &request(&proposal.proposal_id, decision, SECRET)).unwrap_err();
        assert!(matches!(again, Error::AlreadyDecided { decision: "rejected", .. }), "{again:?}");
    }
    assert_eq!(std::fs::read(decision_file(dir.path(), &proposal.proposal_id)).unwrap(), record_bytes);
    // A person's rejection binds even where the caller may approve (a Resource path).
    let free = propose(&vault, "03_Resources/ref.md", "x\n");
    vault.decide_with_approvers(config.path(), &request(&free.proposal_id, Decision::Rejected, SECRET)).unwrap();
    assert_eq!(vault.apply_memory_change(&as_map(&free), true).unwrap_err().code(), "proposal_rejected");
}

#[test]
fn an_approval_goes_stale_when_the_note_or_the_stored_proposal_changes() {
    let (dir, vault) = vault(&format!("{HUMAN_PROJECTS}-- 01_Projects/plan.md --\n{}", note("Project", "Plan", "v0\n")));
    let config = approvers();
    let proposal = propose(&vault, "01_Projects/plan.md", "v1\n");
    vault.decide_with_approvers(config.path(), &request(&proposal.proposal_id, Decision::Approved, SECRET)).unwrap();
    // Someone edits the note after the approval: the approval no longer covers what would change.
    std::fs::write(dir.path().join("01_Projects/plan.md"), note("Project", "Plan", "edited by hand\n")).unwrap();
    let error = vault.apply_memory_change(&as_map(&proposal), true).unwrap_err();
    assert_eq!(error.code(), "approval_stale", "{error}");
    assert!(std::fs::read_to_string(dir.path().join("01_Projects/plan.md")).unwrap().contains("edited by hand"), "the edit is kept");
    assert_eq!(vault.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Stale);
    // Approving a proposal that is already stale is refused too.
    let stale = propose(&vault, "01_Projects/plan.md", "v2\n");
    std::fs::write(dir.path().join("01_Projects/plan.md"), note("Project", "Plan", "edited again\n")).unwrap();
    let refused = vault.decide_with_approvers(config.path(), &request(&stale.proposal_id, Decision::Approved, SECRET)).unwrap_err();
    assert_eq!(refused.code(), "approval_stale");
    assert!(!decision_file(dir.path(), &stale.proposal_id).exists());
}

fn expired(title: &str) -> String {
    format!("---\ntype: Project\ntitle: {title}\ndescription: d\nexpiry: 2026-02-01\ntimestamp: 2026-01-01T00:00:00Z\n---\nbody\n")
}

#[test]
fn a_live_archive_under_a_human_rule_is_held_as_a_batch_and_runs_once_approved() {
    let (dir, vault) = vault(&format!("{HUMAN_PROJECTS}-- 01_Projects/old.md --\n{}", expired("Old")));
    let config = approvers();
    let live = ArchiveRequest { dry_run: false, approved: true };
    let id = match vault.archive_notes(&live).unwrap_err() {
        Error::HumanApprovalRequired { proposal_id, operation } => {
            assert_eq!(operation, "archive_notes");
            proposal_id
        }
        other => panic!("expected human_approval_required, got {other:?}"),
    };
    assert!(dir.path().join("01_Projects/old.md").exists(), "nothing moves without a person");
    // The same run again finds the same held proposal.
    assert!(matches!(vault.archive_notes(&live).unwrap_err(), Error::HumanApprovalRequired { proposal_id, .. } if proposal_id == id));
    let status = vault.proposal_status(&id).unwrap();
    assert_eq!(status.state, ProposalState::Pending);
    assert!(status.paths.contains(&"04_Archive/01_Projects/old.md".to_string()), "{:?}", status.paths);
    assert_eq!(vault.pending_approvals().unwrap(), 1);
    vault.decide_with_approvers(config.path(), &request(&id, Decision::Approved, SECRET)).unwrap();
    let done = vault.archive_notes(&live).unwrap();
    let receipt = done.receipt.unwrap();
    assert_eq!(receipt["approval"]["approver"], "alice", "{receipt}");
    assert_eq!(receipt["proposal_id"], id.as_str());
    assert!(dir.path().join("04_Archive/01_Projects/old.md").exists() && !dir.path().join("01_Projects/old.md").exists());
    assert_eq!(vault.proposal_status(&id).unwrap().state, ProposalState::Applied);
}

#[test]
fn a_batch_proposal_edited_after_its_approval_is_stale_and_writes_nothing() {
    let (dir, vault) = vault(&format!("{HUMAN_PROJECTS}-- 01_Projects/old.md --\n{}", expired("Old")));
    let config = approvers();
    let live = ArchiveRequest { dry_run: false, approved: true };
    let Error::HumanApprovalRequired { proposal_id: id, .. } = vault.archive_notes(&live).unwrap_err() else { panic!() };
    vault.decide_with_approvers(config.path(), &request(&id, Decision::Approved, SECRET)).unwrap();
    let batch = layout::join(dir.path(), &format!("{}/{id}.json", layout::BATCH_PROPOSALS_DIR));
    let text = std::fs::read_to_string(&batch).unwrap();
    std::fs::write(&batch, text.replace("status: archived", "status: archived\\nowner: mallory")).unwrap();
    assert_eq!(vault.archive_notes(&live).unwrap_err().code(), "approval_stale");
    assert!(dir.path().join("01_Projects/old.md").exists() && !dir.path().join("04_Archive/01_Projects/old.md").exists());
}

#[test]
fn concurrent_decisions_leave_exactly_one_record_and_apply_follows_it() {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let config = approvers();
    let proposal = propose(&vault, "01_Projects/plan.md", "v1\n");
    let outcomes: Vec<Result<Decision, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let decision = if i % 2 == 0 { Decision::Approved } else { Decision::Rejected };
                let (vault, config, id) = (&vault, config.path(), proposal.proposal_id.clone());
                s.spawn(move || {
                    vault
                        .decide_with_approvers(config, &request(&id, decision, SECRET))
                        .map(|r| r.decision)
                        .map_err(|e| e.code().to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<Decision> = outcomes.iter().filter_map(|o| o.as_ref().ok().copied()).collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert!(outcomes.iter().filter_map(|o| o.as_ref().err()).all(|code| code == "already_decided"), "{outcomes:?}");
    let stored: Value = serde_json::from_slice(&std::fs::read(decision_file(dir.path(), &proposal.proposal_id)).unwrap()).unwrap();
    let applied = vault.apply_memory_change(&as_map(&proposal), true);
    match winners[0] {
        Decision::Approved => {
            assert_eq!(stored["decision"], "approved");
            assert_eq!(applied.unwrap().to_value()["approval"]["approver"], "alice");
        }
        Decision::Rejected => {
            assert_eq!(stored["decision"], "rejected");
            assert_eq!(applied.unwrap_err().code(), "proposal_rejected");
        }
    }
}

#[test]
fn an_apply_racing_the_approval_never_writes_before_the_record_exists() {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let config = approvers();
    let proposal = propose(&vault, "01_Projects/plan.md", "v1\n");
    let record = decision_file(dir.path(), &proposal.proposal_id);
    let note_path = dir.path().join("01_Projects/plan.md");
    let receipt = std::thread::scope(|s| {
        let applier = s.spawn(|| {
            for _ in 0..2000 {
                match vault.apply_memory_change(&as_map(&proposal), true) {
                    Ok(receipt) => return receipt,
                    Err(e) => {
                        assert_eq!(e.code(), "human_approval_required", "{e}");
                        assert!(!note_path.exists(), "the note is never written before a decision");
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            panic!("the apply never saw the approval");
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        vault.decide_with_approvers(config.path(), &request(&proposal.proposal_id, Decision::Approved, SECRET)).unwrap();
        applier.join().unwrap()
    });
    assert!(record.exists());
    assert_eq!(receipt.to_value()["approval"]["approver"], "alice");
}

#[test]
fn the_cli_adds_approvers_and_decides_with_the_secret_on_standard_input() {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let config = tempfile::tempdir().unwrap();
    let added = paravault_with_input(dir.path(), config.path(), &["approver", "add", "alice"], &format!("{SECRET}\n"));
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let stored = std::fs::read_to_string(config.path().join(secrets::APPROVERS_FILE)).unwrap();
    assert!(stored.contains("$argon2id$") && !stored.contains(SECRET));
    let proposal = propose(&vault, "01_Projects/plan.md", "v1\n");
    let pending = paravault(dir.path(), &["--json", "approvals", "--pending"]);
    let listed: Value = serde_json::from_slice(&pending.stdout).unwrap();
    assert_eq!(listed[0]["proposal_id"], proposal.proposal_id.as_str(), "{listed}");
    let wrong = paravault_with_input(dir.path(), config.path(), &["approve", &proposal.proposal_id, "--approver", "alice"], "nope\n");
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("approver_refused")
            || String::from_utf8_lossy(&wrong.stdout).contains("approver_refused")
    );
    assert!(!decision_file(dir.path(), &proposal.proposal_id).exists());
    let approved = paravault_with_input(
        dir.path(),
        config.path(),
        &["--json", "approve", &proposal.proposal_id, "--approver", "alice", "--comment", "ship it"],
        &format!("{SECRET}\n"),
    );
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    let record: Value = serde_json::from_slice(&approved.stdout).unwrap();
    assert_eq!(
        (record["approver"].as_str(), record["channel"].as_str(), record["comment"].as_str()),
        (Some("alice"), Some("cli"), Some("ship it"))
    );
    let reopened = Vault::open(dir.path(), options()).unwrap();
    let receipt = reopened.apply_memory_change(&as_map(&proposal), true).unwrap().to_value();
    assert_eq!(receipt["approval"]["approver"], "alice");
    let doctor: Value = serde_json::from_slice(&paravault(dir.path(), &["--json", "doctor"]).stdout).unwrap();
    assert_eq!(doctor["vault"]["pending_approvals"], 0);
}

/// A minimal MCP client over the binary's stdio.
struct Agent {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Agent {
    fn start(vault: &Path, config: &Path) -> Agent {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
            .arg("--vault")
            .arg(vault)
            .arg("mcp")
            .env("PARAVAULT_CONFIG_DIR", config)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut agent = Agent { child, stdin, stdout };
        agent.send(&serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "approvals", "version": "1"}}}));
        assert!(agent.receive()["result"].is_object());
        agent.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        agent
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn receive(&mut self) -> Value {
        use std::io::BufRead;
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        self.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}));
        let response = self.receive();
        assert_eq!(response["id"], id, "{response}");
        response["result"].clone()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A vault whose projects need a person's approval, an agent on it over MCP (its approvers file
/// beside it), and the agent's proposal to create `01_Projects/plan.md` (its `structuredContent`).
fn an_agent_proposing_a_plan() -> (tempfile::TempDir, Vault, tempfile::TempDir, Agent, Value) {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let config = approvers();
    let mut agent = Agent::start(dir.path(), config.path());
    let proposal = agent.call(
        1,
        "propose_memory_change",
        serde_json::json!({"path": "01_Projects/plan.md", "content": note("Project", "Plan", "v1\n")}),
    );
    (dir, vault, config, agent, proposal["structuredContent"].clone())
}

#[test]
fn an_agent_over_mcp_gets_human_approval_required_and_cannot_approve_itself() {
    let (dir, _vault, config, mut agent, proposal) = an_agent_proposing_a_plan();
    let id = proposal["proposal_id"].as_str().unwrap().to_string();
    let proposal_strings: BTreeMap<String, String> =
        proposal.as_object().unwrap().iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect();
    for attempt in 0..3 {
        let result = agent.call(2 + attempt, "apply_memory_change", serde_json::json!({"proposal": proposal_strings, "approved": true}));
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(result["structuredContent"]["error"]["code"], "human_approval_required", "{result}");
        assert!(result["structuredContent"]["error"]["message"].as_str().unwrap().contains(&id));
        assert_eq!(result["structuredContent"]["error"]["details"]["proposal_id"], id.as_str(), "{result}");
    }
    assert!(!dir.path().join("01_Projects/plan.md").exists());
    assert!(!decision_file(dir.path(), &id).exists(), "no MCP call creates a decision");
    let status = agent.call(8, "get_proposal_status", serde_json::json!({"proposal_id": id}));
    assert_eq!(status["structuredContent"]["state"], "pending", "{status}");
    assert_eq!(status["structuredContent"]["approver"], "human");
    let unknown = agent.call(7, "get_proposal_status", serde_json::json!({"proposal_id": "0".repeat(64)}));
    assert_eq!(unknown["structuredContent"]["error"]["code"], "proposal_not_found", "{unknown}");
    let info = agent.call(9, "get_server_info", serde_json::json!({}));
    assert_eq!(info["structuredContent"]["vault"]["pending_approvals"], 1, "{info}");
    // A person approves; the agent's next identical call succeeds and its receipt names them.
    let reopened = Vault::open(dir.path(), options()).unwrap();
    reopened.decide_with_approvers(config.path(), &request(&id, Decision::Approved, SECRET)).unwrap();
    let applied = agent.call(10, "apply_memory_change", serde_json::json!({"proposal": proposal_strings, "approved": true}));
    assert_eq!(applied["structuredContent"]["approval"]["approver"], "alice", "{applied}");
    let status = agent.call(11, "get_proposal_status", serde_json::json!({"proposal_id": id}));
    assert_eq!(status["structuredContent"]["state"], "applied", "{status}");
    assert_eq!(status["structuredContent"]["decision"]["approver"], "alice");
}

/// `get_server_info` runs without observing the disk (`ToolParams::OBSERVES_DISK`: the
/// watcher's queue is not read): the one part of its answer that depends on the notes, the
/// pending approvals, reads them from disk during the call, so a note a person edits between
/// two calls counts at once, and the tools that read notes (after the queue) agree with it.
#[test]
fn get_server_info_sees_an_outside_edit_without_observing_the_disk() {
    let (dir, _vault, _config, mut agent, proposal) = an_agent_proposing_a_plan();
    let id = proposal["proposal_id"].as_str().unwrap().to_string();
    let info = agent.call(2, "get_server_info", serde_json::json!({}));
    assert_eq!(info["structuredContent"]["vault"]["pending_approvals"], 1, "{info}");
    // A person writes the note the proposal would create: the proposal is stale from now on.
    std::fs::write(dir.path().join("01_Projects/plan.md"), note("Project", "Plan", "written by hand\n")).unwrap();
    let info = agent.call(3, "get_server_info", serde_json::json!({}));
    assert_eq!(info["structuredContent"]["vault"]["pending_approvals"], 0, "{info}");
    let status = agent.call(4, "get_proposal_status", serde_json::json!({"proposal_id": id}));
    assert_eq!(status["structuredContent"]["state"], "stale", "{status}");
    let read = agent.call(5, "read_note", serde_json::json!({"path": "01_Projects/plan.md"}));
    assert!(read["structuredContent"].to_string().contains("written by hand"), "{read}");
    // The person removes it again: the proposal is pending once more.
    std::fs::remove_file(dir.path().join("01_Projects/plan.md")).unwrap();
    let info = agent.call(6, "get_server_info", serde_json::json!({}));
    assert_eq!(info["structuredContent"]["vault"]["pending_approvals"], 1, "{info}");
}

#[test]
fn an_unreadable_stored_proposal_does_not_hide_the_others_and_is_never_decided() {
    let (dir, vault) = vault(HUMAN_PROJECTS);
    let config = approvers();
    let proposal = propose(&vault, "01_Projects/plan.md", "v1\n");
    let garbage = "f".repeat(64);
    std::fs::write(layout::join(dir.path(), &format!("{}/{garbage}.json", layout::PROPOSALS_DIR)), b"{not json").unwrap();
    assert_eq!(vault.pending_approvals().unwrap(), 1);
    assert_eq!(vault.proposals().unwrap().len(), 1);
    assert_eq!(vault.doctor().unwrap().vault.pending_approvals, Some(1));
    let refused = vault.decide_with_approvers(config.path(), &request(&garbage, Decision::Approved, SECRET)).unwrap_err();
    assert_eq!(refused.code(), "proposal_invalid");
    assert!(!decision_file(dir.path(), &garbage).exists());
    // Ids are checked before anything is read.
    let bad_id = vault.decide_with_approvers(config.path(), &request("../../etc/passwd", Decision::Approved, SECRET)).unwrap_err();
    assert_eq!(bad_id.code(), "invalid_argument");
    assert_eq!(vault.proposal_status(&proposal.proposal_id).unwrap().state, ProposalState::Pending);
}
