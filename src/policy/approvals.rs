//! The policy's `approvals:` section as data: the governed operations a rule can name and the
//! check of its rules at load (known operations, valid path patterns). The gate that applies
//! the rules, the decision records and governed execution live in `approvals`, above `write`.

use serde::{Deserialize, Serialize};

use super::{ApprovalsPolicy, Approver};

/// A governed operation that an `approvals:` rule can give to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `apply_memory_change` (and the CLI's `apply`).
    Apply,
    /// A live `archive_notes` run.
    Archive,
    /// A live `heal_frontmatter_tool` run.
    Heal,
    /// `check_markdown_tool` with `fix`.
    MarkdownFix,
    /// stepstone's `complete` (a confirmed goal lifecycle change; the CLI's `goals complete`).
    GoalsComplete,
    /// stepstone's `reopen`.
    GoalsReopen,
    /// stepstone's `archive`.
    GoalsArchive,
    /// stepstone's `delete`.
    GoalsDelete,
    /// `rot_audit` with `allow_link_rot`: requests to the external URLs of the notes (egress).
    LinkRot,
    /// `infra_action` with `operation: replicate` (the INFRA-1 broker copies data off the host).
    InfraReplicate,
    /// A ctxvault memory tool (`write_episode`, `confirm_episode`, `supersede_episode`,
    /// `revise_episode`, `invalidate_episode`, `dispute_episodes`, `write_skill`, `write_doc`)
    /// called by an agent with `propose` authority: the fully resolved change, applied by id.
    MemoryChange,
    /// A note two replicas changed in ways that do not merge (overlapping edits, an edit
    /// against a removal, or a merge the lint gate refuses): the other side's text, held for a
    /// person. Always a person's decision, whatever the rules say.
    ReplicationConflict,
}

impl Operation {
    pub const ALL: [Operation; 12] = [
        Operation::Apply,
        Operation::Archive,
        Operation::Heal,
        Operation::MarkdownFix,
        Operation::GoalsComplete,
        Operation::GoalsReopen,
        Operation::GoalsArchive,
        Operation::GoalsDelete,
        Operation::LinkRot,
        Operation::InfraReplicate,
        Operation::MemoryChange,
        Operation::ReplicationConflict,
    ];

    /// The name policy rules use.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Apply => "apply",
            Operation::Archive => "archive",
            Operation::Heal => "heal",
            Operation::MarkdownFix => "markdown_fix",
            Operation::GoalsComplete => "goals_complete",
            Operation::GoalsReopen => "goals_reopen",
            Operation::GoalsArchive => "goals_archive",
            Operation::GoalsDelete => "goals_delete",
            Operation::LinkRot => "link_rot",
            Operation::InfraReplicate => "infra_replicate",
            Operation::MemoryChange => "memory_change",
            Operation::ReplicationConflict => "replication_conflict",
        }
    }

    /// The tool an agent calls for it.
    pub fn tool(self) -> &'static str {
        match self {
            Operation::Apply => "apply_memory_change",
            Operation::Archive => "archive_notes",
            Operation::Heal => "heal_frontmatter_tool",
            Operation::MarkdownFix => "check_markdown_tool",
            Operation::GoalsComplete => "complete",
            Operation::GoalsReopen => "reopen",
            Operation::GoalsArchive => "archive",
            Operation::GoalsDelete => "delete",
            Operation::LinkRot => "rot_audit",
            Operation::InfraReplicate => "infra_action",
            Operation::MemoryChange => crate::error::MEMORY_CHANGE_TOOL,
            Operation::ReplicationConflict => "replicate",
        }
    }

    /// Operations that change no note: their rules take no path patterns.
    pub(crate) fn writes_no_note(self) -> bool {
        self == Operation::InfraReplicate
    }
}

impl Operation {
    /// The goal lifecycle operations (stepstone's confirmed tools).
    pub const GOAL_LIFECYCLE: [Operation; 4] =
        [Operation::GoalsComplete, Operation::GoalsReopen, Operation::GoalsArchive, Operation::GoalsDelete];
}

/// One note change as the approval rules see it.
#[derive(Debug, Clone, Copy)]
pub struct RuledChange<'a> {
    pub path: &'a str,
    /// Whether the change may edit, replace or remove a note that exists: everything but a
    /// creation that requires the path to be absent.
    pub touches_existing: bool,
    /// Whether the change removes the note.
    pub removes: bool,
}

/// What a set of note changes *is*, whichever tool or surface makes it (docs/governance.md,
/// "What a rule governs"), as (operation, path) pairs:
/// - the writer's own governed operation (`own`), on every path;
/// - `apply` on every path whose existing note the change edits, replaces or removes (a rule on
///   `apply` governs every edit of a note, not one tool);
/// - `archive` on a removed note and on the notes the same change creates below the archive
///   folder (a move into the archive);
/// - on the goals worklist (`worklist_path`), when the change touches it, the goal lifecycle
///   operations its text shows (`worklist_ops`: the caller compares the goals before and after,
///   or names all four when it cannot).
pub fn governed_operations(
    archive_folder: &str,
    own: Option<Operation>,
    changes: &[RuledChange<'_>],
    worklist_path: &str,
    worklist_ops: &[Operation],
) -> Vec<(Operation, String)> {
    let mut out: Vec<(Operation, String)> = Vec::new();
    let mut push = |operation: Operation, path: &str| {
        if !out.iter().any(|(o, p)| *o == operation && p == path) {
            out.push((operation, path.to_string()));
        }
    };
    let archive_prefix = format!("{}/", archive_folder.trim_end_matches('/'));
    let removes_any = changes.iter().any(|c| c.removes);
    for change in changes {
        if let Some(own) = own {
            push(own, change.path);
        }
        if change.touches_existing {
            push(Operation::Apply, change.path);
        }
        if removes_any && (change.removes || (!archive_folder.is_empty() && change.path.starts_with(&archive_prefix))) {
            let moves_into_archive = changes.iter().any(|c| !c.removes && c.path.starts_with(&archive_prefix));
            if moves_into_archive {
                push(Operation::Archive, change.path);
            }
        }
        if change.touches_existing && change.path == worklist_path {
            for op in worklist_ops {
                push(*op, change.path);
            }
        }
    }
    out
}

/// Who approves `operation` over `paths`: for each path the first rule naming the operation
/// whose patterns match it (no patterns = every path) decides; one path that needs a person
/// makes the whole operation need one. An operation over no path (`infra_replicate`) is decided
/// by the first rule naming it without patterns. No matching rule: the caller (today's
/// behaviour).
pub fn approver_for<'a>(policy: &ApprovalsPolicy, operation: Operation, paths: impl IntoIterator<Item = &'a str>) -> Approver {
    if operation == Operation::ReplicationConflict {
        return Approver::Human; // a conflict is never resolved by the caller
    }
    let rules: Vec<(&super::ApprovalRule, Vec<globset::GlobMatcher>)> = policy
        .rules
        .iter()
        .filter(|r| r.operations.iter().any(|o| o == operation.name()))
        .map(|r| (r, r.paths.iter().filter_map(|p| glob(p).ok()).collect()))
        .collect();
    let mut paths = paths.into_iter().peekable();
    if paths.peek().is_none() {
        return rules.iter().find(|(rule, _)| rule.paths.is_empty()).map_or(Approver::Caller, |(rule, _)| rule.approver);
    }
    for path in paths {
        let decided = rules.iter().find(|(rule, globs)| rule.paths.is_empty() || globs.iter().any(|g| g.is_match(path)));
        if let Some((rule, _)) = decided
            && rule.approver == Approver::Human
        {
            return Approver::Human;
        }
    }
    Approver::Caller
}

/// Who approves a set of (operation, path) pairs (`governed_operations`): a person when any
/// one pair is decided by a `human` rule, with the first such operation (what a held
/// proposal is recorded as); otherwise the caller.
pub fn approver_of(policy: &ApprovalsPolicy, governed: &[(Operation, String)]) -> (Approver, Option<Operation>) {
    governed
        .iter()
        .find(|(operation, path)| approver_for(policy, *operation, [path.as_str()]) == Approver::Human)
        .map_or((Approver::Caller, None), |(operation, _)| (Approver::Human, Some(*operation)))
}

/// Checks the `approvals:` section: known operations, valid glob patterns.
pub fn validate_rules(policy: &ApprovalsPolicy) -> std::result::Result<(), String> {
    if let Some(review_url) = &policy.review_url {
        let parsed = url::Url::parse(review_url).map_err(|e| format!("approvals.review_url '{review_url}' is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(format!("approvals.review_url '{review_url}' must be an http(s) address without query or fragment"));
        }
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        if rule.operations.is_empty() {
            return Err(format!("approvals.rules[{i}] names no operation"));
        }
        for op in &rule.operations {
            let Some(known) = Operation::ALL.into_iter().find(|o| o.name() == op) else {
                return Err(format!(
                    "approvals.rules[{i}]: unknown operation '{op}' (known: {})",
                    Operation::ALL.map(Operation::name).join(", ")
                ));
            };
            if known.writes_no_note() && !rule.paths.is_empty() {
                return Err(format!("approvals.rules[{i}]: '{op}' changes no note, so its rules take no path patterns"));
            }
        }
        for pattern in &rule.paths {
            glob(pattern).map_err(|e| format!("approvals.rules[{i}]: path pattern '{pattern}' is invalid: {e}"))?;
        }
    }
    Ok(())
}

/// An `approvals.rules` path pattern as a matcher (`*` stays inside one folder).
pub(crate) fn glob(pattern: &str) -> std::result::Result<globset::GlobMatcher, globset::Error> {
    Ok(globset::GlobBuilder::new(pattern).literal_separator(true).build()?.compile_matcher())
}
