//! The inventory's recent changes: which paths the latest `upsert`s and `remove`s touched, by
//! revision, so a reader that derived something from an older revision (agent memory's episode
//! index) catches up in O(change) instead of comparing the whole vault again.
//!
//! The log keeps the last `CHANGES_KEPT` entries; a reader keyed to a revision older than what
//! the log still holds is told so (`None`) and must recompute from the whole inventory, so a
//! lost entry can cost time but never give a stale answer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::note::path::VaultPath;

/// Entries kept (a burst of more changes than this between two reads costs one full compare).
pub const CHANGES_KEPT: usize = 4096;

/// A fresh identity for a newly built inventory (a reload starts a new one: revisions of two
/// inventories are never compared).
pub fn next_origin() -> u64 {
    static ORIGIN: AtomicU64 = AtomicU64::new(1);
    ORIGIN.fetch_add(1, Ordering::Relaxed)
}

/// The paths changed by recent revisions, oldest first.
#[derive(Debug, Default, Clone)]
pub struct ChangeLog {
    entries: VecDeque<(u64, VaultPath)>,
    /// The newest revision whose entry was dropped (0: none dropped).
    dropped_through: u64,
}

impl ChangeLog {
    /// Records that revision `revision` changed `path`.
    pub fn record(&mut self, revision: u64, path: &VaultPath) {
        if self.entries.len() == CHANGES_KEPT
            && let Some((dropped, _)) = self.entries.pop_front()
        {
            self.dropped_through = dropped;
        }
        self.entries.push_back((revision, path.clone()));
    }

    /// Starts the log at revision `revision` with no entries, as if every earlier entry had
    /// been dropped: a model built in bulk (`Inventory::assemble`) has no per-path history, and
    /// a reader keyed to an earlier revision recomputes from the whole inventory.
    pub fn start_at(&mut self, revision: u64) {
        self.entries.clear();
        self.dropped_through = revision;
    }

    /// The paths changed after revision `since` (each once, in no particular order), or `None`
    /// when the log no longer reaches back that far.
    pub fn since(&self, since: u64) -> Option<Vec<&VaultPath>> {
        if since < self.dropped_through {
            return None;
        }
        let start = self.entries.partition_point(|(revision, _)| *revision <= since);
        let mut paths: Vec<&VaultPath> = self.entries.range(start..).map(|(_, path)| path).collect();
        paths.sort();
        paths.dedup();
        Some(paths)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(name: &str) -> VaultPath {
        VaultPath::parse(name).expect("path")
    }

    #[test]
    fn since_names_each_path_changed_after_the_revision() {
        let mut log = ChangeLog::default();
        log.record(1, &path("00_Inbox/a.md"));
        log.record(2, &path("00_Inbox/b.md"));
        log.record(3, &path("00_Inbox/a.md"));
        let names = |v: Option<Vec<&VaultPath>>| v.expect("in range").iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(names(log.since(0)), ["00_Inbox/a.md", "00_Inbox/b.md"]);
        assert_eq!(names(log.since(2)), ["00_Inbox/a.md"]);
        assert!(log.since(3).expect("in range").is_empty());
    }

    #[test]
    fn a_revision_older_than_the_log_is_refused() {
        let mut log = ChangeLog::default();
        for revision in 1..=(CHANGES_KEPT as u64 + 10) {
            log.record(revision, &path("00_Inbox/a.md"));
        }
        assert!(log.since(5).is_none(), "entries after revision 5 were dropped");
        assert!(log.since(10).is_some(), "revision 10's successors are all kept");
        assert!(log.since(9).is_none());
    }
}
