//! The intent journal: an append-only file of checksummed records, the durability point of
//! every write transaction.
//!
//! Record framing: `len: u32 LE` · `checksum: first 8 bytes of blake3(payload)` · `payload`
//! (JSON). A torn tail (short read or checksum mismatch) is a record that was never committed;
//! `open` truncates it away. An `Intent` record holds every post-image the transaction will put
//! in place, so recovery can always finish it; a `Done` record says its files are durable.
//!
//! Beside it, the writer keeps the journal's frame index (`layout::JOURNAL_HEADS`): each
//! record's head and where its bytes lie, with the journal's stamp and the last frame's own
//! header as the writer left them. A writer that finds the journal exactly so reads no record
//! (an intent's bytes are read, and their checksum checked, only when it is decoded); any
//! other journal, or an index that is torn, foreign or does not fit, is read whole as before.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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

/// The length of a frame's header (`len` and checksum) before its payload.
const FRAME_HEADER: u64 = 12;

/// A frame's header as `append` writes it.
fn frame_header(len: u32, checksum: &[u8; 8]) -> [u8; 12] {
    let mut header = [0u8; 12];
    header[..4].copy_from_slice(&len.to_le_bytes());
    header[4..].copy_from_slice(checksum);
    header
}

fn checksum_of(payload: &[u8]) -> [u8; 8] {
    let mut checksum = [0u8; 8];
    checksum.copy_from_slice(&blake3::hash(payload).as_bytes()[..8]);
    checksum
}

/// One record of the journal's frame index: its head, and where its frame lies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FrameHead {
    offset: u64,
    len: u32,
    checksum: [u8; 8],
    seq: u64,
    kind: StoredKind,
}

/// The frame index file: the journal as its last writer left it, and its frames (borrowed
/// when written, owned when read).
#[derive(Debug, Serialize, Deserialize)]
struct HeadsFile<'a> {
    format: u32,
    journal: JournalStamp,
    frames: std::borrow::Cow<'a, [FrameHead]>,
}

/// The frame index's format (a file of another is read as no index).
const HEADS_FORMAT: u32 = 1;

/// Parses every intact record of `bytes` (its head: see `StoredRecord`); returns them, their
/// frames, and the length they cover (a torn tail after it is a record that never committed).
fn parse_records(bytes: &[u8]) -> (Vec<StoredRecord>, Vec<FrameHead>, usize) {
    let mut records = Vec::new();
    let mut frames = Vec::new();
    let mut offset = 0usize;
    while offset + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap_or_default());
        let Some(payload) = bytes.get(offset + 12..offset + 12 + len as usize) else { break };
        let checksum = checksum_of(payload);
        if checksum != bytes[offset + 4..offset + 12] {
            break;
        }
        match StoredRecord::read(payload) {
            Some(record) => {
                frames.push(FrameHead { offset: offset as u64, len, checksum, seq: record.seq, kind: record.kind.clone() });
                records.push(record);
            }
            None => break,
        }
        offset += 12 + len as usize;
    }
    (records, frames, offset)
}

/// The frame index kept beside the journal, when it describes `file` exactly as it is now
/// (`stamp`): the same length, modification time and inode, frames that tile the file from its
/// start to its end, and the last frame's header still in place. `None`: read the journal.
fn kept_heads(root: &Path, file: &File, stamp: JournalStamp) -> Option<Vec<FrameHead>> {
    let bytes = super::durable::read_engine_file(root, &layout::join(root, layout::JOURNAL_HEADS)).ok()?;
    let heads: HeadsFile = super::checksummed::decode(&bytes).ok()?;
    if heads.format != HEADS_FORMAT || heads.journal != stamp {
        return None;
    }
    let mut end = 0u64;
    for frame in heads.frames.iter() {
        if frame.offset != end {
            return None;
        }
        end = frame.offset.checked_add(FRAME_HEADER + u64::from(frame.len))?;
    }
    if end != stamp.len {
        return None;
    }
    if let Some(last) = heads.frames.last() {
        let mut header = [0u8; 12];
        file.read_exact_at(&mut header, last.offset).ok()?;
        if header != frame_header(last.len, &last.checksum) {
            return None;
        }
    }
    Some(heads.frames.into_owned())
}

/// Reads the journal's intact records without changing the file (readers: a torn tail is left
/// to the writer). Returns the stamp the records were read at; `None` when there is no journal.
pub fn read_committed(root: &Path) -> Result<Option<(JournalStamp, Vec<StoredRecord>)>> {
    Ok(read_committed_since(root, None)?.map(|read| (read.stamp, read.records)))
}

/// Where a read of the journal (`read_committed_since`) ended: the file it read and the end of
/// the last whole frame, with that frame's header, so the next read can start there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalCursor {
    inode: u64,
    end: u64,
    /// (offset, header) of the last whole frame read.
    last: Option<(u64, [u8; 12])>,
}

/// What `read_committed_since` read.
#[derive(Debug)]
pub struct JournalRead {
    pub stamp: JournalStamp,
    /// The intact records from the cursor on (`whole`: from the journal's start).
    pub records: Vec<StoredRecord>,
    pub whole: bool,
    pub cursor: JournalCursor,
}

/// `read_committed` from where the read that gave `since` ended: only the records appended
/// since, while the journal is still the file it read, grown and with its last frame read still
/// in place; otherwise (replaced, emptied by a fold, rewritten: the journal is only ever
/// appended to, truncated past its last whole frame, or emptied) every record, as
/// `read_committed` reads them. `None` when there is no journal.
pub fn read_committed_since(root: &Path, since: Option<&JournalCursor>) -> Result<Option<JournalRead>> {
    let path = layout::join(root, layout::JOURNAL);
    let mut file = match super::durable::open_engine_read(root, &path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("opening", e)),
    };
    let meta = file.metadata().map_err(|e| io("reading", e))?;
    let stamp = JournalStamp::of(&meta);
    let still_in_place = |cursor: &JournalCursor| {
        cursor.inode == stamp.inode
            && cursor.end <= stamp.len
            && cursor.last.is_none_or(|(offset, header)| {
                let mut now = [0u8; 12];
                file.read_exact_at(&mut now, offset).is_ok() && now == header
            })
    };
    let start = match since {
        Some(cursor) if still_in_place(cursor) => cursor.end,
        _ => 0,
    };
    file.seek(SeekFrom::Start(start)).map_err(|e| io("reading", e))?;
    let mut bytes = Vec::with_capacity(meta.len().saturating_sub(start) as usize);
    file.read_to_end(&mut bytes).map_err(|e| io("reading", e))?;
    let (records, frames, consumed) = parse_records(&bytes);
    let last = match frames.last() {
        Some(frame) => Some((start + frame.offset, frame_header(frame.len, &frame.checksum))),
        None if start > 0 => since.and_then(|c| c.last),
        None => None,
    };
    let cursor = JournalCursor { inode: stamp.inode, end: start + consumed as u64, last };
    Ok(Some(JournalRead { stamp, records, whole: start == 0, cursor }))
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

/// A record as `Journal::open` and `read_committed` give it. What a write consults of every
/// record (its kind and sequence number, the paths an intent names, whether a done record
/// abandoned its intent) is decoded at once; an intent's texts, receipt and search lists only
/// when asked for (`intent`: recovery, a fold, a reader serving the tail), from the record's
/// own bytes. A journal holds up to `search.tail_writes_max` intents, each with the full text
/// of every catalog page it rewrote, and a write reads none of those texts.
#[derive(Debug)]
pub struct StoredRecord {
    seq: u64,
    kind: StoredKind,
    payload: Payload,
    intent: OnceLock<std::result::Result<Intent, String>>,
}

/// Where a record's JSON is.
#[derive(Debug)]
enum Payload {
    /// Appended by this process: its intent is at hand.
    None,
    /// Read with the journal.
    Read(Box<[u8]>),
    /// Left in the journal file (its head came from the frame index): read, and its checksum
    /// checked, when the intent is first decoded.
    InFile { file: Arc<File>, offset: u64, len: u32, checksum: [u8; 8] },
}

impl Payload {
    fn bytes(&self) -> std::result::Result<std::borrow::Cow<'_, [u8]>, String> {
        match self {
            Payload::None => Ok(std::borrow::Cow::Borrowed(&[])),
            Payload::Read(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
            Payload::InFile { file, offset, len, checksum } => {
                let mut bytes = vec![0u8; *len as usize];
                file.read_exact_at(&mut bytes, offset + FRAME_HEADER).map_err(|e| format!("its bytes cannot be read: {e}"))?;
                if checksum_of(&bytes) != *checksum {
                    return Err("its bytes no longer match their checksum".into());
                }
                Ok(std::borrow::Cow::Owned(bytes))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum StoredKind {
    Intent { paths: Vec<String> },
    Done { abandoned: bool },
}

/// The part of a record decoded at once (every other field is skipped, unread).
#[derive(Deserialize)]
struct RecordHead {
    kind: HeadKind,
    seq: u64,
    #[serde(default)]
    changes: Vec<ChangeHead>,
    #[serde(default)]
    abandoned: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum HeadKind {
    Intent,
    Done,
}

#[derive(Deserialize)]
struct ChangeHead {
    path: String,
}

impl StoredRecord {
    /// The head of the record `payload` (`None`: not a record, as a torn one).
    fn read(payload: &[u8]) -> Option<Self> {
        let head: RecordHead = serde_json::from_slice(payload).ok()?;
        let kind = match head.kind {
            HeadKind::Intent => StoredKind::Intent { paths: head.changes.into_iter().map(|c| c.path).collect() },
            HeadKind::Done => StoredKind::Done { abandoned: head.abandoned },
        };
        Some(StoredRecord { seq: head.seq, kind, payload: Payload::Read(payload.into()), intent: OnceLock::new() })
    }

    /// The record `frame` of the journal `file`, its bytes left there.
    fn in_file(frame: &FrameHead, file: &Arc<File>) -> Self {
        StoredRecord {
            seq: frame.seq,
            kind: frame.kind.clone(),
            payload: Payload::InFile { file: Arc::clone(file), offset: frame.offset, len: frame.len, checksum: frame.checksum },
            intent: OnceLock::new(),
        }
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether this is an intent's record (else a done record).
    pub fn is_intent(&self) -> bool {
        matches!(self.kind, StoredKind::Intent { .. })
    }

    /// For a done record, whether its intent was abandoned (`None`: an intent's record).
    pub fn done(&self) -> Option<bool> {
        match self.kind {
            StoredKind::Done { abandoned } => Some(abandoned),
            StoredKind::Intent { .. } => None,
        }
    }

    /// The vault-relative path of every file an intent changes (none for a done record).
    pub fn paths(&self) -> &[String] {
        match &self.kind {
            StoredKind::Intent { paths } => paths,
            StoredKind::Done { .. } => &[],
        }
    }

    /// The whole intent (`None` for a done record), decoded on first use. A record whose head
    /// reads but whose whole does not (never written by this engine) is an error naming it;
    /// nothing is skipped or truncated for it.
    pub fn intent(&self) -> Result<Option<&Intent>> {
        if !self.is_intent() {
            return Ok(None);
        }
        let decoded = self.intent.get_or_init(|| {
            let payload = self.payload.bytes()?;
            match serde_json::from_slice::<Record>(&payload) {
                Ok(Record::Intent(intent)) if intent.seq == self.seq => Ok(intent),
                Ok(_) => Err("its whole is not the intent its head names".to_string()),
                Err(error) => Err(error.to_string()),
            }
        });
        match decoded {
            Ok(intent) => Ok(Some(intent)),
            Err(reason) => Err(io(
                "decoding",
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("intent {} cannot be decoded: {reason}", self.seq)),
            )),
        }
    }
}

impl Record {
    /// What `StoredRecord` and the frame index keep of this record: its sequence number and kind.
    fn head(&self) -> (u64, StoredKind) {
        match self {
            Record::Intent(intent) => {
                (intent.seq, StoredKind::Intent { paths: intent.changes.iter().map(|c| c.path().to_string()).collect() })
            }
            Record::Done { seq, abandoned } => (*seq, StoredKind::Done { abandoned: *abandoned }),
        }
    }
}

impl From<Record> for StoredRecord {
    /// A record this process appended (its intent at hand, never decoded again).
    fn from(record: Record) -> Self {
        let (seq, kind) = record.head();
        let intent = match record {
            Record::Intent(intent) => OnceLock::from(Ok(intent)),
            Record::Done { .. } => OnceLock::new(),
        };
        StoredRecord { seq, kind, payload: Payload::None, intent }
    }
}

/// The sequence numbers of intents in `records` that were abandoned (never put in place).
pub fn abandoned_seqs(records: &[StoredRecord]) -> std::collections::BTreeSet<u64> {
    records.iter().filter(|r| r.done() == Some(true)).map(StoredRecord::seq).collect()
}

/// The open journal file.
pub struct Journal {
    root: PathBuf,
    path: PathBuf,
    file: File,
    len: u64,
    /// The file as this handle last left it: another process changed it when the path's
    /// stamp differs.
    seen: JournalStamp,
    /// Every record's frame, in file order (what the frame index keeps).
    frames: Vec<FrameHead>,
    /// Whether `open` took the records from the frame index (no record read).
    from_heads: bool,
}

fn io(action: &'static str, e: std::io::Error) -> Error {
    super::nofollow::io_error(action, layout::JOURNAL, e)
}

impl Journal {
    /// Opens (creating) the journal, reads every intact record and truncates a torn tail.
    pub fn open(root: &Path) -> Result<(Self, Vec<StoredRecord>)> {
        let path = layout::join(root, layout::JOURNAL);
        let mut file = super::durable::open_engine_file(root, &path, true).map_err(|e| io("opening", e))?;
        let stamp = JournalStamp::of(&file.metadata().map_err(|e| io("reading", e))?);
        if let Some(frames) = kept_heads(root, &file, stamp) {
            file.seek(SeekFrom::End(0)).map_err(|e| io("seeking", e))?;
            let shared = Arc::new(file.try_clone().map_err(|e| io("opening", e))?);
            let records = frames.iter().map(|frame| StoredRecord::in_file(frame, &shared)).collect();
            let journal = Journal { root: root.to_path_buf(), path, file, len: stamp.len, seen: stamp, frames, from_heads: true };
            return Ok((journal, records));
        }
        let mut bytes = Vec::with_capacity(stamp.len as usize);
        file.read_to_end(&mut bytes).map_err(|e| io("reading", e))?;
        let (records, frames, offset) = parse_records(&bytes);
        if offset < bytes.len() {
            tracing::warn!(torn_bytes = bytes.len() - offset, "journal: truncating a torn tail (an uncommitted intent)");
            faults::check("journal_truncate").map_err(|e| io("truncating", e))?;
            file.set_len(offset as u64).map_err(|e| io("truncating", e))?;
            file.sync_data().map_err(|e| io("syncing", e))?;
        }
        file.seek(SeekFrom::End(0)).map_err(|e| io("seeking", e))?;
        let seen = JournalStamp::of(&file.metadata().map_err(|e| io("reading", e))?);
        let journal = Journal { root: root.to_path_buf(), path, file, len: offset as u64, seen, frames, from_heads: false };
        journal.keep_heads();
        Ok((journal, records))
    }

    /// Whether `open` took the records from the frame index (it read no record).
    pub fn opened_from_heads(&self) -> bool {
        self.from_heads
    }

    /// Writes the frame index for the journal as this handle leaves it (a cache: not synced,
    /// and a failure only leaves the next writer to read the journal).
    fn keep_heads(&self) {
        let heads = HeadsFile { format: HEADS_FORMAT, journal: self.seen, frames: std::borrow::Cow::Borrowed(&self.frames) };
        let Some(bytes) = super::checksummed::encode(&heads) else { return };
        if let Err(error) = super::durable::write_cache(&self.root, &layout::join(&self.root, layout::JOURNAL_HEADS), &bytes) {
            tracing::debug!(%error, "could not keep the journal's frame index");
        }
    }

    /// Appends a record; with `durable`, fdatasyncs before returning (the commit point).
    pub fn append(&mut self, record: &Record, durable: bool) -> Result<()> {
        let payload = serde_json::to_vec(record).map_err(|e| io("encoding", std::io::Error::other(e)))?;
        let checksum = checksum_of(&payload);
        let mut frame = Vec::with_capacity(payload.len() + 12);
        frame.extend_from_slice(&frame_header(payload.len() as u32, &checksum));
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
                let (seq, kind) = record.head();
                self.frames.push(FrameHead { offset: start, len: payload.len() as u32, checksum, seq, kind });
                // Kept after each done record: a transaction's last append (an intent waits for
                // its done record; a writer that dies between them leaves the next to read).
                if matches!(record, Record::Done { .. }) {
                    self.keep_heads();
                }
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
        self.frames.clear();
        self.keep_heads();
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

#[cfg(test)]
mod tests;
