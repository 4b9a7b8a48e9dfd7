//! The single writer of a vault: the cross-process lock file, the intent journal and its
//! records, the receipt log, this process's deferred intents and the active generation's facts,
//! as private state behind one in-process mutex. `vault::Vault` owns one beside its
//! `state::VaultState`; only the write path (this module and its siblings) reads or changes
//! the writer's state, through a `WriterGuard`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::inventory::changes::{ChangeSet, Changes};
use crate::note::path::VaultPath;
use crate::state::VaultState;
use crate::store::journal::{Intent, Journal, StoredRecord};
use crate::store::{durable, layout};

use super::receipts::ReceiptLog;

/// The writer of one `Vault`: nothing is opened until the first lock.
#[derive(Default)]
pub(crate) struct Writer {
    state: Mutex<Option<WriterState>>,
}

/// State owned by the single writer (guarded by the in-process mutex and the file lock); its
/// fields are the write path's alone.
pub struct WriterState {
    pub(in crate::write) receipts: ReceiptLog,
    pub(in crate::write) journal: Journal,
    /// The journal's records (as read at lock time, plus this process's appends since).
    pub(in crate::write) records: Vec<StoredRecord>,
    /// A write past its commit point failed: recovery runs at the next lock.
    pub(in crate::write) needs_recovery: bool,
    /// Intents this process put in place whose files are not fsynced yet: their checkpoint is
    /// deferred to the next fold, `Vault::checkpoint_pending`, or dropping the vault (the
    /// intent record already makes them durable).
    pub(in crate::write) unsynced: Vec<Intent>,
    /// What the write path needs of the active generation's manifest, by generation id.
    pub(in crate::write) active_generation: Option<super::ActiveGeneration>,
    /// Other processes' intents this process found applied but not yet done (their receipts
    /// are in the log: their owner put them in place and deferred their checkpoint), with when
    /// this process first found each: `left_to_their_owners`.
    foreign_applied: BTreeMap<u64, Instant>,
    /// The cross-process lock file, flocked while a `WriterGuard` lives.
    lock_file: std::fs::File,
}

/// Proof of holding the writer lock (in-process mutex and cross-process file lock), released
/// on drop.
pub struct WriterGuard<'v> {
    state: MutexGuard<'v, Option<WriterState>>,
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        if let Some(state) = self.state.as_ref() {
            let _ = state.lock_file.unlock();
        }
    }
}

impl std::ops::Deref for WriterGuard<'_> {
    type Target = WriterState;
    fn deref(&self) -> &WriterState {
        self.state.as_ref().expect("BUG: Writer::lock fills the writer state")
    }
}

impl std::ops::DerefMut for WriterGuard<'_> {
    fn deref_mut(&mut self) -> &mut WriterState {
        self.state.as_mut().expect("BUG: Writer::lock fills the writer state")
    }
}

/// How long a process that holds the writer lock again leaves another process's applied
/// intent to that process's own deferred checkpoint. The MCP server checkpoints its deferred
/// writes every second (`mcp::CHECKPOINT_INTERVAL`), waiting for the lock like any write; an
/// intent still not done after this long is taken for one whose owner died, and finished.
pub const LEFT_TO_OWNER_FOR: Duration = Duration::from_secs(5);

impl WriterGuard<'_> {
    /// Other processes' intents that are applied but not done, and that this lock leaves to
    /// their owners: those whose receipt is in the log (their owner put every file in place and
    /// appended the receipt before releasing the lock; this process's catch-up has read both
    /// into its model) and which this process first found less than `LEFT_TO_OWNER_FOR` before
    /// `now`. Their files are in place but not yet fsynced; the journal's intent is durable, so
    /// a machine crash finishes them at the next open as it always did. Without this, four
    /// servers writing at once each finished the others' deferred writes (fsyncs and a done
    /// record under the lock) on almost every write: 198 "recovery" runs for 200 writes.
    fn left_to_their_owners(&mut self, mine: &BTreeSet<u64>, now: Instant) -> BTreeSet<u64> {
        let state = &mut **self;
        let pending = super::recover::pending_seqs(&state.records, mine);
        state.foreign_applied.retain(|seq, _| pending.contains(seq));
        let mut left = BTreeSet::new();
        for seq in pending.into_iter().filter(|seq| state.receipts.contains_seq(*seq)) {
            let first_found = *state.foreign_applied.entry(seq).or_insert(now);
            if now.duration_since(first_found) < LEFT_TO_OWNER_FOR {
                left.insert(seq);
            }
        }
        left
    }

    /// The sequence number of the newest receipt (every committed write up to it is on disk
    /// once the lock is held: recovery ran).
    pub(crate) fn last_seq(&self) -> u64 {
        self.receipts.last_seq
    }

    /// Makes this process's deferred writes durable now (see `Vault::checkpoint_pending`).
    pub(crate) fn checkpoint_deferred(&mut self, vault: &VaultState) -> Result<()> {
        if self.unsynced.is_empty() {
            return Ok(());
        }
        super::checkpoint_unsynced(vault, self, &[])
    }
}

/// Whether taking the writer lock may wait for another holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Wait (saying once, as a warning, who holds it).
    Yes,
    /// Give up at once when it is held (`Ok(None)`).
    No,
}

/// Takes the cross-process file lock on `file`: at once when free; else, under `Wait::Yes`, a
/// warning names the holder (what it wrote into the lock file) and the lock is awaited.
/// Returns false when it is held and `wait` is `Wait::No`.
fn take_file_lock(root: &std::path::Path, file: &std::fs::File, wait: Wait) -> Result<bool> {
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) if wait == Wait::No => return Ok(false),
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = durable::read_engine_file(root, &layout::join(root, layout::WRITER_LOCK))
                .ok()
                .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
                .filter(|h| holder_is_alive(h))
                .unwrap_or_else(|| "another process".to_string());
            tracing::warn!("waiting for {holder} to finish…");
            file.lock().map_err(|e| Error::io("locking", layout::WRITER_LOCK, e))?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("locking", layout::WRITER_LOCK, e)),
    }
    // Who holds it, for a writer that has to wait (best effort: the lock is what counts).
    if let Err(error) = durable::write_lock_holder(file, &holder_description()) {
        tracing::debug!(error = %error, "could not note the writer lock's holder");
    }
    Ok(true)
}

/// Whether the holder text names a live process (`(pid N)` at its end): the text is only ever
/// written by a holder, but one that was not ours (a `flock` of the file) leaves the last
/// paravault's there.
fn holder_is_alive(holder: &str) -> bool {
    let pid = holder.rsplit_once("(pid ").and_then(|(_, rest)| rest.strip_suffix(')')).and_then(|p| p.parse::<i32>().ok());
    pid.is_some_and(|pid| rustix::process::Pid::from_raw(pid).is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok()))
}

/// `` `paravault sync --dense` (pid 4242) ``: this process's command line, as a waiting writer
/// reads it in the lock file.
fn holder_description() -> String {
    static DESCRIPTION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DESCRIPTION
        .get_or_init(|| {
            let mut args = std::env::args();
            let program = args
                .next()
                .map(|a| std::path::Path::new(&a).file_name().map_or_else(|| a.clone(), |n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "paravault".into());
            let words: Vec<String> = std::iter::once(program).chain(args.take(6)).collect();
            let line = crate::note::visible::escape(&words.join(" ")).into_owned();
            format!("`{}` (pid {})", line.chars().take(120).collect::<String>(), std::process::id())
        })
        .clone()
}

impl Writer {
    /// Takes the writer lock (in-process mutex, then the cross-process file lock), finishes any
    /// committed-but-pending transaction, and catches up with receipts other processes wrote.
    /// A writer that has to wait says so once (a warning naming the holder).
    pub(crate) fn lock<'v>(&'v self, vault: &VaultState) -> Result<WriterGuard<'v>> {
        Ok(self.lock_with(vault, Wait::Yes)?.expect("BUG: a waiting lock always ends held"))
    }

    /// `lock`, unless another holder (a process, or another thread of this one) has it now:
    /// then `None`, at once.
    pub(crate) fn try_lock<'v>(&'v self, vault: &VaultState) -> Result<Option<WriterGuard<'v>>> {
        self.lock_with(vault, Wait::No)
    }

    fn lock_with<'v>(&'v self, vault: &VaultState, wait: Wait) -> Result<Option<WriterGuard<'v>>> {
        let root = vault.root();
        let mut state = match wait {
            Wait::Yes => self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            Wait::No => match self.state.try_lock() {
                Ok(state) => state,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(None),
            },
        };
        crate::store::nofollow::refuse_symlinked_state(root)?;
        // A process's first lock finishes every pending intent; later ones leave other
        // processes' applied intents to their owners for a while (`left_to_their_owners`).
        let held_before = state.is_some();
        match state.as_mut() {
            None => {
                durable::create_dir_all(root, &layout::join(root, layout::STATE_DIR))?;
                let lock_path = layout::join(root, layout::WRITER_LOCK);
                let file = durable::open_engine_file(root, &lock_path, false)
                    .map_err(|e| crate::store::nofollow::io_error("opening", layout::WRITER_LOCK, e))?;
                if !take_file_lock(root, &file, wait)? {
                    return Ok(None);
                }
                let opened = Journal::open(root).and_then(|(journal, records)| Ok((journal, records, ReceiptLog::load(root)?)));
                match opened {
                    Ok((journal, records, receipts)) => {
                        *state = Some(WriterState {
                            receipts,
                            journal,
                            records,
                            needs_recovery: false,
                            unsynced: Vec::new(),
                            active_generation: None,
                            foreign_applied: BTreeMap::new(),
                            lock_file: file,
                        })
                    }
                    Err(error) => {
                        let _ = file.unlock();
                        return Err(error);
                    }
                }
            }
            Some(existing) => {
                if !take_file_lock(root, &existing.lock_file, wait)? {
                    return Ok(None);
                }
                if let Err(error) = catch_up(vault, existing) {
                    let _ = existing.lock_file.unlock();
                    return Err(error);
                }
            }
        }
        let mut guard = WriterGuard { state };
        let mut mine: BTreeSet<u64> = guard.unsynced.iter().map(|i| i.seq).collect();
        if held_before {
            mine.extend(guard.left_to_their_owners(&mine, Instant::now()));
        }
        if guard.needs_recovery || super::recover::any_pending_except(&guard.records, &mine) {
            super::recover::recover_pending(vault, &mut guard)?;
        }
        Ok(Some(guard))
    }
}

impl Writer {
    /// Makes this process's deferred writes durable, under the lock (recovery first).
    pub(crate) fn checkpoint_pending(&self, vault: &VaultState) -> Result<()> {
        self.lock(vault)?.checkpoint_deferred(vault)
    }

    /// Whether this process holds writes whose checkpoint is deferred.
    pub(crate) fn has_deferred_writes(&self) -> bool {
        self.state.lock().map(|state| state.as_ref().is_some_and(|s| !s.unsynced.is_empty())).unwrap_or(false)
    }

    /// Whether a write this process committed waits to be finished.
    pub(crate) fn has_unfinished_writes(&self) -> bool {
        self.state.lock().map(|state| state.as_ref().is_some_and(|s| s.needs_recovery)).unwrap_or(false)
    }
}

/// Brings a kept writer state up to what other processes did since this one last held the
/// lock: their receipts (and the notes and catalog pages they touched) and the journal.
fn catch_up(vault: &VaultState, state: &mut WriterState) -> Result<()> {
    let root = vault.root();
    let touched = state.receipts.catch_up(root)?;
    if !touched.is_empty() || !state.journal.unchanged_since_seen(root)? {
        let (journal, records) = Journal::open(root)?;
        state.journal = journal;
        state.records = records;
    }
    if !touched.is_empty() {
        vault.refresh_paths(&receipt_changes(vault, &touched))?;
        vault.invalidate_catalog_state();
    }
    Ok(())
}

/// The receipts' evidence source: each note other processes' receipts name, and the catalog
/// pages of its folders (up to the first missing page) and the root index, as entries.
pub(super) fn receipt_changes(vault: &VaultState, touched: &[String]) -> ChangeSet {
    let mut changes = Changes::default();
    for path in touched.iter().filter_map(|p| VaultPath::parse_walked(p).ok()) {
        changes.entry(path.as_str());
        for page in vault.catalog_pages_of(&path) {
            changes.entry(&page);
        }
    }
    ChangeSet::Known(changes)
}
