//! The write path a vault hosts, as the vault sees it: a `WritePath` (implemented by
//! `write::writer::Writer`, a layer above, and handed in when `Vault::open` runs there)
//! through which the vault takes the writer lock (recovery first) for its own catalog
//! regeneration and at open, and checkpoints deferred writes when it is dropped.
//! *Invariant: the writer's state (journal, receipts, deferred intents) is never seen here;
//! `vault` names nothing of `write`.*

use std::any::Any;

use super::Vault;
use crate::error::{Error, Result};
use crate::store::layout;

/// Proof that the writer lock is held; dropping it releases the lock.
pub(crate) trait HeldLock {}

impl<T: ?Sized> HeldLock for T {}

/// What a vault asks of the write path it hosts.
pub(crate) trait WritePath: Send + Sync {
    /// Takes the writer lock (in-process mutex, then the cross-process file lock), first
    /// finishing any committed write that waits (recovery) and catching up with receipts other
    /// processes wrote.
    fn hold<'v>(&'v self, vault: &'v Vault) -> Result<Box<dyn HeldLock + 'v>>;

    /// `hold`, unless another holder has the lock now: then `None`, without waiting.
    fn try_hold<'v>(&'v self, vault: &'v Vault) -> Result<Option<Box<dyn HeldLock + 'v>>>;

    /// Makes this process's deferred writes durable, under the lock (recovery first).
    fn checkpoint_pending(&self, vault: &Vault) -> Result<()>;

    /// Whether this process holds writes whose checkpoint is deferred.
    fn has_deferred_writes(&self) -> bool;

    /// Whether a write this process committed waits to be finished.
    fn has_unfinished_writes(&self) -> bool;

    /// The write path itself, so that the write module finds its own type again.
    fn as_any(&self) -> &dyn Any;
}

impl Vault {
    /// The write path this vault hosts.
    pub(crate) fn write_path(&self) -> &dyn WritePath {
        self.writer.as_ref()
    }

    /// Takes the writer lock (recovery first); released when the returned proof is dropped.
    pub(crate) fn hold_writer_lock(&self) -> Result<Box<dyn HeldLock + '_>> {
        self.writer.hold(self)
    }

    /// `hold_writer_lock` if no other holder has the lock now; `None` at once otherwise.
    pub(crate) fn try_hold_writer_lock(&self) -> Result<Option<Box<dyn HeldLock + '_>>> {
        self.writer.try_hold(self)
    }

    /// Whether this process holds writes whose checkpoint is deferred.
    pub fn has_deferred_writes(&self) -> bool {
        self.writer.has_deferred_writes()
    }

    /// Whether a write this process committed waits to be finished (putting it in place failed
    /// past the commit point, e.g. on a full disk). `checkpoint_pending` finishes it.
    pub fn has_unfinished_writes(&self) -> bool {
        self.writer.has_unfinished_writes()
    }

    /// Makes this process's deferred writes durable (fsyncs their files in parallel and marks
    /// their intents done), first finishing any committed write that waits (taking the writer
    /// lock runs recovery). Long-running adapters call it when idle, so a write that met a full
    /// disk completes once space returns without another write; dropping the vault calls it.
    pub fn checkpoint_pending(&self) -> Result<()> {
        self.writer.checkpoint_pending(self)
    }

    /// The cross-process writer lock on a handle of its own, if no other process (and no other
    /// handle of this one) holds it; released when the file is dropped. Never waits.
    pub(crate) fn try_lock_writer_file(&self) -> Result<Option<std::fs::File>> {
        let lock_path = layout::join(self.root(), layout::WRITER_LOCK);
        let file = match crate::store::nofollow::open_lock_file(&lock_path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The first lock creates the lock file.
                drop(self.hold_writer_lock()?);
                return self.try_lock_writer_file();
            }
            Err(e) => return Err(Error::io("opening", layout::WRITER_LOCK, e)),
        };
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("locking", layout::WRITER_LOCK, e)),
        }
    }
}
