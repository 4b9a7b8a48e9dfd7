//! Knowledge time: when the vault learned a memory change, read from its receipt.
//!
//! Every memory transaction carries the idempotency key `ctxvault:<op>`, and every fact it
//! records in a note names its `op`. The receipt of that transaction holds its commit time
//! (`at`), so "what had the vault recorded by K" compares K with receipt times, never with
//! anything a note claims. The receipt log is read incrementally from the last byte seen.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::store::layout;

/// The idempotency-key prefix of memory transactions.
pub(crate) const KEY_PREFIX: &str = "ctxvault:";

/// Commit times of memory operations, by op id.
#[derive(Debug, Default)]
pub(crate) struct KnownTimes {
    by_op: HashMap<String, DateTime<Utc>>,
    /// Bytes of the receipt log already read.
    read_to: u64,
    /// Ops learned since `take_learned` last ran (the episode index files them again).
    learned: Vec<String>,
    /// Whether every time was forgotten since `take_learned` last ran (the log was replaced).
    forgot: bool,
}

/// What `KnownTimes` learned since it was last asked.
#[derive(Debug, Default)]
pub(crate) struct Learned {
    pub ops: Vec<String>,
    /// Times were forgotten and read again: every op may have moved.
    pub everything: bool,
}

impl KnownTimes {
    /// When `op` was committed (`None`: no receipt names it, e.g. a note written by hand).
    pub fn of(&self, op: &str) -> Option<DateTime<Utc>> {
        self.by_op.get(op).copied()
    }

    /// Records a receipt this process just received.
    pub(crate) fn record_receipt(&mut self, receipt: &Value) {
        if let Some((op, at)) = memory_op_of(receipt)
            && self.by_op.insert(op.clone(), at) != Some(at)
        {
            self.learned.push(op);
        }
    }

    /// The ops whose time was learned (or forgotten) since the last call.
    pub(crate) fn take_learned(&mut self) -> Learned {
        Learned { ops: std::mem::take(&mut self.learned), everything: std::mem::take(&mut self.forgot) }
    }

    /// Reads receipts appended since the last call (by any process).
    pub(crate) fn catch_up(&mut self, root: &Path) -> Result<()> {
        let path = layout::join(root, layout::RECEIPTS);
        // Through the engine folder's handle: a `.paravault` swapped for a link is never read.
        let mut file = match crate::store::durable::open_engine_read(root, &path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("reading", layout::RECEIPTS, e)),
        };
        let len = file.metadata().map_err(|e| Error::io("reading", layout::RECEIPTS, e))?.len();
        if len < self.read_to {
            // The log was replaced (never done by the engine): read it again from the start.
            self.read_to = 0;
            self.by_op.clear();
            self.learned.clear();
            self.forgot = true;
        }
        if len == self.read_to {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.read_to)).map_err(|e| Error::io("reading", layout::RECEIPTS, e))?;
        let mut bytes = Vec::with_capacity((len - self.read_to) as usize);
        file.read_to_end(&mut bytes).map_err(|e| Error::io("reading", layout::RECEIPTS, e))?;
        // Only whole lines: a receipt being appended right now is read on the next call.
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else { return Ok(()) };
        for line in bytes[..end].split(|b| *b == b'\n') {
            if let Ok(receipt) = serde_json::from_slice::<Value>(line) {
                self.record_receipt(&receipt);
            }
        }
        self.read_to += end as u64 + 1;
        Ok(())
    }
}

/// The memory op and commit time of an ok receipt of a memory transaction.
fn memory_op_of(receipt: &Value) -> Option<(String, DateTime<Utc>)> {
    if receipt.get("status").and_then(Value::as_str) != Some("ok") {
        return None;
    }
    let op = receipt.get("idempotency_key")?.as_str()?.strip_prefix(KEY_PREFIX)?;
    let at = DateTime::parse_from_rfc3339(receipt.get("at")?.as_str()?).ok()?.with_timezone(&Utc);
    Some((op.to_string(), at))
}
