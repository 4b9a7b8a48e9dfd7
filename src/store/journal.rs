//! The intent journal: an append-only file of checksummed records, the durability point of
//! every write transaction.
//!
//! Record framing: `len: u32 LE` · `checksum: first 8 bytes of blake3(payload)` · `payload`
//! (JSON). A torn tail (short read or checksum mismatch) is a record that was never committed;
//! `open` truncates it away. An `Intent` record holds every post-image the transaction will put
//! in place, so recovery can always finish it; a `Done` record says its files are durable.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{faults, layout};

/// What a file held when a transaction was planned (under the writer lock): the identity
/// every later step compares against, so that nothing the engine did not see is overwritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreImage {
    /// No file at the path.
    Absent,
    /// The file's bytes had this lower-case hex sha256.
    Sha256(String),
}

impl PreImage {
    /// The pre-image of `bytes` (`None`: no file).
    pub fn of(bytes: Option<&[u8]>) -> Self {
        match bytes {
            None => PreImage::Absent,
            Some(bytes) => PreImage::Sha256(crate::hex::sha256_hex(bytes)),
        }
    }

    /// Whether a file now holding `bytes` (`None`: no file) still holds this pre-image.
    pub fn matches(&self, bytes: Option<&[u8]>) -> bool {
        match (self, bytes) {
            (PreImage::Absent, None) => true,
            (PreImage::Sha256(hex), Some(bytes)) => *hex == crate::hex::sha256_hex(bytes),
            _ => false,
        }
    }

    /// The sha256 of the pre-image (of empty bytes when absent), as receipts name it.
    pub fn sha256(&self) -> String {
        match self {
            PreImage::Absent => crate::hex::sha256_hex(b""),
            PreImage::Sha256(hex) => hex.clone(),
        }
    }
}

/// One file change inside an intent. `before` is what the file held when the transaction was
/// planned; it is absent only in journals of older engines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum FileChange {
    /// Replace (or create) the file with `text`.
    Write {
        path: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<PreImage>,
    },
    /// Remove the file.
    Delete {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<PreImage>,
    },
    /// Append `text` to a file that was `before_len` bytes long. Bytes past `before_len` that
    /// are not a torn copy of `text` belong to someone else and are never truncated.
    Append { path: String, before_len: u64, text: String },
}

impl FileChange {
    pub fn path(&self) -> &str {
        match self {
            FileChange::Write { path, .. } | FileChange::Delete { path, .. } | FileChange::Append { path, .. } => path,
        }
    }

    /// What the file held when the transaction was planned (`None`: an appended file, or a
    /// journal of an older engine).
    pub fn before(&self) -> Option<&PreImage> {
        match self {
            FileChange::Write { before, .. } | FileChange::Delete { before, .. } => before.as_ref(),
            FileChange::Append { .. } => None,
        }
    }
}

/// Everything needed to finish a transaction after a crash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intent {
    pub seq: u64,
    pub changes: Vec<FileChange>,
    /// Notes whose search documents change (written) and vanish (removed).
    pub search_changed: Vec<String>,
    pub search_removed: Vec<String>,
    /// The receipt to append once the transaction is in place (generation fields filled then).
    pub receipt: serde_json::Value,
    /// What the vault's search sources are once this intent is in place (for a generation
    /// served from the journal's tail: see `search::tail`). Absent in journals of older engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_snapshot: Option<SearchSnapshot>,
}

/// The search-source summary of the vault after an intent: snapshot hash and note counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchSnapshot {
    pub source_snapshot_hash: String,
    pub scanned: usize,
    pub indexed: usize,
    pub excluded: usize,
}

/// Identity of the journal file's current contents as seen from outside (length, modification
/// time, inode): a reader re-reads the journal only when it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JournalStamp {
    pub len: u64,
    pub modified_nanos: u128,
    pub inode: u64,
}

impl JournalStamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let modified_nanos = meta.modified().ok().and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        JournalStamp { len: meta.len(), modified_nanos, inode: meta.ino() }
    }

    /// The stamp of the journal at `root` (`None` when it does not exist).
    pub fn read(root: &Path) -> Result<Option<Self>> {
        match std::fs::symlink_metadata(layout::join(root, layout::JOURNAL)) {
            Ok(meta) => Ok(Some(Self::of(&meta))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("reading", e)),
        }
    }
}

/// Parses every intact record of `bytes`; returns them and the length they cover (a torn tail
/// after it is a record that never committed).
fn parse_records(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut offset = 0usize;
    while offset + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap_or_default()) as usize;
        let Some(payload) = bytes.get(offset + 12..offset + 12 + len) else { break };
        if blake3::hash(payload).as_bytes()[..8] != bytes[offset + 4..offset + 12] {
            break;
        }
        match serde_json::from_slice::<Record>(payload) {
            Ok(record) => records.push(record),
            Err(_) => break,
        }
        offset += 12 + len;
    }
    (records, offset)
}

/// Reads the journal's intact records without changing the file (readers: a torn tail is left
/// to the writer). Returns the stamp the records were read at; `None` when there is no journal.
pub fn read_committed(root: &Path) -> Result<Option<(JournalStamp, Vec<Record>)>> {
    let path = layout::join(root, layout::JOURNAL);
    let mut file = match super::durable::open_engine_read(root, &path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("opening", e)),
    };
    let meta = file.metadata().map_err(|e| io("reading", e))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).map_err(|e| io("reading", e))?;
    let (records, _) = parse_records(&bytes);
    Ok(Some((JournalStamp::of(&meta), records)))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Intent(Intent),
    /// The intent's files are durable. `abandoned`: none of them was put in place, because a
    /// file changed outside the engine between the plan and the apply (a refused write).
    Done {
        seq: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        abandoned: bool,
    },
}

/// The sequence numbers of intents in `records` that were abandoned (never put in place).
pub fn abandoned_seqs(records: &[Record]) -> std::collections::BTreeSet<u64> {
    records.iter().filter_map(|r| if let Record::Done { seq, abandoned: true } = r { Some(*seq) } else { None }).collect()
}

/// The open journal file.
pub struct Journal {
    path: PathBuf,
    file: File,
    len: u64,
    /// The file as this handle last left it: another process changed it when the path's
    /// stamp differs.
    seen: JournalStamp,
}

fn io(action: &'static str, e: std::io::Error) -> Error {
    super::nofollow::io_error(action, layout::JOURNAL, e)
}

impl Journal {
    /// Opens (creating) the journal, reads every intact record and truncates a torn tail.
    pub fn open(root: &Path) -> Result<(Self, Vec<Record>)> {
        let path = layout::join(root, layout::JOURNAL);
        let mut file = super::durable::open_engine_file(root, &path, true).map_err(|e| io("opening", e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| io("reading", e))?;
        let (records, offset) = parse_records(&bytes);
        if offset < bytes.len() {
            tracing::warn!(torn_bytes = bytes.len() - offset, "journal: truncating a torn tail (an uncommitted intent)");
            faults::check("journal_truncate").map_err(|e| io("truncating", e))?;
            file.set_len(offset as u64).map_err(|e| io("truncating", e))?;
            file.sync_data().map_err(|e| io("syncing", e))?;
        }
        file.seek(SeekFrom::End(0)).map_err(|e| io("seeking", e))?;
        let seen = JournalStamp::of(&file.metadata().map_err(|e| io("reading", e))?);
        Ok((Journal { path, file, len: offset as u64, seen }, records))
    }

    /// Appends a record; with `durable`, fdatasyncs before returning (the commit point).
    pub fn append(&mut self, record: &Record, durable: bool) -> Result<()> {
        let payload = serde_json::to_vec(record).map_err(|e| io("encoding", std::io::Error::other(e)))?;
        let mut frame = Vec::with_capacity(payload.len() + 12);
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(&blake3::hash(&payload).as_bytes()[..8]);
        frame.extend_from_slice(&payload);
        let start = self.len;
        let result = (|| {
            faults::check("journal_append")?;
            self.file.write_all(&frame)?;
            if durable {
                faults::check("journal_sync")?;
                self.file.sync_data()?;
            }
            Ok::<(), std::io::Error>(())
        })();
        match result {
            Ok(()) => {
                self.len += frame.len() as u64;
                self.seen = JournalStamp::of(&self.file.metadata().map_err(|e| io("reading", e))?);
                Ok(())
            }
            Err(e) => {
                // Best effort: cut the partial frame so the next append starts clean. If this
                // fails too, `open` truncates the torn tail at the next start.
                let _ = self.file.set_len(start);
                Err(io("appending to", e))
            }
        }
    }

    /// Empties the journal (only when every intent is done and durable).
    pub fn reset(&mut self) -> Result<()> {
        faults::check("journal_reset").map_err(|e| io("truncating", e))?;
        self.file.set_len(0).map_err(|e| io("truncating", e))?;
        self.file.sync_data().map_err(|e| io("syncing", e))?;
        self.len = 0;
        self.seen = JournalStamp::of(&self.file.metadata().map_err(|e| io("reading", e))?);
        Ok(())
    }

    /// Whether the journal file is still as this handle left it (no other process appended to
    /// it or emptied it since).
    pub fn unchanged_since_seen(&self, root: &Path) -> Result<bool> {
        Ok(JournalStamp::read(root)? == Some(self.seen))
    }

    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
