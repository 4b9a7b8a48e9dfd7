//! The fold: the journal's tail of the active generation published as an ordinary on-disk
//! generation (`covers_seq` = the last intent it includes), after which the writer may empty the
//! journal. Its documents are exactly the ones readers build in memory (`search::read::tail`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::into_upserts;
use super::publish::{self, Changes, GenerationInfo, PublishInput};
use crate::error::{Error, Result};
use crate::policy::LoadedPolicy;
use crate::search::read::generation::{self, tantivy_err};
use crate::search::read::tail::{delta, intents_after, summary};
use crate::search::schema;
use crate::store::journal::StoredRecord;

/// Publishes the tail of the active generation as an ordinary on-disk generation covering
/// `tail`'s last intent: the fold. Files are written through the deferred-sync directory when
/// `deferred_sync` is given (the caller's checkpoint makes them durable).
pub(crate) fn fold(
    root: &Path,
    policy: &LoadedPolicy,
    records: &[StoredRecord],
    deferred_sync: Option<Arc<Mutex<Vec<PathBuf>>>>,
) -> Result<GenerationInfo> {
    let active_id =
        generation::read_active(root)?.ok_or_else(|| Error::NoActiveGeneration { reason: "run sync before folding writes".into() })?;
    let base = generation::open_generation(root, &active_id)?;
    let tail = intents_after(records, base.manifest.covers_seq)?;
    // The writer folds right after committing an intent, so the tail is never empty here.
    let last = tail.last().map(|i| i.seq).ok_or_else(|| Error::SearchIndex {
        action: "folding the journal's tail",
        reason: format!("no committed write after generation {active_id}"),
    })?;
    let fields = schema::Fields::of(&schema::build_schema()).map_err(tantivy_err("reading the schema"))?;
    let delta = delta(policy, &fields, &tail);
    let (source_snapshot_hash, counts, exclusions) = summary(&base.manifest, &tail, &delta);
    publish::publish(
        root,
        PublishInput {
            parent: Some(base),
            changes: Changes { upserts: into_upserts(delta.upserts), removes: delta.removes, rebuild: false },
            source_snapshot_hash,
            counts,
            exclusions,
            max_segments: policy.policy.search.max_segments,
            generations_kept: policy.policy.search.generations_kept,
            dense: None,
            deferred_sync,
            covers_seq: Some(last),
        },
    )
}
