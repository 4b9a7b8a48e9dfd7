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
