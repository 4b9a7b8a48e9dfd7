//! Engine files are never reached through a symbolic link: opens with `O_NOFOLLOW`, and a
//! check that no engine folder or file (`.paravault/` and everything the engine keeps in it,
//! `log.md`, `index.md`) is a link.
//!
//! A link planted at an engine path would let a write truncate, append to or delete a file
//! outside the vault (the journal is truncated on open, receipts and `log.md` are appended to,
//! generation GC deletes segment-named files). `refuse_symlinked_state` runs when a vault is
//! opened, when the writer lock is taken and before search reads and GC; every engine-file open
//! also carries `O_NOFOLLOW`, so a link planted between the check and the open fails the open
//! (`ELOOP`) instead of being followed. A folder swapped for a link between the check and a
//! later open is handled by opening through folder handles (`beneath`, `durable`; docs/security.md).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::layout;
use crate::error::{Error, PathRefusal, Result};

/// Engine folders, parents before children.
const STATE_FOLDERS: [&str; 11] = [
    layout::STATE_DIR,
    layout::SEARCH_DIR,
    layout::SEARCH_INDEX_DIR,
    layout::SEARCH_GENERATIONS_DIR,
    layout::SEARCH_DENSE_DIR,
    layout::PROPOSALS_DIR,
    layout::TASKS_DIR,
    layout::TASK_EVENTS_DIR,
    layout::APPROVALS_DIR,
    layout::APPROVAL_DECISIONS_DIR,
    layout::BATCH_PROPOSALS_DIR,
];

/// Engine files.
const STATE_FILES: [&str; 15] = [
    layout::POLICY_OVERRIDE,
    layout::POLICY_CACHE,
    layout::LEGACY_INVENTORY_FILE,
    layout::INVENTORY_INDEX,
    layout::JOURNAL,
    layout::JOURNAL_HEADS,
    layout::RECEIPTS,
    layout::WRITER_LOCK,
    layout::GOALS_LOCK,
    layout::FOLDER_JOURNAL_SOCKET,
    layout::FOLDER_JOURNAL_LOCK,
    layout::CATALOG_STATE,
    layout::SEARCH_ACTIVE,
    layout::LOG,
    layout::ROOT_INDEX,
];

/// Open options that refuse to follow a symbolic link in the last component.
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.custom_flags(libc::O_NOFOLLOW);
    options
}

/// Opens a file for reading without following a link in its last component, without
/// blocking, and only a regular file (see `open_regular_at`).
pub fn open_read(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    regular(options.read(true).open(path)?)
}

/// Opens `name` in the folder `dirfd` for reading: never through a link (`ELOOP`), never
/// blocking (a FIFO planted where a file is expected would hold the open until a writer came),
/// and only a regular file: anything else fails with `InvalidInput`, "not a regular file".
/// `O_NONBLOCK` changes nothing for a regular file's reads.
pub fn open_regular_at(dirfd: impl std::os::fd::AsFd, name: impl rustix::path::Arg) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    regular(File::from(rustix::fs::openat(dirfd, name, flags, Mode::empty())?))
}

fn regular(file: File) -> io::Result<File> {
    if file.metadata()?.file_type().is_file() { Ok(file) } else { Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")) }
}

/// Creates (owner-only) or opens the writer lock file for writing, never through a link.
pub fn create_lock_file(path: &Path) -> io::Result<File> {
    options().create(true).truncate(false).write(true).mode(0o600).open(path)
}

/// Opens the existing writer lock file for writing: a handle of its own, to lock.
pub fn open_lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).open(path)
}

/// Reads a whole file without following a link in its last component.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = open_read(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads a whole UTF-8 file without following a link in its last component.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Whether an open failed because its last component is a symbolic link (`O_NOFOLLOW`).
pub fn is_link_refusal(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ELOOP)
}

/// The error for an engine path that is a symbolic link.
pub fn boundary(rel: &str) -> Error {
    Error::VaultBoundary { path: rel.to_string(), reason: "it is a symbolic link; the engine never reads or writes through one".into() }
}

/// Maps an engine-file I/O error: a link refused by `O_NOFOLLOW` is `vault_boundary`, anything
/// else `io_error`.
pub fn io_error(action: &'static str, rel: &str, error: io::Error) -> Error {
    if is_link_refusal(&error) { boundary(rel) } else { Error::io(action, rel, error) }
}

/// Refuses a vault whose engine folders or files include a symbolic link (`vault_boundary`).
/// Paths that do not exist are fine; a missing folder skips its children. Each path is looked
/// at beneath one handle on the root (`fstatat`), so the root's own path is walked once, not
/// once per engine path: this runs before every search, report and write.
pub fn refuse_symlinked_state(root: &Path) -> Result<()> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    // A root that cannot be opened holds no engine path to refuse (each look would fail).
    let Ok(base) = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) else { return Ok(()) };
    let mut missing: Vec<&str> = Vec::new();
    for rel in STATE_FOLDERS.iter().chain(STATE_FILES.iter()) {
        if missing.iter().any(|folder| rel.strip_prefix(folder).is_some_and(|rest| rest.starts_with('/'))) {
            continue;
        }
        let is_folder = STATE_FOLDERS.contains(rel);
        match rustix::fs::statat(&base, *rel, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => return Err(boundary(rel)),
                FileType::Directory => {}
                _ if is_folder => {
                    return Err(Error::VaultBoundary { path: rel.to_string(), reason: "it is not a directory".into() });
                }
                _ => {}
            },
            Err(rustix::io::Errno::NOENT) if is_folder => missing.push(rel),
            Err(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// Checks that no existing component of the vault path `rel` under `root` is a symbolic link
/// and that the canonical location stays inside the canonical root. Components that do not
/// exist yet are fine (a new note). Returns the absolute path.
pub fn resolve_safe(root: &Path, rel: &str) -> Result<PathBuf> {
    let refuse = |reason| Error::PathRefused { path: rel.to_string(), reason };
    let mut current = root.to_path_buf();
    for component in rel.split('/') {
        current.push(component);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(refuse(PathRefusal::Symlink)),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let absolute = layout::join(root, rel);
    if let (Ok(canon_root), Ok(canon)) = (root.canonicalize(), absolute.canonicalize())
        && !canon.starts_with(&canon_root)
    {
        return Err(refuse(PathRefusal::OutsideVault));
    }
    Ok(absolute)
}
