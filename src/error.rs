//! The engine's error type: every failure a caller can see, each with a stable code.
//!
//! Expected outcomes (a lint finding, a rejected write) are values, not errors. An `Error` is
//! something that stopped an operation; adapters map `Error::code` to exit codes and MCP
//! tool errors. Messages never contain absolute paths: they name vault-relative paths only.

use std::io;

/// Why a caller-supplied path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    #[error("the path is empty")]
    Empty,
    #[error("absolute paths are not allowed")]
    Absolute,
    #[error("drive letters are not allowed")]
    DriveLetter,
    #[error("'..' components are not allowed")]
    ParentComponent,
    #[error("'.' components are not allowed")]
    CurrentComponent,
    #[error("empty path components are not allowed")]
    EmptyComponent,
    #[error("backslashes are not allowed")]
    Backslash,
    #[error("NUL or control characters are not allowed")]
    ControlCharacter,
    #[error("the percent-encoding is malformed or not UTF-8")]
    BadPercentEncoding,
    #[error("the path passes through a symbolic link")]
    Symlink,
    #[error("the path leaves the vault root")]
    OutsideVault,
    #[error("notes must have the .md extension")]
    NotMarkdown,
    #[error("notes must live in a P.A.R.A. folder")]
    NotInParaFolder,
    #[error("the path is too long")]
    TooLong,
    #[error("a path component is longer than 255 bytes")]
    ComponentTooLong,
    #[error("bidirectional text controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F) are not allowed")]
    BidiControl,
    #[error("the name is one the engine owns (catalog pages _index*.md, index.md, log.md)")]
    EngineOwned,
    #[error("notes cannot live in a hidden folder or a folder the policy excludes (layout.excluded_dirs)")]
    ExcludedFolder,
}

/// The operation name `human_approval_required` carries for a memory change (a ctxvault tool
/// whose proposal holds the whole change): it is applied by its proposal id, never by calling
/// the tool again.
pub const MEMORY_CHANGE_TOOL: &str = "a ctxvault memory tool (applied by proposal id)";

/// The operation name `human_approval_required` carries for a change held by the approval gate
/// for a writer that has no governed operation of its own (a vaultspec edit, a stepstone `add`,
/// a ctxvault overwrite: docs/governance.md, "What a rule governs"): it is applied by its
/// proposal id once a person approved it.
pub const HELD_CHANGE_TOOL: &str = "this change (held for a person; applied by proposal id)";

/// What a caller does once a person approved a proposal: a memory change or a held change is
/// applied by its id; every other governed operation is called again with the same arguments.
fn after_approval(operation: &str, proposal_id: &str) -> String {
    if operation == MEMORY_CHANGE_TOOL || operation == HELD_CHANGE_TOOL {
        format!(
            "apply it by its id: `paravault apply {proposal_id}`, or apply_memory_change with {{\"proposal\": {{\"proposal_id\": \"{proposal_id}\"}}}}"
        )
    } else {
        "call again".to_string()
    }
}

/// Every error the engine returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("path '{path}' refused: {reason}")]
    PathRefused { path: String, reason: PathRefusal },

    #[error("vault root '{0}' is not a usable directory")]
    VaultUnusable(String),

    #[error("engine path '{path}' refused: {reason}")]
    VaultBoundary { path: String, reason: String },

    #[error("policy file {file} is invalid at line {line}: {reason}")]
    PolicyInvalid { file: String, line: usize, reason: String },

    #[error("I/O error while {action} '{path}': {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },

    #[error("the disk is full while {action} '{path}'; retry when space is freed (a committed write completes then)")]
    DiskFull { action: &'static str, path: String },

    #[error("catalog '{path}' is hand-written and is never overwritten")]
    CatalogConflict { path: String },

    #[error("catalog entry for '{path}' is larger than the page limit of {limit} bytes")]
    CatalogEntryTooLarge { path: String, limit: usize },

    #[error("no catalog for '{category}': {reason}")]
    CatalogMissing { category: String, reason: String },

    #[error("invalid argument '{name}': {reason}")]
    InvalidArgument { name: &'static str, reason: String },

    #[error("note '{path}' cannot be read: {reason}")]
    NoteUnreadable { path: String, reason: String },

    #[error("note '{path}' already exists")]
    AlreadyExists { path: String },

    #[error("note '{path}' changed: expected sha256 {expected}, found {found}")]
    PreconditionFailed { path: String, expected: String, found: String },

    #[error("idempotency key '{key}' was already used for a different mutation")]
    IdempotencyConflict { key: String },

    #[error("write to '{path}' refused by the lint gate: {summary}")]
    GateRejected { path: String, summary: String, findings: Vec<crate::finding::Finding> },

    #[error("the new content of '{path}' is invalid: {reason}")]
    InvalidContent { path: String, reason: String },

    #[error("{operation} requires approved=true")]
    ApprovalRequired { operation: &'static str },

    #[error("proposal refused: {reason}")]
    ProposalInvalid { reason: String },

    #[error(
        "{operation}: a person must approve proposal {proposal_id} (approved=true from the caller is not enough under the policy's approvals rules); ask them to run `paravault approve {proposal_id} --approver NAME`, then {}",
        after_approval(operation, proposal_id)
    )]
    HumanApprovalRequired { operation: &'static str, proposal_id: String },

    #[error(
        "'{path}': a person must approve this change ({operation} under the policy's approvals rules), and this tool holds no proposal for one; propose the new text with propose_memory_change and ask a person to approve that proposal"
    )]
    ProposalRequired { operation: &'static str, path: String },

    #[error("proposal {proposal_id} was rejected by {approver}{}", if comment.is_empty() { String::new() } else { format!(": {comment}") })]
    ProposalRejected { proposal_id: String, approver: String, comment: String },

    #[error("the approval of proposal {proposal_id} is stale: {reason}")]
    ApprovalStale { proposal_id: String, reason: String },

    #[error("proposal {proposal_id} was already {decision}")]
    AlreadyDecided { proposal_id: String, decision: &'static str },

    #[error("proposal {proposal_id} does not exist")]
    ProposalNotFound { proposal_id: String },

    #[error("the approver name or secret is wrong")]
    ApproverRefused,

    #[error("{what}: {reason}")]
    SignatureInvalid { what: String, reason: String },

    #[error("the push was refused by the vault's gate: {summary}")]
    PushRefused { summary: String },

    #[error(
        "verb '{verb}' is not reachable through invoke: it is on the gateway's denylist (it installs, serves, approves, changes the server's configuration or runs commands) or it stands for no MCP tool whose authority and rate limit it could run with (docs/governance.md, \"The gateway\"); nothing was run"
    )]
    GatewayVerbDenied { verb: String },

    #[error("git is not usable here: {reason}")]
    GitUnavailable { reason: String },

    #[error("replication failed at {step}: {reason}")]
    Replication { step: &'static str, reason: String },

    #[error("the remote's history was rewritten: {reason}; nothing was changed here")]
    RemoteRewritten { reason: String },

    #[error("{capability} is not available: {remediation}")]
    NotConfigured { capability: &'static str, remediation: String },

    #[error("embedding model {model} is not available: {reason}. {remediation}")]
    ModelUnavailable { model: String, reason: String, remediation: String },

    #[error("embedding model {model}: {file} failed verification (expected sha256 {expected}, found {found}); {remediation}")]
    ModelVerificationFailed { model: String, file: String, expected: String, found: String, remediation: String },

    #[error("network egress is denied by policy, so {what} was not downloaded. {remediation}")]
    EgressDenied { what: String, remediation: String },

    #[error("embedding failed: {reason}")]
    EmbeddingFailed { reason: String },

    #[error("transaction {seq} is committed but not yet in place ({reason}); it completes on the next write or open")]
    TransactionIncomplete { seq: u64, reason: String },
    #[error("search query invalid: {reason}")]
    SearchQueryInvalid { reason: String },

    #[error("dense index unavailable: {reason}")]
    DenseIndexUnavailable { reason: String },

    #[error("reranker unavailable: {reason}")]
    RerankerUnavailable { reason: String },

    #[error("search generation '{generation_id}' is corrupt: {reason}")]
    GenerationCorrupt { generation_id: String, reason: String },

    #[error("no active search generation: {reason}")]
    NoActiveGeneration { reason: String },

    #[error("sync refused: {} note(s) would be excluded: {}", excluded.len(), excluded.iter().map(|(p, r)| format!("{p} ({r})")).collect::<Vec<_>>().join("; "))]
    SyncRefused { excluded: Vec<(String, String)> },

    #[error("sync refused: {reason}")]
    DenseLossRefused { reason: String },

    #[error("search index error while {action}: {reason}")]
    SearchIndex { action: &'static str, reason: String },

    #[error("task '{task_id}' does not exist")]
    TaskNotFound { task_id: String },

    #[error("task '{task_id}' is P.O.W.E.R.'s ({file}) and cannot be read as a task: {reason}; the file is left as it is")]
    PowerTaskUnread { task_id: String, file: String, reason: String },

    #[error("task '{task_id}' already exists")]
    TaskExists { task_id: String },

    #[error("task '{task_id}' is at revision {found}, not the expected {expected}")]
    RevisionConflict { task_id: String, expected: u64, found: u64 },

    #[error("task '{task_id}': {action} refused in state {state}: {reason}")]
    TransitionRefused { task_id: String, action: String, state: String, reason: String },

    #[error("task '{task_id}': maintenance phase {to} cannot follow {from} (order: detect, dry-run, repair, verify, receipt)")]
    PhaseOrder { task_id: String, from: String, to: String },

    #[error("receipt '{receipt_id}' is not an ok receipt in the vault's receipt log")]
    ReceiptNotFound { receipt_id: String },

    #[error("task '{task_id}' journal failed integrity validation: {reason}")]
    TaskJournalIntegrity { task_id: String, reason: String },

    /// An unknown vault, a restricted vault the caller is not attached to and a name no vault
    /// can have (a path, a root) read exactly the same, so the answer reveals nothing (not even
    /// whether the vault exists, or that the name was path-like): the message names no name.
    #[error("no vault by that vault_name is available to this agent; list_vaults names the ones that are")]
    VaultAccessDenied { vault_name: String },

    #[error("agent '{agent}' has {authority} authority on vault '{vault_name}'; {tool} needs {needed}")]
    AuthorityInsufficient { vault_name: String, agent: String, authority: &'static str, needed: &'static str, tool: String },

    #[error("vault '{vault_name}' is a {vault_type} vault; {tool} works on {needed} vaults")]
    WrongVaultType { vault_name: String, vault_type: &'static str, tool: String, needed: &'static str },

    #[error("the vault registry {file} is invalid: {reason}")]
    RegistryInvalid { file: String, reason: String },

    #[error("no episode '{episode_id}' in this vault")]
    EpisodeNotFound { episode_id: String },

    #[error("episode '{episode_id}' is not open: {reason}")]
    EpisodeNotOpen { episode_id: String, reason: String },

    #[error("no skill '{skill_name}' in this vault")]
    SkillNotFound { skill_name: String },

    #[error("'{file}' cannot be stored: {reason}")]
    UnsupportedDocument { file: String, reason: String },
    /// A failure an MCP surface already shaped as its contract's failure JSON (the stepstone
    /// envelope): the adapter returns it as the `isError` result unchanged.
    #[error("{}", .0.pointer("/error/message").and_then(serde_json::Value::as_str).unwrap_or("the operation failed"))]
    SurfaceFailure(Box<serde_json::Value>),
}

/// How the CLI exits on an error (docs/errors.md): the process exit code is the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitClass {
    /// The command ran and found problems (lint findings, a refused sync).
    Findings = 1,
    /// The request was wrong: fix the arguments or the input.
    Usage = 2,
    /// The vault, its policy or its index needs a person.
    Vault = 3,
    /// I/O or a resource failed: retry or check the machine.
    Io = 4,
}

/// One row of the error-code table: everything an adapter says about a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeRow {
    /// The stable machine-readable code (docs/errors.md).
    pub code: &'static str,
    /// The CLI's exit code.
    pub exit: ExitClass,
    /// Whether retrying the same call later may succeed.
    pub retryable: bool,
    /// What the caller should do next (MCP `remediation`).
    pub remediation: &'static str,
}

const fn row(code: &'static str, exit: ExitClass, retryable: bool, remediation: &'static str) -> CodeRow {
    CodeRow { code, exit, retryable, remediation }
}

/// The error-code table: one row per code. `Error::row` maps every variant to its row in one
/// exhaustive match, so a new variant does not compile without its code, exit code,
/// retryability and remediation; adapters look up the codes they raise themselves
/// (`rate_limited`, `internal`) with `row_of`.
pub mod codes {
    use super::ExitClass::{Findings, Io, Usage, Vault};
    use super::{CodeRow, row};

    pub(crate) const PATH_REFUSED: CodeRow =
        row("path_refused", Usage, false, "use a vault-relative Markdown path inside a P.A.R.A. folder");
    pub(crate) const VAULT_UNUSABLE: CodeRow =
        row("vault_unusable", Vault, false, "a person must fix the vault or its policy; run `paravault doctor`");
    pub(crate) const VAULT_BOUNDARY: CodeRow =
        row("vault_boundary", Vault, false, "omit vault_path or pass exactly the configured vault root (see get_server_info)");
    pub(crate) const POLICY_INVALID: CodeRow =
        row("policy_invalid", Vault, false, "a person must fix the vault or its policy; run `paravault doctor`");
    pub(crate) const IO_ERROR: CodeRow = row("io_error", Io, true, "retry later; if it persists run `paravault doctor`");
    pub(crate) const DISK_FULL: CodeRow =
        row("disk_full", Io, true, "free disk space, then retry; a committed write completes on the next write or open");
    pub(crate) const CATALOG_CONFLICT: CodeRow =
        row("catalog_conflict", Vault, false, "a person must fix the named catalog or note; run lint_vault");
    pub(crate) const CATALOG_ENTRY_EXCEEDS_LIMIT: CodeRow =
        row("catalog_entry_exceeds_limit", Vault, false, "a person must fix the named catalog or note; run lint_vault");
    pub(crate) const CATALOG_MISSING: CodeRow = row("catalog_missing", Usage, false, "call ensure_sub_index (or generate_index) first");
    pub(crate) const INVALID_ARGUMENT: CodeRow =
        row("invalid_argument", Usage, false, "fix the named argument so it matches the tool's input schema");
    pub(crate) const NOTE_UNREADABLE: CodeRow =
        row("note_unreadable", Io, false, "check the path (read_sub_index lists notes) and the file's encoding");
    pub(crate) const ALREADY_EXISTS: CodeRow =
        row("already_exists", Usage, false, "choose another name, or change the note with propose_memory_change");
    pub(crate) const PRECONDITION_FAILED: CodeRow =
        row("precondition_failed", Usage, false, "re-read the note with read_note and base the change on its current sha256");
    pub(crate) const IDEMPOTENCY_CONFLICT: CodeRow =
        row("idempotency_conflict", Usage, false, "use a new idempotency_key for a different change");
    pub(crate) const LINT_GATE_REJECTED: CodeRow =
        row("lint_gate_rejected", Usage, false, "fix the problems named in the message and call again");
    pub(crate) const INVALID_CONTENT: CodeRow =
        row("invalid_content", Usage, false, "fix the problems named in the message and call again");
    pub const APPROVAL_REQUIRED: CodeRow = row(
        "approval_required",
        Usage,
        false,
        "show the proposal to the user and call again with approved=true only after explicit approval",
    );
    pub(crate) const PROPOSAL_INVALID: CodeRow =
        row("proposal_invalid", Usage, false, "call propose_memory_change again and pass its result unchanged");
    pub(crate) const TRANSACTION_INCOMPLETE: CodeRow =
        row("transaction_incomplete", Io, true, "retry later; if it persists run `paravault doctor`");
    pub(crate) const NOT_CONFIGURED: CodeRow =
        row("not_configured", Usage, false, "call again without the option the message names; this capability is not configured");
    pub(crate) const SEARCH_QUERY_INVALID: CodeRow = row("search_query_invalid", Usage, false, "rephrase the query as plain words");
    pub(crate) const DENSE_INDEX_UNAVAILABLE: CodeRow = row(
        "dense_index_unavailable",
        Vault,
        false,
        "use search_mode=fts (or auto, vector, hybrid, graph_assisted, which answer lexically), or build a dense index with sync_vault fts_only=false (force_rebuild=true after a model change)",
    );
    pub(crate) const RERANKER_UNAVAILABLE: CodeRow = row(
        "reranker_unavailable",
        Io,
        false,
        "use search_mode=hybrid, or pin the policy's reranker (sha256 of its files) and provide them in reranker.local_dir or the Hugging Face cache",
    );
    pub(crate) const GENERATION_CORRUPT: CodeRow = row("generation_corrupt", Vault, false, "run sync_vault with force_rebuild=true");
    pub(crate) const NO_ACTIVE_GENERATION: CodeRow =
        row("no_active_generation", Vault, false, "run sync_vault to publish a search generation");
    pub(crate) const SYNC_REFUSED: CodeRow = row(
        "sync_refused",
        Findings,
        false,
        "fix the named notes (lint_vault, heal_frontmatter_tool) or call sync_vault with allow_partial=true",
    );
    pub(crate) const DENSE_LOSS_REFUSED: CodeRow = row(
        "dense_loss_refused",
        Findings,
        false,
        "call sync_vault with fts_only=false to keep the dense index current, or accept_dense_loss=true to drop it",
    );
    pub(crate) const SEARCH_INDEX_ERROR: CodeRow =
        row("search_index_error", Io, true, "retry later; if it persists run sync_vault with force_rebuild=true");
    pub(crate) const TASK_NOT_FOUND: CodeRow = row("task_not_found", Usage, false, "check task_id with handoff_work action=list");
    pub(crate) const POWER_TASK_UNREAD: CodeRow = row(
        "power_task_unread",
        Usage,
        false,
        "fix the named field of P.O.W.E.R.'s file, or finish the task with P.O.W.E.R.; paravault never rewrites it",
    );
    pub(crate) const TASK_EXISTS: CodeRow =
        row("task_exists", Usage, false, "choose another task_id, or read the existing task with action=show");
    pub(crate) const REVISION_CONFLICT: CodeRow =
        row("revision_conflict", Usage, false, "call handoff_work action=show and retry with its revision as expected_revision");
    pub(crate) const TRANSITION_REFUSED: CodeRow =
        row("transition_refused", Usage, false, "call handoff_work action=show; the message names what the task's state allows");
    pub(crate) const MAINTENANCE_PHASE_ORDER: CodeRow =
        row("maintenance_phase_order", Usage, false, "advance maintenance phases in order: detect, dry-run, repair, verify, receipt");
    pub(crate) const RECEIPT_NOT_FOUND: CodeRow = row(
        "receipt_not_found",
        Usage,
        false,
        "pass receipt_id as seq:<n> or the trace_id of an ok receipt (read_memory_history lists them)",
    );
    pub(crate) const TASK_JOURNAL_INTEGRITY: CodeRow = row(
        "task_journal_integrity",
        Vault,
        false,
        "a person must inspect the task's event journal; the task is not written to until then",
    );
    pub(crate) const MODEL_UNAVAILABLE: CodeRow = row(
        "model_unavailable",
        Io,
        false,
        "provide the pinned model files offline (embedding.local_dir or PARAVAULT_MODEL_DIR); see get_server_info with probe_provider=true",
    );
    pub(crate) const MODEL_VERIFICATION_FAILED: CodeRow = row(
        "model_verification_failed",
        Vault,
        false,
        "provide the pinned model files offline (embedding.local_dir or PARAVAULT_MODEL_DIR); see get_server_info with probe_provider=true",
    );
    pub(crate) const EGRESS_DENIED: CodeRow = row(
        "egress_denied",
        Usage,
        false,
        "provide the pinned model files offline (embedding.local_dir or PARAVAULT_MODEL_DIR); see get_server_info with probe_provider=true",
    );
    pub(crate) const EMBEDDING_FAILED: CodeRow =
        row("embedding_failed", Io, false, "retry; if it persists call get_server_info with probe_provider=true");
    pub(crate) const SURFACE_FAILURE: CodeRow = row(
        "surface_failure",
        Usage,
        false,
        "read the failure's details: the surface's own contract (e.g. stepstone's envelope) names its code and whether to retry",
    );
    pub(crate) const VAULT_ACCESS_DENIED: CodeRow =
        row("vault_access_denied", Usage, false, "call list_vaults and use one of the vault names it lists");
    pub(crate) const AUTHORITY_INSUFFICIENT: CodeRow = row(
        "authority_insufficient",
        Usage,
        false,
        "ask the vault's owner for a higher authority (paravault vaults add --agent NAME=apply)",
    );
    pub(crate) const WRONG_VAULT_TYPE: CodeRow =
        row("wrong_vault_type", Usage, false, "call list_vaults and choose a vault of the kind this tool works on");
    pub(crate) const REGISTRY_INVALID: CodeRow = row(
        "registry_invalid",
        Vault,
        false,
        "a person must fix vaults.json in the config folder (paravault vaults list names the problem)",
    );
    pub(crate) const EPISODE_NOT_FOUND: CodeRow = row("episode_not_found", Usage, false, "check the episode id with query_episodes");
    pub(crate) const EPISODE_NOT_OPEN: CodeRow =
        row("episode_not_open", Usage, false, "act on the episode that replaced it (episode_history names it)");
    pub(crate) const SKILL_NOT_FOUND: CodeRow = row("skill_not_found", Usage, false, "call list_skills for the available names");
    pub(crate) const UNSUPPORTED_DOCUMENT: CodeRow =
        row("unsupported_document", Usage, false, "store the text as .md or .txt; the message says what cannot be converted");
    pub const HUMAN_APPROVAL_REQUIRED: CodeRow = row(
        "human_approval_required",
        Usage,
        false,
        "tell the user the proposal id: a person must approve it (`paravault approve <proposal_id>` or the web UI); then call again with the same arguments, or, for a memory change, apply it by its proposal id (the message says which)",
    );
    pub(crate) const PROPOSAL_REQUIRED: CodeRow = row(
        "proposal_required",
        Usage,
        false,
        "a person must approve this change: propose it with propose_memory_change and give the person the proposal id",
    );
    pub const PROPOSAL_REJECTED: CodeRow = row(
        "proposal_rejected",
        Usage,
        false,
        "a person rejected this proposal; do not retry it: read the comment and propose a different change",
    );
    pub(crate) const APPROVAL_STALE: CodeRow =
        row("approval_stale", Usage, false, "the notes changed since the approval; propose the change again and ask for a new approval");
    pub(crate) const ALREADY_DECIDED: CodeRow =
        row("already_decided", Usage, false, "decisions are immutable; read the recorded one with `paravault approvals`");
    pub(crate) const PROPOSAL_NOT_FOUND: CodeRow = row(
        "proposal_not_found",
        Usage,
        false,
        "pass a proposal_id that propose_memory_change or a human_approval_required error returned",
    );
    pub(crate) const APPROVER_REFUSED: CodeRow =
        row("approver_refused", Usage, false, "check the approver name and secret (`paravault approver list` names the approvers)");
    pub(crate) const SIGNATURE_INVALID: CodeRow = row(
        "signature_invalid",
        Vault,
        false,
        "an approval, an approver key change or a policy change is not signed by an active approver key; nothing was honoured: decide again with `paravault approve`, sign the policy with `paravault policy sign`, or register the key with `paravault approver register`",
    );
    pub(crate) const PUSH_REFUSED: CodeRow = row(
        "push_refused",
        Usage,
        false,
        "the remote's gate refused the pushed change and the remote is unchanged; fix what the message names (a note the lint gate blocks, an unsigned decision or policy change, a rewritten receipt) and push again",
    );
    pub(crate) const GIT_UNAVAILABLE: CodeRow =
        row("git_unavailable", Usage, false, "install git 2.38 or newer (replication drives the git program)");
    pub(crate) const REPLICATION_FAILED: CodeRow = row(
        "replication_failed",
        Io,
        true,
        "nothing acknowledged was lost: local writes stay committed here; check the remote is reachable and run `paravault replicate` again",
    );
    pub(crate) const REMOTE_REWRITTEN: CodeRow = row(
        "remote_history_rewritten",
        Vault,
        false,
        "the remote no longer holds this replica's history (a force-push or a reset); a person must restore the remote's branch, or point the replica at another remote",
    );
    pub(crate) const VERB_DENIED: CodeRow = row(
        "verb_denied",
        Usage,
        false,
        "this verb is not reachable through invoke (policy specdocs.gateway_denylist); a person runs it at a terminal",
    );
    /// A request refused by an adapter's rate limit.
    pub(crate) const RATE_LIMITED: CodeRow = row("rate_limited", Io, true, "wait for the stated delay, then retry");
    /// A failure the engine did not type (a panic caught by an adapter).
    pub(crate) const INTERNAL: CodeRow = row("internal", Io, true, "run get_server_info and lint_vault for details");

    /// Every row, for lookups by code.
    pub const ALL: [CodeRow; 64] = [
        PATH_REFUSED,
        VAULT_UNUSABLE,
        VAULT_BOUNDARY,
        POLICY_INVALID,
        IO_ERROR,
        DISK_FULL,
        CATALOG_CONFLICT,
        CATALOG_ENTRY_EXCEEDS_LIMIT,
        CATALOG_MISSING,
        INVALID_ARGUMENT,
        NOTE_UNREADABLE,
        ALREADY_EXISTS,
        PRECONDITION_FAILED,
        IDEMPOTENCY_CONFLICT,
        LINT_GATE_REJECTED,
        INVALID_CONTENT,
        APPROVAL_REQUIRED,
        PROPOSAL_INVALID,
        TRANSACTION_INCOMPLETE,
        NOT_CONFIGURED,
        SEARCH_QUERY_INVALID,
        DENSE_INDEX_UNAVAILABLE,
        RERANKER_UNAVAILABLE,
        GENERATION_CORRUPT,
        NO_ACTIVE_GENERATION,
        SYNC_REFUSED,
        DENSE_LOSS_REFUSED,
        SEARCH_INDEX_ERROR,
        TASK_NOT_FOUND,
        POWER_TASK_UNREAD,
        TASK_EXISTS,
        REVISION_CONFLICT,
        TRANSITION_REFUSED,
        MAINTENANCE_PHASE_ORDER,
        RECEIPT_NOT_FOUND,
        TASK_JOURNAL_INTEGRITY,
        MODEL_UNAVAILABLE,
        MODEL_VERIFICATION_FAILED,
        EGRESS_DENIED,
        EMBEDDING_FAILED,
        SURFACE_FAILURE,
        VAULT_ACCESS_DENIED,
        AUTHORITY_INSUFFICIENT,
        WRONG_VAULT_TYPE,
        REGISTRY_INVALID,
        EPISODE_NOT_FOUND,
        EPISODE_NOT_OPEN,
        SKILL_NOT_FOUND,
        UNSUPPORTED_DOCUMENT,
        HUMAN_APPROVAL_REQUIRED,
        PROPOSAL_REQUIRED,
        PROPOSAL_REJECTED,
        APPROVAL_STALE,
        ALREADY_DECIDED,
        PROPOSAL_NOT_FOUND,
        APPROVER_REFUSED,
        SIGNATURE_INVALID,
        PUSH_REFUSED,
        VERB_DENIED,
        GIT_UNAVAILABLE,
        REPLICATION_FAILED,
        REMOTE_REWRITTEN,
        RATE_LIMITED,
        INTERNAL,
    ];
}

/// The row of `code`, if it is in the table.
pub(crate) fn row_of(code: &str) -> Option<CodeRow> {
    codes::ALL.iter().copied().find(|row| row.code == code)
}

impl Error {
    /// This error's row of the code table (`codes`).
    pub fn row(&self) -> CodeRow {
        match self {
            Error::PathRefused { .. } => codes::PATH_REFUSED,
            Error::VaultUnusable(_) => codes::VAULT_UNUSABLE,
            Error::VaultBoundary { .. } => codes::VAULT_BOUNDARY,
            Error::PolicyInvalid { .. } => codes::POLICY_INVALID,
            Error::Io { .. } => codes::IO_ERROR,
            Error::DiskFull { .. } => codes::DISK_FULL,
            Error::CatalogConflict { .. } => codes::CATALOG_CONFLICT,
            Error::CatalogEntryTooLarge { .. } => codes::CATALOG_ENTRY_EXCEEDS_LIMIT,
            Error::CatalogMissing { .. } => codes::CATALOG_MISSING,
            Error::InvalidArgument { .. } => codes::INVALID_ARGUMENT,
            Error::NoteUnreadable { .. } => codes::NOTE_UNREADABLE,
            Error::AlreadyExists { .. } => codes::ALREADY_EXISTS,
            Error::PreconditionFailed { .. } => codes::PRECONDITION_FAILED,
            Error::IdempotencyConflict { .. } => codes::IDEMPOTENCY_CONFLICT,
            Error::GateRejected { .. } => codes::LINT_GATE_REJECTED,
            Error::InvalidContent { .. } => codes::INVALID_CONTENT,
            Error::ApprovalRequired { .. } => codes::APPROVAL_REQUIRED,
            Error::ProposalInvalid { .. } => codes::PROPOSAL_INVALID,
            Error::TransactionIncomplete { .. } => codes::TRANSACTION_INCOMPLETE,
            Error::NotConfigured { .. } => codes::NOT_CONFIGURED,
            Error::SearchQueryInvalid { .. } => codes::SEARCH_QUERY_INVALID,
            Error::DenseIndexUnavailable { .. } => codes::DENSE_INDEX_UNAVAILABLE,
            Error::RerankerUnavailable { .. } => codes::RERANKER_UNAVAILABLE,
            Error::GenerationCorrupt { .. } => codes::GENERATION_CORRUPT,
            Error::NoActiveGeneration { .. } => codes::NO_ACTIVE_GENERATION,
            Error::SyncRefused { .. } => codes::SYNC_REFUSED,
            Error::DenseLossRefused { .. } => codes::DENSE_LOSS_REFUSED,
            Error::SearchIndex { .. } => codes::SEARCH_INDEX_ERROR,
            Error::TaskNotFound { .. } => codes::TASK_NOT_FOUND,
            Error::PowerTaskUnread { .. } => codes::POWER_TASK_UNREAD,
            Error::TaskExists { .. } => codes::TASK_EXISTS,
            Error::RevisionConflict { .. } => codes::REVISION_CONFLICT,
            Error::TransitionRefused { .. } => codes::TRANSITION_REFUSED,
            Error::PhaseOrder { .. } => codes::MAINTENANCE_PHASE_ORDER,
            Error::ReceiptNotFound { .. } => codes::RECEIPT_NOT_FOUND,
            Error::TaskJournalIntegrity { .. } => codes::TASK_JOURNAL_INTEGRITY,
            Error::ModelUnavailable { .. } => codes::MODEL_UNAVAILABLE,
            Error::ModelVerificationFailed { .. } => codes::MODEL_VERIFICATION_FAILED,
            Error::EgressDenied { .. } => codes::EGRESS_DENIED,
            Error::EmbeddingFailed { .. } => codes::EMBEDDING_FAILED,
            Error::SurfaceFailure(_) => codes::SURFACE_FAILURE,
            Error::VaultAccessDenied { .. } => codes::VAULT_ACCESS_DENIED,
            Error::AuthorityInsufficient { .. } => codes::AUTHORITY_INSUFFICIENT,
            Error::WrongVaultType { .. } => codes::WRONG_VAULT_TYPE,
            Error::RegistryInvalid { .. } => codes::REGISTRY_INVALID,
            Error::EpisodeNotFound { .. } => codes::EPISODE_NOT_FOUND,
            Error::EpisodeNotOpen { .. } => codes::EPISODE_NOT_OPEN,
            Error::SkillNotFound { .. } => codes::SKILL_NOT_FOUND,
            Error::UnsupportedDocument { .. } => codes::UNSUPPORTED_DOCUMENT,
            Error::HumanApprovalRequired { .. } => codes::HUMAN_APPROVAL_REQUIRED,
            Error::ProposalRequired { .. } => codes::PROPOSAL_REQUIRED,
            Error::ProposalRejected { .. } => codes::PROPOSAL_REJECTED,
            Error::ApprovalStale { .. } => codes::APPROVAL_STALE,
            Error::AlreadyDecided { .. } => codes::ALREADY_DECIDED,
            Error::ProposalNotFound { .. } => codes::PROPOSAL_NOT_FOUND,
            Error::ApproverRefused => codes::APPROVER_REFUSED,
            Error::SignatureInvalid { .. } => codes::SIGNATURE_INVALID,
            Error::PushRefused { .. } => codes::PUSH_REFUSED,
            Error::GatewayVerbDenied { .. } => codes::VERB_DENIED,
            Error::GitUnavailable { .. } => codes::GIT_UNAVAILABLE,
            Error::Replication { .. } => codes::REPLICATION_FAILED,
            Error::RemoteRewritten { .. } => codes::REMOTE_REWRITTEN,
        }
    }

    /// Stable machine-readable code; documented in docs/errors.md.
    pub fn code(&self) -> &'static str {
        self.row().code
    }

    /// Whether retrying the same call later may succeed.
    pub fn retryable(&self) -> bool {
        self.row().retryable
    }

    /// Whether the embedding model cannot be had here (no source holds its files, egress is
    /// denied, or the files fail verification): the write path then publishes without the
    /// written notes' vectors and records them as owed (docs/embedding.md).
    pub fn is_model_unavailable(&self) -> bool {
        matches!(self, Error::ModelUnavailable { .. } | Error::EgressDenied { .. } | Error::ModelVerificationFailed { .. })
    }

    /// An I/O failure; no space left (`ENOSPC`, `EDQUOT`) is `disk_full`.
    pub(crate) fn io(action: &'static str, path: impl Into<String>, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::StorageFull || source.kind() == io::ErrorKind::QuotaExceeded {
            return Error::DiskFull { action, path: path.into() };
        }
        Error::Io { action, path: path.into(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests;
