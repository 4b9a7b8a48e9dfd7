//! The per-task event journal: append-only, hash-chained JSON lines, validated on every load.
//!
//! `.paravault/tasks/events/<task_id>.jsonl` holds one event per change. `sequence` is strictly
//! +1 from 1 and equals the revision of the snapshot the event carries in `result` (offset by
//! P.O.W.E.R.'s revision when the first event imported the task: `IMPORT_ACTION`);
//! `payload_digest` is the sha256 of the canonical JSON of the event without that field;
//! `prev_event_digest` is the previous event's `payload_digest` (the genesis digest for the
//! first). Any deviation is a typed `task_journal_integrity` error and nothing is written.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::store::{durable, layout};
use crate::write::sha256_hex;

/// `prev_event_digest` of the first event.
pub(crate) const GENESIS_DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Schema tag of every event.
pub(crate) const EVENT_SCHEMA: &str = "paravault.task-event.v1";
/// The action of a journal's first event when the task was imported from P.O.W.E.R.: its
/// result keeps P.O.W.E.R.'s revision `r`, and event `n` then carries revision `r + n - 1`.
pub(crate) const IMPORT_ACTION: &str = "import";

/// Canonical JSON: object keys sorted at every level, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for key in keys {
                    out.insert(key.clone(), sorted(&map[key]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // With serde_json's `preserve_order` feature a Map keeps insertion order, which `sorted`
    // makes the sorted order; without it a Map is a BTreeMap. Either way the output is sorted.
    serde_json::to_string(&sorted(value)).unwrap_or_default()
}

/// sha256 hex of the canonical JSON of `value`.
pub fn digest(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// One validated event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub idempotency_key: String,
    pub fingerprint: String,
    pub payload_digest: String,
    pub result: Value,
}

/// A task's journal as read and validated.
#[derive(Debug, Default)]
pub(crate) struct TaskJournal {
    pub events: Vec<Event>,
}

pub(crate) fn events_path(root: &Path, task_id: &str) -> PathBuf {
    layout::join(root, layout::TASK_EVENTS_DIR).join(format!("{task_id}.jsonl"))
}

pub(crate) fn snapshot_path(root: &Path, task_id: &str) -> PathBuf {
    layout::join(root, layout::TASKS_DIR).join(format!("{task_id}.json"))
}

fn integrity(task_id: &str, reason: impl Into<String>) -> Error {
    Error::TaskJournalIntegrity { task_id: task_id.to_string(), reason: reason.into() }
}

impl TaskJournal {
    /// Reads and validates the journal of `task_id`; `None` when the task has neither a journal
    /// nor a snapshot. A snapshot without a journal is an integrity error.
    pub fn load(root: &Path, task_id: &str) -> Result<Option<Self>> {
        let path = events_path(root, task_id);
        let rel = format!("{}/{task_id}.jsonl", layout::TASK_EVENTS_DIR);
        let bytes = match durable::read_engine_file(root, &path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Looked up through the folder's handle too, never through a swapped folder.
                return match durable::open_engine_read(root, &snapshot_path(root, task_id)) {
                    Ok(_) => Err(integrity(task_id, "the snapshot exists but the event journal is missing")),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(crate::store::nofollow::io_error("reading", &format!("{}/{task_id}.json", layout::TASKS_DIR), e)),
                };
            }
            Err(e) => return Err(crate::store::nofollow::io_error("reading", &rel, e)),
        };
        if bytes.is_empty() {
            return Err(integrity(task_id, "the event journal is empty"));
        }
        if !bytes.ends_with(b"\n") {
            return Err(integrity(task_id, "the last event line is incomplete"));
        }
        let mut events = Vec::new();
        let mut prev = GENESIS_DIGEST.to_string();
        // Revision = sequence + base; base is 0 unless the first event imported a task.
        let mut base = 0;
        for (i, line) in bytes[..bytes.len() - 1].split(|&b| b == b'\n').enumerate() {
            let n = i + 1;
            let value: Value = serde_json::from_slice(line).map_err(|_| integrity(task_id, format!("line {n} is not valid JSON")))?;
            let Value::Object(mut map) = value else { return Err(integrity(task_id, format!("line {n} is not a JSON object"))) };
            let str_field = |map: &Map<String, Value>, key: &str| -> Result<String> {
                map.get(key).and_then(Value::as_str).map(str::to_string).ok_or_else(|| integrity(task_id, format!("line {n} has no {key}")))
            };
            if str_field(&map, "schema")? != EVENT_SCHEMA {
                return Err(integrity(task_id, format!("line {n} has an unknown schema")));
            }
            if str_field(&map, "task_id")? != task_id {
                return Err(integrity(task_id, format!("line {n} belongs to another task")));
            }
            let sequence =
                map.get("sequence").and_then(Value::as_u64).ok_or_else(|| integrity(task_id, format!("line {n} has no sequence")))?;
            if sequence != n as u64 {
                return Err(integrity(task_id, format!("line {n} has sequence {sequence} (gap or reorder)")));
            }
            if str_field(&map, "prev_event_digest")? != prev {
                return Err(integrity(task_id, format!("line {n}: prev_event_digest does not chain to the previous event")));
            }
            let claimed = str_field(&map, "payload_digest")?;
            map.remove("payload_digest");
            let payload = Value::Object(map);
            if digest(&payload) != claimed {
                return Err(integrity(task_id, format!("line {n}: payload_digest does not match the event")));
            }
            let Value::Object(map) = payload else { unreachable!("payload was built from an object") };
            let result = map.get("result").cloned().unwrap_or(Value::Null);
            let task = &result;
            let revision = task.get("revision").and_then(Value::as_u64);
            if n == 1 && map.get("action").and_then(Value::as_str) == Some(IMPORT_ACTION) {
                base = revision.unwrap_or(1).saturating_sub(1);
            }
            if revision != Some(sequence + base) || task.get("task_id").and_then(Value::as_str) != Some(task_id) {
                return Err(integrity(task_id, format!("line {n}: the result snapshot does not match the event")));
            }
            events.push(Event {
                idempotency_key: str_field(&map, "idempotency_key")?,
                fingerprint: str_field(&map, "fingerprint")?,
                payload_digest: claimed.clone(),
                result,
            });
            prev = claimed;
        }
        Ok(Some(TaskJournal { events }))
    }

    /// Compares the snapshot file with the journal. A snapshot behind the journal (a crash
    /// between the journal append and the snapshot replace) is stale and rewritten on the next
    /// change; a snapshot that differs at the same revision, is ahead, or is not JSON is an
    /// integrity error. Returns whether the snapshot needs rewriting.
    pub(crate) fn check_snapshot(&self, root: &Path, task_id: &str) -> Result<bool> {
        let Some(current) = self.current() else { return Ok(false) };
        let bytes = match durable::read_engine_file(root, &snapshot_path(root, task_id)) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(Error::io("reading", format!("{}/{task_id}.json", layout::TASKS_DIR), e)),
        };
        let snapshot: Value = serde_json::from_slice(&bytes).map_err(|_| integrity(task_id, "the snapshot is not valid JSON"))?;
        let have = snapshot.get("revision").and_then(Value::as_u64).unwrap_or(0);
        let want = current.get("revision").and_then(Value::as_u64).unwrap_or(0);
        if have > want || (have == want && &snapshot != current) {
            return Err(integrity(task_id, "the snapshot does not match the event journal"));
        }
        Ok(have < want)
    }

    /// Rewrites the snapshot from the journal (after `check_snapshot` found it stale).
    pub(crate) fn rewrite_snapshot(&self, root: &Path, task_id: &str) -> Result<()> {
        let Some(current) = self.current() else { return Ok(()) };
        write_snapshot(root, task_id, current)
    }

    /// The current task snapshot (the last event's result).
    pub fn current(&self) -> Option<&Value> {
        self.events.last().map(|e| &e.result)
    }

    /// The event that used `key`, if any.
    pub(crate) fn by_key(&self, key: &str) -> Option<&Event> {
        self.events.iter().find(|e| !key.is_empty() && e.idempotency_key == key)
    }

    /// Appends the next event of `vault`'s task (durably: the commit point, stamped by the
    /// vault's clock), then replaces the snapshot.
    pub fn append(
        &mut self,
        vault: &crate::vault::Vault,
        task_id: &str,
        action: &str,
        key: &str,
        fingerprint: &str,
        result: Value,
    ) -> Result<()> {
        let (root, at) = (vault.root(), vault.clock().stamp(chrono::SecondsFormat::Micros));
        let sequence = self.events.len() as u64 + 1;
        let prev = self.events.last().map_or(GENESIS_DIGEST.to_string(), |e| e.payload_digest.clone());
        let mut event = json!({
            "schema": EVENT_SCHEMA,
            "task_id": task_id,
            "sequence": sequence,
            "action": action,
            "idempotency_key": key,
            "fingerprint": fingerprint,
            "at": at,
            "prev_event_digest": prev,
            "result": result,
        });
        let payload_digest = digest(&event);
        event["payload_digest"] = Value::String(payload_digest.clone());
        let mut line = canonical_json(&event).into_bytes();
        line.push(b'\n');
        durable::create_dir_all(root, &layout::join(root, layout::TASK_EVENTS_DIR))?;
        let path = events_path(root, task_id);
        let created = !path.exists();
        durable::append(root, &path, &line)?;
        if created && let Some(dir) = path.parent() {
            durable::fsync_dir(dir).map_err(|e| Error::io("syncing", layout::TASK_EVENTS_DIR, e))?;
        }
        write_snapshot(root, task_id, &result)?;
        self.events.push(Event { idempotency_key: key.to_string(), fingerprint: fingerprint.to_string(), payload_digest, result });
        Ok(())
    }
}

fn write_snapshot(root: &Path, task_id: &str, snapshot: &Value) -> Result<()> {
    let mut bytes =
        serde_json::to_vec_pretty(snapshot).map_err(|e| Error::io("encoding", task_id.to_string(), std::io::Error::other(e)))?;
    bytes.push(b'\n');
    durable::create_dir_all(root, &layout::join(root, layout::TASKS_DIR))?;
    durable::replace(root, &snapshot_path(root, task_id), &bytes)
}
