//! Catalogs: which directories get `_index.md` pages, what they contain, and the plan of page
//! writes and deletions that brings the vault's catalogs up to date.
//!
//! Planning is pure over the model (`inventory::ModelView`: the whole model, or a write's
//! partial one for the folders it plans); `vault` applies plans through `store::durable`.
//! A hand-written catalog (no ownership marker) is never overwritten or deleted: it is reported
//! as a conflict. Unchanged directories are not rendered again where their input digests are
//! remembered (a full regeneration, a long-lived process), and pages whose bytes are unchanged
//! are never written, so regenerating an unchanged vault changes no byte. The remembered state
//! is only a hint: the pages on disk decide what is written and deleted.

pub mod entries;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::inventory::{ModelView, NoteRecord};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::PageKind;
use crate::store::layout;
pub use entries::CatalogMemo;
use render::{CategoryRow, DirEntries, DirInput};

/// What the catalog renderer remembers between runs (persisted as `.paravault/catalog-state.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogState {
    /// The page layout version that rendered it (`render::LAYOUT_VERSION`); another drops it.
    pub renderer: u32,
    /// Directory → (input digest, blake3 of each rendered page).
    pub dirs: BTreeMap<String, DirState>,
    pub root_digest: String,
}

impl CatalogState {
    /// Takes in the state a partial plan of `planned` directories returned.
    pub(crate) fn merge(&mut self, partial: CatalogState, planned: &BTreeSet<String>) {
        if partial.renderer != self.renderer {
            *self = partial;
            return;
        }
        self.root_digest = partial.root_digest;
        for dir in planned {
            self.dirs.remove(dir);
        }
        self.dirs.extend(partial.dirs);
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirState {
    pub input_digest: String,
    pub page_hashes: Vec<String>,
    /// Each page's fingerprint (`render::Layout::page_fingerprint`) when this process rendered
    /// it or found it on disk as rendered, beside `page_hashes`: a write's plan neither renders
    /// nor reads a page whose fingerprint is unchanged. Never persisted: a state read back
    /// (at start, or reloaded because a page changed outside) has none, so its pages are
    /// rendered and compared with the disk.
    #[serde(skip)]
    pub page_fingerprints: Vec<[u8; 32]>,
}

/// The writes and deletions that make the catalogs current.
#[derive(Debug, Default)]
pub struct CatalogPlan {
    pub writes: Vec<(VaultPath, Vec<u8>)>,
    pub deletes: Vec<VaultPath>,
    /// Hand-written catalog pages left alone.
    pub conflicts: Vec<VaultPath>,
    /// Directories rendered (their inputs changed or their pages were not as remembered).
    pub rendered_dirs: usize,
    /// Catalogued directories in total.
    pub dirs_total: usize,
    /// Pages rendered (and compared with their files) in the rendered directories: a write's
    /// plan skips those whose entries are unchanged.
    pub pages_rendered: usize,
    /// The renderer state after the plan: whole for a full plan; for a partial one only the
    /// planned directories (see `CatalogState::merge`).
    pub state: CatalogState,
}

/// The directory structure of what gets catalogued. Keys borrow from the inventory's paths, so
/// building it allocates per directory, not per note; notes are sorted only when a directory's
/// input is built (a one-note regeneration sorts one directory, not the vault).
pub struct CatalogTree<'a> {
    /// Directory → notes directly in it (in path order; `input` sorts by case-folded title, path).
    pub notes: BTreeMap<&'a str, Vec<&'a NoteRecord>>,
    /// Directory → child directories that are catalogued.
    pub children: BTreeMap<&'a str, BTreeSet<&'a str>>,
    /// Directory → notes in its subtree.
    pub counts: BTreeMap<&'a str, usize>,
    pub root_daily_logs: Vec<&'a NoteRecord>,
}

pub(crate) fn is_catalogued(record: &NoteRecord) -> bool {
    record.kind == PageKind::Note && record.valid
}

/// Builds the tree of catalogued directories from the inventory.
///
/// Records come in path order, so notes of one directory arrive in runs; each run is added to
/// its directory and ancestors once.
pub fn tree<'a>(inventory: &'a dyn ModelView, policy: &LoadedPolicy) -> CatalogTree<'a> {
    let folders: Vec<&str> = policy.catalog_folders().map(String::as_str).collect();
    let mut tree = CatalogTree { notes: BTreeMap::new(), children: BTreeMap::new(), counts: BTreeMap::new(), root_daily_logs: Vec::new() };
    let mut run_dir: &'a str = "";
    let mut run: Vec<&'a NoteRecord> = Vec::new();
    for record in inventory.records().values().filter(|r| is_catalogued(r)) {
        let dir = record.path.parent();
        if dir.is_empty() {
            tree.root_daily_logs.push(record);
            continue;
        }
        if dir != run_dir {
            tree.add_run(run_dir, &mut run);
            run_dir = dir;
            if !folders.contains(&record.path.top_folder()) {
                run_dir = "";
            }
        }
        if !run_dir.is_empty() {
            run.push(record);
        }
    }
    tree.add_run(run_dir, &mut run);
    tree
}

impl<'a> CatalogTree<'a> {
    fn add_run(&mut self, dir: &'a str, run: &mut Vec<&'a NoteRecord>) {
        if run.is_empty() {
            return;
        }
        let n = run.len();
        self.notes.entry(dir).or_default().append(run);
        let mut current = dir;
        loop {
            *self.counts.entry(current).or_default() += n;
            match current.rsplit_once('/') {
                Some((parent, _)) => {
                    self.children.entry(parent).or_default().insert(current);
                    current = parent;
                }
                None => break,
            }
        }
    }
}

impl<'a> CatalogTree<'a> {
    /// Every catalogued directory, sorted.
    pub fn dirs(&self) -> BTreeSet<String> {
        self.counts.keys().map(|d| (*d).to_string()).collect()
    }

    /// The entries of `dir`.
    fn entries(&self, dir: &str, description_chars: usize, rows: &render::RowMemo) -> DirEntries {
        let prefix_len = dir.len() + 1;
        let children = self.children.get(dir).into_iter().flatten().map(|c| (&c[prefix_len..], self.counts.get(c).copied().unwrap_or(0)));
        DirEntries::new(dir, children, self.notes.get(dir).into_iter().flatten().copied(), description_chars, rows)
    }
}

/// Digest of everything a directory's pages depend on. The bytes are gathered into one
/// buffer and hashed once: an update per field cost more than the hashing (2,500 folder rows
/// under one folder, issue 52).
fn input_digest(input: &DirInput<'_>) -> String {
    let entries = input.entries;
    let mut bytes = Vec::with_capacity(8 + input.dir.len() + entries.children.len() * 32 + entries.notes.len() * 80);
    bytes.extend_from_slice(&render::RENDERER_VERSION.to_le_bytes());
    bytes.extend_from_slice(&render::LAYOUT_VERSION.to_le_bytes());
    bytes.extend_from_slice(input.dir.as_bytes());
    let mut digits = itoa::Buffer::new();
    for child in &entries.children {
        // `\0d{name}\0{notes}`
        bytes.extend_from_slice(b"\0d");
        bytes.extend_from_slice(child.name.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(digits.format(child.notes).as_bytes());
    }
    for note in &entries.notes {
        bytes.extend_from_slice(b"\0n");
        bytes.extend_from_slice(note.path.as_str().as_bytes());
        bytes.extend_from_slice(note.content_hash());
    }
    crate::hex::encode(blake3::hash(&bytes).as_bytes())
}

/// Reads the bytes of an existing page, if any.
pub(crate) type PageReader<'r> = dyn Fn(&VaultPath) -> Option<Vec<u8>> + 'r;

/// Whether existing page bytes are ours to overwrite (marker present, or an empty file).
pub fn is_owned(bytes: &[u8]) -> bool {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return true;
    }
    let head = &bytes[..bytes.len().min(4096)];
    let Ok(text) = std::str::from_utf8(head).or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()])) else { return false };
    text.lines().take(40).any(|l| {
        l.strip_prefix("x-generated-by:").is_some_and(|v| crate::inventory::OWNERSHIP_MARKERS.contains(&v.trim().trim_matches('"')))
    }) || (text.starts_with("---")
        && text.lines().take(10).any(|l| l.trim() == "title: Second Brain Index" || l.trim() == "title: \"Second Brain Index\""))
}

/// Whether existing page bytes were written by this engine (`x-generated-by: paravault`): only
/// such a page is ever deleted. A page P.O.W.E.R. generated (`power`, or its v1 root index) may
/// be overwritten in place by the page that replaces it, but is never deleted: a vault handed
/// over keeps P.O.W.E.R.'s catalogs of folders without notes (issue 50).
pub fn written_by_engine(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    let Ok(text) = std::str::from_utf8(head).or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()])) else { return false };
    text.lines().take(40).any(|l| l.strip_prefix("x-generated-by:").is_some_and(|v| v.trim().trim_matches('"') == render::MARKER))
}

/// Plans catalog updates for `dirs` (or every directory when `None`).
///
/// `previous` is the remembered state; `read_page` reads current page bytes for verification.
pub fn plan(
    inventory: &dyn ModelView,
    policy: &LoadedPolicy,
    previous: &CatalogState,
    only_dirs: Option<&BTreeSet<String>>,
    read_page: &PageReader<'_>,
    memo: &CatalogMemo,
) -> Result<CatalogPlan> {
    let limits = &policy.policy.limits;
    let description_chars = limits.catalog_description_chars;
    // A full plan walks the model once into a tree; a write's plan (`only_dirs`) reads only
    // its directories' entries: kept beside the whole model in a long-lived process (caught up
    // by the paths changed since, O(change)), read from a partial model by a scan each.
    let full_tree = match only_dirs {
        None => Some(tree(inventory, policy)),
        Some(_) => None,
    };
    let mut kept = match (only_dirs, inventory.as_whole()) {
        (Some(_), Some(whole)) => Some(memo.caught_up(whole, description_chars)),
        _ => None,
    };
    let all_dirs: BTreeSet<&str> = match (&full_tree, only_dirs) {
        (Some(tree), _) => tree.counts.keys().copied().collect(),
        (None, Some(dirs)) => dirs.iter().map(String::as_str).filter(|d| inventory.counts().valid_per_dir.contains_key(*d)).collect(),
        (None, None) => unreachable!("BUG: a plan without `only_dirs` builds the tree"),
    };
    // A partial plan starts from (and returns) only the planned directories' states: the write
    // path merges them back (`CatalogState::merge`) instead of copying the whole state.
    let state = match only_dirs {
        None => previous.clone(),
        Some(dirs) => CatalogState {
            renderer: previous.renderer,
            root_digest: previous.root_digest.clone(),
            dirs: dirs.iter().filter_map(|d| previous.dirs.get(d).map(|s| (d.clone(), s.clone()))).collect(),
        },
    };
    let mut plan = CatalogPlan { dirs_total: all_dirs.len(), state, ..Default::default() };
    if plan.state.renderer != render::LAYOUT_VERSION {
        plan.state = CatalogState { renderer: render::LAYOUT_VERSION, ..Default::default() };
    }
    for &dir in &all_dirs {
        let read;
        let entries: &DirEntries = match (&full_tree, kept.as_mut()) {
            (Some(tree), _) => {
                read = tree.entries(dir, description_chars, &memo.rows);
                &read
            }
            (None, Some(kept)) => kept.entries(dir),
            (None, None) => {
                read = entries::scan(inventory, dir, description_chars, &memo.rows);
                &read
            }
        };
        let input = DirInput { dir, entries };
        let digest = input_digest(&input);
        let remembered = plan.state.dirs.get(dir).cloned();
        let page_path = |n: usize| VaultPath::parse_walked(&format!("{dir}/{}", layout::sub_index_page_name(n))).ok();
        if let Some(state) = &remembered
            && state.input_digest == digest
            && state.page_hashes.iter().enumerate().all(|(i, h)| {
                page_path(i + 1).and_then(|p| read_page(&p)).is_some_and(|bytes| crate::hex::encode(blake3::hash(&bytes).as_bytes()) == *h)
            })
        {
            continue;
        }
        plan.rendered_dirs += 1;
        let layout = render::layout(&input, limits.catalog_page_bytes_max)?;
        // A write's plan in a long-lived process (`only_dirs`, fingerprints remembered) takes a
        // page whose fingerprint is the one it rendered or verified last as it is on disk: its
        // bytes would be the same, and a page changed outside since makes the remembered state
        // suspect (reloaded without fingerprints) before any plan trusts it. So only the pages
        // whose entries changed are rendered and compared (one of `03_Resources`'s pages per
        // write, of ten, issue 52). A full plan renders and compares every page, and so does a
        // regeneration asked for (`regenerate_catalogs_locked` drops the fingerprints).
        let trusted = remembered
            .as_ref()
            .filter(|s| only_dirs.is_some() && s.page_fingerprints.len() == s.page_hashes.len())
            .map_or(&[][..], |s| &s.page_fingerprints[..]);
        let mut hashes = Vec::with_capacity(layout.pages());
        let mut fingerprints = Vec::with_capacity(layout.pages());
        let mut dir_writes = Vec::new();
        let mut conflict = false;
        for i in 0..layout.pages() {
            let Some(path) = page_path(i + 1) else { continue };
            let fingerprint = layout.page_fingerprint(i);
            if trusted.get(i) == Some(&fingerprint)
                && let Some(hash) = remembered.as_ref().and_then(|s| s.page_hashes.get(i))
            {
                hashes.push(hash.clone());
                fingerprints.push(fingerprint);
                continue;
            }
            let page = layout.render_page(i);
            plan.pages_rendered += 1;
            debug_assert!(page.len() <= limits.catalog_page_bytes_max, "BUG: page over budget");
            hashes.push(crate::hex::encode(blake3::hash(page.as_bytes()).as_bytes()));
            fingerprints.push(fingerprint);
            match read_page(&path) {
                Some(existing) if existing == page.as_bytes() => {}
                Some(existing) if !is_owned(&existing) => {
                    plan.conflicts.push(path);
                    conflict = true;
                }
                _ => dir_writes.push((path, page.into_bytes())),
            }
        }
        if conflict {
            plan.state.dirs.remove(dir);
            continue;
        }
        plan.writes.extend(dir_writes);
        if hashes.len() != layout.pages() {
            // A page without a path (none so far) would shift the fingerprints' positions.
            fingerprints.clear();
        }
        // Owned pages past the new page count go away. They are found on disk, not taken from
        // the remembered count: the persisted state lags the pages a one-shot write rendered
        // (such a write never rewrites the whole state), and a page someone rewrote since is
        // theirs. Probing stops at the first missing page past the remembered count.
        let remembered_pages = remembered.as_ref().map_or(0, |s| s.page_hashes.len());
        for n in layout.pages() + 1.. {
            let Some(path) = page_path(n) else { break };
            match read_page(&path) {
                Some(bytes) if written_by_engine(&bytes) => plan.deletes.push(path),
                Some(_) => {}
                None if n > remembered_pages => break,
                None => {}
            }
        }
        plan.state.dirs.insert(dir.to_string(), DirState { input_digest: digest, page_hashes: hashes, page_fingerprints: fingerprints });
    }
    // Target directories that no longer hold catalogued notes lose their owned pages.
    if let Some(dirs) = only_dirs {
        for dir in dirs.iter().filter(|d| !all_dirs.contains(d.as_str())) {
            for n in 1.. {
                let Ok(page) = VaultPath::parse_walked(&format!("{dir}/{}", layout::sub_index_page_name(n))) else { break };
                match read_page(&page) {
                    Some(bytes) if written_by_engine(&bytes) => plan.deletes.push(page),
                    // P.O.W.E.R.'s page (or an empty file) stays, untouched.
                    Some(bytes) if is_owned(&bytes) => {}
                    Some(_) => {
                        plan.conflicts.push(page);
                        break;
                    }
                    None => break,
                }
            }
            plan.state.dirs.remove(dir.as_str());
        }
    }
    // Owned catalog pages that no current directory needs, found on disk via the inventory.
    if only_dirs.is_none() {
        for record in inventory.records().values().filter(|r| r.kind == PageKind::Catalog) {
            let dir = record.path.parent();
            let pages = plan.state.dirs.get(dir).map_or(0, |s| s.page_hashes.len());
            let page_no = page_number(record.path.file_name());
            let needed = all_dirs.contains(dir) && page_no <= pages;
            if !needed && !plan.deletes.contains(&record.path) && !plan.conflicts.contains(&record.path) {
                if record.generated {
                    // Only pages this engine wrote go; P.O.W.E.R.'s stay.
                    if read_page(&record.path).is_some_and(|bytes| written_by_engine(&bytes)) {
                        plan.deletes.push(record.path.clone());
                    }
                } else if !all_dirs.contains(dir) {
                    plan.conflicts.push(record.path.clone());
                }
            }
        }
        plan.state.dirs.retain(|d, _| all_dirs.contains(d.as_str()));
    }
    let root_daily_logs: Vec<&NoteRecord> = match &full_tree {
        Some(tree) => tree.root_daily_logs.clone(),
        None => inventory.counts().root_notes.iter().filter_map(|p| inventory.records().get(p)).collect(),
    };
    plan_root(&root_daily_logs, inventory.counts(), policy, &mut plan, read_page);
    plan.conflicts.sort();
    plan.conflicts.dedup();
    Ok(plan)
}

fn page_number(name: &str) -> usize {
    name.strip_prefix("_index-").and_then(|r| r.strip_suffix(".md")).and_then(|n| n.parse().ok()).unwrap_or(1)
}

fn plan_root(
    root_daily_logs: &[&NoteRecord],
    counts: &crate::inventory::Counts,
    policy: &LoadedPolicy,
    plan: &mut CatalogPlan,
    read_page: &PageReader<'_>,
) {
    let rows: Vec<CategoryRow> = policy
        .catalog_folders()
        .map(|folder| {
            let notes = counts.valid_per_dir.get(folder.as_str()).copied().unwrap_or(0);
            CategoryRow { folder: folder.clone(), notes, has_catalog: notes > 0 }
        })
        .collect();
    let text = render::render_root(&rows, root_daily_logs);
    let digest = crate::hex::encode(blake3::hash(text.as_bytes()).as_bytes());
    let Ok(path) = VaultPath::parse_walked(layout::ROOT_INDEX) else { return };
    if plan.state.root_digest == digest && read_page(&path).is_some_and(|b| b == text.as_bytes()) {
        return;
    }
    match read_page(&path) {
        Some(existing) if existing == text.as_bytes() => {}
        Some(existing) if !is_owned(&existing) => {
            plan.conflicts.push(path);
            return;
        }
        _ => plan.writes.push((path, text.into_bytes())),
    }
    plan.state.root_digest = digest;
}

/// Directories whose catalogs a change to `path` affects: its directory and every ancestor.
pub(crate) fn affected_dirs(path: &VaultPath) -> BTreeSet<String> {
    path.folders().map(str::to_string).collect()
}

/// The declared page count of a landing page (`x-index-pages` in its first 4 KiB).
pub fn declared_pages(landing: &[u8]) -> std::result::Result<usize, String> {
    let head = &landing[..landing.len().min(4096)];
    let text = std::str::from_utf8(head)
        .or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()]))
        .map_err(|_| "landing page is not UTF-8".to_string())?;
    let split = crate::note::frontmatter::split(text).map_err(|p| p.to_string())?;
    let mut found = None;
    for line in split.yaml.lines() {
        if let Some(value) = line.strip_prefix("x-index-pages:") {
            if found.is_some() {
                return Err("x-index-pages is declared twice".into());
            }
            found = Some(value.trim().trim_matches('"').parse::<usize>().map_err(|_| "x-index-pages is not a number".to_string())?);
        }
    }
    found.filter(|&n| n >= 1).ok_or_else(|| "landing page declares no x-index-pages".into())
}

#[cfg(test)]
mod tests;
