//! What the vault's own operations report: `Freshness` (how the model is kept equal to the
//! disk), `IndexReport`, `InitReport`, `MarkdownReport` and `NoteSlice`. *Invariant: plain
//! serialisable data; no behaviour.*

use serde::Serialize;

use crate::inventory;
use crate::lint::Finding;

/// How this process keeps its model of the vault equal to the disk, and what it last did.
#[derive(Debug, Clone, Serialize)]
pub struct Freshness {
    /// `loaded`: read from disk on first use (a short-lived process); `watch`: a file watcher
    /// whose queue is read before every operation; `stat_walk`: a stat walk before every operation
    /// (the watcher could not start).
    pub mode: &'static str,
    /// When the model was last brought up to the disk (RFC 3339), if it was loaded.
    pub observed_at: Option<String>,
    /// Changed files re-read since the process started.
    pub paths_refreshed: u64,
    /// Full stat walks since the process started, and why the last one was needed.
    pub stat_walks: u64,
    pub last_stat_walk_reason: Option<String>,
    /// Temporary files of killed writes removed at open (older than `TEMP_LEFTOVER_AGE`).
    pub leftover_temps_removed: usize,
    /// The persisted inventory at first load: `reused` (it was read and trusted, files
    /// re-checked by a stat walk), `absent`, or why it was ignored and rebuilt.
    pub inventory_cache: String,
    /// What the first load reused from the persisted inventory and what it read.
    pub load: inventory::LoadCounts,
}

/// What `generate_index` did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IndexReport {
    pub dirs_total: usize,
    pub dirs_rendered: usize,
    pub pages_written: Vec<String>,
    pub pages_deleted: Vec<String>,
    pub conflicts: Vec<String>,
}

/// What `init` did.
#[derive(Debug, Clone, Serialize)]
pub struct InitReport {
    /// The vault's root.
    pub root: String,
    pub created_dirs: Vec<String>,
    pub created_notes: Vec<String>,
    pub kept_existing: Vec<String>,
    /// Catalog pages (`index.md`, `_index*.md`) written by the first catalog regeneration.
    pub catalog_pages_written: Vec<String>,
    /// Hand-written pages where a catalog would go, left as they are.
    pub catalog_conflicts: Vec<String>,
}

/// Markdown style report over the vault.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MarkdownReport {
    pub files_checked: usize,
    pub counts: std::collections::BTreeMap<&'static str, usize>,
    /// At most `limits.report_findings_max` findings; `counts` and `findings_total` cover all.
    pub findings: Vec<Finding>,
    pub findings_total: usize,
    pub findings_truncated: bool,
    /// Notes over `limits.note_bytes_max`: not read, not checked.
    pub skipped_too_large: Vec<String>,
}

/// One bounded slice of a note (`read_note`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NoteSlice {
    pub path: String,
    pub offset: usize,
    pub bytes_returned: usize,
    pub total_bytes: usize,
    /// sha256 of the whole file (for `expected_sha256` on a later edit).
    pub sha256: String,
    pub content: String,
    pub eof: bool,
}
