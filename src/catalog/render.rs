//! Pure rendering of catalog pages: directory `_index.md` pages (paged by byte budget) and the
//! root `index.md`. Deterministic: same inputs, same bytes (no wall-clock timestamps).

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::inventory::NoteRecord;
use crate::note::yaml_edit::quoted;
use crate::store::layout;

/// The renderer version written into every page; bump when the layout changes.
pub(crate) const RENDERER_VERSION: u32 = 1;
/// Ownership marker value.
pub(crate) const MARKER: &str = "paravault";

/// A child directory row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChildDir {
    pub name: String,
    pub notes: usize,
}

/// Everything one directory's catalog shows.
pub struct DirInput<'a> {
    pub dir: &'a str,
    pub children: Vec<ChildDir>,
    /// Notes directly in the directory, sorted by (case-folded title, path).
    pub notes: Vec<&'a NoteRecord>,
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
const ROW_MEMO_MAX: usize = 100_000;

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

fn dir_entry(child: &ChildDir) -> String {
    format!("- [{}/](<./{}/{}>) — {} notes\n", escape_inline(&child.name), escape_destination(&child.name), layout::SUB_INDEX, child.notes)
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

/// Renders a directory's catalog pages, each at most `page_bytes_max` bytes.
pub fn render_dir(input: &DirInput<'_>, page_bytes_max: usize, description_chars: usize, rows: &RowMemo) -> Result<Vec<String>> {
    let mut entries: Vec<(std::sync::Arc<str>, &str)> = Vec::new();
    for child in &input.children {
        entries.push((dir_entry(child).into(), input.dir));
    }
    for record in &input.notes {
        entries.push((rows.note_entry(record, description_chars), record.path.as_str()));
    }
    // Reserve room for the largest possible header (6-digit page numbers).
    let reserve = page_header(input.dir, 999_999, 999_999).len() + "\n## Notes\n\n## Folders\n\n".len();
    let budget = page_bytes_max.saturating_sub(reserve);
    let mut pages: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = 0;
    for (i, (text, owner)) in entries.iter().enumerate() {
        if text.len() > budget {
            return Err(Error::CatalogEntryTooLarge { path: owner.to_string(), limit: page_bytes_max });
        }
        if used + text.len() > budget && !pages.last().is_some_and(Vec::is_empty) {
            pages.push(Vec::new());
            used = 0;
        }
        used += text.len();
        if let Some(page) = pages.last_mut() {
            page.push(i);
        }
    }
    let total = pages.len();
    let children = input.children.len();
    let mut out = Vec::with_capacity(total);
    for (n, indices) in pages.iter().enumerate() {
        let mut page = page_header(input.dir, n + 1, total);
        let mut section: Option<bool> = None;
        for &i in indices {
            let is_dir = i < children;
            if section != Some(is_dir) {
                if section.is_some() {
                    page.push('\n');
                }
                page.push_str(if is_dir { "## Folders\n\n" } else { "## Notes\n\n" });
                section = Some(is_dir);
            }
            page.push_str(&entries[i].0);
        }
        if indices.is_empty() {
            page.push_str("_This folder has no catalogued notes._\n");
        }
        debug_assert!(page.len() <= page_bytes_max, "BUG: page over budget");
        out.push(page);
    }
    Ok(out)
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
