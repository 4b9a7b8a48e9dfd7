//! The application API: one `Vault` per root, the only entry point adapters (CLI, MCP) use.
//!
//! `Vault` owns the policy, the in-memory inventory (loaded lazily, then kept current) and the
//! catalog renderer state. Every write it makes goes through `store::durable`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use chrono::NaiveDate;
use serde::Serialize;

use crate::catalog::{self, CatalogState};
use crate::error::{Error, Result};
use crate::inventory::{self, FileStamp, Inventory};
use crate::lint::{self, Finding, LintReport};
use crate::note::frontmatter;
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::PageKind;
use crate::store::{durable, layout};
use crate::write::writer::{Writer, WriterGuard};

/// Where the vault root came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootSource {
    Flag,
    ParavaultEnv,
    PowerEnv,
    Default,
}

/// Resolves the vault root: `--vault`, else `PARAVAULT_VAULT_DIR`, else `POWER_VAULT_DIR`, else
/// the default location (`$XDG_DATA_HOME/paravault/vault`, else `~/.local/share/paravault/vault`).
pub fn resolve_root(flag: Option<&Path>) -> Result<(PathBuf, RootSource)> {
    if let Some(path) = flag {
        return Ok((path.to_path_buf(), RootSource::Flag));
    }
    for (var, source) in [("PARAVAULT_VAULT_DIR", RootSource::ParavaultEnv), ("POWER_VAULT_DIR", RootSource::PowerEnv)] {
        if let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Ok((PathBuf::from(value), source));
        }
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .ok_or_else(|| Error::VaultUnusable("no --vault, PARAVAULT_VAULT_DIR, POWER_VAULT_DIR, XDG_DATA_HOME or HOME".into()))?;
    Ok((data.join("paravault").join("vault"), RootSource::Default))
}

/// Now, as RFC 3339 with microseconds (UTC).
fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Options for opening a vault.
#[derive(Debug, Clone, Default)]
pub struct VaultOptions {
    /// "Today" for freshness checks; defaults to the current UTC date.
    pub today: Option<NaiveDate>,
    /// The instant the engine stamps the notes it renders with (`ingest_note`,
    /// `synthesize_session`'s `timestamp`); defaults to the current UTC time. Tests and
    /// reproducible runs set it (the CLI reads `PARAVAULT_NOW`).
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

/// An open vault.
pub struct Vault {
    root: PathBuf,
    policy: LoadedPolicy,
    options: VaultOptions,
    inventory: Mutex<Option<Inventory>>,
    catalog_state: Mutex<Option<CatalogState>>,
    /// Rendered catalog rows, reused while their notes do not change.
    catalog_rows: catalog::render::RowMemo,
    /// The single writer (lock, journal, receipts, deferred intents): the write path's state.
    writer: Writer,
    /// Keeps the inventory equal to the disk in a long-lived process (`watch_disk`).
    watch: std::sync::OnceLock<crate::watch::DiskWatch>,
    freshness: Mutex<Freshness>,
    saved_inventory: Mutex<Option<SavedInventory>>,
    /// Whom writes through this handle are made for; provenance comes from it (never content).
    channel: Channel,
    /// The process ends right after this handle is dropped (`ending_the_process`).
    ends_the_process: bool,
}

/// Who is writing: set by the adapter (the CLI is a person at a terminal, MCP is an agent),
/// never taken from a request or a note's text. The engine derives provenance from it: the
/// receipt's `operation` and `actor`, and the `memory.write_policy` of notes it renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// An agent (MCP, or a library caller that did not say otherwise).
    #[default]
    Agent,
    /// A person at the CLI.
    Person,
}

impl Channel {
    /// The receipt's `actor`.
    pub fn actor(self) -> &'static str {
        match self {
            Channel::Agent => "agent",
            Channel::Person => "human",
        }
    }
}

/// How this process keeps its model of the vault equal to the disk, and what it last did.
#[derive(Debug, Clone, Serialize)]
pub struct Freshness {
    /// `loaded`: read from disk on first use (a short-lived process); `watch`: a file watcher
    /// plus a barrier before every operation; `stat_walk`: a stat walk before every operation
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

/// The persisted inventory as this process last read or wrote it.
#[derive(Debug, Default)]
struct SavedInventory {
    /// `Inventory::revision` it matches.
    revision: u64,
    /// blake3 of its bytes (rewritten only when they change).
    digest: [u8; 32],
}

/// The persisted inventory is rewritten at load once at least this many of its records (or 1 %
/// of them, whichever is more) were stale.
const PERSIST_AFTER_STALE_RECORDS: usize = 32;

/// How far a caller of the inventory needs it checked against the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// A write transaction: folder listings proven; it re-checks the files it consults.
    Write,
    /// A whole-vault reader (lint, doctor, search, heal preview…): every file checked.
    WholeVault,
}

/// What re-reading one changed path did.
enum Refreshed {
    /// Its stat identity had not moved: nothing was read.
    Unchanged,
    /// It was read again (or forgotten); `catalog_changed`: a catalog page's bytes changed.
    Reread { catalog_changed: bool },
}

/// A temporary file younger than this may belong to a write in flight in another process
/// (proposals and task snapshots are written outside the writer lock); older ones are
/// leftovers of killed writes.
pub const TEMP_LEFTOVER_AGE: std::time::Duration = std::time::Duration::from_secs(5);

impl Drop for Vault {
    fn drop(&mut self) {
        if self.has_deferred_writes()
            && let Err(error) = self.checkpoint_pending()
        {
            tracing::warn!(error = %error, "could not checkpoint deferred writes; the next open finishes them from the journal");
        }
        // Records this process re-read from disk after its first load (a watcher's refreshes)
        // are worth keeping. Records of its own writes are not: they were built from the bytes
        // written, carry no stamp, and the next process reads those few files anyway.
        if self.freshness().paths_refreshed > 0
            && let Some(inventory) = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()
        {
            self.persist_inventory(inventory);
        }
        if self.ends_the_process
            && let Some(inventory) = self.inventory.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).take()
        {
            std::mem::forget(inventory);
        }
    }
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
    pub created_dirs: Vec<String>,
    pub created_notes: Vec<String>,
    pub kept_existing: Vec<String>,
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

impl Vault {
    /// Opens an existing vault directory and loads its policy (an invalid policy is refused).
    pub fn open(root: &Path, options: VaultOptions) -> Result<Self> {
        if !root.is_dir() {
            return Err(Error::VaultUnusable(root.display().to_string()));
        }
        crate::store::nofollow::refuse_symlinked_state(root)?;
        let policy = LoadedPolicy::load(root)?;
        let vault = Vault {
            root: root.to_path_buf(),
            policy,
            options,
            inventory: Mutex::new(None),
            catalog_state: Mutex::new(None),
            catalog_rows: Default::default(),
            writer: Writer::default(),
            watch: std::sync::OnceLock::new(),
            freshness: Mutex::new(Freshness {
                mode: "loaded",
                observed_at: None,
                paths_refreshed: 0,
                stat_walks: 0,
                last_stat_walk_reason: None,
                leftover_temps_removed: 0,
                inventory_cache: String::new(),
                load: inventory::LoadCounts::default(),
            }),
            saved_inventory: Mutex::new(None),
            channel: Channel::Agent,
            ends_the_process: false,
        };
        if layout::join(root, layout::JOURNAL).exists() {
            // Crash recovery at open, under the writer lock, before any other write. A
            // retryable failure (a full disk) does not stop reads: the pending intent stays in
            // the journal and the next write (or open) finishes it.
            match vault.lock_writer() {
                Ok(writer) => drop(writer),
                Err(error) if error.retryable() => {
                    tracing::warn!(error = %error, "recovery at open failed; reads go on, the next write retries it");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(vault)
    }

    /// Creates the P.A.R.A. layout and the starter notes where missing, then opens the vault.
    /// Never overwrites an existing file.
    pub fn init(root: &Path, options: VaultOptions) -> Result<(Self, InitReport)> {
        durable::create_dir_all(root, root)?;
        let policy = LoadedPolicy::load(root)?;
        let mut report = InitReport { created_dirs: Vec::new(), created_notes: Vec::new(), kept_existing: Vec::new() };
        let skipped = &policy.policy.layout.not_created_at_init;
        let folders: Vec<String> = policy.scope_folders().filter(|f| !skipped.contains(f)).cloned().collect();
        for folder in folders.iter().map(String::as_str).chain([layout::STATE_DIR]) {
            let dir = layout::join(root, folder);
            if !dir.is_dir() {
                durable::create_dir_all(root, &dir)?;
                report.created_dirs.push(folder.to_string());
            }
        }
        let fresh = report.created_dirs.len() > 1;
        for (rel, text) in crate::starter::STARTER_NOTES {
            let path = layout::join(root, rel);
            if path.exists() || !fresh {
                report.kept_existing.push((*rel).to_string());
                continue;
            }
            durable::replace(root, &path, text.as_bytes())?;
            report.created_notes.push((*rel).to_string());
        }
        let vault = Vault::open(root, options)?;
        vault.generate_index()?;
        Ok((vault, report))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This handle, writing for `channel` (adapters call it once, right after opening).
    pub fn acting_for(mut self, channel: Channel) -> Self {
        self.channel = channel;
        self
    }

    /// Marks this handle as the last thing its process holds (one CLI command): dropping it
    /// still checkpoints and persists what it must, but leaves the in-memory vault model's
    /// memory to the process's exit instead of freeing it map by map. Freeing a 20,000-note
    /// model was 24% of a one-note CLI write's profile.
    pub fn ending_the_process(mut self) -> Self {
        self.ends_the_process = true;
        self
    }

    /// Whom writes through this handle are made for.
    pub fn channel(&self) -> Channel {
        self.channel
    }

    pub fn policy(&self) -> &LoadedPolicy {
        &self.policy
    }

    /// Today's date in UTC (or the configured override).
    pub fn today(&self) -> NaiveDate {
        self.options.today.unwrap_or_else(|| chrono::Utc::now().date_naive())
    }

    /// The instant the engine stamps a note it renders with: now in UTC (or the configured one).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.options.now.unwrap_or_else(chrono::Utc::now)
    }

    /// The inventory for a whole-vault reader: every record checked against the disk.
    fn lock_inventory(&self) -> Result<MutexGuard<'_, Option<Inventory>>> {
        self.lock_inventory_for(Scope::WholeVault)
    }

    /// The inventory, loaded on first use and brought up to the disk as far as `scope` needs:
    /// a write transaction takes a model whose folder listings are proven (it re-checks the
    /// files it consults itself); a whole-vault reader gets every record's stat identity
    /// compared (a walk, once, if the model was loaded by folder checks).
    fn lock_inventory_for(&self, scope: Scope) -> Result<MutexGuard<'_, Option<Inventory>>> {
        let mut guard = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            let started = std::time::Instant::now();
            let (known, cache_state) = self.read_persisted_inventory();
            let decoded = started.elapsed();
            let (inventory, leftovers, load) = match (scope, known) {
                (Scope::Write, Some(known)) => match Inventory::load_checking_folders(&self.root, &self.policy, known)? {
                    Ok(loaded) => loaded,
                    Err(records) => Inventory::load_reusing(&self.root, &self.policy, records)?,
                },
                (_, known) => Inventory::load_reusing(&self.root, &self.policy, known.map(|k| k.records).unwrap_or_default())?,
            };
            let loaded = started.elapsed();
            // Rewriting the whole file costs O(vault); a few stale records (the notes and catalog
            // pages of recent writes) cost the next process a few reads. Rewrite once they add up.
            let stale = load.read + load.forgotten + load.folders_relisted;
            if cache_state == "reused" && stale < PERSIST_AFTER_STALE_RECORDS.max(load.reused / 100) {
                if let Some(saved) = self.saved_inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
                    saved.revision = inventory.revision;
                }
            } else {
                self.persist_inventory(&inventory);
            }
            tracing::debug!(?decoded, ?loaded, persisted = ?started.elapsed(), ?load, "inventory loaded");
            *guard = Some(inventory);
            let removed = self.remove_leftover_temps(&leftovers)?;
            let mut freshness = self.lock_freshness();
            freshness.observed_at = Some(now_rfc3339());
            freshness.leftover_temps_removed += removed;
            freshness.inventory_cache = cache_state;
            freshness.load = load;
        }
        if scope == Scope::WholeVault
            && let Some(inventory) = guard.as_mut().filter(|inventory| !inventory.files_checked)
        {
            let started = std::time::Instant::now();
            let reread = self.rescan(inventory)?;
            tracing::debug!(reread, walk = ?started.elapsed(), "whole-vault reader: every file checked");
            let mut freshness = self.lock_freshness();
            freshness.paths_refreshed += reread as u64;
            freshness.stat_walks += 1;
            freshness.last_stat_walk_reason = Some("a whole-vault read after a load by folder checks".into());
            freshness.observed_at = Some(now_rfc3339());
        }
        Ok(guard)
    }

    /// The persisted inventory's records, and what became of it (`reused`, `absent`, or why it
    /// cannot be trusted: it is then rebuilt, never used).
    fn read_persisted_inventory(&self) -> (Option<inventory::KnownVault>, String) {
        let path = layout::join(&self.root, layout::INVENTORY_CACHE);
        let bytes = match crate::store::durable::read_engine_file(&self.root, &path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (None, "absent".into()),
            Err(e) => return (None, format!("rebuilt: unreadable ({})", e.kind())),
        };
        match crate::inventory_cache::decode(&bytes, &self.policy.digest) {
            Ok(known) => {
                *self.saved_inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(SavedInventory { revision: u64::MAX, digest: *blake3::hash(&bytes).as_bytes() });
                (Some(known), "reused".into())
            }
            Err(reason) => {
                tracing::warn!(%reason, "ignoring the persisted inventory; rebuilding it");
                (None, format!("rebuilt: {reason}"))
            }
        }
    }

    /// Writes the persisted inventory when the model changed since it was read or written and
    /// its bytes differ (atomically; a failure only costs the next process a fuller read).
    fn persist_inventory(&self, inventory: &Inventory) {
        let mut saved = self.saved_inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if saved.as_ref().is_some_and(|s| s.revision == inventory.revision) {
            return;
        }
        let bytes = crate::inventory_cache::encode(inventory, &self.policy.digest);
        let digest = *blake3::hash(&bytes).as_bytes();
        if saved.as_ref().is_some_and(|s| s.digest == digest) {
            *saved = Some(SavedInventory { revision: inventory.revision, digest });
            return;
        }
        match durable::write_cache(&self.root, &layout::join(&self.root, layout::INVENTORY_CACHE), &bytes) {
            Ok(()) => *saved = Some(SavedInventory { revision: inventory.revision, digest }),
            Err(error) => tracing::debug!(error = %error, "could not write the persisted inventory"),
        }
    }

    fn lock_freshness(&self) -> MutexGuard<'_, Freshness> {
        self.freshness.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What this process did to keep its model equal to the disk.
    pub fn freshness(&self) -> Freshness {
        self.lock_freshness().clone()
    }

    /// Removes temporary files of killed writes under the writer lock (skipped, to be done by
    /// a later open, while another process holds it). Only files older than
    /// `TEMP_LEFTOVER_AGE` are leftovers.
    fn remove_leftover_temps(&self, found: &[PathBuf]) -> Result<usize> {
        let cutoff = std::time::SystemTime::now().checked_sub(TEMP_LEFTOVER_AGE);
        let old: Vec<PathBuf> = found
            .iter()
            .filter(|p| {
                let modified = std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
                matches!((modified, cutoff), (Some(m), Some(c)) if m <= c)
            })
            .cloned()
            .collect();
        if old.is_empty() {
            return Ok(0);
        }
        let Some(_writer) = self.writer.try_lock_file(self)? else { return Ok(0) };
        let removed = durable::remove_leftover_temps(&self.root, &old)?;
        if removed > 0 {
            tracing::info!(removed, "removed temporary files left by killed writes");
        }
        Ok(removed)
    }

    /// Starts keeping the inventory equal to the disk with a file watcher (long-lived
    /// processes; `observe_disk` then settles it before every operation). Where the platform
    /// refuses a watch, every `observe_disk` does a stat walk instead.
    pub fn watch_disk(&self) {
        let mode = match crate::watch::DiskWatch::start(&self.root) {
            Ok(watch) => {
                let _ = self.watch.set(watch);
                "watch"
            }
            Err(error) => {
                tracing::warn!(error = %error, "no file watcher: every operation starts with a stat walk of the vault");
                "stat_walk"
            }
        };
        self.lock_freshness().mode = mode;
    }

    /// The running file watcher, if `watch_disk` started one.
    pub fn disk_watch(&self) -> Option<&crate::watch::DiskWatch> {
        self.watch.get()
    }

    /// Brings the inventory up to every change on disk finished before this call (long-lived
    /// processes call it before each operation; a short-lived process read the disk at first
    /// use). Re-reads only changed files; a watcher that cannot name the changes costs a stat
    /// walk, never a stale answer.
    pub fn observe_disk(&self) -> Result<()> {
        let mode = self.lock_freshness().mode;
        let changes = match (mode, self.watch.get()) {
            ("watch", Some(watch)) => watch.settle(),
            ("stat_walk", _) => crate::watch::DiskChanges { rescan: Some("no file watcher".into()), ..Default::default() },
            _ => return Ok(()),
        };
        let mut guard = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(inventory) = guard.as_mut() else { return Ok(()) };
        let mut rescan = changes.rescan;
        let mut refreshed = 0u64;
        let mut catalogs_changed = false;
        if rescan.is_none() {
            for rel in &changes.paths {
                match self.refresh_changed(inventory, rel) {
                    Some(Refreshed::Reread { catalog_changed }) => {
                        refreshed += 1;
                        catalogs_changed |= catalog_changed;
                    }
                    Some(Refreshed::Unchanged) => {}
                    None => {
                        rescan = Some(format!("{rel} held a folder of the vault"));
                        break;
                    }
                }
            }
        }
        if let Some(reason) = &rescan {
            tracing::debug!(%reason, "walking the vault to find what changed on disk");
            refreshed += self.rescan(inventory)? as u64;
        }
        drop(guard);
        // A note changed outside the engine needs nothing here: the next write's catalog plan
        // compares its directory's digest with the model. A catalog page someone else changed
        // (another process, a person) makes the remembered renderer state suspect.
        if catalogs_changed || rescan.is_some() {
            self.invalidate_catalog_state();
        }
        let mut freshness = self.lock_freshness();
        freshness.observed_at = Some(now_rfc3339());
        freshness.paths_refreshed += refreshed;
        if let Some(reason) = rescan {
            freshness.stat_walks += 1;
            freshness.last_stat_walk_reason = Some(reason);
        }
        Ok(())
    }

    /// Re-reads one changed path into the inventory when its stat identity moved. Returns
    /// whether it re-read it, or `None` when the path was a folder holding known files (a
    /// moved or removed folder: the caller walks the vault).
    fn refresh_changed(&self, inventory: &mut Inventory, rel: &str) -> Option<Refreshed> {
        let Ok(path) = VaultPath::parse_walked(rel) else { return Some(Refreshed::Unchanged) };
        let absolute = path.under(&self.root);
        let meta = std::fs::symlink_metadata(&absolute).ok();
        if meta.as_ref().is_some_and(std::fs::Metadata::is_dir) || (meta.is_none() && inventory.has_under(rel)) {
            return None;
        }
        let walked = meta.as_ref().is_some_and(|m| m.file_type().is_file()) && crate::scan::walked(&self.root, &self.policy, &path);
        let kind = crate::scan::classify(&self.policy, &path).filter(|_| walked);
        let symlink = meta.as_ref().is_some_and(|m| m.file_type().is_symlink());
        inventory.set_symlinked(&path, symlink && crate::scan::classify(&self.policy, &path).is_some());
        match kind {
            Some(kind) => {
                if inventory.records.get(&path).is_some_and(|r| r.is_current(kind, meta.as_ref().map(FileStamp::of))) {
                    return Some(Refreshed::Unchanged);
                }
                let record = inventory::read_record(&self.root, &path, kind, &self.policy);
                let hash = record.content_hash;
                let previous = inventory.upsert(record);
                let catalog_page = matches!(kind, PageKind::Catalog | PageKind::RootIndex);
                return Some(Refreshed::Reread { catalog_changed: catalog_page && previous.is_none_or(|p| p.content_hash != hash) });
            }
            None if walked => {
                inventory.remove(&path);
                inventory.add_attachment(path);
            }
            None => {
                let previous = inventory.remove(&path);
                let catalog_page = previous.as_ref().is_some_and(|p| matches!(p.kind, PageKind::Catalog | PageKind::RootIndex));
                return Some(Refreshed::Reread { catalog_changed: catalog_page });
            }
        }
        Some(Refreshed::Reread { catalog_changed: false })
    }

    /// A full stat walk: re-reads every page whose stat identity moved (or is racy), adds and
    /// forgets files, and refreshes the symlink list. Returns how many pages it re-read.
    fn rescan(&self, inventory: &mut Inventory) -> Result<usize> {
        let walk_started = inventory::now_ns();
        let scan = crate::scan::scan(&self.root, &self.policy)?;
        let pages: std::collections::BTreeMap<&VaultPath, PageKind> = scan.pages.iter().map(|(p, k)| (p, *k)).collect();
        let files: BTreeSet<&VaultPath> = scan.files.iter().collect();
        let gone: Vec<VaultPath> = inventory
            .files
            .iter()
            .filter(|p| !files.contains(p))
            .chain(inventory.records.keys().filter(|p| !pages.contains_key(p)))
            .cloned()
            .collect();
        for path in &gone {
            inventory.remove(path);
        }
        let mut changed = Vec::new();
        for (path, kind) in &scan.pages {
            if !inventory.records.get(path).is_some_and(|r| r.is_current(*kind, inventory::stamp_now(&self.root, path))) {
                changed.push((path.clone(), *kind));
            }
        }
        for path in &scan.files {
            if !pages.contains_key(path) && !inventory.files.contains(path) {
                inventory.add_attachment(path.clone());
            }
        }
        let reread = changed.len();
        for record in inventory::read_all(&self.root, &self.policy, &changed) {
            inventory.upsert(record);
        }
        inventory.symlinked_notes = scan.symlinked_notes;
        inventory.set_listed_dirs(&self.root, &scan.dirs, walk_started);
        inventory.files_checked = true;
        inventory.ignore_files = scan.ignore_files;
        Ok(reread)
    }

    /// Takes the writer lock (in-process mutex, then the cross-process file lock), finishes any
    /// committed-but-pending transaction, and catches up with receipts other processes wrote.
    pub fn lock_writer(&self) -> Result<WriterGuard<'_>> {
        self.writer.lock(self)
    }

    /// Whether this process holds writes whose checkpoint is deferred.
    pub fn has_deferred_writes(&self) -> bool {
        self.writer.has_deferred_writes()
    }

    /// Whether a write this process committed waits to be finished (putting it in place failed
    /// past the commit point, e.g. on a full disk). `checkpoint_pending` finishes it.
    pub fn has_unfinished_writes(&self) -> bool {
        self.writer.has_unfinished_writes()
    }

    /// Makes this process's deferred writes durable (fsyncs their files in parallel and marks
    /// their intents done), first finishing any committed write that waits (taking the writer
    /// lock runs recovery). Long-running adapters call it when idle, so a write that met a full
    /// disk completes once space returns without another write; dropping the vault calls it.
    pub fn checkpoint_pending(&self) -> Result<()> {
        self.lock_writer()?.checkpoint_deferred(self)
    }

    /// Re-reads the catalog pages of `path`'s directories (another process rewrote them).
    pub(crate) fn refresh_catalog_pages(&self, path: &VaultPath) -> Result<()> {
        for dir in catalog::affected_dirs(path) {
            for n in 1.. {
                let Ok(page) = VaultPath::parse_walked(&format!("{dir}/{}", layout::sub_index_page_name(n))) else { break };
                let exists = page.under(&self.root).is_file();
                self.refresh_path(&page)?;
                if !exists {
                    break;
                }
            }
        }
        if let Ok(index) = VaultPath::parse_walked(layout::ROOT_INDEX) {
            self.refresh_path(&index)?;
        }
        Ok(())
    }

    /// Runs `f` with mutable access to the inventory (writer-side model updates).
    /// Its folder listings are proven; the caller re-checks the files it consults
    /// (`Inventory::recheck`).
    pub(crate) fn with_inventory_mut<T>(&self, f: impl FnOnce(&mut Inventory) -> T) -> Result<T> {
        let mut guard = self.lock_inventory_for(Scope::Write)?;
        Ok(f(guard.as_mut().expect("BUG: lock_inventory loads the inventory")))
    }

    /// Plans catalog updates for `dirs` against the remembered renderer state.
    pub(crate) fn plan_catalogs(&self, inventory: &Inventory, dirs: &BTreeSet<String>) -> Result<catalog::CatalogPlan> {
        let mut state = self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.is_none() {
            *state = Some(self.load_catalog_state());
        }
        let previous = state.as_ref().expect("BUG: filled above");
        catalog::plan(inventory, &self.policy, previous, Some(dirs), &|p| self.read_page(p), &self.catalog_rows)
    }

    /// Takes in the renderer state of a partial plan of `planned` directories (a write's).
    pub(crate) fn merge_catalog_state(&self, partial: CatalogState, planned: &BTreeSet<String>) {
        if let Some(state) = self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
            state.merge(partial, planned);
        }
    }

    /// Forgets the remembered catalog state; the next plan reloads it and re-verifies pages.
    pub(crate) fn invalidate_catalog_state(&self) {
        *self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Runs `f` over the current inventory (loading it on first use).
    pub fn with_inventory<T>(&self, f: impl FnOnce(&Inventory) -> T) -> Result<T> {
        let guard = self.lock_inventory()?;
        Ok(f(guard.as_ref().expect("BUG: lock_inventory loads the inventory")))
    }

    /// Forgets the in-memory inventory so the next call re-reads the vault (for edits made
    /// outside the engine).
    pub fn reload(&self) {
        *self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Re-reads one file into the inventory (after a change made by the engine or outside it)
    /// and returns the catalog directories the change affects.
    pub fn refresh_path(&self, path: &VaultPath) -> Result<BTreeSet<String>> {
        let mut guard = self.lock_inventory_for(Scope::Write)?;
        let inventory = guard.as_mut().expect("BUG: lock_inventory loads the inventory");
        match crate::scan::classify(&self.policy, path) {
            Some(kind) if path.under(&self.root).is_file() => {
                inventory.upsert(inventory::read_record(&self.root, path, kind, &self.policy));
            }
            _ => {
                inventory.remove(path);
            }
        }
        Ok(catalog::affected_dirs(path))
    }

    /// The vault-wide health report.
    pub fn lint(&self) -> Result<LintReport> {
        let today = self.today();
        let mut report = self.with_inventory(|inv| lint::health_report(inv, &self.policy, today))?;
        report.computed_from = Some(self.computed_from()?);
        Ok(report)
    }

    /// What a report computed now is computed from: the active generation and the model state.
    pub fn computed_from(&self) -> Result<inventory::ComputedFrom> {
        let generation = crate::search::generation::read_active(&self.root).ok().flatten();
        let (source_snapshot_hash, notes) = self.with_inventory(|inv| (inv.snapshot.hash(), inv.counts.notes))?;
        let freshness = self.freshness();
        Ok(inventory::ComputedFrom {
            generation,
            source_snapshot_hash,
            notes,
            observed_at: freshness.observed_at,
            disk_watch: freshness.mode,
        })
    }

    fn load_catalog_state(&self) -> CatalogState {
        let path = layout::join(&self.root, layout::CATALOG_STATE);
        crate::store::durable::read_engine_file(&self.root, &path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    fn read_page(&self, path: &VaultPath) -> Option<Vec<u8>> {
        let absolute = path.under(&self.root);
        match std::fs::symlink_metadata(&absolute) {
            Ok(m) if m.file_type().is_symlink() => Some(b"symlink: never ours".to_vec()),
            Ok(_) => crate::store::beneath::read(&self.root, path.as_str()).ok().flatten(),
            Err(_) => None,
        }
    }

    /// Regenerates `index.md` and every directory catalog that changed.
    pub fn generate_index(&self) -> Result<IndexReport> {
        self.regenerate_catalogs(None)
    }

    /// Regenerates the catalogs of `dirs` only (plus the root index).
    pub fn regenerate_catalogs(&self, only_dirs: Option<&BTreeSet<String>>) -> Result<IndexReport> {
        let _writer = self.lock_writer()?;
        let mut guard = self.lock_inventory()?;
        let inventory = guard.as_mut().expect("BUG: lock_inventory loads the inventory");
        let mut state_guard = self.catalog_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let previous = state_guard.take().unwrap_or_else(|| self.load_catalog_state());
        let mut plan = catalog::plan(inventory, &self.policy, &previous, only_dirs, &|p| self.read_page(p), &self.catalog_rows)?;
        if let Some(dirs) = only_dirs {
            let mut whole = previous.clone();
            whole.merge(std::mem::take(&mut plan.state), dirs);
            plan.state = whole;
        }
        let mut dirs_touched = BTreeSet::new();
        for (path, bytes) in &plan.writes {
            crate::store::beneath::replace_deferred_dir_sync(&self.root, path.as_str(), bytes)?;
            dirs_touched.insert(path.parent().to_string());
            let kind = if path.as_str() == layout::ROOT_INDEX { PageKind::RootIndex } else { PageKind::Catalog };
            let mut record = inventory::read_record(&self.root, path, kind, &self.policy);
            record.generated = true;
            inventory.upsert(record);
        }
        for dir in &dirs_touched {
            durable::fsync_dir(&layout::join(&self.root, dir)).map_err(|e| Error::io("syncing", dir.clone(), e))?;
        }
        for path in &plan.deletes {
            crate::store::beneath::remove_unsynced(&self.root, path.as_str())?;
            durable::fsync_dir(&layout::join(&self.root, path.parent())).map_err(|e| Error::io("syncing", path.parent().to_string(), e))?;
            inventory.remove(path);
        }
        if plan.state != previous || !layout::join(&self.root, layout::CATALOG_STATE).exists() {
            durable::create_dir_all(&self.root, &layout::join(&self.root, layout::STATE_DIR))?;
            let json =
                serde_json::to_vec(&plan.state).map_err(|e| Error::io("encoding", layout::CATALOG_STATE, std::io::Error::other(e)))?;
            durable::replace(&self.root, &layout::join(&self.root, layout::CATALOG_STATE), &json)?;
        }
        *state_guard = Some(plan.state);
        Ok(IndexReport {
            dirs_total: plan.dirs_total,
            dirs_rendered: plan.rendered_dirs,
            pages_written: plan.writes.iter().map(|(p, _)| p.to_string()).collect(),
            pages_deleted: plan.deletes.iter().map(ToString::to_string).collect(),
            conflicts: plan.conflicts.iter().map(ToString::to_string).collect(),
        })
    }

    fn category(&self, category: &str) -> Result<()> {
        if self.policy.policy.layout.catalog_categories.iter().any(|c| c == category) {
            Ok(())
        } else {
            Err(Error::InvalidArgument {
                name: "category",
                reason: format!("'{category}' is not one of: {}", self.policy.policy.layout.catalog_categories.join(", ")),
            })
        }
    }

    /// Reads page `page` (1-based) of a category's catalog; fails closed on a missing landing
    /// page, an undeclared page or a declared page that is missing.
    pub fn read_sub_index(&self, category: &str, page: usize) -> Result<String> {
        self.category(category)?;
        if page == 0 {
            return Err(Error::InvalidArgument { name: "page", reason: "pages are numbered from 1".into() });
        }
        let missing = |reason: String| Error::CatalogMissing { category: category.to_string(), reason };
        let landing = layout::join(&self.root, &format!("{category}/{}", layout::SUB_INDEX));
        let read_page = |rel: &str| crate::store::beneath::read(&self.root, rel).ok().flatten();
        let landing = landing.strip_prefix(&self.root).unwrap_or(&landing).to_string_lossy().into_owned();
        let bytes = read_page(&landing).ok_or_else(|| missing("no _index.md found; use ensure_sub_index to generate it".into()))?;
        let pages = catalog::declared_pages(&bytes).map_err(missing)?;
        if page > pages {
            return Err(missing(format!("page {page} is not declared (the catalog has {pages} pages)")));
        }
        let path = format!("{category}/{}", layout::sub_index_page_name(page));
        let bytes =
            if page == 1 { bytes } else { read_page(&path).ok_or_else(|| missing(format!("page {page} is declared but missing")))? };
        String::from_utf8(bytes).map_err(|_| missing(format!("page {page} is not UTF-8")))
    }

    /// Renders a category's catalog if needed, then returns the requested page.
    pub fn ensure_sub_index(&self, category: &str, page: usize) -> Result<String> {
        self.category(category)?;
        let dirs: BTreeSet<String> = self.with_inventory(|inv| {
            catalog::tree(inv, &self.policy)
                .dirs()
                .into_iter()
                .filter(|d| d == category || d.starts_with(&format!("{category}/")))
                .collect()
        })?;
        if dirs.is_empty() {
            return Err(Error::CatalogMissing { category: category.to_string(), reason: "the folder has no catalogued notes".into() });
        }
        self.regenerate_catalogs(Some(&dirs))?;
        self.read_sub_index(category, page)
    }

    /// Markdown style checks over every in-scope note (never blocking by default).
    pub fn check_markdown(&self) -> Result<MarkdownReport> {
        let paths: Vec<VaultPath> = self.with_inventory(|inv| inv.notes().map(|r| r.path.clone()).collect())?;
        let (bytes_max, findings_max) = (self.policy.policy.limits.note_bytes_max, self.policy.policy.limits.report_findings_max);
        let (mut findings, mut counts, mut total) = (Vec::new(), std::collections::BTreeMap::new(), 0usize);
        let mut skipped_too_large = Vec::new();
        // Each note opened through folder handles, each folder once for its run of notes (never
        // by path, so a folder swapped for a link is never read through); its size is the open
        // file's, checked before a byte is read.
        let mut cursor = crate::store::beneath::FolderCursor::new(&self.root);
        for path in &paths {
            let Ok(mut file) = cursor.open_read(path.as_str()) else { continue };
            match file.metadata() {
                Ok(meta) if meta.is_file() && meta.len() <= bytes_max => {}
                Ok(meta) if meta.is_file() => {
                    skipped_too_large.push(path.to_string());
                    continue;
                }
                _ => continue,
            }
            // Never more than the limit, even when the note grows after its size was taken.
            let mut bytes = Vec::new();
            if std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, bytes_max.saturating_add(1)), &mut bytes).is_err() {
                continue;
            }
            if bytes.len() as u64 > bytes_max {
                skipped_too_large.push(path.to_string());
                continue;
            }
            let Ok(text) = String::from_utf8(bytes) else { continue };
            let (body, first_line) = match frontmatter::split(&text) {
                Ok(split) => (split.body, split.body_first_line),
                Err(_) => (text.as_str(), 1),
            };
            for finding in lint::style_report(&self.policy, path, body, first_line) {
                *counts.entry(finding.rule).or_default() += 1;
                total += 1;
                if findings.len() < findings_max {
                    findings.push(finding);
                }
            }
        }
        Ok(MarkdownReport {
            files_checked: paths.len() - skipped_too_large.len(),
            counts,
            findings_truncated: total > findings.len(),
            findings,
            findings_total: total,
            skipped_too_large,
        })
    }

    /// Reads at most `max_bytes` of an in-scope Markdown page from byte `offset`. The slice never
    /// splits a UTF-8 character: its end moves down to a character boundary, and an `offset`
    /// inside a character is refused. `max_bytes` is bounded by `limits.read_note_bytes_max`.
    pub fn read_note(&self, raw: &str, offset: usize, max_bytes: usize) -> Result<NoteSlice> {
        let limit = self.policy.policy.limits.read_note_bytes_max;
        if max_bytes == 0 || max_bytes > limit {
            return Err(Error::InvalidArgument { name: "max_bytes", reason: format!("must be between 1 and {limit}") });
        }
        let path = VaultPath::parse(raw)?;
        if crate::scan::classify(&self.policy, &path).is_none() {
            return Err(Error::NoteUnreadable { path: path.to_string(), reason: "not an in-scope Markdown page of the vault".into() });
        }
        crate::note::path::resolve_safe(&self.root, &path)?;
        // Read through folder handles: a folder swapped for a link after the check is never followed.
        let bytes = crate::store::beneath::read(&self.root, path.as_str())?
            .ok_or_else(|| Error::NoteUnreadable { path: path.to_string(), reason: "no such note".into() })?;
        let text = std::str::from_utf8(&bytes).map_err(|_| Error::NoteUnreadable { path: path.to_string(), reason: "not UTF-8".into() })?;
        let total = text.len();
        if offset > total || !text.is_char_boundary(offset) {
            return Err(Error::InvalidArgument {
                name: "offset",
                reason: format!("must be a character boundary between 0 and {total} (use offset + bytes_returned of the previous slice)"),
            });
        }
        let mut end = offset.saturating_add(max_bytes).min(total);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == offset && offset < total {
            return Err(Error::InvalidArgument { name: "max_bytes", reason: "is smaller than the character at offset".into() });
        }
        Ok(NoteSlice {
            path: path.to_string(),
            offset,
            bytes_returned: end - offset,
            total_bytes: total,
            sha256: crate::hex::sha256_hex(&bytes),
            content: text[offset..end].to_string(),
            eof: end == total,
        })
    }
}
