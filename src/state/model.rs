//! The vault's in-memory model (the inventory) kept equal to the disk: loaded on first use
//! (reusing the persisted inventory's settled records), settled by a watcher or a stat walk
//! before each operation in a long-lived process, re-read path by path after changes; the
//! persisted inventory written back when it went stale; leftover temporary files of killed
//! writes removed. *Invariant: a caller never gets a model older than the disk it asked about
//! (`Scope`); the only files it writes are the persisted inventory and, under the writer lock,
//! the removal of old temporary files.*

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::MutexGuard;

use super::{Freshness, VaultState};
use crate::catalog;
use crate::error::Result;
use crate::inventory::changes::ChangeSet;
use crate::inventory::{self, Inventory, ModelView, Overrun, PartialModel};
use crate::inventory_cache::keyed::{FolderChecks, PendingFolderChecks};
use crate::note::path::VaultPath;
use crate::store::{durable, layout};

/// The model this process holds: none yet, the whole one, or a write's partial one (which
/// answers that write only: any other caller gets the whole model).
#[derive(Debug, Default)]
pub(super) enum Held {
    #[default]
    Nothing,
    Whole(Inventory),
    Partial(PartialModel),
}

impl Held {
    fn is_nothing(&self) -> bool {
        matches!(self, Held::Nothing)
    }

    pub(super) fn whole(&self) -> Option<&Inventory> {
        match self {
            Held::Whole(inventory) => Some(inventory),
            _ => None,
        }
    }

    pub(super) fn whole_mut(&mut self) -> Option<&mut Inventory> {
        match self {
            Held::Whole(inventory) => Some(inventory),
            _ => None,
        }
    }
}

/// The persisted inventory as this process last read or wrote it.
#[derive(Debug, Default)]
pub(super) struct SavedInventory {
    /// `Inventory::revision` it matches (rewritten only when the model moved past it).
    revision: u64,
}

/// The persisted inventory is rewritten at load once at least this many of its records (or 1 %
/// of them, whichever is more) were stale.
const PERSIST_AFTER_STALE_RECORDS: usize = 32;

/// A write's partial model is not used once the keyed copy is this stale (pages read again
/// plus folders listed again): the whole load then rewrites it.
const KEYED_STALE_LIMIT: usize = 64;

/// A one-shot write process folds its partial model back into the keyed copy once its load
/// read again (or forgot) at least this many pages: the notes and catalog pages of the writes
/// since the copy was last written. Each write then reads a few pages again, never a growing
/// number, and the copy never goes so stale that a write must load the whole model.
const KEYED_FOLD_AFTER: usize = 16;

/// How long a whole load waits for another process's fold into the persisted inventory to
/// end before it loads the model by a walk instead.
const KEYED_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A write's keyed load stats the folders it does not load on a helper thread, while the
/// write plans, once there are at least this many of them (fewer cost less than the thread).
const DEFER_FOLDER_CHECKS_FROM: usize = 256;

/// How far a caller of the inventory needs it checked against the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// A write transaction: folder listings proven; it re-checks the files it consults.
    Write,
    /// A whole-vault reader (lint, doctor, search, heal preview…): every file checked.
    WholeVault,
}

/// A temporary file younger than this may belong to a write in flight in another process
/// (proposals and task snapshots are written outside the writer lock); older ones are
/// leftovers of killed writes.
pub(crate) const TEMP_LEFTOVER_AGE: std::time::Duration = std::time::Duration::from_secs(5);

impl VaultState {
    /// The inventory for a whole-vault reader: every record checked against the disk.
    pub(super) fn lock_inventory(&self) -> Result<MutexGuard<'_, Held>> {
        self.lock_inventory_for(Scope::WholeVault)
    }

    /// The inventory, loaded on first use and brought up to the disk as far as `scope` needs:
    /// a write transaction takes a model whose folder listings are proven (it re-checks the
    /// files it consults itself); a whole-vault reader gets every record's stat identity
    /// compared (a walk, once, if the model was loaded by folder checks).
    fn lock_inventory_for(&self, scope: Scope) -> Result<MutexGuard<'_, Held>> {
        let mut guard = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*guard, Held::Partial(_)) {
            // A write's partial model answers that write only: anyone else gets the whole one.
            *guard = Held::Nothing;
        }
        self.load_whole_into(&mut guard, scope)?;
        Ok(guard)
    }

    /// Loads the whole model into an empty `guard` and brings the whole model it holds up to
    /// the disk as `scope` needs.
    fn load_whole_into(&self, guard: &mut MutexGuard<'_, Held>, scope: Scope) -> Result<()> {
        if guard.is_nothing() {
            let started = std::time::Instant::now();
            // The folder journal's position before the load proves the folders (a walk or a
            // stat of each), for the keyed copy this model fills.
            let journal_token = crate::folder_journal::ask(&self.root, None).map(|answer| answer.now);
            let (known, cache_state) = self.read_persisted_inventory();
            let decoded = started.elapsed();
            let (mut inventory, leftovers, load) = match (scope, known) {
                (Scope::Write, Some(known)) => match Inventory::load_checking_folders(&self.root, &self.policy, known)? {
                    Ok(loaded) => loaded,
                    Err(records) => Inventory::load_reusing(&self.root, &self.policy, records)?,
                },
                (_, known) => Inventory::load_reusing(&self.root, &self.policy, known.map(|k| k.records).unwrap_or_default())?,
            };
            inventory.journal_token = journal_token;
            let loaded = started.elapsed();
            // Rewriting the whole file costs O(vault); a few stale records (the notes and catalog
            // pages of recent writes) cost the next process a few reads. Rewrite once they add up.
            let stale = load.read + load.forgotten + load.folders_relisted;
            let keyed_refused = self.keyed_refused.load(std::sync::atomic::Ordering::Relaxed);
            if cache_state == "reused" && stale < PERSIST_AFTER_STALE_RECORDS.max(load.reused / 100) && !keyed_refused {
                if let Some(saved) = self.saved_inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
                    saved.revision = inventory.revision;
                }
            } else {
                self.persist_inventory(&inventory);
            }
            tracing::debug!(?decoded, ?loaded, persisted = ?started.elapsed(), ?load, "inventory loaded");
            **guard = Held::Whole(inventory);
            let removed = self.remove_leftover_temps(&leftovers)?;
            let mut freshness = self.lock_freshness();
            freshness.observed_at = Some(self.clock().stamp(chrono::SecondsFormat::Micros));
            freshness.leftover_temps_removed += removed;
            freshness.inventory_cache = cache_state;
            freshness.load = load;
        }
        if scope == Scope::WholeVault
            && let Some(inventory) = guard.whole_mut().filter(|inventory| !inventory.files_checked)
        {
            let started = std::time::Instant::now();
            let applied =
                inventory.apply(&self.root, &self.policy, &ChangeSet::unknown("a whole-vault read after a load by folder checks"))?;
            tracing::debug!(reread = applied.reread, walk = ?started.elapsed(), "whole-vault reader: every file checked");
            let mut freshness = self.lock_freshness();
            freshness.paths_refreshed += applied.reread as u64;
            freshness.stat_walks += 1;
            freshness.last_stat_walk_reason = applied.walked;
            freshness.observed_at = Some(self.clock().stamp(chrono::SecondsFormat::Micros));
        }
        Ok(())
    }

    /// Runs a write transaction's planning step `f` on a model that holds what the write
    /// consults. In a one-shot process (`Lifetime::OneShot`) that has not loaded the model
    /// yet, that is a partial model looked up by key in the persisted inventory's keyed copy
    /// (`inventory_cache::keyed`: O(change), not O(vault)), the folders it does not load
    /// checked on a helper thread while `f` runs and confirmed before this returns (a folder
    /// that moved there: loaded again with every folder checked first, and `f` runs again);
    /// otherwise, and whenever `f` meets a lookup the partial model cannot answer (`f` returns
    /// its `Err(Overrun)`, or asked a change past what it holds, `ModelView::in_view`), the
    /// whole model, and `f` runs again on it: the one place an overrun is answered. `f` plans
    /// over either through `ModelView`. `changes`: the
    /// write's notes (path, new text or removal); `expected_moved`: the folders the engine's
    /// own recent writes changed (the journal's), checked at once, asked only for a keyed load.
    pub(crate) fn with_write_model<T>(
        &self,
        changes: &[(VaultPath, Option<&str>)],
        expected_moved: impl FnOnce() -> BTreeSet<String>,
        mut f: impl FnMut(&mut dyn ModelView) -> std::result::Result<T, Overrun>,
    ) -> Result<T> {
        let mut guard = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let expected_moved =
            if guard.is_nothing() && self.options.lifetime == super::Lifetime::OneShot { expected_moved() } else { BTreeSet::new() };
        let mut checks = FolderChecks::Deferred { expected_moved: &expected_moved, from: DEFER_FOLDER_CHECKS_FROM };
        loop {
            let mut pending = None;
            if guard.is_nothing() && self.options.lifetime == super::Lifetime::OneShot {
                pending = self.load_keyed_into(&mut guard, changes, checks)?;
            }
            let Held::Partial(model) = &mut *guard else { break };
            let out = f(model).and_then(|out| model.in_view().map(|()| out));
            // What the journal proved holds for this first use only.
            model.view.proven_by_journal = false;
            let moved = pending.and_then(|pending| pending.confirm().err());
            let overrun = match (moved.is_none(), out) {
                (true, Ok(out)) => return Ok(out),
                (_, out) => out.err(),
            };
            *guard = Held::Nothing;
            match moved {
                Some(moved) if matches!(checks, FolderChecks::Deferred { .. }) => {
                    tracing::debug!(%moved, "loading the partial model again with every folder checked first");
                    self.keyed_fold_due.store(true, std::sync::atomic::Ordering::Relaxed);
                    checks = FolderChecks::Now;
                }
                _ => {
                    let overrun = overrun.map(|overrun| overrun.to_string());
                    tracing::debug!(?moved, ?overrun, "the partial model did not hold what the write consults; loading it whole");
                    self.lock_freshness().inventory_cache = "keyed, then whole: the write consulted more than it held".into();
                    break;
                }
            }
        }
        self.load_whole_into(&mut guard, Scope::Write)?;
        Ok(inventory::of_whole(f(guard.whole_mut().expect("BUG: load_whole_into loads the inventory"))))
    }

    /// Loads a write's partial model from the keyed copy into an empty `guard`, or leaves it
    /// empty (the caller loads the whole model) when the copy is missing, foreign or too stale.
    /// Returns the folder checks the load left running (`checks` deferred).
    fn load_keyed_into(
        &self,
        guard: &mut MutexGuard<'_, Held>,
        changes: &[(VaultPath, Option<&str>)],
        checks: FolderChecks<'_>,
    ) -> Result<Option<PendingFolderChecks>> {
        let started = std::time::Instant::now();
        let index = layout::join(&self.root, layout::INVENTORY_INDEX);
        // The vault's folder journal (`paravault watch`), when one runs, says which folders
        // changed instead of a stat of each.
        let journal = |since| crate::folder_journal::ask(&self.root, since);
        let loaded = match durable::open_keyed_cache(&self.root, &index) {
            Ok(database) => crate::inventory_cache::keyed::load_for_write(
                &self.root,
                &self.policy,
                &database,
                changes,
                KEYED_STALE_LIMIT,
                checks,
                Some(&journal),
            ),
            // Rewriting the copy cannot help a platform without `/proc/self/fd`.
            Err(error) => Err(crate::inventory_cache::keyed::NotKeyed {
                rebuild: error.kind() != std::io::ErrorKind::Unsupported,
                reason: format!("unreadable ({error})"),
            }),
        };
        match loaded {
            Ok(load) => {
                tracing::debug!(elapsed = ?started.elapsed(), counts = ?load.counts, deferred = load.pending.is_some(), "partial model loaded by key");
                if load.counts.folders_by_journal > 0 {
                    tracing::debug!(folders = load.counts.folders_by_journal, "folders proven by the folder journal");
                }
                if load.journal_behind {
                    // Fold at the end, so the keyed copy records the journal's position.
                    self.keyed_fold_due.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                **guard = Held::Partial(load.inventory);
                let removed = self.remove_leftover_temps(&load.leftover_temps)?;
                let mut freshness = self.lock_freshness();
                freshness.observed_at = Some(self.clock().stamp(chrono::SecondsFormat::Micros));
                freshness.leftover_temps_removed += removed;
                freshness.inventory_cache = "keyed".into();
                freshness.load = load.counts;
                Ok(load.pending)
            }
            Err(refused) => {
                tracing::debug!(reason = %refused.reason, "the keyed inventory cannot serve this write; loading the model whole");
                // The whole load then rewrites both persisted copies, whatever it finds stale.
                self.keyed_refused.store(refused.rebuild, std::sync::atomic::Ordering::Relaxed);
                Ok(None)
            }
        }
    }

    /// The persisted inventory's records, and what became of it (`reused`, `absent`, or why it
    /// cannot be trusted: it is then rebuilt, never used).
    fn read_persisted_inventory(&self) -> (Option<inventory::KnownVault>, String) {
        let index = layout::join(&self.root, layout::INVENTORY_INDEX);
        // A one-shot write folds into the copy in place under the writer lock, which a whole
        // load does not take; its `redb` lock makes this open fail meanwhile, for milliseconds.
        let deadline = std::time::Instant::now() + KEYED_BUSY_WAIT;
        let database = loop {
            match durable::open_keyed_cache(&self.root, &index) {
                Ok(database) => break database,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (None, "absent".into()),
                Err(e) if durable::keyed_cache_busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => return (None, format!("rebuilt: unreadable ({e})")),
            }
        };
        match crate::inventory_cache::keyed::read_known(&database, &self.policy) {
            Ok(known) => {
                *self.saved_inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(SavedInventory { revision: u64::MAX });
                (Some(known), "reused".into())
            }
            Err(reason) => {
                tracing::warn!(%reason, "ignoring the persisted inventory; rebuilding it");
                (None, format!("rebuilt: {reason}"))
            }
        }
    }

    /// Rewrites the persisted inventory whole from the model when the model changed since it
    /// was read or written (a fresh copy renamed over the old one; a failure only costs the
    /// next process a fuller read).
    pub(super) fn persist_inventory(&self, inventory: &Inventory) {
        let mut saved = self.saved_inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let keyed_refused = self.keyed_refused.swap(false, std::sync::atomic::Ordering::Relaxed);
        if saved.as_ref().is_some_and(|s| s.revision == inventory.revision) && !keyed_refused {
            return;
        }
        let started = std::time::Instant::now();
        let index = layout::join(&self.root, layout::INVENTORY_INDEX);
        match durable::write_keyed_cache(&self.root, &index, |t| crate::inventory_cache::keyed::fill(inventory, &self.policy.digest, t)) {
            Ok(()) => {
                *saved = Some(SavedInventory { revision: inventory.revision });
                tracing::debug!(elapsed = ?started.elapsed(), "persisted inventory written");
            }
            Err(error) => tracing::debug!(error = %error, "could not write the persisted inventory"),
        }
        // The whole-file copy an engine before format 9 of the keyed copy kept beside it.
        if let Err(error) = durable::remove_unsynced(&self.root, &layout::join(&self.root, layout::LEGACY_INVENTORY_FILE)) {
            tracing::debug!(error = %error, "could not remove the persisted inventory an older engine kept");
        }
    }

    /// At the end of a one-shot write process: folds its partial model back into the keyed
    /// copy it was loaded from (`keyed::fold`, in place) when that load found the copy stale
    /// enough (`KEYED_FOLD_AFTER`), or a folder it had not expected to move had (deferred
    /// checks), under the writer lock (skipped while another process holds it). A failure only
    /// leaves the copy as stale as it was.
    pub(super) fn fold_into_keyed_copy(&self, inventory: &PartialModel) {
        let load = self.freshness().load;
        let due = self.keyed_fold_due.load(std::sync::atomic::Ordering::Relaxed);
        if inventory.in_view().is_err() || (load.read + load.forgotten < KEYED_FOLD_AFTER && !due) {
            return;
        }
        let Ok(Some(_writer)) = self.try_lock_writer_file() else { return };
        let started = std::time::Instant::now();
        let index = layout::join(&self.root, layout::INVENTORY_INDEX);
        match durable::update_keyed_cache(&self.root, &index, |t| crate::inventory_cache::keyed::fold(inventory, t)) {
            Ok(records) => tracing::debug!(elapsed = ?started.elapsed(), records, "partial model folded into the keyed inventory"),
            Err(error) => tracing::debug!(error = %error, "could not fold the partial model into the keyed inventory"),
        }
    }

    pub(super) fn lock_freshness(&self) -> MutexGuard<'_, Freshness> {
        self.freshness.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What this process did to keep its model equal to the disk.
    pub fn freshness(&self) -> Freshness {
        self.lock_freshness().clone()
    }

    /// Removes temporary files of killed writes under the writer lock (skipped, to be done by
    /// a later open, while another process holds it). Only files older than
    /// `TEMP_LEFTOVER_AGE` are leftovers.
    fn remove_leftover_temps(&self, found: &[PathBuf]) -> Result<usize> {
        let cutoff = crate::clock::machine_time().checked_sub(TEMP_LEFTOVER_AGE);
        let old: Vec<PathBuf> = found
            .iter()
            .filter(|p| {
                let modified = std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
                matches!((modified, cutoff), (Some(m), Some(c)) if m <= c)
            })
            .cloned()
            .collect();
        if old.is_empty() {
            return Ok(0);
        }
        let Some(_writer) = self.try_lock_writer_file()? else { return Ok(0) };
        let removed = durable::remove_leftover_temps(&self.root, &old)?;
        if removed > 0 {
            tracing::info!(removed, "removed temporary files left by killed writes");
        }
        Ok(removed)
    }

    /// Starts keeping the inventory equal to the disk with a file watcher (long-lived
    /// processes; `observe_disk` then settles it before every operation). Where the platform
    /// refuses a watch, every `observe_disk` does a stat walk instead.
    ///
    /// The watcher starts on a thread of its own (placing a recursive watch costs a walk of the
    /// whole tree: ~0.2 s at 100,000 notes), so a server answers `initialize` at once; the first
    /// operation that observes the disk waits for it (`watch_started`).
    pub fn watch_disk(&self) {
        let root = self.root.clone();
        let mode = match std::thread::Builder::new()
            .name("paravault-watch-start".into())
            .spawn(move || crate::watch::DiskWatch::start(&root))
        {
            Ok(handle) => {
                *self.watch_starting.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle);
                "watch"
            }
            Err(error) => {
                tracing::warn!(error = %error, "no thread to start the file watcher: every operation starts with a stat walk of the vault");
                "stat_walk"
            }
        };
        self.lock_freshness().mode = mode;
    }

    /// Waits for the watcher `watch_disk` is starting, if it is. Concurrent callers wait on
    /// the same lock, so none observes the disk before the watcher is placed. A model read
    /// before the watcher was placed may miss an edit made in between: its first settle asks
    /// for a stat walk.
    fn watch_started(&self) {
        let mut starting = self.watch_starting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(handle) = starting.take() else { return };
        let started = handle.join().unwrap_or_else(|_| {
            Err(crate::error::Error::io(
                "watching",
                self.root.display().to_string(),
                std::io::Error::other("the watcher's starting thread panicked"),
            ))
        });
        match started {
            Ok(watch) => {
                if !self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_nothing() {
                    watch.rescan_next("the model was read before the file watcher was placed");
                }
                let _ = self.watch.set(watch);
            }
            Err(error) => {
                tracing::warn!(error = %error, "no file watcher: every operation starts with a stat walk of the vault");
                self.lock_freshness().mode = "stat_walk";
            }
        }
    }

    /// The running file watcher, if `watch_disk` started one (waiting for it to be placed).
    pub fn disk_watch(&self) -> Option<&crate::watch::DiskWatch> {
        self.watch_started();
        self.watch.get()
    }

    /// Brings the inventory up to every change on disk finished before this call (long-lived
    /// processes call it before each operation; a short-lived process read the disk at first
    /// use). Re-reads only changed files; a watcher that cannot name the changes costs a stat
    /// walk, never a stale answer.
    pub fn observe_disk(&self) -> Result<()> {
        self.observe(true)
    }

    /// `observe_disk` where a watcher names the changes; nothing where only a stat walk could
    /// (work done ahead of a call, `prepare_search`, never walks the vault for it).
    pub(crate) fn observe_watched(&self) -> Result<()> {
        self.observe(false)
    }

    fn observe(&self, may_walk: bool) -> Result<()> {
        self.watch_started();
        let mode = self.lock_freshness().mode;
        let changes = match (mode, self.watch.get()) {
            ("watch", Some(watch)) => watch.settle(),
            ("stat_walk", _) if may_walk => ChangeSet::unknown("no file watcher"),
            _ => return Ok(()),
        };
        self.keep_for_replica(&changes);
        self.apply_changes(&changes)
    }

    /// Brings the model this process holds up to `changes` (`Inventory::apply`): none loaded,
    /// nothing to do (the first use reads the disk); a write's partial model is dropped (it
    /// answered its write). A catalog page someone else changed (another process, a person)
    /// makes the remembered renderer state suspect; a note changed outside the engine needs
    /// nothing more: the next write's catalog plan compares its folder's digest with the model.
    pub(crate) fn apply_changes(&self, changes: &ChangeSet) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut guard = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*guard, Held::Partial(_)) {
            *guard = Held::Nothing;
        }
        let Some(inventory) = guard.whole_mut() else { return Ok(()) };
        if let Some(reason) = match changes {
            ChangeSet::Unknown(reason) => Some(reason),
            ChangeSet::Known(_) => None,
        } {
            tracing::debug!(%reason, "walking the vault to find what changed on disk");
        }
        let applied = inventory.apply(&self.root, &self.policy, changes)?;
        drop(guard);
        if applied.catalog_changed {
            self.invalidate_catalog_state();
        }
        let mut freshness = self.lock_freshness();
        freshness.observed_at = Some(self.clock().stamp(chrono::SecondsFormat::Micros));
        freshness.paths_refreshed += applied.reread as u64;
        if let Some(reason) = applied.walked {
            freshness.stat_walks += 1;
            freshness.last_stat_walk_reason = Some(reason);
        }
        Ok(())
    }

    /// Runs `f` with mutable access to the inventory (writer-side model updates).
    /// Its folder listings are proven; the caller re-checks the files it consults
    /// (`Inventory::apply`).
    pub(crate) fn with_inventory_mut<T>(&self, f: impl FnOnce(&mut Inventory) -> T) -> Result<T> {
        let mut guard = self.lock_inventory_for(Scope::Write)?;
        Ok(f(guard.whole_mut().expect("BUG: lock_inventory loads the inventory")))
    }

    /// Runs `f` with mutable access to the model the current write planned on, partial or
    /// whole (`with_write_model`): the write's own later steps (publish, putting records back
    /// after a refusal) stay on it. Loads the whole model when there is none, and when `f`
    /// needs more than a partial model holds (its `Err(Overrun)`): `f` then runs again on it.
    pub(crate) fn with_write_inventory_mut<T>(
        &self,
        mut f: impl FnMut(&mut dyn ModelView) -> std::result::Result<T, Overrun>,
    ) -> Result<T> {
        let mut guard = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Held::Partial(model) = &mut *guard {
            match f(model) {
                Ok(out) => return Ok(out),
                Err(overrun) => {
                    tracing::debug!(%overrun, "the partial model did not hold what the write's step needs; loading it whole");
                    *guard = Held::Nothing;
                }
            }
        }
        self.load_whole_into(&mut guard, Scope::Write)?;
        Ok(inventory::of_whole(f(guard.whole_mut().expect("BUG: load_whole_into loads the inventory"))))
    }

    /// Runs `f` over the current inventory (loading it on first use).
    pub fn with_inventory<T>(&self, f: impl FnOnce(&Inventory) -> T) -> Result<T> {
        let guard = self.lock_inventory()?;
        Ok(f(guard.whole().expect("BUG: lock_inventory loads the inventory")))
    }

    /// Forgets the in-memory inventory so the next call re-reads the vault (for edits made
    /// outside the engine).
    pub fn reload(&self) {
        *self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Held::Nothing;
    }

    /// Re-reads one file into the inventory (after a change made by the engine or outside it)
    /// and returns the catalog directories the change affects.
    pub fn refresh_path(&self, path: &VaultPath) -> Result<BTreeSet<String>> {
        self.refresh_paths(&ChangeSet::of_paths([path.as_str()]))?;
        Ok(catalog::affected_dirs(path))
    }

    /// Brings the model up to `changes` the engine itself knows of (files another process's
    /// receipts name, files recovery or a write's apply put in place or left alone), loading
    /// it first when this process has none (`apply_changes` leaves an unloaded model alone).
    pub(crate) fn refresh_paths(&self, changes: &ChangeSet) -> Result<()> {
        drop(self.lock_inventory_for(Scope::Write)?);
        self.apply_changes(changes)
    }
}

#[cfg(test)]
mod tests;
