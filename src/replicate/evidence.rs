//! Where `replicate` learns which files changed outside the engine since its last check, so
//! that a run with nothing to do costs O(change), not a `git status` of the whole work tree
//! (docs/replication.md, "What it costs"): the model's one change protocol, a `ChangeSet`,
//! from whichever evidence source this process has.
//!
//! - A long-lived process with a file watcher (`paravault mcp`) hands over what its watcher
//!   saw since the last check (`VaultState::take_replica_evidence`).
//! - Any other process asks the vault's folder journal (`paravault watch`) what changed since
//!   the position recorded when the last check committed every outside edit
//!   (`ReplicaState::edits_checked_at`).
//! - With neither, or when the evidence cannot say (`Unknown`: a first check, lost events,
//!   another journal run, an ignore file changed), git compares the whole work tree.
//!
//! The evidence only narrows what is compared: git still decides what differs from the branch
//! (`Git::changed_against`), so an engine commit is never taken for an outside edit.

use crate::error::Result;
use crate::inventory::JournalToken;
use crate::inventory::changes::ChangeSet;
use crate::store::git::Git;
use crate::vault::Vault;
use crate::write::replica::{self, ReplicaState};

/// What this run knows of the changes since the last check.
pub(super) enum Evidence {
    /// This process's watcher's, handed over (given back when the check fails).
    Watcher(ChangeSet),
    /// The folder journal's answer since the recorded position, and the position it answered at.
    Journal(ChangeSet, JournalToken),
    /// None: git compares the whole work tree.
    None,
}

impl Evidence {
    /// Takes this process's evidence: the watcher's, else the folder journal's.
    pub(super) fn take(vault: &Vault, state: &ReplicaState) -> Result<Evidence> {
        if let Some(changes) = vault.take_replica_evidence()? {
            return Ok(Evidence::Watcher(changes));
        }
        Ok(Self::from_journal(vault, state))
    }

    /// The same evidence, left in place (what `replicate --status` counts).
    pub(super) fn peek(vault: &Vault, state: &ReplicaState) -> Result<Evidence> {
        if let Some(changes) = vault.peek_replica_evidence()? {
            return Ok(Evidence::Watcher(changes));
        }
        Ok(Self::from_journal(vault, state))
    }

    fn from_journal(vault: &Vault, state: &ReplicaState) -> Evidence {
        match crate::folder_journal::ask(vault.root(), state.edits_checked_at) {
            Some(answer) => Evidence::Journal(answer.changes, answer.now),
            None => Evidence::None,
        }
    }

    /// The files to compare with the branch's `head`: `None` for all of them.
    pub(super) fn suspects(&self, vault: &Vault, git: &Git, head: Option<&str>) -> Result<Option<Vec<String>>> {
        match self {
            Evidence::Watcher(ChangeSet::Known(changes)) | Evidence::Journal(ChangeSet::Known(changes), _) => {
                replica::suspects_of(vault.root(), git, head, changes)
            }
            Evidence::Watcher(ChangeSet::Unknown(why)) | Evidence::Journal(ChangeSet::Unknown(why), _) => {
                tracing::debug!(%why, "git compares the whole work tree for outside edits");
                Ok(None)
            }
            Evidence::None => Ok(None),
        }
    }

    /// Where the evidence came from, as `ReplicateReport::outside_edits_from` names it.
    pub(super) fn source(&self) -> &'static str {
        match self {
            Evidence::Watcher(_) => "watcher",
            Evidence::Journal(..) => "folder journal",
            Evidence::None => "work tree",
        }
    }

    /// Every outside edit the evidence covers is committed: the next check starts from here.
    pub(super) fn checked(self, state: &mut ReplicaState) {
        if let Evidence::Journal(_, now) = self {
            state.edits_checked_at = Some(now);
        }
    }

    /// The check failed: the watcher's evidence is kept for the next one.
    pub(super) fn give_back(self, vault: &Vault) {
        if let Evidence::Watcher(changes) = self {
            vault.give_back_replica_evidence(changes);
        }
    }
}
