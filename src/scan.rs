//! Walks a vault and decides scope: which files are notes, which are system pages, which are
//! attachments that links may point at, and which are excluded (and why).
//!
//! Scope follows P.O.W.E.R.'s knowledge-base rule: no component in the policy's excluded
//! directories, first component a scope folder (or a root daily log), and not matched by
//! `.paravaultignore` / `.powerignore` (gitignore semantics via the `ignore` crate). Read-only.

use std::ffi::OsStr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::store::layout;

/// What role an in-scope Markdown file plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PageKind {
    /// An ordinary note: metadata-checked, catalogued, searchable.
    Note,
    /// `index.md` at the root.
    RootIndex,
    /// `log.md` at the root.
    Log,
    /// `_index.md` / `_index-N.md` in any directory.
    Catalog,
}

/// The outcome of walking the vault.
#[derive(Debug, Default)]
pub struct Scan {
    /// In-scope Markdown files with their role, sorted by path.
    pub pages: Vec<(VaultPath, PageKind)>,
    /// Every regular file outside excluded directories (link targets), sorted.
    pub files: Vec<VaultPath>,
    /// In-scope `.md` names that are symbolic links (never followed or read).
    pub symlinked_notes: Vec<VaultPath>,
    /// Markdown files and folders in scope whose names no vault path may hold, sorted.
    pub unusable_names: Vec<UnusableName>,
    /// Temporary files of atomic replaces (`layout::TEMP_PREFIX`), in the vault's folders and
    /// the engine's state folder: leftovers of killed writes unless a write is in flight.
    pub leftover_temps: Vec<std::path::PathBuf>,
    /// Every folder the walk listed, vault-relative (`""` is the vault root), in walk order.
    pub dirs: Vec<String>,
    /// Whether the walk met an ignore file (`layout::IGNORE_FILES`): scope then depends on
    /// its rules, which only a full walk applies.
    pub ignore_files: bool,
}

/// A Markdown file or a folder in scope whose name no vault path may hold: not UTF-8, or with
/// a control character or a backslash (`VaultPath::parse_walked`). It is never read, searched
/// or catalogued (a folder: nothing in it is); lint names it, so that a person can rename it
/// instead of losing it from view without a word.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnusableName {
    /// The folder holding it (vault-relative, itself usable).
    pub folder: String,
    /// Its name, escaped as Rust escapes text (`\n`, `\u{202e}`), each byte that is not
    /// UTF-8 as `\xNN`; a folder's ends with `/`.
    pub name: String,
}

impl UnusableName {
    /// Judges entry `name` (a folder when `is_dir`) of the usable folder `folder`: `Some` when it
    /// is in scope (below a scope folder; a file only when its name ends in `.md`) and its name
    /// is not one a vault path may hold.
    pub fn judge(policy: &LoadedPolicy, folder: &str, name: &OsStr, is_dir: bool) -> Option<UnusableName> {
        let top = folder.split('/').next().unwrap_or_default();
        if folder.is_empty() || !policy.scope_folders().any(|f| f == top) {
            return None;
        }
        let bytes = name.as_encoded_bytes();
        let markdown = bytes.len() > 3 && bytes.ends_with(b".md");
        if !(is_dir || markdown) {
            return None;
        }
        if name.to_str().is_some_and(|name| VaultPath::parse_walked(&format!("{folder}/{name}")).is_ok()) {
            return None;
        }
        let mut shown = String::new();
        for chunk in bytes.utf8_chunks() {
            shown.extend(chunk.valid().chars().flat_map(char::escape_debug));
            for byte in chunk.invalid() {
                shown.push_str(&format!("\\x{byte:02X}"));
            }
        }
        if is_dir {
            shown.push('/');
        }
        Some(UnusableName { folder: folder.to_string(), name: shown })
    }

    /// Where it is, as lint names it.
    pub fn shown(&self) -> String {
        format!("{}/{}", self.folder, self.name)
    }
}

/// Classifies a vault-relative Markdown path, or `None` when it is out of scope.
pub fn classify(policy: &LoadedPolicy, path: &VaultPath) -> Option<PageKind> {
    let rel = path.as_str();
    if !path.has_md_extension() {
        return None;
    }
    let excluded = &policy.policy.layout.excluded_dirs;
    if path.parent().split('/').any(|c| excluded.iter().any(|e| e == c)) {
        return None;
    }
    if !rel.contains('/') {
        return match rel {
            layout::ROOT_INDEX => Some(PageKind::RootIndex),
            layout::LOG => Some(PageKind::Log),
            name if policy.root_daily_log.is_match(name) => Some(PageKind::Note),
            _ => None,
        };
    }
    if !policy.scope_folders().any(|f| f == path.top_folder()) {
        return None;
    }
    if layout::is_sub_index_name(path.file_name()) { Some(PageKind::Catalog) } else { Some(PageKind::Note) }
}

/// Walks the vault under `root`.
pub fn scan(root: &Path, policy: &LoadedPolicy) -> Result<Scan> {
    let excluded: Vec<String> = policy.policy.layout.excluded_dirs.clone();
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(false)
        .ignore(false)
        .git_ignore(false)
        .git_global(false)
        .git_exclude(false)
        .parents(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    for name in layout::IGNORE_FILES {
        builder.add_custom_ignore_filename(name);
    }
    builder.filter_entry(move |entry| {
        entry.depth() == 0 || !entry.file_type().is_some_and(|t| t.is_dir()) || !excluded.iter().any(|e| entry.file_name() == e.as_str())
    });
    let mut out = Scan::default();
    for entry in builder.build() {
        let entry = entry.map_err(|e| Error::io("walking", "vault", std::io::Error::other(e.to_string())))?;
        if entry.depth() == 0 {
            out.dirs.push(String::new());
            continue;
        }
        let Some(file_type) = entry.file_type() else { continue };
        if !file_type.is_dir() && entry.file_name().to_str().is_some_and(|n| n.starts_with(layout::TEMP_PREFIX)) {
            if file_type.is_file() {
                out.leftover_temps.push(entry.path().to_path_buf());
            }
            continue;
        }
        let path = entry.path().strip_prefix(root).ok().and_then(Path::to_str).and_then(|rel| VaultPath::parse_walked(rel).ok());
        let Some(path) = path else {
            // Named only where its folder is usable: what an unusable folder holds is hidden
            // with it, and the folder is named.
            if let Some(folder) = entry.path().parent().and_then(|parent| usable_rel(root, parent))
                && let Some(unusable) = UnusableName::judge(policy, folder, entry.file_name(), file_type.is_dir())
            {
                out.unusable_names.push(unusable);
            }
            continue;
        };
        if file_type.is_dir() {
            out.dirs.push(path.as_str().to_string());
            continue;
        }
        if file_type.is_symlink() {
            if classify(policy, &path).is_some() {
                out.symlinked_notes.push(path);
            }
            continue;
        }
        if let Some(kind) = classify(policy, &path) {
            out.pages.push((path.clone(), kind));
        }
        out.files.push(path);
    }
    out.pages.sort_by(|a, b| a.0.cmp(&b.0));
    out.files.sort();
    out.unusable_names.sort();
    out.leftover_temps.extend(engine_temps(root));
    // Looked up by name, not from the walk: an ignore file may exclude itself.
    out.ignore_files = out.dirs.iter().any(|dir| {
        let dir = if dir.is_empty() { root.to_path_buf() } else { root.join(dir) };
        layout::IGNORE_FILES.iter().any(|name| std::fs::symlink_metadata(dir.join(name)).is_ok())
    });
    Ok(out)
}

/// Whether the walk lists an entry with this metadata among the vault's files (pages and
/// attachments): anything but a folder and a link, so a FIFO, socket or device named like a
/// note is a page the read reports as `note-unreadable`. Every other look at one path (the
/// watcher's refresh, a write's re-check) asks this, so they agree with the walk.
pub fn listed_as_file(meta: &std::fs::Metadata) -> bool {
    let kind = meta.file_type();
    !kind.is_dir() && !kind.is_symlink()
}

/// `path` relative to `root`, when a vault path may hold it (`""`: the root itself).
fn usable_rel<'p>(root: &Path, path: &'p Path) -> Option<&'p str> {
    path.strip_prefix(root).ok().and_then(Path::to_str).filter(|rel| rel.is_empty() || VaultPath::parse_walked(rel).is_ok())
}

/// Temporary files (and watch barriers of killed servers of earlier builds) in the engine's own folders (not
/// walked by `scan`: `.paravault` is an excluded directory), three levels deep, links never
/// followed.
pub fn engine_temps(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![(layout::join(root, layout::STATE_DIR), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(file_type) = entry.file_type() else { continue };
            if file_type.is_dir() && depth < 3 {
                dirs.push((entry.path(), depth + 1));
            } else if file_type.is_file()
                && entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(layout::TEMP_PREFIX) || n.starts_with(layout::WATCH_BARRIER_PREFIX))
            {
                out.push(entry.path());
            }
        }
    }
    out
}

/// Whether one vault-relative file is walked by `scan` (not under an excluded directory, not
/// matched by an ignore file of its folder or any folder above it, not a temporary file):
/// the same scope decision for one changed path as a full walk makes.
pub fn walked(root: &Path, policy: &LoadedPolicy, path: &VaultPath) -> bool {
    let excluded = &policy.policy.layout.excluded_dirs;
    if path.parent().split('/').any(|c| excluded.iter().any(|e| e == c)) || path.file_name().starts_with(layout::TEMP_PREFIX) {
        return false;
    }
    let mut dir = root.to_path_buf();
    let components: Vec<&str> = path.as_str().split('/').collect();
    for depth in 0..components.len() {
        let mut builder = ignore::gitignore::GitignoreBuilder::new(&dir);
        let mut any = false;
        for name in layout::IGNORE_FILES {
            let file = dir.join(name);
            if file.is_file() {
                any = true;
                if builder.add(&file).is_some() {
                    continue;
                }
            }
        }
        if any && let Ok(matcher) = builder.build() {
            let candidate = root.join(path.as_str());
            if matcher.matched_path_or_any_parents(&candidate, false).is_ignore() {
                return false;
            }
        }
        if depth + 1 < components.len() {
            dir.push(components[depth]);
        }
    }
    true
}
