//! Immutable search generations: publishing, verifying, opening and garbage-collecting them.
//!
//! Mechanism (chosen after reading tantivy 0.27's `Index::open`, `ManagedDirectory` and
//! `SegmentUpdater`): there is ONE tantivy index (`.paravault/search/index/`). Every tantivy
//! commit writes new immutable segment files and a `meta.json` naming the live segments. A
//! *generation* is one such commit: its manifest (`generations/<id>.json`) keeps a verbatim
//! copy of that commit's `meta.json`, its blake3, and every segment file with its size.
//!
//! - Tantivy's own garbage collector would delete the files of older commits after each commit
//!   or merge. The index lives in a `store::tantivy_dir::RetainingDirectory`, whose `delete` is a
//!   no-op for everything but lock files, so tantivy never removes a segment file; this module's
//!   GC removes files that no retained generation references.
//! - `Searcher` construction from arbitrary segment metas is crate-private in tantivy, but
//!   `Index::open` reads `meta.json` through the `Directory`. A reader therefore opens the index
//!   through a `RetainingDirectory` *pinned* to the manifest's `meta.json` copy: tantivy builds
//!   the exact commit the generation recorded, whatever the writer has committed since.
//! - Publishing is O(change): the writer applies only the changed notes (delete by path term,
//!   add documents) on top of the active generation's commit and commits (`NoMergePolicy`;
//!   when more than `search.max_segments` segments remain, they are merged, amortised).
//! - Order of durability: tantivy commit (fsynced by tantivy) → manifest (`durable::replace`) →
//!   `ACTIVE` (`durable::replace`) → GC. A crash before `ACTIVE` leaves the previous generation
//!   published; the next publish rolls the live `meta.json` back to the active generation's.
//! - GC keeps the newest `search.generations_kept` generations along the `parent` chain from
//!   `ACTIVE`, plus every generation an in-process reader still holds (a `Weak` registry).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, Weak};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use tantivy::indexer::NoMergePolicy;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use super::dense::{self, DenseManifest, DenseView};
use super::schema::{self, Fields};
use super::segment_commit;
use super::tail;
use super::temporal::TemporalTable;
use crate::error::{Error, Result};
use crate::policy::LoadedPolicy;
use crate::store::beneath::Folder;
use crate::store::journal::{self, JournalStamp};
use crate::store::tantivy_dir::{self, RetainingDirectory};
use crate::store::{durable, layout};

/// Version of the manifest format.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub scanned: usize,
    pub indexed: usize,
    pub excluded: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentFile {
    pub name: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRecord {
    pub segment_id: String,
    pub files: Vec<SegmentFile>,
}

/// What a generation is, recorded once at publish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u32,
    pub generation_id: String,
    pub parent: Option<String>,
    pub created_at: String,
    pub source_snapshot_hash: String,
    pub counts: Counts,
    pub exclusions: Vec<Exclusion>,
    pub chunker: String,
    pub dense: Option<DenseManifest>,
    pub index_schema_version: u32,
    pub tantivy_opstamp: u64,
    pub segments: Vec<SegmentRecord>,
    pub tantivy_meta_blake3: String,
    /// Verbatim `meta.json` of the generation's tantivy commit.
    pub tantivy_meta: String,
    /// The last write-transaction sequence number this generation includes; the journal's
    /// intents after it are its *tail* (served from memory, see `search::tail`). 0: none known
    /// (manifests of older engines).
    #[serde(default)]
    pub covers_seq: u64,
}

/// A verified, opened generation. Holding the `Arc` keeps it alive against GC.
pub struct OpenGeneration {
    pub root: PathBuf,
    pub manifest: Manifest,
    pub index: Index,
    pub reader: IndexReader,
    pub fields: Fields,
    pub manifest_modified: Option<SystemTime>,
    pub(crate) temporal: OnceLock<TemporalTable>,
    /// Note entries already read from this (immutable) generation, by path.
    pub(crate) note_entries: Mutex<HashMap<String, Option<Arc<super::schema::NoteEntry>>>>,
    dense_view: OnceLock<std::result::Result<Arc<DenseView>, String>>,
    /// For a generation served from the journal's tail: the on-disk generation under it (held
    /// so that GC keeps its files).
    pub(crate) base: Option<Arc<OpenGeneration>>,
}

impl std::fmt::Debug for OpenGeneration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenGeneration").field("generation_id", &self.manifest.generation_id).finish()
    }
}

impl OpenGeneration {
    pub(crate) fn new(
        root: PathBuf,
        manifest: Manifest,
        index: Index,
        reader: IndexReader,
        fields: Fields,
        manifest_modified: Option<SystemTime>,
        base: Option<Arc<OpenGeneration>>,
    ) -> Self {
        OpenGeneration {
            root,
            manifest,
            index,
            reader,
            fields,
            manifest_modified,
            temporal: OnceLock::new(),
            note_entries: Mutex::new(HashMap::new()),
            dense_view: OnceLock::new(),
            base,
        }
    }

    pub fn id(&self) -> &str {
        &self.manifest.generation_id
    }

    /// For a generation served from the journal's tail, the on-disk generation under it.
    pub fn tail_base(&self) -> Option<&OpenGeneration> {
        self.base.as_deref()
    }

    /// The generation's dense index, loaded and verified on first use (`None`: it has none).
    pub fn dense(&self) -> Result<Option<Arc<DenseView>>> {
        let Some(manifest) = &self.manifest.dense else { return Ok(None) };
        let view = self
            .dense_view
            .get_or_init(|| DenseView::build(&self.root, manifest, &self.reader.searcher()).map(Arc::new).map_err(|e| e.to_string()));
        match view {
            Ok(view) => Ok(Some(view.clone())),
            Err(reason) => Err(corrupt(self.id(), format!("dense index unusable: {reason}"))),
        }
    }
}

/// The generation a reader got, with the reason when it is not the one `ACTIVE` names.
#[derive(Debug, Clone)]
pub struct Acquired {
    pub generation: Arc<OpenGeneration>,
    pub fallback_reason: Option<String>,
}

struct Current {
    active_id: String,
    journal: Option<JournalStamp>,
    acquired: Acquired,
}

/// (vault root, generation id, reader handle) of every generation opened in this process.
type LiveRegistry = Vec<(PathBuf, String, Weak<OpenGeneration>)>;

static LIVE: LazyLock<Mutex<LiveRegistry>> = LazyLock::new(|| Mutex::new(Vec::new()));
static CURRENT: LazyLock<Mutex<HashMap<PathBuf, Current>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
static PUBLISH: LazyLock<Mutex<()>> = LazyLock::new(|| Mutex::new(()));

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn tantivy_err(action: &'static str) -> impl Fn(tantivy::TantivyError) -> Error {
    move |e| Error::SearchIndex { action, reason: e.to_string() }
}

fn corrupt(id: &str, reason: impl Into<String>) -> Error {
    Error::GenerationCorrupt { generation_id: id.to_string(), reason: reason.into() }
}

/// The canonical key of a vault root.
pub fn root_key(root: &Path) -> PathBuf {
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

pub fn index_dir(root: &Path) -> PathBuf {
    layout::join(root, layout::SEARCH_INDEX_DIR)
}

fn generations_dir(root: &Path) -> PathBuf {
    layout::join(root, layout::SEARCH_GENERATIONS_DIR)
}

fn manifest_path(root: &Path, id: &str) -> PathBuf {
    generations_dir(root).join(format!("{id}.json"))
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// The id `ACTIVE` names, if any.
pub fn read_active(root: &Path) -> Result<Option<String>> {
    match durable::read_engine_file(root, &layout::join(root, layout::SEARCH_ACTIVE)) {
        Ok(bytes) => {
            let id = String::from_utf8_lossy(&bytes).trim().to_string();
            if valid_id(&id) { Ok(Some(id)) } else { Err(corrupt("ACTIVE", "the ACTIVE pointer does not hold a generation id")) }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(crate::store::nofollow::io_error("reading", layout::SEARCH_ACTIVE, e)),
    }
}

pub fn read_manifest(root: &Path, id: &str) -> Result<Manifest> {
    let path = manifest_path(root, id);
    let bytes = durable::read_engine_file(root, &path).map_err(|e| corrupt(id, format!("manifest unreadable: {}", e.kind())))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| corrupt(id, format!("manifest does not parse: {e}")))?;
    if manifest.generation_id != id {
        return Err(corrupt(id, format!("manifest names generation '{}'", manifest.generation_id)));
    }
    if manifest.schema_version != MANIFEST_SCHEMA_VERSION {
        return Err(corrupt(id, format!("manifest schema_version {} is not supported", manifest.schema_version)));
    }
    Ok(manifest)
}

/// (opstamp, segment id → delete opstamp) of a tantivy `meta.json`.
fn parse_meta(id: &str, meta: &str) -> Result<(u64, BTreeMap<String, Option<u64>>)> {
    let value: serde_json::Value = serde_json::from_str(meta).map_err(|e| corrupt(id, format!("tantivy meta does not parse: {e}")))?;
    let opstamp = value.get("opstamp").and_then(|v| v.as_u64()).ok_or_else(|| corrupt(id, "tantivy meta has no opstamp"))?;
    let mut segments = BTreeMap::new();
    for seg in value.get("segments").and_then(|v| v.as_array()).ok_or_else(|| corrupt(id, "tantivy meta has no segments"))? {
        let sid = seg.get("segment_id").and_then(|v| v.as_str()).ok_or_else(|| corrupt(id, "segment without id"))?.replace('-', "");
        let del = seg.get("deletes").and_then(|d| d.get("opstamp")).and_then(|v| v.as_u64());
        segments.insert(sid, del);
    }
    Ok((opstamp, segments))
}

/// Opens and verifies a generation (or returns the already-open, already-verified one).
pub fn open_generation(root: &Path, id: &str) -> Result<Arc<OpenGeneration>> {
    let key = root_key(root);
    {
        let mut live = lock(&LIVE);
        live.retain(|(_, _, w)| w.strong_count() > 0);
        if let Some(g) = live.iter().find(|(r, i, _)| *r == key && i == id).and_then(|(_, _, w)| w.upgrade()) {
            return Ok(g);
        }
    }
    let manifest = read_manifest(root, id)?;
    if schema::hex(blake3::hash(manifest.tantivy_meta.as_bytes()).as_bytes()) != manifest.tantivy_meta_blake3 {
        return Err(corrupt(id, "tantivy meta copy does not match its recorded blake3"));
    }
    let (opstamp, segments) = parse_meta(id, &manifest.tantivy_meta)?;
    if opstamp != manifest.tantivy_opstamp {
        return Err(corrupt(id, "tantivy opstamp differs from the manifest"));
    }
    let recorded: BTreeSet<&str> = manifest.segments.iter().map(|s| s.segment_id.as_str()).collect();
    if recorded != segments.keys().map(String::as_str).collect() {
        return Err(corrupt(id, "segment list differs from the tantivy commit"));
    }
    // Every segment file is checked and later mapped through the index folder's one handle.
    let directory = RetainingDirectory::open_pinned(root, manifest.tantivy_meta.clone().into_bytes())
        .map_err(|e| corrupt(id, format!("index directory unusable: {e}")))?;
    for seg in &manifest.segments {
        for file in &seg.files {
            match directory.folder().file_len(&file.name) {
                Ok(len) if len == file.size => {}
                Ok(len) => return Err(corrupt(id, format!("segment file {} has {len} bytes, recorded {}", file.name, file.size))),
                Err(e) => return Err(corrupt(id, format!("segment file {} missing: {}", file.name, e.kind()))),
            }
        }
    }
    if let Some(d) = &manifest.dense {
        let row_bytes = d.model.dimension as u64 * 4;
        let dense_folder = Folder::open(root, layout::SEARCH_DENSE_DIR, false);
        for (name, need) in [(format!("{}.vec", d.arena), d.rows * row_bytes), (format!("{}.keys", d.arena), d.rows * 48)] {
            match dense_folder.as_ref().map_err(|e| std::io::Error::new(e.kind(), e.to_string())).and_then(|f| f.file_len(&name)) {
                Ok(len) if len >= need => {}
                Ok(len) => return Err(corrupt(id, format!("dense file {name} has {len} bytes, needs {need}"))),
                Err(e) => return Err(corrupt(id, format!("dense file {name} missing: {}", e.kind()))),
            }
        }
    }
    let index = Index::open(directory).map_err(|e| corrupt(id, format!("tantivy cannot open the commit: {e}")))?;
    schema::register(&index);
    let fields = Fields::of(&index.schema()).map_err(|e| corrupt(id, format!("schema mismatch: {e}")))?;
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(|e| corrupt(id, format!("tantivy cannot read the commit: {e}")))?;
    let manifest_modified = std::fs::metadata(manifest_path(root, id)).and_then(|m| m.modified()).ok();
    let generation = Arc::new(OpenGeneration::new(key.clone(), manifest, index, reader, fields, manifest_modified, None));
    lock(&LIVE).push((key, id.to_string(), Arc::downgrade(&generation)));
    Ok(generation)
}

/// The generation readers should use: the one `ACTIVE` names (verified once per process and
/// cached; if it cannot be verified, the newest verifiable older generation, with the reason),
/// plus the journal's tail of committed writes after it, built in memory (`search::tail`).
pub fn acquire(root: &Path, policy: &LoadedPolicy) -> Result<Acquired> {
    crate::store::nofollow::refuse_symlinked_state(root)?;
    let key = root_key(root);
    for _ in 0..8 {
        let active =
            read_active(root)?.ok_or_else(|| Error::NoActiveGeneration { reason: "the vault has never been synced; run sync".into() })?;
        let stamp = JournalStamp::read(root)?;
        if let Some(current) = lock(&CURRENT).get(&key)
            && current.active_id == active
            && current.journal == stamp
        {
            return Ok(current.acquired.clone());
        }
        let base = acquire_published(root, &active)?;
        let journal = match stamp {
            Some(_) if tail::servable(&base.generation.manifest) => journal::read_committed(root)?,
            _ => None,
        };
        // `ACTIVE` moves before a fold empties the journal: if it did not move, the journal
        // read above still held every intent after the generation it names.
        if read_active(root)?.as_deref() != Some(active.as_str()) {
            continue;
        }
        let (journal_stamp, records) = journal.map_or((stamp, Vec::new()), |(s, r)| (Some(s), r));
        let intents = tail::intents_after(&records, base.generation.manifest.covers_seq);
        let acquired = if intents.is_empty() {
            base
        } else {
            Acquired { generation: tail::open(root, policy, base.generation, &intents)?, fallback_reason: base.fallback_reason }
        };
        lock(&CURRENT).insert(key, Current { active_id: active, journal: journal_stamp, acquired: acquired.clone() });
        return Ok(acquired);
    }
    Err(Error::SearchIndex { action: "opening the active generation", reason: "ACTIVE kept moving while it was read; retry".into() })
}

/// The on-disk generation `active` names, or the newest verifiable older one.
fn acquire_published(root: &Path, active: &str) -> Result<Acquired> {
    match open_generation(root, active) {
        Ok(generation) => Ok(Acquired { generation, fallback_reason: None }),
        Err(error) => {
            for candidate in older_generations(root, active) {
                if let Ok(generation) = open_generation(root, &candidate) {
                    return Ok(Acquired {
                        fallback_reason: Some(format!("active_generation_unverifiable: {error}; serving previous generation {candidate}")),
                        generation,
                    });
                }
            }
            Err(error)
        }
    }
}

/// Other manifests, newest first (by creation time, then id).
fn older_generations(root: &Path, except: &str) -> Vec<String> {
    let mut found: Vec<(String, String)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(generations_dir(root)) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if let Some(id) = name.strip_suffix(".json")
                && valid_id(id)
                && id != except
                && let Ok(m) = read_manifest(root, id)
            {
                found.push((m.created_at, id.to_string()));
            }
        }
    }
    found.sort();
    found.into_iter().rev().map(|(_, id)| id).collect()
}

/// Forgets the cached reader state of a vault (after a publish, or in tests).
pub fn forget_cached(root: &Path) {
    lock(&CURRENT).remove(&root_key(root));
}

/// Ids of generations some in-process reader holds.
pub fn held_generations(root: &Path) -> BTreeSet<String> {
    let key = root_key(root);
    let mut live = lock(&LIVE);
    live.retain(|(_, _, w)| w.strong_count() > 0);
    live.iter().filter(|(r, _, _)| *r == key).map(|(_, id, _)| id.clone()).collect()
}

fn new_generation_id(parent: Option<&str>, snapshot: &str) -> (String, String) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = chrono::Utc::now();
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
            let threads = if doc_count > 2000 { std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 2) } else { 1 };
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
pub fn collect_garbage(root: &Path, active: &str, kept: usize) -> Result<(usize, usize)> {
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
        removed_files += dense::collect_garbage(root, &keep_arenas)?;
    }
    Ok((removed_generations, removed_files))
}
