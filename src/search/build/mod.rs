//! The building side of search: `sync` (incremental by content hash; with `fts_only=false` it
//! embeds only chunks whose key has no row yet, so an interrupted dense build resumes) and
//! `publish_changes` (O(change), the write path's publish) read the vault's notes and publish a
//! new immutable generation; `publish` (commit, manifest, `ACTIVE`, GC), `fold` (the journal's
//! tail published on disk) and `arena` (appending dense rows) are the writers. Everything that
//! writes a search file is here; the reading side (`search::read`) never names this module.

pub(crate) mod arena;
pub(crate) mod fold;
pub(crate) mod publish;
pub(crate) mod stage;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tantivy::TantivyDocument;
use tantivy::collector::DocSetCollector;

use arena::ArenaWriter;
use publish::{Changes, GenerationInfo, PublishInput};

use crate::embed::ModelHandle;
use crate::error::{Error, Result};
use crate::inventory::snapshot;
use crate::inventory::{self, Inventory, ModelView, NoteRecord, Overrun};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::search::read::dense::{self, DenseManifest, model_mismatch};
use crate::search::read::generation::{self, Counts, Exclusion, OpenGeneration, exclusion_of};
use crate::search::read::{kind_and_term, kind_query, search_err, stored_text};
use crate::search::schema::{self, NoteDocuments};
use crate::store::beneath::FolderCursor;

/// Options of a full sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncOptions {
    pub fts_only: bool,
    pub accept_dense_loss: bool,
    pub force_rebuild: bool,
    pub allow_partial: bool,
    /// The last write transaction whose notes are on disk now (the writer lock is held): the
    /// published generation includes it, so the journal's tail starts after it.
    pub covers_seq: Option<u64>,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions { fts_only: true, accept_dense_loss: false, force_rebuild: false, allow_partial: false, covers_seq: None }
    }
}

/// What a sync published (or kept).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SyncReport {
    /// The active generation after the sync.
    pub generation_id: String,
    /// False when nothing changed and the active generation was kept.
    pub published: bool,
    /// Whether the generation was built from scratch.
    pub full_rebuild: bool,
    /// Why it was built from scratch.
    pub rebuild_reason: Option<String>,
    /// Notes new to the index.
    pub added: usize,
    /// Notes whose content changed.
    pub updated: usize,
    /// Notes gone from the vault.
    pub removed: usize,
    /// Notes kept as they were.
    pub unchanged: usize,
    /// Unchanged notes whose vectors an earlier write owed (the model was unavailable then),
    /// embedded now.
    pub owed_embedded: usize,
    /// The notes the generation was built from.
    pub counts: Counts,
    /// The notes left out, and why.
    pub exclusions: Vec<Exclusion>,
    /// The hash of the notes the generation was built from.
    pub source_snapshot_hash: String,
    /// The dense index's report (null when FTS-only and none is kept).
    pub dense: Option<serde_json::Value>,
    /// The index segments of the generation.
    pub segment_count: usize,
    /// Old generations collected.
    pub gc_removed_generations: usize,
    /// Old index files collected.
    pub gc_removed_files: usize,
}

/// What a sync found, note by note.
#[derive(Debug, Default)]
struct Tally {
    added: usize,
    updated: usize,
    removed: usize,
    unchanged: usize,
    owed_embedded: usize,
}

impl SyncReport {
    /// The report of a sync that ends at `generation`: published now, or kept because nothing
    /// changed (a full rebuild is one with a reason).
    fn of(
        generation: GenerationInfo,
        published: bool,
        rebuild_reason: Option<String>,
        tally: Tally,
        exclusions: Vec<Exclusion>,
        dense: Option<serde_json::Value>,
    ) -> Self {
        SyncReport {
            generation_id: generation.generation_id,
            published,
            full_rebuild: rebuild_reason.is_some(),
            rebuild_reason,
            added: tally.added,
            updated: tally.updated,
            removed: tally.removed,
            unchanged: tally.unchanged,
            owed_embedded: tally.owed_embedded,
            counts: generation.counts,
            exclusions,
            source_snapshot_hash: generation.source_snapshot_hash,
            dense,
            segment_count: generation.segment_count,
            gc_removed_generations: generation.gc_removed_generations,
            gc_removed_files: generation.gc_removed_files,
        }
    }
}

/// The source snapshot hash of `records` (their valid notes), built from scratch: see
/// [`snapshot::SourceSnapshot`] (writes use the inventory's incrementally kept copy).
pub fn snapshot_hash<'a>(records: impl IntoIterator<Item = &'a NoteRecord>) -> String {
    snapshot::SourceSnapshot::of(records).hash()
}

/// Valid notes and the named exclusions of an inventory.
fn sources(inventory: &Inventory) -> (Vec<&NoteRecord>, Vec<Exclusion>) {
    let mut valid = Vec::new();
    let mut excluded = Vec::new();
    for record in inventory.notes() {
        if record.valid { valid.push(record) } else { excluded.push(exclusion_of(record)) }
    }
    (valid, excluded)
}

fn refuse(exclusions: &[Exclusion]) -> Error {
    Error::SyncRefused { excluded: exclusions.iter().map(|e| (e.path.clone(), e.reason.clone())).collect() }
}

/// A source note's bytes, read through folder handles (never by path, so a folder swapped for
/// a link is never read through) and checked against the record's content hash.
fn read_source(cursor: &mut FolderCursor<'_>, record: &NoteRecord) -> Result<Vec<u8>> {
    let bytes = cursor
        .read(record.path.as_str())?
        .ok_or_else(|| Error::io("reading", record.path.as_str(), std::io::ErrorKind::NotFound.into()))?;
    if *blake3::hash(&bytes).as_bytes() != record.content_hash {
        return Err(Error::SearchIndex {
            action: "reading sources",
            reason: format!("'{}' changed during sync; retry required", record.path.as_str()),
        });
    }
    Ok(bytes)
}

fn docs_of(cursor: &mut FolderCursor<'_>, policy: &LoadedPolicy, fields: &schema::Fields, record: &NoteRecord) -> Result<NoteDocuments> {
    let bytes = read_source(cursor, record)?;
    Ok(schema::note_documents(fields, record, &bytes, policy.policy.search.chunk_min_words))
}

/// The documents of `records`, built on all cores in blocks (progress reported per block).
fn read_documents(
    root: &Path,
    policy: &LoadedPolicy,
    fields: &schema::Fields,
    records: &[&NoteRecord],
    progress: Progress<'_>,
) -> Result<Vec<NoteDocuments>> {
    use rayon::prelude::*;
    const BLOCK: usize = 1024;
    let mut out = Vec::with_capacity(records.len());
    for (b, block) in records.chunks(BLOCK).enumerate() {
        progress("reading", b * BLOCK, records.len());
        // Each task reads its run of notes with one folder handle per folder (records are in
        // path order, so a folder's notes are consecutive).
        let docs: Vec<NoteDocuments> =
            block.par_iter().map_init(|| FolderCursor::new(root), |cursor, r| docs_of(cursor, policy, fields, r)).collect::<Result<_>>()?;
        out.extend(docs);
    }
    Ok(out)
}

/// Progress of a sync: (stage, done, total).
pub type Progress<'a> = &'a dyn Fn(&'static str, usize, usize);

/// Whether a publish without the model records the written notes' vectors as owed (the write
/// path: a write never fails for want of the model) or fails (`sync --dense`: the vectors are
/// what was asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WithoutModel {
    Owe,
    Fail,
}

/// Gives every chunk document of `upserts` its vector row: reuses rows by content key and
/// embeds the rest (in batches, appended to the arena as they finish). Returns the dense index
/// the new generation records (the arena's rows now; `kept_chunks` of its base's chunk vectors
/// plus the upserts' that got one; `owed`: the upserts left without some vector because the
/// model is unavailable, under `WithoutModel::Owe`) and how many chunks were embedded.
#[allow(clippy::too_many_arguments)]
fn attach_vectors(
    writer: &mut ArenaWriter,
    handle: &ModelHandle,
    max_tokens: usize,
    fields: &schema::Fields,
    upserts: &mut [NoteDocuments],
    kept_chunks: u64,
    without_model: WithoutModel,
    progress: Progress<'_>,
) -> Result<(DenseManifest, usize)> {
    let id = handle.id().clone();
    let mut keyed: Vec<Vec<[u8; 32]>> = Vec::with_capacity(upserts.len());
    let mut missing: Vec<([u8; 32], &str)> = Vec::new();
    let mut queued = std::collections::HashSet::new();
    for note in upserts.iter() {
        let mut keys = Vec::with_capacity(note.embed_texts.len());
        for (_, text) in &note.embed_texts {
            let key = dense::content_key(&id, max_tokens, text);
            if writer.row_of(&key).is_none() && queued.insert(key) {
                missing.push((key, text.as_str()));
            }
            keys.push(key);
        }
        keyed.push(keys);
    }
    let total = missing.len();
    let mut embedded = 0;
    let mut unavailable = None;
    if total > 0 {
        match handle.model() {
            Ok(model) => {
                // Longest first within a large window keeps padding low; each window is
                // appended (and, outside a transaction, made durable) before the next, so an
                // interrupted sync keeps its work.
                let window = (handle.config().batch_size * 8).max(1);
                progress("embedding", 0, total);
                for part in missing.chunks(window) {
                    let texts: Vec<&str> = part.iter().map(|(_, t)| *t).collect();
                    let vectors = model.embed(&texts)?;
                    let entries: Vec<([u8; 32], &[f32])> = part.iter().zip(&vectors).map(|((k, _), v)| (*k, v.as_slice())).collect();
                    writer.append(&entries)?;
                    embedded += part.len();
                    progress("embedding", embedded, total);
                }
            }
            Err(error) if without_model == WithoutModel::Owe && error.is_model_unavailable() => unavailable = Some(error),
            Err(error) => return Err(error),
        }
    }
    let mut chunks = kept_chunks;
    let mut owed = Vec::new();
    for (note, keys) in upserts.iter_mut().zip(keyed) {
        let mut complete = true;
        for ((doc_index, _), key) in note.embed_texts.iter().zip(keys) {
            match writer.row_of(&key) {
                Some(row) => {
                    note.docs[*doc_index].add_u64(fields.vec_row, row);
                    chunks += 1;
                }
                None if unavailable.is_some() => complete = false,
                None => return Err(Error::EmbeddingFailed { reason: "a chunk vector was not stored".into() }),
            }
        }
        if !complete {
            owed.push(note.path.clone());
        }
    }
    if let Some(error) = unavailable {
        tracing::warn!(
            notes = owed.len(),
            error = %error,
            "the embedding model is unavailable: the notes are written and searchable by keyword; their vectors are owed until `paravault sync --dense` (or a write with the model) embeds them"
        );
    }
    owed.sort();
    let manifest = DenseManifest { model: id, max_tokens, arena: writer.arena().to_string(), rows: writer.rows(), chunks, owed };
    Ok((manifest, embedded))
}

/// How many of the replaced chunk documents (`replaced_chunk_rows`) had a vector.
fn with_vectors(rows: &[Option<u64>]) -> u64 {
    rows.iter().filter(|r| r.is_some()).count() as u64
}

pub(super) fn into_upserts(notes: Vec<NoteDocuments>) -> Vec<(String, Vec<TantivyDocument>)> {
    notes.into_iter().map(|n| (n.path, n.docs)).collect()
}

/// The vector rows of every chunk document in `g` that this change replaces or removes (one
/// entry per chunk; `None` when it has no vector).
fn replaced_chunk_rows(g: &OpenGeneration, upserts: &[NoteDocuments], removes: &[String]) -> Result<Vec<Option<u64>>> {
    let searcher = g.searcher()?;
    let touched: BTreeSet<&str> = upserts.iter().map(|n| n.path.as_str()).chain(removes.iter().map(String::as_str)).collect();
    let mut out = Vec::new();
    for path in touched {
        let q = kind_and_term(g, schema::KIND_CHUNK, g.fields.path, path);
        for addr in searcher.search(&q, &DocSetCollector).map_err(search_err)? {
            let column = searcher.segment_reader(addr.segment_ord).fast_fields().u64("vec_row").map_err(search_err)?;
            out.push(column.first(addr.doc_id));
        }
    }
    Ok(out)
}

/// path → blake3 hex of every note a generation indexed.
fn indexed_hashes(g: &OpenGeneration) -> Result<BTreeMap<String, String>> {
    let searcher = g.searcher()?;
    let docs = searcher.search(&kind_query(g, schema::KIND_NOTE), &DocSetCollector).map_err(search_err)?;
    let mut out = BTreeMap::new();
    for addr in docs {
        let doc: TantivyDocument = searcher.doc(addr).map_err(search_err)?;
        out.insert(stored_text(&doc, g.fields.path), stored_text(&doc, g.fields.content_blake3));
    }
    Ok(out)
}

/// Full (incremental by content hash) sync of the vault into a new published generation.
pub fn sync(root: &Path, policy: &LoadedPolicy, inventory: &Inventory, options: SyncOptions) -> Result<SyncReport> {
    sync_with_progress(root, policy, inventory, options, &|_, _, _| {})
}

/// `sync`, reporting progress (the CLI draws a bar from it).
pub fn sync_with_progress(
    root: &Path,
    policy: &LoadedPolicy,
    inventory: &Inventory,
    options: SyncOptions,
    progress: Progress<'_>,
) -> Result<SyncReport> {
    let clock = std::time::Instant::now();
    let lap = |what: &str| tracing::debug!(phase = what, elapsed_ms = clock.elapsed().as_secs_f64() * 1e3, "sync");
    let (valid, exclusions) = sources(inventory);
    if !exclusions.is_empty() && !options.allow_partial {
        return Err(refuse(&exclusions));
    }
    let snapshot = inventory.snapshot.hash();
    let counts = Counts { scanned: valid.len() + exclusions.len(), indexed: valid.len(), excluded: exclusions.len() };
    let mut rebuild_reason = None;
    let active = match generation::read_active(root) {
        Ok(Some(id)) => match generation::open_generation(root, &id) {
            Ok(g) => Some(g),
            Err(e) => {
                rebuild_reason = Some(format!("active generation unusable: {e}"));
                None
            }
        },
        Ok(None) => {
            rebuild_reason = Some("no active generation".into());
            None
        }
        Err(e) => {
            rebuild_reason = Some(format!("ACTIVE unreadable: {e}"));
            None
        }
    };
    let active_dense = active.as_ref().and_then(|g| g.manifest.dense.clone());
    if options.fts_only
        && let Some(d) = &active_dense
        && !options.accept_dense_loss
    {
        return Err(Error::DenseLossRefused {
            reason: format!(
                "the active generation has a dense index ({} chunk vectors, {}); an FTS-only sync would discard it. \
                 Sync with fts_only=false to keep it current, or pass accept_dense_loss=true to drop it",
                d.chunks, d.model
            ),
        });
    }
    let max_tokens = policy.policy.embedding.max_tokens;
    let handle = (!options.fts_only).then(|| crate::embed::vault_handle(&policy.policy, root));
    if let Some(handle) = &handle {
        // Fail closed before any work: no model, no dense sync.
        handle.model()?;
    }
    if options.force_rebuild {
        rebuild_reason = Some("force_rebuild requested".into());
    }
    if let Some(g) = &active
        && (g.manifest.index_schema_version != schema::INDEX_SCHEMA_VERSION || g.manifest.chunker != schema::CHUNKER)
    {
        rebuild_reason = Some("index schema or chunker changed".into());
    }
    if active.is_some() && rebuild_reason.is_none() {
        match (&active_dense, &handle) {
            (Some(_), None) => rebuild_reason = Some("dense index dropped (accept_dense_loss)".into()),
            (None, Some(_)) => rebuild_reason = Some("dense index added".into()),
            (Some(d), Some(h)) => rebuild_reason = model_mismatch(d, h, max_tokens).map(|m| format!("embedding model changed: {m}")),
            (None, None) => {}
        }
    }
    let fields = schema::Fields::of(&schema::build_schema()).map_err(search_err)?;
    let mut tally = Tally::default();
    let mut upserts: Vec<NoteDocuments>;
    let mut removes: Vec<String> = Vec::new();
    let rebuild = rebuild_reason.is_some();
    let mut kept_chunks: u64 = 0;
    match (&active, rebuild) {
        (Some(g), false) => {
            let indexed = indexed_hashes(g)?;
            let current: BTreeSet<&str> = valid.iter().map(|r| r.path.as_str()).collect();
            let mut changed: Vec<&NoteRecord> = Vec::new();
            // Notes an earlier write left without vectors are embedded by a dense sync.
            let owed: BTreeSet<&str> = match (&active_dense, &handle) {
                (Some(d), Some(_)) => d.owed.iter().map(String::as_str).collect(),
                _ => BTreeSet::new(),
            };
            for record in &valid {
                match indexed.get(record.path.as_str()) {
                    Some(h) if *h == schema::hex(&record.content_hash) && owed.contains(record.path.as_str()) => {
                        tally.owed_embedded += 1;
                        changed.push(record);
                    }
                    Some(h) if *h == schema::hex(&record.content_hash) => tally.unchanged += 1,
                    Some(_) => {
                        tally.updated += 1;
                        changed.push(record);
                    }
                    None => {
                        tally.added += 1;
                        changed.push(record);
                    }
                }
            }
            upserts = read_documents(root, policy, &fields, &changed, progress)?;
            for path in indexed.keys().filter(|p| !current.contains(String::as_str(p))) {
                tally.removed += 1;
                removes.push(path.clone());
            }
            if upserts.is_empty()
                && removes.is_empty()
                && g.manifest.source_snapshot_hash == snapshot
                && g.manifest.exclusions == exclusions
            {
                let kept = GenerationInfo {
                    generation_id: g.id().to_string(),
                    parent: g.manifest.parent.clone(),
                    source_snapshot_hash: snapshot,
                    counts,
                    segment_count: g.manifest.segments.len(),
                    gc_removed_generations: 0,
                    gc_removed_files: 0,
                    dense: g.manifest.dense.is_some(),
                    vectors_owed: Vec::new(),
                };
                return Ok(SyncReport::of(kept, false, None, tally, exclusions, dense_report(g.manifest.dense.as_ref(), 0)));
            }
            if let Some(d) = &active_dense {
                kept_chunks = d.chunks.saturating_sub(with_vectors(&replaced_chunk_rows(g, &upserts, &removes)?));
            }
        }
        _ => {
            tally.added = valid.len();
            upserts = read_documents(root, policy, &fields, &valid, progress)?;
        }
    }
    progress("reading", valid.len(), valid.len());
    lap("documents built");
    let mut embedded = 0;
    let mut building = None;
    let dense = match &handle {
        None => None,
        Some(handle) => {
            let dim = handle.id().dimension;
            let mut writer = match (&active_dense, rebuild) {
                (Some(d), false) => ArenaWriter::open(root, &d.arena, dim, d.rows, true, None)?,
                _ => {
                    // A full build: resume an interrupted one (its rows are reused by key)
                    // unless a rebuild was forced, else start a new arena.
                    let resumed = match arena::building_arena(root).filter(|_| !options.force_rebuild) {
                        Some(arena) => ArenaWriter::open(root, &arena, dim, 0, true, None).ok(),
                        None => None,
                    };
                    let writer = match resumed {
                        Some(w) => w,
                        None => ArenaWriter::create(root, dim, None)?,
                    };
                    arena::set_building_arena(root, Some(writer.arena()))?;
                    building = Some(writer.arena().to_string());
                    writer
                }
            };
            let (manifest, embedded_now) =
                attach_vectors(&mut writer, handle, max_tokens, &fields, &mut upserts, kept_chunks, WithoutModel::Fail, progress)?;
            embedded = embedded_now;
            Some(manifest)
        }
    };
    lap("dense");
    progress("publishing", 0, 1);
    let dense_manifest = dense.clone();
    let info = publish::publish(
        root,
        PublishInput {
            parent: active,
            changes: Changes { upserts: into_upserts(upserts), removes, rebuild },
            source_snapshot_hash: snapshot,
            counts,
            exclusions: exclusions.clone(),
            max_segments: policy.policy.search.max_segments,
            generations_kept: policy.policy.search.generations_kept,
            dense,
            deferred_sync: None,
            covers_seq: options.covers_seq,
        },
    )?;
    if building.is_some() {
        arena::set_building_arena(root, None)?;
    }
    progress("publishing", 1, 1);
    Ok(SyncReport::of(info, true, rebuild_reason, tally, exclusions, dense_report(dense_manifest.as_ref(), embedded)))
}

fn dense_report(d: Option<&DenseManifest>, embedded: usize) -> Option<serde_json::Value> {
    d.map(|d| {
        serde_json::json!({
            "model": d.model.to_string(),
            "repo": d.model.repo,
            "revision": d.model.revision,
            "dimension": d.model.dimension,
            "precision": d.model.precision.as_str(),
            "max_tokens": d.max_tokens,
            "chunks": d.chunks,
            "arena_rows": d.rows,
            "embedded_now": embedded,
            "notes_owing_vectors": d.owed.len(),
        })
    })
}

/// How many notes an earlier write left without vectors one write embeds besides its own (the
/// rest stay owed for the next writes or `sync --dense`), so a write stays O(change).
pub(crate) const OWED_PER_WRITE: usize = 32;

/// The vault's model when a write to a vault without dense vectors should embed itself: the
/// model is bound in this process, or its files lie in a configured source (never downloaded
/// by a write) and it loads. `None` leaves the vault lexical (`warmup_status` says how to
/// enable it), and so does a dense build in progress (or an interrupted one awaiting its
/// resume): that `sync --dense` embeds the write's notes, as before.
pub fn embeds_on_write(policy: &LoadedPolicy, root: &Path) -> Option<Arc<ModelHandle>> {
    if arena::building_arena(root).is_some() {
        return None;
    }
    let handle = crate::embed::vault_handle(&policy.policy, root);
    let described = handle.describe();
    let present = described.bound.is_some() || described.sources.iter().any(|s| s.files_present);
    (present && handle.model().is_ok()).then_some(handle)
}

/// Publishes a new generation applying only `changed` and `removed` (the write transaction's
/// O(change) path). `inventory` must already reflect the change. Fails closed on invalid notes.
/// When the active generation has a dense index, the changed notes' chunks are embedded here
/// (unchanged chunks reuse their rows), so dense search stays current after every write; when
/// it has none and the vault's model loads (`embeds_on_write`), this write starts one.
pub fn publish_changes(
    root: &Path,
    policy: &LoadedPolicy,
    inventory: &Inventory,
    changed: &[VaultPath],
    removed: &[VaultPath],
    deferred_sync: Option<Arc<Mutex<Vec<PathBuf>>>>,
    covers_seq: Option<u64>,
) -> Result<GenerationInfo> {
    publish_changes_in_view(root, policy, inventory, changed, removed, deferred_sync, covers_seq).map(inventory::of_whole)
}

/// `publish_changes` on the model a write planned on, whole or partial: `Err(Overrun)`, with
/// nothing written, when the publish needs every note and the model is a write's partial one
/// (an index of an older engine rebuilt, a dense index started): the caller runs it again on
/// the whole model.
pub fn publish_changes_in_view(
    root: &Path,
    policy: &LoadedPolicy,
    inventory: &dyn ModelView,
    changed: &[VaultPath],
    removed: &[VaultPath],
    deferred_sync: Option<Arc<Mutex<Vec<PathBuf>>>>,
    covers_seq: Option<u64>,
) -> Result<std::result::Result<GenerationInfo, Overrun>> {
    // The write path records exclusions instead of refusing: one invalid note elsewhere must
    // never lock out writes. They are named in the manifest (and the lint gate has already
    // refused any invalid note this write touches).
    let clock = std::time::Instant::now();
    let lap = |what: &str| tracing::debug!(phase = what, elapsed_ms = clock.elapsed().as_secs_f64() * 1e3, "publish_changes");
    let exclusions: Vec<Exclusion> =
        inventory.counts().invalid.iter().filter_map(|p| inventory.records().get(p)).map(exclusion_of).collect();
    let active_id =
        generation::read_active(root)?.ok_or_else(|| Error::NoActiveGeneration { reason: "run sync before publishing changes".into() })?;
    let active = generation::open_generation(root, &active_id)?;
    lap("exclusions + open active");
    if active.manifest.index_schema_version != schema::INDEX_SCHEMA_VERSION || active.manifest.chunker != schema::CHUNKER {
        // An index from an older engine: this write rebuilds it once (keeping a dense index),
        // from every note.
        let Some(whole) = inventory.as_whole() else {
            return Ok(Err(Overrun { asked: "every note, to rebuild an index of an older engine".into() }));
        };
        let options = SyncOptions { fts_only: active.manifest.dense.is_none(), allow_partial: true, covers_seq, ..Default::default() };
        drop(active);
        let report = sync(root, policy, whole, options)?;
        return Ok(Ok(GenerationInfo {
            generation_id: report.generation_id,
            parent: Some(active_id),
            source_snapshot_hash: report.source_snapshot_hash,
            counts: report.counts,
            segment_count: report.segment_count,
            gc_removed_generations: report.gc_removed_generations,
            gc_removed_files: report.gc_removed_files,
            dense: report.dense.is_some(),
            vectors_owed: Vec::new(),
        }));
    }
    let fields = schema::Fields::of(&schema::build_schema()).map_err(search_err)?;
    let mut upserts = Vec::new();
    let mut removes = Vec::new();
    let mut cursor = FolderCursor::new(root);
    for path in changed {
        match inventory.records().get(path) {
            Some(record) if record.is_note() && record.valid => upserts.push(docs_of(&mut cursor, policy, &fields, record)?),
            _ => removes.push(path.as_str().to_string()),
        }
    }
    removes.extend(removed.iter().map(|p| p.as_str().to_string()));
    lap("documents");
    let mut owed_now = Vec::new();
    let dense = match &active.manifest.dense {
        None => match embeds_on_write(policy, root) {
            None => None,
            Some(handle) => {
                // The first write that has the model starts the dense index: its own notes and
                // up to OWED_PER_WRITE others are embedded now, every other note is owed (the
                // next writes and `sync --dense` embed them), so the write stays O(change).
                let Some(whole) = inventory.as_whole() else {
                    return Ok(Err(Overrun { asked: "every note, to start the dense index".into() }));
                };
                let max_tokens = policy.policy.embedding.max_tokens;
                let mut writer = ArenaWriter::create(root, handle.id().dimension, deferred_sync.clone())?;
                let touched: BTreeSet<String> = upserts.iter().map(|n| n.path.clone()).chain(removes.iter().cloned()).collect();
                let mut still_owed = Vec::new();
                let others = whole.records.values().filter(|r| r.is_note() && r.valid && !touched.contains(r.path.as_str()));
                for (n, record) in others.enumerate() {
                    if n < OWED_PER_WRITE {
                        upserts.push(docs_of(&mut cursor, policy, &fields, record)?);
                    } else {
                        still_owed.push(record.path.as_str().to_string());
                    }
                }
                let (mut manifest, _) =
                    attach_vectors(&mut writer, &handle, max_tokens, &fields, &mut upserts, 0, WithoutModel::Owe, &|_, _, _| {})?;
                owed_now.clone_from(&manifest.owed);
                manifest.owed.extend(still_owed);
                manifest.owed.sort();
                manifest.owed.dedup();
                Some(manifest)
            }
        },
        Some(d) => {
            let max_tokens = policy.policy.embedding.max_tokens;
            let handle = crate::embed::vault_handle(&policy.policy, root);
            if let Some(mismatch) = model_mismatch(d, &handle, max_tokens) {
                return Err(Error::DenseIndexUnavailable {
                    reason: format!("{mismatch}; run sync_vault with fts_only=false and force_rebuild=true before writing"),
                });
            }
            let mut writer = ArenaWriter::open(root, &d.arena, d.model.dimension, d.rows, false, deferred_sync.clone())?;
            // The notes an earlier write owes vectors: re-read and embedded now when the model
            // loads; otherwise still owed (unless this change rewrites or removes them).
            let touched: BTreeSet<String> = upserts.iter().map(|n| n.path.clone()).chain(removes.iter().cloned()).collect();
            let mut still_owed = Vec::new();
            let model_ready = !d.owed.is_empty() && handle.model().is_ok();
            let mut taken = 0;
            for owed in d.owed.iter().filter(|p| !touched.contains(*p)) {
                let record =
                    VaultPath::parse_walked(owed).ok().and_then(|p| inventory.records().get(&p)).filter(|r| r.is_note() && r.valid);
                match record {
                    // At most OWED_PER_WRITE owed notes ride along, so a write stays O(change).
                    Some(record) if model_ready && taken < OWED_PER_WRITE => {
                        taken += 1;
                        upserts.push(docs_of(&mut cursor, policy, &fields, record)?);
                    }
                    Some(_) => still_owed.push(owed.clone()),
                    // Past a one-shot write's partial model (a folder it did not load): still
                    // owed, whatever it holds; a later write or sync on the whole model decides.
                    None if inventory.as_whole().is_none() => still_owed.push(owed.clone()),
                    // Gone from the index's sources: nothing is owed for it.
                    None => {}
                }
            }
            let replaced = replaced_chunk_rows(&active, &upserts, &removes)?;
            let dropped = with_vectors(&replaced);
            for row in replaced.into_iter().flatten() {
                // Unchanged sections of an edited note keep their vectors.
                let key = writer.key_at(row)?;
                writer.remember(key, row);
            }
            let kept_chunks = d.chunks.saturating_sub(dropped);
            let (mut manifest, _) =
                attach_vectors(&mut writer, &handle, max_tokens, &fields, &mut upserts, kept_chunks, WithoutModel::Owe, &|_, _, _| {})?;
            owed_now.clone_from(&manifest.owed);
            manifest.owed.extend(still_owed);
            manifest.owed.sort();
            manifest.owed.dedup();
            Some(manifest)
        }
    };
    let indexed = inventory.counts().valid;
    let counts = Counts { scanned: indexed + exclusions.len(), indexed, excluded: exclusions.len() };
    let source_snapshot_hash = inventory.snapshot().hash();
    debug_assert_eq!(indexed, inventory.snapshot().len());
    lap("dense + snapshot");
    let mut info = publish::publish(
        root,
        PublishInput {
            parent: Some(active),
            changes: Changes { upserts: into_upserts(upserts), removes, rebuild: false },
            source_snapshot_hash,
            counts,
            exclusions,
            max_segments: policy.policy.search.max_segments,
            generations_kept: policy.policy.search.generations_kept,
            dense,
            deferred_sync,
            covers_seq,
        },
    )?;
    info.vectors_owed = owed_now;
    Ok(Ok(info))
}
