//! The intent journal: an append-only file of checksummed records, the durability point of
//! every write transaction.
//!
//! Record framing: `len: u32 LE` · `checksum: first 8 bytes of blake3(payload)` · `payload`
//! (JSON). A torn tail (short read or checksum mismatch) is a record that was never committed;
//! `open` truncates it away. An `Intent` record holds every post-image the transaction will put
//! in place, so recovery can always finish it; a `Done` record says its files are durable.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{faults, layout};

/// One file change inside an intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum FileChange {
    /// Replace (or create) the file with `text`.
    Write { path: String, text: String },
    /// Remove the file.
    Delete { path: String },
    /// Truncate to `before_len`, then append `text` (idempotent append).
    Append { path: String, before_len: u64, text: String },
}

impl FileChange {
    pub fn path(&self) -> &str {
        match self {
            FileChange::Write { path, .. } | FileChange::Delete { path } | FileChange::Append { path, .. } => path,
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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Intent(Intent),
    Done { seq: u64 },
}

/// The open journal file.
pub struct Journal {
    path: PathBuf,
    file: File,
    len: u64,
}

fn io(action: &'static str, e: std::io::Error) -> Error {
    Error::io(action, layout::JOURNAL, e)
}

impl Journal {
    /// Opens (creating) the journal, reads every intact record and truncates a torn tail.
    pub fn open(root: &Path) -> Result<(Self, Vec<Record>)> {
        let path = layout::join(root, layout::JOURNAL);
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path).map_err(|e| io("opening", e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| io("reading", e))?;
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
        if offset < bytes.len() {
            tracing::warn!(torn_bytes = bytes.len() - offset, "journal: truncating a torn tail (an uncommitted intent)");
            faults::check("journal_truncate").map_err(|e| io("truncating", e))?;
            file.set_len(offset as u64).map_err(|e| io("truncating", e))?;
            file.sync_data().map_err(|e| io("syncing", e))?;
        }
        file.seek(SeekFrom::End(0)).map_err(|e| io("seeking", e))?;
        Ok((Journal { path, file, len: offset as u64 }, records))
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
        Ok(())
    }

    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
