//! Human approval: who may approve a governed operation (the policy's `approvals:` rules), the
//! immutable decision records a person creates with their approver secret (`paravault approve` /
//! `reject`), multi-note proposals held for a decision, and the gate every governed write
//! passes. No MCP tool reaches `decide`; docs/governance.md states the threat model.

pub mod keys;
pub mod review;
pub mod secrets;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::policy::Approver;
pub use crate::policy::approvals::{Operation, approver_for};
use crate::policy::approvals::{RuledChange, approver_of, governed_operations};
use crate::store::{durable, layout, nofollow};
use crate::vault::resolve_note_path;
use crate::vault::{Channel, Vault};
use crate::write::operations::{CheckedProposal, Proposal, ProposalRecord, check_proposal, proposal_id, validate_note_text};
use crate::write::receipts::{Receipt, ReceiptLog};
use crate::write::{Cleared, Mutation, NoteChange, sha256_hex};

/// The receipt operations of the ctxvault memory tools: a `memory_change` proposal names the
/// one its transaction records (`BatchProposal::receipt_operation`).
pub(crate) const MEMORY_RECEIPT_OPERATIONS: [&str; 8] = [
    "ctxvault.write_episode",
    "ctxvault.confirm_episode",
    "ctxvault.supersede_episode",
    "ctxvault.revise_episode",
    "ctxvault.invalidate_episode",
    "ctxvault.dispute_episodes",
    "ctxvault.write_skill",
    "ctxvault.write_doc",
];

/// A person's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approved,
    Rejected,
}

impl Decision {
    /// The past-tense word records and messages use.
    pub fn name(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
        }
    }
}

/// Where a person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalChannel {
    /// `paravault approve` / `reject` on a terminal.
    Cli,
    /// The web UI (`paravault web`).
    Web,
}

const DECISION_SCHEMA: &str = "paravault.approval.v1";
const BATCH_SCHEMA: &str = "paravault.batch_proposal.v1";
const ACTION_SCHEMA: &str = "paravault.action_proposal.v1";
/// Longest comment a decision keeps.
pub(crate) const COMMENT_CHARS_MAX: usize = 2000;

/// An immutable decision record: created once (no-clobber) and never replaced or removed by
/// the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    pub schema: String,
    pub proposal_id: String,
    /// sha256 of exactly what was decided: the apply proposal's content-addressed id, or the
    /// stored batch proposal's bytes. A proposal whose hash differs later is stale.
    pub proposal_sha256: String,
    pub operation: Operation,
    pub decision: Decision,
    pub approver: String,
    pub channel: ApprovalChannel,
    pub decided_at: String,
    pub comment: String,
    /// The approver's ed25519 signature over this record without this field (issue 49). A
    /// replica, and a vault with an approver-key registry, honour only a decision it verifies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<keys::SignatureBlock>,
}

impl DecisionRecord {
    /// The bytes the signature covers: the record's JSON without `signature`.
    fn signed_bytes(&self) -> Result<Vec<u8>> {
        encode(&DecisionRecord { signature: None, ..self.clone() }, "decision record")
    }
}

/// Whether this vault honours only signed decisions: it has an approver-key registry, or it is
/// a replica (its files travel by git, so a decision file proves nothing by being there).
fn signatures_required(root: &Path, active: Option<&keys::ActiveKeys>) -> bool {
    active.is_some() || std::fs::symlink_metadata(layout::join(root, layout::REPLICA_CONFIG)).is_ok()
}

/// Why a decision record is not honoured here (`None`: it is). A signed record needs the
/// signature to verify with a key the vault's registry holds active for its approver; an
/// unsigned one is honoured only where signatures are not required (a single-machine vault
/// with no registry: the record was written by this machine's engine).
fn unhonoured(root: &Path, record: &DecisionRecord) -> Result<Option<String>> {
    let active = keys::active_keys(root)?;
    let required = signatures_required(root, active.as_ref());
    Ok(match (&record.signature, &active) {
        (None, _) if required => Some("it is not signed, and this vault honours only signed decisions".into()),
        (None, _) | (Some(_), None) if !required => None,
        (Some(block), Some(active)) => {
            if !active.holds(&record.approver, &block.public_key) {
                Some(format!("it is not signed by an active key of '{}' in {}", record.approver, layout::APPROVER_KEYS))
            } else {
                keys::verify_signature(block, &record.signed_bytes()?, "the decision").err().map(|e| e.to_string())
            }
        }
        _ => Some("no approver-key registry to verify it with".into()),
    })
}

/// A multi-note proposal (archive, heal, Markdown fix) held for a person's decision: exactly
/// the changes that are written once it is approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchProposal {
    pub schema: String,
    pub proposal_id: String,
    pub operation: Operation,
    /// The receipt actor of the caller that proposed it (`agent` or `human`).
    pub proposed_by: String,
    pub created_at: String,
    pub changes: Vec<BatchChange>,
    pub create_folders: bool,
    pub log_entry: Option<String>,
    /// The transaction's idempotency key (a `memory_change` names its memory op, from which
    /// the vault's knowledge time is read); absent for the other operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The receipt operation of the transaction (`memory_change`: one of
    /// `MEMORY_RECEIPT_OPERATIONS`); absent for the other operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_operation: Option<String>,
    /// A `replication_conflict`'s origin: both parents and the base (the other side's text is
    /// the change's `content`, this replica's text is the note as it stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<ConflictOrigin>,
}

/// Where a replication conflict came from (docs/replication.md, "Conflicts").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConflictOrigin {
    /// This replica's commit when it integrated.
    pub ours_commit: String,
    /// The remote's commit it integrated.
    pub theirs_commit: String,
    /// Their common ancestor (none for unrelated histories).
    pub base_commit: Option<String>,
    /// The note's text in the base (`None`: it did not exist there).
    pub base_content: Option<String>,
    /// The sha256 of this replica's text at the conflict.
    pub ours_sha256: Option<String>,
    /// Why it did not merge: `overlapping edits`, `edit against removal`, `lint gate`, …
    pub reason: String,
}

impl BatchProposal {
    /// The proposal of `mutation` under `id`, proposed now by `vault`'s caller (no idempotency
    /// key or receipt operation: a `memory_change` sets those).
    fn of(vault: &Vault, proposal_id: String, operation: Operation, mutation: &Mutation) -> Self {
        BatchProposal {
            schema: BATCH_SCHEMA.into(),
            proposal_id,
            operation,
            proposed_by: vault.channel().actor().into(),
            created_at: vault.clock().stamp(chrono::SecondsFormat::Secs),
            changes: mutation
                .notes
                .iter()
                .map(|n| BatchChange {
                    path: n.path.to_string(),
                    expected_sha256: n.expected_sha256.clone(),
                    require_absent: n.require_absent,
                    content: n.content.clone(),
                })
                .collect(),
            create_folders: mutation.create_folders,
            log_entry: mutation.log_entry.clone(),
            idempotency_key: None,
            receipt_operation: None,
            conflict: None,
        }
    }
}

/// One note change of a batch proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchChange {
    pub path: String,
    pub expected_sha256: Option<String>,
    pub require_absent: bool,
    /// The new text; none removes the note.
    pub content: Option<String>,
}

impl BatchChange {
    /// The change as the write transaction takes it.
    fn to_note_change(&self) -> Result<NoteChange> {
        Ok(NoteChange {
            path: VaultPath::parse(&self.path)?,
            content: self.content.clone(),
            require_absent: self.require_absent,
            expected_sha256: self.expected_sha256.clone(),
        })
    }
}

/// A governed action that writes no note (link-rot egress, infra replicate), held for a
/// person's decision: exactly the request that runs once it is approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionProposal {
    pub schema: String,
    pub proposal_id: String,
    pub operation: Operation,
    /// The receipt actor of the caller that proposed it (`agent` or `human`).
    pub proposed_by: String,
    pub created_at: String,
    /// The notes the action concerns (link rot: the notes holding the links; none for infra).
    pub paths: Vec<String>,
    /// What runs: link rot `{urls}`, infra the broker request's fields.
    pub request: Value,
}

/// What a proposal is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProposalState {
    /// Waiting (for a person, when `approver` is `human`).
    Pending,
    /// A person approved it and it still applies to the notes as they are.
    Approved,
    /// A person rejected it: applying it fails with `proposal_rejected`.
    Rejected,
    /// The notes hold its after-images.
    Applied,
    /// The notes changed since it was proposed: it can no longer apply.
    Stale,
}

/// A proposal's state as an agent or a person reads it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ProposalStatus {
    pub proposal_id: String,
    pub operation: Operation,
    pub paths: Vec<String>,
    pub proposed_by: String,
    pub created_at: String,
    pub state: ProposalState,
    /// Who the policy says must approve it now.
    pub approver: Approver,
    /// The decision record, once a person decided.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub decision: Option<DecisionRecord>,
}

/// What a person reviews before deciding (`paravault approvals show`, `approve`, `reject`).
#[derive(Debug, Clone, Serialize)]
pub struct ProposalReview {
    #[serde(flatten)]
    pub status: ProposalStatus,
    /// Per note: the unified diff from its current text to the proposal's after-image.
    pub changes: Vec<ReviewedChange>,
    /// For an action that writes no note: exactly the request that runs once approved.
    pub request: Option<Value>,
    /// The lint gate's verdict on the after-images as if written now (none for an action).
    pub gate: Option<GateVerdict>,
}

/// One note of a reviewed proposal.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewedChange {
    pub path: String,
    /// The note is removed.
    pub removes: bool,
    /// Unified diff (`--- a/<path>` / `+++ b/<path>`, three lines of context) from the note as
    /// it is now (empty when absent) to the after-image; empty when they are equal.
    pub diff: String,
}

/// The ok receipt that applied proposal `id` (made at `created_at`), if any.
fn applying_receipt(root: &Path, id: &str, created_at: &str) -> Result<Option<Receipt>> {
    ReceiptLog::applying(root, id, created_at)
}

/// The text applied proposal `p` replaced, when its record kept it and it is the proposal's
/// pre-image: its sha256 is `before_sha256`, which is the applying receipt's `before_sha256`
/// (none for a new note: the empty text) when that receipt is found.
pub(super) fn replaced_text(root: &Path, p: &Proposal) -> Result<Option<String>> {
    let Some(text) = read_apply_record(root, &p.proposal_id)?.and_then(|r| r.before_content) else { return Ok(None) };
    if sha256_hex(text.as_bytes()) != p.before_sha256 {
        return Ok(None);
    }
    if let Some(receipt) = applying_receipt(root, &p.proposal_id, &p.created_at)? {
        let pre_image = receipt.before_sha256.unwrap_or_else(|| sha256_hex(b""));
        if pre_image != p.before_sha256 {
            return Ok(None);
        }
    }
    Ok(Some(text))
}

/// The lint gate's verdict on a proposal's after-images.
#[derive(Debug, Clone, Serialize)]
pub struct GateVerdict {
    /// True when the write would pass the gate now.
    pub passes: bool,
    pub blocking: Vec<crate::finding::Finding>,
    pub warnings: Vec<crate::finding::Finding>,
}

/// A unified diff of `before` → `after` for `path`.
fn unified_diff(path: &str, before: &str, after: &str) -> String {
    if before == after {
        return String::new();
    }
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// A person's decision as `Vault::decide` takes it.
#[derive(Debug, Clone)]
pub struct DecisionRequest {
    pub proposal_id: String,
    pub decision: Decision,
    pub approver: String,
    /// Checked against the approver's argon2 hash; never stored.
    pub secret: String,
    pub channel: ApprovalChannel,
    pub comment: String,
}

/// A proposal of any kind.
#[derive(Debug, Clone)]
enum Governed {
    Apply(Proposal),
    Batch(BatchProposal),
    Action(ActionProposal),
}

fn check_id(id: &str) -> Result<()> {
    if id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(Error::InvalidArgument { name: "proposal_id", reason: "must be 64 lowercase hex characters".into() })
    }
}

fn decision_path(root: &Path, id: &str) -> std::path::PathBuf {
    layout::join(root, &format!("{}/{id}.json", layout::APPROVAL_DECISIONS_DIR))
}

fn batch_path(root: &Path, id: &str) -> std::path::PathBuf {
    layout::join(root, &format!("{}/{id}.json", layout::BATCH_PROPOSALS_DIR))
}

fn encode<T: Serialize>(value: &T, what: &'static str) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(value).map_err(|e| Error::io("encoding", what, std::io::Error::other(e)))
}

/// Reads a JSON engine file (no link followed); `None` when it does not exist.
fn read_json<T: for<'de> Deserialize<'de>>(root: &Path, path: &Path, rel: &str) -> Result<Option<(T, Vec<u8>)>> {
    match durable::read_engine_file(root, path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(|v| Some((v, bytes)))
            .map_err(|e| Error::ProposalInvalid { reason: format!("{rel} is unreadable: {e}") }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(nofollow::io_error("reading", rel, e)),
    }
}

/// Verifies a decision record's bytes as the remote's gate does: it parses, names proposal
/// `id`, and is signed by a key `active` holds for its approver.
pub(crate) fn verify_decision_bytes(bytes: &[u8], id: &str, active: &keys::ActiveKeys) -> Result<()> {
    let invalid = |reason: String| Error::SignatureInvalid { what: format!("decision {id}"), reason };
    let record: DecisionRecord = serde_json::from_slice(bytes).map_err(|e| invalid(format!("unreadable: {e}")))?;
    if record.schema != DECISION_SCHEMA || record.proposal_id != id {
        return Err(invalid("it is not a decision record for this proposal".into()));
    }
    let Some(block) = &record.signature else { return Err(invalid("it is not signed".into())) };
    if !active.holds(&record.approver, &block.public_key) {
        return Err(invalid(format!("it is not signed by an active key of '{}'", record.approver)));
    }
    keys::verify_signature(block, &record.signed_bytes()?, &format!("decision {id}"))
}

/// Whether the decision record at vault path `rel` may travel: only one this replica honours
/// is committed (the remote's gate would refuse any other, and one push refused would hold
/// back every later change). One signed by a key revoked since stays here, unhonoured.
pub(crate) fn decision_travels(root: &Path, rel: &str) -> bool {
    let Some(id) = rel.strip_prefix(&format!("{}/", layout::APPROVAL_DECISIONS_DIR)).and_then(|n| n.strip_suffix(".json")) else {
        return true;
    };
    matches!(read_decision_file(root, id), Ok(Some((record, _))) if matches!(unhonoured(root, &record), Ok(None)))
}

/// Moves every decision record this vault does not honour to
/// `.paravault/approvals/unverified/` (kept byte for byte, never committed): run when a vault
/// becomes a replica (its unsigned records stop counting then) and before `replicate` commits,
/// so a record that would never pass the remote's gate never holds back a push. A record the
/// branch already holds (`committed`) stays: removing it would be a change the gate refuses.
/// Returns how many were moved.
pub(crate) fn set_aside_unhonoured_decisions(root: &Path, committed: impl Fn(&str) -> bool) -> Result<usize> {
    let dir = layout::join(root, layout::APPROVAL_DECISIONS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(nofollow::io_error("listing", layout::APPROVAL_DECISIONS_DIR, e)),
    };
    let mut moved = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".json") else { continue };
        let rel = format!("{}/{name}", layout::APPROVAL_DECISIONS_DIR);
        if check_id(id).is_err() || decision_travels(root, &rel) || committed(&rel) {
            continue;
        }
        set_aside(root, id)?;
        moved += 1;
    }
    Ok(moved)
}

/// Moves decision record `id` aside, byte for byte, under a name that holds its hash.
fn set_aside(root: &Path, id: &str) -> Result<()> {
    let from = decision_path(root, id);
    let bytes = durable::read_engine_file(root, &from).map_err(|e| nofollow::io_error("reading", "a decision record", e))?;
    let aside = layout::join(root, &format!("{}/{id}-{}.json", layout::UNVERIFIED_DECISIONS_DIR, &sha256_hex(&bytes)[..16]));
    durable::create_dir_all(root, &layout::join(root, layout::UNVERIFIED_DECISIONS_DIR))?;
    durable::create_new(root, &aside, &bytes)?;
    durable::remove_file(root, &from)
}

/// The decision recorded for a proposal that this vault honours, with the sha256 of the
/// record's bytes. A record that does not verify (`unhonoured`) is as if there were none: it
/// is logged, kept, and moved aside when a person decides.
pub(crate) fn read_decision(root: &Path, id: &str) -> Result<Option<(DecisionRecord, String)>> {
    let Some((record, sha)) = read_decision_file(root, id)? else { return Ok(None) };
    match unhonoured(root, &record)? {
        None => Ok(Some((record, sha))),
        Some(reason) => {
            tracing::warn!(proposal_id = id, %reason, "a decision record is not honoured");
            Ok(None)
        }
    }
}

/// The decision record file of a proposal as it is, verified or not.
fn read_decision_file(root: &Path, id: &str) -> Result<Option<(DecisionRecord, String)>> {
    let belongs = |r: &DecisionRecord| r.schema == DECISION_SCHEMA && r.proposal_id == id;
    let record = read_record(root, layout::APPROVAL_DECISIONS_DIR, id, "a decision record for this proposal", belongs)?;
    Ok(record.map(|(record, bytes)| (record, sha256_hex(&bytes))))
}

/// Reads the engine record `<dir>/<id>.json` (`None` when it does not exist) and checks that
/// it `belongs` to `id` (its schema and id); one that does not is refused as not `what`.
fn read_record<T: for<'de> Deserialize<'de>>(
    root: &Path,
    dir: &str,
    id: &str,
    what: &str,
    belongs: impl Fn(&T) -> bool,
) -> Result<Option<(T, Vec<u8>)>> {
    let rel = format!("{dir}/{id}.json");
    let Some((record, bytes)) = read_json::<T>(root, &layout::join(root, &rel), &rel)? else { return Ok(None) };
    if !belongs(&record) {
        return Err(Error::ProposalInvalid { reason: format!("{rel} is not {what}") });
    }
    Ok(Some((record, bytes)))
}

fn read_batch(root: &Path, id: &str) -> Result<Option<BatchProposal>> {
    let belongs = |b: &BatchProposal| b.schema == BATCH_SCHEMA && b.proposal_id == id;
    Ok(read_record(root, layout::BATCH_PROPOSALS_DIR, id, "a batch proposal with this id", belongs)?.map(|(batch, _)| batch))
}

fn action_path(root: &Path, id: &str) -> std::path::PathBuf {
    layout::join(root, &format!("{}/{id}.json", layout::ACTION_PROPOSALS_DIR))
}

fn read_action(root: &Path, id: &str) -> Result<Option<ActionProposal>> {
    let belongs = |a: &ActionProposal| a.schema == ACTION_SCHEMA && a.proposal_id == id;
    Ok(read_record(root, layout::ACTION_PROPOSALS_DIR, id, "an action proposal with this id", belongs)?.map(|(action, _)| action))
}

/// A single-note proposal: paravault's, else one P.O.W.E.R. left pending in the vault
/// (`write::operations::stored_proposal`), so a person decides it like any other.
fn read_apply_proposal(root: &Path, id: &str) -> Result<Option<Proposal>> {
    let rel = format!("{}/{id}.json", layout::PROPOSALS_DIR);
    let path = layout::join(root, &rel);
    match read_json::<Proposal>(root, &path, &rel)? {
        Some((p, _)) => Ok(Some(p)),
        None => Ok(crate::write::operations::stored_proposal(root, id)),
    }
}

/// An `apply_memory_change` proposal's whole record: who proposed it and the text it replaces.
fn read_apply_record(root: &Path, id: &str) -> Result<Option<ProposalRecord>> {
    let rel = format!("{}/{id}.json", layout::PROPOSALS_DIR);
    let path = layout::join(root, &rel);
    Ok(read_json::<ProposalRecord>(root, &path, &rel)?.map(|(p, _)| p))
}

fn load(root: &Path, id: &str) -> Result<Governed> {
    if let Some(p) = read_apply_proposal(root, id)? {
        return Ok(Governed::Apply(p));
    }
    if let Some(b) = read_batch(root, id)? {
        return Ok(Governed::Batch(b));
    }
    if let Some(a) = read_action(root, id)? {
        return Ok(Governed::Action(a));
    }
    Err(Error::ProposalNotFound { proposal_id: id.to_string() })
}

/// The sha256 of a note's current bytes (of nothing when it does not exist).
fn current_sha(root: &Path, path: &str) -> Result<Option<String>> {
    let note = VaultPath::parse(path)?;
    // Through folder handles: a folder swapped for a link is never read through.
    Ok(crate::store::beneath::read(root, note.as_str())?.map(|bytes| sha256_hex(&bytes)))
}

/// Whether the notes still hold what the proposal was based on, and whether they hold its
/// after-images.
fn currency(root: &Path, governed: &Governed) -> Result<(bool, bool)> {
    match governed {
        Governed::Apply(p) => {
            let empty = sha256_hex(b"");
            let now = current_sha(root, &p.path)?.unwrap_or(empty);
            Ok((now == p.before_sha256, now == p.after_sha256))
        }
        Governed::Batch(b) => {
            let (mut current, mut applied) = (true, true);
            for change in &b.changes {
                let now = current_sha(root, &change.path)?;
                current &= match (&change.expected_sha256, change.require_absent) {
                    (Some(expected), _) => now.as_deref() == Some(expected.as_str()),
                    (None, true) => now.is_none(),
                    (None, false) => true,
                };
                applied &= match &change.content {
                    Some(text) => now.as_deref() == Some(sha256_hex(text.as_bytes()).as_str()),
                    None => now.is_none(),
                };
            }
            Ok((current, applied))
        }
        // An action reads no note: it is always current and never "applied" (it may run again
        // exactly as approved; infra replicate's idempotency key makes a rerun a replay).
        Governed::Action(_) => Ok((true, false)),
    }
}

impl Governed {
    fn operation(&self) -> Operation {
        match self {
            Governed::Apply(_) => Operation::Apply,
            Governed::Batch(b) => b.operation,
            Governed::Action(a) => a.operation,
        }
    }

    fn paths(&self) -> Vec<String> {
        match self {
            Governed::Apply(p) => vec![p.path.clone()],
            Governed::Batch(b) => b.changes.iter().map(|c| c.path.clone()).collect(),
            Governed::Action(a) => a.paths.clone(),
        }
    }

    /// The note changes a proposal makes (none for an action), as the gate sees them.
    fn note_changes(&self) -> Result<Vec<NoteChange>> {
        match self {
            Governed::Apply(p) => Ok(vec![NoteChange {
                path: VaultPath::parse(&p.path)?,
                content: Some(p.content.clone()),
                require_absent: p.before_sha256 == sha256_hex(b""),
                expected_sha256: Some(p.before_sha256.clone()),
            }]),
            Governed::Batch(b) => b.changes.iter().map(BatchChange::to_note_change).collect(),
            Governed::Action(_) => Ok(Vec::new()),
        }
    }

    /// The hash a decision binds: the content-addressed id recomputed from the stored
    /// proposal's fields, or the sha256 of the batch's canonical encoding.
    fn sha256(&self) -> Result<String> {
        Ok(match self {
            Governed::Apply(p) => proposal_id(&p.path, &p.before_sha256, &p.after_sha256, &p.content),
            Governed::Batch(b) => {
                sha256_hex(&serde_json::to_vec(b).map_err(|e| Error::io("encoding", "batch proposal", std::io::Error::other(e)))?)
            }
            Governed::Action(a) => {
                sha256_hex(&serde_json::to_vec(a).map_err(|e| Error::io("encoding", "action proposal", std::io::Error::other(e)))?)
            }
        })
    }
}

/// Who the policy says must approve a stored proposal now: what its changes are (the gate),
/// or for an action its operation over its paths.
fn approver_of_governed(vault: &Vault, governed: &Governed) -> Result<Approver> {
    Ok(match governed {
        Governed::Action(a) => approver_for(&vault.policy().policy.approvals, a.operation, a.paths.iter().map(String::as_str)),
        _ => gate(vault, Some(governed.operation()), &governed.note_changes()?)?.0,
    })
}

/// The receipt's `approval` object for a decision.
fn stamp(record: &DecisionRecord, record_sha256: &str) -> Value {
    json!({
        "approver": record.approver,
        "channel": record.channel,
        "decided_at": record.decided_at,
        "decision_sha256": record_sha256,
    })
}

/// Refuses an approved decision whose proposal no longer hashes to what was approved, or whose
/// notes changed since (unless they already hold the after-images: a replay).
fn check_approved(root: &Path, governed: &Governed, record: &DecisionRecord) -> Result<()> {
    if governed.sha256()? != record.proposal_sha256 {
        return Err(Error::ApprovalStale {
            proposal_id: record.proposal_id.clone(),
            reason: "the stored proposal changed after it was approved".into(),
        });
    }
    let (current, applied) = currency(root, governed)?;
    if !current && !applied {
        return Err(Error::ApprovalStale {
            proposal_id: record.proposal_id.clone(),
            reason: "the notes changed since the proposal was approved; propose the change again".into(),
        });
    }
    Ok(())
}

fn rejected(record: &DecisionRecord) -> Error {
    Error::ProposalRejected { proposal_id: record.proposal_id.clone(), approver: record.approver.clone(), comment: record.comment.clone() }
}

/// The stable id of a multi-note plan: the operation and, per note in path order, the version
/// it is based on. The after-images are not part of it (a heal stamps the time), so the same
/// run over the same notes finds the same proposal.
/// With `request`, the id is also bound to the caller's request, for operations where one version
/// of the notes admits several different changes (a goal lifecycle change names its goal).
fn plan_id_for(operation: Operation, notes: &[NoteChange], request: Option<&str>) -> String {
    let mut entries: Vec<Value> = notes
        .iter()
        .map(|n| {
            json!({
                "path": n.path.as_str(),
                "expected_sha256": n.expected_sha256,
                "require_absent": n.require_absent,
                "removes": n.content.is_none(),
            })
        })
        .collect();
    entries.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    let mut plan = json!({"operation": operation.name(), "changes": entries});
    if let Some(request) = request {
        plan["request"] = json!(request);
    }
    sha256_hex(plan.to_string().as_bytes())
}

/// The (operation, path) pairs a set of note changes *is* (`policy::approvals::
/// governed_operations`), `own` being the writer's governed operation: the worklist's goals
/// are compared before and after, so an edit of the worklist through any tool is the goal
/// lifecycle change it makes.
fn governed_of(vault: &Vault, own: Option<Operation>, notes: &[NoteChange]) -> Result<Vec<(Operation, String)>> {
    let policy = &vault.policy().policy;
    let changes: Vec<RuledChange<'_>> = notes
        .iter()
        .map(|n| RuledChange { path: n.path.as_str(), touches_existing: !n.require_absent, removes: n.content.is_none() })
        .collect();
    let worklist = policy.goals.worklist_path.as_str();
    let worklist_ops = match notes.iter().find(|n| n.path.as_str() == worklist && !n.require_absent) {
        Some(change) => goal_lifecycle_changes(vault.root(), change)?,
        None => Vec::new(),
    };
    Ok(governed_operations(&policy.layout.archive_folder, own, &changes, worklist, &worklist_ops))
}

/// The goal lifecycle operations a change of the goals worklist makes, whoever writes it: a
/// goal gone is `goals_delete`; one that becomes done `goals_complete`, archived
/// `goals_archive`, open again `goals_reopen` (a goal that appears already done or archived
/// counts the same). When either text is not a worklist the engine can read, every one of the
/// four (a free-form text can mean any of them).
fn goal_lifecycle_changes(root: &Path, change: &NoteChange) -> Result<Vec<Operation>> {
    use crate::note::worklist::{GoalStatus, Worklist};
    let parse = |text: &str| crate::note::worklist::parse(text).ok().map(|(_, worklist)| worklist);
    let before = match crate::store::beneath::read(root, change.path.as_str())? {
        Some(bytes) => std::str::from_utf8(&bytes).ok().and_then(parse),
        None => Some(Worklist { revision: 0, goals: Vec::new() }),
    };
    let after = match change.content.as_deref() {
        Some(text) => parse(text),
        None => Some(Worklist { revision: 0, goals: Vec::new() }),
    };
    let (Some(before), Some(after)) = (before, after) else { return Ok(Operation::GOAL_LIFECYCLE.to_vec()) };
    let mut ops = Vec::new();
    let mut add = |op: Operation| {
        if !ops.contains(&op) {
            ops.push(op);
        }
    };
    for goal in &before.goals {
        match after.goals.iter().find(|g| g.id == goal.id) {
            None => add(Operation::GoalsDelete),
            Some(now) if now.status != goal.status => add(match now.status {
                GoalStatus::Done => Operation::GoalsComplete,
                GoalStatus::Archived => Operation::GoalsArchive,
                GoalStatus::Open => Operation::GoalsReopen,
            }),
            Some(_) => {}
        }
    }
    for goal in after.goals.iter().filter(|g| !before.goals.iter().any(|b| b.id == g.id)) {
        match goal.status {
            GoalStatus::Done => add(Operation::GoalsComplete),
            GoalStatus::Archived => add(Operation::GoalsArchive),
            GoalStatus::Open => {}
        }
    }
    Ok(ops)
}

/// The approval gate: who must approve `notes` written by a writer whose own governed
/// operation is `own` (none for a writer that has none), with the operation a held proposal
/// is recorded as when it is a person.
fn gate(vault: &Vault, own: Option<Operation>, notes: &[NoteChange]) -> Result<(Approver, Option<Operation>)> {
    Ok(approver_of(&vault.policy().policy.approvals, &governed_of(vault, own, notes)?))
}

/// Whether a person must approve `mutation` before any writer may make it (the ctxvault tools
/// hold such a change as a `memory_change` proposal instead of writing it).
pub(crate) fn needs_person(vault: &Vault, mutation: &Mutation) -> Result<bool> {
    Ok(gate(vault, None, &mutation.notes)?.0 == Approver::Human)
}

/// The one gate for a writer that has no governed operation of its own (vaultspec's document
/// writes, stepstone's `add`/`update`/`move`, ctxvault's memory writes): with no `human` rule
/// deciding what its changes are, the write runs; under one, exactly the planned changes are
/// held as a batch proposal (`human_approval_required` naming it) that a person approves and
/// anyone then applies by id (`paravault apply ID --approve`, the web UI, or
/// `apply_memory_change {proposal_id}`). The proposal's id binds the after-images, so a
/// different change is a different proposal; an identical call after the approval applies it.
pub fn execute_checked(vault: &Vault, mutation: Mutation) -> Result<Receipt> {
    let (approver, governing) = gate(vault, None, &mutation.notes)?;
    match governing {
        Some(operation) if approver == Approver::Human => hold(vault, operation, mutation),
        _ => vault.execute(mutation, Cleared::by_the_approval_gate(None)),
    }
}

/// Holds `mutation` for a person as a batch proposal applied by id (`execute_checked`).
fn hold(vault: &Vault, operation: Operation, mutation: Mutation) -> Result<Receipt> {
    let root = vault.root();
    let id = plan_id_for(operation, &mutation.notes, Some(&format!("held {}", mutation.fingerprint())));
    match read_decision(root, &id)? {
        Some((record, _)) if record.decision == Decision::Rejected => Err(rejected(&record)),
        Some(_) => vault.apply_memory_proposal(&id, true),
        None => {
            let batch = BatchProposal {
                idempotency_key: mutation.idempotency_key.clone(),
                receipt_operation: Some(mutation.operation.to_string()),
                ..BatchProposal::of(vault, id.clone(), operation, &mutation)
            };
            nofollow::refuse_symlinked_state(root)?;
            durable::create_dir_all(root, &layout::join(root, layout::BATCH_PROPOSALS_DIR))?;
            // The first stored plan is the one a person reviews; a later identical call keeps it.
            if durable::create_new(root, &batch_path(root, &id), &encode(&batch, "batch proposal")?)? {
                crate::write::replica::commit_records(
                    vault,
                    vault.writer(),
                    &[format!("{}/{id}.json", layout::BATCH_PROPOSALS_DIR)],
                    &format!("proposal {id}"),
                );
            }
            Err(Error::HumanApprovalRequired { operation: crate::error::HELD_CHANGE_TOOL, proposal_id: id })
        }
    }
}

/// What a memory transaction became: written, or held as a `memory_change` proposal.
pub(crate) enum MemoryOutcome {
    Written(Box<Receipt>),
    Proposed(Box<ProposalStatus>),
}

/// Runs a ctxvault memory transaction through the gate: held as a `memory_change` proposal
/// when the caller has `propose` authority or a `human` rule decides what its changes are,
/// written otherwise.
pub(crate) fn commit_memory(vault: &Vault, mutation: Mutation, proposes: bool) -> Result<MemoryOutcome> {
    if proposes || needs_person(vault, &mutation)? {
        return propose_memory_change(vault, &mutation).map(|status| MemoryOutcome::Proposed(Box::new(status)));
    }
    vault.execute(mutation, Cleared::by_the_approval_gate(None)).map(|receipt| MemoryOutcome::Written(Box::new(receipt)))
}

/// Runs a multi-note maintenance mutation under the `approvals:` policy: with no `human` rule
/// it is `write::execute`; under one, the first call stores the planned changes as a batch
/// proposal and returns `human_approval_required`, a rejection returns `proposal_rejected`,
/// and an approval writes exactly the stored changes (what the person saw), its receipt
/// naming the approver and channel.
pub(crate) fn execute_governed(vault: &Vault, operation: Operation, mutation: Mutation) -> Result<Receipt> {
    execute_governed_request(vault, operation, mutation, None)
}

/// `execute_governed` for an operation whose request is not implied by the notes' versions
/// alone: `request` (e.g. `complete 3f9a2c1b7d`) is part of the proposal id, so an approval of
/// one request never applies another made from the same version of the notes.
pub(crate) fn execute_governed_request(
    vault: &Vault,
    operation: Operation,
    mut mutation: Mutation,
    request: Option<&str>,
) -> Result<Receipt> {
    let root = vault.root();
    let (approver, _) = gate(vault, Some(operation), &mutation.notes)?;
    if approver == Approver::Caller {
        return vault.execute(mutation, Cleared::by_the_approval_gate(None));
    }
    let id = plan_id_for(operation, &mutation.notes, request);
    match read_decision(root, &id)? {
        None => {
            let batch = BatchProposal::of(vault, id.clone(), operation, &mutation);
            nofollow::refuse_symlinked_state(root)?;
            durable::create_dir_all(root, &layout::join(root, layout::BATCH_PROPOSALS_DIR))?;
            // The first stored plan is the one a person reviews; a later identical call keeps it.
            if durable::create_new(root, &batch_path(root, &id), &encode(&batch, "batch proposal")?)? {
                crate::write::replica::commit_records(
                    vault,
                    vault.writer(),
                    &[format!("{}/{id}.json", layout::BATCH_PROPOSALS_DIR)],
                    &format!("proposal {id}"),
                );
            }
            Err(Error::HumanApprovalRequired { operation: operation.tool(), proposal_id: id })
        }
        Some((record, _)) if record.decision == Decision::Rejected => Err(rejected(&record)),
        Some((record, record_sha)) => {
            let batch = read_batch(root, &id)?.ok_or_else(|| Error::ProposalNotFound { proposal_id: id.clone() })?;
            let governed = Governed::Batch(batch);
            check_approved(root, &governed, &record)?;
            let Governed::Batch(batch) = governed else { unreachable!("built as a batch above") };
            mutation.notes = batch.changes.iter().map(BatchChange::to_note_change).collect::<Result<_>>()?;
            mutation.log_entry = batch.log_entry;
            mutation.create_folders = batch.create_folders;
            mutation.proposal_id = Some(id);
            vault.execute(mutation, Cleared::by_the_approval_gate(Some(stamp(&record, &record_sha))))
        }
    }
}

/// The approval gate of `apply_memory_change` for a validated stored proposal: `Ok(None)`
/// when the caller's approval suffices, `Ok(Some(stamp))` when a person approved it (the
/// receipt's `approval`), otherwise `human_approval_required`, `proposal_rejected` or
/// `approval_stale`. A rejection binds under every rule.
pub(crate) fn gate_apply(vault: &Vault, proposal: &Proposal) -> Result<Option<Value>> {
    let root = vault.root();
    let decision = read_decision(root, &proposal.proposal_id)?;
    if let Some((record, _)) = &decision
        && record.decision == Decision::Rejected
    {
        return Err(rejected(record));
    }
    let approver = approver_of_governed(vault, &Governed::Apply(proposal.clone()))?;
    match decision {
        Some((record, record_sha)) => {
            check_approved(root, &Governed::Apply(proposal.clone()), &record)?;
            Ok(Some(stamp(&record, &record_sha)))
        }
        None if approver == Approver::Human => {
            Err(Error::HumanApprovalRequired { operation: Operation::Apply.tool(), proposal_id: proposal.proposal_id.clone() })
        }
        None => Ok(None),
    }
}

/// The approval gate of a governed action that writes no note (`link_rot`, `infra_replicate`):
/// `Ok(None)` when the caller's approval suffices, `Ok(Some(stamp))` when a person approved
/// exactly this request (the result's `approval`), otherwise `human_approval_required` (the
/// first call stores the request as an action proposal), `proposal_rejected` or
/// `approval_stale`. The proposal id is the sha256 of the operation and the request, so an
/// approval covers that request and nothing else. A rejection binds under every rule.
pub(crate) fn gate_action(vault: &Vault, operation: Operation, paths: &[String], request: &Value) -> Result<Option<Value>> {
    let root = vault.root();
    let id = action_id(operation, paths, request);
    let approver = approver_for(&vault.policy().policy.approvals, operation, paths.iter().map(String::as_str));
    match read_decision(root, &id)? {
        Some((record, _)) if record.decision == Decision::Rejected => Err(rejected(&record)),
        Some((record, record_sha)) => approved_action(root, &id, operation, paths, request, &record, &record_sha).map(Some),
        None if approver == Approver::Human => {
            hold_action(vault, &id, operation, paths, request)?;
            Err(Error::HumanApprovalRequired { operation: operation.tool(), proposal_id: id })
        }
        None => Ok(None),
    }
}

/// The proposal id of a governed action: the sha256 of its operation, paths and request.
fn action_id(operation: Operation, paths: &[String], request: &Value) -> String {
    sha256_hex(json!({"operation": operation.name(), "paths": paths, "request": request}).to_string().as_bytes())
}

/// The receipt stamp of an approved action, once its stored proposal is exactly this request
/// and still what the person approved.
fn approved_action(
    root: &Path,
    id: &str,
    operation: Operation,
    paths: &[String],
    request: &Value,
    record: &DecisionRecord,
    record_sha: &str,
) -> Result<Value> {
    let action = read_action(root, id)?.ok_or_else(|| Error::ProposalNotFound { proposal_id: id.to_string() })?;
    if action.operation != operation || action.paths != paths || action.request != *request {
        return Err(Error::ApprovalStale { proposal_id: id.to_string(), reason: "the stored proposal is not this request".into() });
    }
    check_approved(root, &Governed::Action(action), record)?;
    Ok(stamp(record, record_sha))
}

/// Stores `request` as the action proposal `id` a person reviews (the first stored request is
/// kept; a later identical call changes nothing).
fn hold_action(vault: &Vault, id: &str, operation: Operation, paths: &[String], request: &Value) -> Result<()> {
    let root = vault.root();
    let action = ActionProposal {
        schema: ACTION_SCHEMA.into(),
        proposal_id: id.to_string(),
        operation,
        proposed_by: vault.channel().actor().into(),
        created_at: vault.clock().stamp(chrono::SecondsFormat::Secs),
        paths: paths.to_vec(),
        request: request.clone(),
    };
    nofollow::refuse_symlinked_state(root)?;
    durable::create_dir_all(root, &layout::join(root, layout::ACTION_PROPOSALS_DIR))?;
    if durable::create_new(root, &action_path(root, id), &encode(&action, "action proposal")?)? {
        crate::write::replica::commit_records(
            vault,
            vault.writer(),
            &[format!("{}/{id}.json", layout::ACTION_PROPOSALS_DIR)],
            &format!("proposal {id}"),
        );
    }
    Ok(())
}

/// Where a person stands on an `infra_replicate` request that the INFRA-1 broker's target
/// wants explicitly approved (`approval: explicit`), whatever the vault's `approvals:` rules
/// say.
#[derive(Debug, Clone)]
pub(crate) enum ActionApproval {
    /// A person approved exactly this request: the stamp (approver, channel, decided_at,
    /// decision_sha256).
    Approved(Value),
    /// No decision yet: the request is held as the action proposal, for a person.
    Pending,
    /// A person rejected it.
    Rejected { approver: String },
}

/// The broker's side of the approval of an `infra_replicate` `request` (its fields, without
/// `approval_ref`): `(proposal_id, where a person stands)`. The id is `gate_action`'s for the
/// same request, so the proposal the client's gate holds under a `human` rule and the one the
/// broker holds are one proposal, decided once. A request no person decided yet is stored as
/// that proposal. Nothing here decides: only `decide` (a person, with their secret) does.
pub(crate) fn action_approval(vault: &Vault, request: &Value) -> Result<(String, ActionApproval)> {
    let root = vault.root();
    let operation = Operation::InfraReplicate;
    let id = action_id(operation, &[], request);
    let state = match read_decision(root, &id)? {
        Some((record, _)) if record.decision == Decision::Rejected => ActionApproval::Rejected { approver: record.approver },
        Some((record, record_sha)) => ActionApproval::Approved(approved_action(root, &id, operation, &[], request, &record, &record_sha)?),
        None => {
            hold_action(vault, &id, operation, &[], request)?;
            ActionApproval::Pending
        }
    };
    Ok((id, state))
}

/// Holds a fully resolved memory change (a ctxvault tool called by an agent with `propose`
/// authority) as a `memory_change` batch proposal instead of writing it: exactly the changes
/// (ids, timestamps, note texts, the pre-image sha256 of every note it modifies) that
/// `Vault::apply_memory_proposal` writes once it is approved. The mutation's idempotency key
/// (the memory op) is part of the proposal id, so each call is its own proposal. Nothing is
/// written to a note; the answer is the proposal's status.
pub fn propose_memory_change(vault: &Vault, mutation: &Mutation) -> Result<ProposalStatus> {
    let root = vault.root();
    let operation = Operation::MemoryChange;
    let key = mutation.idempotency_key.clone().ok_or_else(|| Error::ProposalInvalid { reason: "a memory change names its op".into() })?;
    if !MEMORY_RECEIPT_OPERATIONS.contains(&mutation.operation.as_ref()) {
        return Err(Error::ProposalInvalid { reason: format!("'{}' is not a memory transaction", mutation.operation) });
    }
    let id = plan_id_for(operation, &mutation.notes, Some(&key));
    let batch = BatchProposal {
        idempotency_key: Some(key),
        receipt_operation: Some(mutation.operation.to_string()),
        ..BatchProposal::of(vault, id.clone(), operation, mutation)
    };
    nofollow::refuse_symlinked_state(root)?;
    durable::create_dir_all(root, &layout::join(root, layout::BATCH_PROPOSALS_DIR))?;
    if !durable::create_new(root, &batch_path(root, &id), &encode(&batch, "batch proposal")?)? {
        // The id covers a fresh op id: another file under it is not this proposal.
        return Err(Error::ProposalInvalid { reason: format!("a different proposal is already stored as {id}") });
    }
    crate::write::replica::commit_records(
        vault,
        vault.writer(),
        &[format!("{}/{id}.json", layout::BATCH_PROPOSALS_DIR)],
        &format!("proposal {id}"),
    );
    vault.status_of(&Governed::Batch(batch))
}

/// The receipt operation of a resolved replication conflict (the other side's text taken).
pub const CONFLICT_RESOLVE_OPERATION: &str = "replicate.resolve";

/// Holds a note two replicas changed in ways that do not merge as a `replication_conflict`
/// proposal: approving it puts the other side's text (or its removal) in place of this
/// replica's, rejecting it keeps this replica's; editing the note by hand makes it stale
/// (resolved). Nothing is written to the note. Returns the proposal's id; the same conflict
/// held twice is one proposal.
pub(crate) fn hold_conflict(vault: &Vault, path: VaultPath, theirs: Option<String>, origin: ConflictOrigin) -> Result<String> {
    let root = vault.root();
    let operation = Operation::ReplicationConflict;
    let change =
        NoteChange { path, require_absent: origin.ours_sha256.is_none(), expected_sha256: origin.ours_sha256.clone(), content: theirs };
    let key = format!("conflict {} {}", origin.theirs_commit, change.path);
    let id = plan_id_for(operation, std::slice::from_ref(&change), Some(&key));
    let mutation = Mutation {
        operation: CONFLICT_RESOLVE_OPERATION.into(),
        notes: vec![change],
        idempotency_key: Some(format!("resolve-{id}")),
        proposal_id: None,
        log_entry: None,
        create_folders: true,
    };
    let batch = BatchProposal {
        idempotency_key: mutation.idempotency_key.clone(),
        receipt_operation: Some(CONFLICT_RESOLVE_OPERATION.to_string()),
        conflict: Some(origin),
        proposed_by: "replication".into(),
        created_at: vault.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ..BatchProposal::of(vault, id.clone(), operation, &mutation)
    };
    nofollow::refuse_symlinked_state(root)?;
    durable::create_dir_all(root, &layout::join(root, layout::BATCH_PROPOSALS_DIR))?;
    // Created once: the same conflict seen again (a re-run) is the proposal already held.
    let bytes = encode(&batch, "conflict proposal")?;
    durable::create_new(root, &batch_path(root, &id), &bytes)?;
    // The copy that travels: committed with the integration, so every replica holds it.
    durable::create_dir_all(root, &layout::join(root, layout::CONFLICTS_DIR))?;
    durable::replace(root, &layout::join(root, &conflict_file(&id)), &bytes)?;
    Ok(id)
}

/// Where a conflict proposal travels (vault-relative; committed).
pub(crate) fn conflict_file(id: &str) -> String {
    format!("{}/{id}.json", layout::CONFLICTS_DIR)
}

/// The stored batch proposal of a held conflict (committed with its travelling copy: every
/// replica that imports the copy writes the same bytes there).
pub(crate) fn conflict_batch_file(id: &str) -> String {
    format!("{}/{id}.json", layout::BATCH_PROPOSALS_DIR)
}

/// Takes in a conflict proposal another replica held (its travelling copy, from the remote):
/// kept among this replica's proposals when it is one and its id is the hash of what it
/// holds; a file that is not is logged and left out. Returns the proposal's id when new here.
pub(crate) fn import_conflict(vault: &Vault, bytes: &[u8]) -> Result<Option<String>> {
    let root = vault.root();
    let Ok(batch) = serde_json::from_slice::<BatchProposal>(bytes) else {
        tracing::warn!("a travelling conflict proposal does not parse; left out");
        return Ok(None);
    };
    let (Some(origin), [change]) = (&batch.conflict, batch.changes.as_slice()) else { return Ok(None) };
    if batch.schema != BATCH_SCHEMA || batch.operation != Operation::ReplicationConflict {
        return Ok(None);
    }
    let note = NoteChange {
        path: VaultPath::parse(&change.path)?,
        content: change.content.clone(),
        require_absent: change.require_absent,
        expected_sha256: change.expected_sha256.clone(),
    };
    let id = plan_id_for(
        Operation::ReplicationConflict,
        std::slice::from_ref(&note),
        Some(&format!("conflict {} {}", origin.theirs_commit, note.path)),
    );
    if id != batch.proposal_id || check_id(&id).is_err() {
        tracing::warn!(proposal = batch.proposal_id, "a travelling conflict proposal's id does not hash what it holds; left out");
        return Ok(None);
    }
    nofollow::refuse_symlinked_state(root)?;
    durable::create_dir_all(root, &layout::join(root, layout::BATCH_PROPOSALS_DIR))?;
    Ok(durable::create_new(root, &batch_path(root, &id), bytes)?.then_some(id))
}

/// Integrates changes other replicas made (`replicate`) in one write transaction. They were
/// governed where they were made (the approval rules asked there); here they pass the lint gate
/// of this replica's transaction like any write. What fails it is held as a conflict instead.
pub(crate) fn execute_integration(vault: &Vault, mutation: Mutation) -> Result<Receipt> {
    vault.execute(mutation, Cleared::by_the_approval_gate(None))
}

impl Vault {
    /// `apply_memory_change`: applies a stored single-note proposal, checked against the map the
    /// agent hands back, through the approval gate (this is a governed write: it lives here, above
    /// `write`, so that `write` never asks `approvals`).
    /// Only with `approved`; replay returns the original receipt.
    pub fn apply_memory_change(&self, proposal: &BTreeMap<String, Value>, approved: bool) -> Result<Receipt> {
        if !approved {
            return Err(Error::ApprovalRequired { operation: "apply_memory_change" });
        }
        let refuse = |reason: &str| Error::ProposalInvalid { reason: reason.to_string() };
        let CheckedProposal { path, note, content, before_sha256: before, after_sha256: after, proposal_id: id, idempotency_key } =
            check_proposal(proposal)?;
        let stored: Proposal = crate::write::operations::stored_proposal(self.root(), &id)
            .ok_or_else(|| refuse("proposal is not durable; call propose_memory_change first"))?;
        if stored.path != path || stored.content != content || stored.before_sha256 != before || stored.after_sha256 != after {
            return Err(refuse("the durable proposal differs from the one supplied"));
        }
        if let Some(key) = idempotency_key
            && key != stored.idempotency_key
        {
            return Err(refuse("idempotency_key differs from the stored proposal's"));
        }
        let (note, _) = resolve_note_path(self.root(), note.as_str(), &self.policy().policy.layout)?;
        validate_note_text(self, &note, &content)?;
        self.refuse_claimed_provenance(&note, &content)?;
        let approval = gate_apply(self, &stored)?;
        let mutation = Mutation {
            operation: match self.channel() {
                Channel::Person => "cli.apply",
                Channel::Web => "web.apply",
                Channel::Agent => "memory.apply",
            }
            .into(),
            notes: vec![NoteChange { path: note, content: Some(content), require_absent: false, expected_sha256: Some(before) }],
            idempotency_key: Some(stored.idempotency_key.clone()),
            proposal_id: Some(id),
            log_entry: None,
            create_folders: false,
        };
        self.execute(mutation, Cleared::by_the_approval_gate(approval))
    }

    /// Applies a proposal stored under `proposal_id` (the CLI's `apply`).
    pub fn apply_stored_proposal(&self, proposal_id: &str, approved: bool) -> Result<Receipt> {
        if proposal_id.len() != 64 || !proposal_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::InvalidArgument { name: "proposal_id", reason: "must be 64 hex characters".into() });
        }
        let stored = crate::write::operations::stored_proposal(self.root(), proposal_id)
            .and_then(|p| serde_json::to_value(p).ok())
            .and_then(|v| serde_json::from_value::<BTreeMap<String, Value>>(v).ok())
            .ok_or_else(|| Error::ProposalInvalid { reason: "proposal is not durable; call propose_memory_change first".into() })?;
        self.apply_memory_change(&stored, approved)
    }
}

impl Vault {
    /// Applies a stored proposal that is applied by id, in one write transaction: a
    /// `memory_change` (its receipt records the memory op, the vault's knowledge time) or a
    /// change the gate held for a person (`execute_checked`; its receipt records the writer's
    /// own operation). When a person approved it, the receipt carries the approval. Under a
    /// `human` rule only a person's approval lets it through (`human_approval_required` until
    /// then); otherwise `approved` is the caller's approval (`approval_required` without it).
    /// A rejection binds under every rule. A note changed since the proposal was made is
    /// `precondition_failed` from the transaction's own check, and nothing is written;
    /// applying it again replays the original receipt.
    pub fn apply_memory_proposal(&self, proposal_id: &str, approved: bool) -> Result<Receipt> {
        check_id(proposal_id)?;
        let root = self.root();
        nofollow::refuse_symlinked_state(root)?;
        let governed = load(root, proposal_id)?;
        let Governed::Batch(batch) = &governed else {
            return Err(Error::InvalidArgument { name: "proposal_id", reason: "not a proposal applied by id".into() });
        };
        let Some(receipt_operation) = batch.receipt_operation.as_deref() else {
            return Err(Error::InvalidArgument {
                name: "proposal_id",
                reason: format!("a {} proposal runs when its operation is repeated", batch.operation.name()),
            });
        };
        let operation: std::borrow::Cow<'static, str> = if batch.operation == Operation::MemoryChange {
            MEMORY_RECEIPT_OPERATIONS
                .into_iter()
                .find(|o| *o == receipt_operation)
                .ok_or_else(|| Error::ProposalInvalid { reason: "the stored memory change names no memory transaction".into() })?
                .into()
        } else {
            receipt_operation.to_string().into()
        };
        let decision = read_decision(root, proposal_id)?;
        let approver = approver_of_governed(self, &governed)?;
        let stamp = match decision {
            Some((record, _)) if record.decision == Decision::Rejected => return Err(rejected(&record)),
            Some((record, record_sha)) => {
                if governed.sha256()? != record.proposal_sha256 {
                    return Err(Error::ApprovalStale {
                        proposal_id: proposal_id.to_string(),
                        reason: "the stored proposal changed after it was approved".into(),
                    });
                }
                Some(stamp(&record, &record_sha))
            }
            None if approver == Approver::Human => {
                let tool = if batch.operation == Operation::MemoryChange {
                    Operation::MemoryChange.tool()
                } else {
                    crate::error::HELD_CHANGE_TOOL
                };
                return Err(Error::HumanApprovalRequired { operation: tool, proposal_id: proposal_id.to_string() });
            }
            None if !approved => return Err(Error::ApprovalRequired { operation: "apply_memory_change" }),
            None => None,
        };
        let mutation = Mutation {
            operation,
            notes: governed.note_changes()?,
            idempotency_key: batch.idempotency_key.clone(),
            proposal_id: Some(proposal_id.to_string()),
            log_entry: batch.log_entry.clone(),
            create_folders: batch.create_folders,
        };
        self.execute(mutation, Cleared::by_the_approval_gate(stamp))
    }

    /// Applies a stored proposal by id, whichever kind holds its own plan: an
    /// `apply_memory_change` proposal or a `memory_change` (the CLI's `apply`).
    pub fn apply_proposal_by_id(&self, proposal_id: &str, approved: bool) -> Result<Receipt> {
        if check_id(proposal_id).is_ok() {
            nofollow::refuse_symlinked_state(self.root())?;
            if read_batch(self.root(), proposal_id)?.is_some_and(|b| b.receipt_operation.is_some()) {
                return self.apply_memory_proposal(proposal_id, approved);
            }
        }
        self.apply_stored_proposal(proposal_id, approved)
    }
}

impl Vault {
    /// A proposal's state (either kind), as agents and people read it.
    pub fn proposal_status(&self, proposal_id: &str) -> Result<ProposalStatus> {
        check_id(proposal_id)?;
        nofollow::refuse_symlinked_state(self.root())?;
        let governed = load(self.root(), proposal_id)?;
        self.status_of(&governed)
    }

    fn status_of(&self, governed: &Governed) -> Result<ProposalStatus> {
        let root = self.root();
        let (id, proposed_by, created_at) = match governed {
            Governed::Apply(p) => {
                let proposer = read_apply_record(root, &p.proposal_id)?.and_then(|r| r.proposed_by);
                let by =
                    proposer.map_or_else(|| "not recorded (a proposal stored before proposers were kept)".to_string(), |p| p.describe());
                (p.proposal_id.clone(), by, p.created_at.clone())
            }
            Governed::Batch(b) => (b.proposal_id.clone(), b.proposed_by.clone(), b.created_at.clone()),
            Governed::Action(a) => (a.proposal_id.clone(), a.proposed_by.clone(), a.created_at.clone()),
        };
        let decision = read_decision(root, &id)?;
        let (current, applied) = currency(root, governed)?;
        // A proposal whose notes moved on since it was applied is still applied (its receipt
        // says so), never stale: the receipt log is read back only for such a proposal.
        let applied =
            applied || (!current && !matches!(governed, Governed::Action(_)) && applying_receipt(root, &id, &created_at)?.is_some());
        let state = match &decision {
            Some((record, _)) if record.decision == Decision::Rejected => ProposalState::Rejected,
            _ if applied => ProposalState::Applied,
            _ if !current => ProposalState::Stale,
            Some(_) => ProposalState::Approved,
            None => ProposalState::Pending,
        };
        let paths = governed.paths();
        let approver = approver_of_governed(self, governed)?;
        Ok(ProposalStatus {
            proposal_id: id,
            operation: governed.operation(),
            paths,
            proposed_by,
            created_at,
            state,
            approver,
            decision: decision.map(|(r, _)| r),
        })
    }

    /// A proposal's state with what it would change: per note the unified diff from the note's
    /// current text to the after-image, and the lint gate's verdict on the after-images as if
    /// written now (`write::gate_preview`: nothing is written); for an action, the request.
    pub fn proposal_review(&self, proposal_id: &str) -> Result<ProposalReview> {
        check_id(proposal_id)?;
        let root = self.root();
        nofollow::refuse_symlinked_state(root)?;
        let governed = load(root, proposal_id)?;
        let status = self.status_of(&governed)?;
        let after_images: Vec<(String, Option<String>)> = match &governed {
            Governed::Apply(p) => vec![(p.path.clone(), Some(p.content.clone()))],
            Governed::Batch(b) => b.changes.iter().map(|c| (c.path.clone(), c.content.clone())).collect(),
            Governed::Action(a) => {
                return Ok(ProposalReview { status, changes: Vec::new(), request: Some(a.request.clone()), gate: None });
            }
        };
        let mut changes = Vec::with_capacity(after_images.len());
        let mut preview = Vec::with_capacity(after_images.len());
        for (path, after) in after_images {
            let note = VaultPath::parse(&path)?;
            let before = crate::store::beneath::read(root, note.as_str())?
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default();
            changes.push(ReviewedChange {
                path: path.clone(),
                removes: after.is_none(),
                diff: unified_diff(&path, &before, after.as_deref().unwrap_or("")),
            });
            preview.push((note, after));
        }
        let preview: Vec<(VaultPath, Option<&str>)> = preview.iter().map(|(note, after)| (note.clone(), after.as_deref())).collect();
        let gate = crate::write::gate_preview(self, &preview)?;
        let verdict = GateVerdict { passes: gate.passed(), blocking: gate.blocking, warnings: gate.warnings };
        Ok(ProposalReview { status, changes, request: None, gate: Some(verdict) })
    }

    /// Every stored proposal's status, newest first.
    pub fn proposals(&self) -> Result<Vec<ProposalStatus>> {
        let root = self.root();
        nofollow::refuse_symlinked_state(root)?;
        let mut out = Vec::new();
        // Each folder is listed through its handle, opened beneath one handle on the root (no
        // link followed; the root's own path walked once).
        let base = crate::store::beneath::Folder::open(root, "", false).map_err(|e| nofollow::io_error("listing", "", e))?;
        for dir in [layout::PROPOSALS_DIR, layout::BATCH_PROPOSALS_DIR, layout::ACTION_PROPOSALS_DIR, layout::POWER_PROPOSALS_DIR] {
            let entries = match base.open_beneath(dir).and_then(|f| f.entries()) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(nofollow::io_error("listing", dir, e)),
            };
            for (name, _) in entries {
                let Some(id) = name.strip_suffix(".json").filter(|id| check_id(id).is_ok()) else { continue };
                let governed = if dir == layout::POWER_PROPOSALS_DIR {
                    // P.O.W.E.R.'s pending proposals, unless paravault holds the same id.
                    if out.iter().any(|p: &ProposalStatus| p.proposal_id == id) {
                        continue;
                    }
                    Ok(crate::write::operations::stored_proposal(root, id).map(Governed::Apply))
                } else if dir == layout::PROPOSALS_DIR {
                    read_apply_proposal(root, id).map(|p| p.map(Governed::Apply))
                } else if dir == layout::BATCH_PROPOSALS_DIR {
                    read_batch(root, id).map(|b| b.map(Governed::Batch))
                } else {
                    read_action(root, id).map(|a| a.map(Governed::Action))
                };
                // One unreadable file (or a proposal naming a path no longer valid) must not hide
                // the others from a person: it is logged and left alone.
                match governed.and_then(|g| g.map(|g| self.status_of(&g)).transpose()) {
                    Ok(Some(status)) => out.push(status),
                    Ok(None) => {}
                    Err(error) => tracing::warn!(proposal = id, %error, "a stored proposal cannot be read; skipped"),
                }
            }
        }
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.proposal_id.cmp(&b.proposal_id)));
        Ok(out)
    }

    /// Proposals waiting for a person: pending, current, and under a `human` rule.
    pub fn pending_approvals(&self) -> Result<usize> {
        Ok(self.proposals()?.iter().filter(|p| p.state == ProposalState::Pending && p.approver == Approver::Human).count())
    }

    /// Records a person's decision after checking their approver secret. The record is created
    /// once and never replaced: a second decision on the same proposal is `already_decided`.
    /// Approving a proposal whose notes changed since is `approval_stale`.
    pub fn decide(&self, request: &DecisionRequest) -> Result<DecisionRecord> {
        self.decide_with_approvers(&secrets::default_dir()?, request)
    }

    /// `decide` against the approvers file in `config_dir` (tests pass a temporary folder).
    pub fn decide_with_approvers(&self, config_dir: &Path, request: &DecisionRequest) -> Result<DecisionRecord> {
        check_id(&request.proposal_id)?;
        secrets::check_name(&request.approver)?;
        if request.comment.chars().count() > COMMENT_CHARS_MAX {
            return Err(Error::InvalidArgument { name: "comment", reason: format!("at most {COMMENT_CHARS_MAX} characters") });
        }
        let approver = secrets::authenticate(config_dir, &request.approver, &request.secret)?;
        self.decide_authenticated(&approver, &request.proposal_id, request.decision, request.channel, &request.comment)
    }

    /// Records the decision of an approver who already proved their secret (the web UI's
    /// logged-in approver). Same rules as `decide`: created once, never replaced.
    pub(crate) fn decide_authenticated(
        &self,
        approver: &secrets::AuthenticatedApprover,
        proposal_id: &str,
        decision: Decision,
        channel: ApprovalChannel,
        comment: &str,
    ) -> Result<DecisionRecord> {
        check_id(proposal_id)?;
        if comment.chars().count() > COMMENT_CHARS_MAX {
            return Err(Error::InvalidArgument { name: "comment", reason: format!("at most {COMMENT_CHARS_MAX} characters") });
        }
        let request = DecisionRequest {
            proposal_id: proposal_id.to_string(),
            decision,
            approver: approver.name().to_string(),
            secret: String::new(),
            channel,
            comment: comment.to_string(),
        };
        let root = self.root();
        nofollow::refuse_symlinked_state(root)?;
        let governed = load(root, &request.proposal_id)?;
        if let Some((existing, _)) = read_decision_file(root, &request.proposal_id)? {
            if unhonoured(root, &existing)?.is_none() {
                return Err(Error::AlreadyDecided { proposal_id: request.proposal_id.clone(), decision: existing.decision.name() });
            }
            // A record that does not verify (forged, or signed by a revoked key) blocks nothing:
            // it is moved aside, byte for byte, and the person's decision takes its place.
            set_aside(root, &request.proposal_id)?;
        }
        let active = keys::active_keys(root)?;
        let signing = approver.signing_key();
        if signatures_required(root, active.as_ref()) {
            // Refused before anything is written: a decision this vault would not honour.
            let refuse = |reason: String| Error::SignatureInvalid { what: format!("approver '{}'", request.approver), reason };
            let Some(key) = signing else {
                return Err(refuse("this vault honours only signed decisions and the approver has no signing key; give them one with `paravault approver key NAME`, then register it with `paravault approver register NAME`".into()));
            };
            let Some(active) = &active else {
                return Err(refuse(format!(
                    "this replica has no approver-key registry ({}); the first approver creates it with `paravault approver register {}`",
                    layout::APPROVER_KEYS,
                    request.approver
                )));
            };
            let public = crate::hex::encode(key.verifying_key().as_bytes());
            if !active.holds(&request.approver, &public) {
                return Err(refuse(format!(
                    "their key is not active in {}: an approver registers it with `paravault approver register {} --public-key {public}`",
                    layout::APPROVER_KEYS,
                    request.approver
                )));
            }
        }
        if request.decision == Decision::Approved {
            let (current, applied) = currency(root, &governed)?;
            if !current || applied {
                return Err(Error::ApprovalStale {
                    proposal_id: request.proposal_id.clone(),
                    reason: if applied {
                        "the notes already hold the proposed change".into()
                    } else {
                        "the notes changed since it was proposed".into()
                    },
                });
            }
        }
        let record = DecisionRecord {
            schema: DECISION_SCHEMA.into(),
            proposal_id: request.proposal_id.clone(),
            proposal_sha256: governed.sha256()?,
            operation: governed.operation(),
            decision: request.decision,
            approver: request.approver.clone(),
            channel: request.channel,
            decided_at: self.clock().stamp(chrono::SecondsFormat::Micros),
            comment: request.comment.clone(),
            signature: None,
        };
        let record = match signing {
            Some(key) => DecisionRecord { signature: Some(keys::sign(key, &record.signed_bytes()?)), ..record },
            None => record,
        };
        durable::create_dir_all(root, &layout::join(root, layout::APPROVAL_DECISIONS_DIR))?;
        if durable::create_new(root, &decision_path(root, &request.proposal_id), &encode(&record, "decision record")?)? {
            let rel = format!("{}/{}.json", layout::APPROVAL_DECISIONS_DIR, request.proposal_id);
            crate::write::replica::commit_records(
                self,
                self.writer(),
                &[rel],
                &format!("{} {} by {}", record.decision.name(), request.proposal_id, record.approver),
            );
            Ok(record)
        } else {
            // Another decision won the race; it stands.
            let decision = read_decision(root, &request.proposal_id)?.map_or(request.decision, |(r, _)| r.decision);
            Err(Error::AlreadyDecided { proposal_id: request.proposal_id.clone(), decision: decision.name() })
        }
    }
}
