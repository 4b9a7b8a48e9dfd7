//! Note and catalog files reached beneath the vault root through directory handles, never by
//! path: every folder is opened relative to its parent's handle with `O_NOFOLLOW |
//! O_DIRECTORY`, and the file is created, renamed, read or removed relative to the handle of
//! its own folder (`openat`, `renameat`, `unlinkat`, through `rustix`).
//!
//! A check-then-open by path has a window: a folder swapped for a link to outside the vault
//! between the check and the open (`renameat2(RENAME_EXCHANGE)` in a loop) redirects the write.
//! Here there is no second lookup: a link met on the way fails the walk (`ELOOP` →
//! `vault_boundary`), and once a folder's handle is open, the temp file, its rename and the
//! removal all happen inside that very folder, wherever its name points by then.
//!
//! The root's own path may contain links (a vault at `~/notes` that is a link is the person's
//! choice); only what lies beneath it is walked without following.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, CWD, Mode, OFlags};
use rustix::io::Errno;

use super::{faults, layout, nofollow};
use crate::error::Result;

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Splits a vault-relative file path into (folder, file name); refuses `.`/`..`/empty parts.
fn split(rel: &str) -> io::Result<(&str, &str)> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    if rel.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a normal vault-relative path"));
    }
    Ok((dir, name))
}

/// Opens the folder `rel_dir` beneath `root`, one component at a time, never following a
/// link. With `create`, missing folders are made (and their parent fsynced, as
/// `durable::create_dir_all` does).
pub(super) fn open_dir(root: &Path, rel_dir: &str, create: bool) -> io::Result<OwnedFd> {
    let fd = rustix::fs::openat(CWD, root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    Ok(open_dir_from(&fd, rel_dir, create)?.unwrap_or(fd))
}

/// `open_dir` from the folder `start` instead of the vault root (`None`: `rel_dir` names
/// `start` itself).
fn open_dir_from(start: &OwnedFd, rel_dir: &str, create: bool) -> io::Result<Option<OwnedFd>> {
    let mut opened: Option<OwnedFd> = None;
    for component in rel_dir.split('/').filter(|c| !c.is_empty()) {
        let fd = opened.as_ref().unwrap_or(start);
        let next = match rustix::fs::openat(fd, component, dir_flags(), Mode::empty()) {
            Ok(next) => next,
            Err(Errno::NOENT) if create => {
                faults::check("create_dir")?;
                match rustix::fs::mkdirat(fd, component, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                faults::check("fsync_dir")?;
                rustix::fs::fsync(fd)?;
                rustix::fs::openat(fd, component, dir_flags(), Mode::empty())?
            }
            // `O_DIRECTORY | O_NOFOLLOW` on a link fails with ENOTDIR: say it was a link.
            Err(Errno::NOTDIR) if is_link(fd, component) => return Err(Errno::LOOP.into()),
            Err(e) => return Err(e.into()),
        };
        opened = Some(next);
    }
    Ok(opened)
}

/// Whether `name` in the folder `dir` is a symbolic link (not followed).
fn is_link(dir: &OwnedFd, name: &str) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink)
}

/// A fresh temporary file (`.pv-tmp-…`, owner-only) inside the folder `dir`, open for writing.
pub(super) fn create_temp(dir: &OwnedFd) -> io::Result<(String, File)> {
    create_temp_with(dir, OFlags::WRONLY)
}

/// A fresh temporary file as `create_temp`, open with `access` (`RDWR` for a database).
pub(super) fn create_temp_with(dir: &OwnedFd, access: OFlags) -> io::Result<(String, File)> {
    let flags = access | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for _ in 0..16 {
        let name = format!("{}{}", layout::TEMP_PREFIX, crate::hex::random(6));
        match rustix::fs::openat(dir, name.as_str(), flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((name, File::from(fd))),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary file name"))
}

/// Writes `bytes` to a temp file in the folder of `rel` and renames it over `rel`, all
/// relative to that folder's handle. `sync_file` fsyncs the temp file before the rename.
fn replace_in(root: &Path, rel: &str, bytes: &[u8], create_dirs: bool, sync_file: bool) -> io::Result<()> {
    let (dir, name) = split(rel)?;
    let dirfd = open_dir(root, dir, create_dirs)?;
    super::durable::via_temp(&dirfd, bytes, sync_file, |temp| Ok(rustix::fs::renameat(&dirfd, temp, &dirfd, name).map(|()| true)?))
        .map(drop)
}

/// Replaces the file `rel` beneath `root` atomically, without any fsync (its bytes are already
/// durable in an intent record); missing folders are made when `create_dirs`.
pub fn replace_unsynced(root: &Path, rel: &str, bytes: &[u8], create_dirs: bool) -> Result<()> {
    replace_in(root, rel, bytes, create_dirs, false).map_err(|e| nofollow::io_error("writing", rel, e))
}

/// Replaces the file `rel` beneath `root` atomically with its bytes fsynced before the rename;
/// the folder's fsync is left to the caller (as `durable::replace_deferred_dir_sync`).
pub fn replace_deferred_dir_sync(root: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    replace_in(root, rel, bytes, false, true).map_err(|e| nofollow::io_error("writing", rel, e))
}

/// Removes the file `rel` beneath `root` without fsync; a missing file or folder is not an error.
pub fn remove_unsynced(root: &Path, rel: &str) -> Result<()> {
    let run = || -> io::Result<()> {
        let (dir, name) = split(rel)?;
        faults::check("remove_file")?;
        let dirfd = match open_dir(root, dir, false) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        match rustix::fs::unlinkat(&dirfd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    };
    run().map_err(|e| nofollow::io_error("removing", rel, e))
}

/// Opens the file `rel` beneath `root` for reading through its folder's handle, never through
/// a link (a link met on the way fails with `ELOOP`).
pub fn open_read(root: &Path, rel: &str) -> io::Result<File> {
    let (dir, name) = split(rel)?;
    let dirfd = open_dir(root, dir, false)?;
    super::nofollow::open_regular_at(&dirfd, name)
}

/// Reads the file `rel` beneath `root` (never through a link); `Ok(None)` when it or its
/// folder does not exist.
pub fn read(root: &Path, rel: &str) -> Result<Option<Vec<u8>>> {
    let run = || -> io::Result<Option<Vec<u8>>> {
        let (dir, name) = split(rel)?;
        let dirfd = match open_dir(root, dir, false) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match super::nofollow::open_regular_at(&dirfd, name) {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    };
    run().map_err(|e| nofollow::io_error("reading", rel, e))
}

/// Whether the file `rel` beneath `root` exists (a link counts and is never followed);
/// `Ok(false)` when its folder does not exist either. A folder on the way that is a link
/// fails with `ELOOP`.
pub fn exists(root: &Path, rel: &str) -> io::Result<bool> {
    let (dir, name) = split(rel)?;
    match Folder::open(root, dir, false) {
        Ok(folder) => folder.contains(name),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads files beneath the root in the order asked, through folder handles, opening each
/// folder once for the run of files it holds (the inventory scan's `read_by_folder` reads its
/// records through one too): a caller reading many notes in path order pays one walk per folder,
/// not one per note, and the root's own path is walked once per cursor, not once per folder (a
/// search's stale check opens the folder of each of its hits). A folder that cannot be opened
/// is tried again for the next file.
#[derive(Debug)]
pub struct FolderCursor<'r> {
    root: &'r Path,
    /// The vault root's handle, opened at the first file.
    base: Option<Folder>,
    open: Option<Folder>,
}

impl<'r> FolderCursor<'r> {
    /// A cursor over files beneath `root`, holding no folder yet.
    pub fn new(root: &'r Path) -> Self {
        FolderCursor { root, base: None, open: None }
    }

    /// The held folder of `rel` (opened beneath the root's handle unless it is the one already
    /// held) and the file's name.
    fn folder_of<'p>(&mut self, rel: &'p str) -> io::Result<(&Folder, &'p str)> {
        let (dir, name) = split(rel)?;
        if self.open.as_ref().is_none_or(|f| f.rel() != dir) {
            self.open = None;
            let base = match &self.base {
                Some(base) => base,
                None => self.base.insert(Folder::open(self.root, "", false)?),
            };
            self.open = Some(base.open_beneath(dir)?);
        }
        Ok((self.open.as_ref().expect("BUG: the folder was opened above"), name))
    }

    /// Opens the file `rel` for reading, never through a link (`ELOOP` on a link anywhere on
    /// the way beneath the root).
    pub fn open_read(&mut self, rel: &str) -> io::Result<File> {
        let (folder, name) = self.folder_of(rel)?;
        folder.open_read(name)
    }

    /// The stat of the regular file `rel` (`Folder::stat_regular`: never through a link).
    pub fn stat_regular(&mut self, rel: &str) -> io::Result<rustix::fs::Stat> {
        let (folder, name) = self.folder_of(rel)?;
        folder.stat_regular(name)
    }

    /// Reads the file `rel` (never through a link); `Ok(None)` when it or its folder does not
    /// exist. Errors are typed as `read` types them (a link is `vault_boundary`).
    pub fn read(&mut self, rel: &str) -> Result<Option<Vec<u8>>> {
        let mut bytes = Vec::new();
        match self.open_read(rel).and_then(|mut file| file.read_to_end(&mut bytes)) {
            Ok(_) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(nofollow::io_error("reading", rel, e)),
        }
    }
}

/// A folder beneath the vault root, held open by its handle (opened like `open_dir`: one
/// component at a time, never through a link). Every file in it is listed, stat'ed, opened,
/// read or removed relative to this handle, so a folder swapped for a link after it was opened
/// changes nothing: the handle still names the folder it opened.
#[derive(Debug, Clone)]
pub struct Folder {
    fd: std::sync::Arc<OwnedFd>,
    rel: String,
}

impl Folder {
    /// Opens the folder `rel_dir` beneath `root`; `create` makes missing folders.
    pub fn open(root: &Path, rel_dir: &str, create: bool) -> io::Result<Folder> {
        Ok(Folder { fd: std::sync::Arc::new(open_dir(root, rel_dir, create)?), rel: rel_dir.to_string() })
    }

    /// Opens the folder `rel_dir` beneath this one, as `open` does beneath the root (several
    /// folders under one parent are opened without walking the root's path again for each).
    pub fn open_beneath(&self, rel_dir: &str) -> io::Result<Folder> {
        let rel = if self.rel.is_empty() { rel_dir.to_string() } else { format!("{}/{rel_dir}", self.rel) };
        let fd = match open_dir_from(&self.fd, rel_dir, false)? {
            Some(fd) => std::sync::Arc::new(fd),
            None => std::sync::Arc::clone(&self.fd),
        };
        Ok(Folder { fd, rel })
    }

    /// The folder's handle.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The folder's vault-relative path (for messages).
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The names in the folder with the byte length of each regular file (`None` for anything
    /// else, links included, which are never followed).
    pub fn entries(&self) -> io::Result<Vec<(String, Option<u64>)>> {
        let mut listed = Vec::new();
        for entry in rustix::fs::Dir::read_from(&*self.fd)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else { continue };
            if name == "." || name == ".." {
                continue;
            }
            let len = match rustix::fs::statat(&*self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile => Some(st.st_size as u64),
                _ => None,
            };
            listed.push((name.to_string(), len));
        }
        Ok(listed)
    }

    /// The byte length of the regular file `name` (a link fails with `ELOOP`, never followed).
    pub fn file_len(&self, name: &str) -> io::Result<u64> {
        self.stat_regular(name).map(|st| st.st_size as u64)
    }

    /// The stat of the regular file `name`, without opening it (a link fails with `ELOOP`,
    /// never followed; anything else that is not a regular file, `InvalidInput`).
    pub fn stat_regular(&self, name: &str) -> io::Result<rustix::fs::Stat> {
        let st = rustix::fs::statat(&*self.fd, name, AtFlags::SYMLINK_NOFOLLOW)?;
        match rustix::fs::FileType::from_raw_mode(st.st_mode) {
            rustix::fs::FileType::RegularFile => Ok(st),
            rustix::fs::FileType::Symlink => Err(Errno::LOOP.into()),
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")),
        }
    }

    /// Whether `name` exists in the folder (a link counts, and is not followed).
    pub fn contains(&self, name: &str) -> io::Result<bool> {
        match rustix::fs::statat(&*self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the file `name` for reading, never through a link.
    pub fn open_read(&self, name: &str) -> io::Result<File> {
        super::nofollow::open_regular_at(&*self.fd, name)
    }

    /// Reads the whole file `name`, never through a link.
    pub fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_read(name)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Creates the file `name` (owner-only) for writing; fails if it exists or is a link.
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&*self.fd, name, flags, Mode::from_raw_mode(0o600))?))
    }

    /// Opens (creating it owner-only, never truncating) the file `name` for writing, never
    /// through a link.
    pub fn open_or_create(&self, name: &str) -> io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&*self.fd, name, flags, Mode::from_raw_mode(0o600))?))
    }

    /// Replaces the file `name` atomically: a temp file in this folder (fsynced when
    /// `sync_file`), renamed over `name` relative to the handle. No fault injection: callers
    /// are derived files (the search index) that a failed write never loses.
    pub fn replace(&self, name: &str, bytes: &[u8], sync_file: bool) -> io::Result<()> {
        let place = |temp: &str| Ok(rustix::fs::renameat(&*self.fd, temp, &*self.fd, name).map(|()| true)?);
        super::durable::via_temp_checking(&self.fd, bytes, sync_file, |_| Ok(()), place).map(drop)
    }

    /// Removes the file `name`; `Ok(false)` when it did not exist.
    pub fn remove(&self, name: &str) -> io::Result<bool> {
        match rustix::fs::unlinkat(&*self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the file `name` without fsync (fault point `remove_file`, as
    /// `durable::remove_unsynced`); `Ok(false)` when it did not exist.
    pub fn remove_unsynced(&self, name: &str) -> io::Result<bool> {
        faults::check("remove_file")?;
        self.remove(name)
    }

    /// Fsyncs the folder, so creations, renames and removals in it are durable.
    pub fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&*self.fd)?)
    }
}

#[cfg(test)]
mod tests;
