//! Dense vectors of search generations: an append-only, per-row-checksummed vector arena shared
//! by the generations built with one model, and the exact (brute-force, SIMD) scan over it.
//!
//! Files (under `.paravault/search/dense/`): `<arena>.vec` holds rows of `dimension` little-endian
//! f32; `<arena>.keys` holds one 48-byte record per row: the 32-byte content key (blake3 of model
//! identity and embedded text) and the first 16 bytes of blake3 over the row's vector bytes.
//! A generation's manifest names the arena and how many rows it covers. Rows are never rewritten
//! once a published generation may reference them; a writer only cuts a torn tail (rows whose
//! checksum fails), so every reader's cached prefix stays true. Chunk documents carry their row
//! in the `vec_row` fast field; a row can serve many documents (identical text, unchanged notes).
//!
//! This is the reading half (the arena as read and verified, the scan); appending rows and the
//! arena's GC are `search::build::arena`.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tantivy::{DocAddress, Searcher};

use crate::embed::{ModelHandle, ModelId};
use crate::error::{Error, Result};
use crate::store::{durable, layout};

/// Bytes of one key record: content key + row checksum.
pub(crate) const KEY_RECORD: usize = 48;

/// What a generation records about its dense vectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DenseManifest {
    /// The model that made the vectors.
    pub model: ModelId,
    /// The token cut each chunk was embedded with.
    pub max_tokens: usize,
    /// Arena file stem under `.paravault/search/dense/`.
    pub arena: String,
    /// Rows of the arena this generation may reference (a prefix).
    pub rows: u64,
    /// Chunk documents with a vector.
    pub chunks: u64,
    /// Notes whose chunks (some or all) have no vector yet, sorted: written while the embedding
    /// model was unavailable, or already there when a write started the dense index. The next
    /// `sync --dense` embeds them, and each write that has the model up to `OWED_PER_WRITE` of
    /// them; until then semantic results cannot include them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owed: Vec<String>,
}

pub(crate) fn dense_dir(root: &Path) -> PathBuf {
    layout::join(root, layout::SEARCH_DENSE_DIR)
}

pub(crate) fn vec_path(root: &Path, arena: &str) -> PathBuf {
    dense_dir(root).join(format!("{arena}.vec"))
}

pub(crate) fn keys_path(root: &Path, arena: &str) -> PathBuf {
    dense_dir(root).join(format!("{arena}.keys"))
}

pub(crate) fn valid_arena_id(id: &str) -> bool {
    id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The content key of a text embedded by `model` with a `max_tokens` cut. A precision other
/// than f32 is part of it (f32 keys are those made before precisions existed), so no row made
/// at one precision is ever found for another.
pub fn content_key(model: &ModelId, max_tokens: usize, text: &str) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(model.repo.as_bytes());
    h.update(b"@");
    h.update(model.revision.as_bytes());
    if !model.precision.is_f32() {
        h.update(b"#");
        h.update(model.precision.as_str().as_bytes());
    }
    h.update(&(max_tokens as u64).to_le_bytes());
    h.update(b"\0");
    h.update(text.as_bytes());
    *h.finalize().as_bytes()
}

pub(crate) fn row_checksum(bytes: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&blake3::hash(bytes).as_bytes()[..16]);
    out
}

/// The text a chunk is embedded from: its note's title and description, its section, its text.
pub(crate) fn embed_text(title: &str, description: &str, section: &str, text: &str) -> String {
    let mut out = String::with_capacity(title.len() + description.len() + section.len() + text.len() + 3);
    for part in [title, description, section, text] {
        let part = part.trim();
        if !part.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(part);
        }
    }
    out
}

pub(crate) fn corrupt(arena: &str, reason: impl Into<String>) -> Error {
    Error::GenerationCorrupt { generation_id: format!("dense arena {arena}"), reason: reason.into() }
}

/// Reads `len` bytes at `offset` of the arena file `path`, opened through its folder's handle
/// beneath `root` (never through a link).
pub(crate) fn read_range(root: &Path, path: &Path, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut file = durable::open_engine_read(root, path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut out = vec![0u8; len as usize];
    file.read_exact(&mut out)?;
    Ok(out)
}

/// Verified vectors of an arena prefix, in memory.
#[derive(Debug)]
pub(crate) struct ArenaData {
    pub rows: u64,
    pub dimension: usize,
    pub data: Vec<f32>,
}

impl ArenaData {
    pub(crate) fn row(&self, row: u64) -> &[f32] {
        let start = row as usize * self.dimension;
        &self.data[start..start + self.dimension]
    }
}

type ArenaCache = HashMap<(PathBuf, String), Arc<ArenaData>>;
static ARENAS: LazyLock<Mutex<ArenaCache>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Loads rows `[0, rows)` of an arena, verifying every row's checksum once per process; a
/// longer prefix extends the cached one by reading only the new rows (rows never change).
pub(crate) fn load_arena(root: &Path, arena: &str, dimension: usize, rows: u64) -> Result<Arc<ArenaData>> {
    if !valid_arena_id(arena) {
        return Err(corrupt(arena, "invalid arena name"));
    }
    let key = (super::generation::root_key(root), arena.to_string());
    let cached = ARENAS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned();
    if let Some(c) = &cached
        && c.rows >= rows
        && c.dimension == dimension
    {
        return Ok(c.clone());
    }
    let from = cached.as_ref().filter(|c| c.dimension == dimension).map_or(0, |c| c.rows);
    let row_bytes = dimension * 4;
    let (vp, kp) = (vec_path(root, arena), keys_path(root, arena));
    let count = rows - from;
    let vectors = read_range(root, &vp, from * row_bytes as u64, count * row_bytes as u64)
        .map_err(|e| corrupt(arena, format!("vector rows {from}..{rows} unreadable: {}", e.kind())))?;
    let keys = read_range(root, &kp, from * KEY_RECORD as u64, count * KEY_RECORD as u64)
        .map_err(|e| corrupt(arena, format!("key rows {from}..{rows} unreadable: {}", e.kind())))?;
    let bad =
        vectors.par_chunks(row_bytes).zip(keys.par_chunks(KEY_RECORD)).position_any(|(row, record)| record[32..] != row_checksum(row));
    if let Some(i) = bad {
        return Err(corrupt(arena, format!("row {} fails its checksum", from + i as u64)));
    }
    let mut data = Vec::with_capacity(rows as usize * dimension);
    if let Some(c) = cached.as_ref().filter(|c| c.dimension == dimension) {
        data.extend_from_slice(&c.data);
    }
    data.extend(vectors.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
    let loaded = Arc::new(ArenaData { rows, dimension, data });
    ARENAS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, loaded.clone());
    Ok(loaded)
}

/// One chunk document with a vector.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DenseEntry {
    pub row: u32,
    pub note_key: u64,
    pub doc: DocAddress,
}

/// A generation's dense index, ready to scan: the live chunks, and their vectors quantised to
/// int8 (one scale per row) in entry order, so the first pass streams 384 bytes per chunk
/// sequentially instead of gathering 1.5 KiB f32 rows; the best candidates are then rescored
/// exactly in f32.
#[derive(Debug)]
pub(crate) struct DenseView {
    pub manifest: DenseManifest,
    pub arena: Arc<ArenaData>,
    pub entries: Vec<DenseEntry>,
    quantized: Vec<i8>,
    scales: Vec<f32>,
}

/// Symmetric int8 quantisation of one vector: (values, scale) with x ≈ value × scale.
fn quantize(vector: &[f32]) -> (Vec<i8>, f32) {
    let max = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = max / 127.0;
    (vector.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect(), scale)
}

/// Integer dot product with sixteen independent accumulators (vectorises under `pulp`).
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..16 {
            acc[k] += i32::from(x[k]) * i32::from(y[k]);
        }
    }
    acc.iter().sum::<i32>() + tail
}

impl DenseView {
    /// Reads the `vec_row` and `note_key` fast fields of every live chunk document.
    pub(crate) fn build(root: &Path, manifest: &DenseManifest, searcher: &Searcher) -> Result<DenseView> {
        let arena = load_arena(root, &manifest.arena, manifest.model.dimension, manifest.rows)?;
        let mut entries = Vec::new();
        for (segment_ord, reader) in searcher.segment_readers().iter().enumerate() {
            let fast = reader.fast_fields();
            let column_err = |e: tantivy::TantivyError| corrupt(&manifest.arena, format!("fast field unreadable: {e}"));
            let rows = fast.u64("vec_row").map_err(column_err)?;
            let notes = fast.u64("note_key").map_err(column_err)?;
            let alive = reader.alive_bitset();
            for doc in 0..reader.max_doc() {
                if alive.is_some_and(|a| !a.is_alive(doc)) {
                    continue;
                }
                let Some(row) = rows.first(doc) else { continue };
                if row >= manifest.rows {
                    return Err(corrupt(&manifest.arena, format!("a document references row {row} beyond {}", manifest.rows)));
                }
                let note_key = notes.first(doc).unwrap_or_default();
                entries.push(DenseEntry { row: row as u32, note_key, doc: DocAddress::new(segment_ord as u32, doc) });
            }
        }
        let dim = manifest.model.dimension;
        let parts: Vec<(Vec<i8>, f32)> = entries.par_iter().map(|e| quantize(arena.row(u64::from(e.row)))).collect();
        let mut quantized = Vec::with_capacity(entries.len() * dim);
        let mut scales = Vec::with_capacity(entries.len());
        for (values, scale) in parts {
            quantized.extend_from_slice(&values);
            scales.push(scale);
        }
        Ok(DenseView { manifest: manifest.clone(), arena, entries, quantized, scales })
    }

    /// Approximate cosines of every entry (int8 × int8), in entry order.
    pub(crate) fn approximate_scores(&self, query: &[f32]) -> Vec<f32> {
        let dim = self.arena.dimension;
        let (q, q_scale) = quantize(query);
        let arch = pulp::Arch::new();
        const BLOCK: usize = 2048;
        self.quantized
            .par_chunks(BLOCK * dim)
            .zip(self.scales.par_chunks(BLOCK))
            .flat_map_iter(|(rows, scales)| {
                arch.dispatch(|| {
                    rows.chunks_exact(dim).zip(scales).map(|(row, s)| dot_i8(&q, row) as f32 * s * q_scale).collect::<Vec<f32>>()
                })
            })
            .collect()
    }

    /// The exact cosine of one entry (f32).
    pub(crate) fn exact_score(&self, query: &[f32], entry: &DenseEntry) -> f32 {
        pulp::Arch::new().dispatch(|| dot(query, self.arena.row(u64::from(entry.row))))
    }

    /// Notes ranked by their best chunk (max aggregation), best first, at most `n` accepted by
    /// `keep`: (note key, score, best entry).
    pub(crate) fn top_notes(&self, query: &[f32], n: usize, keep: &mut dyn FnMut(&DenseEntry) -> bool) -> Vec<(f32, DenseEntry)> {
        let approx = self.approximate_scores(query);
        let mut order: Vec<u32> = (0..approx.len() as u32).collect();
        // The int8 pass only shortlists: a generous shortlist is rescored exactly in f32, so a
        // chunk is missed only if quantisation error pushes it below hundreds of others.
        let mut depth = (n * 8).max(256).min(order.len());
        loop {
            if depth < order.len() {
                order.select_nth_unstable_by(depth, |a, b| approx[*b as usize].total_cmp(&approx[*a as usize]));
            }
            let mut head: Vec<(f32, u32)> =
                order[..depth].par_iter().map(|&i| (self.exact_score(query, &self.entries[i as usize]), i)).collect();
            head.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            for (score, i) in head {
                let entry = self.entries[i as usize];
                if !seen.insert(entry.note_key) {
                    continue;
                }
                if keep(&entry) {
                    out.push((score, entry));
                    if out.len() == n {
                        return out;
                    }
                }
            }
            if depth >= order.len() {
                return out;
            }
            depth = (depth * 4).min(order.len());
        }
    }

    /// Every note's centre (mean of its chunk vectors, normalised), in one pass.
    pub(crate) fn note_vectors(&self) -> HashMap<u64, Vec<f32>> {
        let dim = self.arena.dimension;
        let mut sums: HashMap<u64, (Vec<f32>, usize)> = HashMap::new();
        for e in &self.entries {
            let (sum, n) = sums.entry(e.note_key).or_insert_with(|| (vec![0f32; dim], 0));
            for (s, x) in sum.iter_mut().zip(self.arena.row(u64::from(e.row))) {
                *s += x;
            }
            *n += 1;
        }
        sums.into_iter()
            .map(|(key, (sum, _))| {
                let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                (key, sum.into_iter().map(|x| x / norm).collect())
            })
            .collect()
    }

    /// The mean of a note's chunk vectors, normalised (its semantic centre).
    pub(crate) fn note_vector(&self, note_key: u64) -> Option<Vec<f32>> {
        let dim = self.arena.dimension;
        let mut sum = vec![0f32; dim];
        let mut n = 0;
        for e in self.entries.iter().filter(|e| e.note_key == note_key) {
            for (s, x) in sum.iter_mut().zip(self.arena.row(u64::from(e.row))) {
                *s += x;
            }
            n += 1;
        }
        if n == 0 {
            return None;
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        Some(sum.into_iter().map(|x| x / norm).collect())
    }
}

/// Dot product with eight independent accumulators (vectorises; dispatched with the CPU's
/// widest SIMD by `pulp`).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    acc.iter().sum::<f32>() + tail
}

/// A stable 64-bit key for a note path (first 8 bytes of its blake3).
pub fn note_key(path: &str) -> u64 {
    let h = blake3::hash(path.as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap_or([0; 8]))
}

pub(crate) fn model_mismatch(d: &DenseManifest, handle: &ModelHandle, max_tokens: usize) -> Option<String> {
    (d.model != *handle.id() || d.max_tokens != max_tokens).then(|| {
        format!("the dense index was built with {} (cut {}), the policy names {} (cut {})", d.model, d.max_tokens, handle.id(), max_tokens)
    })
}
