//! `handoff_work`: durable, content-free work packets (Task v2) for cross-agent workflows.
//!
//! A task is a JSON snapshot `.paravault/tasks/<task_id>.json` projected from its append-only,
//! hash-chained event journal `.paravault/tasks/events/<task_id>.jsonl` (see `journal`). Every
//! change bumps `revision` by one and is one event; the journal append is the commit point.
//!
//! Rules (reference §9.1, with the P.O.W.E.R. 3.7.4 drift fixed):
//! - create / list / show need no revision; every other action needs `task_id`. With
//!   `expected_revision` a mismatch is `revision_conflict`; without it the transition acts on
//!   the current revision (P.O.W.E.R.'s contract has no revision). Without `idempotency_key` a
//!   transition is simply not replayable.
//! - Idempotency: the same key with the same command fingerprint (sha256 of the canonical JSON
//!   of the action and its payload, i.e. the request without `idempotency_key`) returns the
//!   original result and appends nothing; the same key with another fingerprint is an
//!   `idempotency_conflict`. Keys are scoped to one task.
//! - States and the explicit transition map are in `TaskState::allowed_next`.
//! - The maintenance profile's phase order detect → dry-run → repair → verify → receipt is
//!   enforced (`maintenance_phase_order`); `repair` needs `approved`; a maintenance task
//!   completes only from phase `receipt`.
//! - `complete` needs a `receipt_id` naming an ok receipt in `.paravault/receipts.jsonl`,
//!   written either `seq:<n>` (the receipt's `seq`) or as the receipt's 32-hex `trace_id`, or
//!   (P.O.W.E.R.'s Task v2) a `completion_postcondition` with the task's `changed_artifacts`,
//!   from which a content-free task-completion receipt `tcr_<sha256>` with each artifact's
//!   sha256 is built (`CompletionReceipt`); and no open gates. `cancel` and resuming an `input-required` task need `approved`;
//!   `input-required` and `fail` need a `blocker`.
//! - It never executes `next_action` and never writes notes. All reads and writes run under
//!   the vault's writer lock; all writes go through `store::durable`.

pub mod journal;
mod power;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::store::layout;
use crate::vault::Vault;
use journal::TaskJournal;

/// Schema tag of a task snapshot.
pub(crate) const TASK_SCHEMA: &str = "paravault.task.v2";

/// What `handoff_work` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HandoffAction {
    Create,
    List,
    Show,
    Resume,
    Checkpoint,
    InputRequired,
    Complete,
    Fail,
    Cancel,
}

impl HandoffAction {
    fn name(self) -> &'static str {
        match self {
            HandoffAction::Create => "create",
            HandoffAction::List => "list",
            HandoffAction::Show => "show",
            HandoffAction::Resume => "resume",
            HandoffAction::Checkpoint => "checkpoint",
            HandoffAction::InputRequired => "input-required",
            HandoffAction::Complete => "complete",
            HandoffAction::Fail => "fail",
            HandoffAction::Cancel => "cancel",
        }
    }
}

/// What the task's agent may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Authority {
    #[default]
    ReadOnly,
    Propose,
    Apply,
}

/// Task profile; `maintenance` enforces the phase order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    #[default]
    Standard,
    Maintenance,
}

/// Maintenance phases, in their enforced order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Detect,
    DryRun,
    Repair,
    Verify,
    Receipt,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Detect => "detect",
            Phase::DryRun => "dry-run",
            Phase::Repair => "repair",
            Phase::Verify => "verify",
            Phase::Receipt => "receipt",
        }
    }
}

/// Task states (Task v2). The last four are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Backlog,
    Ready,
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Blocked,
    Completed,
    Failed,
    Canceled,
    Rejected,
}

impl TaskState {
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Backlog => "backlog",
            TaskState::Ready => "ready",
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::AuthRequired => "auth-required",
            TaskState::Blocked => "blocked",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::Rejected => "rejected",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
    }

    /// The explicit transition map.
    pub(crate) fn allowed_next(self) -> &'static [TaskState] {
        use TaskState::*;
        match self {
            Backlog => &[Ready, Submitted, Canceled, Rejected],
            Ready => &[Submitted, Working, Canceled, Rejected],
            Submitted => &[Working, InputRequired, AuthRequired, Blocked, Failed, Canceled, Rejected],
            Working => &[Working, InputRequired, AuthRequired, Blocked, Completed, Failed, Canceled],
            InputRequired | AuthRequired | Blocked => &[Working, Failed, Canceled],
            Completed | Failed | Canceled | Rejected => &[],
        }
    }

    pub(crate) fn can_become(self, next: TaskState) -> bool {
        self.allowed_next().contains(&next)
    }
}

fn default_actor() -> String {
    "agent".to_string()
}

/// One `handoff_work` call (P.O.W.E.R.'s parameters plus `expected_revision`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffRequest {
    pub action: HandoffAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// What the task should achieve (create; at most 1000 characters by default policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default = "default_actor")]
    pub actor: String,
    /// Vault-relative paths or identifiers the task may touch (at most 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<Authority>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_revision: Option<String>,
    /// Recorded, never executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_approval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<String>,
    /// `seq:<n>` or a receipt `trace_id` from `.paravault/receipts.jsonl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_id: Option<String>,
    /// What now holds of the task's changed artifacts (complete, instead of a receipt_id): with
    /// `changed_artifacts` (this request's or the task's), a content-free task-completion
    /// receipt `tcr_<sha256>` records each artifact's sha256 (P.O.W.E.R.'s Task v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_postcondition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_artifacts: Option<Vec<String>>,
    /// Replaces the task's open gates when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_gates: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_revision: Option<u64>,
}

impl HandoffRequest {
    /// A request with only `action` set (defaults elsewhere), for programmatic callers.
    pub fn new(action: HandoffAction) -> Self {
        serde_json::from_value(json!({ "action": action })).expect("BUG: a bare action is a valid request")
    }
}

/// What a task waits for in `input-required`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequiredInput {
    /// Why the task is blocked.
    pub blocker: String,
    /// What approval the task waits for (`caller` when the request named none).
    pub required_approval: String,
}

/// The task snapshot (`.paravault/tasks/<task_id>.json`); content-free.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    /// `paravault.task.v2`.
    pub schema: String,
    /// The task's id (letters, digits, `.`, `_`, `-`).
    pub task_id: String,
    /// Bumped by one on every change; equals the sequence of the journal event that made it.
    pub revision: u64,
    /// The objective's first 256 characters.
    pub title: String,
    /// What the task should achieve.
    pub objective: String,
    /// Who owns the task.
    pub owner: String,
    /// Who created the task (the create request's actor).
    pub actor: String,
    /// Vault-relative paths or identifiers the task may touch.
    pub scope: Vec<String>,
    /// What the task's agent may do.
    pub authority: Authority,
    /// `standard`, or `maintenance` (the phase order is enforced).
    pub profile: Profile,
    /// The task's state (Task v2).
    pub state: TaskState,
    /// The maintenance phase the task is in (maintenance profile only; null before detect).
    pub maintenance_phase: Option<Phase>,
    /// The vault or repository revision the task works from (`unknown` when none was given).
    pub source_revision: String,
    /// The next step, as recorded (never executed).
    pub next_action: Option<String>,
    /// What an `input-required` task waits for (null otherwise).
    pub required_input: Option<RequiredInput>,
    /// Why the task failed (`fail`'s blocker).
    pub error_ref: Option<String>,
    /// The receipts that completed the task: `seq:<n>` (a write receipt) or `tcr_<sha256>` (a
    /// task-completion receipt, `completion`).
    pub receipt_ids: Vec<String>,
    /// The task-completion receipt of a task completed by a `completion_postcondition` (absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<CompletionReceipt>,
    /// Vault-relative paths the task's steps changed.
    pub changed_artifacts: Vec<String>,
    /// Gates that must be closed before the task may complete.
    pub open_gates: Vec<String>,
    /// How many steps needed a person's approval or input.
    pub human_interventions: u32,
    /// The action that made this revision.
    pub last_action: String,
    /// The idempotency key of that action (empty when it had none).
    pub last_idempotency_key: String,
    /// Always `disabled`: a task records no note content.
    pub content_capture: String,
    /// When the task was created (RFC 3339, UTC).
    pub created_at: String,
    /// When the task last changed (RFC 3339, UTC).
    pub updated_at: String,
    /// The P.O.W.E.R. file this task was read from (absent for a task paravault created): shown
    /// as is until its first change, which imports it once into paravault's journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<ImportedFrom>,
}

/// The P.O.W.E.R. file a task came from (`.power/tasks/<id>.json` or
/// `.power/work-packets/<id>.md`), never written by paravault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImportedFrom {
    /// Vault-relative path of P.O.W.E.R.'s file.
    pub file: String,
    /// sha256 of its bytes when it was read.
    pub sha256: String,
}

/// Schema tag of a task-completion receipt (P.O.W.E.R.'s name).
pub(crate) const COMPLETION_SCHEMA: &str = "power.task-completion.v1";

/// A content-free task-completion receipt: the postcondition the completing agent stated and
/// the sha256 of each artifact as it was when the task completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompletionReceipt {
    /// `power.task-completion.v1`.
    pub schema: String,
    /// `tcr_` and the sha256 of the canonical JSON of the other fields but `completed_at`.
    pub receipt_id: String,
    /// The task it completes.
    pub task_id: String,
    /// The revision the completion made.
    pub revision: u64,
    /// What the completing agent stated now holds.
    pub postcondition: String,
    /// Each artifact (vault-relative path) with the sha256 of its bytes.
    pub artifacts: Vec<CompletedArtifact>,
    /// When (RFC 3339, UTC).
    pub completed_at: String,
}

/// One artifact of a completion receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompletedArtifact {
    /// Vault-relative path.
    pub path: String,
    /// sha256 of the file's bytes at completion.
    pub sha256: String,
}

/// What `handoff_work` answers: a task snapshot, or the task list.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum HandoffReport {
    /// The task snapshot (create, show and transitions, also on an idempotent replay).
    Task(Box<Task>),
    /// The tasks (list).
    List(TaskList),
}

/// The tasks of the vault, in task id order.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskList {
    /// One row per task (at most the policy's `handoff.list_tasks_max`).
    pub tasks: Vec<TaskRow>,
    /// Whether the vault holds more tasks than were listed.
    pub truncated: bool,
}

/// One task of the list: its summary, or why its journal could not be read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum TaskRow {
    /// The task's summary.
    Summary(TaskSummary),
    /// A task whose journal or snapshot is unreadable (reported per task; the others are listed).
    Unreadable(UnreadableTask),
}

/// A task's summary in the list.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskSummary {
    /// The task's id.
    pub task_id: String,
    /// The task's state.
    pub state: TaskState,
    /// The task's revision.
    pub revision: u64,
    /// The task's profile.
    pub profile: Profile,
    /// The maintenance phase (null outside the maintenance profile or before detect).
    pub maintenance_phase: Option<Phase>,
    /// Who owns the task.
    pub owner: String,
    /// The objective's first 256 characters.
    pub title: String,
    /// When the task last changed (RFC 3339, UTC).
    pub updated_at: String,
}

/// A listed task that could not be read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UnreadableTask {
    /// The task's id.
    pub task_id: String,
    /// Why it could not be read.
    pub error: TaskError,
}

/// The typed error a task could not be read with.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskError {
    /// The error code (docs/errors.md).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

fn invalid(name: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument { name, reason: reason.into() }
}

/// Task ids become file names: a letter or digit, then letters, digits, `.`, `_`, `-` (≤128).
pub(crate) fn valid_task_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn check_text(name: &'static str, value: &Option<String>, max: usize) -> Result<()> {
    if let Some(text) = value {
        if text.chars().count() > max {
            return Err(invalid(name, format!("longer than {max} characters")));
        }
        if text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
            return Err(invalid(name, "control characters are not allowed"));
        }
    }
    Ok(())
}

fn check_list(name: &'static str, value: &Option<Vec<String>>, max_items: usize, max_chars: usize) -> Result<()> {
    if let Some(items) = value {
        if items.len() > max_items {
            return Err(invalid(name, format!("more than {max_items} items")));
        }
        for item in items {
            if item.trim().is_empty() {
                return Err(invalid(name, "items must not be empty"));
            }
            check_text(name, &Some(item.clone()), max_chars)?;
        }
    }
    Ok(())
}

impl Vault {
    /// `handoff_work`: creates, lists, shows or advances one durable work packet. Returns the
    /// task snapshot (create and transitions, also on idempotent replay), the snapshot (show),
    /// or the task list (list).
    pub fn handoff_work(&self, request: HandoffRequest) -> Result<HandoffReport> {
        let limits = &self.policy().policy.handoff;
        check_text("objective", &request.objective, limits.objective_chars_max)?;
        for (name, value) in [("next_action", &request.next_action), ("blocker", &request.blocker)] {
            check_text(name, value, limits.text_chars_max)?;
        }
        for (name, value) in [
            ("owner", &request.owner),
            ("source_revision", &request.source_revision),
            ("required_approval", &request.required_approval),
            ("idempotency_key", &request.idempotency_key),
            ("receipt_id", &request.receipt_id),
        ] {
            check_text(name, value, limits.item_chars_max)?;
        }
        check_text("completion_postcondition", &request.completion_postcondition, limits.text_chars_max)?;
        check_text("actor", &Some(request.actor.clone()), limits.item_chars_max)?;
        check_list("scope", &request.scope, limits.scope_items_max, limits.item_chars_max)?;
        check_list("changed_artifacts", &request.changed_artifacts, limits.list_items_max, limits.item_chars_max)?;
        check_list("open_gates", &request.open_gates, limits.list_items_max, limits.item_chars_max)?;
        if let Some(id) = &request.task_id
            && !valid_task_id(id)
        {
            return Err(invalid("task_id", "must start with a letter or digit and hold only letters, digits, '.', '_', '-' (≤128)"));
        }

        // Reads take no writer lock: a task file is written whole (journal append, then its
        // snapshot replaced), and a read that lands between the two reads again once the
        // write is done. So a list or show answers while a write waits for the lock or for disk
        // space (a committed write's recovery needs the lock, and may need space).
        match request.action {
            HandoffAction::List => return self.list_tasks().map(HandoffReport::List),
            HandoffAction::Show => {
                let task_id = request.task_id.as_deref().ok_or_else(|| invalid("task_id", "show needs task_id"))?;
                return self.read_task(task_id).map(|task| HandoffReport::Task(Box::new(task)));
            }
            _ => {}
        }
        let _writer = self.lock_writer()?;
        let task = match request.action {
            HandoffAction::List | HandoffAction::Show => unreachable!("answered above"),
            HandoffAction::Create => self.create_task(&request)?,
            _ => self.transition(&request)?,
        };
        Ok(HandoffReport::Task(Box::new(task)))
    }

    fn load_task(&self, task_id: &str) -> Result<Option<TaskJournal>> {
        TaskJournal::load(self.root(), task_id)
    }

    /// The task `task_id` when paravault has no journal for it: P.O.W.E.R.'s, read where it lies
    /// (`power`), else `task_not_found`.
    fn power_task(&self, task_id: &str) -> Result<Task> {
        power::read(self.root(), task_id)?.ok_or_else(|| Error::TaskNotFound { task_id: task_id.to_string() })
    }

    /// Imports P.O.W.E.R.'s task into an empty journal: the first event (`import`) carries
    /// P.O.W.E.R.'s snapshot at P.O.W.E.R.'s revision. Called under the writer lock, only when
    /// the change that follows has passed every check (a refused change imports nothing).
    fn import_power_task(&self, journal: &mut TaskJournal, task: &Task) -> Result<()> {
        let result = serde_json::to_value(task).map_err(|e| invalid("task", e.to_string()))?;
        let fingerprint = journal::digest(&json!({"action": journal::IMPORT_ACTION, "imported_from": task.imported_from}));
        journal.append(self, &task.task_id, journal::IMPORT_ACTION, "", &fingerprint, result)
    }

    /// A task's current state read without the writer lock (`handoff_work`): a read that
    /// finds the journal and its snapshot out of step (a transition between its two writes)
    /// reads again after the writer is done with it.
    fn read_task(&self, task_id: &str) -> Result<Task> {
        let once = || -> Result<Task> {
            let Some(journal) = self.load_task(task_id)? else { return self.power_task(task_id) };
            journal.check_snapshot(self.root(), task_id)?;
            current_task(&journal, task_id)
        };
        match once() {
            Err(Error::TaskJournalIntegrity { .. }) => {
                // Waits for the writer that is between the journal and the snapshot; if the
                // lock cannot be had (a recovery waiting for disk space), reads again as is.
                let _writer = self.lock_writer().ok();
                once()
            }
            other => other,
        }
    }

    fn list_tasks(&self) -> Result<TaskList> {
        // Listed through the folder's handle (opened beneath the root, no link followed).
        let listed = crate::store::beneath::Folder::open(self.root(), layout::TASKS_DIR, false).and_then(|f| f.entries());
        let mut ids: Vec<String> = match listed {
            Ok(entries) => entries
                .into_iter()
                .filter_map(|(name, _)| name.strip_suffix(".json").map(str::to_string))
                .filter(|id| valid_task_id(id))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(crate::store::nofollow::io_error("reading", layout::TASKS_DIR, e)),
        };
        // P.O.W.E.R.'s tasks not imported yet are listed beside paravault's own.
        ids.extend(power::task_ids(self.root())?);
        ids.sort();
        ids.dedup();
        let max = self.policy().policy.handoff.list_tasks_max;
        let truncated = ids.len() > max;
        ids.truncate(max);
        let mut tasks = Vec::new();
        for id in ids {
            // A corrupt journal is reported per task instead of hiding every other task.
            let read = self.read_task(&id);
            match read {
                Err(Error::TaskNotFound { .. }) => {}
                Ok(t) => tasks.push(TaskRow::Summary(TaskSummary {
                    task_id: id,
                    state: t.state,
                    revision: t.revision,
                    profile: t.profile,
                    maintenance_phase: t.maintenance_phase,
                    owner: t.owner,
                    title: t.title,
                    updated_at: t.updated_at,
                })),
                Err(e) => tasks.push(TaskRow::Unreadable(UnreadableTask {
                    task_id: id,
                    error: TaskError { code: e.code().to_string(), message: e.to_string() },
                })),
            }
        }
        Ok(TaskList { tasks, truncated })
    }

    /// The command fingerprint: sha256 of the canonical JSON of the request without its key.
    fn fingerprint(request: &HandoffRequest) -> String {
        let mut value = serde_json::to_value(request).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.remove("idempotency_key");
        }
        journal::digest(&value)
    }

    fn create_task(&self, request: &HandoffRequest) -> Result<Task> {
        let task_id = request.task_id.as_deref().ok_or_else(|| invalid("task_id", "create needs task_id"))?;
        let fingerprint = Self::fingerprint(request);
        let key = request.idempotency_key.clone().unwrap_or_default();
        if let Some(existing) = self.load_task(task_id)? {
            if let Some(event) = existing.by_key(&key) {
                if event.fingerprint == fingerprint {
                    return task_of(&event.result, task_id);
                }
                return Err(Error::IdempotencyConflict { key });
            }
            return Err(Error::TaskExists { task_id: task_id.to_string() });
        }
        if power::read(self.root(), task_id).map_or(true, |task| task.is_some()) {
            // P.O.W.E.R.'s task of that id (readable or not) is that task: never shadowed.
            return Err(Error::TaskExists { task_id: task_id.to_string() });
        }
        if request.expected_revision.is_some_and(|r| r != 0) {
            return Err(invalid("expected_revision", "create expects revision 0 (or none)"));
        }
        let objective = request
            .objective
            .as_deref()
            .filter(|o| !o.trim().is_empty())
            .ok_or_else(|| invalid("objective", "create needs an objective"))?;
        let owner = request.owner.as_deref().filter(|o| !o.trim().is_empty()).ok_or_else(|| invalid("owner", "create needs an owner"))?;
        let profile = request.profile.unwrap_or_default();
        if let Some(phase) = request.phase {
            if profile != Profile::Maintenance {
                return Err(invalid("phase", "phases belong to the maintenance profile"));
            }
            if phase != Phase::Detect {
                return Err(Error::PhaseOrder { task_id: task_id.to_string(), from: "none".into(), to: phase.name().into() });
            }
        }
        for (name, present) in [
            ("receipt_id", request.receipt_id.is_some()),
            ("completion_postcondition", request.completion_postcondition.is_some()),
            ("blocker", request.blocker.is_some()),
        ] {
            if present {
                return Err(invalid(name, "not accepted by create"));
            }
        }
        let at = self.clock().stamp(chrono::SecondsFormat::Micros);
        let task = Task {
            schema: TASK_SCHEMA.to_string(),
            task_id: task_id.to_string(),
            revision: 1,
            title: objective.chars().take(256).collect(),
            objective: objective.to_string(),
            owner: owner.to_string(),
            actor: request.actor.clone(),
            scope: request.scope.clone().unwrap_or_default(),
            authority: request.authority.unwrap_or_default(),
            profile,
            state: TaskState::Submitted,
            maintenance_phase: request.phase,
            source_revision: request.source_revision.clone().unwrap_or_else(|| "unknown".into()),
            next_action: request.next_action.clone(),
            required_input: None,
            error_ref: None,
            receipt_ids: Vec::new(),
            completion: None,
            changed_artifacts: request.changed_artifacts.clone().unwrap_or_default(),
            open_gates: request.open_gates.clone().unwrap_or_default(),
            human_interventions: 0,
            last_action: "create".into(),
            last_idempotency_key: key.clone(),
            content_capture: "disabled".into(),
            created_at: at.clone(),
            updated_at: at,
            imported_from: None,
        };
        let result = serde_json::to_value(&task).map_err(|e| invalid("task", e.to_string()))?;
        let mut journal = TaskJournal::default();
        journal.append(self, task_id, "create", &key, &fingerprint, result)?;
        Ok(task)
    }

    fn transition(&self, request: &HandoffRequest) -> Result<Task> {
        let action = request.action;
        let task_id = request.task_id.as_deref().ok_or_else(|| invalid("task_id", format!("{} needs task_id", action.name())))?;
        // Without a key the transition is simply not replayable (an empty key never matches).
        let key = request.idempotency_key.clone().filter(|k| !k.trim().is_empty()).unwrap_or_default();
        // A task paravault has no journal for may be P.O.W.E.R.'s: imported once, below.
        let (mut journal, import) = match self.load_task(task_id)? {
            Some(journal) => (journal, None),
            None => (TaskJournal::default(), Some(self.power_task(task_id)?)),
        };
        let stale_snapshot = import.is_none() && journal.check_snapshot(self.root(), task_id)?;
        let fingerprint = Self::fingerprint(request);
        if let Some(event) = journal.by_key(&key) {
            if event.fingerprint == fingerprint {
                return task_of(&event.result, task_id);
            }
            return Err(Error::IdempotencyConflict { key });
        }
        let mut task = match &import {
            Some(task) => task.clone(),
            None => current_task(&journal, task_id)?,
        };
        // Without expected_revision the transition acts on the current revision.
        if let Some(expected) = request.expected_revision
            && task.revision != expected
        {
            return Err(Error::RevisionConflict { task_id: task_id.to_string(), expected, found: task.revision });
        }
        if stale_snapshot {
            journal.rewrite_snapshot(self.root(), task_id)?;
        }
        let refuse = |reason: &str| Error::TransitionRefused {
            task_id: task_id.to_string(),
            action: action.name().to_string(),
            state: task.state.name().to_string(),
            reason: reason.to_string(),
        };
        let target = match action {
            HandoffAction::Resume | HandoffAction::Checkpoint => TaskState::Working,
            HandoffAction::InputRequired => TaskState::InputRequired,
            HandoffAction::Complete => TaskState::Completed,
            HandoffAction::Fail => TaskState::Failed,
            HandoffAction::Cancel => TaskState::Canceled,
            HandoffAction::Create | HandoffAction::List | HandoffAction::Show => unreachable!("dispatched before"),
        };
        if task.state.is_terminal() {
            return Err(refuse("the task is in a terminal state"));
        }
        if !task.state.can_become(target) {
            return Err(refuse(&format!("{} → {} is not an allowed transition", task.state.name(), target.name())));
        }
        if action == HandoffAction::Checkpoint && task.state != TaskState::Working {
            return Err(refuse("checkpoint records progress of a working task; resume it first"));
        }
        let mut interventions = 0;
        match action {
            HandoffAction::Resume if matches!(task.state, TaskState::InputRequired | TaskState::AuthRequired) => {
                if !request.approved {
                    return Err(Error::ApprovalRequired { operation: "handoff_work resume of a task waiting for input" });
                }
                interventions += 1;
            }
            HandoffAction::InputRequired => {
                let blocker = request
                    .blocker
                    .clone()
                    .filter(|b| !b.trim().is_empty())
                    .ok_or_else(|| invalid("blocker", "input-required needs a blocker"))?;
                let required_approval = request.required_approval.clone().unwrap_or_else(|| "caller".into());
                task.required_input = Some(RequiredInput { blocker, required_approval });
                interventions += 1;
            }
            HandoffAction::Fail => {
                let blocker =
                    request.blocker.clone().filter(|b| !b.trim().is_empty()).ok_or_else(|| invalid("blocker", "fail needs a blocker"))?;
                task.error_ref = Some(blocker);
            }
            HandoffAction::Cancel => {
                if !request.approved {
                    return Err(Error::ApprovalRequired { operation: "handoff_work cancel" });
                }
                interventions += 1;
            }
            _ => {}
        }
        // Maintenance phase: the same phase or the next one, never a skip or a step back.
        if let Some(phase) = request.phase {
            if task.profile != Profile::Maintenance {
                return Err(invalid("phase", "phases belong to the maintenance profile"));
            }
            let allowed = match task.maintenance_phase {
                None => phase == Phase::Detect,
                Some(current) => phase == current || phase as u8 == current as u8 + 1,
            };
            if !allowed {
                return Err(Error::PhaseOrder {
                    task_id: task_id.to_string(),
                    from: task.maintenance_phase.map_or("none", Phase::name).to_string(),
                    to: phase.name().to_string(),
                });
            }
            if phase == Phase::Repair && task.maintenance_phase != Some(Phase::Repair) {
                if !request.approved {
                    return Err(Error::ApprovalRequired { operation: "handoff_work maintenance repair" });
                }
                interventions += 1;
            }
            task.maintenance_phase = Some(phase);
        }
        if let Some(gates) = &request.open_gates {
            task.open_gates = gates.clone();
        }
        if let Some(artifacts) = &request.changed_artifacts {
            for artifact in artifacts {
                if !task.changed_artifacts.contains(artifact) {
                    task.changed_artifacts.push(artifact.clone());
                }
            }
            if task.changed_artifacts.len() > self.policy().policy.handoff.list_items_max {
                return Err(invalid("changed_artifacts", "the task would hold more changed artifacts than the policy allows"));
            }
        }
        if action == HandoffAction::Complete {
            if task.profile == Profile::Maintenance && task.maintenance_phase != Some(Phase::Receipt) {
                return Err(refuse(&format!(
                    "a maintenance task completes only from phase receipt (now {})",
                    task.maintenance_phase.map_or("none", Phase::name)
                )));
            }
            if !task.open_gates.is_empty() {
                return Err(refuse(&format!("open gates remain: {}", task.open_gates.join(", "))));
            }
            let receipt_id = request.receipt_id.clone().filter(|r| !r.trim().is_empty());
            let postcondition = request.completion_postcondition.clone().filter(|p| !p.trim().is_empty());
            let canonical = match (receipt_id, postcondition) {
                (Some(receipt_id), _) => find_receipt(self.root(), &receipt_id)?,
                (None, Some(postcondition)) => {
                    let completion = self.completion_receipt(&task, postcondition)?;
                    let id = completion.receipt_id.clone();
                    task.completion = Some(completion);
                    id
                }
                (None, None) => {
                    return Err(invalid(
                        "receipt_id",
                        "complete needs a receipt_id (seq:<n> or a receipt's trace_id), or a completion_postcondition \
                         with changed_artifacts (e.g. completion_postcondition: \"the runbook names the new replica\", \
                         changed_artifacts: [\"03_Resources/runbook.md\"])",
                    ));
                }
            };
            if !task.receipt_ids.contains(&canonical) {
                task.receipt_ids.push(canonical);
            }
            task.required_input = None;
        }
        if action == HandoffAction::Resume {
            task.required_input = None;
        }
        if let Some(next) = &request.next_action {
            task.next_action = Some(next.clone());
        }
        if let Some(revision) = &request.source_revision {
            task.source_revision = revision.clone();
        }
        task.state = target;
        task.revision += 1;
        task.human_interventions += interventions;
        task.last_action = action.name().to_string();
        task.last_idempotency_key = key.clone();
        task.updated_at = self.clock().stamp(chrono::SecondsFormat::Micros);
        let result = serde_json::to_value(&task).map_err(|e| invalid("task", e.to_string()))?;
        if let Some(imported) = &import {
            self.import_power_task(&mut journal, imported)?;
        }
        journal.append(self, task_id, action.name(), &key, &fingerprint, result)?;
        Ok(task)
    }
}

impl Vault {
    /// The task-completion receipt of `task` completing with `postcondition`: the sha256 of each
    /// of its changed artifacts, read beneath the vault root (a path that is refused, missing or
    /// not a file is `invalid_argument` naming it). Called under the writer lock.
    fn completion_receipt(&self, task: &Task, postcondition: String) -> Result<CompletionReceipt> {
        if task.changed_artifacts.is_empty() {
            return Err(invalid(
                "changed_artifacts",
                "a completion_postcondition needs the artifact paths it holds of (e.g. changed_artifacts: [\"03_Resources/runbook.md\"])",
            ));
        }
        let mut artifacts = Vec::with_capacity(task.changed_artifacts.len());
        for raw in &task.changed_artifacts {
            let unreadable = |why: &str| invalid("changed_artifacts", format!("{raw}: {why} (a vault-relative file path)"));
            let path = crate::note::path::VaultPath::parse(raw).map_err(|e| unreadable(&e.to_string()))?;
            crate::store::nofollow::resolve_safe(self.root(), path.as_str()).map_err(|e| unreadable(&e.to_string()))?;
            let bytes = crate::store::beneath::read(self.root(), path.as_str())
                .map_err(|e| unreadable(&e.to_string()))?
                .ok_or_else(|| unreadable("no such file in the vault"))?;
            artifacts.push(CompletedArtifact { path: path.to_string(), sha256: crate::hex::sha256_hex(&bytes) });
        }
        let revision = task.revision + 1;
        let identity = json!({"schema": COMPLETION_SCHEMA, "task_id": task.task_id, "revision": revision,
                              "postcondition": postcondition, "artifacts": artifacts});
        let digest = crate::hex::sha256_hex(journal::canonical_json(&identity).as_bytes());
        Ok(CompletionReceipt {
            schema: COMPLETION_SCHEMA.to_string(),
            receipt_id: format!("tcr_{digest}"),
            task_id: task.task_id.clone(),
            revision,
            postcondition,
            artifacts,
            completed_at: self.clock().stamp(chrono::SecondsFormat::Micros),
        })
    }
}

/// A task snapshot as the journal recorded it (an event's result), typed.
fn task_of(result: &Value, task_id: &str) -> Result<Task> {
    Task::deserialize(result).map_err(|e| Error::TaskJournalIntegrity { task_id: task_id.to_string(), reason: format!("snapshot: {e}") })
}

/// The task's current snapshot (its journal's last event's result), typed.
fn current_task(journal: &TaskJournal, task_id: &str) -> Result<Task> {
    task_of(journal.current().unwrap_or(&Value::Null), task_id)
}

/// Finds an ok receipt by `seq:<n>` or by `trace_id`; returns its canonical id `seq:<n>`.
fn find_receipt(root: &std::path::Path, receipt_id: &str) -> Result<String> {
    let not_found = || Error::ReceiptNotFound { receipt_id: receipt_id.to_string() };
    let by_seq = receipt_id.strip_prefix("seq:").map(|n| n.parse::<u64>().map_err(|_| not_found())).transpose()?;
    let path = layout::join(root, layout::RECEIPTS);
    let text = match crate::store::durable::read_engine_file(root, &path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
        Err(e) => return Err(Error::io("reading", layout::RECEIPTS, e)),
    };
    for receipt in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        let seq = receipt.get("seq").and_then(Value::as_u64);
        let matches = match by_seq {
            Some(n) => seq == Some(n),
            None => receipt.get("trace_id").and_then(Value::as_str) == Some(receipt_id),
        };
        if matches {
            if receipt.get("status").and_then(Value::as_str) != Some("ok") {
                return Err(not_found());
            }
            return seq.map(|s| format!("seq:{s}")).ok_or_else(not_found);
        }
    }
    Err(not_found())
}
