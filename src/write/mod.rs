//! The write transaction: every change to a vault's notes goes through `execute`, in order:
//!
//! 1. validate   — the request became a `Mutation` (typed path, full new text) before we got here.
//! 2. lock       — in-process mutex + cross-process file lock; catch up with other
//!    processes' receipts and finish any pending intent (crash recovery; another
//!    live process's applied intent is left to its own checkpoint for a while).
//! 3. check      — idempotency key replay/conflict, `require_absent`, `expected_sha256`.
//! 4. plan       — new note record, catalog pages, log.md entry, and the **lint gate** over the
//!    touched note and the links it changes, all on the in-memory model: a refusal
//!    costs no disk write.
//! 5. commit     — append the intent (every post-image + the receipt) to the journal and
//!    fdatasync it. **The commit point.** Before it, the vault is untouched; after
//!    it, recovery always finishes the transaction.
//! 6. apply      — rename the note, catalog pages and log.md entry into place (no fsync yet:
//!    the intent already holds their bytes).
//! 7. publish    — publish the next immutable search generation: for an FTS-only vault that is
//!    the active generation plus the journal's tail up to this intent (nothing to
//!    write: readers build it in memory, `search::tail`), and every
//!    `search.tail_writes_max` writes a *fold* into an on-disk generation; a dense
//!    vault publishes (and embeds) on every write.
//! 8. receipt    — append the hash-chained receipt.
//! 9. checkpoint — fsync every touched file and directory and the receipt log in parallel,
//!    then mark the intents done. Deferred for tail writes (the intent already
//!    makes them durable) to the next fold, `Vault::checkpoint_pending`, or drop.
//!
//! A failure before step 5 records a content-free `aborted` receipt naming the phase and error
//! code and changes nothing else. A failure after step 5 is finished by `recover` (at once,
//! and again on the next write or open if that fails too).

pub mod operations;
pub mod receipts;
pub(crate) mod recover;
pub mod replica;
pub(crate) mod writer;
pub use writer::LEFT_TO_OWNER_FOR;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::inventory::FileStamp;
use crate::inventory::{self, ModelView, NoteRecord, Overrun};
use crate::lint;
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::PageKind;
use crate::state::VaultState;
use crate::store::journal::{FileChange, Intent, PreImage, Record, SearchSnapshot, StoredRecord};
use crate::store::{faults, layout};
use receipts::{NoteHashes, RECEIPT_SCHEMA, Receipt};
pub(crate) use writer::Writer;
pub(crate) use writer::WriterGuard;

/// One note a transaction puts in place (`content`) or removes (`None`).
#[derive(Debug, Clone)]
pub struct NoteChange {
    pub path: VaultPath,
    pub content: Option<String>,
    pub require_absent: bool,
    pub expected_sha256: Option<String>,
}

/// A validated request: one or more note changes applied atomically.
#[derive(Debug, Clone)]
pub struct Mutation {
    /// Receipt operation name, e.g. `mcp.ingest_note`.
    pub operation: std::borrow::Cow<'static, str>,
    pub notes: Vec<NoteChange>,
    pub idempotency_key: Option<String>,
    pub proposal_id: Option<String>,
    /// The log.md entry (appended only when log.md exists).
    pub log_entry: Option<String>,
    /// Whether missing parent folders of written notes may be created (archive moves).
    pub create_folders: bool,
}

impl Mutation {
    /// A mutation of one note.
    pub fn single(operation: &'static str, path: VaultPath, content: String) -> Self {
        Mutation {
            operation: operation.into(),
            notes: vec![NoteChange { path, content: Some(content), require_absent: false, expected_sha256: None }],
            idempotency_key: None,
            proposal_id: None,
            log_entry: None,
            create_folders: false,
        }
    }

    /// The first note's path (the receipt's `path`).
    pub(crate) fn primary_path(&self) -> &str {
        self.notes.first().map_or("", |n| n.path.as_str())
    }

    /// sha256 over every (path, after) pair: what idempotency compares for a mutation of text
    /// the caller wrote (the receipt's `mutation_sha256`).
    pub(crate) fn fingerprint(&self) -> String {
        let pairs: Vec<(String, String)> = self
            .notes
            .iter()
            .map(|n| (n.path.to_string(), n.content.as_ref().map_or_else(|| "deleted".to_string(), |c| sha256_hex(c.as_bytes()))))
            .collect();
        sha256_hex(serde_json::to_string(&(self.operation.as_ref(), pairs)).unwrap_or_default().as_bytes())
    }

    /// sha256 over the operation, the notes' paths and the request their text was rendered
    /// from: what idempotency compares for a mutation whose text the engine rendered and
    /// stamped with its clock (`ingest_note`, `synthesize_session`), so the same request
    /// retried a second later is the same mutation (the receipt's `mutation_sha256`).
    pub(crate) fn request_fingerprint(&self, request: &Value) -> String {
        let paths: Vec<&str> = self.notes.iter().map(|n| n.path.as_str()).collect();
        sha256_hex(serde_json::to_string(&(self.operation.as_ref(), "request", paths, request)).unwrap_or_default().as_bytes())
    }
}

/// What a retry under the same idempotency key must match to replay the original receipt.
struct Identity {
    /// The fingerprint this write's receipt carries as `mutation_sha256`.
    sha256: String,
    /// For a rendered note, the fingerprint of its stamped text too: what receipts written
    /// before request fingerprints carry, so a retry of such a write still replays it (within
    /// the second its text was stamped, as it did then).
    text_sha256: Option<String>,
}

impl Identity {
    /// A mutation of text the caller wrote: the text is the request.
    fn of_text(mutation: &Mutation) -> Self {
        Identity { sha256: mutation.fingerprint(), text_sha256: None }
    }

    /// A mutation the engine rendered from `request`.
    fn of_request(mutation: &Mutation, request: &Value) -> Self {
        Identity { sha256: mutation.request_fingerprint(request), text_sha256: Some(mutation.fingerprint()) }
    }

    /// Whether a receipt's `mutation_sha256` names this write.
    fn matches(&self, recorded: Option<&str>) -> bool {
        recorded.is_some_and(|r| r == self.sha256 || self.text_sha256.as_deref() == Some(r))
    }
}

/// Lower-case hex sha256 (re-exported from the leaf `hex` for the modules that name it here).
pub use crate::hex::sha256_hex;

/// Per-phase timings, in milliseconds.
#[derive(Debug)]
struct Phases {
    started: Instant,
    last: Instant,
    done: BTreeMap<String, f64>,
}

impl Phases {
    fn start() -> Self {
        let now = Instant::now();
        Phases { started: now, last: now, done: BTreeMap::new() }
    }

    fn mark(&mut self, phase: &str) {
        let now = Instant::now();
        let ms = now.duration_since(self.last).as_secs_f64() * 1000.0;
        self.done.insert(phase.into(), (ms * 1000.0).round() / 1000.0);
        self.last = now;
    }

    fn total_ms(&self) -> String {
        format!("{:.3}", self.started.elapsed().as_secs_f64() * 1000.0)
    }
}

/// What a file the transaction replaces held when it was planned: its content identity (in
/// the intent, for recovery) and its stat identity (for the cheap re-check after the commit).
struct Seen {
    path: VaultPath,
    pre_image: PreImage,
    stamp: Option<FileStamp>,
    /// When the stamp was taken (for the racy-clean rule).
    seen_at: i128,
}

/// The after-images a plan put in the in-memory model, and the records they replaced. Dropped
/// before the write is confirmed (a refusal, a failed commit, an abandoned intent), it puts the
/// model back as it was: the disk was never touched. `keep` makes the after-images stay.
struct ModelChange<'v> {
    vault: &'v VaultState,
    previous: Vec<(VaultPath, Option<NoteRecord>)>,
}

impl ModelChange<'_> {
    /// The write is confirmed: the model keeps its after-images.
    fn keep(mut self) {
        self.previous.clear();
    }
}

impl Drop for ModelChange<'_> {
    fn drop(&mut self) {
        if !self.previous.is_empty() {
            let mut previous = Some(std::mem::take(&mut self.previous));
            let _ = self.vault.with_write_inventory_mut(|model| {
                put_back(model, previous.take().unwrap_or_default());
                Ok(())
            });
        }
    }
}

/// What the plan phase produced.
struct Plan<'v> {
    hashes: Vec<NoteHashes>,
    /// Every note and catalog page the transaction writes or removes, as it was planned.
    seen: Vec<Seen>,
    changes: Vec<FileChange>,
    /// The after-images in the model; put back unless the write is confirmed.
    model: ModelChange<'v>,
    /// The planned directories' renderer state, and the directories planned.
    catalog_state: crate::catalog::CatalogState,
    catalog_dirs: BTreeSet<String>,
    /// Orphan findings (the lint's rule) among the notes the write leaves in place.
    orphans: usize,
    counts: (usize, usize, usize),
    search_snapshot: SearchSnapshot,
}

/// Proof that a mutation passed the approval gate: the policy's `approvals:` rules were asked
/// about what its changes *are* (docs/governance.md, "What a rule governs"), and `approval` is
/// the person's decision when a `human` rule decided. Every write transaction takes one, so no
/// writer of any surface reaches the disk without the gate. Minted only by `approvals` (the
/// gate, above `write`) and, for new notes alone, by `Cleared::new_notes`; tests/it/tidy.rs
/// fails on any other constructor call.
#[must_use = "a clearance is spent by the write it was asked for"]
pub struct Cleared {
    approval: Option<Value>,
}

impl Cleared {
    /// The gate's clearance: `approval` is the receipt's `approval` object when a person
    /// approved. Called only from `src/approvals/` (tidy).
    pub(crate) fn by_the_approval_gate(approval: Option<Value>) -> Self {
        Cleared { approval }
    }

    /// The clearance of a mutation that `ingest_note` / `synthesize_session` (which live
    /// below the gate) make: cleared when no `human` rule decides any of its changes. Those
    /// writers never edit the goals worklist's goals, so a change to an existing worklist is
    /// taken as every goal lifecycle operation (the gate above compares goals; this cannot).
    /// A change a person must approve is refused with `proposal_required`,
    /// which names `propose_memory_change` (a proposal a person reviews) as the way.
    pub(crate) fn new_notes(vault: &VaultState, mutation: &Mutation) -> Result<Self> {
        let policy = &vault.policy().policy;
        let changes: Vec<crate::policy::approvals::RuledChange<'_>> = mutation
            .notes
            .iter()
            .map(|n| crate::policy::approvals::RuledChange {
                path: n.path.as_str(),
                touches_existing: !n.require_absent,
                removes: n.content.is_none(),
            })
            .collect();
        let governed = crate::policy::approvals::governed_operations(
            &policy.layout.archive_folder,
            None,
            &changes,
            &policy.goals.worklist_path,
            &crate::policy::approvals::Operation::GOAL_LIFECYCLE,
        );
        match crate::policy::approvals::approver_of(&policy.approvals, &governed) {
            (crate::policy::Approver::Human, Some(operation)) => {
                let path = governed.iter().find(|(o, _)| *o == operation).map(|(_, p)| p.clone()).unwrap_or_default();
                Err(Error::ProposalRequired { operation: operation.name(), path })
            }
            _ => Ok(Cleared { approval: None }),
        }
    }
}

/// Runs one write transaction the approval gate cleared and returns its receipt (with the
/// person's `approval` in the chain when one decided).
pub(crate) fn execute(vault: &VaultState, writer: &Writer, mutation: Mutation, cleared: Cleared) -> Result<Receipt> {
    let identity = Identity::of_text(&mutation);
    execute_with(vault, writer, mutation, identity, cleared.approval)
}

/// Runs one write transaction whose note text the engine rendered from `request` (the
/// caller's fields, without the idempotency key) and stamped with its clock: a retry under the
/// same key is compared by its request, not by the stamped text, so the same request a second
/// later replays the original receipt and a different one is `idempotency_conflict`.
pub(crate) fn execute_rendered(
    vault: &VaultState,
    writer: &Writer,
    mutation: Mutation,
    request: &Value,
    cleared: Cleared,
) -> Result<Receipt> {
    let identity = Identity::of_request(&mutation, request);
    execute_with(vault, writer, mutation, identity, cleared.approval)
}

/// The spine: each step takes the previous step's type, so none can be skipped or reordered.
/// A failure before the commit point records an aborted receipt (inside the step that failed).
fn execute_with(vault: &VaultState, writer: &Writer, mutation: Mutation, identity: Identity, approval: Option<Value>) -> Result<Receipt> {
    let mut phases = Phases::start();
    let mut writer = writer.lock(vault)?; // 2. lock (and recovery)
    phases.mark("lock");
    faults::crash_point("after_lock");
    let checked = match Checked::check(vault, &mut writer, mutation, identity)? {
        Check::Replay(receipt) => return Ok(*receipt), // 3. check: same key, same mutation
        Check::New(checked) => checked,
    };
    // A replica commits what a person changed in the touched files first, as itself.
    let touched: Vec<String> = checked.mutation.notes.iter().map(|n| n.path.to_string()).collect();
    replica::commit_outside_edits_before(vault, &mut writer, &touched);
    let planned = checked.plan(vault, &mut writer)?; // 4. plan (+ lint gate)
    phases.mark("plan");
    faults::crash_point("after_plan");
    let committed = planned.commit(vault, &mut writer, approval, &mut phases)?; // 5. commit + re-check
    let files: Vec<String> = committed.intent.changes.iter().map(|c| c.path().to_string()).collect();
    let receipt = committed.finish(vault, &mut writer, &mut phases)?; // 6-9. apply, publish, receipt, checkpoint
    replica::commit_transaction_after(vault, &writer, &receipt, &files); // 10. a replica's commit
    vault.owe_search();
    Ok(receipt)
}

/// What the check step found.
enum Check {
    /// The idempotency key already applied this very mutation: its original receipt.
    Replay(Box<Receipt>),
    /// A mutation to plan.
    New(Checked),
}

/// Step 3 passed: no receipt holds the mutation's idempotency key for another mutation.
struct Checked {
    mutation: Mutation,
    /// The receipt's `mutation_sha256`.
    fingerprint: String,
}

impl Checked {
    /// Step 3: idempotency replay or conflict (a conflict is refused with an aborted receipt).
    fn check(vault: &VaultState, writer: &mut WriterGuard<'_>, mutation: Mutation, identity: Identity) -> Result<Check> {
        match check_idempotency(vault, writer, &mutation, &identity) {
            Ok(Some(replayed)) => Ok(Check::Replay(Box::new(replayed))),
            Ok(None) => Ok(Check::New(Checked { mutation, fingerprint: identity.sha256 })),
            Err(error) => Err(abort(vault, writer, &mutation, "check", error)),
        }
    }

    /// Step 4: preconditions, after-images in the model, the lint gate, the catalog pages.
    fn plan<'v>(self, vault: &'v VaultState, writer: &mut WriterGuard<'_>) -> Result<Planned<'v>> {
        let planned = check_and_plan(vault, &self.mutation, || journal_folders(writer));
        match planned {
            Ok(plan) => Ok(Planned { mutation: self.mutation, fingerprint: self.fingerprint, plan }),
            Err(error) => Err(abort(vault, writer, &self.mutation, "plan", error)),
        }
    }
}

/// Step 4 done: the model holds the after-images (put back when this is dropped), nothing on
/// disk changed.
struct Planned<'v> {
    mutation: Mutation,
    fingerprint: String,
    plan: Plan<'v>,
}

impl<'v> Planned<'v> {
    /// Step 5: the intent (every post-image and the receipt) appended to the journal and
    /// fdatasynced: the commit point. Then the planned files' identities are re-checked: one
    /// changed outside the engine abandons the intent and refuses the write.
    fn commit(
        self,
        vault: &'v VaultState,
        writer: &mut WriterGuard<'_>,
        approval: Option<Value>,
        phases: &mut Phases,
    ) -> Result<Committed> {
        let Planned { mutation, fingerprint, plan } = self;
        let seq = writer.receipts.last_seq + 1;
        let mut receipt = planned_receipt(&mutation, fingerprint, &plan, seq, vault.clock().stamp(chrono::SecondsFormat::Micros));
        receipt.actor = Some(vault.channel().actor().to_string());
        receipt.agent = vault.agent().map(str::to_string);
        receipt.approval = approval;
        let (search_changed, search_removed): (Vec<&NoteChange>, Vec<&NoteChange>) =
            mutation.notes.iter().partition(|n| n.content.is_some());
        let intent = Intent {
            seq,
            changes: plan.changes.clone(),
            search_changed: search_changed.iter().map(|n| n.path.to_string()).collect(),
            search_removed: search_removed.iter().map(|n| n.path.to_string()).collect(),
            receipt: receipt.to_value(),
            search_snapshot: Some(plan.search_snapshot.clone()),
        };
        let record = Record::Intent(intent.clone());
        if let Err(error) = writer.journal.append(&record, true) {
            drop(plan);
            return Err(abort(vault, writer, &mutation, "commit", error));
        }
        writer.records.push(record.into());
        phases.mark("commit");
        faults::crash_point("after_commit");
        // A file changed outside the engine since the plan: put nothing in place, mark the intent
        // abandoned (durably, so recovery never finishes it) and refuse the write.
        let confirmed = match changed_since_planned(vault, &plan.seen) {
            Ok(confirmed) => confirmed,
            Err(conflict) => {
                drop(plan);
                return Err(abandon(vault, writer, &mutation, seq, conflict));
            }
        };
        plan.model.keep();
        Ok(Committed { seq, intent, receipt, confirmed, catalog_state: plan.catalog_state, catalog_dirs: plan.catalog_dirs })
    }
}

/// Step 5 done: the intent is durable and its files were confirmed as planned. From here the
/// write completes, now or through recovery.
#[must_use = "a committed intent is finished (applied, published, receipted) or left to recovery"]
struct Committed {
    seq: u64,
    intent: Intent,
    receipt: Receipt,
    confirmed: Confirmed,
    catalog_state: crate::catalog::CatalogState,
    catalog_dirs: BTreeSet<String>,
}

impl Committed {
    /// Steps 6-9: apply, publish, receipt, checkpoint; on a failure, recovery at once.
    fn finish(self, vault: &VaultState, writer: &mut WriterGuard<'_>, phases: &mut Phases) -> Result<Receipt> {
        let Committed { seq, intent, receipt, confirmed, catalog_state, catalog_dirs } = self;
        match finish(vault, writer, &intent, receipt, &confirmed, phases) {
            Ok(receipt) => {
                vault.merge_catalog_state(catalog_state, &catalog_dirs);
                vault.hold_written_pages(&intent.changes);
                Ok(receipt)
            }
            Err(error) => {
                tracing::warn!(seq, error = %error, "transaction past its commit point failed; recovering");
                vault.invalidate_catalog_state();
                match recover::recover_pending(vault, writer) {
                    Ok(_) => {
                        let receipt = receipts::ReceiptLog::history(vault.root(), 1, seq - 1)?.into_iter().next();
                        let receipt = receipt.and_then(|r| serde_json::from_value::<Receipt>(r).ok());
                        receipt.ok_or(Error::TransactionIncomplete { seq, reason: error.to_string() })
                    }
                    // A full disk is said as such (typed, retryable): the write is committed and
                    // completes on the next write or open once space is freed.
                    Err(second @ Error::DiskFull { .. }) => {
                        writer.needs_recovery = true;
                        tracing::warn!(seq, "committed write waits for disk space");
                        Err(second)
                    }
                    Err(second) => {
                        writer.needs_recovery = true;
                        Err(Error::TransactionIncomplete { seq, reason: format!("{error}; recovery: {second}") })
                    }
                }
            }
        }
    }
}

fn check_idempotency(
    vault: &VaultState,
    writer: &mut WriterGuard<'_>,
    mutation: &Mutation,
    identity: &Identity,
) -> Result<Option<Receipt>> {
    let Some(key) = &mutation.idempotency_key else { return Ok(None) };
    let Some(receipt) = writer.receipts.first_with_key(vault.root(), key)? else { return Ok(None) };
    let same = receipt.operation == mutation.operation && identity.matches(receipt.mutation_sha256.as_deref());
    if same { Ok(Some(receipt.clone())) } else { Err(Error::IdempotencyConflict { key: key.clone() }) }
}

/// What a file holds now, read under the lock: its bytes (`None`: no file), stat identity and
/// when the stat was taken.
struct Current {
    bytes: Option<Vec<u8>>,
    stamp: Option<FileStamp>,
    seen_at: i128,
}

fn read_current(vault: &VaultState, path: &VaultPath) -> Result<Current> {
    let absolute = crate::store::nofollow::resolve_safe(vault.root(), path.as_str())?;
    let seen_at = inventory::now_ns();
    // The stamp first: a change between it and the read makes the later re-check compare bytes.
    let stamp = std::fs::symlink_metadata(&absolute).ok().map(|m| FileStamp::of(&m));
    // Through folder handles: a folder swapped for a link after the check is never followed.
    let bytes = crate::store::beneath::read(vault.root(), path.as_str())?;
    Ok(Current { stamp: bytes.as_ref().and(stamp), bytes, seen_at })
}

/// What `path` holds now, as the plan records it.
fn seen(vault: &VaultState, path: &VaultPath) -> Result<Seen> {
    let current = read_current(vault, path)?;
    Ok(Seen { path: path.clone(), pre_image: PreImage::of(current.bytes.as_deref()), stamp: current.stamp, seen_at: current.seen_at })
}

/// The first planned file that no longer holds what the plan saw (an edit, creation or
/// removal made outside the engine since): a stat comparison, and a content comparison only
/// when the stat identity moved (a touch that kept the bytes is not a conflict).
/// Returns the files whose settled stat identity it confirmed unchanged (the apply then need
/// not read them again unless that identity moves).
fn changed_since_planned(vault: &VaultState, seen: &[Seen]) -> std::result::Result<Confirmed, Error> {
    let mut confirmed = Confirmed::new();
    for entry in seen {
        let absolute = entry.path.under(vault.root());
        let now = std::fs::symlink_metadata(&absolute).ok().map(|m| FileStamp::of(&m));
        if now == entry.stamp && now.is_none_or(|stamp| !stamp.is_racy(entry.seen_at)) {
            if let Some(stamp) = now {
                confirmed.insert(entry.path.to_string(), stamp);
            }
            continue;
        }
        let bytes = crate::store::beneath::read(vault.root(), entry.path.as_str()).ok().flatten();
        if !entry.pre_image.matches(bytes.as_deref()) {
            return Err(Error::PreconditionFailed {
                path: entry.path.to_string(),
                expected: entry.pre_image.sha256(),
                found: bytes.map_or_else(|| "absent".to_string(), |b| sha256_hex(&b)),
            });
        }
    }
    Ok(confirmed)
}

/// Files whose pre-image was confirmed by an unchanged, settled stat identity, by path.
pub(crate) type Confirmed = std::collections::HashMap<String, FileStamp>;

/// Preconditions of one note change; returns its (before, after) hashes and what it saw.
fn check_note(vault: &VaultState, note: &NoteChange, create_folders: bool) -> Result<(NoteHashes, Seen)> {
    let policy = vault.policy();
    let path = &note.path;
    // One path rule for every writer of every surface: no engine-owned name, no hidden folder
    // (`.git`, `.obsidian`, …) and no folder the policy excludes (`node_modules`, …).
    crate::note::path::refuse_reserved(path, &policy.policy.layout.excluded_dirs)?;
    let parent = layout::join(vault.root(), path.parent());
    if note.content.is_some() && !create_folders && !parent.is_dir() {
        return Err(Error::InvalidArgument { name: "path", reason: format!("folder '{}' does not exist", path.parent()) });
    }
    let Current { bytes: before, stamp, seen_at } = read_current(vault, path)?;
    if note.require_absent && before.is_some() {
        return Err(Error::AlreadyExists { path: path.to_string() });
    }
    let before_sha256 = sha256_hex(before.as_deref().unwrap_or_default());
    if let Some(expected) = &note.expected_sha256
        && !expected.eq_ignore_ascii_case(&before_sha256)
    {
        return Err(Error::PreconditionFailed { path: path.to_string(), expected: expected.clone(), found: before_sha256 });
    }
    if let Some(content) = &note.content
        && content.len() as u64 > policy.policy.limits.note_bytes_max
    {
        return Err(Error::InvalidContent {
            path: path.to_string(),
            reason: format!("{} bytes, over the policy limit of {}", content.len(), policy.policy.limits.note_bytes_max),
        });
    }
    let after_sha256 = note.content.as_ref().map_or_else(|| sha256_hex(b""), |c| sha256_hex(c.as_bytes()));
    let pre_image = if before.is_some() { PreImage::Sha256(before_sha256.clone()) } else { PreImage::Absent };
    Ok((NoteHashes { path: path.to_string(), before_sha256, after_sha256 }, Seen { path: path.clone(), pre_image, stamp, seen_at }))
}

/// The folders of every file the journal's intents name: those the engine's recent writes
/// changed (a write's keyed load checks them at once, `Vault::with_write_model`).
fn journal_folders(writer: &WriterGuard<'_>) -> BTreeSet<String> {
    let mut folders = BTreeSet::new();
    for path in writer.records.iter().flat_map(|r| r.paths()) {
        folders.insert(path.rsplit_once('/').map_or("", |(folder, _)| folder).to_string());
    }
    folders
}

fn check_and_plan<'v>(vault: &'v VaultState, mutation: &Mutation, expected_moved: impl FnOnce() -> BTreeSet<String>) -> Result<Plan<'v>> {
    let policy = vault.policy();
    if mutation.notes.is_empty() {
        return Err(Error::InvalidArgument { name: "changes", reason: "a transaction needs at least one note change".into() });
    }
    let mut hashes = Vec::with_capacity(mutation.notes.len());
    let mut seen_files = Vec::with_capacity(mutation.notes.len() + 2);
    for note in &mutation.notes {
        let (hash, seen) = check_note(vault, note, mutation.create_folders)?;
        hashes.push(hash);
        seen_files.push(seen);
    }
    let today = vault.today();
    let touched: Vec<VaultPath> = mutation.notes.iter().map(|n| n.path.clone()).collect();
    let changes: Vec<(VaultPath, Option<&str>)> = mutation.notes.iter().map(|n| (n.path.clone(), n.content.as_deref())).collect();
    let (gate, previous, orphans, catalog_plan, counts, search_snapshot) =
        vault.with_write_model(&changes, expected_moved, |inventory| {
            recheck_consulted(vault, inventory, &touched)?;
            let baseline = lint::baseline(inventory, policy, &touched, today)?;
            let previous = put_after_images(inventory, policy, mutation.notes.iter().map(|n| (&n.path, n.content.as_deref())));
            let live: Vec<VaultPath> = mutation.notes.iter().filter(|n| n.content.is_some()).map(|n| n.path.clone()).collect();
            // On an overrun the plan runs again on the whole model: this partial one, with the
            // after-images in it, is dropped.
            let gate = lint::gate(inventory, policy, &live, &baseline, today)?;
            let orphans = lint::orphans_among(inventory, policy, &live)?;
            let dirs: BTreeSet<String> = touched.iter().flat_map(crate::catalog::affected_dirs).collect();
            let plan = vault.plan_catalogs(inventory, &dirs).map(|plan| (plan, dirs));
            let (notes, valid) = (inventory.counts().notes, inventory.counts().valid);
            let snapshot = SearchSnapshot {
                source_snapshot_hash: inventory.snapshot().hash(),
                scanned: notes,
                indexed: valid,
                excluded: notes - valid,
            };
            Ok((gate, previous, orphans, plan, (notes, valid, notes - valid), snapshot))
        })?;
    // From here every refusal drops `model`, which puts the previous records back.
    let model = ModelChange { vault, previous };
    if !gate.passed() {
        let summary = gate.blocking.iter().map(|f| format!("[{}] {}: {}", f.rule, f.path, f.message)).collect::<Vec<_>>().join("; ");
        return Err(Error::GateRejected { path: mutation.primary_path().to_string(), summary, findings: gate.blocking });
    }
    let (catalog_plan, catalog_dirs) = catalog_plan?;
    let mut changes = Vec::new();
    for (note, seen) in mutation.notes.iter().zip(&seen_files) {
        let before = Some(seen.pre_image.clone());
        changes.push(match &note.content {
            Some(text) => FileChange::Write { path: note.path.to_string(), text: text.clone(), before },
            None => FileChange::Delete { path: note.path.to_string(), before },
        });
    }
    let pages = catalog_plan.writes.iter().map(|(page, bytes)| (page, Some(bytes))).chain(catalog_plan.deletes.iter().map(|p| (p, None)));
    for (page, bytes) in pages {
        let seen = seen(vault, page)?;
        let before = Some(seen.pre_image.clone());
        changes.push(match bytes {
            Some(bytes) => FileChange::Write { path: page.to_string(), text: String::from_utf8_lossy(bytes).into_owned(), before },
            None => FileChange::Delete { path: page.to_string(), before },
        });
        seen_files.push(seen);
    }
    if let Some(entry) = &mutation.log_entry {
        let log = layout::join(vault.root(), layout::LOG);
        if let Ok(meta) = std::fs::symlink_metadata(&log) {
            changes.push(FileChange::Append { path: layout::LOG.to_string(), before_len: meta.len(), text: entry.clone() });
        }
    }
    Ok(Plan { hashes, seen: seen_files, changes, model, catalog_state: catalog_plan.state, catalog_dirs, orphans, counts, search_snapshot })
}

/// Brings the records a write's plan consults up to the disk, whatever the model was loaded
/// from: the touched notes, the notes linking to their names (the gate re-resolves those
/// links), the notes their folders' catalogs list (each affected folder's own records) and
/// the root daily logs the root index lists. A stat each; a read only of what moved. The
/// file set links resolve against needs nothing here: the model's folder listings are proven
/// (`Inventory::load_checking_folders`, or a walk, or the watcher). Nothing is stat'ed when
/// the model was loaded for this very write and the folder journal proved all of it then (an
/// in-place edit is an entry the journal names, and the load looked at it). `Err` when a
/// partial model does not hold what the re-check asks or changes.
fn recheck_consulted(vault: &VaultState, inventory: &mut dyn ModelView, touched: &[VaultPath]) -> std::result::Result<(), Overrun> {
    if inventory.proven_by_journal() {
        // Loaded just now, each of its folders proven by the folder journal's account: every
        // edit finished before the load asked it is in the model already.
        tracing::debug!("consulted files proven by the folder journal");
        return Ok(());
    }
    let mut paths: BTreeSet<VaultPath> = touched.iter().cloned().collect();
    for path in touched {
        paths.extend(inventory.try_linkers_of(path)?);
        for dir in crate::catalog::affected_dirs(path) {
            paths.extend(inventory.direct_records(&dir)?);
        }
    }
    paths.extend(inventory.counts().root_notes.iter().cloned());
    // The write's re-check, told to the model as any evidence is: each consulted file an entry.
    let changes = crate::inventory::changes::ChangeSet::of_paths(paths.iter().map(VaultPath::as_str));
    match inventory.apply_in_view(vault.root(), vault.policy(), &changes)? {
        Ok(applied) => tracing::debug!(consulted = paths.len(), reread = applied.reread, "consulted files re-checked"),
        // Only a walk fails (the vault's root unreadable): the commit's own re-check of every
        // planned file still refuses a write over anything it did not see.
        Err(error) => tracing::warn!(%error, "the consulted files could not be re-checked"),
    }
    Ok(())
}

/// The lint gate's verdict on `changes` (path, new text or removal) as if they were written
/// now, writing nothing: the after-images are analysed into the in-memory inventory, judged
/// exactly as `check_and_plan` judges a write, and the previous records put back, all inside one
/// exclusive borrow of the inventory, so no reader ever sees them. What a person reviewing a
/// proposal is shown (`approvals::Vault::proposal_review`, the web's proposal page).
pub(crate) fn gate_preview(vault: &VaultState, changes: &[(VaultPath, Option<&str>)]) -> Result<lint::GateReport> {
    let policy = vault.policy();
    let today = vault.today();
    let touched: Vec<VaultPath> = changes.iter().map(|(path, _)| path.clone()).collect();
    vault.with_inventory_mut(|inventory| {
        let baseline = inventory::of_whole(lint::baseline(inventory, policy, &touched, today));
        let previous = put_after_images(inventory, policy, changes.iter().map(|(path, content)| (path, *content)));
        let live: Vec<VaultPath> = changes.iter().filter(|(_, c)| c.is_some()).map(|(p, _)| p.clone()).collect();
        let gate = inventory::of_whole(lint::gate(inventory, policy, &live, &baseline, today));
        put_back(inventory, previous);
        gate
    })
}

/// Puts after-images (new text, or `None` for a removal) into the in-memory model, analysed as
/// a read from disk would be; returns the records they replaced, for `put_back`.
fn put_after_images<'a>(
    inventory: &mut dyn ModelView,
    policy: &LoadedPolicy,
    changes: impl Iterator<Item = (&'a VaultPath, Option<&'a str>)>,
) -> Vec<(VaultPath, Option<NoteRecord>)> {
    changes
        .map(|(path, content)| {
            let old = match content {
                Some(content) => {
                    let bytes = content.as_bytes();
                    let mut record = inventory::NoteRecord::empty(path.clone(), PageKind::Note);
                    record.size_bytes = bytes.len() as u64;
                    record.content_hash = *blake3::hash(bytes).as_bytes();
                    inventory::analyse_bytes(&mut record, bytes, policy);
                    inventory.upsert(record)
                }
                None => inventory.remove(path),
            };
            (path.clone(), old)
        })
        .collect()
}

/// Puts the records `put_after_images` replaced back, newest change first.
fn put_back(inventory: &mut dyn ModelView, previous: Vec<(VaultPath, Option<NoteRecord>)>) {
    for (path, record) in previous.into_iter().rev() {
        match record {
            Some(record) => {
                inventory.upsert(record);
            }
            None => {
                inventory.remove(&path);
            }
        }
    }
}

/// The receipt the intent carries: everything known at the commit point (the publish step
/// adds the generation, the timings and any conflicts).
fn planned_receipt(mutation: &Mutation, fingerprint: String, plan: &Plan<'_>, seq: u64, at: String) -> Receipt {
    let first = plan.hashes.first();
    let catalog_pages = plan
        .changes
        .iter()
        .filter(|c| layout::is_sub_index_name(c.path().rsplit('/').next().unwrap_or("")) || c.path() == layout::ROOT_INDEX)
        .count();
    Receipt {
        receipt_schema: RECEIPT_SCHEMA.to_string(),
        seq,
        operation: mutation.operation.to_string(),
        path: mutation.primary_path().to_string(),
        before_sha256: Some(first.map_or_else(String::new, |h| h.before_sha256.clone())),
        after_sha256: Some(first.map_or_else(String::new, |h| h.after_sha256.clone())),
        notes: (plan.hashes.len() > 1).then(|| plan.hashes.clone()),
        mutation_sha256: Some(fingerprint),
        at,
        trace_id: Some(crate::hex::random(16)),
        span_id: Some(crate::hex::random(8)),
        status: "ok".to_string(),
        proposal_id: Some(mutation.proposal_id.clone().unwrap_or_default()),
        idempotency_key: Some(mutation.idempotency_key.clone().unwrap_or_default()),
        index_summary: Some(format!("{catalog_pages} catalog pages updated")),
        search_mode: Some("fts".to_string()),
        search_generation: Some(String::new()),
        notes_scanned: Some(plan.counts.0.to_string()),
        notes_indexed: Some(plan.counts.1.to_string()),
        notes_excluded: Some(plan.counts.2.to_string()),
        lint_orphans: Some(plan.orphans.to_string()),
        ..Receipt::default()
    }
}

/// Records a content-free aborted receipt for a failure before the commit point.
fn abort(vault: &VaultState, writer: &mut WriterGuard<'_>, mutation: &Mutation, phase: &str, error: Error) -> Error {
    let receipt = Receipt {
        receipt_schema: RECEIPT_SCHEMA.to_string(),
        seq: writer.receipts.last_seq + 1,
        operation: mutation.operation.to_string(),
        path: mutation.primary_path().to_string(),
        at: vault.clock().stamp(chrono::SecondsFormat::Micros),
        status: "aborted".to_string(),
        actor: Some(vault.channel().actor().to_string()),
        agent: vault.agent().map(str::to_string),
        phase: Some(phase.to_string()),
        error_code: Some(error.code().to_string()),
        idempotency_key: Some(mutation.idempotency_key.clone().unwrap_or_default()),
        ..Receipt::default()
    };
    if let Err(receipt_error) = writer.receipts.append(vault.root(), receipt, true) {
        tracing::warn!(error = %receipt_error, "could not record the aborted receipt");
    }
    error
}

/// Refuses a committed write whose files changed outside the engine after the plan: marks the
/// intent abandoned (durably: recovery never finishes it, readers never serve it) and records
/// an aborted receipt (the caller dropped the plan, which put the in-memory model back). Nothing was put in place.
fn abandon(vault: &VaultState, writer: &mut WriterGuard<'_>, mutation: &Mutation, seq: u64, conflict: Error) -> Error {
    tracing::warn!(seq, error = %conflict, "a file changed outside the engine while the write was planned; the write is refused");
    let record = Record::Done { seq, abandoned: true };
    match writer.journal.append(&record, true) {
        Ok(()) => writer.records.push(record.into()),
        Err(error) => {
            // Recovery finishes the intent file by file, and never over a file that holds
            // neither its pre- nor its post-image: the outside edit is still safe.
            tracing::warn!(error = %error, "could not mark the refused intent abandoned");
            writer.needs_recovery = true;
        }
    }
    abort(vault, writer, mutation, "apply", conflict)
}

/// Steps 6–9 for a committed intent: apply, publish, receipt, checkpoint.
fn finish(
    vault: &VaultState,
    writer: &mut WriterGuard<'_>,
    intent: &Intent,
    mut receipt: Receipt,
    confirmed: &Confirmed,
    phases: &mut Phases,
) -> Result<Receipt> {
    let conflicts = apply_changes(vault, &intent.changes, &BTreeSet::new(), confirmed)?;
    phases.mark("apply");
    faults::crash_point("after_apply");
    // A file that changed outside the engine in the instant between the re-check and its
    // rename was left as it is: the generation is then built from the files on disk.
    let route = if conflicts.is_empty() { search_route(vault, writer)? } else { SearchRoute::Publish };
    if !conflicts.is_empty() {
        vault.refresh_paths(&crate::inventory::changes::ChangeSet::of_paths(conflicts.iter().map(String::as_str)))?;
        receipt.conflicts = Some(conflicts);
    }
    let generation = match &route {
        SearchRoute::Tail { active } => Published::tail(active, intent),
        SearchRoute::Fold => fold(vault, writer)?,
        SearchRoute::Publish => publish(vault, intent, &writer.records)?,
    };
    record_generation(&mut receipt, &generation);
    phases.mark("publish");
    faults::crash_point("after_publish");
    receipt.duration_ms = Some(phases.total_ms());
    receipt.phase_ms = Some(phases.done.clone());
    let receipt = writer.receipts.append(vault.root(), receipt, false)?;
    faults::crash_point("after_receipt");
    writer.unsynced.push(intent.clone());
    if !matches!(route, SearchRoute::Tail { .. }) {
        checkpoint_unsynced(vault, writer, &generation.deferred_files)?;
    }
    Ok(receipt)
}

/// How a write's search generation comes to be.
enum SearchRoute {
    /// The active generation plus the journal's tail up to the intent: nothing to write.
    Tail { active: String },
    /// The tail is full: publish it as an on-disk generation now.
    Fold,
    /// Publish a generation for this intent alone (dense vaults, a first or old-format index).
    Publish,
}

/// Journal size above which the tail is folded even before `search.tail_writes_max` writes.
const TAIL_JOURNAL_BYTES_MAX: u64 = 4 << 20;

/// What the write path needs of the active generation's manifest (read once per generation).
#[derive(Debug, Clone)]
pub(crate) struct ActiveGeneration {
    pub(crate) id: String,
    pub(crate) covers_seq: u64,
    /// Whether readers serve it with the journal's tail (`search::tail::servable`).
    pub(crate) servable: bool,
}

fn search_route(vault: &VaultState, writer: &mut WriterGuard<'_>) -> Result<SearchRoute> {
    let root = vault.root();
    let Some(active) = crate::search::generation::read_active(root)? else { return Ok(SearchRoute::Publish) };
    let known = writer.active_generation.as_ref().filter(|g| g.id == active).cloned();
    let facts = match known {
        Some(facts) => facts,
        None => {
            let Ok(manifest) = crate::search::generation::read_manifest(root, &active) else { return Ok(SearchRoute::Publish) };
            let facts =
                ActiveGeneration { id: active, covers_seq: manifest.covers_seq, servable: crate::search::tail::servable(&manifest) };
            writer.active_generation = Some(facts.clone());
            facts
        }
    };
    // A lexical vault whose model loads publishes this write with its vectors (issue 50): the
    // write starts the dense index instead of joining the tail.
    if !facts.servable || crate::search::embeds_on_write(vault.policy(), root).is_some() {
        return Ok(SearchRoute::Publish);
    }
    // The tail includes this intent, so `tail_writes_max: 1` folds every write.
    let tail = crate::search::tail::count_after(&writer.records, facts.covers_seq);
    if tail >= vault.policy().policy.search.tail_writes_max || writer.journal.len_bytes() > TAIL_JOURNAL_BYTES_MAX {
        Ok(SearchRoute::Fold)
    } else {
        Ok(SearchRoute::Tail { active: facts.id })
    }
}

/// What the publish step produced, for the receipt.
pub(crate) struct Published {
    pub generation_id: String,
    pub scanned: usize,
    pub indexed: usize,
    pub excluded: usize,
    /// `semantic` when the generation carries dense vectors (the write was embedded), else `fts`.
    pub search_mode: &'static str,
    /// Generation files written without fsync; the checkpoint makes them durable.
    pub deferred_files: Vec<PathBuf>,
    /// Notes published without their dense vectors (the model was unavailable).
    pub vectors_owed: Vec<String>,
}

impl Published {
    /// Runs a publish whose files are written without fsync (listed for the checkpoint).
    fn deferred(
        publish: impl FnOnce(std::sync::Arc<std::sync::Mutex<Vec<PathBuf>>>) -> Result<crate::search::generation::GenerationInfo>,
    ) -> Result<Self> {
        let written = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let info = publish(written.clone())?;
        Ok(Self::of(info, &written))
    }

    /// What a publish gave, with the files it wrote without fsync (`written`).
    fn of(info: crate::search::generation::GenerationInfo, written: &std::sync::Mutex<Vec<PathBuf>>) -> Self {
        let deferred_files = std::mem::take(&mut *written.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        Published {
            generation_id: info.generation_id,
            scanned: info.counts.scanned,
            indexed: info.counts.indexed,
            excluded: info.counts.excluded,
            // A write whose vectors are owed was indexed by keyword only.
            search_mode: search_mode_of(info.dense && info.vectors_owed.is_empty()),
            deferred_files,
            vectors_owed: info.vectors_owed,
        }
    }

    /// Generation `<active>+<seq>`: the active generation plus the journal's tail up to `intent`.
    pub(crate) fn tail(active: &str, intent: &Intent) -> Self {
        let counts = intent.search_snapshot.as_ref().map_or((0, 0, 0), |s| (s.scanned, s.indexed, s.excluded));
        Published {
            generation_id: crate::search::tail::generation_id(active, intent.seq),
            scanned: counts.0,
            indexed: counts.1,
            excluded: counts.2,
            // Tail generations exist only for vaults without a dense index.
            search_mode: "fts",
            deferred_files: Vec::new(),
            vectors_owed: Vec::new(),
        }
    }
}

/// The receipt's `search_mode`: whether the write's generation embedded it.
pub(crate) fn search_mode_of(dense: bool) -> &'static str {
    if dense { "semantic" } else { "fts" }
}

/// Folds the journal's tail (this intent included) into an on-disk generation.
fn fold(vault: &VaultState, writer: &WriterGuard<'_>) -> Result<Published> {
    Published::deferred(|written| crate::search::tail::fold(vault.root(), vault.policy(), &writer.records, Some(written)))
}

/// Publishes the next immutable search generation for an intent's note changes: O(change)
/// on top of the active generation, or a first full build (exclusions named) when the vault
/// has none yet.
///
/// A generation covers every intent up to its `covers_seq`, so the journal's tail before this
/// intent (in `records`, served beside the active generation but not in it) is published with
/// it: every path the tail and the intent touched, as the disk holds it now. Publishing only
/// the intent's own paths would hide the tail's notes from search (the tail is no longer
/// served once a generation covers it).
pub(crate) fn publish(vault: &VaultState, intent: &Intent, records: &[StoredRecord]) -> Result<Published> {
    let root = vault.root();
    let policy = vault.policy();
    if let Some(active) = crate::search::generation::read_active(root)? {
        let covers = crate::search::generation::read_manifest(root, &active).map_or(intent.seq, |m| m.covers_seq);
        let mut paths: BTreeSet<&str> = BTreeSet::new();
        let tail = crate::search::tail::intents_after(records, covers)?;
        for touched in tail.into_iter().filter(|i| i.seq < intent.seq).chain([intent]) {
            paths.extend(touched.search_changed.iter().chain(&touched.search_removed).map(String::as_str));
        }
        // A path the inventory no longer holds as a valid note is removed from the index.
        let changed: Vec<VaultPath> = paths.into_iter().filter_map(|p| VaultPath::parse_walked(p).ok()).collect();
        // O(change) on the write's model (folder listings proven, consulted files re-checked).
        return vault.with_write_inventory_mut(|model| {
            let written = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            match crate::search::publish_changes_in_view(root, policy, model, &changed, &[], Some(written.clone()), Some(intent.seq)) {
                Ok(Ok(info)) => Ok(Ok(Published::of(info, &written))),
                // A publish that needs every note (a rebuild, a dense index started) wrote
                // nothing, and runs again on the whole model.
                Ok(Err(overrun)) => Err(overrun),
                Err(error) => Ok(Err(error)),
            }
        })?;
    }
    let embeds = crate::search::embeds_on_write(policy, root).is_some();
    vault.with_inventory(|inventory| -> Result<Published> {
        {
            // The first generation of a vault is built (durably) from all its notes, by keyword.
            let options = crate::search::SyncOptions { allow_partial: true, covers_seq: Some(intent.seq), ..Default::default() };
            let report = crate::search::sync(root, policy, inventory, options)?;
            if embeds {
                // With the model, the write's own notes are embedded on top of it at once (the
                // other notes are owed), as every later write would.
                let changed: Vec<VaultPath> = intent.search_changed.iter().filter_map(|p| VaultPath::parse_walked(p).ok()).collect();
                return Published::deferred(|written| {
                    crate::search::publish_changes(root, policy, inventory, &changed, &[], Some(written), Some(intent.seq))
                });
            }
            Ok(Published {
                generation_id: report.generation_id,
                scanned: report.counts.scanned,
                indexed: report.counts.indexed,
                excluded: report.counts.excluded,
                search_mode: search_mode_of(report.dense.is_some()),
                deferred_files: Vec::new(),
                vectors_owed: Vec::new(),
            })
        }
    })?
}

/// Fills the receipt's search fields from a publish.
pub(crate) fn record_generation(receipt: &mut Receipt, generation: &Published) {
    receipt.search_generation = Some(generation.generation_id.clone());
    receipt.search_mode = Some(generation.search_mode.to_string());
    receipt.notes_scanned = Some(generation.scanned.to_string());
    receipt.notes_indexed = Some(generation.indexed.to_string());
    receipt.notes_excluded = Some(generation.excluded.to_string());
    receipt.vectors_owed = (!generation.vectors_owed.is_empty()).then(|| generation.vectors_owed.clone());
}

/// Puts every change in place (idempotent) and returns the paths it left alone because they
/// hold something the transaction never saw. Paths in `skip` are left alone (a later intent
/// owns them). Rules, the same for a live write and for recovery:
/// - a file already holding its post-image is not rewritten;
/// - a file is replaced or removed only while it holds the pre-image the plan recorded (a
///   journal of an older engine has none: then it is replaced as before);
/// - an append never truncates bytes it did not write: only a torn copy of its own text is cut.
///
/// `confirmed` names files whose pre-image the caller just confirmed by stat identity: while
/// that identity holds, they are replaced without being read again.
pub(crate) fn apply_changes(
    vault: &VaultState,
    changes: &[FileChange],
    skip: &BTreeSet<String>,
    confirmed: &Confirmed,
) -> Result<Vec<String>> {
    let root = vault.root();
    let mut conflicts = Vec::new();
    for change in changes.iter().filter(|c| !skip.contains(c.path())) {
        let Ok(path) = VaultPath::parse_walked(change.path()) else { continue };
        let absolute = path.under(root);
        // Notes and catalogs go through folder handles (`store::beneath`): a folder swapped
        // for a link between the plan's check and this write is never followed.
        match change {
            FileChange::Write { text, before, .. } => {
                let still_confirmed = confirmed
                    .get(path.as_str())
                    .is_some_and(|stamp| std::fs::symlink_metadata(&absolute).is_ok_and(|m| FileStamp::of(&m) == *stamp));
                if still_confirmed {
                    crate::store::beneath::replace_unsynced(root, path.as_str(), text.as_bytes(), true)?;
                    continue;
                }
                let current = crate::store::beneath::read(root, path.as_str())?;
                if current.as_deref() == Some(text.as_bytes()) {
                    continue;
                }
                if before.as_ref().is_some_and(|pre| !pre.matches(current.as_deref())) {
                    conflicts.push(path.to_string());
                    continue;
                }
                crate::store::beneath::replace_unsynced(root, path.as_str(), text.as_bytes(), true)?;
            }
            FileChange::Delete { before, .. } => {
                let current = crate::store::beneath::read(root, path.as_str())?;
                if current.is_none() && std::fs::symlink_metadata(&absolute).is_err() {
                    continue;
                }
                if before.as_ref().is_some_and(|pre| !pre.matches(current.as_deref())) {
                    conflicts.push(path.to_string());
                    continue;
                }
                crate::store::beneath::remove_unsynced(root, path.as_str())?
            }
            FileChange::Append { before_len, text, .. } => {
                // Re-read through the root's handle, never through a link.
                let current = crate::store::beneath::read(root, path.as_str())?.unwrap_or_default();
                match append_state(&current, *before_len, text) {
                    AppendState::Done => {}
                    AppendState::AtPlannedEnd => {
                        crate::store::durable::truncate_and_append_unsynced(root, &absolute, *before_len, text.as_bytes())?
                    }
                    AppendState::AtCurrentEnd => {
                        crate::store::durable::truncate_and_append_unsynced(root, &absolute, current.len() as u64, text.as_bytes())?
                    }
                }
            }
        }
    }
    Ok(conflicts)
}

/// Where an append stands against a file's current bytes.
#[derive(Debug, PartialEq, Eq)]
enum AppendState {
    /// The text is already in place (after `before_len`, or last in the file).
    Done,
    /// The file is as planned, or holds a torn copy of the text past `before_len`: append at
    /// `before_len` (cutting only our own torn bytes).
    AtPlannedEnd,
    /// Someone else changed the file since the plan: append after everything it holds now.
    AtCurrentEnd,
}

fn append_state(current: &[u8], before_len: u64, text: &str) -> AppendState {
    let text = text.as_bytes();
    let Ok(planned_end) = usize::try_from(before_len) else { return AppendState::AtCurrentEnd };
    if current.len() >= planned_end {
        let after = &current[planned_end..];
        if after.starts_with(text) {
            return AppendState::Done;
        }
        if text.starts_with(after) && after.len() < text.len() {
            return AppendState::AtPlannedEnd;
        }
    }
    if current.ends_with(text) && !text.is_empty() { AppendState::Done } else { AppendState::AtCurrentEnd }
}

/// Checkpoints this process's deferred intents (and `generation_files`): see `checkpoint`.
pub(crate) fn checkpoint_unsynced(vault: &VaultState, writer: &mut WriterGuard<'_>, generation_files: &[PathBuf]) -> Result<()> {
    let intents = std::mem::take(&mut writer.unsynced);
    if let Err(error) = checkpoint(vault, writer, &intents, generation_files) {
        writer.unsynced = intents;
        return Err(error);
    }
    faults::crash_point("after_checkpoint");
    Ok(())
}

/// Makes the intents' files durable (every touched file and directory, the generation files
/// and the receipt log, fsynced in parallel), marks them done, and empties the journal once
/// every intent in it is done and in the active generation.
pub(crate) fn checkpoint(vault: &VaultState, writer: &mut WriterGuard<'_>, intents: &[Intent], generation_files: &[PathBuf]) -> Result<()> {
    let root = vault.root();
    let mut files: BTreeSet<PathBuf> = generation_files.iter().cloned().collect();
    let mut dirs: BTreeSet<PathBuf> = generation_files.iter().filter_map(|f| f.parent().map(std::path::Path::to_path_buf)).collect();
    for change in intents.iter().flat_map(|i| &i.changes) {
        let absolute = layout::join(root, change.path());
        if let Some(dir) = absolute.parent() {
            dirs.insert(dir.to_path_buf());
        }
        if !matches!(change, FileChange::Delete { .. }) {
            files.insert(absolute);
        }
    }
    files.insert(layout::join(root, layout::RECEIPTS));
    dirs.insert(layout::join(root, layout::STATE_DIR));
    let files: Vec<PathBuf> = files.into_iter().filter(|f| f.exists()).collect();
    crate::store::durable::sync_all_paths(root, &files, &dirs.into_iter().collect::<Vec<_>>())?;
    for intent in intents {
        let record = Record::Done { seq: intent.seq, abandoned: false };
        writer.journal.append(&record, false)?;
        writer.records.push(record.into());
    }
    reset_journal_when_folded(vault, writer, !generation_files.is_empty())
}

/// Journal size above which a fully-done, fully-published journal is emptied even without a
/// fold (dense vaults publish every write and never fold).
const JOURNAL_RESET_BYTES: u64 = 1 << 20;

/// Empties the journal when every intent in it is done and included in the active generation
/// (right after a fold or a publish; otherwise once it passes `JOURNAL_RESET_BYTES`).
fn reset_journal_when_folded(vault: &VaultState, writer: &mut WriterGuard<'_>, published: bool) -> Result<()> {
    if !published && writer.journal.len_bytes() <= JOURNAL_RESET_BYTES {
        return Ok(());
    }
    if recover::any_pending_except(&writer.records, &BTreeSet::new()) || !writer.unsynced.is_empty() {
        return Ok(());
    }
    let abandoned = crate::store::journal::abandoned_seqs(&writer.records);
    let last = writer.records.iter().filter(|r| r.is_intent()).map(StoredRecord::seq).filter(|seq| !abandoned.contains(seq)).max();
    if let Some(last) = last {
        let Some(active) = crate::search::generation::read_active(vault.root())? else { return Ok(()) };
        let covered = crate::search::generation::read_manifest(vault.root(), &active).is_ok_and(|m| m.covers_seq >= last);
        if !covered {
            return Ok(());
        }
    }
    writer.journal.reset()?;
    writer.records.clear();
    Ok(())
}

#[cfg(test)]
mod tests;
