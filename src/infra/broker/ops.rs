//! The INFRA-1 broker's five operations over git, each answered with a
//! `power.infra-receipt.v1` or a `power.infra-block.v1`: `status` (where the target's replica
//! stands), `probe` (does its remote answer), `rsync-dry-run` (what a replicate would move:
//! fetched and compared, nothing integrated or pushed), `replicate` (fetch → integrate through
//! the lint gate → push, keyed, approval-gated, one at a time) and `verify` (does the remote
//! still hold a run's head). Everything goes through the engine's replication API; answers
//! carry identifiers, counts and commit ids only — never a URL, a path, git's own words or a
//! command line.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Value, json};

use super::config::{ApprovalPolicy, BrokerConfig, DryRunPolicy, Refusal, Resolved};
use super::records::{KeyState, Records};
use crate::approvals::ActionApproval;
use crate::error::Error;
use crate::handoff::journal::digest;
use crate::infra::{BLOCK_SCHEMA, InfraOperation, InfraRequest, RECEIPT_SCHEMA, approval_subject};
use crate::replicate::ReplicaHeads;
use crate::vault::Vault;

/// A receipt (`Ok`) or a block (`Err`), as JSON objects.
pub(crate) type Answer = std::result::Result<Value, Value>;

/// A block with its reason code and a detail written here (never an error's own text).
pub(crate) fn block(code: &str, detail: &str) -> Value {
    json!({"schema": BLOCK_SCHEMA, "reason_code": code, "detail": detail, "source": "broker"})
}

fn block_with(code: &str, detail: &str, extra: Value) -> Value {
    let mut out = block(code, detail);
    if let (Some(out), Value::Object(extra)) = (out.as_object_mut(), extra) {
        out.extend(extra);
    }
    out
}

/// The block an engine error becomes: its stable code, and words of the broker's own.
fn failed(error: &Error) -> Value {
    let code = error.code();
    let (reason, detail) = match error {
        Error::NotConfigured { .. } => {
            ("CAPABILITY_DISABLED", "this vault has no remote yet: its owner runs `paravault remote add`".to_string())
        }
        Error::GitUnavailable { .. } => ("PROCESS_UNAVAILABLE", "git cannot be run on the broker's host".to_string()),
        Error::Replication { step: "fetch" | "probe", .. } => ("NETWORK_UNAVAILABLE", "the target's remote did not answer".to_string()),
        Error::Replication { step, .. } => ("OPERATION_FAILED", format!("replication failed at its {step} step")),
        Error::RemoteRewritten { .. } => (
            "OPERATION_FAILED",
            "the target's branch no longer holds what this replica saw there (its history was rewritten); a person looks".to_string(),
        ),
        Error::PushRefused { .. } => ("OPERATION_FAILED", "the target's gate refused the push".to_string()),
        _ => ("OPERATION_FAILED", format!("the operation failed ({code})")),
    };
    tracing::warn!(error = %error, reason, "a broker operation failed");
    block_with(reason, &detail, json!({"error_code": code}))
}

fn refusal(refused: Refusal) -> Value {
    match refused {
        Refusal::TargetNotAllowed => block("TARGET_NOT_ALLOWED", "no such target is configured for this broker"),
        Refusal::PrincipalDenied => block("PRINCIPAL_DENIED", "this caller is not allowed to ask for this target"),
        Refusal::ProfileNotFound => block("PROFILE_NOT_FOUND", "the target has no such profile"),
    }
}

fn is_run_id(value: &str) -> bool {
    value.strip_prefix("run_").is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The broker of one vault: its configuration file, its records, and what runs now.
pub(crate) struct Broker {
    /// The handle the broker started with; each request works on a fresh one.
    vault: Vault,
    config_path: PathBuf,
    records: Records,
    /// Idempotency keys whose replicate runs in this process now.
    running: Mutex<BTreeSet<String>>,
    /// One replicate at a time.
    replicating: Mutex<()>,
}

impl Broker {
    pub(crate) fn new(vault: Vault, config_path: PathBuf) -> Broker {
        let records = Records::new(vault.root(), vault.clock());
        Broker { vault, config_path, records, running: Mutex::new(BTreeSet::new()), replicating: Mutex::new(()) }
    }

    /// Answers one validated request from the caller `uid`.
    pub(crate) fn handle(&self, request: &InfraRequest, uid: u32) -> Answer {
        let started = Instant::now();
        let config = BrokerConfig::load(&self.config_path).map_err(|reason| {
            tracing::warn!(%reason, "the broker's configuration does not load");
            block("POLICY_INVALID", "the broker's configuration does not load; its owner sees why in the broker's log")
        })?;
        let principal = format!("uid:{uid}");
        if !config.knows_principal(&principal) {
            return Err(block("PRINCIPAL_DENIED", "this caller is not allowed to ask this broker"));
        }
        if request.operation == InfraOperation::Verify {
            return self.verify(&config, &principal, request, started);
        }
        let target = request.target.as_deref().ok_or_else(|| block("REQUEST_INPUT_MISSING", "name a target"))?;
        let resolved = config.resolve(&principal, target, request.profile.as_deref()).map_err(refusal)?;
        let (vault, heads) = self.open(&resolved)?;
        match request.operation {
            InfraOperation::Status => status(&vault, request, started),
            InfraOperation::Probe => probe(&vault, request, started),
            InfraOperation::Replicate if request.dry_run != Some(true) => {
                self.replicate(&vault, &heads, target, &resolved, request, started)
            }
            _ => self.dry_run(&vault, target, request, started),
        }
    }

    /// A fresh handle on the vault, once the target's remote is the one it replicates to.
    fn open(&self, resolved: &Resolved) -> std::result::Result<(Vault, ReplicaHeads), Value> {
        let vault = self.vault.reopened().map_err(|e| failed(&e))?;
        let heads = vault.replica_heads().map_err(|e| failed(&e))?;
        if heads.remote != resolved.remote {
            return Err(block(
                "POLICY_INVALID",
                &format!("the target names remote '{}', but this vault replicates to its remote '{}'", resolved.remote, heads.remote),
            ));
        }
        Ok((vault, heads))
    }

    fn dry_run(&self, vault: &Vault, target: &str, request: &InfraRequest, started: Instant) -> Answer {
        let plan = vault.replicate_plan().map_err(|e| failed(&e))?;
        self.records
            .save_dry_run(target, request.idempotency_key.as_deref(), plan.head.as_deref(), plan.remote_head.as_deref())
            .map_err(|e| failed(&e))?;
        Ok(receipt(
            request,
            started,
            json!({
                "dry_run": true,
                "exit_category": "ok",
                "counts": {
                    "commits_to_push": plan.commits_to_push,
                    "commits_to_pull": plan.commits_to_pull,
                    "paths_to_push": plan.paths_to_push,
                    "paths_to_pull": plan.paths_to_pull,
                    "conflicts_expected": plan.conflicts_expected,
                    "uncommitted": plan.uncommitted,
                },
                "digests": {"head": plan.head, "remote_head": plan.remote_head},
            }),
        ))
    }

    /// What an earlier request with this key gets now (`None`: the key is new).
    fn replay(&self, key: &str, subject_digest: &str) -> std::result::Result<Option<Answer>, Value> {
        let Some(record) = self.records.key(key).map_err(|e| failed(&e))? else { return Ok(None) };
        if record.subject_digest != subject_digest {
            return Ok(Some(Err(block("IDEMPOTENCY_CONFLICT", "this idempotency_key was used for another request"))));
        }
        Ok(Some(match (record.state, record.answer) {
            (KeyState::Ended, Some(answer)) => match (answer.get("receipt"), answer.get("block")) {
                (Some(receipt), _) => Ok(receipt.clone()),
                (None, Some(block)) => Err(block.clone()),
                _ => Err(block("UNKNOWN_COMPLETION", "the record of this idempotency_key is incomplete")),
            },
            _ if self.running.lock().unwrap_or_else(|p| p.into_inner()).contains(key) => {
                Err(block("OPERATION_IN_FLIGHT", "the replicate with this idempotency_key is running"))
            }
            _ => Err(block(
                "UNKNOWN_COMPLETION",
                "a broker stopped while the replicate with this idempotency_key ran; status tells where the replica stands",
            )),
        }))
    }

    fn replicate(
        &self,
        vault: &Vault,
        heads: &ReplicaHeads,
        target: &str,
        resolved: &Resolved,
        request: &InfraRequest,
        started: Instant,
    ) -> Answer {
        let key = request.idempotency_key.as_deref().ok_or_else(|| block("REQUEST_INPUT_MISSING", "replicate needs an idempotency_key"))?;
        let subject = approval_subject(request);
        let subject_digest = digest(&subject);
        if let Some(answer) = self.replay(key, &subject_digest)? {
            return answer;
        }
        if resolved.dry_run_policy == DryRunPolicy::Required {
            self.check_dry_run(vault, target, key)?;
        }
        let mut approval = json!({"policy": "standing"});
        let mut claim: Option<&str> = None;
        if resolved.approval == ApprovalPolicy::Explicit || request.approval_ref.is_some() {
            if let Some(used) = request.approval_ref.as_deref()
                && self.records.is_claimed(used).map_err(|e| failed(&e))?
            {
                return Err(block("APPROVAL_REPLAY", "this approval was used by another replicate; a person approves each one"));
            }
            let (id, state) = crate::approvals::action_approval(vault, &subject).map_err(|e| {
                tracing::warn!(error = %e, "the approval of a replicate cannot be read");
                block_with("APPROVAL_REQUIRED", "the approval of this request cannot be used", json!({"error_code": e.code()}))
            })?;
            let needed = |detail: &str| block_with("APPROVAL_REQUIRED", detail, json!({"proposal_id": id}));
            match (request.approval_ref.as_deref(), state) {
                (None, _) => {
                    return Err(needed(
                        "a person approves this replicate first (`paravault approve <proposal_id>`); then send it again with approval_ref = proposal_id",
                    ));
                }
                (Some(given), _) if given != id => return Err(needed("approval_ref does not name the approval of this request")),
                (Some(_), ActionApproval::Pending) => return Err(needed("no person has approved this request yet")),
                (Some(_), ActionApproval::Rejected { approver }) => return Err(needed(&format!("{approver} rejected this request"))),
                (Some(given), ActionApproval::Approved(stamp)) => {
                    approval = json!({
                        "policy": "explicit",
                        "approval_ref": given,
                        "approver": stamp["approver"],
                        "channel": stamp["channel"],
                        "decided_at": stamp["decided_at"],
                        "decision_sha256": stamp["decision_sha256"],
                    });
                    claim = Some(given);
                }
            }
        }
        let in_flight = || block("OPERATION_IN_FLIGHT", "another replicate of this vault is running");
        let Ok(_one_at_a_time) = self.replicating.try_lock() else { return Err(in_flight()) };
        if !self.records.claim_key(key, &subject_digest).map_err(|e| failed(&e))? {
            return self.replay(key, &subject_digest)?.unwrap_or_else(|| Err(in_flight()));
        }
        self.running.lock().unwrap_or_else(|p| p.into_inner()).insert(key.to_string());
        let answer = self.run_replicate(vault, heads, target, key, claim, approval, request, started);
        self.running.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
        answer
    }

    /// The dry-run admission: a dry run of this target (for this key, when it named one), and
    /// the target's remote where that dry run saw it.
    fn check_dry_run(&self, vault: &Vault, target: &str, key: &str) -> std::result::Result<(), Value> {
        let Some(dry) = self.records.dry_run(target).map_err(|e| failed(&e))? else {
            return Err(block("DRY_RUN_REQUIRED", "this target needs an rsync-dry-run before a replicate"));
        };
        if dry.idempotency_key.as_deref().is_some_and(|k| k != key) {
            return Err(block("DRY_RUN_REQUIRED", "the last dry run of this target was for another idempotency_key"));
        }
        let probe = vault.probe_remote().map_err(|e| failed(&e))?;
        if !probe.reachable {
            return Err(block("NETWORK_UNAVAILABLE", "the target's remote did not answer"));
        }
        if probe.remote_head != dry.remote_head {
            return Err(block("DRY_RUN_REQUIRED", "the target's remote moved since the last dry run; run rsync-dry-run again"));
        }
        Ok(())
    }

    /// Runs the claimed replicate and records its answer under its key.
    #[allow(clippy::too_many_arguments)]
    fn run_replicate(
        &self,
        vault: &Vault,
        heads: &ReplicaHeads,
        target: &str,
        key: &str,
        claim: Option<&str>,
        approval: Value,
        request: &InfraRequest,
        started: Instant,
    ) -> Answer {
        let give_back = |approval_too: bool| {
            if approval_too && let Some(used) = claim {
                let _ = self.records.release_approval(used);
            }
            let _ = self.records.release_key(key);
        };
        if let Some(used) = claim {
            match self.records.claim_approval(used, key) {
                Ok(true) => {}
                Ok(false) => {
                    give_back(false);
                    return Err(block("APPROVAL_REPLAY", "this approval was used by another replicate; a person approves each one"));
                }
                Err(e) => {
                    give_back(false);
                    return Err(failed(&e));
                }
            }
        }
        let report = match vault.replicate_if_idle() {
            Ok(Some(report)) => report,
            Ok(None) => {
                give_back(true);
                return Err(block("OPERATION_IN_FLIGHT", "a replicate of this vault is running (a person's or another broker's)"));
            }
            Err(error) => {
                let blocked = failed(&error);
                let _ = self.records.end_key(key, json!({"block": blocked}));
                return Err(blocked);
            }
        };
        let answer = (|| -> crate::error::Result<Value> {
            let head = report.head.clone().unwrap_or_default();
            let pulled = match &report.remote_head {
                Some(remote) => vault.commits_between(heads.head.as_deref(), remote)?,
                None => 0,
            };
            let pushed = match (&report.remote_head, report.pushed) {
                (remote, true) if !head.is_empty() => vault.commits_between(remote.as_deref(), &head)?,
                _ => 0,
            };
            let run_id =
                format!("run_{}", digest(&json!({"target": target, "branch": report.branch, "head": head, "idempotency_key": key})));
            let receipt = receipt(
                request,
                started,
                json!({
                    "run_id": run_id,
                    "idempotency_key": key,
                    "exit_category": if report.conflicts_waiting > 0 { "conflicts_waiting" } else { "ok" },
                    "pushed": report.pushed,
                    "in_sync": report.in_sync,
                    "counts": {
                        "commits_pulled": pulled,
                        "commits_pushed": pushed,
                        "commits_made_before": report.committed_before,
                        "notes_changed": report.notes_changed.len(),
                        "files_changed": report.files_changed,
                        "paths_changed": report.notes_changed.len() + report.files_changed,
                        "conflicts": report.conflicts.len(),
                        "conflicts_waiting": report.conflicts_waiting,
                        "attempts": report.attempts,
                    },
                    "digests": {"head_before": heads.head, "remote_head_before": report.remote_head, "head": report.head},
                    "approval": approval,
                }),
            );
            if !head.is_empty() {
                self.records.save_run(&run_id, target, &report.branch, &head, key, &receipt)?;
            }
            self.records.end_key(key, json!({"receipt": receipt}))?;
            Ok(receipt)
        })();
        answer.map_err(|e| failed(&e))
    }

    fn verify(&self, config: &BrokerConfig, principal: &str, request: &InfraRequest, started: Instant) -> Answer {
        let not_found = || block("RUN_NOT_FOUND", "this broker issued no run with this run_id");
        let run_id = request.run_id.as_deref().ok_or_else(|| block("REQUEST_INPUT_MISSING", "verify needs a run_id"))?;
        if !is_run_id(run_id) {
            return Err(not_found());
        }
        let run = self.records.run(run_id).map_err(|e| failed(&e))?.ok_or_else(not_found)?;
        if request.target.as_deref().is_some_and(|t| t != run.target) {
            return Err(not_found());
        }
        let resolved = config.resolve(principal, &run.target, request.profile.as_deref()).map_err(refusal)?;
        let (vault, _) = self.open(&resolved)?;
        let held = vault.remote_holds(&run.head).map_err(|e| failed(&e))?;
        let mut answer = receipt(
            request,
            started,
            json!({
                "run_id": run.run_id,
                "verified": held.holds,
                "exit_category": if held.holds { "ok" } else { "mismatch" },
                "digests": {"head": run.head, "remote_head": held.remote_head},
            }),
        );
        answer["target"] = json!(run.target);
        Ok(answer)
    }
}

fn status(vault: &Vault, request: &InfraRequest, started: Instant) -> Answer {
    let status = vault.replica_status().map_err(|e| failed(&e))?;
    // The last error's code only: its text may name the remote's URL.
    let last_error_code = status.last_error.as_deref().and_then(|e| e.split(':').next()).map(str::to_string);
    Ok(receipt(
        request,
        started,
        json!({
            "exit_category": "ok",
            "remote_reachable": status.remote_reachable,
            "counts": {
                "ahead": status.ahead,
                "behind": status.behind,
                "uncommitted": status.uncommitted,
                "conflicts_waiting": status.conflicts_waiting,
            },
            "digests": {"head": status.head, "remote_head": status.remote_head},
            "last_success_at": status.last_success_at,
            "last_error_code": last_error_code,
        }),
    ))
}

fn probe(vault: &Vault, request: &InfraRequest, started: Instant) -> Answer {
    let probe = vault.probe_remote().map_err(|e| failed(&e))?;
    if !probe.reachable {
        return Err(block("NETWORK_UNAVAILABLE", "the target's remote did not answer"));
    }
    Ok(receipt(
        request,
        started,
        json!({
            "exit_category": "ok",
            "reachable": true,
            "branch_exists": probe.remote_head.is_some(),
            "digests": {"remote_head": probe.remote_head},
        }),
    ))
}

/// A receipt: the operation, target, profile, transport, duration and the task it correlates
/// with, then `body`.
fn receipt(request: &InfraRequest, started: Instant, body: Value) -> Value {
    let mut out = json!({
        "schema": RECEIPT_SCHEMA,
        "operation": request.operation,
        "transport": "git",
        "target": request.target,
        "profile": request.profile,
        "duration_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    if request.task_id.is_some() {
        out["task_id"] = json!(request.task_id);
        out["expected_revision"] = json!(request.expected_revision);
    }
    if let (Some(out), Value::Object(body)) = (out.as_object_mut(), body) {
        out.extend(body);
    }
    out
}
