//! Publishing a search generation and collecting garbage: apply a change on top of the parent
//! generation's commit (a small one as one segment, see `segment_commit`; larger ones and merges
//! with an `IndexWriter`), record the manifest, move `ACTIVE`, then remove what no retained or
//! held generation references. Order of durability: tantivy commit → manifest → `ACTIVE` → GC
//! (see `search::read::generation` for the mechanism).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use serde::Serialize;
use tantivy::indexer::NoMergePolicy;
use tantivy::{Index, IndexWriter, TantivyDocument, Term};

use super::arena;
use crate::error::{Error, Result};
use crate::search::read::dense::DenseManifest;
use crate::search::read::generation::{
    Counts, Exclusion, MANIFEST_SCHEMA_VERSION, Manifest, OpenGeneration, SegmentFile, SegmentRecord, forget_cached, generations_dir,
    held_generations, index_dir, lock, manifest_path, parse_meta, read_manifest, tantivy_err, valid_id,
};
use crate::search::schema::{self, Fields};
use crate::search::segment_commit;
use crate::store::beneath::Folder;
use crate::store::tantivy_dir::{self, RetainingDirectory};
use crate::store::{durable, layout};

static PUBLISH: LazyLock<Mutex<()>> = LazyLock::new(|| Mutex::new(()));

fn new_generation_id(parent: Option<&str>, snapshot: &str) -> (String, String) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // Derived, per-machine state: its stamp is this machine's, compared with this machine's.
    let now = crate::clock::machine_utc();
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut h = blake3::Hasher::new();
    h.update(parent.unwrap_or("").as_bytes());
    h.update(snapshot.as_bytes());
    h.update(&now.timestamp_nanos_opt().unwrap_or_default().to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(&seq.to_le_bytes());
    let id = format!("{}-{}", now.format("%Y%m%dT%H%M%S%3fZ"), &schema::hex(h.finalize().as_bytes())[..12]);
    (id, now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// What one publish applies on top of its base.
pub(crate) struct Changes {
    /// Paths whose documents are replaced, with their new documents.
    pub upserts: Vec<(String, Vec<TantivyDocument>)>,
    pub removes: Vec<String>,
    /// Drop every document first (full rebuild).
    pub rebuild: bool,
}

pub(crate) struct PublishInput {
    pub parent: Option<Arc<OpenGeneration>>,
    pub changes: Changes,
    pub source_snapshot_hash: String,
    pub counts: Counts,
    pub exclusions: Vec<Exclusion>,
    pub max_segments: usize,
    pub generations_kept: usize,
    /// The dense index this generation records (its arena rows are already appended).
    pub dense: Option<DenseManifest>,
    /// Defer every fsync to the caller's checkpoint (the write transaction: its intent record
    /// already makes the change durable and recovery re-publishes). `None` = durable now.
    pub deferred_sync: Option<Arc<std::sync::Mutex<Vec<PathBuf>>>>,
    /// The last write transaction the new generation includes (`None`: the parent's).
    pub covers_seq: Option<u64>,
}

/// Result of one publish.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenerationInfo {
    pub generation_id: String,
    pub parent: Option<String>,
    pub source_snapshot_hash: String,
    pub counts: Counts,
    pub segment_count: usize,
    pub gc_removed_generations: usize,
    pub gc_removed_files: usize,
    /// Whether the generation carries dense vectors (the write was embedded).
    pub dense: bool,
    /// Notes this publish wrote without their vectors (the embedding model was unavailable):
    /// owed, recorded in the dense manifest.
    pub vectors_owed: Vec<String>,
}

fn open_writer_index(
    root: &Path,
    parent: Option<&OpenGeneration>,
    rebuild: bool,
    deferred: Option<&Arc<std::sync::Mutex<Vec<PathBuf>>>>,
) -> Result<Index> {
    let open_dir = || match deferred {
        Some(written) => RetainingDirectory::open_deferred_sync(root, written.clone()),
        None => RetainingDirectory::open(root),
    };
    let dir = index_dir(root);
    durable::create_dir_all(root, &dir)?;
    durable::create_dir_all(root, &generations_dir(root))?;
    let meta_path = tantivy_dir::meta_path(&dir);
    if let Some(parent) = parent {
        // The writer's base is the active generation, not whatever a crashed publish committed.
        let live = Folder::open(root, layout::SEARCH_INDEX_DIR, false).and_then(|f| f.read(tantivy_dir::META_FILE)).ok();
        if live.as_deref() != Some(parent.manifest.tantivy_meta.as_bytes()) {
            durable::replace(root, &meta_path, parent.manifest.tantivy_meta.as_bytes())?;
        }
    }
    let open = || -> tantivy::Result<Index> { Index::open(open_dir()?) };
    let index = match open() {
        Ok(index) if !rebuild || index.schema() == schema::build_schema() => index,
        _ => {
            if !rebuild && parent.is_some() {
                return Err(Error::SearchIndex {
                    action: "opening the index",
                    reason: "the active generation's commit cannot be opened".into(),
                });
            }
            durable::remove_file(root, &meta_path)?;
            let directory = open_dir().map_err(|e| Error::SearchIndex { action: "opening the index", reason: e.to_string() })?;
            Index::create(directory, schema::build_schema(), tantivy::IndexSettings::default())
                .map_err(tantivy_err("creating the index"))?
        }
    };
    schema::register(&index);
    Ok(index)
}

/// Applies `input.changes`, commits, records the manifest, moves `ACTIVE`, collects garbage.
pub(crate) fn publish(root: &Path, input: PublishInput) -> Result<GenerationInfo> {
    let _guard = lock(&PUBLISH);
    let clock = std::time::Instant::now();
    let lap = |what: &str| tracing::debug!(phase = what, elapsed_ms = clock.elapsed().as_secs_f64() * 1e3, "publish");
    let parent_id = input.parent.as_ref().map(|p| p.id().to_string());
    let rebuild = input.changes.rebuild || input.parent.is_none();
    let index = open_writer_index(root, input.parent.as_deref(), rebuild, input.deferred_sync.as_ref())?;
    lap("open index");
    let fields = Fields::of(&index.schema()).map_err(tantivy_err("reading the schema"))?;
    let doc_count: usize = input.changes.upserts.iter().map(|(_, d)| d.len()).sum();
    let (generation_id, created_at) = new_generation_id(parent_id.as_deref(), &input.source_snapshot_hash);
    let mut writer: Option<IndexWriter<TantivyDocument>> = None;
    match input.parent.as_deref() {
        Some(parent) if !rebuild && doc_count <= segment_commit::MAX_DOCUMENTS => {
            // A transaction's few notes: one small segment, no IndexWriter (see segment_commit).
            segment_commit::commit(&index, &fields, parent, input.changes.upserts, &input.changes.removes, &generation_id)?;
            lap("segment commit");
        }
        _ => {
            let threads = if doc_count > 2000 { crate::inventory::parallelism().min(2) } else { 1 };
            let mut w: IndexWriter<TantivyDocument> = index
                .writer_with_num_threads(threads, if doc_count > 2000 { 64_000_000 } else { 15_000_000 } * threads)
                .map_err(tantivy_err("opening the index writer"))?;
            w.set_merge_policy(Box::new(NoMergePolicy));
            lap("writer");
            if rebuild {
                w.delete_all_documents().map_err(tantivy_err("clearing the index"))?;
            }
            for path in &input.changes.removes {
                w.delete_term(Term::from_field_text(fields.path, path));
            }
            for (path, docs) in input.changes.upserts {
                if !rebuild {
                    w.delete_term(Term::from_field_text(fields.path, &path));
                }
                for doc in docs {
                    w.add_document(doc).map_err(tantivy_err("adding a document"))?;
                }
            }
            let mut prepared = w.prepare_commit().map_err(tantivy_err("preparing the commit"))?;
            prepared.set_payload(&generation_id);
            lap("docs");
            prepared.commit().map_err(tantivy_err("committing"))?;
            lap("commit");
            writer = Some(w);
        }
    }
    // Too many segments: merge only the smallest ones (the recent one-note commits), so the
    // cost stays O(change) amortised instead of rewriting the whole index.
    let mut metas = index.searchable_segment_metas().map_err(tantivy_err("listing segments"))?;
    if metas.len() > input.max_segments {
        metas.sort_by_key(|m| m.num_docs());
        let take = (metas.len() - input.max_segments / 2).max(2);
        let smallest: Vec<_> = metas.iter().take(take).map(|m| m.id()).collect();
        let w = match &mut writer {
            Some(w) => w,
            None => {
                let w: IndexWriter<TantivyDocument> =
                    index.writer_with_num_threads(1, 15_000_000).map_err(tantivy_err("opening the index writer"))?;
                w.set_merge_policy(Box::new(NoMergePolicy));
                writer.insert(w)
            }
        };
        w.merge(&smallest).wait().map_err(tantivy_err("merging segments"))?;
    }
    lap("merge");
    // Read the commit while the writer (and its lock) is still held: nobody else can commit.
    let index_folder =
        Folder::open(root, layout::SEARCH_INDEX_DIR, false).map_err(|e| Error::io("opening", layout::SEARCH_INDEX_DIR, e))?;
    let meta_bytes = index_folder.read(tantivy_dir::META_FILE).map_err(|e| Error::io("reading", layout::SEARCH_INDEX_DIR, e))?;
    let meta_text = String::from_utf8(meta_bytes)
        .map_err(|e| Error::io("reading", layout::SEARCH_INDEX_DIR, std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    let (opstamp, segments) = parse_meta(&generation_id, &meta_text)?;
    let mut records = Vec::new();
    let listing: Vec<(String, u64)> = index_folder
        .entries()
        .map_err(|e| Error::io("listing", layout::SEARCH_INDEX_DIR, e))?
        .into_iter()
        .filter_map(|(name, len)| Some((name, len?)))
        .collect();
    for (sid, del_opstamp) in &segments {
        let prefix = format!("{sid}.");
        let wanted_del = del_opstamp.map(|o| format!("{sid}.{o}.del"));
        let mut files: Vec<SegmentFile> = listing
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix) && !name.ends_with(".store.temp"))
            .filter(|(name, _)| !name.ends_with(".del") || Some(name) == wanted_del.as_ref())
            .map(|(name, size)| SegmentFile { name: name.clone(), size: *size })
            .collect();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        records.push(SegmentRecord { segment_id: sid.clone(), files });
    }
    let manifest = Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        generation_id: generation_id.clone(),
        parent: parent_id.clone(),
        created_at,
        source_snapshot_hash: input.source_snapshot_hash.clone(),
        counts: input.counts.clone(),
        exclusions: input.exclusions,
        chunker: schema::CHUNKER.to_string(),
        dense: input.dense,
        index_schema_version: schema::INDEX_SCHEMA_VERSION,
        tantivy_opstamp: opstamp,
        segments: records,
        tantivy_meta_blake3: schema::hex(blake3::hash(meta_text.as_bytes()).as_bytes()),
        tantivy_meta: meta_text,
        covers_seq: input.covers_seq.or_else(|| input.parent.as_ref().map(|p| p.manifest.covers_seq)).unwrap_or(0),
    };
    let bytes =
        serde_json::to_vec_pretty(&manifest).map_err(|e| Error::SearchIndex { action: "writing the manifest", reason: e.to_string() })?;
    lap("manifest built");
    let manifest_file = manifest_path(root, &generation_id);
    let active_file = layout::join(root, layout::SEARCH_ACTIVE);
    match &input.deferred_sync {
        Some(written) => {
            durable::replace_unsynced(root, &manifest_file, &bytes)?;
            durable::replace_unsynced(root, &active_file, generation_id.as_bytes())?;
            let mut written = written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            written.push(manifest_file);
            written.push(active_file);
        }
        None => {
            durable::replace(root, &manifest_file, &bytes)?;
            durable::replace(root, &active_file, generation_id.as_bytes())?;
        }
    }
    lap("manifest+active");
    forget_cached(root);
    drop(input.parent);
    let (gc_removed_generations, gc_removed_files) = collect_garbage(root, &generation_id, input.generations_kept)?;
    lap("gc");
    if let Some(writer) = writer {
        writer.wait_merging_threads().map_err(tantivy_err("closing the index writer"))?;
    }
    lap("writer closed");
    Ok(GenerationInfo {
        generation_id,
        parent: parent_id,
        source_snapshot_hash: input.source_snapshot_hash,
        counts: input.counts,
        segment_count: manifest.segments.len(),
        gc_removed_generations,
        gc_removed_files,
        dense: manifest.dense.is_some(),
        vectors_owed: Vec::new(),
    })
}

fn is_segment_file(name: &str) -> bool {
    name.len() > 33 && name.as_bytes()[32] == b'.' && name[..32].bytes().all(|b| b.is_ascii_hexdigit())
}

/// Removes generations beyond the newest `kept` (along the parent chain from `active`) that no
/// in-process reader holds, then every segment file no retained generation references.
/// Removals are not fsynced: a garbage file that a crash brings back is still garbage (no
/// retained manifest names it) and the next collection removes it; a stray old manifest
/// whose files are gone fails verification and is never served.
/// Must run under the publish lock with the index writer held. Returns (generations, files).
pub(crate) fn collect_garbage(root: &Path, active: &str, kept: usize) -> Result<(usize, usize)> {
    // Never delete through a linked index, generations or dense folder.
    crate::store::nofollow::refuse_symlinked_state(root)?;
    let mut retained: BTreeSet<String> = held_generations(root);
    let mut manifests: HashMap<String, Result<Manifest>> = HashMap::new();
    let mut cursor = Some(active.to_string());
    let mut n = 0;
    while let Some(id) = cursor.take() {
        if n >= kept.max(1) {
            break;
        }
        retained.insert(id.clone());
        n += 1;
        let manifest = read_manifest(root, &id);
        cursor = manifest.as_ref().ok().and_then(|m| m.parent.clone());
        manifests.insert(id, manifest);
    }
    let mut keep_files: BTreeSet<String> = BTreeSet::new();
    let mut keep_arenas: BTreeSet<String> = BTreeSet::new();
    let mut all_readable = true;
    for id in &retained {
        match manifests.remove(id).unwrap_or_else(|| read_manifest(root, id)) {
            Ok(m) => {
                keep_files.extend(m.segments.iter().flat_map(|s| s.files.iter().map(|f| f.name.clone())));
                keep_arenas.extend(m.dense.map(|d| d.arena));
            }
            Err(_) => all_readable = false,
        }
    }
    // Listed and removed through each folder's handle, opened beneath the root without
    // following a link: a folder swapped for a link after the check above is never walked.
    let remove_error = |rel: &'static str| move |e: std::io::Error| crate::store::nofollow::io_error("removing", rel, e);
    let mut removed_generations = 0;
    if let Ok(folder) = Folder::open(root, layout::SEARCH_GENERATIONS_DIR, false) {
        for (name, _) in folder.entries().map_err(remove_error(layout::SEARCH_GENERATIONS_DIR))? {
            if let Some(id) = name.strip_suffix(".json")
                && valid_id(id)
                && !retained.contains(id)
            {
                folder.remove_unsynced(&name).map_err(remove_error(layout::SEARCH_GENERATIONS_DIR))?;
                removed_generations += 1;
            }
        }
    }
    let mut removed_files = 0;
    if all_readable {
        // The live tantivy commit is the active generation's (GC runs right after publishing,
        // with the writer lock held), so `keep_files` covers it.
        let folder = Folder::open(root, layout::SEARCH_INDEX_DIR, false)
            .map_err(|e| crate::store::nofollow::io_error("listing", layout::SEARCH_INDEX_DIR, e))?;
        for (name, _) in folder.entries().map_err(|e| Error::io("listing", layout::SEARCH_INDEX_DIR, e))? {
            if is_segment_file(&name) && !keep_files.contains(&name) {
                folder.remove_unsynced(&name).map_err(remove_error(layout::SEARCH_INDEX_DIR))?;
                removed_files += 1;
            }
        }
        removed_files += arena::collect_garbage(root, &keep_arenas)?;
    }
    Ok((removed_generations, removed_files))
}
