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
//! Segment files are opened with `O_NOFOLLOW` and mapped from that descriptor, and `meta.json`
//! is read the same way: a link planted inside the index folder is refused (`ELOOP`), never
//! followed out of the vault (tantivy's own `MmapDirectory` would follow it).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tantivy::directory::error::{DeleteError, LockError, OpenDirectoryError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, RamDirectory, TerminatingWrite, WatchCallback, WatchHandle,
    WritePtr,
};
use tantivy::directory::{INDEX_WRITER_LOCK, META_LOCK};

const META_FILE: &str = "meta.json";
/// tantivy's list of the files it manages, rewritten (temp file + rename, fsynced) for every
/// file it creates. It only feeds tantivy's own garbage collector, which this directory
/// disarms, so it is neither written nor read: that saves ~7 file creations per commit.
const MANAGED_FILE: &str = ".managed.json";

/// An mmap directory whose segment files are only removed by the engine's own GC.
#[derive(Clone, Debug)]
pub struct RetainingDirectory {
    inner: MmapDirectory,
    path: PathBuf,
    /// When set, `meta.json` reads return these bytes (a generation's recorded commit).
    pinned_meta: Option<Arc<Vec<u8>>>,
    /// When set, writes skip fsync and record the files written here instead: the caller (the
    /// write transaction, whose intent record already makes the change durable) fsyncs them
    /// all at once in its checkpoint.
    deferred_sync: Option<Arc<Mutex<Vec<PathBuf>>>>,
    /// When set, every write (and `meta.json`) lives here, in memory; reads look here first.
    overlay: Option<RamDirectory>,
}

/// A segment file writer that flushes on terminate but leaves the fsync to the checkpoint.
struct DeferredSyncFile(std::fs::File);

impl Write for DeferredSyncFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl TerminatingWrite for DeferredSyncFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        self.0.flush()
    }
}

impl RetainingDirectory {
    /// The writer's view: the live `meta.json`.
    pub fn open(dir: &Path) -> Result<Self, OpenDirectoryError> {
        Ok(RetainingDirectory {
            inner: MmapDirectory::open(dir)?,
            path: dir.to_path_buf(),
            pinned_meta: None,
            deferred_sync: None,
            overlay: None,
        })
    }

    /// The writer's view with fsyncs deferred: every file written is listed in `written`.
    pub fn open_deferred_sync(dir: &Path, written: Arc<Mutex<Vec<PathBuf>>>) -> Result<Self, OpenDirectoryError> {
        Ok(RetainingDirectory {
            inner: MmapDirectory::open(dir)?,
            path: dir.to_path_buf(),
            pinned_meta: None,
            deferred_sync: Some(written),
            overlay: None,
        })
    }

    /// A reader's view pinned at one recorded commit.
    pub fn open_pinned(dir: &Path, meta_json: Vec<u8>) -> Result<Self, OpenDirectoryError> {
        Ok(RetainingDirectory {
            inner: MmapDirectory::open(dir)?,
            path: dir.to_path_buf(),
            pinned_meta: Some(Arc::new(meta_json)),
            deferred_sync: None,
            overlay: None,
        })
    }

    /// An in-memory overlay on the committed files, starting at the commit `meta_json`: tantivy
    /// writes new segments and commits into memory; nothing on disk changes.
    pub fn open_overlay(dir: &Path, meta_json: &[u8]) -> io::Result<Self> {
        let overlay = RamDirectory::create();
        overlay.atomic_write(Path::new(META_FILE), meta_json)?;
        Ok(RetainingDirectory {
            inner: MmapDirectory::open(dir).map_err(|e| io::Error::other(e.to_string()))?,
            path: dir.to_path_buf(),
            pinned_meta: None,
            deferred_sync: None,
            overlay: Some(overlay),
        })
    }

    /// The overlay's bytes of `path`, if it holds that file.
    fn overlay_holds(&self, path: &Path) -> Option<&RamDirectory> {
        self.overlay.as_ref().filter(|ram| ram.exists(path).unwrap_or(false))
    }

    fn record(&self, path: &Path) {
        if let Some(written) = &self.deferred_sync {
            written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(self.path.join(path));
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

fn open_read_error(path: &Path, error: io::Error) -> OpenReadError {
    if error.kind() == io::ErrorKind::NotFound {
        OpenReadError::FileDoesNotExist(path.to_path_buf())
    } else {
        OpenReadError::wrap_io_error(error, path.to_path_buf())
    }
}

impl RetainingDirectory {
    /// Maps `path` (relative to the index folder) from a descriptor opened with `O_NOFOLLOW`.
    fn map_no_follow(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let file = super::nofollow::open_read(&self.path.join(path)).map_err(|e| open_read_error(path, e))?;
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
}

impl Directory for RetainingDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        match self.overlay_holds(path) {
            Some(ram) => ram.get_file_handle(path),
            None => self.map_no_follow(path),
        }
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        // Segment files belong to generations; only the engine's GC removes them.
        if Self::is_lock(path) && self.overlay.is_none() { self.inner.delete(path) } else { Ok(()) }
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        if Self::is_meta(path) && self.pinned_meta.is_some() || self.overlay_holds(path).is_some() {
            return Ok(true);
        }
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        if let Some(ram) = &self.overlay {
            if self.inner.exists(path).unwrap_or(true) {
                return Err(OpenWriteError::FileAlreadyExists(path.to_path_buf()));
            }
            return ram.open_write(path);
        }
        if self.pinned_meta.is_some() {
            return Err(OpenWriteError::IoError {
                io_error: Arc::new(io::Error::other("pinned generation is read-only")),
                filepath: path.to_path_buf(),
            });
        }
        let Some(_) = &self.deferred_sync else { return self.inner.open_write(path) };
        let full = self.path.join(path);
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&full).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                OpenWriteError::FileAlreadyExists(path.to_path_buf())
            } else {
                OpenWriteError::wrap_io_error(e, path.to_path_buf())
            }
        })?;
        self.record(path);
        Ok(BufWriter::new(Box::new(DeferredSyncFile(file))))
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
            None => super::nofollow::read(&self.path.join(path)).map_err(|e| open_read_error(path, e)),
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
        if self.deferred_sync.is_none() {
            return self.inner.atomic_write(path, data);
        }
        // Atomic (temp + rename) but not yet durable: the checkpoint fsyncs it.
        let full = self.path.join(path);
        let mut temp = tempfile::Builder::new().prefix(".pv-tmp-").tempfile_in(&self.path)?;
        temp.write_all(data)?;
        temp.persist(&full).map_err(|e| e.error)?;
        self.record(path);
        Ok(())
    }

    fn sync_directory(&self) -> io::Result<()> {
        if self.deferred_sync.is_some() || self.overlay.is_some() { Ok(()) } else { self.inner.sync_directory() }
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        if self.overlay.is_some() {
            // An overlay is private to the reader that built it: nobody to exclude.
            return Ok(DirectoryLock::from(Box::new(())));
        }
        self.inner.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        if self.pinned_meta.is_some() || self.overlay.is_some() {
            return Ok(WatchHandle::empty());
        }
        self.inner.watch(watch_callback)
    }
}

/// Path of the tantivy meta file inside an index directory.
pub fn meta_path(index_dir: &Path) -> PathBuf {
    index_dir.join(META_FILE)
}
