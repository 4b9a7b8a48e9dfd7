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
    GateRejected { path: String, summary: String, findings: Vec<crate::lint::Finding> },

    #[error("the new content of '{path}' is invalid: {reason}")]
    InvalidContent { path: String, reason: String },

    #[error("{operation} requires approved=true")]
    ApprovalRequired { operation: &'static str },

    #[error("proposal refused: {reason}")]
    ProposalInvalid { reason: String },

    #[error(
        "{operation}: a person must approve proposal {proposal_id} (approved=true from the caller is not enough under the policy's approvals rules); ask them to run `paravault approve {proposal_id} --approver NAME`, then call again"
    )]
    HumanApprovalRequired { operation: &'static str, proposal_id: String },

    #[error("proposal {proposal_id} was rejected by {approver}{}", if comment.is_empty() { String::new() } else { format!(": {comment}") })]
    ProposalRejected { proposal_id: String, approver: String, comment: String },

    #[error("the approval of proposal {proposal_id} is stale: {reason}")]
    ApprovalStale { proposal_id: String, reason: String },

    #[error("proposal {proposal_id} was already {}", match decision { crate::approvals::Decision::Approved => "approved", crate::approvals::Decision::Rejected => "rejected" })]
    AlreadyDecided { proposal_id: String, decision: crate::approvals::Decision },

    #[error("proposal {proposal_id} does not exist")]
    ProposalNotFound { proposal_id: String },

    #[error("the approver name or secret is wrong")]
    ApproverRefused,

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

    /// A failure an MCP surface already shaped as its contract's failure JSON (the stepstone
    /// envelope): the adapter returns it as the `isError` result unchanged.
    #[error("{}", .0.pointer("/error/message").and_then(serde_json::Value::as_str).unwrap_or("the operation failed"))]
    SurfaceFailure(Box<serde_json::Value>),
}

impl Error {
    /// Stable machine-readable code; documented in docs/errors.md.
    pub fn code(&self) -> &'static str {
        match self {
            Error::PathRefused { .. } => "path_refused",
            Error::SurfaceFailure(_) => "surface_failure",
            Error::VaultUnusable(_) => "vault_unusable",
            Error::VaultBoundary { .. } => "vault_boundary",
            Error::PolicyInvalid { .. } => "policy_invalid",
            Error::Io { .. } => "io_error",
            Error::DiskFull { .. } => "disk_full",
            Error::CatalogConflict { .. } => "catalog_conflict",
            Error::CatalogEntryTooLarge { .. } => "catalog_entry_exceeds_limit",
            Error::CatalogMissing { .. } => "catalog_missing",
            Error::InvalidArgument { .. } => "invalid_argument",
            Error::NoteUnreadable { .. } => "note_unreadable",
            Error::AlreadyExists { .. } => "already_exists",
            Error::PreconditionFailed { .. } => "precondition_failed",
            Error::IdempotencyConflict { .. } => "idempotency_conflict",
            Error::GateRejected { .. } => "lint_gate_rejected",
            Error::InvalidContent { .. } => "invalid_content",
            Error::ApprovalRequired { .. } => "approval_required",
            Error::ProposalInvalid { .. } => "proposal_invalid",
            Error::HumanApprovalRequired { .. } => "human_approval_required",
            Error::ProposalRejected { .. } => "proposal_rejected",
            Error::ApprovalStale { .. } => "approval_stale",
            Error::AlreadyDecided { .. } => "already_decided",
            Error::ProposalNotFound { .. } => "proposal_not_found",
            Error::ApproverRefused => "approver_refused",
            Error::TransactionIncomplete { .. } => "transaction_incomplete",
            Error::NotConfigured { .. } => "not_configured",
            Error::SearchQueryInvalid { .. } => "search_query_invalid",
            Error::DenseIndexUnavailable { .. } => "dense_index_unavailable",
            Error::RerankerUnavailable { .. } => "reranker_unavailable",
            Error::GenerationCorrupt { .. } => "generation_corrupt",
            Error::NoActiveGeneration { .. } => "no_active_generation",
            Error::SyncRefused { .. } => "sync_refused",
            Error::DenseLossRefused { .. } => "dense_loss_refused",
            Error::SearchIndex { .. } => "search_index_error",
            Error::TaskNotFound { .. } => "task_not_found",
            Error::TaskExists { .. } => "task_exists",
            Error::RevisionConflict { .. } => "revision_conflict",
            Error::TransitionRefused { .. } => "transition_refused",
            Error::PhaseOrder { .. } => "maintenance_phase_order",
            Error::ReceiptNotFound { .. } => "receipt_not_found",
            Error::TaskJournalIntegrity { .. } => "task_journal_integrity",
            Error::ModelUnavailable { .. } => "model_unavailable",
            Error::ModelVerificationFailed { .. } => "model_verification_failed",
            Error::EgressDenied { .. } => "egress_denied",
            Error::EmbeddingFailed { .. } => "embedding_failed",
        }
    }

    /// Whether retrying the same call later may succeed.
    pub fn retryable(&self) -> bool {
        matches!(self, Error::Io { .. } | Error::DiskFull { .. } | Error::TransactionIncomplete { .. } | Error::SearchIndex { .. })
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
