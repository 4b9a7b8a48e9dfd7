//! Crash recovery: finish every committed intent that is not marked done, in sequence order,
//! under the writer lock, before any other write. Idempotent, and bound to each intent's
//! sequence number: a file that a later intent also touches is left to that later intent, so
//! recovery can never undo a later commit. A file that holds neither the intent's pre-image
//! nor its post-image was changed outside the engine: it is left as it is and named in the
//! recovered receipt's `conflicts` (recovery never overwrites what it did not see).

use std::collections::BTreeSet;

use super::receipts::Receipt;
use super::writer::WriterGuard;
use crate::error::Result;
use crate::inventory::changes::ChangeSet;
use crate::state::VaultState;
use crate::store::journal::{Intent, StoredRecord};

/// Intents in `records` that have no `Done` record, except `mine` (this process's own deferred
/// intents, which are in place), in sequence order, each decoded whole: what recovery finishes.
pub(crate) fn pending_except<'r>(records: &'r [StoredRecord], mine: &BTreeSet<u64>) -> Result<Vec<&'r Intent>> {
    let mut out = Vec::new();
    for record in pending_records(records, mine) {
        out.extend(record.intent()?);
    }
    out.sort_by_key(|i| i.seq);
    Ok(out)
}

/// Whether `pending_except` has anything to finish (nothing decoded).
pub(crate) fn any_pending_except(records: &[StoredRecord], mine: &BTreeSet<u64>) -> bool {
    pending_records(records, mine).next().is_some()
}

/// The sequence numbers of the intents `pending_except` would finish (nothing decoded).
pub(crate) fn pending_seqs(records: &[StoredRecord], mine: &BTreeSet<u64>) -> BTreeSet<u64> {
    pending_records(records, mine).map(StoredRecord::seq).collect()
}

fn pending_records<'r, 'm>(records: &'r [StoredRecord], mine: &'m BTreeSet<u64>) -> impl Iterator<Item = &'r StoredRecord> + use<'r, 'm> {
    let done: BTreeSet<u64> = records.iter().filter(|r| r.done().is_some()).map(StoredRecord::seq).collect();
    records.iter().filter(move |r| r.is_intent() && !done.contains(&r.seq()) && !mine.contains(&r.seq()))
}

/// Finishes pending intents (except this process's own deferred ones, which are in place);
/// returns their sequence numbers.
pub(crate) fn recover_pending(vault: &VaultState, writer: &mut WriterGuard<'_>) -> Result<Vec<u64>> {
    let mine: BTreeSet<u64> = writer.unsynced.iter().map(|i| i.seq).collect();
    let todo: Vec<Intent> = pending_except(&writer.records, &mine)?.into_iter().cloned().collect();
    let mut generation_files = Vec::new();
    for intent in &todo {
        let later: BTreeSet<String> =
            writer.records.iter().filter(|r| r.is_intent() && r.seq() > intent.seq).flat_map(|r| r.paths().iter().cloned()).collect();
        tracing::warn!(seq = intent.seq, "recovery: finishing a committed transaction");
        let conflicts = super::apply_changes(vault, &intent.changes, &later, &super::Confirmed::new())?;
        if !conflicts.is_empty() {
            tracing::warn!(seq = intent.seq, ?conflicts, "recovery: left files that changed outside the engine as they are");
        }
        // What recovery put in place (or left alone), told to the model as entries.
        vault.refresh_paths(&ChangeSet::of_paths(intent.changes.iter().map(|change| change.path())))?;
        vault.invalidate_catalog_state();
        // Files left as someone else wrote them are not what the intent holds: the generation
        // is then built from the files on disk, never served from the journal's tail.
        let generation = if conflicts.is_empty() {
            generation_of(vault, intent, &writer.records)?
        } else {
            super::publish(vault, intent, &writer.records)?
        };
        generation_files.extend(generation.deferred_files.iter().cloned());
        if !writer.receipts.contains_seq(intent.seq) {
            // The receipt the intent carries; one that does not parse (never written by this
            // engine) still gets a receipt naming its sequence number.
            let mut receipt = serde_json::from_value::<Receipt>(intent.receipt.clone()).unwrap_or_else(|error| {
                tracing::warn!(seq = intent.seq, error = %error, "recovery: the intent's receipt does not parse");
                Receipt { seq: intent.seq, ..Receipt::default() }
            });
            super::record_generation(&mut receipt, &generation);
            receipt.recovered = Some("true".into());
            if !conflicts.is_empty() {
                receipt.conflicts = Some(conflicts);
            }
            receipt.duration_ms = Some(String::new());
            writer.receipts.append(vault.root(), receipt, false)?;
        }
    }
    if !todo.is_empty() {
        super::checkpoint(vault, writer, &todo, &generation_files)?;
    }
    writer.needs_recovery = false;
    Ok(todo.iter().map(|i| i.seq).collect())
}

/// The search generation that includes a recovered intent: the active one if it covers the
/// intent, the active one plus the journal's tail if it can be served that way, else a new
/// one published from the notes now on disk (dense vaults, a vault never synced).
fn generation_of(vault: &VaultState, intent: &Intent, records: &[StoredRecord]) -> Result<super::Published> {
    let root = vault.root();
    if let Some(active) = crate::search::generation::read_active(root)?
        && let Ok(manifest) = crate::search::generation::read_manifest(root, &active)
    {
        if manifest.covers_seq >= intent.seq {
            let counts = &manifest.counts;
            return Ok(super::Published {
                generation_id: active,
                scanned: counts.scanned,
                indexed: counts.indexed,
                excluded: counts.excluded,
                search_mode: super::search_mode_of(manifest.dense.is_some()),
                deferred_files: Vec::new(),
                vectors_owed: manifest.dense.as_ref().map_or_else(Vec::new, |d| {
                    intent.changes.iter().map(|c| c.path().to_string()).filter(|p| d.owed.binary_search(p).is_ok()).collect()
                }),
            });
        }
        if crate::search::tail::servable(&manifest) {
            return Ok(super::Published::tail(&active, intent));
        }
    }
    super::publish(vault, intent, records)
}
