//! The tantivy `Directory` the search index lives in: tantivy writes immutable segment files
//! through it, but it never deletes one (only its own lock files); the search module's
//! generation GC decides which files die, via `durable::remove_file`.
//!
//! Readers open it with a *pinned* `meta.json` (the copy recorded in a generation manifest), so
//! a `Searcher` sees exactly the commit a generation names, whatever the writer did since.
//!
//! A generation served from the journal's tail (`search::tail`) opens it as an *overlay*: new
//! files and `meta.json` live in memory, every other file is read from disk, and nothing is
//! ever written to disk or locked there.
//!
//! Every file operation goes through the index folder's handle (`beneath::Folder`, opened
//! beneath the vault root one component at a time with `O_NOFOLLOW | O_DIRECTORY`), never by
//! path: segment files are created (`O_EXCL | O_NOFOLLOW`), mapped, read, renamed into place
//! (`atomic_write`: temp file + `renameat`), locked and deleted relative to that handle, and the
//! folder is fsynced through it. A link planted inside the index folder is refused (`ELOOP`),
//! and an index folder swapped for a link after the handle was opened changes nothing outside
//! the vault: the handle still names the real folder (tantivy's own `MmapDirectory` opens every
//! file by path and follows links).

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, RamDirectory, TerminatingWrite, WatchCallback, WatchCallbackList,
    WatchHandle, WritePtr,
};
use tantivy::directory::{INDEX_WRITER_LOCK, META_LOCK};

use super::beneath::Folder;
use super::layout;

/// tantivy's commit file inside the index folder.
pub const META_FILE: &str = "meta.json";
/// tantivy's list of the files it manages, rewritten (temp file + rename, fsynced) for every
/// file it creates. It only feeds tantivy's own garbage collector, which this directory
/// disarms, so it is neither written nor read: that saves ~7 file creations per commit.
const MANAGED_FILE: &str = ".managed.json";

/// The index folder, held by its handle; segment files are only removed by the engine's own GC.
#[derive(Clone)]
pub struct RetainingDirectory {
    folder: Folder,
    /// The folder's path, only to name the files a deferred-sync write records.
    path: PathBuf,
    /// When set, `meta.json` reads return these bytes (a generation's recorded commit).
    pinned_meta: Option<Arc<Vec<u8>>>,
    /// When set, writes skip fsync and record the files written here instead: the caller (the
    /// write transaction, whose intent record already makes the change durable) fsyncs them
    /// all at once in its checkpoint.
    deferred_sync: Option<Arc<Mutex<Vec<PathBuf>>>>,
    /// When set, every write (and `meta.json`) lives here, in memory; reads look here first.
    overlay: Option<RamDirectory>,
    /// Watchers of `meta.json`, told when this process commits through this directory (the
    /// engine's readers are pinned or reload manually, so nobody polls the file).
    watchers: Arc<WatchCallbackList>,
    /// A reader's segment files as mapped, by name, shared with every overlay opened on it
    /// (`overlay`): the files a pinned commit names never change while its generation is held,
    /// so each is mapped once however many tail generations read it (a mapping made afresh
    /// costs its system calls and a page fault per page touched again). `None`: the writer's
    /// views, which map afresh.
    mapped: Option<Arc<Mutex<Mapped>>>,
}

/// Mapped segment files by name.
type Mapped = HashMap<String, Arc<dyn FileHandle>>;

impl std::fmt::Debug for RetainingDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetainingDirectory")
            .field("folder", &self.folder)
            .field("pinned", &self.pinned_meta.is_some())
            .field("deferred_sync", &self.deferred_sync.is_some())
            .field("overlay", &self.overlay.is_some())
            .finish()
    }
}

/// A segment file writer: on terminate it flushes and, unless the fsync is deferred to the
/// checkpoint, makes the bytes durable (`sync_data`, as tantivy's own writer does).
struct SegmentFileWriter {
    file: std::fs::File,
    sync: bool,
}

impl Write for SegmentFileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl TerminatingWrite for SegmentFileWriter {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        self.file.flush()?;
        if self.sync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// Holds a tantivy lock file open (and locked) until dropped.
struct HeldLockFile {
    _file: std::fs::File,
}

impl RetainingDirectory {
    fn at(root: &Path, pinned_meta: Option<Arc<Vec<u8>>>, deferred_sync: Option<Arc<Mutex<Vec<PathBuf>>>>) -> io::Result<Self> {
        Ok(RetainingDirectory {
            folder: Folder::open(root, layout::SEARCH_INDEX_DIR, false)?,
            path: layout::join(root, layout::SEARCH_INDEX_DIR),
            pinned_meta,
            deferred_sync,
            overlay: None,
            watchers: Arc::new(WatchCallbackList::default()),
            mapped: None,
        })
    }

    /// The writer's view of the vault's index folder: the live `meta.json`.
    pub fn open(root: &Path) -> io::Result<Self> {
        Self::at(root, None, None)
    }

    /// The writer's view with fsyncs deferred: every file written is listed in `written`.
    pub fn open_deferred_sync(root: &Path, written: Arc<Mutex<Vec<PathBuf>>>) -> io::Result<Self> {
        Self::at(root, None, Some(written))
    }

    /// A reader's view pinned at one recorded commit.
    pub fn open_pinned(root: &Path, meta_json: Vec<u8>) -> io::Result<Self> {
        let mut directory = Self::at(root, Some(Arc::new(meta_json)), None)?;
        directory.mapped = Some(Arc::default());
        Ok(directory)
    }

    /// An in-memory overlay on this pinned view's files, starting at the commit `meta_json`
    /// (this view's, or one on it): tantivy writes new segments and commits into memory;
    /// nothing on disk changes. It reads the files on disk through this view's handle and
    /// mappings, so the overlay must read no file this view's commit does not name.
    pub fn overlay(&self, meta_json: &[u8]) -> io::Result<Self> {
        if self.pinned_meta.is_none() || self.overlay.is_some() {
            return Err(io::Error::other("an overlay is opened on a pinned view"));
        }
        let overlay = RamDirectory::create();
        overlay.atomic_write(Path::new(META_FILE), meta_json)?;
        Ok(RetainingDirectory {
            folder: self.folder.clone(),
            path: self.path.clone(),
            pinned_meta: None,
            deferred_sync: None,
            overlay: Some(overlay),
            watchers: Arc::new(WatchCallbackList::default()),
            mapped: self.mapped.clone(),
        })
    }

    /// The index folder's handle (what every file operation of this directory goes through).
    pub fn folder(&self) -> &Folder {
        &self.folder
    }

    /// The overlay's bytes of `path`, if it holds that file.
    fn overlay_holds(&self, path: &Path) -> Option<&RamDirectory> {
        self.overlay.as_ref().filter(|ram| ram.exists(path).unwrap_or(false))
    }

    fn record(&self, name: &str) {
        if let Some(written) = &self.deferred_sync {
            written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(self.path.join(name));
        }
    }

    fn is_meta(path: &Path) -> bool {
        path == Path::new(META_FILE)
    }

    fn is_managed_list(path: &Path) -> bool {
        path == Path::new(MANAGED_FILE)
    }

    fn is_lock(path: &Path) -> bool {
        path == INDEX_WRITER_LOCK.filepath.as_path() || path == META_LOCK.filepath.as_path()
    }
}

/// A read-only mapping of a segment file, opened without following links.
struct NoFollowMmap(memmap2::Mmap);

impl std::ops::Deref for NoFollowMmap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

#[allow(unsafe_code)]
// SAFETY: the bytes live in the mapping, not in the struct: moving a `NoFollowMmap` does not
// move what `deref` points to (the same reasoning as tantivy's own `MmapArc`).
unsafe impl stable_deref_trait::StableDeref for NoFollowMmap {}

/// The file name of a path tantivy hands over: one plain component inside the index folder.
fn file_name(path: &Path) -> io::Result<&str> {
    match path.to_str() {
        Some(name) if !name.is_empty() && !name.contains('/') && name != "." && name != ".." => Ok(name),
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file name inside the index folder")),
    }
}

fn open_read_error(path: &Path, error: io::Error) -> OpenReadError {
    if error.kind() == io::ErrorKind::NotFound {
        OpenReadError::FileDoesNotExist(path.to_path_buf())
    } else {
        OpenReadError::wrap_io_error(error, path.to_path_buf())
    }
}

impl RetainingDirectory {
    /// `path` mapped, once per reader (`mapped`).
    fn mapped(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let Some(mapped) = &self.mapped else { return self.map_no_follow(path) };
        let name = file_name(path).map_err(|e| open_read_error(path, e))?;
        if let Some(handle) = mapped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(name) {
            return Ok(handle.clone());
        }
        let handle = self.map_no_follow(path)?;
        mapped.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name.to_string(), handle.clone());
        Ok(handle)
    }

    /// Maps `path` from a descriptor opened through the folder's handle with `O_NOFOLLOW`.
    fn map_no_follow(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let file = file_name(path).and_then(|name| self.folder.open_read(name)).map_err(|e| open_read_error(path, e))?;
        let len = file.metadata().map_err(|e| open_read_error(path, e))?.len();
        if len == 0 {
            return Ok(Arc::new(tantivy::directory::OwnedBytes::empty()));
        }
        // SAFETY: segment files are immutable once written (the engine's GC removes them only
        // when no generation names them), as tantivy's MmapDirectory also assumes.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| open_read_error(path, e))?;
        Ok(Arc::new(tantivy::directory::OwnedBytes::new(NoFollowMmap(map))))
    }

    fn exists_on_disk(&self, path: &Path) -> io::Result<bool> {
        self.folder.contains(file_name(path)?)
    }
}

impl Directory for RetainingDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        match self.overlay_holds(path) {
            Some(ram) => ram.get_file_handle(path),
            None => self.mapped(path),
        }
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        // Segment files belong to generations; only the engine's GC removes them.
        if !Self::is_lock(path) || self.overlay.is_some() {
            return Ok(());
        }
        let io_error = |e: io::Error| DeleteError::IoError { io_error: Arc::new(e), filepath: path.to_path_buf() };
        match self.folder.remove(file_name(path).map_err(io_error)?) {
            Ok(true) => Ok(()),
            Ok(false) => Err(DeleteError::FileDoesNotExist(path.to_path_buf())),
            Err(e) => Err(io_error(e)),
        }
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        if Self::is_meta(path) && self.pinned_meta.is_some() || self.overlay_holds(path).is_some() {
            return Ok(true);
        }
        self.exists_on_disk(path).map_err(|e| open_read_error(path, e))
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let wrap = |e: io::Error| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                OpenWriteError::FileAlreadyExists(path.to_path_buf())
            } else {
                OpenWriteError::wrap_io_error(e, path.to_path_buf())
            }
        };
        if let Some(ram) = &self.overlay {
            if self.exists_on_disk(path).unwrap_or(true) {
                return Err(OpenWriteError::FileAlreadyExists(path.to_path_buf()));
            }
            return ram.open_write(path);
        }
        if self.pinned_meta.is_some() {
            return Err(wrap(io::Error::other("pinned generation is read-only")));
        }
        let name = file_name(path).map_err(wrap)?;
        let file = self.folder.create_new(name).map_err(wrap)?;
        let sync = self.deferred_sync.is_none();
        if sync {
            // The new entry is durable before any byte is written, as tantivy's own writer does.
            self.folder.sync().map_err(wrap)?;
        } else {
            self.record(name);
        }
        Ok(BufWriter::new(Box::new(SegmentFileWriter { file, sync })))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        if Self::is_managed_list(path) {
            return Err(OpenReadError::FileDoesNotExist(path.to_path_buf()));
        }
        if Self::is_meta(path)
            && let Some(meta) = &self.pinned_meta
        {
            return Ok(meta.as_ref().clone());
        }
        match self.overlay_holds(path) {
            Some(ram) => ram.atomic_read(path),
            None => file_name(path).and_then(|name| self.folder.read(name)).map_err(|e| open_read_error(path, e)),
        }
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        if self.pinned_meta.is_some() {
            return Err(io::Error::other("pinned generation is read-only"));
        }
        if Self::is_managed_list(path) {
            return Ok(());
        }
        if let Some(ram) = &self.overlay {
            return ram.atomic_write(path, data);
        }
        let name = file_name(path)?;
        // Temp file + rename inside the folder's handle; durable now, or (deferred) atomic but
        // made durable by the checkpoint.
        let sync = self.deferred_sync.is_none();
        self.folder.replace(name, data, sync)?;
        if sync {
            self.folder.sync()?;
        } else {
            self.record(name);
        }
        if Self::is_meta(path) {
            drop(self.watchers.broadcast());
        }
        Ok(())
    }

    fn sync_directory(&self) -> io::Result<()> {
        if self.deferred_sync.is_some() || self.overlay.is_some() { Ok(()) } else { self.folder.sync() }
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        if self.overlay.is_some() {
            // An overlay is private to the reader that built it: nobody to exclude.
            return Ok(DirectoryLock::from(Box::new(())));
        }
        let file = file_name(&lock.filepath).and_then(|name| self.folder.open_or_create(name)).map_err(LockError::wrap_io_error)?;
        if lock.is_blocking {
            file.lock().map_err(LockError::wrap_io_error)?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Err(LockError::LockBusy),
                Err(std::fs::TryLockError::Error(e)) => return Err(LockError::wrap_io_error(e)),
            }
        }
        // Dropping the file handle releases the lock.
        Ok(DirectoryLock::from(Box::new(HeldLockFile { _file: file })))
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        if self.pinned_meta.is_some() || self.overlay.is_some() {
            return Ok(WatchHandle::empty());
        }
        Ok(self.watchers.subscribe(watch_callback))
    }
}

/// Path of the tantivy meta file inside an index directory.
pub fn meta_path(index_dir: &Path) -> PathBuf {
    index_dir.join(META_FILE)
}
