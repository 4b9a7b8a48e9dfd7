//! The tantivy `Directory` the search index lives in: tantivy writes immutable segment files
//! through it, but it never deletes one (only its own lock files); the search module's
//! generation GC decides which files die, via `durable::remove_file`.
//!
//! Readers open it with a *pinned* `meta.json` (the copy recorded in a generation manifest), so
//! a `Searcher` sees exactly the commit a generation names, whatever the writer did since.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenDirectoryError, OpenReadError, OpenWriteError};
use tantivy::directory::{Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr};
use tantivy::directory::{INDEX_WRITER_LOCK, META_LOCK};

const META_FILE: &str = "meta.json";

/// An mmap directory whose segment files are only removed by the engine's own GC.
#[derive(Clone, Debug)]
pub struct RetainingDirectory {
    inner: MmapDirectory,
    /// When set, `meta.json` reads return these bytes (a generation's recorded commit).
    pinned_meta: Option<Arc<Vec<u8>>>,
}

impl RetainingDirectory {
    /// The writer's view: the live `meta.json`.
    pub fn open(dir: &Path) -> Result<Self, OpenDirectoryError> {
        Ok(RetainingDirectory { inner: MmapDirectory::open(dir)?, pinned_meta: None })
    }

    /// A reader's view pinned at one recorded commit.
    pub fn open_pinned(dir: &Path, meta_json: Vec<u8>) -> Result<Self, OpenDirectoryError> {
        Ok(RetainingDirectory { inner: MmapDirectory::open(dir)?, pinned_meta: Some(Arc::new(meta_json)) })
    }

    fn is_meta(path: &Path) -> bool {
        path == Path::new(META_FILE)
    }

    fn is_lock(path: &Path) -> bool {
        path == INDEX_WRITER_LOCK.filepath.as_path() || path == META_LOCK.filepath.as_path()
    }
}

impl Directory for RetainingDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        // Segment files belong to generations; only the engine's GC removes them.
        if Self::is_lock(path) { self.inner.delete(path) } else { Ok(()) }
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        if Self::is_meta(path) && self.pinned_meta.is_some() {
            return Ok(true);
        }
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        if self.pinned_meta.is_some() {
            return Err(OpenWriteError::IoError {
                io_error: Arc::new(io::Error::other("pinned generation is read-only")),
                filepath: path.to_path_buf(),
            });
        }
        self.inner.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        if Self::is_meta(path)
            && let Some(meta) = &self.pinned_meta
        {
            return Ok(meta.as_ref().clone());
        }
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        if self.pinned_meta.is_some() {
            return Err(io::Error::other("pinned generation is read-only"));
        }
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.inner.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        if self.pinned_meta.is_some() {
            return Ok(WatchHandle::empty());
        }
        self.inner.watch(watch_callback)
    }
}

/// Path of the tantivy meta file inside an index directory.
pub fn meta_path(index_dir: &Path) -> PathBuf {
    index_dir.join(META_FILE)
}
