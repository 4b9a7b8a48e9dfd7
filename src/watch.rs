//! Change detection for long-lived processes (the MCP server, later the web server): a `notify`
//! watcher over the vault collects the paths that changed, and a barrier proves that every
//! event of an edit finished before a call began has been delivered before the call reads.
//!
//! Why no time-based debouncer: the set of pending paths is itself the debounce (a burst of
//! events for one file is one refresh, done when the next operation needs it), and a debounce
//! delay would let an operation answer from a state that misses an edit finished before it
//! began. Inotify delivers the events of one watcher in order, so once the watcher has seen
//! the barrier file that `settle` creates, it has seen every earlier change as well. Each
//! barrier is a new file whose name carries the process id and a token (reading one shared
//! file's content would let a later barrier's token vouch for events not yet delivered).
//!
//! Whenever the watcher cannot vouch for the disk — its queue overflowed, it reported an
//! error, a directory moved, an ignore file changed, or the barrier did not come back in time —
//! the next `settle` asks for a full stat walk instead (never silence).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

use crate::error::{Error, Result};
use crate::inventory::changes::{ChangeSet, FolderChange};
use crate::store::layout;

/// What the watcher saw change since the last `settle` (told to the model as a `ChangeSet`).
#[derive(Debug, Default)]
struct DiskChanges {
    /// Vault-relative paths of files that were created, modified or removed.
    paths: BTreeSet<String>,
    /// Why the watcher cannot name the changes (a full stat walk is needed), if it cannot.
    rescan: Option<String>,
    /// Vault-relative folders created since the last `settle`: each is listed whole (the
    /// watcher watches a created folder from the moment it delivers its creation), never a walk
    /// of the vault.
    created_dirs: BTreeSet<String>,
    /// Folders the last `settle` told as created, listed once more: the watcher adds a created
    /// folder's watch after it delivered the batch of events that named it, so what was made in
    /// it in between is named by no event and only a listing finds it.
    look_again: BTreeSet<String>,
}

impl DiskChanges {
    /// The watcher's evidence as the model's `ChangeSet`: every path an entry of its folder,
    /// every created folder (and each one told last time) whole, or `Unknown` when the watcher
    /// cannot name the changes.
    fn into_change_set(self) -> ChangeSet {
        if let Some(reason) = self.rescan {
            return ChangeSet::Unknown(reason);
        }
        let ChangeSet::Known(mut changes) = ChangeSet::of_paths(self.paths.iter().map(String::as_str)) else { unreachable!() };
        for folder in self.created_dirs.iter().chain(&self.look_again) {
            changes.folders.insert(folder.clone(), FolderChange::Whole);
        }
        ChangeSet::Known(changes)
    }
}

#[derive(Default)]
struct Pending {
    changes: DiskChanges,
    /// The highest barrier token the watcher has delivered.
    barrier_seen: u64,
}

struct Shared {
    pending: Mutex<Pending>,
    delivered: Condvar,
    /// Access events (an open, a close) the watcher was handed: none where the backend filters
    /// them out, as inotify does in the kernel (the test of `DiskWatch::start`'s mask).
    access_events: AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running watcher over one vault root.
pub struct DiskWatch {
    _watcher: notify::RecommendedWatcher,
    shared: Arc<Shared>,
    /// The engine's state folder, where barrier files are created.
    root: PathBuf,
    state_dir: PathBuf,
    next_token: AtomicU64,
    timeout: Duration,
}

/// How long `settle` waits for its barrier before it falls back to a stat walk.
const BARRIER_TIMEOUT: Duration = Duration::from_millis(500);

impl DiskWatch {
    /// Starts watching `root` recursively. Fails (typed) where the platform refuses a watch,
    /// e.g. when the inotify watch limit is reached; callers then read the disk by stat walks.
    pub fn start(root: &Path) -> Result<Self> {
        let root = root.canonicalize().map_err(|e| Error::io("resolving", root.display().to_string(), e))?;
        let state_dir = layout::join(&root, layout::STATE_DIR);
        crate::store::durable::create_dir_all(&root, &state_dir)?;
        let shared =
            Arc::new(Shared { pending: Mutex::new(Pending::default()), delivered: Condvar::new(), access_events: AtomicU64::new(0) });
        let handler_shared = shared.clone();
        let handler_root = root.clone();
        // Only the kinds `deliver` reads: an open or a close (every read of a note, every
        // folder listed) would wake the watcher's thread for an event it drops. On inotify the
        // mask is the kernel's, so those events are never queued at all.
        let config = notify::Config::default().with_event_kinds(notify::EventKindMask::CORE);
        let mut watcher = notify::RecommendedWatcher::new(
            move |event: notify::Result<notify::Event>| deliver(&handler_shared, &handler_root, event),
            config,
        )
        .map_err(|e| watch_error(&root, e))?;
        watcher.watch(&root, RecursiveMode::Recursive).map_err(|e| watch_error(&root, e))?;
        Ok(DiskWatch {
            _watcher: watcher,
            shared,
            root: root.to_path_buf(),
            state_dir,
            next_token: AtomicU64::new(1),
            timeout: BARRIER_TIMEOUT,
        })
    }

    /// Waits until the watcher has delivered every event up to now (the barrier), then takes
    /// the pending changes. A barrier that cannot be written or does not come back in time
    /// turns into a request for a stat walk.
    pub fn settle(&self) -> ChangeSet {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let barrier = self.state_dir.join(format!("{}{token}", barrier_prefix()));
        if let Err(error) = crate::store::durable::create_scratch(&self.root, &barrier) {
            let mut pending = self.shared.lock();
            pending.changes.rescan.get_or_insert_with(|| format!("the watch barrier could not be written: {error}"));
            return std::mem::take(&mut pending.changes).into_change_set();
        }
        let pending = self.shared.lock();
        let (mut pending, waited) =
            self.shared.delivered.wait_timeout_while(pending, self.timeout, |p| p.barrier_seen < token).unwrap_or_else(|e| e.into_inner());
        if waited.timed_out() && pending.barrier_seen < token {
            pending.changes.rescan.get_or_insert_with(|| "the watcher did not deliver its barrier in time".into());
        }
        let changes = std::mem::take(&mut pending.changes);
        // Each folder told as created now is listed once more at the next settle.
        pending.changes.look_again = changes.created_dirs.clone();
        drop(pending);
        if let Err(error) = crate::store::durable::remove_scratch(&self.root, &barrier) {
            tracing::debug!(error = %error, "could not remove a watch barrier file");
        }
        changes.into_change_set()
    }

    /// Makes the next `settle` ask for a stat walk, exactly as a queue overflow does (tests
    /// drive the fallback path through it).
    pub fn simulate_overflow(&self) {
        self.rescan_next("the watcher's event queue overflowed (simulated)");
    }

    /// Makes the next `settle` ask for a stat walk, for `reason`.
    pub fn rescan_next(&self, reason: &str) {
        self.shared.lock().changes.rescan.get_or_insert_with(|| reason.into());
    }
}

fn watch_error(root: &Path, error: notify::Error) -> Error {
    Error::io("watching", root.display().to_string(), std::io::Error::other(error.to_string()))
}

/// Name prefix of this process's barrier files (`layout::WATCH_BARRIER_PREFIX`, the process id).
fn barrier_prefix() -> String {
    format!("{}{}-", layout::WATCH_BARRIER_PREFIX, std::process::id())
}

/// The watcher thread's handler: records changed paths, rescans and barrier tokens.
fn deliver(shared: &Shared, root: &Path, event: notify::Result<notify::Event>) {
    let event = match event {
        Ok(event) => event,
        Err(error) => {
            shared.lock().changes.rescan.get_or_insert_with(|| format!("the watcher reported an error: {error}"));
            return;
        }
    };
    if matches!(event.kind, EventKind::Access(_)) {
        shared.access_events.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if matches!(event.kind, EventKind::Create(_)) {
        let prefix = barrier_prefix();
        let token = event.paths.iter().find_map(|p| p.file_name()?.to_str()?.strip_prefix(prefix.as_str())?.parse::<u64>().ok());
        if let Some(token) = token {
            let mut pending = shared.lock();
            pending.barrier_seen = pending.barrier_seen.max(token);
            shared.delivered.notify_all();
            return;
        }
    }
    let mut pending = shared.lock();
    if event.need_rescan() {
        pending.changes.rescan.get_or_insert_with(|| "the watcher's event queue overflowed".into());
        return;
    }
    for path in &event.paths {
        let Ok(rel) = path.strip_prefix(root) else { continue };
        let Some(rel) = rel.to_str() else {
            pending.changes.rescan.get_or_insert_with(|| "a changed path is not UTF-8".into());
            continue;
        };
        if rel.is_empty() || rel == layout::STATE_DIR || rel.starts_with(&format!("{}/", layout::STATE_DIR)) {
            continue;
        }
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if layout::IGNORE_FILES.contains(&name) {
            pending.changes.rescan.get_or_insert_with(|| format!("ignore file {rel} changed"));
            continue;
        }
        if name.starts_with(layout::TEMP_PREFIX) {
            continue;
        }
        if matches!(event.kind, EventKind::Create(notify::event::CreateKind::Folder)) {
            pending.changes.created_dirs.insert(rel.to_string());
            continue;
        }
        if matches!(event.kind, EventKind::Remove(notify::event::RemoveKind::Folder)) || path.is_dir() {
            pending.changes.rescan.get_or_insert_with(|| format!("directory {rel} was created, moved or removed"));
            continue;
        }
        pending.changes.paths.insert(rel.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watcher's evidence source: its paths are entries of their folders; a watcher that
    /// cannot name the changes says why, and only a walk can tell.
    #[test]
    fn the_watchers_paths_are_entries_and_its_rescan_is_unknown() {
        let paths: BTreeSet<String> = ["01_Projects/a.md", "01_Projects/b.md", "index.md"].map(String::from).into();
        let named = DiskChanges { paths: paths.clone(), ..Default::default() };
        assert_eq!(named.into_change_set(), ChangeSet::of_paths(["01_Projects/a.md", "01_Projects/b.md", "index.md"]));
        // A created folder, and one told as created last time, are listed whole.
        let created = DiskChanges {
            paths: paths.clone(),
            created_dirs: ["03_Resources/new".to_string()].into(),
            look_again: ["03_Resources/older".to_string()].into(),
            ..Default::default()
        };
        let ChangeSet::Known(mut expected) = ChangeSet::of_paths(["01_Projects/a.md", "01_Projects/b.md", "index.md"]) else {
            unreachable!()
        };
        expected.folders.insert("03_Resources/new".into(), FolderChange::Whole);
        expected.folders.insert("03_Resources/older".into(), FolderChange::Whole);
        assert_eq!(created.into_change_set(), ChangeSet::Known(expected));
        let overflowed = DiskChanges { paths, rescan: Some("the event queue overflowed".into()), ..Default::default() };
        assert_eq!(overflowed.into_change_set(), ChangeSet::unknown("the event queue overflowed"));
        assert!(DiskChanges::default().into_change_set().is_empty());
    }

    /// Reading the vault wakes no watcher: a note read and folders listed (what every search
    /// and every plan does) hand the watcher no event, while an edit is still told.
    #[cfg(target_os = "linux")]
    #[test]
    fn reads_hand_the_watcher_no_event_and_edits_still_do() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("03_Resources/topic")).unwrap();
        std::fs::write(root.join("03_Resources/topic/a.md"), "# A\n").unwrap();
        let watch = DiskWatch::start(&root).unwrap();
        assert!(watch.settle().is_empty());
        for _ in 0..3 {
            assert_eq!(std::fs::read_to_string(root.join("03_Resources/topic/a.md")).unwrap(), "# A\n");
            assert_eq!(std::fs::read_dir(root.join("03_Resources")).unwrap().count(), 1);
            assert_eq!(std::fs::read_dir(root.join("03_Resources/topic")).unwrap().count(), 1);
        }
        assert!(watch.settle().is_empty());
        std::fs::write(root.join("03_Resources/topic/a.md"), "# A, edited\n").unwrap();
        assert_eq!(watch.settle(), ChangeSet::of_paths(["03_Resources/topic/a.md"]));
        assert_eq!(watch.shared.access_events.load(Ordering::Relaxed), 0, "the watcher was handed opens or closes");
    }
}
