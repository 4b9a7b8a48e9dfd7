//! The policy's `approvals:` section as data: the governed operations a rule can name and the
//! check of its rules at load (known operations, valid path patterns). The gate that applies
//! the rules, the decision records and governed execution live in `approvals`, above `write`.

use serde::{Deserialize, Serialize};

use super::ApprovalsPolicy;

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
}

impl Operation {
    pub const ALL: [Operation; 11] = [
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
        }
    }

    /// Operations that change no note: their rules take no path patterns.
    pub(crate) fn writes_no_note(self) -> bool {
        self == Operation::InfraReplicate
    }
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
