//! Caller-supplied paths: parsed once into `VaultPath`, which can never leave the vault root.
//!
//! Lexical checks run on the raw text and again after percent-decoding, so `%2e%2e` is as
//! refused as `..`. `store::nofollow::resolve_safe` then walks the components on disk and
//! refuses any symbolic link, so a validated path cannot be redirected outside the root (this
//! module does no I/O).
//!
//! Caller text is also normalised to Unicode NFC (so the NFC and NFD spellings of a name are one
//! note), refused when it carries bidirectional text controls (a name that displays as another)
//! or a component longer than a file system accepts, and `parse_note_path` refuses the names
//! the engine owns or never reads as notes (`refuse_reserved`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, PathRefusal};
use crate::policy::Layout;
use crate::store::layout;

/// Longest accepted vault-relative path, in bytes.
const PATH_BYTES_MAX: usize = 1024;

/// Longest accepted path component, in bytes (NAME_MAX of the common file systems).
const COMPONENT_BYTES_MAX: usize = 255;

/// Bidirectional text controls: embeddings, overrides, isolates and marks (a name holding one
/// can display as a different name).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// A normalised vault-relative path: '/'-separated, no empty, '.' or '..' components, no
/// backslashes or control characters, never absolute.
///
/// Shared text (`Arc<str>`): the inventory holds each path in several indexes (records, files,
/// names, linkers), and a clone is a reference count, not an allocation per index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VaultPath(Arc<str>);

/// Vault-relative folder `dir` and every folder above it, innermost first, the vault root
/// ("") left out.
pub fn folder_and_ancestors(dir: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(dir).filter(|dir| !dir.is_empty()), |dir| dir.rsplit_once('/').map(|(parent, _)| parent))
}

/// The vault-relative path of entry `name` of folder `dir` (`""`: the root).
pub fn child(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

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
        if decoded.chars().any(is_bidi_control) {
            return Err(refuse(PathRefusal::BidiControl));
        }
        let normalised: String = decoded.nfc().collect();
        if normalised != decoded {
            check_lexical(&normalised).map_err(refuse)?;
        }
        if normalised.split('/').any(|c| c.len() > COMPONENT_BYTES_MAX) {
            return Err(refuse(PathRefusal::ComponentTooLong));
        }
        Ok(VaultPath(normalised.into()))
    }

    /// Wraps a path found by a directory walk: lexical checks only (no percent-decoding, since
    /// a file may legitimately be named `a%20b.md`).
    pub(crate) fn parse_walked(rel: &str) -> Result<Self, PathRefusal> {
        check_lexical(rel)?;
        Ok(VaultPath(Arc::from(rel)))
    }

    /// A range bound for ordered lookups (never a real path; never resolved on disk).
    pub(crate) fn bound(text: String) -> Self {
        VaultPath(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first component (the top-level folder).
    pub(crate) fn top_folder(&self) -> &str {
        self.0.split('/').next().unwrap_or("")
    }

    /// The parent directory ("" for a root-level file).
    pub fn parent(&self) -> &str {
        self.0.rsplit_once('/').map_or("", |(dir, _)| dir)
    }

    /// The folders holding this path, innermost first: its parent and every ancestor, the
    /// vault root ("") left out.
    pub fn folders(&self) -> impl Iterator<Item = &str> {
        folder_and_ancestors(self.parent())
    }

    /// The final component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit_once('/').map_or(&*self.0, |(_, name)| name)
    }

    /// Whether the file name is `<stem>.md` with a non-empty stem (a bare `.md` is not a note).
    pub(crate) fn has_md_extension(&self) -> bool {
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

/// Refuses a note path the engine owns or never reads as a note: catalog pages (`_index*.md` in
/// any folder), `index.md` and `log.md` at the root (compared without case, as a
/// case-insensitive file system would), any folder starting with `.` (engine state, `.git`,
/// hidden folders), any folder the policy excludes (`layout.excluded_dirs`, e.g.
/// `node_modules`) and the engine's temporary files.
pub(crate) fn refuse_reserved(path: &VaultPath, excluded_dirs: &[String]) -> Result<(), Error> {
    let refuse = |reason| Error::PathRefused { path: path.to_string(), reason };
    refuse_engine_owned(path)?;
    let components: Vec<&str> = path.as_str().split('/').collect();
    let folders = &components[..components.len() - 1];
    if folders.iter().any(|c| c.starts_with('.') || excluded_dirs.iter().any(|e| e.eq_ignore_ascii_case(c))) {
        return Err(refuse(PathRefusal::ExcludedFolder));
    }
    Ok(())
}

/// Refuses the names the engine writes itself: catalog pages (`_index*.md`), the root `index.md`
/// and `log.md`, anything in the engine's state folder and the engine's temporary files. The
/// write transaction checks every note change with it, whatever operation planned it.
pub(crate) fn refuse_engine_owned(path: &VaultPath) -> Result<(), Error> {
    let refuse = || Error::PathRefused { path: path.to_string(), reason: PathRefusal::EngineOwned };
    let name = path.file_name().to_lowercase();
    let at_root = !path.as_str().contains('/');
    if name.starts_with("_index") || (at_root && (name == layout::ROOT_INDEX || name == layout::LOG)) {
        return Err(refuse());
    }
    if path.as_str().split('/').any(|c| c.eq_ignore_ascii_case(layout::STATE_DIR) || c.starts_with(layout::TEMP_PREFIX)) {
        return Err(refuse());
    }
    Ok(())
}

/// Parses and checks a note path: `.md`, not a name the engine owns (`refuse_reserved`), inside
/// one of the P.A.R.A. folders. `vault::resolve_note_path` adds the disk's check (no symlinks).
pub fn parse_note_path(raw: &str, layout: &Layout) -> Result<VaultPath, Error> {
    let path = VaultPath::parse(raw)?;
    let refuse = |reason| Error::PathRefused { path: path.to_string(), reason };
    if !path.has_md_extension() {
        return Err(refuse(PathRefusal::NotMarkdown));
    }
    if !path.as_str().contains('/') || !layout.para_folders.iter().any(|f| f == path.top_folder()) {
        return Err(refuse(PathRefusal::NotInParaFolder));
    }
    refuse_reserved(&path, &layout.excluded_dirs)?;
    Ok(path)
}

#[cfg(test)]
mod tests;
