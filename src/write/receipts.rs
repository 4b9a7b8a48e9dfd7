//! Receipts: `.paravault/receipts.jsonl`, one content-free JSON object per line, appended in
//! O(1), never rewritten, hash-chained (`prev` = blake3 of the previous line) and numbered
//! (`seq`, strictly +1). Carries P.O.W.E.R.'s `power.receipt.v1` fields plus `seq`, `prev`,
//! and per-phase durations. Never contains note content.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::state::{DayCounts, DayFields};
use crate::store::{durable, layout, nofollow};

/// `prev` of the first receipt.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One line of the receipt log: an ok receipt (from the intent the plan built, completed by
/// the apply and publish steps), a recovered one (`recovered`, and `conflicts` where recovery
/// left a file as someone else wrote it) or a content-free aborted one (`phase`, `error_code`).
///
/// The fields are declared in alphabetical order, the order the log has always had (a
/// `serde_json::Map` is sorted by key), so a line re-serialises byte for byte and the hash
/// chain of an existing log still verifies. A field a receipt does not carry is absent, never
/// `null`; fields this engine does not know (a journal of another version) are kept as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Receipt {
    /// Who wrote (the MCP agent or the CLI user), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The note's sha256 after the write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_sha256: Option<String>,
    /// The named agent that wrote (`paravault mcp --agent NAME`), when the server names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Who approved the write (src/approvals): approver, channel, decision time, record sha256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Value>,
    /// When the transaction committed (RFC 3339).
    pub at: String,
    /// The note's sha256 before the write (absent for a new note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_sha256: Option<String>,
    /// Files left as someone outside the engine wrote them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<Vec<String>>,
    /// The transaction's duration in milliseconds, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<String>,
    /// The error an aborted write stopped with (docs/errors.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The key that makes a replay return this receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// What the catalog regeneration changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_summary: Option<String>,
    /// Orphan notes the lint gate saw, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lint_orphans: Option<String>,
    /// The sha256 of the planned mutation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutation_sha256: Option<String>,
    /// Every note's hashes, when the transaction changed more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<NoteHashes>>,
    /// Notes the published search generation left out, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes_excluded: Option<String>,
    /// Notes the published search generation holds, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes_indexed: Option<String>,
    /// Notes the search publish read, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes_scanned: Option<String>,
    /// The operation that wrote (`ingest_note`, `mcp.vaultspec.create`…).
    pub operation: String,
    /// The vault-relative path written.
    pub path: String,
    /// The step an aborted write stopped in (`check`, `plan`, `commit`, `apply`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Milliseconds per step, by step name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_ms: Option<std::collections::BTreeMap<String, f64>>,
    /// blake3 of the previous line (`GENESIS` for the first); filled by `ReceiptLog::append`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// The proposal the write applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposal_id: Option<String>,
    /// `power.receipt.v1`.
    pub receipt_schema: String,
    /// Set when crash recovery completed the transaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<String>,
    /// The search generation published with the write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_generation: Option<String>,
    /// The index the publish built (fts or dense).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_mode: Option<String>,
    /// The receipt's number in the log (strictly +1).
    pub seq: u64,
    /// The tracing span of the write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// `ok` or `aborted`.
    pub status: String,
    /// The tracing trace of the write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Notes the write put in place and indexed by keyword without their dense vectors (the
    /// embedding model was unavailable): owed, embedded by the next `sync --dense` or write
    /// with the model (docs/embedding.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors_owed: Option<Vec<String>>,
    /// Fields of another engine version, kept (after the known ones).
    #[serde(flatten, skip_serializing_if = "serde_json::Map::is_empty")]
    pub other: serde_json::Map<String, Value>,
}

/// One note's hashes in a multi-note receipt's `notes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NoteHashes {
    /// The note's sha256 after the write.
    pub after_sha256: String,
    /// The note's sha256 before the write.
    pub before_sha256: String,
    /// The note's vault-relative path.
    pub path: String,
}

/// The receipt schema every line names.
pub(crate) const RECEIPT_SCHEMA: &str = "power.receipt.v1";

impl Receipt {
    /// The receipt as the JSON value callers are given.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The in-memory view of the receipt log.
#[derive(Debug, Default)]
pub(crate) struct ReceiptLog {
    pub last_seq: u64,
    pub last_hash: String,
    /// Byte length of the file as last read or written by this process.
    pub len: u64,
    /// Idempotency key → the ok receipt that first used it; indexed on the first ask
    /// (`first_with_key`), so opening a vault never reads its whole history.
    by_key: Option<HashMap<String, Receipt>>,
}

/// A problem found by `verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainProblem {
    pub line: usize,
    pub message: String,
}

/// The outcome of `verify`.
#[derive(Debug, Clone, Serialize)]
pub struct ChainReport {
    pub receipts: usize,
    pub ok: bool,
    pub problems: Vec<ChainProblem>,
    /// With `--check-files`: how many notes were compared with their newest ok receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_checked: Option<usize>,
    /// On a replica: every replica's receipt chain as it travelled (`.paravault/replicas/`),
    /// each verified on its own; `ok` is false when any fails.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaChain>,
}

/// One replica's travelled chain, verified.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaChain {
    pub replica_id: String,
    pub receipts: usize,
    pub ok: bool,
    pub problems: Vec<ChainProblem>,
}

/// Calls `visit` with each line of `file`, newest first, a block read back at a time, until
/// `visit` returns false. The first call gets what follows the last newline (empty, or a line
/// a killed append tore); empty lines are passed on too.
fn lines_newest_first(file: &mut (impl std::io::Read + std::io::Seek), visit: impl FnMut(&[u8]) -> bool) -> std::io::Result<()> {
    let end = file.seek(std::io::SeekFrom::End(0))?;
    lines_newest_first_before(file, end, visit)
}

/// `lines_newest_first` over the file's first `end` bytes.
fn lines_newest_first_before(
    file: &mut (impl std::io::Read + std::io::Seek),
    mut end: u64,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> std::io::Result<()> {
    use std::io::SeekFrom;
    const BLOCK: u64 = 16 << 10;
    // The start of a line that a block boundary cut: the bytes just after the block read next.
    let mut cut: Vec<u8> = Vec::new();
    while end > 0 {
        let from = end.saturating_sub(BLOCK);
        let mut block = vec![0; (end - from) as usize];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut block)?;
        block.extend_from_slice(&cut);
        end = from;
        // Every line after the block's first newline is whole; before it, a line goes on in
        // the block before (unless this block starts the file).
        let first_newline = if from == 0 { Some(None) } else { block.iter().position(|&b| b == b'\n').map(Some) };
        let Some(first_newline) = first_newline else {
            cut = block;
            continue;
        };
        let whole = first_newline.map_or(&block[..], |i| &block[i + 1..]);
        for line in whole.rsplit(|&b| b == b'\n') {
            if !visit(line) {
                return Ok(());
            }
        }
        cut = first_newline.map_or_else(Vec::new, |i| block[..i].to_vec());
    }
    Ok(())
}

/// The receipt log opened for reading (`None`: there is none yet).
fn open_log(root: &Path) -> Result<Option<std::fs::File>> {
    match durable::open_engine_read(root, &layout::join(root, layout::RECEIPTS)) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(nofollow::io_error("reading", layout::RECEIPTS, e)),
    }
}

/// The whole receipt log (empty when there is none yet): `verify` and the key index.
fn read_log(root: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    if let Some(mut file) = open_log(root)? {
        file.read_to_end(&mut bytes).map_err(|e| Error::io("reading", layout::RECEIPTS, e))?;
    }
    Ok(bytes)
}

/// Every idempotency key of an ok receipt in the log's first `len` bytes (`first_with_key`).
fn index_keys(root: &Path, len: u64) -> Result<HashMap<String, Receipt>> {
    let bytes = read_log(root)?;
    let mut index = HashMap::new();
    let seen = &bytes[..(len as usize).min(bytes.len())];
    for line in seen.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Ok(receipt) = serde_json::from_slice::<Receipt>(line) {
            index_key(&mut index, &receipt);
        }
    }
    Ok(index)
}

/// Keeps `receipt` under its idempotency key when it is ok and the first with that key.
fn index_key(index: &mut HashMap<String, Receipt>, receipt: &Receipt) {
    if receipt.status == "ok"
        && let Some(key) = receipt.idempotency_key.clone().filter(|k| !k.is_empty())
    {
        index.entry(key).or_insert_with(|| receipt.clone());
    }
}

pub(crate) fn hash_line(line: &[u8]) -> String {
    crate::hex::encode(blake3::hash(line).as_bytes())
}

impl ReceiptLog {
    /// The chain's tip from the receipt file (if any), read back from its end, so opening a
    /// vault costs O(1) in its history: as `catch_up` reads it, the newest line that is JSON
    /// gives the sequence number and the hash the next receipt chains to (empty and other
    /// lines move nothing), and a torn last line (a killed append) is left out.
    pub(crate) fn load(root: &Path) -> Result<Self> {
        let mut log = ReceiptLog { last_hash: GENESIS.to_string(), ..Default::default() };
        let Some(mut file) = open_log(root)? else { return Ok(log) };
        let io = |e| Error::io("reading", layout::RECEIPTS, e);
        let size = file.metadata().map_err(io)?.len();
        let mut torn: Option<usize> = None;
        lines_newest_first(&mut file, |line| {
            if torn.is_none() {
                torn = Some(line.len());
                return true;
            }
            let seq = serde_json::from_slice::<Receipt>(line)
                .map(|receipt| receipt.seq)
                .ok()
                .or_else(|| serde_json::from_slice::<Value>(line).ok().map(|v| v.get("seq").and_then(Value::as_u64).unwrap_or(0)));
            let Some(seq) = seq else { return true };
            log.last_seq = seq;
            log.last_hash = hash_line(line);
            false
        })
        .map_err(io)?;
        log.len = size - torn.unwrap_or(0) as u64;
        Ok(log)
    }

    /// The ok receipt that first used idempotency `key`. The first ask in a process reads the
    /// log up to what this process has seen (O(history), once); later receipts keep the index.
    pub(crate) fn first_with_key(&mut self, root: &Path, key: &str) -> Result<Option<&Receipt>> {
        if self.by_key.is_none() {
            self.by_key = Some(index_keys(root, self.len)?);
        }
        Ok(self.by_key.as_ref().and_then(|index| index.get(key)))
    }

    /// Reads receipts appended since `len` (by another process) and returns their paths.
    pub(crate) fn catch_up(&mut self, root: &Path) -> Result<Vec<String>> {
        use std::io::{Read, Seek, SeekFrom};
        let Some(mut file) = open_log(root)? else { return Ok(Vec::new()) };
        let size = file.metadata().map_err(|e| Error::io("reading", layout::RECEIPTS, e))?.len();
        let mut touched = Vec::new();
        if size < self.len {
            // The file shrank (restored from backup?): index it again from the start.
            *self = ReceiptLog { last_hash: GENESIS.to_string(), ..Default::default() };
        }
        if size == self.len {
            return Ok(touched);
        }
        // Only the bytes appended since the last look are read: O(new receipts), not O(history).
        let start = self.len as usize;
        let mut tail = Vec::with_capacity((size - self.len) as usize);
        file.seek(SeekFrom::Start(self.len))
            .and_then(|_| file.read_to_end(&mut tail))
            .map_err(|e| Error::io("reading", layout::RECEIPTS, e))?;
        let tail = &tail[..];
        let complete = tail.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in tail[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<Receipt>(line) {
                Ok(receipt) => {
                    touched.push(receipt.path.clone());
                    self.index(&receipt, hash_line(line));
                }
                // A JSON line this engine cannot type (another version's) still moves the chain
                // and the sequence on, and is never an idempotency replay; `verify` judges it.
                Err(_) => {
                    let Ok(value) = serde_json::from_slice::<Value>(line) else { continue };
                    self.last_seq = self.last_seq.max(value.get("seq").and_then(Value::as_u64).unwrap_or(0));
                    self.last_hash = hash_line(line);
                    touched.extend(value.get("path").and_then(Value::as_str).map(str::to_string));
                }
            }
        }
        self.len = (start + complete) as u64;
        Ok(touched)
    }

    fn index(&mut self, receipt: &Receipt, hash: String) {
        self.last_seq = self.last_seq.max(receipt.seq);
        self.last_hash = hash;
        if let Some(index) = self.by_key.as_mut() {
            index_key(index, receipt);
        }
    }

    /// Whether a receipt with `seq` is already in the log (recovery uses this).
    pub(crate) fn contains_seq(&self, seq: u64) -> bool {
        seq <= self.last_seq
    }

    /// Chains and appends a receipt (fills `prev`); `durable` fsyncs it. Returns the final receipt.
    pub(crate) fn append(&mut self, root: &Path, mut receipt: Receipt, durable: bool) -> Result<Receipt> {
        receipt.prev = Some(self.last_hash.clone());
        let mut line = serde_json::to_vec(&receipt).map_err(|e| Error::io("encoding", layout::RECEIPTS, std::io::Error::other(e)))?;
        let hash = hash_line(&line);
        line.push(b'\n');
        let path = layout::join(root, layout::RECEIPTS);
        durable::truncate_and_append_unsynced(root, &path, self.len, &line)?;
        if durable {
            durable::sync_all_paths(root, &[path], &[])?;
        }
        self.len += line.len() as u64;
        // Only an ok receipt with an idempotency key is kept in memory.
        self.index(&receipt, hash);
        Ok(receipt)
    }

    /// The newest `limit` receipts with `seq > after_seq`, oldest first: the log is read back
    /// from its end until `limit` are found (O(limit), not O(history), when there are).
    pub(crate) fn history(root: &Path, limit: usize, after_seq: u64) -> Result<Vec<Value>> {
        let mut out: Vec<Value> = Vec::new();
        let Some(mut file) = open_log(root)?.filter(|_| limit > 0) else { return Ok(out) };
        lines_newest_first(&mut file, |line| {
            let receipt = serde_json::from_str::<Value>(&String::from_utf8_lossy(line)).ok();
            out.extend(receipt.filter(|v| v.get("seq").and_then(Value::as_u64).is_some_and(|s| s > after_seq)));
            out.len() < limit
        })
        .map_err(|e| Error::io("reading", layout::RECEIPTS, e))?;
        out.reverse();
        Ok(out)
    }

    /// The receipts P.O.W.E.R. left in a vault it served (`.power/memory-history.jsonl`,
    /// reference §4.4), oldest first, each as its line holds it; only lines that are objects
    /// of strings (its contract: content-free, every value a string) are taken. Never written.
    pub(crate) fn power_history(root: &Path) -> Result<Vec<Value>> {
        let Some(bytes) = crate::store::beneath::read(root, layout::POWER_HISTORY)? else { return Ok(Vec::new()) };
        Ok(String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty() && o.values().all(Value::is_string)))
            .collect())
    }

    /// Checks the whole chain: every line parses, `seq` is +1, `prev` hashes the line before.
    pub(crate) fn verify(root: &Path) -> Result<ChainReport> {
        Ok(verify_chain(&read_log(root)?))
    }

    /// The ok receipt of the transaction that applied proposal `proposal_id`, read back from the
    /// log's end and stopping at receipts written before `since` (the proposal's creation; a
    /// minute's slack for clocks): O(receipts since the proposal was made).
    pub(crate) fn applying(root: &Path, proposal_id: &str, since: &str) -> Result<Option<Receipt>> {
        let since = chrono::DateTime::parse_from_rfc3339(since).ok().map(|t| t - chrono::Duration::seconds(60));
        let mut found = None;
        let Some(mut file) = open_log(root)? else { return Ok(None) };
        lines_newest_first(&mut file, |line| {
            let Ok(receipt) = serde_json::from_slice::<Receipt>(line) else { return true };
            if receipt.status == "ok" && receipt.proposal_id.as_deref() == Some(proposal_id) {
                found = Some(receipt);
                return false;
            }
            let older = chrono::DateTime::parse_from_rfc3339(&receipt.at).ok().zip(since).is_some_and(|(at, since)| at < since);
            !older
        })
        .map_err(|e| Error::io("reading", layout::RECEIPTS, e))?;
        Ok(found)
    }

    /// The raw lines (without their newline) of the receipts with `seq > after_seq`, oldest
    /// first: read back from the log's end, O(lines returned).
    pub(crate) fn lines_after(root: &Path, after_seq: u64) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::new();
        let Some(mut file) = open_log(root)? else { return Ok(out) };
        lines_newest_first(&mut file, |line| {
            let seq = serde_json::from_slice::<Value>(line).ok().and_then(|v| v.get("seq").and_then(Value::as_u64));
            match seq {
                Some(seq) if seq > after_seq => {
                    out.push((seq, line.to_vec()));
                    true
                }
                Some(_) => false,
                None => true,
            }
        })
        .map_err(|e| Error::io("reading", layout::RECEIPTS, e))?;
        out.reverse();
        Ok(out)
    }
}

impl ReceiptLog {
    /// The receipts dated `from` or later, counted per UTC day: the log read back from its end
    /// until a receipt a day older than `from` (a day's slack for clocks) or `cap` receipts
    /// (`cut`): O(receipts in the window), never the whole history.
    pub(crate) fn days(root: &Path, from: chrono::NaiveDate, cap: usize) -> Result<DayCounts> {
        let mut counts = DayCounts::default();
        let Some(mut file) = open_log(root)? else { return Ok(counts) };
        let io = |e| Error::io("reading", layout::RECEIPTS, e);
        let size = file.metadata().map_err(io)?.len();
        let slack = from.pred_opt().unwrap_or(from);
        let (mut seen, mut torn) = (0usize, None::<usize>);
        lines_newest_first_before(&mut file, size, |line| {
            if torn.is_none() {
                torn = Some(line.len());
                return true;
            }
            if line.is_empty() {
                return true;
            }
            if seen == cap {
                counts.cut = true;
                return false;
            }
            seen += 1;
            let Ok(fields) = serde_json::from_slice::<DayFields>(line) else { return true };
            match fields.date() {
                Some(date) if date < slack => false,
                Some(date) => {
                    counts.add(&fields, date, from);
                    true
                }
                None => true,
            }
        })
        .map_err(io)?;
        counts.len = size - torn.unwrap_or(0) as u64;
        Ok(counts)
    }

    /// Brings `counts` up to the log: the receipts appended since `counts.len`, read forward
    /// (O(new receipts)); `false` when the log is shorter than the counts reach (rewritten or
    /// restored: the caller counts it again).
    pub(crate) fn days_catch_up(root: &Path, counts: &mut DayCounts, from: chrono::NaiveDate) -> Result<bool> {
        use std::io::{Read, Seek, SeekFrom};
        let Some(mut file) = open_log(root)? else { return Ok(counts.len == 0) };
        let io = |e| Error::io("reading", layout::RECEIPTS, e);
        let size = file.metadata().map_err(io)?.len();
        if size < counts.len {
            return Ok(false);
        }
        if size == counts.len {
            return Ok(true);
        }
        let mut tail = Vec::with_capacity((size - counts.len) as usize);
        file.seek(SeekFrom::Start(counts.len)).and_then(|_| Read::take(&mut file, size - counts.len).read_to_end(&mut tail)).map_err(io)?;
        let complete = tail.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in tail[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            counts.add_line(line, from);
        }
        counts.len += complete as u64;
        Ok(true)
    }
}

/// Checks that `appended` continues a chain whose last line is `before` (`None`: the chain's
/// start): every line parses, `prev` hashes the line before and `seq` is one more. The remote's
/// gate checks pushed receipt lines with it (`replicate::gate`).
pub(crate) fn verify_continuation(before: Option<&[u8]>, appended: &[u8]) -> std::result::Result<(), String> {
    if !appended.is_empty() && !appended.ends_with(b"\n") {
        return Err("the last receipt line is incomplete".into());
    }
    let (mut prev, mut seq) = match before {
        Some(line) => {
            let value: Value =
                serde_json::from_slice(line).map_err(|_| "the receipt line before the pushed ones is not JSON".to_string())?;
            (hash_line(line), value.get("seq").and_then(Value::as_u64).map(|s| s + 1))
        }
        None => (GENESIS.to_string(), None),
    };
    for (i, line) in appended.split(|&b| b == b'\n').filter(|l| !l.is_empty()).enumerate() {
        let value: Value = serde_json::from_slice(line).map_err(|_| format!("pushed receipt line {} is not JSON", i + 1))?;
        if value.get("prev").and_then(Value::as_str) != Some(prev.as_str()) {
            return Err(format!("pushed receipt line {} does not continue the chain (prev does not hash the line before)", i + 1));
        }
        let got = value.get("seq").and_then(Value::as_u64).ok_or_else(|| format!("pushed receipt line {} has no seq", i + 1))?;
        if let Some(want) = seq
            && got != want
        {
            return Err(format!("pushed receipt line {} has seq {got}, expected {want}", i + 1));
        }
        seq = Some(got + 1);
        prev = hash_line(line);
    }
    Ok(())
}

/// Checks one chain's bytes: every line parses, `seq` is +1, `prev` hashes the line before.
pub(crate) fn verify_chain(bytes: &[u8]) -> ChainReport {
    let mut problems = Vec::new();
    let mut prev = GENESIS.to_string();
    let mut expected_seq = None;
    let mut count = 0;
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        problems.push(ChainProblem { line: bytes.split(|&b| b == b'\n').count(), message: "the last line is incomplete".into() });
    }
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate().filter(|(_, l)| !l.is_empty()) {
        count += 1;
        let n = i + 1;
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            problems.push(ChainProblem { line: n, message: "not valid JSON".into() });
            prev = hash_line(line);
            continue;
        };
        if value.get("prev").and_then(Value::as_str) != Some(prev.as_str()) {
            problems.push(ChainProblem { line: n, message: "prev does not hash the previous receipt".into() });
        }
        match value.get("seq").and_then(Value::as_u64) {
            Some(seq) => {
                if let Some(want) = expected_seq
                    && seq != want
                {
                    problems.push(ChainProblem { line: n, message: format!("seq {seq}, expected {want}") });
                }
                expected_seq = Some(seq + 1);
            }
            None => problems.push(ChainProblem { line: n, message: "no seq".into() }),
        }
        prev = hash_line(line);
    }
    ChainReport { receipts: count, ok: problems.is_empty(), problems, files_checked: None, replicas: Vec::new() }
}

impl ReceiptLog {
    /// Compares every note named by an ok receipt with the newest ok receipt that changed it:
    /// the file's sha256 must be that receipt's `after_sha256` (a removal's is the empty text's,
    /// and the file must be gone or empty). A mismatch means the file changed outside the
    /// engine, or a write was acknowledged that did not land. Reads each such note once;
    /// a note reached through a symbolic link is a problem, never read.
    pub(crate) fn verify_files(root: &Path, report: &mut ChainReport) -> Result<()> {
        let text = String::from_utf8_lossy(&read_log(root)?).into_owned();
        // path → (line, after_sha256) of the newest ok receipt that changed it.
        let mut newest: std::collections::BTreeMap<String, (usize, String)> = std::collections::BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let Ok(receipt) = serde_json::from_str::<Value>(line) else { continue };
            if receipt.get("status").and_then(Value::as_str) != Some("ok") {
                continue;
            }
            let notes: Vec<&Value> = match receipt.get("notes").and_then(Value::as_array) {
                Some(notes) => notes.iter().collect(),
                None => vec![&receipt],
            };
            for note in notes {
                if let (Some(p), Some(after)) = (note.get("path").and_then(Value::as_str), note.get("after_sha256").and_then(Value::as_str))
                {
                    newest.insert(p.to_string(), (i + 1, after.to_string()));
                }
            }
        }
        let empty = crate::write::sha256_hex(b"");
        for (note, (line, after)) in &newest {
            let found = match crate::note::path::VaultPath::parse_walked(note) {
                Err(_) => Err("the receipt's path is not a vault path".to_string()),
                Ok(vault_path) => match crate::store::nofollow::resolve_safe(root, vault_path.as_str()) {
                    Err(e) => Err(e.to_string()),
                    Ok(_) => match crate::store::beneath::read(root, vault_path.as_str()) {
                        Ok(bytes) => Ok(bytes.map(|bytes| crate::write::sha256_hex(&bytes))),
                        Err(e) => Err(format!("cannot be read: {e}")),
                    },
                },
            };
            let message = match found {
                Err(reason) => Some(format!("{note}: {reason}")),
                Ok(None) if *after == empty => None,
                Ok(None) => Some(format!("{note}: the file is missing; the receipt says sha256 {after}")),
                Ok(Some(hash)) if hash == *after => None,
                Ok(Some(hash)) => Some(format!("{note}: the file's sha256 is {hash}, the newest ok receipt says {after}")),
            };
            if let Some(message) = message {
                report.problems.push(ChainProblem { line: *line, message });
            }
        }
        report.files_checked = Some(newest.len());
        report.ok = report.problems.is_empty();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
