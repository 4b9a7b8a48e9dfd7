//! Appending to a dense vector arena (under the writer lock; rows are never rewritten once a
//! published generation may reference them, only a torn tail is cut), the marker of an
//! interrupted full build, and the arenas' garbage collection. The format is `search::read::dense`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::search::read::dense::{KEY_RECORD, corrupt, dense_dir, keys_path, read_range, row_checksum, valid_arena_id, vec_path};
use crate::store::{durable, layout};

/// File that names the arena a full dense build is filling (spared by GC, resumed by sync).
const BUILDING_FILE: &str = "BUILDING";

fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn io_err(root: &Path, path: &Path, action: &'static str) -> impl Fn(std::io::Error) -> Error {
    let rel = path.strip_prefix(root).map_or_else(|_| path.display().to_string(), |p| p.display().to_string());
    move |e| Error::io(action, rel.clone(), e)
}

/// Appends vectors to an arena under the writer lock.
pub struct ArenaWriter {
    root: PathBuf,
    arena: String,
    dimension: usize,
    rows: u64,
    keys: HashMap<[u8; 32], u64>,
    /// Defer fsyncs to the transaction's checkpoint (paths collected here); `None` = durable
    /// after every append.
    deferred: Option<Arc<Mutex<Vec<PathBuf>>>>,
}

impl ArenaWriter {
    /// A new, empty arena.
    pub fn create(root: &Path, dimension: usize, deferred: Option<Arc<Mutex<Vec<PathBuf>>>>) -> Result<Self> {
        let dir = dense_dir(root);
        durable::create_dir_all(root, &dir)?;
        let arena = crate::hex::random(12);
        let writer = ArenaWriter { root: root.to_path_buf(), arena, dimension, rows: 0, keys: HashMap::new(), deferred };
        durable::truncate_and_append_unsynced(root, &writer.vec_path(), 0, &[])?;
        durable::truncate_and_append_unsynced(root, &writer.keys_path(), 0, &[])?;
        writer.make_durable(true)?;
        Ok(writer)
    }

    /// Reopens `arena` for appending: rows up to `published_rows` are trusted (readers verify
    /// them); later rows (left by an aborted or interrupted publish) are kept while their
    /// checksums hold and reused by key; a torn tail is cut. With `load_keys`, every row's key
    /// is loaded for reuse (a full sync); otherwise only the rows after `published_rows`.
    pub fn open(
        root: &Path,
        arena: &str,
        dimension: usize,
        published_rows: u64,
        load_keys: bool,
        deferred: Option<Arc<Mutex<Vec<PathBuf>>>>,
    ) -> Result<Self> {
        if !valid_arena_id(arena) {
            return Err(corrupt(arena, "invalid arena name"));
        }
        let mut writer =
            ArenaWriter { root: root.to_path_buf(), arena: arena.to_string(), dimension, rows: 0, keys: HashMap::new(), deferred };
        let row_bytes = (dimension * 4) as u64;
        let (vec_path, keys_path) = (writer.vec_path(), writer.keys_path());
        let vec_len = std::fs::metadata(&vec_path).map_err(io_err(root, &vec_path, "reading"))?.len();
        let keys_len = std::fs::metadata(&keys_path).map_err(io_err(root, &keys_path, "reading"))?.len();
        let present = (vec_len / row_bytes).min(keys_len / KEY_RECORD as u64);
        if present < published_rows {
            return Err(corrupt(arena, format!("holds {present} complete rows, a published generation needs {published_rows}")));
        }
        let first_key_row = if load_keys { 0 } else { published_rows };
        let keys = read_range(root, &keys_path, first_key_row * KEY_RECORD as u64, (present - first_key_row) * KEY_RECORD as u64)
            .map_err(io_err(root, &keys_path, "reading"))?;
        let tail = read_range(root, &vec_path, published_rows * row_bytes, (present - published_rows) * row_bytes)
            .map_err(io_err(root, &vec_path, "reading"))?;
        let mut valid = present;
        for (i, row) in tail.chunks_exact(row_bytes as usize).enumerate() {
            let at = published_rows + i as u64;
            let record = &keys[((at - first_key_row) as usize) * KEY_RECORD..][..KEY_RECORD];
            if record[32..] != row_checksum(row) {
                valid = at;
                break;
            }
        }
        for (i, record) in keys.chunks_exact(KEY_RECORD).take((valid - first_key_row) as usize).enumerate() {
            let mut key = [0u8; 32];
            key.copy_from_slice(&record[..32]);
            writer.keys.entry(key).or_insert(first_key_row + i as u64);
        }
        writer.rows = valid;
        if valid * row_bytes != vec_len || valid * KEY_RECORD as u64 != keys_len {
            // Cut the torn tail; no published generation references it.
            durable::truncate_and_append_unsynced(root, &vec_path, valid * row_bytes, &[])?;
            durable::truncate_and_append_unsynced(root, &keys_path, valid * KEY_RECORD as u64, &[])?;
            writer.make_durable(false)?;
        }
        Ok(writer)
    }

    /// Reopens `arena` to append after its last complete row, without reading any key or
    /// checking any row (a dense sync's staging, under the writer lock for one append): a torn
    /// partial row is cut (no generation references it). Rows appended this way are checked,
    /// and reused by key, by the next `open` of a sync or write.
    pub fn open_at_end(root: &Path, arena: &str, dimension: usize) -> Result<Self> {
        if !valid_arena_id(arena) {
            return Err(corrupt(arena, "invalid arena name"));
        }
        let mut writer =
            ArenaWriter { root: root.to_path_buf(), arena: arena.to_string(), dimension, rows: 0, keys: HashMap::new(), deferred: None };
        let row_bytes = (dimension * 4) as u64;
        let (vec_path, keys_path) = (writer.vec_path(), writer.keys_path());
        let vec_len = std::fs::metadata(&vec_path).map_err(io_err(root, &vec_path, "reading"))?.len();
        let keys_len = std::fs::metadata(&keys_path).map_err(io_err(root, &keys_path, "reading"))?.len();
        writer.rows = (vec_len / row_bytes).min(keys_len / KEY_RECORD as u64);
        if writer.rows * row_bytes != vec_len || writer.rows * KEY_RECORD as u64 != keys_len {
            durable::truncate_and_append_unsynced(root, &vec_path, writer.rows * row_bytes, &[])?;
            durable::truncate_and_append_unsynced(root, &keys_path, writer.rows * KEY_RECORD as u64, &[])?;
            writer.make_durable(false)?;
        }
        Ok(writer)
    }

    /// The content keys of the rows this writer knows (every row after a full `open`).
    pub fn known_keys(&self) -> impl Iterator<Item = &[u8; 32]> {
        self.keys.keys()
    }

    fn vec_path(&self) -> PathBuf {
        vec_path(&self.root, &self.arena)
    }

    fn keys_path(&self) -> PathBuf {
        keys_path(&self.root, &self.arena)
    }

    pub fn arena(&self) -> &str {
        &self.arena
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The row already holding `key`, if any.
    pub fn row_of(&self, key: &[u8; 32]) -> Option<u64> {
        self.keys.get(key).copied()
    }

    /// Learns the key of an existing row (so a note's unchanged chunks reuse their vectors).
    pub fn remember(&mut self, key: [u8; 32], row: u64) {
        if row < self.rows {
            self.keys.entry(key).or_insert(row);
        }
    }

    /// The stored key of `row` (reads 32 bytes).
    pub fn key_at(&self, row: u64) -> Result<[u8; 32]> {
        let path = self.keys_path();
        let bytes = read_range(&self.root, &path, row * KEY_RECORD as u64, 32).map_err(io_err(&self.root, &path, "reading"))?;
        let mut key = [0u8; 32];
        key.copy_from_slice(&bytes);
        Ok(key)
    }

    /// Appends vectors with their keys; returns their rows.
    pub fn append(&mut self, entries: &[([u8; 32], &[f32])]) -> Result<Vec<u64>> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut vec_bytes = Vec::with_capacity(entries.len() * self.dimension * 4);
        let mut key_bytes = Vec::with_capacity(entries.len() * KEY_RECORD);
        for (key, vector) in entries {
            if vector.len() != self.dimension {
                return Err(Error::EmbeddingFailed {
                    reason: format!("a vector of width {} for a {}-d arena", vector.len(), self.dimension),
                });
            }
            let bytes = vector_bytes(vector);
            key_bytes.extend_from_slice(key);
            key_bytes.extend_from_slice(&row_checksum(&bytes));
            vec_bytes.extend_from_slice(&bytes);
        }
        let row_bytes = (self.dimension * 4) as u64;
        durable::truncate_and_append_unsynced(&self.root, &self.vec_path(), self.rows * row_bytes, &vec_bytes)?;
        durable::truncate_and_append_unsynced(&self.root, &self.keys_path(), self.rows * KEY_RECORD as u64, &key_bytes)?;
        let first = self.rows;
        self.rows += entries.len() as u64;
        for (i, (key, _)) in entries.iter().enumerate() {
            self.keys.entry(*key).or_insert(first + i as u64);
        }
        self.make_durable(false)?;
        Ok((first..self.rows).collect())
    }

    fn make_durable(&self, new_files: bool) -> Result<()> {
        let files = [self.vec_path(), self.keys_path()];
        match &self.deferred {
            Some(list) => {
                let mut list = list.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                list.extend(files);
                if new_files {
                    list.push(dense_dir(&self.root));
                }
                Ok(())
            }
            None => {
                let dirs = if new_files { vec![dense_dir(&self.root)] } else { Vec::new() };
                durable::sync_all_paths(&self.root, &files, &dirs)
            }
        }
    }
}

/// The arena a full dense build is filling, if one was left by an interrupted build.
pub(crate) fn building_arena(root: &Path) -> Option<String> {
    let bytes = durable::read_engine_file(root, &dense_dir(root).join(BUILDING_FILE)).ok()?;
    let id = String::from_utf8_lossy(&bytes).trim().to_string();
    valid_arena_id(&id).then_some(id)
}

/// Records (or clears, with `None`) the arena a full dense build is filling.
pub fn set_building_arena(root: &Path, arena: Option<&str>) -> Result<()> {
    let path = dense_dir(root).join(BUILDING_FILE);
    match arena {
        Some(id) => {
            durable::create_dir_all(root, &dense_dir(root))?;
            durable::replace(root, &path, id.as_bytes())
        }
        None => durable::remove_file(root, &path),
    }
}

/// Removes arena files no retained generation (and no interrupted build) references.
pub(crate) fn collect_garbage(root: &Path, referenced: &std::collections::BTreeSet<String>) -> Result<usize> {
    let building = building_arena(root);
    let mut removed = 0;
    // Listed and removed through the folder's handle (opened beneath the root, no link followed).
    let Ok(folder) = crate::store::beneath::Folder::open(root, layout::SEARCH_DENSE_DIR, false) else { return Ok(0) };
    let wrap = |e| crate::store::nofollow::io_error("removing", layout::SEARCH_DENSE_DIR, e);
    for (name, _) in folder.entries().map_err(wrap)? {
        let Some(stem) = name.strip_suffix(".vec").or_else(|| name.strip_suffix(".keys")) else { continue };
        if valid_arena_id(stem) && !referenced.contains(stem) && building.as_deref() != Some(stem) {
            folder.remove_unsynced(&name).map_err(wrap)?;
            removed += 1;
        }
    }
    Ok(removed)
}
