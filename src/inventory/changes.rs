//! Changes, both ways: `ChangeSet`, what changed on disk as one evidence source tells it (the one
//! currency every source pays the model in: a walk, folder stamps, the folder journal, the
//! watcher, other processes' receipts, a write's re-check), and `ChangeLog`, which paths the
//! model's latest `upsert`s and `remove`s touched, by revision, so a reader that derived
//! something from an older revision (agent memory's episode index) catches up in O(change)
//! instead of comparing the whole vault again.
//!
//! The log keeps the last `CHANGES_KEPT` entries; a reader keyed to a revision older than what
//! the log still holds is told so (`None`) and must recompute from the whole inventory, so a
//! lost entry can cost time but never give a stale answer.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use super::JournalToken;
use crate::note::path::VaultPath;

/// What changed on disk since a point, as one evidence source tells it
/// (`Inventory::apply` brings the model up to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeSet {
    /// The source cannot say what changed (why): only a walk of the vault can.
    Unknown(String),
    /// These folders and entries changed, and nothing else did.
    Known(Changes),
}

/// The folders and entries a `ChangeSet::Known` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Per folder (`""` is the root): the folder as a whole, or these entries of it.
    pub folders: BTreeMap<String, FolderChange>,
    /// The folder journal's position these changes bring the model to, when the source is
    /// the journal.
    pub position: Option<JournalToken>,
}

/// What changed in one folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FolderChange {
    /// The folder as a whole (its own attributes, an entry nobody named, or more entries than
    /// the source keeps by name; or it vanished): it is listed again.
    Whole,
    /// Only these entries (names in it, never empty): each is looked at alone.
    Entries(BTreeSet<String>),
}

impl ChangeSet {
    /// Nothing changed.
    pub fn none() -> ChangeSet {
        ChangeSet::Known(Changes::default())
    }

    /// Only a walk can say what changed.
    pub fn unknown(reason: impl Into<String>) -> ChangeSet {
        ChangeSet::Unknown(reason.into())
    }

    /// The files (or folders) at these vault-relative paths were created, written to or
    /// removed: each an entry of its folder.
    pub fn of_paths<'p>(paths: impl IntoIterator<Item = &'p str>) -> ChangeSet {
        let mut changes = Changes::default();
        for path in paths {
            changes.entry(path);
        }
        ChangeSet::Known(changes)
    }

    /// These folders are listed again whole.
    pub fn of_folders<'f>(folders: impl IntoIterator<Item = &'f str>) -> ChangeSet {
        let mut changes = Changes::default();
        for folder in folders {
            changes.folders.insert(folder.to_string(), FolderChange::Whole);
        }
        ChangeSet::Known(changes)
    }

    /// Whether it names no change at all.
    pub fn is_empty(&self) -> bool {
        matches!(self, ChangeSet::Known(changes) if changes.folders.is_empty())
    }

    /// Adds what `later` names, so this names everything both did: `Unknown` absorbs the rest, a
    /// folder changed whole keeps that, entries of one folder are joined, and the position is
    /// `later`'s (a reader that kept the evidence of several calls, e.g. a replica's check for
    /// outside edits since its last one).
    pub fn merge(&mut self, later: &ChangeSet) {
        let (ChangeSet::Known(mine), ChangeSet::Known(theirs)) = (&mut *self, later) else {
            if let ChangeSet::Unknown(why) = later
                && !matches!(self, ChangeSet::Unknown(_))
            {
                *self = ChangeSet::Unknown(why.clone());
            }
            return;
        };
        for (folder, change) in &theirs.folders {
            match (mine.folders.entry(folder.clone()).or_insert_with(|| FolderChange::Entries(BTreeSet::new())), change) {
                (FolderChange::Whole, _) => {}
                (held, FolderChange::Whole) => *held = FolderChange::Whole,
                (FolderChange::Entries(held), FolderChange::Entries(names)) => held.extend(names.iter().cloned()),
            }
        }
        if theirs.position.is_some() {
            mine.position = theirs.position;
        }
    }

    /// How many folders and entries it names (0 for `Unknown`): what keeping it costs.
    pub fn size(&self) -> usize {
        match self {
            ChangeSet::Unknown(_) => 0,
            ChangeSet::Known(changes) => changes
                .folders
                .values()
                .map(|change| match change {
                    FolderChange::Whole => 1,
                    FolderChange::Entries(names) => names.len(),
                })
                .sum(),
        }
    }
}

impl Changes {
    /// Adds the entry at vault-relative `path` (a folder already changed whole keeps that).
    pub fn entry(&mut self, path: &str) {
        let (folder, name) = path.rsplit_once('/').unwrap_or(("", path));
        if name.is_empty() {
            return;
        }
        match self.folders.entry(folder.to_string()).or_insert_with(|| FolderChange::Entries(BTreeSet::new())) {
            FolderChange::Whole => {}
            FolderChange::Entries(names) => {
                names.insert(name.to_string());
            }
        }
    }

    /// The folders changed as a whole, in path order.
    pub fn whole_folders(&self) -> impl Iterator<Item = &str> {
        self.folders.iter().filter(|(_, change)| **change == FolderChange::Whole).map(|(folder, _)| folder.as_str())
    }

    /// The entries named one by one, as vault-relative paths, in folder order.
    pub fn entries(&self) -> impl Iterator<Item = String> + '_ {
        self.folders.iter().flat_map(|(folder, change)| match change {
            FolderChange::Whole => Vec::new(),
            FolderChange::Entries(names) => names.iter().map(|name| crate::note::path::child(folder, name)).collect(),
        })
    }
}

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

    /// Evidence kept over several calls names everything each call named: entries join,
    /// a whole folder stays whole, `Unknown` absorbs the rest, the position is the latest.
    #[test]
    fn merged_change_sets_name_everything_each_named() {
        let mut kept = ChangeSet::of_paths(["01_Projects/a.md", "03_Resources/x/b.md"]);
        kept.merge(&ChangeSet::of_paths(["01_Projects/c.md"]));
        kept.merge(&ChangeSet::of_folders(["03_Resources/x"]));
        kept.merge(&ChangeSet::of_paths(["03_Resources/x/d.md", "index.md"]));
        let mut later = ChangeSet::none();
        let token = JournalToken { epoch: 7, seq: 42 };
        if let ChangeSet::Known(changes) = &mut later {
            changes.position = Some(token);
        }
        kept.merge(&later);
        let ChangeSet::Known(changes) = &kept else { panic!("{kept:?}") };
        // In folder order: the root's entries first.
        assert_eq!(changes.entries().collect::<Vec<_>>(), ["index.md", "01_Projects/a.md", "01_Projects/c.md"]);
        assert_eq!(changes.whole_folders().collect::<Vec<_>>(), ["03_Resources/x"]);
        assert_eq!(changes.position, Some(token));
        assert_eq!(kept.size(), 4);
        kept.merge(&ChangeSet::unknown("the queue overflowed"));
        assert_eq!(kept, ChangeSet::unknown("the queue overflowed"));
        kept.merge(&ChangeSet::of_paths(["01_Projects/e.md"]));
        assert_eq!(kept, ChangeSet::unknown("the queue overflowed"), "nothing known is added to an unknown");
        let mut empty = ChangeSet::none();
        empty.merge(&ChangeSet::none());
        assert!(empty.is_empty());
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
