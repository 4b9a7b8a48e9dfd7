//! The fsync protocol, written once: atomic durable replace, create-dir, remove, append.
//!
//! Invariant: after `replace` returns Ok, the new bytes survive a crash; before it returns, a
//! crash leaves the old bytes (or no file). Every function here calls `faults::check` first.
//!
//! A file beneath `root` is reached through folder handles, never by a second path lookup
//! (`beneath::open_dir`: each folder opened relative to its parent with `O_NOFOLLOW |
//! O_DIRECTORY`); its temp file is created, renamed, appended to or removed relative to its
//! own folder's handle. An engine folder swapped for a link to outside the vault fails the
//! walk (`vault_boundary`) or, once its handle is open, changes nothing: the bytes land in the
//! folder the handle names. A path outside `root` (the user's config folder, `root` itself)
//! is opened by its path.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, CWD, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::{beneath, faults};
use crate::error::{Error, Result};

/// The folder `dir`, opened beneath `root` without following a link, or by its path when it
/// is not strictly beneath `root`. `create` makes missing folders (fsyncing each parent).
fn open_folder(root: &Path, dir: &Path, create: bool) -> io::Result<OwnedFd> {
    match dir.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => {
            let rel = rel.to_str().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an engine path that is not UTF-8"))?;
            beneath::open_dir(root, rel, create)
        }
        _ => {
            let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
            Ok(rustix::fs::openat(CWD, dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
        }
    }
}

/// The handle of the folder holding `path` (see `open_folder`) and the file's name in it.
fn folder_and_name<'p>(root: &Path, path: &'p Path, create: bool) -> io::Result<(OwnedFd, &'p OsStr)> {
    let name = path.file_name().ok_or_else(|| io::Error::other("path has no file name"))?;
    let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent directory"))?;
    Ok((open_folder(root, dir, create)?, name))
}

/// Writes `bytes` into a fresh temp file of the folder `dirfd` (fsynced when `sync_file`) and
/// hands its name to `place`, which moves it into place; the temp file is removed if anything
/// fails. Fault points: `create_temp`, `write_temp`, `fsync_temp` (when `sync_file`), `rename`.
pub(super) fn via_temp(dirfd: &OwnedFd, bytes: &[u8], sync_file: bool, place: impl FnOnce(&str) -> io::Result<bool>) -> io::Result<bool> {
    via_temp_checking(dirfd, bytes, sync_file, faults::check, place)
}

/// [`via_temp`] with `check` called at each fault point (derived files that a failed write
/// never loses, such as the search index, pass a check that never fails).
pub(super) fn via_temp_checking(
    dirfd: &OwnedFd,
    bytes: &[u8],
    sync_file: bool,
    check: impl Fn(&'static str) -> io::Result<()>,
    place: impl FnOnce(&str) -> io::Result<bool>,
) -> io::Result<bool> {
    check("create_temp")?;
    let (temp, mut file) = beneath::create_temp(dirfd)?;
    let result = (|| -> io::Result<bool> {
        check("write_temp")?;
        file.write_all(bytes)?;
        if sync_file {
            check("fsync_temp")?;
            file.sync_all()?;
        }
        check("rename")?;
        place(&temp)
    })();
    if !matches!(result, Ok(true)) {
        let _ = rustix::fs::unlinkat(dirfd, temp.as_str(), AtFlags::empty());
    }
    result
}

/// Opens (creating it owner-only) the engine file `path` beneath `root` through its folder's
/// handle, never through a link: for reading and appending (`read_append`, the journal) or for
/// writing (the writer lock).
pub fn open_engine_file(root: &Path, path: &Path, read_append: bool) -> io::Result<File> {
    let (dirfd, name) = folder_and_name(root, path, false)?;
    let access = if read_append { OFlags::RDWR | OFlags::APPEND } else { OFlags::WRONLY };
    let flags = access | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::openat(&dirfd, name.as_bytes(), flags, Mode::from_raw_mode(0o600))?))
}

/// Takes the exclusive lock of the engine lock file `rel` beneath `root` (created owner-only,
/// never through a link), waiting for its holder: held until the returned file is dropped.
/// Every open of the file is its own lock holder, so threads of one process wait too.
pub fn hold_lock(root: &Path, rel: &'static str) -> Result<File> {
    super::nofollow::refuse_symlinked_state(root)?;
    create_dir_all(root, &super::layout::join(root, super::layout::STATE_DIR))?;
    let file = open_engine_file(root, &super::layout::join(root, rel), false).map_err(|e| super::nofollow::io_error("opening", rel, e))?;
    file.lock().map_err(|e| Error::io("locking", rel, e))?;
    Ok(file)
}

/// Replaces the text of the (locked) writer lock file with `holder`: who holds it, for a
/// writer that has to wait. Not synced: it only informs.
pub fn write_lock_holder(file: &File, holder: &str) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.set_len(0)?;
    file.write_all_at(format!("{holder}\n").as_bytes(), 0)
}

/// Opens the engine file `path` beneath `root` for reading through its folder's handle, never
/// through a link: a swapped folder fails (`ELOOP`) instead of reading another folder's file.
pub fn open_engine_read(root: &Path, path: &Path) -> io::Result<File> {
    let (dirfd, name) = folder_and_name(root, path, false)?;
    super::nofollow::open_regular_at(&dirfd, name.as_bytes())
}

/// Reads the whole engine file `path` beneath `root` (see `open_engine_read`).
pub fn read_engine_file(root: &Path, path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_engine_read(root, path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Fsyncs the folder behind `dirfd` (fault point `fsync_dir`).
fn fsync_folder(dirfd: &OwnedFd) -> io::Result<()> {
    faults::check("fsync_dir")?;
    Ok(rustix::fs::fsync(dirfd)?)
}

/// Opens `name` in the folder `dirfd` for writing (created owner-only when missing), never
/// through a link.
fn open_in(dirfd: &OwnedFd, name: &OsStr, extra: OFlags) -> io::Result<File> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | extra;
    Ok(File::from(rustix::fs::openat(dirfd, name.as_bytes(), flags, Mode::from_raw_mode(0o600))?))
}

fn rel_of(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

/// Fsyncs a directory so that renames and creations inside it are durable. It is opened with
/// `O_DIRECTORY | O_NOFOLLOW`: a link or anything but a folder in its place is refused, never
/// opened (a device or a FIFO is never touched).
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    faults::check("fsync_dir")?;
    Ok(rustix::fs::fsync(rustix::fs::openat(
        CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)?)
}

/// Atomically and durably replaces `path` with `bytes` (temp file in the same directory, fsync,
/// rename, fsync directory). `root` only shapes error messages.
pub fn replace(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    replace_io(root, path, bytes, true).map_err(|e| super::nofollow::io_error("writing", &rel_of(root, path), e))
}

/// Replaces `path` with `bytes` as `replace` does and makes it executable (mode 0755): the
/// `pre-receive` hook `paravault gate install` writes into a bare repository.
pub fn install_executable(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    replace(root, path, bytes)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| super::nofollow::io_error("making executable", &rel_of(root, path), e))
}

/// Like `replace` but without the directory fsync, for callers that group several writes in
/// one directory and fsync it once with `fsync_dir`.
pub fn replace_deferred_dir_sync(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    replace_io(root, path, bytes, false).map_err(|e| super::nofollow::io_error("writing", &rel_of(root, path), e))
}

fn replace_io(root: &Path, path: &Path, bytes: &[u8], sync_dir: bool) -> io::Result<()> {
    let (dirfd, name) = folder_and_name(root, path, false)?;
    via_temp(&dirfd, bytes, true, |temp| rustix::fs::renameat(&dirfd, temp, &dirfd, name.as_bytes()).map(|()| true).map_err(Into::into))?;
    if sync_dir {
        fsync_folder(&dirfd)?;
    }
    Ok(())
}

/// Durably creates `path` holding `bytes`, never replacing a file that exists: temp file,
/// fsync, an atomic no-clobber rename (`RENAME_NOREPLACE`, or link + unlink) into place, fsync
/// the directory. `Ok(false)` when `path` already existed (its bytes are untouched). Immutable
/// records (approval decisions) are written only through this.
pub fn create_new(root: &Path, path: &Path, bytes: &[u8]) -> Result<bool> {
    let run = || -> io::Result<bool> {
        let (dirfd, name) = folder_and_name(root, path, false)?;
        let created = via_temp(&dirfd, bytes, true, |temp| {
            match rustix::fs::renameat_with(&dirfd, temp, &dirfd, name.as_bytes(), RenameFlags::NOREPLACE) {
                Ok(()) => Ok(true),
                Err(Errno::EXIST) => Ok(false),
                // A file system without RENAME_NOREPLACE: link (which never replaces) + unlink.
                Err(Errno::INVAL | Errno::NOSYS) => match rustix::fs::linkat(&dirfd, temp, &dirfd, name.as_bytes(), AtFlags::empty()) {
                    Ok(()) => {
                        let _ = rustix::fs::unlinkat(&dirfd, temp, AtFlags::empty());
                        Ok(true)
                    }
                    Err(Errno::EXIST) => Ok(false),
                    Err(e) => Err(e.into()),
                },
                Err(e) => Err(e.into()),
            }
        })?;
        if created {
            fsync_folder(&dirfd)?;
        }
        Ok(created)
    };
    run().map_err(|e| super::nofollow::io_error("creating", &rel_of(root, path), e))
}

/// Replaces `path` atomically (temp file + rename) without any fsync. Only for writes whose
/// content is already durable elsewhere (an intent record): `sync_all_paths` makes them durable.
pub fn replace_unsynced(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let run = || -> io::Result<()> {
        let (dirfd, name) = folder_and_name(root, path, false)?;
        via_temp(&dirfd, bytes, false, |temp| {
            rustix::fs::renameat(&dirfd, temp, &dirfd, name.as_bytes()).map(|()| true).map_err(Into::into)
        })
        .map(drop)
    };
    run().map_err(|e| super::nofollow::io_error("writing", &rel_of(root, path), e))
}

/// Truncates `path` to `before_len` (creating it, owner-only, if missing) and appends `bytes`,
/// without fsync. Idempotent: running it twice leaves the same bytes. Never through a symbolic
/// link (`vault_boundary`).
pub fn truncate_and_append_unsynced(root: &Path, path: &Path, before_len: u64, bytes: &[u8]) -> Result<()> {
    let wrap = |e| super::nofollow::io_error("appending to", &rel_of(root, path), e);
    faults::check("append").map_err(wrap)?;
    let (dirfd, name) = folder_and_name(root, path, false).map_err(wrap)?;
    let mut file = open_in(&dirfd, name, OFlags::empty()).map_err(wrap)?;
    file.set_len(before_len).map_err(wrap)?;
    use std::io::Seek;
    file.seek(io::SeekFrom::Start(before_len)).map_err(wrap)?;
    file.write_all(bytes).map_err(wrap)
}

/// Atomically replaces a cache file (temp + rename, no fsync, no fault injection): its content
/// is derived, checksummed and rebuilt when missing or torn, so neither a crash nor a failure
/// here can lose anything. Creates the engine's state folder when missing.
pub fn write_cache(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let run = || -> io::Result<()> {
        let (dirfd, name) = folder_and_name(root, path, true)?;
        let (temp, mut file) = beneath::create_temp(&dirfd)?;
        let placed = file.write_all(bytes).and_then(|()| Ok(rustix::fs::renameat(&dirfd, temp.as_str(), &dirfd, name.as_bytes())?));
        if placed.is_err() {
            let _ = rustix::fs::unlinkat(&dirfd, temp.as_str(), AtFlags::empty());
        }
        placed
    };
    run().map_err(|e| super::nofollow::io_error("writing", &rel_of(root, path), e))
}

/// Builds a keyed engine cache (a `redb` database) in a fresh temporary file beneath `root`,
/// filled by `fill` in one committed transaction, and renames it over `path`: readers see the
/// old database or the new one, never a half-built one. Like `write_cache`, the folder is not
/// fsynced (a cache: a missing or foreign one is rebuilt); never follows a link.
pub fn write_keyed_cache(
    root: &Path,
    path: &Path,
    fill: impl FnOnce(&redb::WriteTransaction) -> std::result::Result<(), redb::Error>,
) -> Result<()> {
    let run = || -> io::Result<()> {
        let (dirfd, name) = folder_and_name(root, path, true)?;
        let (temp, file) = beneath::create_temp_with(&dirfd, OFlags::RDWR)?;
        let built = || -> std::result::Result<(), redb::Error> {
            let database = redb::Builder::new().create_file(file)?;
            let transaction = database.begin_write()?;
            fill(&transaction)?;
            transaction.commit()?;
            Ok(())
        };
        let placed =
            built().map_err(io::Error::other).and_then(|()| Ok(rustix::fs::renameat(&dirfd, temp.as_str(), &dirfd, name.as_bytes())?));
        if placed.is_err() {
            let _ = rustix::fs::unlinkat(&dirfd, temp.as_str(), AtFlags::empty());
        }
        placed
    };
    run().map_err(|e| super::nofollow::io_error("writing", &rel_of(root, path), e))
}

/// Changes the keyed engine cache `path` beneath `root` in place, in one durable `redb`
/// transaction run by `change` (a copy-on-write commit: a crash leaves the old state or the new
/// one). The file is opened without following links and never created; a copy that would need
/// repairing first is refused (the caller rewrites it whole instead), so this never costs a
/// walk of the whole file.
pub fn update_keyed_cache<T>(
    root: &Path,
    path: &Path,
    change: impl FnOnce(&redb::WriteTransaction) -> std::result::Result<T, redb::Error>,
) -> io::Result<T> {
    faults::check("keyed_update")?;
    let (dirfd, name) = folder_and_name(root, path, false)?;
    let file = File::from(rustix::fs::openat(&dirfd, name.as_bytes(), OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?);
    let run = || -> std::result::Result<T, redb::Error> {
        let database = redb::Builder::new().set_repair_callback(redb::RepairSession::abort).create_file(file)?;
        let transaction = database.begin_write()?;
        let out = change(&transaction)?;
        transaction.commit()?;
        Ok(out)
    };
    run().map_err(io::Error::other)
}

/// Opens the keyed engine cache `path` beneath `root` read-only (no lock taken for writing,
/// nothing synced), through a handle opened without following links: `redb` opens by path,
/// so it is given the handle's own `/proc/self/fd` entry, which names the file opened here
/// whatever the path names by then. Where `/proc` is missing it fails with `Unsupported` (the
/// caller loads the model another way).
pub fn open_keyed_cache(root: &Path, path: &Path) -> io::Result<std::sync::Arc<redb::ReadOnlyDatabase>> {
    use std::os::fd::AsRawFd;
    if !Path::new("/proc/self/fd").is_dir() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "no /proc/self/fd on this platform"));
    }
    let file = open_engine_read(root, path)?;
    let own = format!("/proc/self/fd/{}", file.as_raw_fd());
    // A small read cache: every reader of the copy visits a page about once (a whole load
    // walks the tables in key order; a write's load looks up a few keys), so redb's default
    // 1 GiB cache would only keep every page read, a fresh 4 KiB allocation each, for the
    // handle's life. A bounded cache frees what it evicts and the allocator hands the same
    // memory back for the next page (FOLDOC `lint`: ~2% less CPU, 2% fewer page faults;
    // docs/benchmarks.md, issue 47).
    redb::Builder::new().set_cache_size(KEYED_READ_CACHE_BYTES).open_read_only(own).map(std::sync::Arc::new).map_err(io::Error::other)
}

/// The read cache of a reader of the keyed copy (`open_keyed_cache`): room for the B-trees'
/// branch pages and a window of leaves.
const KEYED_READ_CACHE_BYTES: usize = 1 << 20;

/// Whether `open_keyed_cache` failed only because another process has the cache open for
/// writing (a fold in flight, `update_keyed_cache`): worth a retry in a moment.
pub fn keyed_cache_busy(error: &io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<redb::DatabaseError>())
        .is_some_and(|e| matches!(e, redb::DatabaseError::DatabaseAlreadyOpen))
}

/// Removes leftover temporary files (`layout::TEMP_PREFIX`) of killed writes and watch
/// barriers (`layout::WATCH_BARRIER_PREFIX`) of servers of earlier versions, durably; the
/// caller holds the writer lock, so no engine write of this vault is in flight. Returns how
/// many it removed.
pub fn remove_leftover_temps(root: &Path, paths: &[std::path::PathBuf]) -> Result<usize> {
    let mut removed = 0;
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ours = name.starts_with(super::layout::TEMP_PREFIX) || name.starts_with(super::layout::WATCH_BARRIER_PREFIX);
        if !ours || !path.starts_with(root) {
            continue;
        }
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_file() => {
                remove_file(root, path)?;
                removed += 1;
            }
            _ => {}
        }
    }
    Ok(removed)
}

/// Removes a file without fsync (see `replace_unsynced`); a missing file is not an error.
pub fn remove_unsynced(root: &Path, path: &Path) -> Result<()> {
    let wrap = |e| super::nofollow::io_error("removing", &rel_of(root, path), e);
    faults::check("remove_file").map_err(wrap)?;
    let dirfd = match folder_and_name(root, path, false) {
        Ok((dirfd, _)) => dirfd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(wrap(e)),
    };
    let name = path.file_name().unwrap_or_default();
    match rustix::fs::unlinkat(&dirfd, name.as_bytes(), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(wrap(e.into())),
    }
}

/// Makes files and directories durable, fsyncing them in parallel (concurrent fsyncs on one
/// file system share journal commits, so this costs about one fsync, not one per file).
/// Missing files are skipped (they were removed). Each is opened through its folder's handle
/// beneath `root`, never through a link (`vault_boundary`): a folder swapped for a link is
/// never opened, not even to fsync.
pub fn sync_all_paths(root: &Path, files: &[std::path::PathBuf], dirs: &[std::path::PathBuf]) -> Result<()> {
    for _ in files.iter().chain(dirs) {
        faults::check("fsync").map_err(|e| Error::io("syncing", "vault", e))?;
    }
    let sync_one = |path: &std::path::PathBuf, is_dir: bool| -> io::Result<()> {
        let opened = if is_dir {
            open_folder(root, path, false)
        } else {
            folder_and_name(root, path, false).and_then(|(dirfd, name)| {
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                Ok(rustix::fs::openat(&dirfd, name.as_bytes(), flags, Mode::empty())?)
            })
        };
        match opened {
            Ok(fd) => Ok(rustix::fs::fsync(fd)?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    };
    let all: Vec<(&std::path::PathBuf, bool)> = files.iter().map(|f| (f, false)).chain(dirs.iter().map(|d| (d, true))).collect();
    let results: Vec<(String, io::Result<()>)> = std::thread::scope(|s| {
        let handles: Vec<_> = all.iter().map(|&(p, is_dir)| s.spawn(move || (rel_of(root, p), sync_one(p, is_dir)))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| (String::new(), Err(io::Error::other("fsync thread panicked"))))).collect()
    });
    for (rel, result) in results {
        result.map_err(|e| super::nofollow::io_error("syncing", &rel, e))?;
    }
    Ok(())
}

/// Creates a directory and any missing parents, fsyncing each parent that gained an entry.
pub fn create_dir_all(root: &Path, dir: &Path) -> Result<()> {
    let wrap = |e| super::nofollow::io_error("creating directory", &rel_of(root, dir), e);
    if dir.strip_prefix(root).is_ok_and(|rel| !rel.as_os_str().is_empty()) {
        // Beneath the root: one folder at a time, never through a link.
        create_dir_all(root, root)?;
        return open_folder(root, dir, true).map(drop).map_err(wrap);
    }
    if dir.is_dir() {
        return Ok(());
    }
    // A bare relative name (`r1`) has the empty path as its parent: that is the current folder.
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        create_dir_all(root, parent)?;
    }
    faults::check("create_dir").map_err(wrap)?;
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(wrap(e)),
    }
    fsync_dir(parent.unwrap_or(Path::new("."))).map_err(wrap)?;
    Ok(())
}

/// Removes a file durably; a missing file is not an error.
pub fn remove_file(root: &Path, path: &Path) -> Result<()> {
    let wrap = |e| super::nofollow::io_error("removing", &rel_of(root, path), e);
    faults::check("remove_file").map_err(wrap)?;
    let (dirfd, name) = match folder_and_name(root, path, false) {
        Ok(found) => found,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(wrap(e)),
    };
    match rustix::fs::unlinkat(&dirfd, name.as_bytes(), AtFlags::empty()) {
        Ok(()) => {}
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(wrap(e.into())),
    }
    fsync_folder(&dirfd).map_err(wrap)
}

/// Appends bytes to a file (creating it) and fsyncs it.
pub fn append(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let wrap = |e| super::nofollow::io_error("appending to", &rel_of(root, path), e);
    faults::check("append").map_err(wrap)?;
    let (dirfd, name) = folder_and_name(root, path, false).map_err(wrap)?;
    let mut file = open_in(&dirfd, name, OFlags::APPEND).map_err(wrap)?;
    file.write_all(bytes).map_err(wrap)?;
    faults::check("fsync_append").map_err(wrap)?;
    file.sync_data().map_err(wrap)
}

/// The folder journal's socket (`folder_journal`), bound for this process alone: its lock file
/// beside it is taken first (held as long as the returned handle lives; another live journal
/// of this vault holds it: `Ok(None)`), then a socket left by a killed journal is removed
/// (only a socket: anything else in its place is refused, never removed) and a fresh one
/// bound. Both are made through the engine folder's handle, never through a link.
pub fn bind_engine_socket(root: &Path, socket: &Path, lock: &Path) -> Result<Option<(File, std::os::unix::net::UnixListener)>> {
    use std::os::unix::fs::FileTypeExt;
    let rel = rel_of(root, socket);
    let (dirfd, name) = folder_and_name(root, lock, true).map_err(|e| super::nofollow::io_error("opening", &rel_of(root, lock), e))?;
    let lock_file = open_in(&dirfd, name, OFlags::empty()).map_err(|e| super::nofollow::io_error("opening", &rel_of(root, lock), e))?;
    match lock_file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
        Err(std::fs::TryLockError::Error(e)) => return Err(super::nofollow::io_error("locking", &rel_of(root, lock), e)),
    }
    let (dirfd, name) = folder_and_name(root, socket, true).map_err(|e| super::nofollow::io_error("binding", &rel, e))?;
    match rustix::fs::statat(&dirfd, name.as_bytes(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Socket => {
            rustix::fs::unlinkat(&dirfd, name.as_bytes(), AtFlags::empty())
                .map_err(|e| super::nofollow::io_error("removing", &rel, e.into()))?;
        }
        Ok(_) => return Err(Error::VaultBoundary { path: rel, reason: "it is not a socket".into() }),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(super::nofollow::io_error("inspecting", &rel, e.into())),
    }
    let listener = std::os::unix::net::UnixListener::bind(socket).map_err(|e| super::nofollow::io_error("binding", &rel, e))?;
    // Bound through a path: refuse what the path turned out to name if it is not a socket.
    let bound = fs::symlink_metadata(socket).map_err(|e| super::nofollow::io_error("binding", &rel, e))?;
    if !bound.file_type().is_socket() {
        return Err(Error::VaultBoundary { path: rel, reason: "it is not a socket".into() });
    }
    Ok(Some((lock_file, listener)))
}

/// Removes the folder journal's socket when its journal stops (only a socket).
pub fn remove_engine_socket(root: &Path, socket: &Path) {
    if let Ok((dirfd, name)) = folder_and_name(root, socket, false)
        && let Ok(stat) = rustix::fs::statat(&dirfd, name.as_bytes(), AtFlags::SYMLINK_NOFOLLOW)
        && rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Socket
    {
        let _ = rustix::fs::unlinkat(&dirfd, name.as_bytes(), AtFlags::empty());
    }
}
