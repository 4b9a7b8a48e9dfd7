//! The batch envelope of create, edit, plan_progress and plan_edit: `status` ok/mixed/failed,
//! a sampled `items` list (every failure and warning, plus the first plain successes), exact
//! `counts` by item status, `submitted` and `items_omitted`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

/// One item's outcome: its row, its status word (`created`, `updated`, `unchanged`, `failed`…)
/// and whether it carried warnings.
#[derive(Debug, Clone)]
pub struct ItemOutcome<R> {
    pub status: String,
    pub failed: bool,
    pub warned: bool,
    pub row: R,
}

impl<R> ItemOutcome<R> {
    /// A success with status word `status`; `warned` when the row carries warnings.
    pub fn success(status: &str, row: R, warned: bool) -> Self {
        ItemOutcome { status: status.to_string(), failed: false, warned, row }
    }

    pub fn failure(row: R) -> Self {
        ItemOutcome { status: "failed".into(), failed: true, warned: false, row }
    }
}

/// How a batch went as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BatchStatus {
    /// No item failed.
    Ok,
    /// Some items failed, some did not.
    Mixed,
    /// Every item failed.
    Failed,
}

/// The batch envelope: the outcome of every item of one call, sampled.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BatchReport<R> {
    /// `ok` (no failure), `mixed` or `failed` (every item failed).
    pub status: BatchStatus,
    /// Every failed or warned item, plus the first plain successes (policy `sampled_successes`).
    pub items: Vec<R>,
    /// The number of items by status word (`created`, `updated`, `unchanged`, `failed`…).
    pub counts: BTreeMap<String, usize>,
    /// The number of items submitted.
    pub submitted: usize,
    /// The plain successes left out of `items`.
    pub items_omitted: usize,
}

/// The envelope over `items`, keeping at most `sampled_successes` uneventful successes.
pub fn envelope<R>(items: Vec<ItemOutcome<R>>, sampled_successes: usize) -> BatchReport<R> {
    let submitted = items.len();
    let failures = items.iter().filter(|i| i.failed).count();
    let status = match failures {
        0 => BatchStatus::Ok,
        n if n == submitted => BatchStatus::Failed,
        _ => BatchStatus::Mixed,
    };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for item in &items {
        *counts.entry(item.status.clone()).or_default() += 1;
    }
    let mut kept = Vec::new();
    let mut plain_kept = 0;
    let mut omitted = 0;
    for item in items {
        if item.failed || item.warned {
            kept.push(item.row);
        } else if plain_kept < sampled_successes {
            plain_kept += 1;
            kept.push(item.row);
        } else {
            omitted += 1;
        }
    }
    BatchReport { status, items: kept, counts, submitted, items_omitted: omitted }
}

/// Why one item of a batch failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ItemError {
    /// What went wrong.
    pub message: String,
    /// Present (true) when the document changed since it was read: nothing was written.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub conflict: bool,
    /// Present (true) when the named section heading is not in the document.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub section_not_found: bool,
}

impl ItemError {
    /// A failure with `message` and no flag.
    pub fn new(message: impl Into<String>) -> Self {
        ItemError { message: message.into(), ..ItemError::default() }
    }
}
