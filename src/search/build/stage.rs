//! A dense sync's slow part, outside the writer lock: the chunks the sync will need are embedded
//! first and appended to the arena it will use, one window at a time, each append under the
//! writer lock for that append only. The sync itself then runs under the lock, finds those
//! vectors by key, and embeds only what changed meanwhile: writers wait for one append (tens
//! of milliseconds), never for the whole embedding (minutes on a large vault).
//!
//! Appending rows no generation references yet is what an interrupted publish leaves too: every
//! `ArenaWriter::open` checks them by checksum and reuses them by key, so a write that lands
//! between two windows reuses them as well, and an interrupted staging keeps its work.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use super::arena::{self, ArenaWriter};
use super::{Progress, indexed_hashes, read_documents, sources};
use crate::error::Result;
use crate::inventory::{Inventory, NoteRecord};
use crate::policy::LoadedPolicy;
use crate::search::read::dense::{self, model_mismatch};
use crate::search::read::generation;
use crate::search::read::search_err;
use crate::search::schema;

/// Runs a closure under the vault's writer lock (the caller owns the lock: search names no
/// writer).
pub type UnderLock<'a> = &'a dyn Fn(&mut dyn FnMut() -> Result<()>) -> Result<()>;

/// Where staged vectors go: the active generation's arena (an incremental dense sync) or the
/// arena a full build fills (`dense/BUILDING`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Active { arena: String },
    Building,
}

/// What a dense sync will embed, chosen from the inventory (the records are copies, so the
/// embedding runs with no lock of any kind held).
#[derive(Debug)]
pub struct Staging {
    target: Target,
    records: Vec<NoteRecord>,
}

impl Staging {
    /// The notes whose chunks a dense sync of `inventory` would embed now: new, changed and owed
    /// notes when the active generation's dense index can be extended; every valid note when
    /// the sync will build one from scratch. `None` when nothing is to be staged (a forced
    /// rebuild starts a new arena under the lock, so it is not staged).
    pub fn plan(root: &Path, policy: &LoadedPolicy, inventory: &Inventory, force_rebuild: bool) -> Result<Option<Staging>> {
        if force_rebuild {
            return Ok(None);
        }
        let handle = crate::embed::vault_handle(&policy.policy, root);
        let max_tokens = policy.policy.embedding.max_tokens;
        let (valid, _) = sources(inventory);
        let active = match generation::read_active(root) {
            Ok(Some(id)) => generation::open_generation(root, &id).ok(),
            _ => None,
        };
        let extendable = active.as_ref().and_then(|g| {
            let d = g.manifest.dense.as_ref()?;
            let same = g.manifest.index_schema_version == schema::INDEX_SCHEMA_VERSION
                && g.manifest.chunker == schema::CHUNKER
                && model_mismatch(d, &handle, max_tokens).is_none();
            same.then_some((g, d))
        });
        let (target, records): (Target, Vec<NoteRecord>) = match extendable {
            Some((g, d)) => {
                let indexed = indexed_hashes(g)?;
                let owed: BTreeSet<&str> = d.owed.iter().map(String::as_str).collect();
                let changed = valid
                    .into_iter()
                    .filter(|r| owed.contains(r.path.as_str()) || indexed.get(r.path.as_str()) != Some(&schema::hex(&r.content_hash)))
                    .cloned()
                    .collect();
                (Target::Active { arena: d.arena.clone() }, changed)
            }
            None => (Target::Building, valid.into_iter().cloned().collect()),
        };
        Ok((!records.is_empty()).then_some(Staging { target, records }))
    }

    /// Embeds the planned notes' chunks that the target arena lacks and appends them, a window
    /// at a time, each append under `under_lock`. Returns how many chunks were staged. Stops
    /// early (keeping what it appended) when the target changed meanwhile (another process
    /// rebuilt the index): the sync under the lock does the rest.
    pub fn run(self, root: &Path, policy: &LoadedPolicy, under_lock: UnderLock<'_>, progress: Progress<'_>) -> Result<usize> {
        let handle = crate::embed::vault_handle(&policy.policy, root);
        let model = handle.model()?;
        let dim = handle.id().dimension;
        let max_tokens = policy.policy.embedding.max_tokens;
        // The arena, and the keys it holds, read under the lock (the open cuts a torn tail).
        let mut arena_id = None;
        let mut known: HashSet<[u8; 32]> = HashSet::new();
        under_lock(&mut || {
            let writer = match &self.target {
                Target::Active { arena } => match current_active_rows(root, arena)? {
                    Some(rows) => ArenaWriter::open(root, arena, dim, rows, true, None)?,
                    None => return Ok(()),
                },
                Target::Building => {
                    let resumed = arena::building_arena(root).and_then(|a| ArenaWriter::open(root, &a, dim, 0, true, None).ok());
                    let writer = match resumed {
                        Some(w) => w,
                        None => ArenaWriter::create(root, dim, None)?,
                    };
                    arena::set_building_arena(root, Some(writer.arena()))?;
                    writer
                }
            };
            known = writer.known_keys().copied().collect();
            arena_id = Some(writer.arena().to_string());
            Ok(())
        })?;
        let Some(arena_id) = arena_id else { return Ok(0) };
        let fields = schema::Fields::of(&schema::build_schema()).map_err(search_err)?;
        let mut missing: Vec<([u8; 32], String)> = Vec::new();
        let records: Vec<&NoteRecord> = self.records.iter().collect();
        for (b, block) in records.chunks(1024).enumerate() {
            progress("reading", b * 1024, records.len());
            for note in read_documents(root, policy, &fields, block, &|_, _, _| {})? {
                for (_, text) in note.embed_texts {
                    let key = dense::content_key(handle.id(), max_tokens, &text);
                    if known.insert(key) {
                        missing.push((key, text));
                    }
                }
            }
        }
        let total = missing.len();
        let window = (handle.config().batch_size * 8).max(1);
        let mut staged = 0;
        progress("embedding", 0, total);
        for part in missing.chunks(window) {
            let texts: Vec<&str> = part.iter().map(|(_, t)| t.as_str()).collect();
            let vectors = model.embed(&texts)?;
            let entries: Vec<([u8; 32], &[f32])> = part.iter().zip(&vectors).map(|((k, _), v)| (*k, v.as_slice())).collect();
            let mut appended = false;
            under_lock(&mut || {
                let still = match &self.target {
                    Target::Active { arena } => current_active_rows(root, arena)?.is_some(),
                    Target::Building => arena::building_arena(root).as_deref() == Some(arena_id.as_str()),
                };
                if still {
                    ArenaWriter::open_at_end(root, &arena_id, dim)?.append(&entries)?;
                    appended = true;
                }
                Ok(())
            })?;
            if !appended {
                tracing::info!(staged, "dense staging stopped: the index was rebuilt meanwhile; the sync embeds the rest");
                break;
            }
            staged += part.len();
            progress("embedding", staged, total);
        }
        Ok(staged)
    }
}

/// The rows the active generation publishes of `arena`, if it is still the active one's arena.
fn current_active_rows(root: &Path, arena: &str) -> Result<Option<u64>> {
    let Some(id) = generation::read_active(root)? else { return Ok(None) };
    let manifest = generation::read_manifest(root, &id)?;
    Ok(manifest.dense.filter(|d| d.arena == arena).map(|d| d.rows))
}
