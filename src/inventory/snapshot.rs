//! The source snapshot hash of a generation, kept current in O(change): a content-free blake3
//! Merkle digest of the sorted (path, content hash) pairs of the indexed (valid) notes.
//!
//! Two levels: each directory's digest is blake3 over its direct notes' `name \0 blake3-hex \n`
//! lines in name order; the snapshot hash is blake3 over `directory \0 digest-hex \n` lines in
//! directory order (the vault root is the empty directory). A write re-hashes only the
//! directories it touched plus one line per directory, so publishing one note costs the same
//! at 2,000 and at 100,000 notes; a full `sync` builds the same value from scratch.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::inventory::NoteRecord;

#[cfg(test)]
mod tests;

fn push_line(out: &mut Vec<u8>, name: &str, hash: &[u8; 32]) {
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    let mut hex = [0u8; 64];
    crate::hex::encode_into(&mut hex, hash);
    out.extend_from_slice(&hex);
    out.push(b'\n');
}

#[derive(Debug, Default)]
struct Directory {
    /// File name → content blake3 of the valid notes directly in this directory.
    notes: BTreeMap<String, [u8; 32]>,
    /// `Some(n)`: a directory known only by its digest and its `n` notes (a write's partial
    /// model, `inventory_cache::keyed`); its notes are not loaded and must not change.
    opaque: Option<usize>,
    /// Digest of `notes`, computed on first use after a change.
    digest: OnceLock<[u8; 32]>,
}

impl Directory {
    fn digest(&self) -> [u8; 32] {
        *self.digest.get_or_init(|| {
            let mut lines = Vec::with_capacity(self.notes.keys().map(|n| n.len() + 66).sum());
            for (name, hash) in &self.notes {
                push_line(&mut lines, name, hash);
            }
            *blake3::hash(&lines).as_bytes()
        })
    }
}

/// The indexed notes' (path, content hash) pairs, grouped by directory, with cached digests.
#[derive(Debug, Default)]
pub struct SourceSnapshot {
    dirs: BTreeMap<String, Directory>,
    /// Set when a change met an opaque directory: this snapshot can no longer be hashed
    /// truthfully (the write that owns it reloads the model whole).
    overrun: bool,
    /// The top-level lines as last hashed: patched in place where only a digest changed,
    /// rebuilt when directories came or went (a write re-hashes the lines, not re-renders them).
    top: std::sync::Mutex<TopLines>,
}

#[derive(Debug, Default)]
struct TopLines {
    current: bool,
    lines: Vec<u8>,
    /// Directory → offset of its digest's hex in `lines`.
    digest_at: std::collections::HashMap<String, usize>,
    /// Directories whose digest changed since the lines were written.
    dirty: std::collections::BTreeSet<String>,
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

fn counted(record: &NoteRecord) -> bool {
    record.is_note() && record.valid
}

impl SourceSnapshot {
    /// The snapshot of `records` (those that are valid notes), built from scratch.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a NoteRecord>) -> Self {
        let mut snapshot = SourceSnapshot::default();
        for record in records {
            snapshot.insert(record);
        }
        snapshot
    }

    /// `record`'s (directory, name) when it is counted and its directory is held in full; a
    /// change in a directory known only by its digest (`of_opaque`) sets `overrun` instead.
    fn held_entry<'r>(&mut self, record: &'r NoteRecord) -> Option<(&'r str, &'r str)> {
        if !counted(record) {
            return None;
        }
        let (dir, name) = split(record.path.as_str());
        if self.dirs.get(dir).is_some_and(|d| d.opaque.is_some()) {
            self.overrun = true;
            return None;
        }
        Some((dir, name))
    }

    /// Counts `record` if it is a valid note (replacing an entry for the same path).
    pub fn insert(&mut self, record: &NoteRecord) {
        let Some((dir, name)) = self.held_entry(record) else { return };
        let top = self.top.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.dirs.contains_key(dir) {
            top.current = false;
        }
        if !top.dirty.contains(dir) {
            top.dirty.insert(dir.to_string());
        }
        // Looked up before inserting: a bulk build meets each directory many times, and an
        // owned key per note was a measured share of a 100,000-note load.
        if !self.dirs.contains_key(dir) {
            self.dirs.insert(dir.to_string(), Directory::default());
        }
        if let Some(entry) = self.dirs.get_mut(dir) {
            entry.notes.insert(name.to_string(), record.content_hash);
            entry.digest = OnceLock::new();
        }
    }

    /// Stops counting `record`'s path.
    pub fn remove(&mut self, record: &NoteRecord) {
        let Some((dir, name)) = self.held_entry(record) else { return };
        let top = self.top.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = self.dirs.get_mut(dir) {
            entry.notes.remove(name);
            entry.digest = OnceLock::new();
            top.dirty.insert(dir.to_string());
            if entry.notes.is_empty() {
                self.dirs.remove(dir);
                top.current = false;
            }
        }
    }

    /// Number of notes counted.
    pub fn len(&self) -> usize {
        self.dirs.values().map(|d| d.opaque.unwrap_or(d.notes.len())).sum()
    }

    /// A snapshot of directories known only by their digest and note count (`notes` > 0), in
    /// ascending directory order, built in one pass: a partial model's, whose notes in those
    /// directories are not loaded.
    pub fn of_opaque<'d>(dirs: impl Iterator<Item = (&'d str, ([u8; 32], usize))>) -> Self {
        let dirs = dirs
            .map(|(dir, (digest, notes))| {
                (dir.to_string(), Directory { notes: BTreeMap::new(), opaque: Some(notes), digest: OnceLock::from(digest) })
            })
            .collect();
        SourceSnapshot { dirs, ..Default::default() }
    }

    /// Forgets a directory known only by its digest (its notes are then inserted one by one).
    pub fn forget_opaque(&mut self, dir: &str) {
        if self.dirs.get(dir).is_some_and(|d| d.opaque.is_some()) {
            self.dirs.remove(dir);
            self.top.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).current = false;
        }
    }

    /// Each directory's digest and note count, in directory order.
    pub fn directory_digests(&self) -> impl Iterator<Item = (&str, [u8; 32], usize)> {
        self.dirs.iter().map(|(dir, d)| (dir.as_str(), d.digest(), d.opaque.unwrap_or(d.notes.len())))
    }

    /// Whether a change met a directory known only by its digest (`of_opaque`).
    pub fn overrun(&self) -> bool {
        self.overrun
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// The snapshot hash (lower-case hex).
    pub fn hash(&self) -> String {
        let mut top = self.top.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let top = &mut *top;
        if top.current {
            for dir in std::mem::take(&mut top.dirty) {
                if let (Some(entry), Some(&at)) = (self.dirs.get(&dir), top.digest_at.get(&dir)) {
                    crate::hex::encode_into(&mut top.lines[at..at + 64], &entry.digest());
                }
            }
        } else {
            top.lines.clear();
            top.lines.reserve(self.dirs.keys().map(|d| d.len() + 66).sum());
            top.digest_at.clear();
            for (dir, entry) in &self.dirs {
                top.digest_at.insert(dir.clone(), top.lines.len() + dir.len() + 1);
                push_line(&mut top.lines, dir, &entry.digest());
            }
            top.dirty.clear();
            top.current = true;
        }
        crate::hex::encode(blake3::hash(&top.lines).as_bytes())
    }
}
