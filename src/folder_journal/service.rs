//! `paravault watch`: the folder journal's resident side. One inotify watch per folder of the
//! vault (the engine's own folder aside), a counter of events taken in, and for each folder
//! the count at which it last changed: as a whole, and for each of its entries changed since
//! (at most `ENTRIES_KEPT` of them by name); a question is answered after the whole event
//! queue has been read.
//!
//! What voids a run (a new random epoch, every watch set again, every earlier position
//! answered `unknown`): a queue overflow, a folder removed or moved (the watches' paths would
//! be stale), a watch that disappeared. A folder created is watched at once, with everything
//! below it, and reported as changed with its parent (the write then lists it whole).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use super::{FolderJournalReady, carried, parse_question, render_answer};
use crate::error::{Error, Result};
use crate::inventory::JournalToken;
use crate::inventory_cache::keyed::FolderChange;
use crate::store::{durable, layout, nofollow};
use crate::watch::{remote_file_system, subfolders, watch_mask};

const INOTIFY: Token = Token(0);
const LISTENER: Token = Token(1);

/// The most entries of one folder the journal keeps by name: past it the oldest half are
/// forgotten, and a question since before them is answered with the folder as a whole.
const ENTRIES_KEPT: usize = 512;

/// What changed in one folder during a run, by the event count (`seq`) of each change.
#[derive(Debug, Default)]
struct Changes {
    /// The last change of any kind.
    last: u64,
    /// The last change that is not told by entry (its own attributes, an entry the protocol
    /// cannot carry, entries forgotten): a question since before it gets the whole folder.
    whole: u64,
    /// Each entry changed since `whole`, by name → its last change.
    entries: HashMap<String, u64>,
}

impl Changes {
    /// What a question since `since` is told of this folder (`None`: nothing changed since).
    fn since(&self, since: u64) -> Option<FolderChange> {
        if self.last <= since {
            None
        } else if self.whole > since {
            Some(FolderChange::Whole)
        } else {
            Some(FolderChange::Entries(self.entries.iter().filter(|(_, at)| **at > since).map(|(name, _)| name.clone()).collect()))
        }
    }

    fn entry(&mut self, name: String, seq: u64) {
        self.last = seq;
        self.entries.insert(name, seq);
        if self.entries.len() > ENTRIES_KEPT {
            let mut ats: Vec<u64> = self.entries.values().copied().collect();
            ats.sort_unstable();
            let forgotten = ats[ats.len() / 2];
            self.whole = self.whole.max(forgotten);
            self.entries.retain(|_, at| *at > forgotten);
        }
    }

    fn whole(&mut self, seq: u64) {
        (self.last, self.whole) = (seq, seq);
        // Every question these could answer is now told the whole folder.
        self.entries.clear();
    }
}

/// The longest socket path a Unix socket address holds (`sun_path` less its NUL).
const SOCKET_PATH_MAX: usize = 107;

/// Asks a running journal to stop at its next wake-up (tests; `paravault watch` runs until it
/// is killed).
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A running folder journal of one vault (see the module doc).
pub struct FolderJournal {
    root: PathBuf,
    inotify: Inotify,
    /// Each watch's folder, vault-relative (`""`: the root).
    watches: HashMap<WatchDescriptor, String>,
    epoch: u64,
    /// Events taken in during this run.
    seq: u64,
    /// Each folder changed during this run → what changed in it, and when.
    changed: HashMap<String, Changes>,
    listener: UnixListener,
    /// The vault root's file system (a folder on another one is checked: `refuse_remote`).
    device: u64,
    socket: PathBuf,
    _lock: std::fs::File,
    buffer: Vec<u8>,
}

fn unavailable(remediation: String) -> Error {
    Error::NotConfigured { capability: "the folder journal", remediation }
}

/// Refuses `path` when it is on a file system whose changes can come from another machine.
fn refuse_remote(path: &Path, what: &str) -> Result<()> {
    match remote_file_system(path)? {
        Some(name) => Err(unavailable(format!(
            "{what} is on a {name} file system, where edits made on another machine reach no inotify queue; writes stat every folder instead"
        ))),
        None => Ok(()),
    }
}

fn fresh_epoch() -> u64 {
    u64::from_le_bytes(crate::hex::random_bytes())
}

impl FolderJournal {
    /// Watches every folder of the vault at `root` and binds its socket. Refused (typed) on a
    /// network or FUSE file system, when another journal keeps this vault, when the socket's
    /// path is too long, or when the platform refuses a watch (the inotify watch limit).
    pub fn start(root: &Path) -> Result<Self> {
        let root = root.canonicalize().map_err(|e| Error::io("resolving", root.display().to_string(), e))?;
        refuse_remote(&root, "the vault")?;
        let device = std::fs::metadata(&root).map_err(|e| Error::io("inspecting", root.display().to_string(), e))?.dev();
        nofollow::refuse_symlinked_state(&root)?;
        let socket = layout::join(&root, layout::FOLDER_JOURNAL_SOCKET);
        if socket.as_os_str().len() > SOCKET_PATH_MAX {
            return Err(unavailable(format!(
                "its socket's path ({} bytes) is longer than a Unix socket address holds ({SOCKET_PATH_MAX}); move the vault to a shorter path",
                socket.as_os_str().len()
            )));
        }
        let lock = layout::join(&root, layout::FOLDER_JOURNAL_LOCK);
        let Some((lock, listener)) = durable::bind_engine_socket(&root, &socket, &lock)? else {
            return Err(unavailable("another `paravault watch` already keeps this vault's folder journal".into()));
        };
        listener.set_nonblocking(true).map_err(|e| Error::io("binding", layout::FOLDER_JOURNAL_SOCKET, e))?;
        let inotify = Inotify::init().map_err(|e| Error::io("watching", root.display().to_string(), e))?;
        let mut journal = FolderJournal {
            root,
            inotify,
            watches: HashMap::new(),
            epoch: fresh_epoch(),
            seq: 0,
            changed: HashMap::new(),
            listener,
            device,
            socket,
            _lock: lock,
            buffer: vec![0; 64 * 1024],
        };
        journal.watch_below("", false)?;
        Ok(journal)
    }

    /// What `paravault watch` prints once it watches.
    pub fn ready(&self) -> FolderJournalReady {
        FolderJournalReady {
            state: "watching",
            vault: self.root.display().to_string(),
            socket: self.socket.display().to_string(),
            folders: self.watches.len(),
            pid: std::process::id(),
        }
    }

    /// Serves questions until `stop` is set (never, without one) or the vault's folder is
    /// removed or moved (an error).
    pub fn run(&mut self, stop: Option<&Stop>) -> Result<()> {
        let io = |e: std::io::Error| Error::io("watching", layout::FOLDER_JOURNAL_SOCKET, e);
        let mut poll = Poll::new().map_err(io)?;
        poll.registry().register(&mut SourceFd(&self.inotify.as_raw_fd()), INOTIFY, Interest::READABLE).map_err(io)?;
        poll.registry().register(&mut SourceFd(&self.listener.as_raw_fd()), LISTENER, Interest::READABLE).map_err(io)?;
        let mut events = Events::with_capacity(8);
        // With a stop flag, wake up to look at it; otherwise sleep until an event or a question.
        let timeout = stop.map(|_| Duration::from_millis(20));
        loop {
            if stop.is_some_and(Stop::stopped) {
                return Ok(());
            }
            match poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            }
            // Edge-triggered: the queue and the pending connections are taken whole each time.
            self.take_in()?;
            loop {
                match self.listener.accept() {
                    Ok((stream, _)) => self.answer_on(stream)?,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "the folder journal could not accept a question");
                        break;
                    }
                }
            }
        }
    }

    /// Reads one question, takes in every queued event (all those of edits finished before
    /// the question was sent), and answers. A caller that sends nonsense or stalls gets no
    /// answer (it then stats every folder).
    fn answer_on(&mut self, stream: UnixStream) -> Result<()> {
        let limit = Some(Duration::from_secs(1));
        if stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(limit))
            .and_then(|()| stream.set_write_timeout(limit))
            .is_err()
        {
            return Ok(());
        }
        let mut line = String::new();
        let mut reader = std::io::BufReader::new(std::io::Read::take(&stream, 128));
        if reader.read_line(&mut line).is_err() {
            return Ok(());
        }
        let Some(since) = parse_question(&line) else {
            tracing::debug!("the folder journal got a question it does not understand");
            return Ok(());
        };
        self.take_in()?;
        let (now, changed) = self.changes_since(since);
        if let Err(e) = (&stream).write_all(render_answer(now, changed.as_ref()).as_bytes()) {
            tracing::debug!(error = %e, "the folder journal could not answer");
        }
        Ok(())
    }

    /// This run's position, and the folders changed since `since` with what changed in each
    /// (`None`: not this run's).
    pub(super) fn changes_since(&self, since: Option<JournalToken>) -> (JournalToken, Option<BTreeMap<String, FolderChange>>) {
        let now = JournalToken { epoch: self.epoch, seq: self.seq };
        let changed = since
            .filter(|t| t.epoch == self.epoch && t.seq <= self.seq)
            .map(|t| self.changed.iter().filter_map(|(dir, changes)| Some((dir.clone(), changes.since(t.seq)?))).collect());
        (now, changed)
    }

    /// Takes in every queued event.
    fn take_in(&mut self) -> Result<()> {
        loop {
            let batch: Vec<(WatchDescriptor, EventMask, Option<String>)> = match self.inotify.read_events(&mut self.buffer) {
                Ok(events) => events.map(|e| (e.wd, e.mask, e.name.and_then(|n| n.to_str()).map(str::to_string))).collect(),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("watching", self.root.display().to_string(), e)),
            };
            if batch.is_empty() {
                return Ok(());
            }
            let mut void: Option<String> = None;
            let mut created: Vec<String> = Vec::new();
            for (wd, mask, name) in batch {
                if mask.contains(EventMask::Q_OVERFLOW) {
                    void.get_or_insert_with(|| "the event queue overflowed".into());
                    continue;
                }
                let Some(dir) = self.watches.get(&wd).cloned() else { continue };
                if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED) {
                    if dir.is_empty() {
                        return Err(Error::VaultUnusable(format!("{} (moved or removed while watched)", self.root.display())));
                    }
                    void.get_or_insert_with(|| format!("folder {dir:?} moved or was removed"));
                    continue;
                }
                if mask.contains(EventMask::ISDIR) && mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM | EventMask::MOVED_TO) {
                    void.get_or_insert_with(|| format!("a folder in {dir:?} moved or was removed"));
                    continue;
                }
                if mask.contains(EventMask::ISDIR | EventMask::CREATE)
                    && let Some(name) = &name
                {
                    created.push(crate::note::path::child(&dir, name));
                }
                match name.filter(|name| carried(name)) {
                    Some(name) => self.mark_entry(&dir, name),
                    None => self.mark(&dir),
                }
            }
            for dir in created {
                self.watch_below(&dir, true)?;
            }
            if let Some(reason) = void {
                self.start_again(&reason)?;
            }
        }
    }

    /// `dir` changed as a whole (or in a way not told by entry).
    fn mark(&mut self, dir: &str) {
        self.seq += 1;
        self.changed.entry(dir.to_string()).or_default().whole(self.seq);
    }

    /// Entry `name` of `dir` was created, removed, renamed, written to or had its attributes
    /// changed.
    fn mark_entry(&mut self, dir: &str, name: String) {
        self.seq += 1;
        self.changed.entry(dir.to_string()).or_default().entry(name, self.seq);
    }

    /// A new run: a fresh epoch, nothing changed yet, every watch set again from the root.
    fn start_again(&mut self, reason: &str) -> Result<()> {
        tracing::info!(%reason, "the folder journal starts a new run");
        for wd in std::mem::take(&mut self.watches).into_keys() {
            let _ = self.inotify.watches().remove(wd);
        }
        self.epoch = fresh_epoch();
        self.seq = 0;
        self.changed.clear();
        self.watch_below("", false)
    }

    /// Watches `dir` and every folder below it (never through a link, never the engine's own
    /// folder), each watch set before its folder is listed, so an entry made after the listing
    /// is an event. `mark`: report each as changed (a folder created during the run).
    fn watch_below(&mut self, dir: &str, mark: bool) -> Result<()> {
        let mut stack = vec![dir.to_string()];
        while let Some(dir) = stack.pop() {
            let path = layout::join(&self.root, &dir);
            let wd = match self.inotify.watches().add(&path, watch_mask()) {
                Ok(wd) => wd,
                // Gone (or replaced by a file or a link) before it was watched: its parent's
                // event already says so.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    return Err(unavailable(format!(
                        "the inotify watch limit was reached after {} folders; raise fs.inotify.max_user_watches",
                        self.watches.len()
                    )));
                }
                Err(e) => return Err(Error::io("watching", dir, e)),
            };
            // A folder where another file system is mounted (a NAS share in 03_Resources): one
            // whose edits can come from another machine would be missed, so it is refused.
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() != self.device) {
                refuse_remote(&path, &format!("folder {dir:?}"))?;
            }
            self.watches.insert(wd, dir.clone());
            if mark {
                self.mark(&dir);
            }
            stack.extend(subfolders(&path, &dir));
        }
        Ok(())
    }
}

impl Drop for FolderJournal {
    fn drop(&mut self) {
        durable::remove_engine_socket(&self.root, &self.socket);
    }
}
