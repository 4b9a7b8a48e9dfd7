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
use crate::error::Result;
use crate::vault::Vault;
use crate::write::{Mutation, NoteChange};

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
        Mutation { operation: name, notes, idempotency_key: None, proposal_id: None, log_entry, create_folders },
    )
    .map(|receipt| receipt.to_value())
}
