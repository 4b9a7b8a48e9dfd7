//! The source snapshot hash of a generation, kept current in O(change): a content-free blake3
//! Merkle digest of the sorted (path, content hash) pairs of the indexed (valid) notes.
//!
//! Two levels: each directory's digest is blake3 over its direct notes' `name \0 blake3-hex \n`
//! lines in name order; the snapshot hash is blake3 over `directory \0 digest-hex \n` lines in
//! directory order (the vault root is the empty directory). A write re-hashes only the
//! directories it touched plus one line per directory, so publishing one note costs the same
//! at 2,000 and at 100,000 notes; a full `sync` builds the same value from scratch.
//!
//! A write's partial model (`inventory_cache::keyed`) holds only some directories' notes: its
//! snapshot starts from the top-level lines as persisted (`SourceSnapshot::partial`) and
//! replaces, when it hashes, the lines of the directories it holds, with no map of the
//! directories it does not.

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
    /// Set when a change met a directory a partial snapshot does not hold: it can no longer
    /// be hashed truthfully (the write that owns it reloads the model whole).
    overrun: bool,
    /// A partial snapshot's persisted lines, for the directories it does not hold.
    base: Option<PersistedLines>,
    /// The top-level lines as last hashed: patched in place where only a digest changed,
    /// rebuilt when directories came or went (a write re-hashes the lines, not re-renders them).
    top: std::sync::Mutex<TopLines>,
    /// The hash as last computed, emptied by every change (a write asks for it more than once:
    /// its receipt and its publish; a partial snapshot's lines are merged anew for each).
    hashed: OnceLock<String>,
}

#[derive(Debug, Default)]
struct TopLines {
    current: bool,
    lines: Vec<u8>,
    /// Directory → offset of its digest's hex in `lines` (ordered: a directory that comes or
    /// goes shifts the offsets after its line).
    digest_at: BTreeMap<String, usize>,
    /// Directories whose digest changed, or that came or went, since the lines were written.
    dirty: std::collections::BTreeSet<String>,
    /// How many times the lines were built whole (once; tests hold it to that).
    builds: usize,
}

impl TopLines {
    /// Puts `dir`'s line in place, in directory order (it has none yet).
    fn splice_in(&mut self, dir: &str, digest: &[u8; 32]) {
        let start = self
            .digest_at
            .range::<str, _>((std::ops::Bound::Unbounded, std::ops::Bound::Excluded(dir)))
            .next_back()
            .map_or(0, |(_, at)| at + 65);
        let mut line = Vec::with_capacity(dir.len() + 66);
        push_line(&mut line, dir, digest);
        for at in self.digest_at.range_mut::<str, _>((std::ops::Bound::Excluded(dir), std::ops::Bound::Unbounded)).map(|(_, at)| at) {
            *at += line.len();
        }
        self.digest_at.insert(dir.to_string(), start + dir.len() + 1);
        self.lines.splice(start..start, line);
    }

    /// Takes `dir`'s line out (it has one).
    fn splice_out(&mut self, dir: &str) {
        let Some(at) = self.digest_at.remove(dir) else { return };
        let (start, len) = (at - dir.len() - 1, dir.len() + 66);
        self.lines.drain(start..start + len);
        for at in self.digest_at.range_mut::<str, _>((std::ops::Bound::Excluded(dir), std::ops::Bound::Unbounded)).map(|(_, at)| at) {
            *at -= len;
        }
    }
}

/// The top-level lines as persisted (`SourceSnapshot::lines`) under a partial snapshot, and
/// which directories it holds instead (their lines come from their notes).
#[derive(Debug, Default)]
struct PersistedLines {
    lines: String,
    held: std::collections::BTreeSet<String>,
    /// Notes of the directories not held, as persisted.
    notes_not_held: usize,
}

/// Each line of top-level `lines` as (directory, digest hex, the whole line), or `None` past
/// the first line that is not `directory \0 64 characters \n`. The text is searched with
/// `str::find`, whose byte search needs no CPU feature detection (a `cpuid`, which this VM
/// traps, costs a one-shot process about 0.1 ms).
fn lines_of(lines: &str) -> impl Iterator<Item = Option<(&str, &str, &str)>> {
    let mut rest = lines;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let line = rest.find('\0').filter(|nul| rest.as_bytes().get(nul + 65) == Some(&b'\n')).and_then(|nul| {
            let (line, tail) = (rest.get(..nul + 66)?, rest.get(nul + 66..)?);
            Some((&line[..nul], line.get(nul + 1..nul + 65)?, line, tail))
        });
        let Some((dir, hex, line, tail)) = line else {
            rest = "";
            return Some(None);
        };
        rest = tail;
        Some(Some((dir, hex, line)))
    })
}

/// Checks persisted top-level `lines`: UTF-8, well formed, each directory once, in ascending
/// order. Returns them as text.
pub fn check_lines(lines: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(lines).map_err(|_| "lines that are not UTF-8".to_string())?;
    let mut last: Option<&str> = None;
    for line in lines_of(text) {
        let Some((dir, hex, _)) = line else { return Err("a malformed line".into()) };
        // Every byte checked (no early exit), which the compiler vectorises.
        if !hex.bytes().fold(true, |hex, b| hex & b.is_ascii_hexdigit()) {
            return Err("a digest that is not hex".into());
        }
        if last.is_some_and(|last| last >= dir) {
            return Err("directories out of order".into());
        }
        last = Some(dir);
    }
    Ok(text)
}

/// `lines` (well formed, `check_lines`) with the lines of the directories in `replaced`
/// dropped and `digests`' lines merged in, in directory order.
pub fn merge_lines<'d>(lines: &str, replaced: impl Fn(&str) -> bool, digests: impl IntoIterator<Item = (&'d str, [u8; 32])>) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len() + 256);
    let mut digests = digests.into_iter().peekable();
    for (dir, _, line) in lines_of(lines).map_while(|line| line) {
        while let Some((new_dir, digest)) = digests.next_if(|(new_dir, _)| *new_dir < dir) {
            push_line(&mut out, new_dir, &digest);
        }
        if !replaced(dir) {
            out.extend_from_slice(line.as_bytes());
        }
    }
    for (new_dir, digest) in digests {
        push_line(&mut out, new_dir, &digest);
    }
    out
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
    /// change in a directory a partial snapshot does not hold sets `overrun` instead.
    fn held_entry<'r>(&mut self, record: &'r NoteRecord) -> Option<(&'r str, &'r str)> {
        if !counted(record) {
            return None;
        }
        let (dir, name) = split(record.path.as_str());
        if self.base.as_ref().is_some_and(|base| !base.held.contains(dir)) {
            self.overrun = true;
            return None;
        }
        Some((dir, name))
    }

    /// Counts `record` if it is a valid note (replacing an entry for the same path).
    pub fn insert(&mut self, record: &NoteRecord) {
        let Some((dir, name)) = self.held_entry(record) else { return };
        self.hashed = OnceLock::new();
        let top = self.top.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
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
        self.hashed = OnceLock::new();
        let top = self.top.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = self.dirs.get_mut(dir) {
            entry.notes.remove(name);
            entry.digest = OnceLock::new();
            top.dirty.insert(dir.to_string());
            if entry.notes.is_empty() {
                self.dirs.remove(dir);
            }
        }
    }

    /// Number of notes counted.
    pub fn len(&self) -> usize {
        self.base.as_ref().map_or(0, |base| base.notes_not_held) + self.dirs.values().map(|d| d.notes.len()).sum::<usize>()
    }

    /// A partial snapshot: the directories it does not hold known only by their persisted
    /// top-level `lines` (well formed: `check_lines`), holding `notes` notes. Each directory
    /// it holds is named with `hold` before its notes are inserted.
    pub fn partial(lines: String, notes: usize) -> Self {
        SourceSnapshot { base: Some(PersistedLines { lines, held: Default::default(), notes_not_held: notes }), ..Default::default() }
    }

    /// Holds `dir` (which held `notes` notes as persisted) in full: its notes, inserted one by
    /// one, make its line. A whole snapshot holds every directory already.
    pub fn hold(&mut self, dir: &str, notes: usize) {
        self.hashed = OnceLock::new();
        if let Some(base) = &mut self.base
            && base.held.insert(dir.to_string())
        {
            base.notes_not_held = base.notes_not_held.saturating_sub(notes);
        }
    }

    /// Each held directory's digest and note count, in directory order.
    pub fn directory_digests(&self) -> impl Iterator<Item = (&str, [u8; 32], usize)> {
        self.dirs.iter().map(|(dir, d)| (dir.as_str(), d.digest(), d.notes.len()))
    }

    /// The top-level lines the hash is taken over (a whole snapshot's are persisted with the
    /// keyed copy, for a partial snapshot to start from).
    pub fn lines(&self) -> Vec<u8> {
        match &self.base {
            Some(base) => merge_lines(&base.lines, |dir| base.held.contains(dir), self.directory_digests().map(|(dir, d, _)| (dir, d))),
            None => {
                let mut top = self.top.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                self.current_lines(&mut top).to_vec()
            }
        }
    }

    /// Whether a change met a directory a partial snapshot does not hold.
    pub fn overrun(&self) -> bool {
        self.overrun
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// The snapshot hash (lower-case hex).
    pub fn hash(&self) -> String {
        self.hashed
            .get_or_init(|| {
                if self.base.is_some() {
                    return crate::hex::encode(blake3::hash(&self.lines()).as_bytes());
                }
                let mut top = self.top.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                crate::hex::encode(blake3::hash(self.current_lines(&mut top)).as_bytes())
            })
            .clone()
    }

    /// A whole snapshot's top-level lines, brought up to date in place: a changed digest
    /// patched, a directory that came or went spliced in or out (a write in a new folder among
    /// 2,500 rebuilt every line, issue 52), built whole only the first time.
    fn current_lines<'t>(&self, top: &'t mut TopLines) -> &'t [u8] {
        if top.current {
            for dir in std::mem::take(&mut top.dirty) {
                match (self.dirs.get(&dir), top.digest_at.get(&dir).copied()) {
                    (Some(entry), Some(at)) => crate::hex::encode_into(&mut top.lines[at..at + 64], &entry.digest()),
                    (Some(entry), None) => top.splice_in(&dir, &entry.digest()),
                    (None, Some(_)) => top.splice_out(&dir),
                    (None, None) => {}
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
            top.builds += 1;
        }
        &top.lines
    }
}
