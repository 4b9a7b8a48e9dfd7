//! Crash recovery: finish every committed intent that is not marked done, in sequence order,
//! under the writer lock, before any other write. Idempotent, and bound to each intent's
//! sequence number: a file that a later intent also touches is left to that later intent, so
//! recovery can never undo a later commit.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::Result;
use crate::note::path::VaultPath;
use crate::store::journal::{Intent, Record};
use crate::vault::{Vault, WriterGuard};

/// Journal size above which a fully-done journal is emptied.
const JOURNAL_RESET_BYTES: u64 = 1 << 20;

/// Intents in `records` that have no `Done` record, in sequence order.
pub fn pending(records: &[Record]) -> Vec<Intent> {
    let done: BTreeSet<u64> = records.iter().filter_map(|r| if let Record::Done { seq } = r { Some(*seq) } else { None }).collect();
    let mut out: Vec<Intent> = records
        .iter()
        .filter_map(|r| if let Record::Intent(i) = r { Some(i.clone()) } else { None })
        .filter(|i| !done.contains(&i.seq))
        .collect();
    out.sort_by_key(|i| i.seq);
    out
}

/// Finishes pending intents; returns their sequence numbers.
pub fn recover_pending(vault: &Vault, writer: &mut WriterGuard<'_>) -> Result<Vec<u64>> {
    let records = std::mem::take(&mut writer.records);
    let todo = pending(&records);
    let mut finished = Vec::new();
    for intent in &todo {
        let later: BTreeSet<String> = records
            .iter()
            .filter_map(|r| if let Record::Intent(i) = r { Some(i) } else { None })
            .filter(|i| i.seq > intent.seq)
            .flat_map(|i| i.changes.iter().map(|c| c.path().to_string()))
            .collect();
        tracing::warn!(seq = intent.seq, "recovery: finishing a committed transaction");
        super::apply_changes(vault, &intent.changes, &later)?;
        for change in &intent.changes {
            if let Ok(path) = VaultPath::parse_walked(change.path()) {
                vault.refresh_path(&path)?;
            }
        }
        vault.invalidate_catalog_state();
        // The generation is derivable from the notes now on disk: publish it again.
        let generation = super::publish(vault, intent)?;
        if !writer.receipts.contains_seq(intent.seq) {
            let mut receipt = match &intent.receipt {
                Value::Object(map) => map.clone(),
                _ => serde_json::Map::new(),
            };
            super::record_generation(&mut receipt, &generation);
            receipt.insert("recovered".into(), Value::String("true".into()));
            receipt.insert("duration_ms".into(), Value::String("".into()));
            writer.receipts.append(vault.root(), receipt, false)?;
        }
        super::checkpoint(vault, writer, intent, &generation.deferred_files)?;
        finished.push(intent.seq);
    }
    writer.records = records;
    writer.needs_recovery = false;
    if writer.journal.len_bytes() > JOURNAL_RESET_BYTES {
        writer.journal.reset()?;
        writer.records.clear();
    }
    Ok(finished)
}
