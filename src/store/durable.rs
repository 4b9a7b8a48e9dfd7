//! The fsync protocol, written once: atomic durable replace, create-dir, remove, append.
//!
//! Invariant: after `replace` returns Ok, the new bytes survive a crash; before it returns, a
//! crash leaves the old bytes (or no file). Every function here calls `faults::check` first.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::faults;
use crate::error::{Error, Result};

fn rel_of(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

/// Fsyncs a directory so that renames and creations inside it are durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    faults::check("fsync_dir")?;
    File::open(dir)?.sync_all()
}

/// Atomically and durably replaces `path` with `bytes` (temp file in the same directory, fsync,
/// rename, fsync directory). `root` only shapes error messages.
pub fn replace(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    replace_io(path, bytes, true).map_err(|e| Error::io("writing", rel_of(root, path), e))
}

/// Like `replace` but without the directory fsync, for callers that group several writes in
/// one directory and fsync it once with `fsync_dir`.
pub fn replace_deferred_dir_sync(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    replace_io(path, bytes, false).map_err(|e| Error::io("writing", rel_of(root, path), e))
}

fn replace_io(path: &Path, bytes: &[u8], sync_dir: bool) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent directory"))?;
    faults::check("create_temp")?;
    let mut temp = tempfile::Builder::new().prefix(super::layout::TEMP_PREFIX).tempfile_in(dir)?;
    faults::check("write_temp")?;
    temp.write_all(bytes)?;
    faults::check("fsync_temp")?;
    temp.as_file().sync_all()?;
    faults::check("rename")?;
    temp.persist(path).map_err(|e| e.error)?;
    if sync_dir {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// Durably creates `path` holding `bytes`, never replacing a file that exists: temp file,
/// fsync, an atomic no-clobber rename (`RENAME_NOREPLACE`, or link + unlink) into place, fsync
/// the directory. `Ok(false)` when `path` already existed (its bytes are untouched). Immutable
/// records (approval decisions) are written only through this.
pub fn create_new(root: &Path, path: &Path, bytes: &[u8]) -> Result<bool> {
    let run = || -> io::Result<bool> {
        let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent directory"))?;
        faults::check("create_temp")?;
        let mut temp = tempfile::Builder::new().prefix(super::layout::TEMP_PREFIX).tempfile_in(dir)?;
        faults::check("write_temp")?;
        temp.write_all(bytes)?;
        faults::check("fsync_temp")?;
        temp.as_file().sync_all()?;
        faults::check("rename")?;
        match temp.persist_noclobber(path) {
            Ok(_) => {}
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e.error),
        }
        fsync_dir(dir)?;
        Ok(true)
    };
    run().map_err(|e| Error::io("creating", rel_of(root, path), e))
}

/// Replaces `path` atomically (temp file + rename) without any fsync. Only for writes whose
/// content is already durable elsewhere (an intent record): `sync_all_paths` makes them durable.
pub fn replace_unsynced(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let run = || -> io::Result<()> {
        let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent directory"))?;
        faults::check("create_temp")?;
        let mut temp = tempfile::Builder::new().prefix(super::layout::TEMP_PREFIX).tempfile_in(dir)?;
        faults::check("write_temp")?;
        temp.write_all(bytes)?;
        faults::check("rename")?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    run().map_err(|e| Error::io("writing", rel_of(root, path), e))
}

/// Truncates `path` to `before_len` (creating it, owner-only, if missing) and appends `bytes`,
/// without fsync. Idempotent: running it twice leaves the same bytes. Never through a symbolic
/// link (`vault_boundary`).
pub fn truncate_and_append_unsynced(root: &Path, path: &Path, before_len: u64, bytes: &[u8]) -> Result<()> {
    let wrap = |e| super::nofollow::io_error("appending to", &rel_of(root, path), e);
    faults::check("append").map_err(wrap)?;
    let mut file = super::nofollow::options().create(true).truncate(false).write(true).mode(0o600).open(path).map_err(wrap)?;
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
        let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent directory"))?;
        fs::create_dir_all(dir)?;
        let mut temp = tempfile::Builder::new().prefix(super::layout::TEMP_PREFIX).tempfile_in(dir)?;
        temp.write_all(bytes)?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    run().map_err(|e| Error::io("writing", rel_of(root, path), e))
}

/// Creates an empty scratch file, without fsync: for engine files whose existence only
/// signals something (a watch barrier) and never needs to survive a crash. Never follows or
/// replaces an existing name.
pub fn create_scratch(path: &Path) -> io::Result<()> {
    faults::check("scratch")?;
    fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map(drop)
}

/// Removes a scratch file made by `create_scratch`.
pub fn remove_scratch(path: &Path) -> io::Result<()> {
    faults::check("scratch")?;
    fs::remove_file(path)
}

/// Removes leftover temporary files (`layout::TEMP_PREFIX`) of killed writes and watch
/// barriers (`layout::WATCH_BARRIER_PREFIX`) of killed servers, durably; the
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
    let wrap = |e| Error::io("removing", rel_of(root, path), e);
    faults::check("remove_file").map_err(wrap)?;
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(wrap(e)),
    }
}

/// Makes files and directories durable, fsyncing them in parallel (concurrent fsyncs on one
/// file system share journal commits, so this costs about one fsync, not one per file).
/// Missing files are skipped (they were removed).
pub fn sync_all_paths(root: &Path, files: &[std::path::PathBuf], dirs: &[std::path::PathBuf]) -> Result<()> {
    for _ in files.iter().chain(dirs) {
        faults::check("fsync").map_err(|e| Error::io("syncing", "vault", e))?;
    }
    let sync_one = |path: &std::path::PathBuf| -> io::Result<()> {
        match File::open(path) {
            Ok(f) => f.sync_all(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    };
    let all: Vec<&std::path::PathBuf> = files.iter().chain(dirs).collect();
    let results: Vec<(String, io::Result<()>)> = std::thread::scope(|s| {
        let handles: Vec<_> = all.iter().map(|p| s.spawn(move || (rel_of(root, p), sync_one(p)))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| (String::new(), Err(io::Error::other("fsync thread panicked"))))).collect()
    });
    for (rel, result) in results {
        result.map_err(|e| Error::io("syncing", rel, e))?;
    }
    Ok(())
}

/// Creates a directory and any missing parents, fsyncing each parent that gained an entry.
pub fn create_dir_all(root: &Path, dir: &Path) -> Result<()> {
    let wrap = |e| Error::io("creating directory", rel_of(root, dir), e);
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
    let wrap = |e| Error::io("removing", rel_of(root, path), e);
    faults::check("remove_file").map_err(wrap)?;
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(wrap(e)),
    }
    if let Some(parent) = path.parent() {
        fsync_dir(parent).map_err(wrap)?;
    }
    Ok(())
}

/// Appends bytes to a file (creating it) and fsyncs it.
pub fn append(root: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let wrap = |e| super::nofollow::io_error("appending to", &rel_of(root, path), e);
    faults::check("append").map_err(wrap)?;
    let mut file = super::nofollow::options().create(true).append(true).mode(0o600).open(path).map_err(wrap)?;
    file.write_all(bytes).map_err(wrap)?;
    faults::check("fsync_append").map_err(wrap)?;
    file.sync_data().map_err(wrap)
}
