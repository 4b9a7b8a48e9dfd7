//! Immutable search generations as readers see them: the manifest format, verifying and opening
//! a generation, `acquire` (`ACTIVE` plus the journal's tail) and the process-global reader
//! registries (every opened generation, held weakly, which the building side's GC spares; the
//! per-vault cache of the acquired one). Publishing and GC are `search::build::publish`.
//!
//! Mechanism (chosen after reading tantivy 0.27's `Index::open`, `ManagedDirectory` and
//! `SegmentUpdater`): there is ONE tantivy index (`.paravault/search/index/`). Every tantivy
//! commit writes new immutable segment files and a `meta.json` naming the live segments. A
//! *generation* is one such commit: its manifest (`generations/<id>.json`) keeps a verbatim
//! copy of that commit's `meta.json`, its blake3, and every segment file with its size.
//!
//! - Tantivy's own garbage collector would delete the files of older commits after each commit
//!   or merge. The index lives in a `store::tantivy_dir::RetainingDirectory`, whose `delete` is a
//!   no-op for everything but lock files, so tantivy never removes a segment file; the
//!   building side's GC removes files that no retained generation references.
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
use tantivy::{Index, IndexReader, ReloadPolicy};

use super::dense::{DenseManifest, DenseView};
use super::tail;
use super::temporal::{Statuses, TemporalTable};
use crate::error::{Error, Result};
use crate::inventory::NoteRecord;
use crate::policy::LoadedPolicy;
use crate::search::schema::{self, Fields};
use crate::store::beneath::Folder;
use crate::store::journal::{self, JournalStamp};
use crate::store::tantivy_dir::RetainingDirectory;
use crate::store::{durable, layout};

/// Version of the manifest format.
pub(crate) const MANIFEST_SCHEMA_VERSION: u32 = 1;

/// The notes a generation was built from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    /// Notes read.
    pub scanned: usize,
    /// Notes indexed.
    pub indexed: usize,
    /// Notes left out (see the exclusions).
    pub excluded: usize,
}

/// A note left out of a generation, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Exclusion {
    /// The note's vault-relative path.
    pub path: String,
    /// Why it was left out.
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
    /// The tantivy index and reader: opened with the generation, or for a tail generation
    /// built in memory on first use (`search::read::tail`: the common searches do without).
    tantivy: OnceLock<std::result::Result<(Index, IndexReader), String>>,
    pub fields: Fields,
    pub manifest_modified: Option<SystemTime>,
    /// The tantivy directory the index reads (an overlay on it serves a tail generation with
    /// this one's files as already mapped).
    pub(crate) directory: RetainingDirectory,
    pub(crate) temporal: OnceLock<TemporalTable>,
    /// The temporal table's statuses at the date last asked (every search asks for one; most
    /// ask for today), so a search does not walk every memory note again.
    pub(crate) statuses: Mutex<Option<(chrono::NaiveDate, Statuses)>>,
    /// Note entries already read from this (immutable) generation, by path.
    pub(crate) note_entries: Mutex<HashMap<String, Option<Arc<schema::NoteEntry>>>>,
    dense_view: OnceLock<std::result::Result<Arc<DenseView>, String>>,
    /// For a generation served from the journal's tail: the on-disk generation under it (held so
    /// that GC keeps its files while this one is in use) and what the tail changed.
    pub(crate) tail_of: Option<TailOf>,
}

/// What a tail generation is built on: the on-disk generation under it, and the paths of every
/// note the tail touches (written, removed, or made invalid). Whatever a generation derives
/// only from notes (the temporal table) is the base's with these notes' changes.
pub(crate) struct TailOf {
    pub(crate) base: Arc<OpenGeneration>,
    pub(crate) touched: Arc<BTreeSet<String>>,
    /// The tail's documents as a segment over the base's (`search::read::tail::Overlay`).
    pub(crate) overlay: tail::Overlay,
}

impl std::fmt::Debug for OpenGeneration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenGeneration").field("generation_id", &self.manifest.generation_id).finish()
    }
}

impl OpenGeneration {
    #[allow(clippy::too_many_arguments)] // each is one part of what a generation is opened from
    pub(crate) fn new(
        root: PathBuf,
        manifest: Manifest,
        tantivy: Option<(Index, IndexReader)>,
        fields: Fields,
        manifest_modified: Option<SystemTime>,
        directory: RetainingDirectory,
        tail_of: Option<TailOf>,
    ) -> Self {
        let opened = OnceLock::new();
        if let Some(tantivy) = tantivy {
            let _ = opened.set(Ok(tantivy));
        }
        OpenGeneration {
            root,
            manifest,
            tantivy: opened,
            fields,
            manifest_modified,
            directory,
            temporal: OnceLock::new(),
            statuses: Mutex::new(None),
            note_entries: Mutex::new(HashMap::new()),
            dense_view: OnceLock::new(),
            tail_of,
        }
    }

    pub fn id(&self) -> &str {
        &self.manifest.generation_id
    }

    /// The generation's tantivy index and reader (a tail generation's are built on first use).
    fn tantivy(&self) -> Result<&(Index, IndexReader)> {
        let opened = self.tantivy.get_or_init(|| match &self.tail_of {
            Some(tail) => tail.segment(self).map_err(|e| e.to_string()),
            None => Err("the generation has no tantivy index".to_string()),
        });
        opened.as_ref().map_err(|reason| corrupt(self.id(), reason.clone()))
    }

    /// The generation's tantivy index.
    pub fn index(&self) -> Result<&Index> {
        self.tantivy().map(|(index, _)| index)
    }

    /// A searcher over the generation's tantivy index.
    pub fn searcher(&self) -> Result<tantivy::Searcher> {
        self.tantivy().map(|(_, reader)| reader.searcher())
    }

    /// The generation's dense index, loaded and verified on first use (`None`: it has none).
    pub(crate) fn dense(&self) -> Result<Option<Arc<DenseView>>> {
        let Some(manifest) = &self.manifest.dense else { return Ok(None) };
        let view = self.dense_view.get_or_init(|| {
            self.searcher().and_then(|s| DenseView::build(&self.root, manifest, &s)).map(Arc::new).map_err(|e| e.to_string())
        });
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
    /// What the tail generation served (if any) was built from: the next one builds on it.
    tail: Option<tail::Memo>,
    /// Where the last read of the journal ended, and every record it held: the next read
    /// starts there (`journal::read_committed_since`).
    journal_read: Option<(journal::JournalCursor, Vec<journal::StoredRecord>)>,
}

/// (vault root, generation id, reader handle) of every generation opened in this process.
type LiveRegistry = Vec<(PathBuf, String, Weak<OpenGeneration>)>;

static LIVE: LazyLock<Mutex<LiveRegistry>> = LazyLock::new(|| Mutex::new(Vec::new()));
static CURRENT: LazyLock<Mutex<HashMap<PathBuf, Current>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// One build of a vault's reader state at a time, per root: a reader that finds a build under
/// way (another reader's, or the warm-up after a write: `VaultState::prepare_search`) waits for
/// it and takes what it built instead of building the same generation again beside it.
static BUILDING: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn tantivy_err(action: &'static str) -> impl Fn(tantivy::TantivyError) -> Error {
    move |e| Error::SearchIndex { action, reason: e.to_string() }
}

fn corrupt(id: &str, reason: impl Into<String>) -> Error {
    Error::GenerationCorrupt { generation_id: id.to_string(), reason: reason.into() }
}

/// The canonical key of a vault root.
pub(crate) fn root_key(root: &Path) -> PathBuf {
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

pub(crate) fn index_dir(root: &Path) -> PathBuf {
    layout::join(root, layout::SEARCH_INDEX_DIR)
}

pub(crate) fn generations_dir(root: &Path) -> PathBuf {
    layout::join(root, layout::SEARCH_GENERATIONS_DIR)
}

pub(crate) fn manifest_path(root: &Path, id: &str) -> PathBuf {
    generations_dir(root).join(format!("{id}.json"))
}

pub(crate) fn valid_id(id: &str) -> bool {
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
pub(crate) fn parse_meta(id: &str, meta: &str) -> Result<(u64, BTreeMap<String, Option<u64>>)> {
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
pub(crate) fn open_generation(root: &Path, id: &str) -> Result<Arc<OpenGeneration>> {
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
    let index = Index::open(directory.clone()).map_err(|e| corrupt(id, format!("tantivy cannot open the commit: {e}")))?;
    schema::register(&index);
    let fields = Fields::of(&index.schema()).map_err(|e| corrupt(id, format!("schema mismatch: {e}")))?;
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(|e| corrupt(id, format!("tantivy cannot read the commit: {e}")))?;
    let manifest_modified = std::fs::metadata(manifest_path(root, id)).and_then(|m| m.modified()).ok();
    let generation =
        Arc::new(OpenGeneration::new(key.clone(), manifest, Some((index, reader)), fields, manifest_modified, directory, None));
    lock(&LIVE).push((key, id.to_string(), Arc::downgrade(&generation)));
    Ok(generation)
}

/// The generation readers should use: the one `ACTIVE` names (verified once per process and
/// cached; if it cannot be verified, the newest verifiable older generation, with the reason),
/// plus the journal's tail of committed writes after it, built in memory (`search::tail`).
pub fn acquire(root: &Path, policy: &LoadedPolicy) -> Result<Acquired> {
    crate::store::nofollow::refuse_symlinked_state(root)?;
    let key = root_key(root);
    if let Some(current) = current_if_fresh(root, &key)? {
        return Ok(current);
    }
    let gate = lock(&BUILDING).entry(key.clone()).or_default().clone();
    let _building = lock(&gate);
    build(root, policy, key)
}

/// What the last build of `key` acquired, if the disk still names its generation and journal.
fn current_if_fresh(root: &Path, key: &Path) -> Result<Option<Acquired>> {
    let Some(active) = read_active(root)? else { return Ok(None) };
    let stamp = JournalStamp::read(root)?;
    Ok(lock(&CURRENT).get(key).filter(|c| c.active_id == active && c.journal == stamp).map(|c| c.acquired.clone()))
}

/// `acquire`'s build, under the root's gate: the first check again (a build that finished while
/// this one waited is taken as it is), then the published generation and the journal's tail.
fn build(root: &Path, policy: &LoadedPolicy, key: PathBuf) -> Result<Acquired> {
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
            Some(_) if tail::servable(&base.generation.manifest) => {
                let known = lock(&CURRENT).get_mut(&key).and_then(|c| c.journal_read.take());
                read_journal(root, known)?
            }
            _ => None,
        };
        // `ACTIVE` moves before a fold empties the journal: if it did not move, the journal
        // read above still held every intent after the generation it names.
        if read_active(root)?.as_deref() != Some(active.as_str()) {
            continue;
        }
        let (journal_stamp, cursor, records) = journal.map_or((stamp, None, Vec::new()), |(s, c, r)| (Some(s), Some(c), r));
        let previous = lock(&CURRENT).get(&key).and_then(|c| c.tail.clone());
        let memo = tail::serve(root, policy, base.generation.clone(), &records, previous.as_ref())?;
        let acquired = match &memo {
            Some(memo) => {
                tracing::debug!(generation = memo.generation.id(), intents_decoded = memo.decoded, "search tail generation");
                Acquired { generation: memo.generation.clone(), fallback_reason: base.fallback_reason }
            }
            None => base,
        };
        let journal_read = cursor.map(|c| (c, records));
        lock(&CURRENT)
            .insert(key, Current { active_id: active, journal: journal_stamp, acquired: acquired.clone(), tail: memo, journal_read });
        return Ok(acquired);
    }
    Err(Error::SearchIndex { action: "opening the active generation", reason: "ACTIVE kept moving while it was read; retry".into() })
}

/// The journal's intact records and the stamp and cursor of the read, read from where the last
/// read (`known`: its cursor and records) ended: the same records a whole read gives
/// (`journal::read_committed_since`). `None`: no journal.
fn read_journal(
    root: &Path,
    known: Option<(journal::JournalCursor, Vec<journal::StoredRecord>)>,
) -> Result<Option<(JournalStamp, journal::JournalCursor, Vec<journal::StoredRecord>)>> {
    let (cursor, mut records) = known.map_or((None, Vec::new()), |(c, r)| (Some(c), r));
    let Some(read) = journal::read_committed_since(root, cursor.as_ref())? else { return Ok(None) };
    if read.whole {
        records.clear();
    }
    records.extend(read.records);
    Ok(Some((read.stamp, read.cursor, records)))
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
pub(crate) fn forget_cached(root: &Path) {
    lock(&CURRENT).remove(&root_key(root));
}

/// Ids of generations some in-process reader holds.
pub(crate) fn held_generations(root: &Path) -> BTreeSet<String> {
    let key = root_key(root);
    let mut live = lock(&LIVE);
    live.retain(|(_, _, w)| w.strong_count() > 0);
    live.iter().filter(|(r, _, _)| *r == key).map(|(_, id, _)| id.clone()).collect()
}

/// How a manifest names a note it does not index (unreadable, or invalid metadata).
pub(crate) fn exclusion_of(record: &NoteRecord) -> Exclusion {
    let read_error = record.problems.iter().any(|p| matches!(p.rule, "note-unreadable" | "note-too-large"));
    let kind = if read_error { "read_error" } else { "invalid_metadata" };
    let detail: Vec<String> = record.problems.iter().map(|p| format!("{}: {}", p.rule, p.message)).collect();
    Exclusion { path: record.path.as_str().to_string(), reason: format!("{kind}: {}", detail.join("; ")) }
}
