//! The batch envelope of create, edit, plan_progress and plan_edit: `status` ok/mixed/failed,
//! a sampled `items` list (every failure and warning, plus the first plain successes), exact
//! `counts` by item status, `submitted` and `items_omitted`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// One item's outcome: its row, its status word (`created`, `updated`, `unchanged`, `failed`…)
/// and whether it carried warnings.
#[derive(Debug, Clone)]
pub struct ItemOutcome {
    pub status: String,
    pub failed: bool,
    pub warned: bool,
    pub row: Value,
}

impl ItemOutcome {
    pub fn success(status: &str, row: Value) -> Self {
        let warned = row.get("warnings").and_then(Value::as_array).is_some_and(|w| !w.is_empty());
        ItemOutcome { status: status.to_string(), failed: false, warned, row }
    }

    pub fn failure(row: Value) -> Self {
        ItemOutcome { status: "failed".into(), failed: true, warned: false, row }
    }
}

/// The envelope over `items`, keeping at most `sampled_successes` uneventful successes.
pub fn envelope(items: Vec<ItemOutcome>, sampled_successes: usize) -> Map<String, Value> {
    let submitted = items.len();
    let failures = items.iter().filter(|i| i.failed).count();
    let status = match failures {
        0 => "ok",
        n if n == submitted => "failed",
        _ => "mixed",
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
    let mut out = Map::new();
    out.insert("status".into(), json!(status));
    out.insert("items".into(), Value::Array(kept));
    out.insert("counts".into(), json!(counts));
    out.insert("submitted".into(), json!(submitted));
    out.insert("items_omitted".into(), json!(omitted));
    out
}
