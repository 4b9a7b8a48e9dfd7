//! Project goals (stepstone's roadmap): the goal model, the application service every adapter
//! shares (`run` → the stepstone envelope), and the mutations, each one `Mutation` of the
//! vault's worklist note run through the approval gate (`approvals::execute_checked`).
//!
//! - `format` — the worklist note (Markdown a person can read and edit, schema version 1).
//! - `graph`  — blocked / blocks / ready / next / waves.
//!
//! Every operation re-reads the worklist note from disk. A mutation computes the new note from
//! what it read and writes it with that read's sha256 as `expected_sha256` (or
//! `require_absent`), so an edit made meanwhile is never overwritten: the write is refused,
//! the note re-read (a hand edit that parses becomes the new state) and the change re-applied,
//! at most `WRITE_ATTEMPTS` times; a note that does not parse is `WORKLIST_INVALID` with the
//! problems by line, and is never written. docs/goals.md.

/// The worklist note format (it lives with the note model: the approval gate reads it).
pub use crate::note::worklist as format;
pub mod graph;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, SecondsFormat, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::note::path::VaultPath;
use crate::vault::Vault;
use crate::write::{Mutation, NoteChange};
use format::NoteFrame;
use graph::Analysis;

/// The `scope` of every envelope (stepstone's project roadmap).
pub const SCOPE: &str = "project";

/// How often a mutation re-reads and re-applies after the note changed under it.
const WRITE_ATTEMPTS: usize = 3;

pub(crate) use crate::note::worklist::parse_timestamp;
pub use crate::note::worklist::{Goal, GoalStatus, Worklist};

/// A revision later than `previous`: `now`, or `previous` plus one millisecond when the clock
/// has not moved past it (revisions advance on every change, even within one millisecond).
fn later(previous: &str, now: &str) -> String {
    if now > previous {
        return now.to_string();
    }
    DateTime::parse_from_rfc3339(previous)
        .map(|t| (t.with_timezone(&Utc) + chrono::Duration::milliseconds(1)).to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|_| now.to_string())
}

// ---- errors ----

/// A typed failure of a goal operation (the envelope's `error`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GoalError {
    /// Stable code (docs/goals.md#errors).
    pub code: &'static str,
    pub message: String,
    pub retryable: bool,
    pub details: Option<Value>,
}

impl GoalError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        GoalError { code, message: message.into(), retryable: false, details: None }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn invalid(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        GoalError::new("INVALID_INPUT", format!("{field}: {message}")).with_details(json!({"field": field}))
    }

    /// The engine error a write or read ran into.
    fn from_engine(error: &Error) -> Self {
        // A person must decide (docs/governance.md): the proposal id is what they approve.
        let approval = |code: &'static str, proposal_id: &str, resolution: &str| GoalError {
            code,
            message: error.to_string(),
            retryable: false,
            details: Some(json!({"engineCode": error.code(), "proposalId": proposal_id, "resolution": resolution})),
        };
        match error {
            Error::HumanApprovalRequired { operation, proposal_id } => {
                let mut refused = approval(
                    "HUMAN_APPROVAL_REQUIRED",
                    proposal_id,
                    "ask-a-person-to-run: paravault approve <proposalId>; then repeat this exact call",
                );
                if let Some(details) = refused.details.as_mut() {
                    details["operation"] = json!(operation);
                    details["reviewUrl"] = Value::Null;
                }
                return refused;
            }
            Error::ProposalRejected { proposal_id, approver, comment } => {
                let mut refused = approval("PROPOSAL_REJECTED", proposal_id, "do-not-retry: a person rejected this change");
                if let Some(details) = refused.details.as_mut() {
                    details["approver"] = json!(approver);
                    details["comment"] = json!(comment);
                }
                return refused;
            }
            Error::ApprovalStale { proposal_id, .. } => {
                return approval("APPROVAL_STALE", proposal_id, "re-read the goal and ask for a new approval");
            }
            _ => {}
        }
        let code: &'static str = match error {
            Error::PreconditionFailed { .. } | Error::AlreadyExists { .. } => "CONFLICT",
            Error::GateRejected { .. } => "LINT_GATE_REJECTED",
            _ if error.retryable() => "UNAVAILABLE",
            Error::InvalidContent { .. } => "INVALID_INPUT",
            _ => "UNAVAILABLE",
        };
        GoalError {
            code,
            message: error.to_string(),
            retryable: error.retryable() || code == "CONFLICT",
            details: Some(json!({"engineCode": error.code()})),
        }
    }

    fn confirmation_required(action: &str) -> Self {
        GoalError::new(
            "APPROVAL_REQUIRED",
            format!(
                "{action} changes a goal's lifecycle and needs confirm=true, passed only after the user explicitly asked for this exact action on this exact goal"
            ),
        )
        .with_details(json!({"confirmation": "confirm=true", "resolution": "request-explicit-user-confirmation", "action": action}))
    }
}

// ---- requests ----

/// `add`: a new open goal at the end of the worklist.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AddInput {
    /// The goal's title (one line).
    pub title: String,
    /// What the goal means and when it is done (Markdown).
    #[serde(default)]
    pub description: Option<String>,
    /// A free grouping label.
    #[serde(default)]
    pub group: Option<String>,
    /// Goal IDs or unique ID prefixes this goal waits for.
    #[serde(default)]
    pub depends_on: Option<Vec<String>>,
    /// Absolute http(s) URLs kept for a reader.
    #[serde(default)]
    pub links: Option<Vec<String>>,
}

/// `apply-plan`: a JSON array of plan entries, validated and added atomically.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApplyPlanInput {
    /// The plan: a JSON array of entries (or a string holding one).
    pub plan: Value,
    /// Only validate; never an approval.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// `update`: edits a goal; a supplied `dependsOn` or `links` replaces the whole set.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateInput {
    /// Goal ID or unique ID prefix.
    pub id: String,
    #[serde(default)]
    pub title: Option<String>,
    /// Replaces the description ("" clears it).
    #[serde(default)]
    pub description: Option<String>,
    /// Appended to the description after a blank line.
    #[serde(default)]
    pub append_description: Option<String>,
    /// Replaces the group ("" clears it).
    #[serde(default)]
    pub group: Option<String>,
    /// Replaces the whole dependency set (goal IDs or unique prefixes; [] clears it).
    #[serde(default)]
    pub depends_on: Option<Vec<String>>,
    /// Replaces the whole link set ([] clears it).
    #[serde(default)]
    pub links: Option<Vec<String>>,
    /// The goal's `updatedAt` from the caller's last read: a concurrent edit is a conflict.
    #[serde(default)]
    pub expected_updated_at: Option<String>,
}

/// `move` direction.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
}

/// `move`: one of `direction`, `beforeId`, `afterId`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MoveInput {
    /// Goal ID or unique ID prefix.
    pub id: String,
    #[serde(default)]
    pub direction: Option<Direction>,
    /// Place the goal just before this goal.
    #[serde(default)]
    pub before_id: Option<String>,
    /// Place the goal just after this goal.
    #[serde(default)]
    pub after_id: Option<String>,
    #[serde(default)]
    pub expected_updated_at: Option<String>,
}

/// `set_active`: makes a goal the single active goal.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetActiveInput {
    /// Goal ID or unique ID prefix.
    pub id: String,
    #[serde(default)]
    pub expected_updated_at: Option<String>,
}

/// `complete`, `reopen`, `archive`, `delete`: lifecycle changes under exact confirmation.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfirmedInput {
    /// Goal ID or unique ID prefix.
    pub id: String,
    /// true only after the user explicitly asked for this exact action on this exact goal.
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    pub confirm: Option<Value>,
    #[serde(default)]
    pub expected_updated_at: Option<String>,
}

/// The lifecycle actions that need confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    Complete,
    Reopen,
    Archive,
    Delete,
}

impl Lifecycle {
    pub fn action(self) -> &'static str {
        match self {
            Lifecycle::Complete => "complete",
            Lifecycle::Reopen => "reopen",
            Lifecycle::Archive => "archive",
            Lifecycle::Delete => "delete",
        }
    }
}

/// Every operation of the application service.
#[derive(Debug, Clone)]
pub enum GoalRequest {
    List,
    Show { id: String },
    Find { query: String },
    Next,
    Ready,
    Waves,
    Add(AddInput),
    ApplyPlan(ApplyPlanInput),
    Update(UpdateInput),
    Move(MoveInput),
    SetActive(SetActiveInput),
    Lifecycle(Lifecycle, ConfirmedInput),
}

impl GoalRequest {
    /// The envelope's `action`.
    pub fn action(&self) -> &'static str {
        match self {
            GoalRequest::List => "list",
            GoalRequest::Show { .. } => "show",
            GoalRequest::Find { .. } => "find",
            GoalRequest::Next => "next",
            GoalRequest::Ready => "ready",
            GoalRequest::Waves => "waves",
            GoalRequest::Add(_) => "add",
            GoalRequest::ApplyPlan(_) => "apply-plan",
            GoalRequest::Update(_) => "update",
            GoalRequest::Move(_) => "move",
            GoalRequest::SetActive(_) => "set_active",
            GoalRequest::Lifecycle(kind, _) => kind.action(),
        }
    }
}

/// The stepstone application-service envelope (docs/goals.md#envelope): one operation's
/// answer, its success or its typed failure.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Envelope {
    /// Whether the operation succeeded (`result`) or failed (`error`).
    pub ok: bool,
    /// Always `project`.
    #[schemars(extend("const" = "project"))]
    pub scope: String,
    /// The operation (the tool's or resource's name).
    pub action: String,
    /// What a successful operation produced: `scope`, `action` and the operation's fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Map<String, Value>>,
    /// Why the operation failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<EnvelopeError>,
    /// What the operation changed.
    pub meta: EnvelopeMeta,
}

/// A failed operation's typed error (docs/goals.md#errors).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EnvelopeError {
    /// The stable error code.
    pub code: String,
    /// What went wrong, in words.
    pub message: String,
    /// Whether the same call may succeed later.
    pub retryable: bool,
    /// The code's structured detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// What an operation changed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvelopeMeta {
    /// Whether the worklist was written.
    pub changed: bool,
    /// Whether the operation asked for what already was.
    pub semantic_no_op: bool,
    /// The goal fields the operation changed, sorted.
    pub changed_fields: Vec<String>,
    /// The worklist's revision (`project`), when known.
    pub revisions: BTreeMap<String, String>,
    /// The write's receipt sequence number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_seq: Option<u64>,
    /// A person's approval the write ran under (the receipt's `approval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Value>,
}

impl Envelope {
    /// The envelope as JSON, as every surface sends it.
    pub fn json(&self) -> Value {
        serde_json::to_value(self).expect("BUG: an envelope (strings, numbers and JSON values) always serialises")
    }
}

// ---- the application service ----

/// Runs one goal operation and returns its stepstone envelope (success or typed failure).
pub fn run(vault: &Vault, request: GoalRequest) -> Envelope {
    let action = request.action();
    match dispatch(vault, request) {
        Ok(done) => Envelope {
            ok: true,
            scope: SCOPE.into(),
            action: action.into(),
            result: Some(with_scope(action, done.result)),
            error: None,
            meta: meta(done.changed, done.semantic_no_op, done.changed_fields, done.revision, done.receipt_seq, done.approval),
        },
        Err((error, revision)) => Envelope {
            ok: false,
            scope: SCOPE.into(),
            action: action.into(),
            result: None,
            error: Some(EnvelopeError {
                code: error.code.into(),
                message: error.message,
                retryable: error.retryable,
                details: error.details,
            }),
            meta: meta(false, false, Vec::new(), revision, None, None),
        },
    }
}

fn with_scope(action: &str, result: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("scope".into(), json!(SCOPE));
    out.insert("action".into(), json!(action));
    out.extend(result);
    out
}

fn meta(
    changed: bool,
    semantic_no_op: bool,
    mut changed_fields: Vec<String>,
    revision: Option<u64>,
    receipt: Option<u64>,
    approval: Option<Value>,
) -> EnvelopeMeta {
    changed_fields.sort();
    changed_fields.dedup();
    let revisions = revision.map(|revision| ("project".to_string(), revision.to_string())).into_iter().collect();
    EnvelopeMeta { changed, semantic_no_op, changed_fields, revisions, receipt_seq: receipt, approval }
}

/// What a successful operation produced.
struct Done {
    result: Map<String, Value>,
    changed: bool,
    semantic_no_op: bool,
    changed_fields: Vec<String>,
    revision: Option<u64>,
    receipt_seq: Option<u64>,
    /// A person's approval the write ran under (the receipt's `approval`).
    approval: Option<Value>,
}

type Failure = (GoalError, Option<u64>);

fn dispatch(vault: &Vault, request: GoalRequest) -> Result<Done, Failure> {
    // Confirmation comes first: an unconfirmed lifecycle call reads and writes nothing.
    if let GoalRequest::Lifecycle(kind, input) = &request
        && input.confirm != Some(Value::Bool(true))
    {
        return Err((GoalError::confirmation_required(kind.action()), None));
    }
    match request {
        GoalRequest::List
        | GoalRequest::Show { .. }
        | GoalRequest::Find { .. }
        | GoalRequest::Next
        | GoalRequest::Ready
        | GoalRequest::Waves => {
            let stored = load(vault).map_err(|e| (e, None))?;
            let revision = Some(stored.worklist.revision);
            read(&stored.worklist, &request).map_err(|e| (e, revision)).map(|result| Done {
                result,
                changed: false,
                semantic_no_op: false,
                changed_fields: Vec::new(),
                revision,
                receipt_seq: None,
                approval: None,
            })
        }
        GoalRequest::ApplyPlan(input) if input.dry_run == Some(true) => {
            let stored = load(vault).map_err(|e| (e, None))?;
            let revision = Some(stored.worklist.revision);
            let limits = Limits::of(vault);
            let entries = validate_plan(&stored.worklist, &input.plan, &limits).map_err(|e| (e, revision))?;
            let preview: Vec<Value> = entries.iter().map(PlanEntry::preview).collect();
            let mut result = Map::new();
            result.insert("dryRun".into(), json!(true));
            result.insert("valid".into(), json!(true));
            result.insert("entries".into(), Value::Array(preview));
            Ok(Done {
                result,
                changed: false,
                semantic_no_op: false,
                changed_fields: Vec::new(),
                revision,
                receipt_seq: None,
                approval: None,
            })
        }
        other => mutate(vault, other),
    }
}

// ---- reading ----

/// The worklist as stored: its frame, goals and the sha256 of the bytes read (`None`: absent).
struct Stored {
    frame: NoteFrame,
    worklist: Worklist,
    sha256: Option<String>,
}

fn worklist_path(vault: &Vault) -> Result<VaultPath, GoalError> {
    let raw = &vault.policy().policy.goals.worklist_path;
    VaultPath::parse(raw).map_err(|e| GoalError::new("UNAVAILABLE", format!("goals.worklist_path in the policy is unusable: {e}")))
}

fn note_type(vault: &Vault, path: &VaultPath) -> String {
    let folder = path.as_str().split('/').next().unwrap_or("");
    vault
        .policy()
        .policy
        .note_types
        .iter()
        .find(|(_, t)| t.folder == folder)
        .map_or_else(|| "Project".to_string(), |(name, _)| name.clone())
}

fn load(vault: &Vault) -> Result<Stored, GoalError> {
    let path = worklist_path(vault)?;
    crate::store::nofollow::resolve_safe(vault.root(), path.as_str()).map_err(|e| GoalError::from_engine(&e))?;
    // Read through folder handles: a folder swapped for a link after the check is never read.
    let bytes = match crate::store::beneath::read(vault.root(), path.as_str()) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Ok(Stored { frame: format::new_frame(&note_type(vault, &path)), worklist: Worklist::default(), sha256: None });
        }
        Err(e) => return Err(GoalError::from_engine(&e)),
    };
    let sha256 = crate::write::sha256_hex(&bytes);
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| worklist_invalid(&path, vec![format::FormatProblem { line: 1, message: "not UTF-8".into() }]))?;
    let (frame, worklist) = format::parse(text).map_err(|problems| worklist_invalid(&path, problems))?;
    Ok(Stored { frame, worklist, sha256: Some(sha256) })
}

/// The lint rule of a worklist note that does not parse (`lint.rules` in policy).
pub(crate) const WORKLIST_INVALID_RULE: &str = "goals-worklist-invalid";

impl Vault {
    /// The vault-wide health report (`Vault::lint`) with the checks of the modules above the
    /// vault: a goal worklist note that does not parse (a hand edit, say) is one
    /// `goals-worklist-invalid` finding per problem, naming the note, the line and the parse
    /// error, so a person sees it in `lint_vault` / `paravault lint`, not only when a goal tool
    /// refuses to write. The adapters' lint entry points call this.
    pub fn lint_vault(&self) -> crate::error::Result<crate::lint::LintReport> {
        let mut report = self.lint()?;
        if let Err(error) = load(self)
            && error.code == "WORKLIST_INVALID"
            && let Some(details) = &error.details
        {
            let path = details["path"].as_str().unwrap_or_default().to_string();
            let severity = self.policy().severity(WORKLIST_INVALID_RULE);
            for problem in details["findings"].as_array().into_iter().flatten() {
                report.findings.push(crate::finding::Finding {
                    rule: WORKLIST_INVALID_RULE,
                    severity,
                    path: path.clone(),
                    line: problem["line"].as_u64().map(|l| l as usize),
                    message: format!(
                        "the goal worklist does not parse: {}; goal tools refuse to write it until a person fixes it",
                        problem["message"].as_str().unwrap_or_default()
                    ),
                    target: None,
                    candidates: Vec::new(),
                });
                *report.counts.entry(WORKLIST_INVALID_RULE).or_default() += 1;
            }
            report.findings.sort_by(|a, b| (&a.path, a.line, a.rule).cmp(&(&b.path, b.line, b.rule)));
            report.blocking = report.findings.iter().any(|f| f.severity == crate::finding::Severity::Blocking);
        }
        Ok(report)
    }
}

fn worklist_invalid(path: &VaultPath, problems: Vec<format::FormatProblem>) -> GoalError {
    let findings: Vec<Value> = problems.iter().map(|p| json!({"path": path.as_str(), "line": p.line, "message": p.message})).collect();
    let first = problems.first().map_or(String::new(), |p| format!(" (line {}: {})", p.line, p.message));
    GoalError::new(
        "WORKLIST_INVALID",
        format!("the worklist note {path} does not parse{first}; it is never overwritten: a person must fix it"),
    )
    .with_details(json!({"path": path.as_str(), "findings": findings}))
}

/// The JSON of one goal, with whether it is blocked and which goals it blocks.
fn goal_json(worklist: &Worklist, analysis: &Analysis, i: usize) -> Value {
    let goal = &worklist.goals[i];
    let mut value = json!({
        "id": goal.id, "title": goal.title, "status": goal.status.name(), "active": goal.active,
        "dependsOn": goal.depends_on, "links": goal.links, "createdAt": goal.created_at, "updatedAt": goal.updated_at,
        "blocked": analysis.blocked[i],
        "blocks": analysis.blocks[i].iter().map(|&j| worklist.goals[j].id.clone()).collect::<Vec<_>>(),
        "ready": analysis.is_ready(&worklist.goals, i),
    });
    if let Some(description) = &goal.description {
        value["description"] = json!(description);
    }
    if let Some(group) = &goal.group {
        value["group"] = json!(group);
    }
    value
}

fn read(worklist: &Worklist, request: &GoalRequest) -> Result<Map<String, Value>, GoalError> {
    let analysis = Analysis::of(worklist);
    let goals = &worklist.goals;
    let many = |indexes: Vec<usize>| Value::Array(indexes.into_iter().map(|i| goal_json(worklist, &analysis, i)).collect());
    let mut result = Map::new();
    match request {
        GoalRequest::List => {
            result.insert("goals".into(), many((0..goals.len()).collect()));
        }
        GoalRequest::Show { id } => {
            let i = resolve(worklist, id, "id")?;
            result.insert("goal".into(), goal_json(worklist, &analysis, i));
        }
        GoalRequest::Find { query } => {
            let needle = query.trim().to_lowercase();
            if needle.is_empty() {
                return Err(GoalError::invalid("query", "must not be empty"));
            }
            let found = (0..goals.len())
                .filter(|&i| {
                    goals[i].title.to_lowercase().contains(&needle)
                        || goals[i].description.as_ref().is_some_and(|d| d.to_lowercase().contains(&needle))
                })
                .collect();
            result.insert("query".into(), json!(query));
            result.insert("goals".into(), many(found));
        }
        GoalRequest::Next => {
            if let Some(i) = analysis.next(goals) {
                result.insert("goal".into(), goal_json(worklist, &analysis, i));
            }
        }
        GoalRequest::Ready => {
            result.insert("goals".into(), many(analysis.ready(goals)));
        }
        GoalRequest::Waves => {
            let (waves, unreachable) = analysis.waves(goals);
            let waves: Vec<Value> = waves.into_iter().enumerate().map(|(w, members)| json!({"wave": w, "goals": many(members)})).collect();
            let unreachable: Vec<Value> = unreachable
                .into_iter()
                .map(|i| {
                    let mut goal = goal_json(worklist, &analysis, i);
                    goal["unreachableBecause"] = Value::Array(analysis.unreachable[i].iter().map(graph::Unreachable::to_json).collect());
                    goal
                })
                .collect();
            result.insert("waves".into(), Value::Array(waves));
            result.insert("unreachable".into(), Value::Array(unreachable));
        }
        _ => {}
    }
    Ok(result)
}

/// Resolves a complete goal ID or a unique ID prefix (case-insensitive) to an index.
fn resolve(worklist: &Worklist, raw: &str, field: &str) -> Result<usize, GoalError> {
    let wanted = raw.trim().to_ascii_lowercase();
    if wanted.is_empty() {
        return Err(GoalError::invalid(field, "must name a goal ID or a unique ID prefix"));
    }
    if let Some(i) = worklist.position(&wanted) {
        return Ok(i);
    }
    let matches: Vec<usize> = (0..worklist.goals.len()).filter(|&i| worklist.goals[i].id.starts_with(&wanted)).collect();
    match matches.as_slice() {
        [i] => Ok(*i),
        [] => {
            Err(GoalError::new("NOT_FOUND", format!("no goal ID starts with '{wanted}'")).with_details(json!({"field": field, "id": raw})))
        }
        _ => {
            let candidates: Vec<Value> =
                matches.iter().map(|&i| json!({"id": worklist.goals[i].id, "title": worklist.goals[i].title})).collect();
            Err(GoalError::new("AMBIGUOUS_ID", format!("'{wanted}' is a prefix of {} goal IDs; use a longer prefix", matches.len()))
                .with_details(json!({"field": field, "id": raw, "candidates": candidates})))
        }
    }
}

// ---- validation ----

/// The policy's bounds (`goals:`).
struct Limits {
    title: usize,
    description: usize,
    group: usize,
    items: usize,
    link: usize,
    plan: usize,
    goals: usize,
}

impl Limits {
    fn of(vault: &Vault) -> Self {
        let g = &vault.policy().policy.goals;
        Limits {
            title: g.title_chars_max,
            description: g.description_chars_max,
            group: g.group_chars_max,
            items: g.list_items_max,
            link: g.link_chars_max,
            plan: g.plan_entries_max,
            goals: g.goals_max,
        }
    }
}

fn one_line(field: &str, raw: &str, max: usize, allow_empty: bool) -> Result<String, GoalError> {
    let text = raw.trim();
    if text.is_empty() && !allow_empty {
        return Err(GoalError::invalid(field, "must not be empty"));
    }
    if text.chars().any(char::is_control) {
        return Err(GoalError::invalid(field, "must be one line without control characters"));
    }
    if text.chars().count() > max {
        return Err(GoalError::invalid(field, format!("is longer than {max} characters")));
    }
    Ok(text.to_string())
}

/// A description: `\r\n` becomes `\n`; other control characters than newline and tab are refused.
fn description(field: &str, raw: &str, max: usize) -> Result<Option<String>, GoalError> {
    let text = raw.replace("\r\n", "\n");
    if text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(GoalError::invalid(field, "must not contain control characters other than newline and tab"));
    }
    if text.chars().count() > max {
        return Err(GoalError::invalid(field, format!("is longer than {max} characters")));
    }
    Ok(Some(text).filter(|t| !t.trim().is_empty()))
}

fn links(raw: &[String], limits: &Limits) -> Result<Vec<String>, GoalError> {
    if raw.len() > limits.items {
        return Err(GoalError::invalid("links", format!("at most {} links", limits.items)));
    }
    let mut out: Vec<String> = Vec::new();
    for link in raw {
        let text = link.trim();
        let parsed =
            url::Url::parse(text).ok().filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty()));
        if parsed.is_none() || text.chars().any(|c| c.is_whitespace() || c.is_control()) || text.len() > limits.link {
            return Err(GoalError::invalid(
                "links",
                format!("'{text}' is not an absolute http or https URL (at most {} bytes)", limits.link),
            )
            .with_details(json!({"field": "links", "value": text})));
        }
        if !out.iter().any(|l| l == text) {
            out.push(text.to_string());
        }
    }
    Ok(out)
}

fn dependencies(worklist: &Worklist, raw: &[String], own_id: Option<&str>, limits: &Limits) -> Result<Vec<String>, GoalError> {
    if raw.len() > limits.items {
        return Err(GoalError::invalid("dependsOn", format!("at most {} dependencies", limits.items)));
    }
    let mut out: Vec<String> = Vec::new();
    for item in raw {
        let id = worklist.goals[resolve(worklist, item, "dependsOn")?].id.clone();
        if Some(id.as_str()) == own_id {
            return Err(GoalError::invalid("dependsOn", "a goal cannot depend on itself"));
        }
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

fn check_expected(goal: &Goal, expected: &Option<String>) -> Result<(), GoalError> {
    let Some(expected) = expected else { return Ok(()) };
    let canonical = parse_timestamp(expected)
        .ok_or_else(|| GoalError::invalid("expectedUpdatedAt", "must be an RFC 3339 time (the goal's updatedAt)"))?;
    if canonical != goal.updated_at {
        return Err(GoalError {
            code: "CONFLICT",
            message: format!(
                "goal {} changed since it was read (updatedAt {} , expected {expected}); re-read it and retry",
                goal.id, goal.updated_at
            ),
            retryable: true,
            details: Some(json!({"id": goal.id, "expectedUpdatedAt": expected, "actualUpdatedAt": goal.updated_at})),
        });
    }
    Ok(())
}

fn new_id(worklist: &Worklist, taken: &BTreeSet<String>) -> String {
    loop {
        let id = crate::hex::random(5);
        let clashes = worklist.goals.iter().any(|g| g.id.starts_with(&id) || id.starts_with(&g.id)) || taken.contains(&id);
        if !clashes && id.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) {
            return id;
        }
    }
}

// ---- apply-plan ----

/// A validated plan entry.
#[derive(Debug, Clone)]
struct PlanEntry {
    index: usize,
    reference: Option<String>,
    title: String,
    description: Option<String>,
    group: Option<String>,
    /// Resolved: `Ok(index in the plan)` or `Err(existing goal ID)`.
    depends_on: Vec<Result<usize, String>>,
    links: Vec<String>,
}

impl PlanEntry {
    fn preview(&self) -> Value {
        let deps: Vec<Value> = self
            .depends_on
            .iter()
            .map(|d| match d {
                Ok(i) => json!({"entry": i}),
                Err(id) => json!({"id": id}),
            })
            .collect();
        json!({"index": self.index, "ref": self.reference, "title": self.title, "description": self.description, "group": self.group, "dependsOn": deps, "links": self.links})
    }
}

const PLAN_FIELDS: [&str; 6] = ["ref", "title", "description", "group", "dependsOn", "links"];

/// Validates a whole plan; every problem is reported (`details.problems`), none is written.
fn validate_plan(worklist: &Worklist, plan: &Value, limits: &Limits) -> Result<Vec<PlanEntry>, GoalError> {
    let parsed;
    let plan = match plan {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text).map_err(|e| GoalError::invalid("plan", format!("is not JSON: {e}")))?;
            &parsed
        }
        other => other,
    };
    let Value::Array(items) = plan else { return Err(GoalError::invalid("plan", "must be a JSON array of plan entries")) };
    if items.is_empty() {
        return Err(GoalError::invalid("plan", "must hold at least one entry"));
    }
    if items.len() > limits.plan {
        return Err(GoalError::invalid("plan", format!("holds {} entries, over the limit of {}", items.len(), limits.plan)));
    }
    if worklist.goals.len() + items.len() > limits.goals {
        return Err(GoalError::invalid("plan", format!("would exceed the worklist limit of {} goals", limits.goals)));
    }
    let mut problems: Vec<Value> = Vec::new();
    let mut problem =
        |index: usize, field: &str, message: String| problems.push(json!({"index": index, "field": field, "message": message}));
    // References: each `ref` names its entry; unique, and never an existing goal's ID.
    let mut references: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (index, item) in items.iter().enumerate() {
        match item.get("ref") {
            None | Some(Value::Null) => {}
            Some(Value::String(r)) if !r.trim().is_empty() && r.len() <= 64 => {
                let r = r.trim().to_string();
                if worklist.position(&r).is_some() {
                    problem(index, "ref", format!("'{r}' is an existing goal's ID; choose another ref"));
                } else if references.insert(r.clone(), index).is_some() {
                    problem(index, "ref", format!("'{r}' is used by two entries"));
                }
            }
            Some(_) => problem(index, "ref", "must be a non-empty string of at most 64 bytes".into()),
        }
    }
    let mut entries = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Value::Object(fields) = item else {
            problem(index, "", "must be a JSON object".into());
            continue;
        };
        for key in fields.keys().filter(|k| !PLAN_FIELDS.contains(&k.as_str())) {
            problem(index, key, format!("unknown field (allowed: {})", PLAN_FIELDS.join(", ")));
        }
        let text = |name: &str| -> Result<Option<String>, String> {
            match fields.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("{name} must be a string")),
            }
        };
        let list = |name: &str| -> Result<Vec<String>, String> {
            match fields.get(name) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => {
                    items.iter().map(|v| v.as_str().map(str::to_string).ok_or(format!("{name} must be an array of strings"))).collect()
                }
                Some(_) => Err(format!("{name} must be an array of strings")),
            }
        };
        let title = match text("title") {
            Ok(Some(t)) => one_line("title", &t, limits.title, false).map_err(|e| e.message),
            Ok(None) => Err("title is required".to_string()),
            Err(e) => Err(e),
        };
        let desc = text("description")
            .and_then(|d| d.map_or(Ok(None), |d| description("description", &d, limits.description).map_err(|e| e.message)));
        let group = text("group").and_then(|g| {
            g.map_or(Ok(None), |g| {
                one_line("group", &g, limits.group, true).map(|g| Some(g).filter(|g| !g.is_empty())).map_err(|e| e.message)
            })
        });
        let link_list = list("links").and_then(|l| links(&l, limits).map_err(|e| e.message));
        let deps = list("dependsOn").and_then(|raw| {
            if raw.len() > limits.items {
                return Err(format!("dependsOn: at most {} dependencies", limits.items));
            }
            let mut out = Vec::new();
            for d in raw {
                let d = d.trim().to_string();
                let resolved = match references.get(&d) {
                    Some(&i) if i == index => return Err(format!("dependsOn: entry {index} cannot depend on itself")),
                    Some(&i) => Ok(i),
                    None => resolve(worklist, &d, "dependsOn").map(|i| Err(worklist.goals[i].id.clone())).map_err(|e| e.message)?,
                };
                if !out.contains(&resolved) {
                    out.push(resolved);
                }
            }
            Ok(out)
        });
        let mut fail = |field: &str, result: &Result<_, String>| {
            if let Err(message) = result {
                problem(index, field, message.clone());
            }
        };
        fail("title", &title.clone().map(|_| ()));
        fail("description", &desc.clone().map(|_| ()));
        fail("group", &group.clone().map(|_| ()));
        fail("links", &link_list.clone().map(|_| ()));
        fail("dependsOn", &deps.clone().map(|_| ()));
        if let (Ok(title), Ok(description), Ok(group), Ok(links), Ok(depends_on)) = (title, desc, group, link_list, deps) {
            let reference = fields.get("ref").and_then(Value::as_str).map(|r| r.trim().to_string());
            entries.push(PlanEntry { index, reference, title, description, group, depends_on, links });
        }
    }
    if !problems.is_empty() {
        let first = problems[0].clone();
        return Err(GoalError::new(
            "INVALID_INPUT",
            format!(
                "the plan has {} problem(s); nothing was added (entry {}: {})",
                problems.len(),
                first["index"],
                first["message"].as_str().unwrap_or("")
            ),
        )
        .with_details(json!({"field": "plan", "problems": problems})));
    }
    Ok(entries)
}

// ---- mutations ----

/// What one application of a mutation did to the worklist.
struct Applied {
    result: Map<String, Value>,
    /// Goal IDs whose `updatedAt` must advance even without a field change (a move).
    touched: Vec<String>,
    /// Pointers of changes the goal diff cannot see (`/order`).
    extra_fields: Vec<String>,
}

fn mutate(vault: &Vault, request: GoalRequest) -> Result<Done, Failure> {
    let limits = Limits::of(vault);
    let path = worklist_path(vault).map_err(|e| (e, None))?;
    // The worklist's read-modify-write is serialised across processes and threads (the seed's
    // shared cross-process lock): a mutation without a precondition never fails because another
    // writer was faster. Only an edit outside the engine (a person's) can still come between
    // the read and the write: it is re-read and re-applied below.
    let _serialised =
        crate::store::durable::hold_lock(vault.root(), crate::store::layout::GOALS_LOCK).map_err(|e| (GoalError::from_engine(&e), None))?;
    let mut last_revision = None;
    for attempt in 1..=WRITE_ATTEMPTS {
        let stored = load(vault).map_err(|e| (e, last_revision))?;
        last_revision = Some(stored.worklist.revision);
        let before = stored.worklist.clone();
        let mut after = stored.worklist.clone();
        let stamp = vault.clock().stamp(SecondsFormat::Millis);
        let applied = apply(&mut after, &request, &limits, &stamp).map_err(|e| (e, last_revision))?;
        let mut changed_fields = diff(&before, &after);
        changed_fields.extend(applied.extra_fields.iter().cloned());
        let changed_ids: BTreeSet<String> = changed_fields
            .iter()
            .filter_map(|p| p.strip_prefix("/goals/").map(|rest| rest.split('/').next().unwrap_or("").to_string()))
            .chain(applied.touched.iter().cloned())
            .collect();
        if changed_fields.is_empty() {
            // Nothing to write: the request asks for what already is.
            let result = refresh_result(&after, applied.result);
            return Ok(Done {
                result,
                changed: false,
                semantic_no_op: true,
                changed_fields,
                revision: last_revision,
                receipt_seq: None,
                approval: None,
            });
        }
        for goal in after.goals.iter_mut().filter(|g| changed_ids.contains(&g.id)) {
            if before.position(&goal.id).is_some() {
                goal.updated_at = later(&goal.updated_at, &stamp);
            }
        }
        after.revision = before.revision + 1;
        let content = format::render(&stored.frame, &after, &format!("{}Z", &stamp[..19]));
        let note_bytes_max = vault.policy().policy.limits.note_bytes_max;
        if content.len() as u64 > note_bytes_max {
            // Refused before any write: the worklist keeps every goal and byte it had.
            return Err((worklist_full(&path, content.len(), note_bytes_max, &before), last_revision));
        }
        let change = NoteChange {
            path: path.clone(),
            content: Some(content),
            require_absent: stored.sha256.is_none(),
            expected_sha256: stored.sha256.clone(),
        };
        let operation = operation_name(&request);
        let mutation = Mutation {
            operation: operation.into(),
            notes: vec![change],
            idempotency_key: None,
            proposal_id: None,
            log_entry: Some(format!("goals {}: {}", request.action(), changed_ids.iter().cloned().collect::<Vec<_>>().join(", "))),
            create_folders: true,
        };
        let written = match governed_operation(&request) {
            // The lifecycle tools are governed operations (docs/governance.md): under a `human`
            // rule the change waits for a person, and the approved write is exactly what they
            // saw; the request names the goal, so one approval never applies another change.
            Some(operation) => {
                let key = format!("{} {}", request.action(), changed_ids.iter().cloned().collect::<Vec<_>>().join(","));
                crate::approvals::execute_governed_request(vault, operation, mutation, Some(&key))
            }
            None => crate::approvals::execute_checked(vault, mutation),
        };
        match written {
            Ok(receipt) => {
                let approval = receipt.approval.clone();
                // An approved write put the stored after-image in place (its times are the
                // proposal's): the result shows what was written.
                let shown = match approval {
                    Some(_) => load(vault).map_err(|e| (e, Some(after.revision)))?.worklist,
                    None => after,
                };
                let revision = Some(shown.revision);
                let result = refresh_result(&shown, applied.result);
                return Ok(Done {
                    result,
                    changed: true,
                    semantic_no_op: false,
                    changed_fields,
                    revision,
                    receipt_seq: Some(receipt.seq),
                    approval,
                });
            }
            // The note changed between our read and the write (a hand edit or another
            // writer): read it again and re-apply, so nothing anyone wrote is overwritten.
            Err(Error::PreconditionFailed { .. } | Error::AlreadyExists { .. }) if attempt < WRITE_ATTEMPTS => continue,
            Err(error) => return Err((GoalError::from_engine(&error), last_revision)),
        }
    }
    unreachable!("the last attempt returns")
}

/// The worklist note would exceed `limits.note_bytes_max` (its capacity, docs/goals.md).
fn worklist_full(path: &VaultPath, bytes: usize, note_bytes_max: u64, before: &Worklist) -> GoalError {
    GoalError::new(
        "WORKLIST_FULL",
        format!(
            "the worklist note {path} would be {bytes} bytes, over limits.note_bytes_max ({note_bytes_max}); it holds {} goals and \
             nothing was written: archive or delete goals, shorten descriptions, or raise limits.note_bytes_max",
            before.goals.len()
        ),
    )
    .with_details(json!({"path": path.as_str(), "bytes": bytes, "noteBytesMax": note_bytes_max, "goals": before.goals.len()}))
}

/// The `approvals:` operation a goal request is governed as (the confirm-guarded tools).
fn governed_operation(request: &GoalRequest) -> Option<crate::approvals::Operation> {
    use crate::approvals::Operation;
    match request {
        GoalRequest::Lifecycle(Lifecycle::Complete, _) => Some(Operation::GoalsComplete),
        GoalRequest::Lifecycle(Lifecycle::Reopen, _) => Some(Operation::GoalsReopen),
        GoalRequest::Lifecycle(Lifecycle::Archive, _) => Some(Operation::GoalsArchive),
        GoalRequest::Lifecycle(Lifecycle::Delete, _) => Some(Operation::GoalsDelete),
        _ => None,
    }
}

fn operation_name(request: &GoalRequest) -> &'static str {
    match request.action() {
        "add" => "goals.add",
        "apply-plan" => "goals.apply_plan",
        "update" => "goals.update",
        "move" => "goals.move",
        "set_active" => "goals.set_active",
        "complete" => "goals.complete",
        "reopen" => "goals.reopen",
        "archive" => "goals.archive",
        "delete" => "goals.delete",
        _ => "goals.change",
    }
}

/// Re-renders the goals a result names (`goalId`, `goalIds`) from the final worklist, so a
/// result shows the written revision and the final blocked/blocks state.
fn refresh_result(worklist: &Worklist, mut result: Map<String, Value>) -> Map<String, Value> {
    let analysis = Analysis::of(worklist);
    if let Some(Value::String(id)) = result.remove("goalId")
        && let Some(i) = worklist.position(&id)
    {
        result.insert("goal".into(), goal_json(worklist, &analysis, i));
    }
    if let Some(Value::Array(ids)) = result.remove("goalIds") {
        let goals: Vec<Value> =
            ids.iter().filter_map(|id| worklist.position(id.as_str()?)).map(|i| goal_json(worklist, &analysis, i)).collect();
        result.insert("goals".into(), Value::Array(goals));
    }
    result
}

/// JSON Pointers of what changed between two worklists: `/goals/<id>` for an added or
/// removed goal, `/goals/<id>/<field>` for a changed field (`updatedAt` excluded).
fn diff(before: &Worklist, after: &Worklist) -> Vec<String> {
    let mut fields = Vec::new();
    for goal in &after.goals {
        let Some(old) = before.goals.iter().find(|g| g.id == goal.id) else {
            fields.push(format!("/goals/{}", goal.id));
            continue;
        };
        let pairs: [(&str, bool); 7] = [
            ("title", old.title != goal.title),
            ("description", old.description != goal.description),
            ("group", old.group != goal.group),
            ("status", old.status != goal.status),
            ("active", old.active != goal.active),
            ("dependsOn", old.depends_on != goal.depends_on),
            ("links", old.links != goal.links),
        ];
        fields.extend(pairs.iter().filter(|(_, changed)| *changed).map(|(name, _)| format!("/goals/{}/{name}", goal.id)));
    }
    for goal in before.goals.iter().filter(|g| after.position(&g.id).is_none()) {
        fields.push(format!("/goals/{}", goal.id));
    }
    fields
}

fn single(id: &str) -> Applied {
    let mut result = Map::new();
    result.insert("goalId".into(), json!(id));
    Applied { result, touched: Vec::new(), extra_fields: Vec::new() }
}

fn apply(worklist: &mut Worklist, request: &GoalRequest, limits: &Limits, stamp: &str) -> Result<Applied, GoalError> {
    match request {
        GoalRequest::Add(input) => {
            if worklist.goals.len() >= limits.goals {
                return Err(GoalError::invalid("title", format!("the worklist holds the policy's limit of {} goals", limits.goals)));
            }
            let goal = new_goal(
                worklist,
                &input.title,
                input.description.as_deref(),
                input.group.as_deref(),
                input.depends_on.as_deref().unwrap_or_default(),
                input.links.as_deref().unwrap_or_default(),
                limits,
                stamp,
                &BTreeSet::new(),
            )?;
            let id = goal.id.clone();
            worklist.goals.push(goal);
            Ok(single(&id))
        }
        GoalRequest::ApplyPlan(input) => {
            let entries = validate_plan(worklist, &input.plan, limits)?;
            let mut taken = BTreeSet::new();
            let ids: Vec<String> = entries
                .iter()
                .map(|_| {
                    let id = new_id(worklist, &taken);
                    taken.insert(id.clone());
                    id
                })
                .collect();
            let by_index: std::collections::HashMap<usize, &String> = entries.iter().zip(&ids).map(|(e, id)| (e.index, id)).collect();
            for (entry, id) in entries.iter().zip(&ids) {
                let depends_on = entry
                    .depends_on
                    .iter()
                    .map(|d| match d {
                        Ok(i) => by_index[i].clone(),
                        Err(id) => id.clone(),
                    })
                    .collect();
                worklist.goals.push(Goal {
                    id: id.clone(),
                    title: entry.title.clone(),
                    description: entry.description.clone(),
                    group: entry.group.clone(),
                    status: GoalStatus::Open,
                    active: false,
                    depends_on,
                    links: entry.links.clone(),
                    created_at: stamp.to_string(),
                    updated_at: stamp.to_string(),
                });
            }
            let mut result = Map::new();
            result.insert("dryRun".into(), json!(false));
            result.insert("goalIds".into(), json!(ids));
            let refs: Map<String, Value> = entries.iter().zip(&ids).filter_map(|(e, id)| Some((e.reference.clone()?, json!(id)))).collect();
            result.insert("refs".into(), Value::Object(refs));
            Ok(Applied { result, touched: Vec::new(), extra_fields: Vec::new() })
        }
        GoalRequest::Update(input) => {
            let i = resolve(worklist, &input.id, "id")?;
            check_expected(&worklist.goals[i], &input.expected_updated_at)?;
            if input.description.is_some() && input.append_description.is_some() {
                return Err(GoalError::invalid("appendDescription", "cannot be combined with description"));
            }
            let own = worklist.goals[i].id.clone();
            let depends_on = input.depends_on.as_ref().map(|d| dependencies(worklist, d, Some(&own), limits)).transpose()?;
            let new_links = input.links.as_ref().map(|l| links(l, limits)).transpose()?;
            let title = input.title.as_ref().map(|t| one_line("title", t, limits.title, false)).transpose()?;
            let group = input.group.as_ref().map(|g| one_line("group", g, limits.group, true)).transpose()?;
            let replaced = input.description.as_ref().map(|d| description("description", d, limits.description)).transpose()?;
            let appended =
                input.append_description.as_ref().map(|d| description("appendDescription", d, limits.description)).transpose()?;
            let goal = &mut worklist.goals[i];
            if let Some(title) = title {
                goal.title = title;
            }
            if let Some(group) = group {
                goal.group = Some(group).filter(|g| !g.is_empty());
            }
            if let Some(text) = replaced {
                goal.description = text;
            }
            if let Some(Some(text)) = appended {
                let joined = match &goal.description {
                    Some(old) => format!("{}\n\n{text}", old.trim_end_matches('\n')),
                    None => text,
                };
                if joined.chars().count() > limits.description {
                    return Err(GoalError::invalid(
                        "appendDescription",
                        format!("the description would be longer than {} characters", limits.description),
                    ));
                }
                goal.description = Some(joined);
            }
            if let Some(deps) = depends_on {
                goal.depends_on = deps;
            }
            if let Some(l) = new_links {
                goal.links = l;
            }
            Ok(single(&own))
        }
        GoalRequest::Move(input) => {
            let i = resolve(worklist, &input.id, "id")?;
            check_expected(&worklist.goals[i], &input.expected_updated_at)?;
            let given = [input.direction.is_some(), input.before_id.is_some(), input.after_id.is_some()].iter().filter(|b| **b).count();
            if given != 1 {
                return Err(GoalError::invalid("direction", "give exactly one of direction, beforeId or afterId"));
            }
            let id = worklist.goals[i].id.clone();
            let order_before: Vec<String> = worklist.goals.iter().map(|g| g.id.clone()).collect();
            let target = match (input.direction, &input.before_id, &input.after_id) {
                (Some(Direction::Up), _, _) => i.saturating_sub(1),
                (Some(Direction::Down), _, _) => (i + 1).min(worklist.goals.len() - 1),
                (None, Some(anchor), _) | (None, None, Some(anchor)) => {
                    let field = if input.before_id.is_some() { "beforeId" } else { "afterId" };
                    let a = resolve(worklist, anchor, field)?;
                    if a == i {
                        return Err(GoalError::invalid(field, "names the goal being moved"));
                    }
                    let goal = worklist.goals.remove(i);
                    let a = if a > i { a - 1 } else { a };
                    let at = if input.before_id.is_some() { a } else { a + 1 };
                    worklist.goals.insert(at, goal);
                    usize::MAX
                }
                (None, None, None) => unreachable!("exactly one was checked"),
            };
            if target != usize::MAX {
                let goal = worklist.goals.remove(i);
                worklist.goals.insert(target, goal);
            }
            let moved = worklist.goals.iter().map(|g| &g.id).ne(order_before.iter());
            let mut applied = single(&id);
            if moved {
                applied.touched.push(id);
                applied.extra_fields.push("/order".into());
            }
            Ok(applied)
        }
        GoalRequest::SetActive(input) => {
            let i = resolve(worklist, &input.id, "id")?;
            check_expected(&worklist.goals[i], &input.expected_updated_at)?;
            if worklist.goals[i].status != GoalStatus::Open {
                return Err(GoalError::new(
                    "INVALID_STATE",
                    format!(
                        "goal {} is {}; only an open goal can be active (reopen it first)",
                        worklist.goals[i].id,
                        worklist.goals[i].status.name()
                    ),
                )
                .with_details(json!({"id": worklist.goals[i].id, "status": worklist.goals[i].status.name()})));
            }
            for (j, goal) in worklist.goals.iter_mut().enumerate() {
                goal.active = j == i;
            }
            Ok(single(&worklist.goals[i].id.clone()))
        }
        GoalRequest::Lifecycle(kind, input) => {
            let i = resolve(worklist, &input.id, "id")?;
            check_expected(&worklist.goals[i], &input.expected_updated_at)?;
            let id = worklist.goals[i].id.clone();
            let status = worklist.goals[i].status;
            let refuse = |wanted: &str| {
                GoalError::new("INVALID_STATE", format!("goal {id} is {}; {wanted}", status.name()))
                    .with_details(json!({"id": id, "status": status.name()}))
            };
            match kind {
                Lifecycle::Complete => {
                    if status == GoalStatus::Archived {
                        return Err(refuse("reopen it before completing it"));
                    }
                    worklist.goals[i].status = GoalStatus::Done;
                    worklist.goals[i].active = false;
                }
                Lifecycle::Reopen => worklist.goals[i].status = GoalStatus::Open,
                Lifecycle::Archive => {
                    worklist.goals[i].status = GoalStatus::Archived;
                    worklist.goals[i].active = false;
                }
                Lifecycle::Delete => {
                    let analysis = Analysis::of(worklist);
                    let removed = goal_json(worklist, &analysis, i);
                    worklist.goals.remove(i);
                    let mut result = Map::new();
                    result.insert("deleted".into(), json!(true));
                    result.insert("goal".into(), removed);
                    return Ok(Applied { result, touched: Vec::new(), extra_fields: Vec::new() });
                }
            }
            Ok(single(&id))
        }
        _ => Ok(Applied { result: Map::new(), touched: Vec::new(), extra_fields: Vec::new() }),
    }
}

#[allow(clippy::too_many_arguments)]
fn new_goal(
    worklist: &Worklist,
    title: &str,
    desc: Option<&str>,
    group: Option<&str>,
    depends_on: &[String],
    link_list: &[String],
    limits: &Limits,
    stamp: &str,
    taken: &BTreeSet<String>,
) -> Result<Goal, GoalError> {
    let title = one_line("title", title, limits.title, false)?;
    let description = desc.map(|d| description("description", d, limits.description)).transpose()?.flatten();
    let group = group.map(|g| one_line("group", g, limits.group, true)).transpose()?.filter(|g| !g.is_empty());
    let depends_on = dependencies(worklist, depends_on, None, limits)?;
    let links = links(link_list, limits)?;
    let id = new_id(worklist, taken);
    Ok(Goal {
        id,
        title,
        description,
        group,
        status: GoalStatus::Open,
        active: false,
        depends_on,
        links,
        created_at: stamp.to_string(),
        updated_at: stamp.to_string(),
    })
}
