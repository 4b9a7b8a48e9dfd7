//! Pure rendering of catalog pages: directory `_index.md` pages (paged by byte budget) and the
//! root `index.md`. Deterministic: same inputs, same bytes (no wall-clock timestamps).

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::inventory::NoteRecord;
use crate::note::path::VaultPath;
use crate::note::yaml_edit::quoted;
use crate::store::layout;

/// The renderer version written into every page (`x-index-renderer`). It stays 1 while a
/// one-page catalog renders byte for byte as it always has: bumping it would rewrite every
/// catalog of every vault for no reader's benefit (no reader of either engine compares it with
/// its own; ownership is `x-generated-by`).
pub(crate) const RENDERER_VERSION: u32 = 1;
/// The version of the page layout as a whole, in the remembered renderer state and in every
/// directory's input digest (never in a page): bump it whenever any page's bytes may change for
/// the same input, so that a remembered state of the older layout is dropped and every
/// directory is rendered again (only pages whose bytes differ are written). 2: page boundaries
/// cut by key hash (`page_starts`) instead of greedy filling; multi-page catalogs changed. 3: the
/// budget reserves a middle page's header (both navigation links), so no page passes it.
pub(crate) const LAYOUT_VERSION: u32 = 3;
/// Ownership marker value.
pub(crate) const MARKER: &str = "paravault";

/// A folder row of a directory's catalog: the subfolder's name and the valid notes in its
/// subtree, with its rendered row and key score (`page_starts`).
#[derive(Debug, Clone)]
pub struct ChildEntry {
    pub name: String,
    pub notes: usize,
    row: std::sync::Arc<str>,
    score: (u64, u32),
}

impl ChildEntry {
    /// The row of subfolder `name` of `dir`, holding `notes` valid notes.
    pub fn new(dir: &str, name: &str, notes: usize) -> Self {
        let row = dir_entry(name, notes).into();
        let mut path = String::with_capacity(dir.len() + 1 + name.len());
        let _ = write!(path, "{dir}/{name}");
        ChildEntry { name: name.to_string(), notes, row, score: key_score(&path, FOLDER_WEIGHT) }
    }
}

/// A note row of a directory's catalog: the note's path and content hash (what its row is
/// rendered from, with the policy's description cut), the case-folded title it sorts by, its
/// row and key score.
#[derive(Debug, Clone)]
pub struct NoteEntry {
    pub path: VaultPath,
    content_hash: [u8; 32],
    folded_title: String,
    row: std::sync::Arc<str>,
    score: (u64, u32),
}

impl NoteEntry {
    /// The row of `record` (rows memoised in `rows`).
    pub fn new(record: &NoteRecord, description_chars: usize, rows: &RowMemo) -> Self {
        NoteEntry {
            path: record.path.clone(),
            content_hash: record.content_hash,
            folded_title: record.meta.title.as_deref().unwrap_or("").to_lowercase(),
            row: rows.note_entry(record, description_chars),
            score: key_score(record.path.as_str(), NOTE_WEIGHT),
        }
    }

    /// The blake3 of the note's bytes.
    pub(super) fn content_hash(&self) -> &[u8; 32] {
        &self.content_hash
    }

    /// Notes are listed by (case-folded title, path).
    pub(super) fn order(&self) -> (&str, &VaultPath) {
        (&self.folded_title, &self.path)
    }
}

/// Everything one directory's catalog shows: its folder rows in name order, then its note
/// rows in (case-folded title, path) order.
#[derive(Debug, Clone, Default)]
pub struct DirEntries {
    pub children: Vec<ChildEntry>,
    pub notes: Vec<NoteEntry>,
}

impl DirEntries {
    /// The entries of `dir`: its subfolders with their note counts (in name order) and its
    /// notes (in any order: sorted here).
    pub fn new<'r>(
        dir: &str,
        children: impl IntoIterator<Item = (&'r str, usize)>,
        notes: impl IntoIterator<Item = &'r NoteRecord>,
        description_chars: usize,
        rows: &RowMemo,
    ) -> Self {
        let children: Vec<ChildEntry> = children.into_iter().map(|(name, notes)| ChildEntry::new(dir, name, notes)).collect();
        debug_assert!(children.windows(2).all(|w| w[0].name < w[1].name), "BUG: folder rows out of name order");
        let mut notes: Vec<NoteEntry> = notes.into_iter().map(|record| NoteEntry::new(record, description_chars, rows)).collect();
        notes.sort_unstable_by(|a, b| a.order().cmp(&b.order()));
        DirEntries { children, notes }
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.children.len() + self.notes.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i`'s row, folder rows first.
    fn row(&self, i: usize) -> &str {
        match i.checked_sub(self.children.len()) {
            None => &self.children[i].row,
            Some(n) => &self.notes[n].row,
        }
    }

    /// Entry `i`'s key score, folder rows first.
    fn score(&self, i: usize) -> (u64, u32) {
        match i.checked_sub(self.children.len()) {
            None => self.children[i].score,
            Some(n) => self.notes[n].score,
        }
    }
}

/// Everything one directory's catalog shows, with the directory.
pub struct DirInput<'a> {
    pub dir: &'a str,
    pub entries: &'a DirEntries,
}

fn escape_inline(text: &str) -> String {
    let needs_escape = |b: u8| matches!(b, b'\n' | b'\r' | b'\t' | b'[' | b']' | b'<' | b'>' | b'`' | b'|' | b'\\');
    if !text.bytes().any(needs_escape) {
        // The common case (no Markdown-active character): one copy.
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            '[' | ']' | '<' | '>' | '`' | '|' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// A file or folder name as a `<…>` link destination: `<` and `>` would end the destination,
/// and a Markdown reader cuts a destination at `#` (fragment) or `?` (query) and
/// percent-decodes it (the engine's own link reader does), and decodes HTML entities (`&lt;`)
/// in it, so these four, `&` and `%` itself are percent-encoded. Names never hold a line break or a backslash (`VaultPath` refuses them).
fn escape_destination(name: &str) -> std::borrow::Cow<'_, str> {
    let special = |c: char| matches!(c, '%' | '#' | '?' | '<' | '>' | '&');
    if !name.contains(special) {
        return name.into();
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if special(c) {
            let _ = write!(out, "%{:02X}", c as u32);
        } else {
            out.push(c);
        }
    }
    out.into()
}

fn truncate_chars(text: &str, max: usize) -> String {
    // No more bytes than `max` means no more characters either: skip the count.
    if text.len() <= max || text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(3)).collect();
    format!("{}...", cut.trim_end())
}

/// Rendered note rows of one vault, by (path, content blake3, description cut): a row is a
/// function of the note's bytes (through its metadata, under the vault's one policy), so a
/// directory re-rendered after a write re-renders only the rows whose notes changed.
#[derive(Debug, Default)]
pub struct RowMemo(std::sync::Mutex<std::collections::HashMap<RowKey, std::sync::Arc<str>>>);

/// A memoised row's key: (path, content blake3, description cut).
type RowKey = (String, [u8; 32], usize);

/// Rows kept before the memo starts over (a row is ~300 bytes).
pub(super) const ROW_MEMO_MAX: usize = 100_000;

impl RowMemo {
    fn note_entry(&self, record: &NoteRecord, description_chars: usize) -> std::sync::Arc<str> {
        if record.content_hash == [0; 32] {
            // Content unknown (a record built without its bytes): nothing to key on.
            return note_entry(record, description_chars).into();
        }
        let key = (record.path.as_str().to_string(), record.content_hash, description_chars);
        let mut rows = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(row) = rows.get(&key) {
            return row.clone();
        }
        if rows.len() >= ROW_MEMO_MAX {
            rows.clear();
        }
        let row: std::sync::Arc<str> = note_entry(record, description_chars).into();
        rows.insert(key, row.clone());
        row
    }
}

fn note_entry(record: &NoteRecord, description_chars: usize) -> String {
    let meta = &record.meta;
    let name = record.path.file_name();
    let title = meta.title.as_deref().unwrap_or(name);
    let mut out = String::new();
    let _ = writeln!(out, "### {}\n", escape_inline(title));
    let _ = writeln!(out, "- Path: [{}](<./{}>)", escape_inline(record.path.as_str()), escape_destination(name));
    if let Some(t) = &meta.note_type {
        let _ = writeln!(out, "- Type: {}", escape_inline(t));
    }
    if let Some(d) = &meta.description {
        let _ = writeln!(out, "- Description: {}", escape_inline(&truncate_chars(d, description_chars)));
    }
    if !meta.tags.is_empty() {
        let tags: Vec<String> = meta.tags.iter().map(|t| escape_inline(t)).collect();
        let _ = writeln!(out, "- Tags: {}", tags.join(", "));
    }
    if let Some(o) = &meta.owner {
        let _ = writeln!(out, "- Owner: {}", escape_inline(o));
    }
    if let Some(s) = &meta.status {
        let _ = writeln!(out, "- Status: {}", escape_inline(s));
    }
    if let Some(e) = &meta.expiry {
        let _ = writeln!(out, "- Review by: {e}");
    }
    if !meta.related.is_empty() {
        let related: Vec<String> = meta.related.iter().map(|r| escape_inline(r)).collect();
        let _ = writeln!(out, "- Related: {}", related.join(", "));
    }
    if let Some(ts) = &meta.timestamp {
        let _ = writeln!(out, "- Updated: {}", ts.date_naive());
    }
    out.push('\n');
    out
}

fn dir_entry(name: &str, notes: usize) -> String {
    format!("- [{}/](<./{}/{}>) — {} notes\n", escape_inline(name), escape_destination(name), layout::SUB_INDEX, notes)
}

fn parent_link(dir: &str) -> String {
    if dir.contains('/') { format!("../{}", layout::SUB_INDEX) } else { format!("../{}", layout::ROOT_INDEX) }
}

fn page_header(dir: &str, page: usize, pages: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---");
    let _ = writeln!(out, "type: System Guide");
    let _ = writeln!(out, "title: {}", quoted(&format!("Catalog: {dir}")));
    let _ = writeln!(out, "description: {}", quoted(&format!("Generated catalog of {dir}, page {page} of {pages}")));
    let _ = writeln!(out, "x-generated-by: {MARKER}");
    let _ = writeln!(out, "x-index-renderer: {RENDERER_VERSION}");
    let _ = writeln!(out, "x-index-directory: {}", quoted(dir));
    let _ = writeln!(out, "x-index-page: {page}");
    let _ = writeln!(out, "x-index-pages: {pages}");
    let _ = writeln!(out, "---");
    let _ = writeln!(out, "# {}\n", escape_inline(dir));
    let mut nav = vec![format!("Parent catalog: [up](<{}>)", parent_link(dir))];
    if page > 1 {
        nav.push(format!("Previous: [page {}](<./{}>)", page - 1, layout::sub_index_page_name(page - 1)));
    }
    if page < pages {
        nav.push(format!("Next: [page {}](<./{}>)", page + 1, layout::sub_index_page_name(page + 1)));
    }
    let _ = writeln!(out, "{}\n", nav.join(" · "));
    out
}

/// Where a directory's pages start: a pure function of its entries (so two replicas with the
/// same notes cut the same pages) that moves no boundary but the one an entry brings or takes.
///
/// Each entry has a *key score*: the first 8 bytes of blake3 of its vault path (the child
/// folder's or the note's), never of its rendered text, so editing a note's description or tags
/// moves no boundary. A page starts at every entry (but the first) whose score is below a
/// threshold `t` times the entry's nominal weight (a note row is about four folder rows, so a
/// boundary falls about once per as many bytes in either section). The threshold is the
/// sparsest rung of a fixed ladder (`threshold`: 2^64 at rung 0, each rung 2^-1/4 of the one
/// below) at which every page fits the budget; a directory that fits one page is one page (as
/// greedy filling made it, byte for byte). Feasibility only grows as the threshold does (denser
/// boundaries cut every page into pieces), so the rung is found by bisection, and the densest
/// rung (a page per entry) always fits once each entry does.
///
/// Inserting or removing an entry at the same rung changes only the page it falls in, or adds
/// or removes the one boundary it carries (the page count changes, and with it every page's
/// `x-index-pages`). The rung itself moves only when a page would overflow (denser: more pages)
/// or when the change lets a sparser rung fit (fewer pages; or, after an insertion that itself
/// carries a sparser boundary, rarely as many, with two boundaries moved). Greedy filling instead
/// shifted every later page's first entry, so one row among 2,500 rewrote every page after it.
pub(super) fn page_starts(sizes: &[usize], scores: &[(u64, u32)], budget: usize) -> Vec<usize> {
    match page_rung(sizes, scores, budget) {
        None => vec![0],
        Some(rung) => {
            let t = threshold(rung);
            (0..sizes.len()).filter(|&i| i == 0 || is_page_start(scores, i, t)).collect()
        }
    }
}

fn is_page_start(scores: &[(u64, u32)], i: usize, t: u128) -> bool {
    i > 0 && u128::from(scores[i].0) < t * u128::from(scores[i].1)
}

/// The rung `page_starts` cuts at: `None` when everything fits one page.
pub(super) fn page_rung(sizes: &[usize], scores: &[(u64, u32)], budget: usize) -> Option<u32> {
    if sizes.iter().sum::<usize>() <= budget {
        return None;
    }
    let is_start = |i: usize, t: u128| is_page_start(scores, i, t);
    let fits = |t: u128| {
        let mut used = 0;
        sizes.iter().enumerate().all(|(i, size)| {
            used = if is_start(i, t) { *size } else { used + size };
            used <= budget
        })
    };
    // Rung `r` fits for every `r` at or below the answer: find the highest that does.
    let (mut fitting, mut failing) = (0u32, THRESHOLD_RUNGS + 1);
    while failing - fitting > 1 {
        let mid = fitting + (failing - fitting) / 2;
        if fits(threshold(mid)) { fitting = mid } else { failing = mid }
    }
    Some(fitting)
}

/// Rungs of the boundary threshold ladder below rung 0 (2^64, a page per entry); rung 256 is 1.
const THRESHOLD_RUNGS: u32 = 256;

/// The boundary threshold at `rung`: 2^(64 - rung/4), in integers (no floating point, so every
/// platform cuts the same pages).
fn threshold(rung: u32) -> u128 {
    // 2^-k/4 for k = 0..3, in 1/65536ths.
    const QUARTERS: [u128; 4] = [65_536, 55_109, 46_341, 38_968];
    ((1u128 << 64) >> (rung / 4)) * QUARTERS[(rung % 4) as usize] / 65_536
}

/// The key score and nominal weight of an entry (see `page_starts`).
pub(super) fn key_score(path: &str, weight: u32) -> (u64, u32) {
    let hash = blake3::hash(path.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    (u64::from_le_bytes(first), weight)
}

/// Nominal weights of a folder row (~70 bytes) and a note row (~300 bytes).
pub(super) const FOLDER_WEIGHT: u32 = 1;
pub(super) const NOTE_WEIGHT: u32 = 4;

/// A directory's catalog entries and where its pages start: each page can be rendered, or
/// fingerprinted, alone (a write renders only the pages whose entries changed).
pub struct Layout<'i> {
    dir: &'i str,
    entries: &'i DirEntries,
    starts: Vec<usize>,
}

/// Lays out a directory's catalog: its rows, cut into pages of at most `page_bytes_max` bytes
/// where `page_starts` says.
pub fn layout<'i>(input: &DirInput<'i>, page_bytes_max: usize) -> Result<Layout<'i>> {
    let entries = input.entries;
    // Reserve room for the largest possible header: a middle page's (it links to the page
    // before and the one after), with 6-digit page numbers. Layout 2 reserved a last page's,
    // one link short, so a middle page could pass the budget by that link.
    let reserve = page_header(input.dir, 999_998, 999_999).len() + "\n## Notes\n\n## Folders\n\n".len();
    let budget = page_bytes_max.saturating_sub(reserve);
    if let Some(i) = (0..entries.len()).find(|&i| entries.row(i).len() > budget) {
        let owner = i.checked_sub(entries.children.len()).map_or(input.dir, |n| entries.notes[n].path.as_str());
        return Err(Error::CatalogEntryTooLarge { path: owner.to_string(), limit: page_bytes_max });
    }
    let sizes: Vec<usize> = (0..entries.len()).map(|i| entries.row(i).len()).collect();
    let scores: Vec<(u64, u32)> = (0..entries.len()).map(|i| entries.score(i)).collect();
    let starts = page_starts(&sizes, &scores, budget);
    Ok(Layout { dir: input.dir, entries, starts })
}

impl Layout<'_> {
    /// How many pages the directory has (at least one).
    pub fn pages(&self) -> usize {
        self.starts.len()
    }

    /// The entries of page `index` (0-based).
    fn range(&self, index: usize) -> std::ops::Range<usize> {
        self.starts[index]..self.starts.get(index + 1).copied().unwrap_or(self.entries.len())
    }

    /// Everything page `index`'s bytes are made of (the directory, its number, the page count
    /// and its rows, each marked folder or note), hashed: equal fingerprints, equal bytes. Far
    /// less work than the page itself when its rows are memoised (no page built, no file read).
    pub fn page_fingerprint(&self, index: usize) -> [u8; 32] {
        // Gathered into one buffer and hashed once (an update per row cost more than hashing).
        let range = self.range(index);
        let mut bytes = Vec::with_capacity(40 + self.dir.len() + range.len() * 120);
        bytes.extend_from_slice(&RENDERER_VERSION.to_le_bytes());
        bytes.extend_from_slice(&LAYOUT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&(self.dir.len() as u64).to_le_bytes());
        bytes.extend_from_slice(self.dir.as_bytes());
        bytes.extend_from_slice(&(index as u64).to_le_bytes());
        bytes.extend_from_slice(&(self.pages() as u64).to_le_bytes());
        for i in range {
            let text = self.entries.row(i).as_bytes();
            bytes.push(u8::from(i < self.entries.children.len()));
            bytes.extend_from_slice(&(text.len() as u64).to_le_bytes());
            bytes.extend_from_slice(text);
        }
        *blake3::hash(&bytes).as_bytes()
    }

    /// Page `index` (0-based) as `render_dir` renders it.
    pub fn render_page(&self, index: usize) -> String {
        let range = self.range(index);
        let mut page = page_header(self.dir, index + 1, self.pages());
        if range.is_empty() {
            page.push_str("_This folder has no catalogued notes._\n");
            return page;
        }
        let mut section: Option<bool> = None;
        for i in range {
            let is_dir = i < self.entries.children.len();
            if section != Some(is_dir) {
                if section.is_some() {
                    page.push('\n');
                }
                page.push_str(if is_dir { "## Folders\n\n" } else { "## Notes\n\n" });
                section = Some(is_dir);
            }
            page.push_str(self.entries.row(i));
        }
        page
    }
}

/// Renders a directory's catalog pages, each at most `page_bytes_max` bytes, cut where
/// `page_starts` says: every page of its `layout` (the reference a write's page-by-page plan
/// is tested against).
pub fn render_dir(input: &DirInput<'_>, page_bytes_max: usize) -> Result<Vec<String>> {
    let layout = layout(input, page_bytes_max)?;
    let pages: Vec<String> = (0..layout.pages()).map(|i| layout.render_page(i)).collect();
    debug_assert!(pages.iter().all(|page| page.len() <= page_bytes_max), "BUG: page over budget");
    Ok(pages)
}

/// One row of the root index.
pub(crate) struct CategoryRow {
    pub folder: String,
    pub notes: usize,
    pub has_catalog: bool,
}

/// Renders the root `index.md`.
pub(crate) fn render_root(rows: &[CategoryRow], root_daily_logs: &[&NoteRecord]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---");
    let _ = writeln!(out, "type: System Guide");
    let _ = writeln!(out, "title: \"Second Brain Index\"");
    let _ = writeln!(out, "description: \"Navigation map of this vault, generated by paravault\"");
    let _ = writeln!(out, "x-generated-by: {MARKER}");
    let _ = writeln!(out, "x-index-renderer: {RENDERER_VERSION}");
    let _ = writeln!(out, "---");
    let _ = writeln!(out, "# Second Brain Index\n");
    let _ = writeln!(out, "| Category | Notes | Sub-Index |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for row in rows {
        let link = if row.has_catalog { format!("[{0}/_index.md](<./{0}/_index.md>)", row.folder) } else { "—".into() };
        let _ = writeln!(out, "| {} | {} | {} |", row.folder, row.notes, link);
    }
    if !root_daily_logs.is_empty() {
        let _ = writeln!(out, "\n## Root Daily Logs\n");
        for record in root_daily_logs {
            let title = record.meta.title.as_deref().unwrap_or(record.path.as_str());
            let _ = writeln!(out, "- [{}](<./{}>)", escape_inline(title), record.path);
        }
    }
    let _ = writeln!(out, "\n## Agent Protocol\n");
    let _ = writeln!(out, "1. Read this index first.");
    let _ = writeln!(out, "2. Read the sub-index (`_index.md`) of the relevant category.");
    let _ = writeln!(out, "3. Read only the specific notes you need.");
    let _ = writeln!(out, "4. Never glob or read every `.md` file in the vault.");
    out
}
