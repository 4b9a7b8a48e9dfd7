//! The evidence a long-lived process keeps for its replica's check for outside edits
//! (`replicate`): every `ChangeSet` its watcher settled since the last check, joined, so the
//! check looks at what changed instead of asking git about the whole work tree. A process
//! without a watcher keeps nothing (the check asks the folder journal, or git).

use super::VaultState;
use crate::error::Result;
use crate::inventory::changes::ChangeSet;
use crate::store::layout;

/// The most folders and entries kept between two checks; past it the next check asks git about
/// the whole work tree (what keeping more would save is less than what it would hold).
const REPLICA_EVIDENCE_MAX: usize = 50_000;

impl VaultState {
    /// Adds what the watcher settled to the evidence kept for the next check: nothing while the
    /// evidence is `Unknown` (no check has taken it yet: a vault that never replicates keeps
    /// nothing), and never git's own folder (git writes it; it is not the work tree).
    pub(super) fn keep_for_replica(&self, changes: &ChangeSet) {
        if changes.is_empty() {
            return;
        }
        let mut kept = self.replica_evidence.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*kept, ChangeSet::Unknown(_)) {
            return;
        }
        match changes {
            ChangeSet::Known(named) if named.folders.keys().any(|folder| in_git_dir(folder)) => {
                let mut work_tree = named.clone();
                work_tree.folders.retain(|folder, _| !in_git_dir(folder));
                kept.merge(&ChangeSet::Known(work_tree));
            }
            _ => kept.merge(changes),
        }
        if kept.size() > REPLICA_EVIDENCE_MAX {
            *kept = ChangeSet::unknown(format!("more than {REPLICA_EVIDENCE_MAX} changes since the last check"));
        }
    }

    /// Everything this process's watcher saw change in the work tree since the last call (the
    /// disk observed first, so every edit finished before the call is in it; `Unknown` at the
    /// first call, or when the watcher lost events), handed over: kept again from now on. `None`
    /// when the process keeps no watcher. A caller that could not act on the evidence gives
    /// it back ([`VaultState::give_back_replica_evidence`]).
    pub fn take_replica_evidence(&self) -> Result<Option<ChangeSet>> {
        if !self.keeps_a_watcher() {
            return Ok(None);
        }
        self.observe_disk()?;
        let mut kept = self.replica_evidence.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(Some(std::mem::replace(&mut *kept, ChangeSet::none())))
    }

    /// The evidence [`VaultState::take_replica_evidence`] would hand over, left in place (a
    /// report of how much is uncommitted).
    pub fn peek_replica_evidence(&self) -> Result<Option<ChangeSet>> {
        if !self.keeps_a_watcher() {
            return Ok(None);
        }
        self.observe_disk()?;
        Ok(Some(self.replica_evidence.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()))
    }

    /// Puts back evidence a check took but could not act on (joined with what came since).
    pub fn give_back_replica_evidence(&self, mut evidence: ChangeSet) {
        let mut kept = self.replica_evidence.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        evidence.merge(&kept);
        *kept = evidence;
    }

    fn keeps_a_watcher(&self) -> bool {
        self.lock_freshness().mode == "watch"
    }
}

/// Whether a vault-relative folder is git's own (`.git` or below).
fn in_git_dir(folder: &str) -> bool {
    folder == layout::GIT_DIR || folder.strip_prefix(layout::GIT_DIR).is_some_and(|rest| rest.starts_with('/'))
}
