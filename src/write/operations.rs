//! The write operations with P.O.W.E.R.'s names and parameters: `ingest_note`,
//! `synthesize_session`, `propose_memory_change`, and the checks `apply_memory_change` runs
//! before the approval gate (`check_proposal`, `validate_note_text`; the apply itself is a
//! governed write, defined in `approvals`). Each validates its request into a `Mutation` and
//! runs the one transaction (`write::execute`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Writer;
use super::receipts::Receipt;
use super::{Cleared, Mutation, NoteChange, execute_rendered, sha256_hex};
use crate::error::{Error, Result};
use crate::note::frontmatter;
use crate::note::metadata;
use crate::note::path::VaultPath;
use crate::note::yaml_edit::quoted as quote;
use crate::state::resolve_note_path;
use crate::state::{Channel, VaultState};
use crate::store::{durable, layout};

/// `ingest_note` parameters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IngestRequest {
    pub name: String,
    pub note_type: String,
    pub title: String,
    pub description: String,
    pub content: String,
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub expected_sha256: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `synthesize_session` parameters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SynthesizeRequest {
    pub name: String,
    pub title: String,
    pub description: String,
    pub content: String,
    #[serde(default = "daily_log")]
    pub note_type: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub related: Vec<String>,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub expected_sha256: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

fn daily_log() -> String {
    crate::policy::DEFAULT_SYNTHESIS_TYPE.into()
}

/// What `read_memory_history` returns: the newest receipts, oldest first.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemoryHistory {
    /// The receipts, each exactly as its line of the log holds it (content-free): in a vault
    /// P.O.W.E.R. served, its receipts first (`power.receipt.v1`, every value a string, no
    /// `seq`), then paravault's.
    #[schemars(with = "Vec<HistoryEntry>")]
    pub receipts: Vec<Value>,
}

/// One receipt of `read_memory_history` (schema only).
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum HistoryEntry {
    /// A receipt of paravault's hash chain.
    Paravault(Box<Receipt>),
    /// A receipt P.O.W.E.R. wrote before the vault was handed over, as its line holds it.
    Power(BTreeMap<String, String>),
}

/// A stored, content-addressed proposal: `propose_memory_change`'s result, handed back
/// unchanged to `apply_memory_change`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Proposal {
    /// The note's vault-relative path.
    pub path: String,
    /// The note's sha256 now.
    pub before_sha256: String,
    /// The note's sha256 after the change.
    pub after_sha256: String,
    /// The note's whole new text.
    pub content: String,
    /// The proposal's id (content-addressed).
    pub proposal_id: String,
    /// The key that makes applying it again replay the receipt.
    pub idempotency_key: String,
    /// When the proposal was made (RFC 3339).
    #[serde(default)]
    pub created_at: String,
}

/// Who made a proposal: taken from the handle's channel and named agent (never from the
/// request), as receipts take theirs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposer {
    /// The receipt actor: `agent` or `human`.
    pub actor: String,
    /// The surface it came through: `agent` (MCP or a library caller), `person` (the CLI) or
    /// `web` (the web UI).
    pub channel: Channel,
    /// The named agent (`paravault mcp --agent NAME`), when the server names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Proposer {
    /// The proposer of a proposal made through `vault` now.
    pub fn of(vault: &VaultState) -> Self {
        Proposer { actor: vault.channel().actor().into(), channel: vault.channel(), agent: vault.agent().map(str::to_string) }
    }

    /// In words: `agent "NAME" via MCP`, `human via the CLI`, `human via the web UI`.
    pub fn describe(&self) -> String {
        let surface = match self.channel {
            Channel::Agent => "MCP",
            Channel::Person => "the CLI",
            Channel::Web => "the web UI",
        };
        match &self.agent {
            Some(agent) => format!("{} \"{agent}\" via {surface}", self.actor),
            None => format!("{} via {surface}", self.actor),
        }
    }
}

/// A proposal as its record under `.paravault/proposals/` holds it: the proposal (exactly what
/// `propose_memory_change` returned), who made it, and the note's text it was made against.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProposalRecord {
    #[serde(flatten)]
    pub proposal: Proposal,
    /// Who proposed it (absent on records stored before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_by: Option<Proposer>,
    /// The note's text when it was proposed (its sha256 is `before_sha256`; empty for a new
    /// note): what applying it replaces, kept so that an applied proposal still shows its diff.
    /// Absent on records stored before it was kept, and when the note's bytes are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_content: Option<String>,
}

/// The provenance the engine writes for a note it renders: set from the channel, never from
/// the request.
struct Provenance {
    /// The receipt's `operation`.
    operation: &'static str,
    /// `memory.sources`.
    source: &'static str,
    /// `memory.write_policy`.
    write_policy: &'static str,
}

fn provenance(channel: Channel, tool: &str) -> Provenance {
    match (channel, tool) {
        (Channel::Agent, "ingest") => {
            Provenance { operation: "mcp.ingest_note", source: "paravault://mcp/ingest_note", write_policy: "agent-proposed" }
        }
        (Channel::Agent, _) => {
            Provenance { operation: "synthesize.session", source: "paravault://synthesize_session", write_policy: "agent-proposed" }
        }
        (Channel::Person, "ingest") => Provenance { operation: "cli.ingest", source: "paravault://cli/ingest", write_policy: "human" },
        (Channel::Person, _) => Provenance { operation: "cli.synthesize", source: "paravault://cli/synthesize", write_policy: "human" },
        (Channel::Web, "ingest") => Provenance { operation: "web.ingest", source: "paravault://web/ingest", write_policy: "human" },
        (Channel::Web, _) => Provenance { operation: "web.synthesize", source: "paravault://web/synthesize", write_policy: "human" },
    }
}

fn flow_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|i| quote(i)).collect::<Vec<_>>().join(", "))
}

/// Renders an OKF note the way P.O.W.E.R. does (field order, quoting), timestamp (the vault's
/// clock, to the second) last.
fn render_note(fields: &NoteFields<'_>) -> String {
    let mut yaml = String::new();
    yaml.push_str(&format!("type: {}\n", quote(fields.note_type)));
    yaml.push_str(&format!("title: {}\n", quote(fields.title.trim())));
    yaml.push_str(&format!("description: {}\n", quote(fields.description.trim())));
    if let Some(resource) = fields.resource.filter(|r| !r.trim().is_empty()) {
        yaml.push_str(&format!("resource: {}\n", quote(resource.trim())));
    }
    let tags: Vec<String> = fields.tags.iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
    if !tags.is_empty() {
        yaml.push_str(&format!("tags: {}\n", flow_list(&tags)));
    }
    if let Some(owner) = fields.owner.filter(|o| !o.trim().is_empty()) {
        yaml.push_str(&format!("owner: {}\n", quote(owner.trim())));
    }
    yaml.push_str("okf_version: \"0.2\"\n");
    let body = format!("\n{}\n", fields.content.trim_end());
    yaml.push_str(&format!(
        "memory:\n  kind: {}\n  sources: [{}]\n  evidence: [{}]\n  write_policy: {}\n",
        fields.memory_kind,
        quote(fields.provenance.source),
        quote(&format!("sha256:{}", sha256_hex(body.as_bytes()))),
        fields.provenance.write_policy
    ));
    if !fields.related.is_empty() {
        yaml.push_str(&format!("related: {}\n", flow_list(fields.related)));
    }
    yaml.push_str(&format!("timestamp: {}\n", fields.stamped_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)));
    format!("---\n{yaml}---\n{body}")
}

struct NoteFields<'a> {
    note_type: &'a str,
    title: &'a str,
    description: &'a str,
    resource: Option<&'a str>,
    tags: &'a [String],
    owner: Option<&'a str>,
    related: &'a [String],
    content: &'a str,
    memory_kind: &'a str,
    provenance: &'a Provenance,
    stamped_at: chrono::DateTime<chrono::Utc>,
}

/// What idempotency compares for a note the engine renders: the caller's request without its
/// idempotency key (the stamped text would differ from one second to the next).
fn request_identity(request: &impl Serialize) -> Value {
    let mut value = serde_json::to_value(request).unwrap_or(Value::Null);
    if let Some(fields) = value.as_object_mut() {
        fields.remove("idempotency_key");
    }
    value
}

fn note_path(vault: &VaultState, name: &str) -> Result<VaultPath> {
    let name = if name.ends_with(".md") { name.to_string() } else { format!("{name}.md") };
    let (path, _) = resolve_note_path(vault.root(), &name, &vault.policy().policy.layout)?;
    Ok(path)
}

fn require_text(name: &'static str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::InvalidArgument { name, reason: "must not be empty".into() });
    }
    Ok(())
}

fn log_entry(day: chrono::NaiveDate, action: &str, verb: &str, title: &str, path: &VaultPath, extra: &[(&str, String)]) -> String {
    let mut entry = format!("\n## [{}] {action} | {verb} {}\n- Action: {action}\n- Result: {path}\n", day, title.trim().replace('\n', " "));
    for (k, v) in extra {
        entry.push_str(&format!("- {k}: {v}\n"));
    }
    entry
}

/// The mutation that writes one note created by ingest or synthesize: the target must not exist
/// unless the caller names the version it replaces with `expected_sha256`.
fn new_note(
    operation: &'static str,
    path: VaultPath,
    content: String,
    expected_sha256: Option<String>,
    idempotency_key: Option<String>,
    log: String,
) -> Mutation {
    Mutation {
        operation: operation.into(),
        notes: vec![NoteChange { path, content: Some(content), require_absent: expected_sha256.is_none(), expected_sha256 }],
        idempotency_key,
        proposal_id: None,
        log_entry: Some(log),
        create_folders: false,
    }
}

/// Checks that text is a note with valid OKF metadata (before anything is stored or written).
pub(crate) fn validate_note_text(vault: &VaultState, path: &VaultPath, text: &str) -> Result<()> {
    let invalid = |reason: String| Error::InvalidContent { path: path.to_string(), reason };
    // Sized before anything parses it: an oversized text costs no parser work.
    let limit = vault.policy().policy.limits.note_bytes_max;
    if text.len() as u64 > limit {
        return Err(invalid(format!("{} bytes, over the policy limit of {limit}", text.len())));
    }
    let split = frontmatter::split(text).map_err(|p| invalid(p.to_string()))?;
    let fm = frontmatter::parse(&split).map_err(|p| invalid(p.to_string()))?;
    let (_, problems) = metadata::validate(&fm, vault.policy());
    if problems.is_empty() {
        Ok(())
    } else {
        Err(invalid(problems.iter().map(|p| format!("{}: {}", p.field, p.message)).collect::<Vec<_>>().join("; ")))
    }
}

impl VaultState {
    /// Refuses note text whose `memory.write_policy` is one the policy reserves for a person
    /// (`metadata.person_only_write_policies`, e.g. `human`) unless this handle writes for a
    /// person: an agent cannot claim a person wrote its text.
    pub(crate) fn refuse_claimed_provenance(&self, path: &VaultPath, text: &str) -> Result<()> {
        if matches!(self.channel(), Channel::Person | Channel::Web) {
            return Ok(());
        }
        let Ok(split) = frontmatter::split(text) else { return Ok(()) };
        let Ok(fm) = frontmatter::parse(&split) else { return Ok(()) };
        let claimed = fm.get("memory").and_then(|m| m.get("write_policy")).and_then(serde_yaml::Value::as_str).map(str::trim);
        match claimed {
            Some(policy) if self.policy().policy.metadata.person_only_write_policies.iter().any(|p| p == policy) => {
                Err(Error::InvalidContent {
                    path: path.to_string(),
                    reason: format!(
                        "memory.write_policy '{policy}' is set by the engine for a person's writes; an agent's text must say agent-proposed"
                    ),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Creates one new note (the target must not exist) through the write transaction.
pub(crate) fn ingest_note(vault: &VaultState, writer: &Writer, request: &IngestRequest) -> Result<Receipt> {
    require_text("title", &request.title)?;
    require_text("description", &request.description)?;
    let path = note_path(vault, &request.name)?;
    let provenance = provenance(vault.channel(), "ingest");
    let content = render_note(&NoteFields {
        note_type: &request.note_type,
        title: &request.title,
        description: &request.description,
        resource: request.resource.as_deref(),
        tags: &request.tags,
        owner: None,
        related: &[],
        content: &request.content,
        memory_kind: "semantic",
        provenance: &provenance,
        stamped_at: vault.now(),
    });
    validate_note_text(vault, &path, &content)?;
    let log = log_entry(vault.now().date_naive(), "ingest", "Created", &request.title, &path, &[]);
    let mutation = new_note(provenance.operation, path, content, request.expected_sha256.clone(), request.idempotency_key.clone(), log);
    let cleared = Cleared::new_notes(vault, &mutation)?;
    execute_rendered(vault, writer, mutation, &request_identity(request), cleared)
}

/// Creates one synthesis note (Daily Log by default, episodic memory) through the transaction.
pub(crate) fn synthesize_session(vault: &VaultState, writer: &Writer, request: &SynthesizeRequest) -> Result<Receipt> {
    require_text("title", &request.title)?;
    require_text("description", &request.description)?;
    let path = note_path(vault, &request.name)?;
    // `related` names vault paths: each is parsed like any caller path (and stored normalised).
    let related = request.related.iter().map(|r| VaultPath::parse(r).map(|p| p.to_string())).collect::<Result<Vec<_>>>()?;
    let provenance = provenance(vault.channel(), "synthesize");
    let content = render_note(&NoteFields {
        note_type: &request.note_type,
        title: &request.title,
        description: &request.description,
        resource: None,
        tags: &request.tags,
        owner: request.owner.as_deref(),
        related: &related,
        content: &request.content,
        memory_kind: "episodic",
        provenance: &provenance,
        stamped_at: vault.now(),
    });
    validate_note_text(vault, &path, &content)?;
    let mut extra = Vec::new();
    if !related.is_empty() {
        extra.push(("Related", related.join(", ")));
    }
    if let Some(owner) = &request.owner {
        extra.push(("Owner", owner.clone()));
    }
    let log = log_entry(vault.now().date_naive(), "synthesize", "Synthesized", &request.title, &path, &extra);
    let mutation = new_note(provenance.operation, path, content, request.expected_sha256.clone(), request.idempotency_key.clone(), log);
    let cleared = Cleared::new_notes(vault, &mutation)?;
    execute_rendered(vault, writer, mutation, &request_identity(request), cleared)
}

/// Validates and stores a content-addressed proposal; never writes the note.
/// `expected_sha256` names the version the edit was based on; a different current version is
/// a typed conflict (optimistic concurrency).
pub(crate) fn propose_memory_change(
    vault: &VaultState,
    writer: &Writer,
    path: &str,
    content: &str,
    idempotency_key: Option<&str>,
    expected_sha256: Option<&str>,
) -> Result<Proposal> {
    let (path, _) = resolve_note_path(vault.root(), path, &vault.policy().policy.layout)?;
    validate_note_text(vault, &path, content)?;
    vault.refuse_claimed_provenance(&path, content)?;
    let _writer = writer.lock(vault)?;
    let before = crate::store::beneath::read(vault.root(), path.as_str())?.unwrap_or_default();
    let before_sha256 = sha256_hex(&before);
    if let Some(expected) = expected_sha256
        && !expected.eq_ignore_ascii_case(&before_sha256)
    {
        return Err(Error::PreconditionFailed { path: path.to_string(), expected: expected.to_string(), found: before_sha256 });
    }
    let after_sha256 = sha256_hex(content.as_bytes());
    let proposal_id = proposal_id(path.as_str(), &before_sha256, &after_sha256, content);
    let stored_path = layout::join(vault.root(), &format!("{}/{proposal_id}.json", layout::PROPOSALS_DIR));
    if let Ok(bytes) = durable::read_engine_file(vault.root(), &stored_path) {
        let stored: Proposal =
            serde_json::from_slice(&bytes).map_err(|_| Error::ProposalInvalid { reason: "stored proposal is unreadable".into() })?;
        if stored.path != path.as_str() || stored.content != content || stored.before_sha256 != before_sha256 {
            return Err(Error::ProposalInvalid { reason: "content-addressed proposal collision".into() });
        }
        return Ok(stored);
    }
    let proposal = Proposal {
        path: path.to_string(),
        before_sha256,
        after_sha256,
        content: content.to_string(),
        idempotency_key: idempotency_key.map_or_else(|| proposal_id.clone(), str::to_string),
        proposal_id,
        created_at: vault.clock().stamp(chrono::SecondsFormat::Secs),
    };
    let record = ProposalRecord {
        proposal: proposal.clone(),
        proposed_by: Some(Proposer::of(vault)),
        before_content: String::from_utf8(before).ok(),
    };
    durable::create_dir_all(vault.root(), &layout::join(vault.root(), layout::PROPOSALS_DIR))?;
    let json = serde_json::to_vec_pretty(&record).map_err(|e| Error::io("encoding", "proposal", std::io::Error::other(e)))?;
    durable::replace(vault.root(), &stored_path, &json)?;
    let rel = format!("{}/{}.json", layout::PROPOSALS_DIR, proposal.proposal_id);
    crate::write::replica::commit_records_locked(vault, &[rel], &format!("proposal {}", proposal.proposal_id));
    Ok(proposal)
}

impl VaultState {
    /// The receipt log counted per UTC day over the last `days` days (today included): receipts,
    /// aborted ones, notes written, approved writes, and the note, invalid-note and orphan
    /// counts the writes recorded. Counted once by reading the log back to the window's first
    /// day (kept with the vault's summaries), then caught up from the log's length: O(new
    /// receipts + days) per call.
    pub fn receipt_days(&self, days: usize) -> Result<crate::state::ReceiptActivity> {
        use super::receipts::ReceiptLog;
        use crate::state::{ActivityMemo, RECEIPTS_COUNTED_MAX, ReceiptDay};
        // Receipts are stamped with the clock's instant (never the configured day), so the
        // window ends on that instant's day.
        let to = self.now().date_naive();
        let back = u64::try_from(days.max(1) - 1).unwrap_or(0);
        let from = to.checked_sub_days(chrono::Days::new(back)).unwrap_or(to);
        let mut memo = self.receipt_days_memo();
        let fresh = match memo.as_mut() {
            Some(kept) if kept.from <= from => !ReceiptLog::days_catch_up(self.root(), &mut kept.counts, kept.from)?,
            _ => true,
        };
        if fresh {
            *memo = Some(ActivityMemo { from, counts: ReceiptLog::days(self.root(), from, RECEIPTS_COUNTED_MAX)? });
        }
        let kept = memo.as_mut().expect("BUG: the memo was just filled");
        // Days that left the window are dropped: the memo stays O(days).
        kept.counts.days.retain(|date, _| *date >= from);
        let out: Vec<ReceiptDay> = from
            .iter_days()
            .take_while(|d| *d <= to)
            .map(|date| kept.counts.days.get(&date).cloned().unwrap_or_else(|| ReceiptDay::empty(date)))
            .collect();
        Ok(crate::state::ReceiptActivity { from, to, days: out, cut: kept.counts.cut })
    }

    /// `read_memory_history`'s result: the newest `limit` receipts after `after_seq`.
    /// In a vault P.O.W.E.R. served, its receipts (`.power/memory-history.jsonl`, read where
    /// they lie) precede paravault's first one: the first page (`after_seq` 0) ends with the
    /// newest of them when paravault's leave room under `limit`.
    pub fn memory_history(&self, limit: usize, after_seq: u64) -> Result<MemoryHistory> {
        let mut receipts = self.read_memory_history(limit, after_seq)?;
        if after_seq == 0 && receipts.len() < limit {
            let power = super::receipts::ReceiptLog::power_history(self.root())?;
            let skip = power.len().saturating_sub(limit - receipts.len());
            receipts.splice(0..0, power.into_iter().skip(skip));
        }
        Ok(MemoryHistory { receipts })
    }

    /// The newest `limit` receipts after `after_seq` (content-free).
    pub fn read_memory_history(&self, limit: usize, after_seq: u64) -> Result<Vec<Value>> {
        if limit == 0 || limit > 1000 {
            return Err(Error::InvalidArgument { name: "limit", reason: "must be between 1 and 1000".into() });
        }
        crate::store::nofollow::refuse_symlinked_state(self.root())?;
        super::receipts::ReceiptLog::history(self.root(), limit, after_seq)
    }

    /// Verifies the receipt hash chain.
    pub fn verify_history(&self) -> Result<super::receipts::ChainReport> {
        self.verify_history_with(false)
    }

    /// Verifies the receipt hash chain and, with `check_files`, that every note an ok receipt
    /// names holds the `after_sha256` of the newest ok receipt that changed it (reads notes).
    pub fn verify_history_with(&self, check_files: bool) -> Result<super::receipts::ChainReport> {
        crate::store::nofollow::refuse_symlinked_state(self.root())?;
        let mut report = super::receipts::ReceiptLog::verify(self.root())?;
        report.replicas = super::replica::verify_mirrors(self.root())?;
        report.ok &= report.replicas.iter().all(|r| r.ok);
        if check_files {
            super::receipts::ReceiptLog::verify_files(self.root(), &mut report)?;
        }
        Ok(report)
    }
}

/// A proposal map as an agent hands it back, checked without touching the disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedProposal {
    /// The path as the agent wrote it (what the stored proposal holds).
    pub path: String,
    /// The same path parsed.
    pub note: VaultPath,
    pub content: String,
    pub before_sha256: String,
    pub after_sha256: String,
    pub proposal_id: String,
    pub idempotency_key: Option<String>,
}

/// Checks the fields of a proposal map an agent hands to `apply_memory_change`: every field a
/// string, the digests 64 hex characters, the content and the id matching their digests, the
/// path a vault path. Pure (fuzzed by `fuzz/`); whether the proposal is durable is the
/// caller's check.
pub fn check_proposal(proposal: &BTreeMap<String, Value>) -> Result<CheckedProposal> {
    let refuse = |reason: &str| Error::ProposalInvalid { reason: reason.to_string() };
    let field = |name: &str| -> Result<String> {
        proposal
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| refuse(&format!("'{name}' is missing or not a string")))
    };
    let (path, content, before, after, id) =
        (field("path")?, field("content")?, field("before_sha256")?, field("after_sha256")?, field("proposal_id")?);
    let is_hex64 = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if ![&before, &after, &id].iter().all(|s| is_hex64(s)) {
        return Err(refuse("digests must be 64 hex characters"));
    }
    if sha256_hex(content.as_bytes()) != after {
        return Err(refuse("content hash does not match after_sha256"));
    }
    if proposal_id(&path, &before, &after, &content) != id {
        return Err(refuse("proposal_id does not match the proposal's content"));
    }
    let note = VaultPath::parse(&path)?;
    let idempotency_key = proposal.get("idempotency_key").and_then(Value::as_str).map(str::to_string);
    Ok(CheckedProposal { path, note, content, before_sha256: before, after_sha256: after, proposal_id: id, idempotency_key })
}

/// The durable proposal stored under `id`: paravault's own (`.paravault/proposals/`), else one
/// P.O.W.E.R. left in `.power/proposals/<id>.json` in a vault it served (issue 50), read where
/// it lies (never copied or changed) and taken only when it hashes to its id: its content to
/// `after_sha256` and its payload to `id`. Such a proposal is what an agent could propose
/// itself; it carries no approval, and applying it passes the same gate as any proposal.
pub(crate) fn stored_proposal(root: &std::path::Path, id: &str) -> Option<Proposal> {
    let read = |dir: &str| {
        durable::read_engine_file(root, &layout::join(root, &format!("{dir}/{id}.json")))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Proposal>(&bytes).ok())
    };
    read(layout::PROPOSALS_DIR).or_else(|| {
        read(layout::POWER_PROPOSALS_DIR).filter(|p| {
            p.proposal_id == id
                && sha256_hex(p.content.as_bytes()) == p.after_sha256
                && proposal_id(&p.path, &p.before_sha256, &p.after_sha256, &p.content) == id
        })
    })
}

/// sha256 of the canonical JSON (sorted keys, compact, UTF-8 unescaped) of the payload, as
/// P.O.W.E.R. computes it, so proposal ids match across the two systems.
pub fn proposal_id(path: &str, before_sha256: &str, after_sha256: &str, content: &str) -> String {
    let payload: BTreeMap<&str, &str> =
        [("after_sha256", after_sha256), ("before_sha256", before_sha256), ("content", content), ("path", path)].into_iter().collect();
    sha256_hex(serde_json::to_string(&payload).unwrap_or_default().as_bytes())
}
