//! Change detection for long-lived processes (the MCP server, the web server): one inotify
//! watch per folder of the vault (the engine's own folder aside), whose queue the caller reads
//! itself before each operation.
//!
//! Why no barrier and no debouncer: the kernel queues an inotify event inside the system call
//! that makes the change, before that call returns. So when `settle` has read the queue until it
//! is empty, it holds every event of every change finished before it began: no other thread has
//! to be waited for, and no marker file proves anything. A debounce delay would let an
//! operation answer from a state that misses an edit finished before it began; the set of
//! pending paths is itself the debounce (a burst of events for one file is one refresh).
//!
//! A helper thread reads the queue too between operations (`DRAIN_AFTER` after the first
//! event of a burst), so a bulk change made while the process is idle (a checkout, another
//! process's import) overflows the kernel's queue only if it outruns that thread. Every read
//! is under one lock, which is what makes `settle`'s "until empty" cover everything before it.
//!
//! Whenever the watcher cannot vouch for the disk — its queue overflowed, a folder was removed
//! or moved (the watches' paths would be stale), a watch disappeared, an ignore file changed,
//! a read of the queue failed — the next `settle` asks for a full stat walk instead (never
//! silence), and every watch is placed again from the root before that walk.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

use crate::error::{Error, Result};
use crate::inventory::changes::{ChangeSet, FolderChange};
use crate::store::layout;

/// What each folder's watch reports, here and in the folder journal (`paravault watch`): its
/// entries created, removed, renamed or written to (an edit in place moves no folder, and
/// neither a settled model nor a write that trusts the journal stats the files), its own or an
/// entry's attributes changed, and its own removal or move. Links are never followed; a read
/// or a listing is never reported.
pub(crate) fn watch_mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::DONT_FOLLOW
        | WatchMask::ONLYDIR
}

/// File systems whose changes can come from another machine, which no inotify queue sees:
/// NFS, SMB/CIFS (three magics), FUSE (sshfs and the like), Ceph, 9P (WSL's Windows drives),
/// AFS.
const REMOTE_FILE_SYSTEMS: [(u32, &str); 8] = [
    (0x6969, "NFS"),
    (0x517B, "SMB"),
    (0xFF53_4D42, "CIFS"),
    (0xFE53_4D42, "SMB2"),
    (0x6573_5546, "FUSE"),
    (0x00C3_6400, "Ceph"),
    (0x0102_1997, "9P"),
    (0x5346_414F, "AFS"),
];

/// The name of the file system `path` is on when its changes can come from another machine
/// (`REMOTE_FILE_SYSTEMS`), else `None`.
pub(crate) fn remote_file_system(path: &Path) -> Result<Option<&'static str>> {
    let kind = rustix::fs::statfs(path).map_err(|e| Error::io("inspecting", path.display().to_string(), e.into()))?.f_type as u32;
    Ok(REMOTE_FILE_SYSTEMS.iter().find(|(magic, _)| *magic == kind).map(|(_, name)| *name))
}

/// The folders directly in vault-relative folder `dir` (at `path`), as vault-relative paths:
/// never a link, never the engine's own folder, never a name that is not UTF-8. Unlistable:
/// none (the folder's own watch or its parent's event tells what happened to it).
pub(crate) fn subfolders(path: &Path, dir: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(path) else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|entry| Some(crate::note::path::child(dir, entry.file_name().to_str()?)))
        .filter(|child| child != layout::STATE_DIR)
        .collect()
}

/// What the watcher saw change since the last `settle` (told to the model as a `ChangeSet`).
#[derive(Debug, Default)]
struct DiskChanges {
    /// Vault-relative paths of files that were created, modified or removed.
    paths: BTreeSet<String>,
    /// Why the watcher cannot name the changes (a full stat walk is needed), if it cannot.
    rescan: Option<String>,
    /// Vault-relative folders created since the last `settle`, and every folder found below
    /// them when they were watched: each is listed whole (its watch was placed before it is
    /// listed, so what was made in it before the watch is in the listing, and what after, an
    /// event), never a walk of the vault.
    created_dirs: BTreeSet<String>,
}

impl DiskChanges {
    /// The watcher's evidence as the model's `ChangeSet`: every path an entry of its folder,
    /// every created folder whole, or `Unknown` when the watcher cannot name the changes.
    fn into_change_set(self) -> ChangeSet {
        if let Some(reason) = self.rescan {
            return ChangeSet::Unknown(reason);
        }
        let ChangeSet::Known(mut changes) = ChangeSet::of_paths(self.paths.iter().map(String::as_str)) else { unreachable!() };
        for folder in &self.created_dirs {
            changes.folders.insert(folder.clone(), FolderChange::Whole);
        }
        ChangeSet::Known(changes)
    }
}

/// The inotify queue and what was taken from it: read only under `DiskWatch::queue`'s lock.
struct Queue {
    root: PathBuf,
    /// The vault root's file system (a folder on another one is checked: `watch_below`).
    device: u64,
    inotify: Inotify,
    /// Each watch → the vault-relative folder it watches (`""`: the root).
    watches: HashMap<WatchDescriptor, String>,
    buffer: Vec<u8>,
    changes: DiskChanges,
    /// Events read from the queue since the start (tests: reads of the vault queue none).
    events_taken: u64,
}

/// A running watcher over one vault root.
pub struct DiskWatch {
    queue: Arc<Mutex<Queue>>,
    stop: Arc<AtomicBool>,
    waker: mio::Waker,
    drainer: Option<std::thread::JoinHandle<()>>,
}

/// How long the helper thread lets a burst of events gather before it reads them.
const DRAIN_AFTER: Duration = Duration::from_millis(10);

const QUEUE: mio::Token = mio::Token(0);
const WAKE: mio::Token = mio::Token(1);

impl DiskWatch {
    /// Watches every folder below `root` (never the engine's own). Fails (typed) where the
    /// platform refuses a watch (the inotify watch limit) and where the vault, or a folder
    /// in it, is on a network or FUSE file system, whose edits made on another machine reach
    /// no inotify queue; callers then read the disk by stat walks.
    pub fn start(root: &Path) -> Result<Self> {
        let root = root.canonicalize().map_err(|e| Error::io("resolving", root.display().to_string(), e))?;
        if let Some(name) = remote_file_system(&root)? {
            return Err(remote(&root, name));
        }
        let device = std::fs::metadata(&root).map_err(|e| Error::io("inspecting", root.display().to_string(), e))?.dev();
        let io = |e: std::io::Error| Error::io("watching", root.display().to_string(), e);
        let inotify = Inotify::init().map_err(io)?;
        let poll = mio::Poll::new().map_err(io)?;
        poll.registry().register(&mut mio::unix::SourceFd(&inotify.as_raw_fd()), QUEUE, mio::Interest::READABLE).map_err(io)?;
        let waker = mio::Waker::new(poll.registry(), WAKE).map_err(io)?;
        let mut queue = Queue {
            root: root.clone(),
            device,
            inotify,
            watches: HashMap::new(),
            buffer: vec![0; 64 * 1024],
            changes: DiskChanges::default(),
            events_taken: 0,
        };
        queue.watch_below("", &mut Vec::new())?;
        let queue = Arc::new(Mutex::new(queue));
        let stop = Arc::new(AtomicBool::new(false));
        let drainer = {
            let (queue, stop) = (queue.clone(), stop.clone());
            std::thread::Builder::new().name("paravault-watch".into()).spawn(move || drain(poll, &queue, &stop)).map_err(io)?
        };
        Ok(DiskWatch { queue, stop, waker, drainer: Some(drainer) })
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        lock(&self.queue)
    }

    /// Reads the queue until it is empty (every event of a change finished before this call),
    /// then takes the pending changes.
    pub fn settle(&self) -> ChangeSet {
        let mut queue = self.lock();
        queue.take_in();
        std::mem::take(&mut queue.changes).into_change_set()
    }

    /// Makes the next `settle` ask for a stat walk, exactly as a queue overflow does (tests
    /// drive the fallback path through it).
    pub fn simulate_overflow(&self) {
        self.lock().void("the watcher's event queue overflowed (simulated)");
    }

    /// Makes the next `settle` ask for a stat walk, for `reason`.
    pub fn rescan_next(&self, reason: &str) {
        self.lock().changes.rescan.get_or_insert_with(|| reason.into());
    }
}

impl Drop for DiskWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.waker.wake();
        if let Some(drainer) = self.drainer.take() {
            let _ = drainer.join();
        }
    }
}

fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn remote(path: &Path, name: &str) -> Error {
    Error::NotConfigured {
        capability: "the file watcher",
        remediation: format!(
            "{} is on a {name} file system, where edits made on another machine reach no inotify queue; every operation starts with a stat walk instead",
            path.display()
        ),
    }
}

/// The helper thread: sleeps until the queue has events (or `stop`), lets the burst gather,
/// and takes it in.
fn drain(mut poll: mio::Poll, queue: &Mutex<Queue>, stop: &AtomicBool) {
    let mut events = mio::Events::with_capacity(4);
    while !stop.load(Ordering::Relaxed) {
        match poll.poll(&mut events, None) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                lock(queue).changes.rescan.get_or_insert_with(|| format!("the watcher could not wait on its queue: {e}"));
                return;
            }
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(DRAIN_AFTER);
        // Edge-triggered: everything queued is read, so the next event wakes the poll again.
        lock(queue).take_in();
    }
}

impl Queue {
    /// Takes in every queued event; a read that fails asks for a walk.
    fn take_in(&mut self) {
        loop {
            let batch: Vec<(WatchDescriptor, EventMask, Option<String>, bool)> = match self.inotify.read_events(&mut self.buffer) {
                Ok(events) => events
                    .map(|e| {
                        let name = e.name.map(|n| n.to_str().map(str::to_string));
                        (e.wd, e.mask, name.clone().flatten(), matches!(name, Some(None)))
                    })
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.void(&format!("the watcher's queue could not be read: {e}"));
                    return;
                }
            };
            if batch.is_empty() {
                return;
            }
            self.events_taken += batch.len() as u64;
            let mut void: Option<String> = None;
            let mut created: Vec<String> = Vec::new();
            for (wd, mask, name, not_utf8) in batch {
                if mask.contains(EventMask::Q_OVERFLOW) {
                    void.get_or_insert_with(|| "the watcher's event queue overflowed".into());
                    continue;
                }
                let Some(dir) = self.watches.get(&wd) else { continue };
                if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED) {
                    void.get_or_insert_with(|| format!("folder {dir:?} moved or was removed"));
                    continue;
                }
                if not_utf8 {
                    self.changes.rescan.get_or_insert_with(|| "a changed path is not UTF-8".into());
                    continue;
                }
                let Some(name) = name else {
                    // The folder's own attributes (a permission change can hide its notes).
                    self.changes.rescan.get_or_insert_with(|| format!("folder {dir:?} changed"));
                    continue;
                };
                let rel = crate::note::path::child(dir, &name);
                if rel == layout::STATE_DIR {
                    continue;
                }
                if mask.contains(EventMask::ISDIR) {
                    if mask.contains(EventMask::CREATE) {
                        created.push(rel);
                    } else if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM | EventMask::MOVED_TO) {
                        void.get_or_insert_with(|| format!("directory {rel} was moved or removed"));
                    } else {
                        self.changes.rescan.get_or_insert_with(|| format!("directory {rel} changed"));
                    }
                    continue;
                }
                if layout::IGNORE_FILES.contains(&name.as_str()) {
                    self.changes.rescan.get_or_insert_with(|| format!("ignore file {rel} changed"));
                    continue;
                }
                if name.starts_with(layout::TEMP_PREFIX) {
                    continue;
                }
                self.changes.paths.insert(rel);
            }
            for dir in created {
                let mut found = Vec::new();
                if let Err(error) = self.watch_below(&dir, &mut found) {
                    void.get_or_insert_with(|| format!("a created folder could not be watched: {error}"));
                }
                self.changes.created_dirs.extend(found);
            }
            if let Some(reason) = void {
                self.void(&reason);
            }
        }
    }

    /// The watcher cannot name what changed: the next `settle` asks for a walk, and every
    /// watch is placed again from the root first (a moved folder's watches name its old path;
    /// a folder created while the queue overflowed has none), so the walk is followed by
    /// events again.
    fn void(&mut self, reason: &str) {
        self.changes.rescan.get_or_insert_with(|| reason.into());
        for wd in std::mem::take(&mut self.watches).into_keys() {
            let _ = self.inotify.watches().remove(wd);
        }
        // The walk the next `settle` asks for reads every file: named paths are moot.
        self.changes.paths.clear();
        self.changes.created_dirs.clear();
        if let Err(error) = self.watch_below("", &mut Vec::new()) {
            tracing::warn!(error = %error, "the file watcher could not watch the vault again; the next operations walk it");
            self.changes.rescan = Some(format!("{reason}; the vault could not be watched again: {error}"));
        }
    }

    /// Watches `dir` and every folder below it (never through a link, never the engine's own
    /// folder), each watch set before its folder is listed, so an entry made after the listing
    /// is an event. `found`: each folder watched.
    fn watch_below(&mut self, dir: &str, found: &mut Vec<String>) -> Result<()> {
        let mut stack = vec![dir.to_string()];
        while let Some(dir) = stack.pop() {
            let path = layout::join(&self.root, &dir);
            let wd = match self.inotify.watches().add(&path, watch_mask()) {
                Ok(wd) => wd,
                // Gone (or replaced by a file or a link) before it was watched: its parent's
                // event already says so.
                Err(e) if !dir.is_empty() && matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    return Err(Error::NotConfigured {
                        capability: "the file watcher",
                        remediation: format!(
                            "the inotify watch limit was reached after {} folders; raise fs.inotify.max_user_watches",
                            self.watches.len()
                        ),
                    });
                }
                Err(e) => return Err(Error::io("watching", path.display().to_string(), e)),
            };
            // A folder where another file system is mounted: one whose edits can come from
            // another machine would be missed.
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() != self.device)
                && let Some(name) = remote_file_system(&path)?
            {
                return Err(remote(&path, name));
            }
            self.watches.insert(wd, dir.clone());
            stack.extend(subfolders(&path, &dir));
            found.push(dir);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
