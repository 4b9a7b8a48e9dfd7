//! The filesystem door: the only module that creates, replaces, renames or removes files.
//!
//! Every mutation goes through `durable` (temp file in the same directory → fsync → rename →
//! fsync directory) so that a crash leaves either the old or the new bytes, never a torn file.
//! Reads of notes are plain `std::fs::read`; they live in `scan`, not here. Engine files are
//! opened through `nofollow` (never through a symbolic link); notes and catalogs are written,
//! read back and removed through folder handles (`beneath`: openat/renameat, no path lookup
//! after the walk).

// The one module allowed to mutate the filesystem (clippy.toml `disallowed-methods`).
#![allow(clippy::disallowed_methods)]

pub mod beneath;
pub mod checksummed;
pub mod durable;
pub mod faults;
pub mod git;
pub mod journal;
pub mod layout;
pub mod nofollow;
pub mod tantivy_dir;
