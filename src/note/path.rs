//! Caller-supplied paths: parsed once into `VaultPath`, which can never leave the vault root.
//!
//! Lexical checks run on the raw text and again after percent-decoding, so `%2e%2e` is as
//! refused as `..`. `resolve_existing_safe` then walks the components on disk and refuses any
//! symbolic link, so a validated path cannot be redirected outside the root.

use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;

use crate::error::{Error, PathRefusal};

/// Longest accepted vault-relative path, in bytes.
const PATH_BYTES_MAX: usize = 1024;

/// A normalised vault-relative path: '/'-separated, no empty, '.' or '..' components, no
/// backslashes or control characters, never absolute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VaultPath(String);

impl VaultPath {
    /// Parses caller text. Percent-encoded text is decoded once and both forms are checked.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let refuse = |reason| Error::PathRefused { path: printable(raw), reason };
        check_lexical(raw).map_err(refuse)?;
        let decoded = percent_decode_str(raw).decode_utf8().map_err(|_| refuse(PathRefusal::BadPercentEncoding))?;
        if decoded != raw {
            check_lexical(&decoded).map_err(refuse)?;
            // Double encoding (`%252e`) decodes to another escape: refuse rather than guess.
            if decoded.contains('%') && percent_decode_str(&decoded).decode_utf8().is_ok_and(|d| d != decoded) {
                return Err(refuse(PathRefusal::BadPercentEncoding));
            }
        }
        Ok(VaultPath(decoded.into_owned()))
    }

    /// Wraps a path found by a directory walk: lexical checks only (no percent-decoding, since
    /// a file may legitimately be named `a%20b.md`).
    pub(crate) fn parse_walked(rel: &str) -> Result<Self, PathRefusal> {
        check_lexical(rel)?;
        Ok(VaultPath(rel.to_string()))
    }

    /// A range bound for ordered lookups (never a real path; never resolved on disk).
    pub(crate) fn bound(text: String) -> Self {
        VaultPath(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first component (the top-level folder).
    pub fn top_folder(&self) -> &str {
        self.0.split('/').next().unwrap_or("")
    }

    /// The parent directory ("" for a root-level file).
    pub fn parent(&self) -> &str {
        self.0.rsplit_once('/').map_or("", |(dir, _)| dir)
    }

    /// The final component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit_once('/').map_or(self.0.as_str(), |(_, name)| name)
    }

    /// Whether the file name is `<stem>.md` with a non-empty stem (a bare `.md` is not a note).
    pub fn has_md_extension(&self) -> bool {
        let name = self.file_name();
        name.len() > 3 && name.ends_with(".md")
    }

    /// The absolute location under `root`.
    pub fn under(&self, root: &Path) -> PathBuf {
        crate::store::layout::join(root, &self.0)
    }
}

impl std::fmt::Display for VaultPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text safe to put in an error message: control characters escaped, length bounded.
fn printable(raw: &str) -> String {
    let mut out: String = raw.chars().take(200).flat_map(char::escape_default).collect();
    if raw.chars().count() > 200 {
        out.push('…');
    }
    out
}

fn check_lexical(text: &str) -> Result<(), PathRefusal> {
    if text.is_empty() {
        return Err(PathRefusal::Empty);
    }
    if text.len() > PATH_BYTES_MAX {
        return Err(PathRefusal::TooLong);
    }
    if text.chars().any(char::is_control) {
        return Err(PathRefusal::ControlCharacter);
    }
    if text.contains('\\') {
        return Err(PathRefusal::Backslash);
    }
    if text.starts_with('/') {
        return Err(PathRefusal::Absolute);
    }
    let bytes = text.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(PathRefusal::DriveLetter);
    }
    for component in text.split('/') {
        match component {
            "" => return Err(PathRefusal::EmptyComponent),
            "." => return Err(PathRefusal::CurrentComponent),
            ".." => return Err(PathRefusal::ParentComponent),
            _ => {}
        }
    }
    Ok(())
}

/// Checks that no existing component of `path` under `root` is a symbolic link and that the
/// canonical location stays inside the canonical root. Components that do not exist yet are
/// fine (a new note). Returns the absolute path.
pub fn resolve_safe(root: &Path, path: &VaultPath) -> Result<PathBuf, Error> {
    let refuse = |reason| Error::PathRefused { path: path.to_string(), reason };
    let mut current = root.to_path_buf();
    for component in path.as_str().split('/') {
        current.push(component);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(refuse(PathRefusal::Symlink)),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let absolute = path.under(root);
    if let (Ok(canon_root), Ok(canon)) = (root.canonicalize(), absolute.canonicalize())
        && !canon.starts_with(&canon_root)
    {
        return Err(refuse(PathRefusal::OutsideVault));
    }
    Ok(absolute)
}

/// Parses and checks a note path: `.md`, inside one of `para_folders`, no symlinks on disk.
pub fn resolve_note_path(root: &Path, raw: &str, para_folders: &[String]) -> Result<(VaultPath, PathBuf), Error> {
    let path = VaultPath::parse(raw)?;
    let refuse = |reason| Error::PathRefused { path: path.to_string(), reason };
    if !path.has_md_extension() {
        return Err(refuse(PathRefusal::NotMarkdown));
    }
    if !path.as_str().contains('/') || !para_folders.iter().any(|f| f == path.top_folder()) {
        return Err(refuse(PathRefusal::NotInParaFolder));
    }
    let absolute = resolve_safe(root, &path)?;
    Ok((path, absolute))
}

#[cfg(test)]
mod tests;
