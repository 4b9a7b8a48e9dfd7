//! The INFRA-1 broker's records under `.paravault/broker/` (engine state: per machine, never
//! committed; written only through `store::durable`): one per idempotency key (the request it
//! stands for and, once the run ended, its answer), one per run (`run_<sha256>`, what `verify`
//! checks), one per approval claimed (created no-clobber: an approval is used once), and the
//! last dry run of each target.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::hex::sha256_hex;
use crate::store::{durable, layout, nofollow};

const KEY_SCHEMA: &str = "paravault.broker-key.v1";
const RUN_SCHEMA: &str = "paravault.broker-run.v1";
const CLAIM_SCHEMA: &str = "paravault.broker-approval-claim.v1";
const DRY_RUN_SCHEMA: &str = "paravault.broker-dry-run.v1";

/// Where a keyed replicate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// Claimed and running (or its broker stopped while it ran: the outcome is unknown).
    Running,
    /// Ended: `answer` is the receipt or the block every replay gets.
    Ended,
}

/// One idempotency key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecord {
    pub schema: String,
    pub idempotency_key: String,
    /// The digest of the request it stands for (`infra::approval_subject`).
    pub subject_digest: String,
    pub state: KeyState,
    pub started_at: String,
    /// `{"receipt": …}` or `{"block": …}` once ended.
    #[serde(default)]
    pub answer: Option<Value>,
}

/// One replicate run that pushed (or found in sync) a head.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub schema: String,
    pub run_id: String,
    pub target: String,
    pub branch: String,
    /// The branch head the run left on the remote.
    pub head: String,
    pub idempotency_key: String,
    pub receipt: Value,
}

/// An approval used by a replicate.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRecord {
    pub schema: String,
    pub approval_ref: String,
    pub idempotency_key: String,
    pub claimed_at: String,
}

/// The last dry run of a target.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DryRunRecord {
    pub schema: String,
    pub target: String,
    pub idempotency_key: Option<String>,
    /// This replica's head the dry run saw.
    pub head: Option<String>,
    /// The remote's head the dry run fetched.
    pub remote_head: Option<String>,
    pub at: String,
}

/// The broker's records of one vault.
pub struct Records {
    root: PathBuf,
    /// The vault's clock, which stamps every record.
    clock: crate::clock::Clock,
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(value).map_err(|e| Error::io("encoding", "broker record", std::io::Error::other(e)))
}

impl Records {
    pub fn new(root: &Path, clock: crate::clock::Clock) -> Records {
        Records { root: root.to_path_buf(), clock }
    }

    /// `.paravault/broker/<kind>/<sha256 of name>.json`: names are hashed, so no caller text
    /// ever becomes a path.
    fn path(&self, kind: &str, name: &str) -> (PathBuf, String) {
        let rel = format!("{}/{kind}/{}.json", layout::BROKER_DIR, sha256_hex(name.as_bytes()));
        (layout::join(&self.root, &rel), rel)
    }

    fn dir(&self, kind: &str) -> Result<()> {
        nofollow::refuse_symlinked_state(&self.root)?;
        durable::create_dir_all(&self.root, &layout::join(&self.root, &format!("{}/{kind}", layout::BROKER_DIR)))
    }

    fn read<T: for<'de> Deserialize<'de>>(&self, kind: &str, name: &str) -> Result<Option<T>> {
        let (path, rel) = self.path(kind, name);
        match durable::read_engine_file(&self.root, &path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::io("reading", &rel, std::io::Error::new(std::io::ErrorKind::InvalidData, e))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(nofollow::io_error("reading", &rel, e)),
        }
    }

    /// Creates the record unless one exists (`Ok(false)` then: someone else holds it).
    fn create<T: Serialize>(&self, kind: &str, name: &str, value: &T) -> Result<bool> {
        self.dir(kind)?;
        let (path, _) = self.path(kind, name);
        durable::create_new(&self.root, &path, &encode(value)?)
    }

    fn replace<T: Serialize>(&self, kind: &str, name: &str, value: &T) -> Result<()> {
        self.dir(kind)?;
        let (path, _) = self.path(kind, name);
        durable::replace(&self.root, &path, &encode(value)?)
    }

    fn remove(&self, kind: &str, name: &str) -> Result<()> {
        let (path, _) = self.path(kind, name);
        durable::remove_file(&self.root, &path)
    }

    pub fn key(&self, key: &str) -> Result<Option<KeyRecord>> {
        Ok(self.read::<KeyRecord>("keys", key)?.filter(|r| r.schema == KEY_SCHEMA && r.idempotency_key == key))
    }

    /// Claims `key` for a run of the request `subject_digest`; `Ok(false)` when it is taken.
    pub fn claim_key(&self, key: &str, subject_digest: &str) -> Result<bool> {
        let record = KeyRecord {
            schema: KEY_SCHEMA.into(),
            idempotency_key: key.into(),
            subject_digest: subject_digest.into(),
            state: KeyState::Running,
            started_at: self.clock.stamp(chrono::SecondsFormat::Millis),
            answer: None,
        };
        self.create("keys", key, &record)
    }

    /// Records the run's answer under its key: every replay gets it.
    pub fn end_key(&self, key: &str, answer: Value) -> Result<()> {
        let Some(mut record) = self.key(key)? else { return Ok(()) };
        record.state = KeyState::Ended;
        record.answer = Some(answer);
        self.replace("keys", key, &record)
    }

    /// Gives a claimed key back (the run did not start).
    pub fn release_key(&self, key: &str) -> Result<()> {
        self.remove("keys", key)
    }

    pub fn run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        Ok(self.read::<RunRecord>("runs", run_id)?.filter(|r| r.schema == RUN_SCHEMA && r.run_id == run_id))
    }

    pub fn save_run(&self, run_id: &str, target: &str, branch: &str, head: &str, key: &str, receipt: &Value) -> Result<()> {
        let record = RunRecord {
            schema: RUN_SCHEMA.into(),
            run_id: run_id.into(),
            target: target.into(),
            branch: branch.into(),
            head: head.into(),
            idempotency_key: key.into(),
            receipt: receipt.clone(),
        };
        self.replace("runs", run_id, &record)
    }

    pub fn is_claimed(&self, approval_ref: &str) -> Result<bool> {
        Ok(self.read::<ClaimRecord>("approvals", approval_ref)?.is_some())
    }

    /// Claims an approval for the run of `key`, atomically; `Ok(false)` when it was used.
    pub fn claim_approval(&self, approval_ref: &str, key: &str) -> Result<bool> {
        let record = ClaimRecord {
            schema: CLAIM_SCHEMA.into(),
            approval_ref: approval_ref.into(),
            idempotency_key: key.into(),
            claimed_at: self.clock.stamp(chrono::SecondsFormat::Millis),
        };
        self.create("approvals", approval_ref, &record)
    }

    /// Gives an approval back (the run it was claimed for did not start).
    pub fn release_approval(&self, approval_ref: &str) -> Result<()> {
        self.remove("approvals", approval_ref)
    }

    pub fn dry_run(&self, target: &str) -> Result<Option<DryRunRecord>> {
        Ok(self.read::<DryRunRecord>("dry-runs", target)?.filter(|r| r.schema == DRY_RUN_SCHEMA && r.target == target))
    }

    pub fn save_dry_run(&self, target: &str, key: Option<&str>, head: Option<&str>, remote_head: Option<&str>) -> Result<()> {
        let record = DryRunRecord {
            schema: DRY_RUN_SCHEMA.into(),
            target: target.into(),
            idempotency_key: key.map(str::to_string),
            head: head.map(str::to_string),
            remote_head: remote_head.map(str::to_string),
            at: self.clock.stamp(chrono::SecondsFormat::Millis),
        };
        self.replace("dry-runs", target, &record)
    }
}
