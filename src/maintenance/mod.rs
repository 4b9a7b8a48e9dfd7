//! Maintenance operations: rot audit (read-only), archiving, frontmatter healing and Markdown
//! fixes. Every change they make goes through the one write transaction (`write::execute`), so
//! catalogs, the search generation and receipts are current afterwards.

pub mod archive;
pub mod heal;
pub mod link_rot;
pub mod markdown_fix;
pub mod rot;

use serde_json::Value;

use crate::approvals::{Operation, execute_governed};
use crate::error::{Error, Result};
use crate::vault::Vault;
use crate::write::{Mutation, NoteChange};

/// Where a long maintenance job reports (stage, done, total): the CLI's bar or plain lines, the
/// MCP server's `notifications/progress`. Each stage reports 0/N first, N/N last, and every
/// [`REPORT_EVERY`] items between.
pub type Progress<'a> = crate::search::Progress<'a>;

/// How many items a job handles between two progress reports.
pub(crate) const REPORT_EVERY: usize = 64;

/// Reports item `done` of `total` in `stage` when it is the first, the last or a multiple of
/// [`REPORT_EVERY`].
pub(crate) fn report(progress: Progress<'_>, stage: &'static str, done: usize, total: usize) {
    if done == 0 || done == total || done.is_multiple_of(REPORT_EVERY) {
        progress(stage, done, total);
    }
}

/// A job nobody watches.
pub(crate) fn unwatched(_: &'static str, _: usize, _: usize) {}

/// The parameters of a maintenance run that may write (`archive_notes`,
/// `heal_frontmatter_tool`; P.O.W.E.R.'s names): a dry run by default, and a live run only
/// with `approved`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    #[serde(default = "yes")]
    pub dry_run: bool,
    #[serde(default)]
    pub approved: bool,
}

fn yes() -> bool {
    true
}

impl Default for RunRequest {
    fn default() -> Self {
        RunRequest { dry_run: true, approved: false }
    }
}

impl RunRequest {
    /// Refuses a live run of `operation` that is not approved.
    fn check_approved(&self, operation: &'static str) -> Result<()> {
        if !self.dry_run && !self.approved {
            return Err(Error::ApprovalRequired { operation });
        }
        Ok(())
    }
}

/// Writes the notes of a live maintenance run through the approval gate and the one write
/// transaction (`approvals::execute_governed`), with `log_entry` appended to log.md; the receipt.
fn write_governed(
    vault: &Vault,
    operation: Operation,
    name: &'static str,
    notes: Vec<NoteChange>,
    log_entry: Option<String>,
    create_folders: bool,
) -> Result<Value> {
    execute_governed(
        vault,
        operation,
        Mutation { operation: name.into(), notes, idempotency_key: None, proposal_id: None, log_entry, create_folders },
    )
    .map(|receipt| receipt.to_value())
}
