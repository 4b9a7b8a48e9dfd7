//! What an open vault holds in memory, and every operation on it that needs no writer lock:
//! `VaultState` (below the write path, which runs on it; `vault::Vault` is the façade that
//! owns one beside its `write::Writer`). Its concerns are one file each: `root` (where the
//! vault is), `reports` (what its operations report), `model` (the inventory kept equal to the
//! disk), `catalogs` (the catalog cache and regeneration), `reads` (lint, Markdown check, note
//! slices), `views` and `summaries` (what the people's surface reads: link resolution, tags,
//! the link graph, the kept health summary).
//! *Invariant: nothing here names `write`; what needs the writer lock is the façade's.*

mod catalogs;
mod model;
mod reads;
mod replica_evidence;
mod reports;
mod root;
mod summaries;
mod views;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::NaiveDate;
use serde::Serialize;

use crate::catalog::{self, CatalogState};
use crate::error::{Error, Result};
use crate::inventory;
use crate::policy::LoadedPolicy;
use crate::store::{durable, layout};

use model::SavedInventory;
pub use reports::{Freshness, IndexReport, InitReport, MarkdownReport, NoteSlice};
pub(crate) use root::{RootSource, looks_like_a_vault, resolve_root};
pub(crate) use summaries::{ActivityMemo, DayCounts, DayFields, RECEIPTS_COUNTED_MAX};
pub use summaries::{FolderHealth, HealthSummary, ReceiptActivity, ReceiptDay, TitleMatch, TitleMatches};
pub use views::{ATTACHMENT_BYTES_MAX, GraphNode, LinkGraph, LinkTarget, TagCount, tag_key};

/// Options for opening a vault.
#[derive(Debug, Clone, Default)]
pub struct VaultOptions {
    /// "Today" for freshness checks; defaults to the current UTC date.
    pub today: Option<NaiveDate>,
    /// The instant the engine stamps the notes it renders with (the `timestamp` of
    /// `ingest_note`, `synthesize_session`, memory notes, vaultspec documents, healed notes);
    /// defaults to the current UTC time. Tests and reproducible runs set it (the CLI and the MCP
    /// server read `PARAVAULT_NOW`; the ctxvault surface opens its registered vaults with it).
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// How long the process that opens the vault lives: chosen by the adapter at open.
    pub lifetime: Lifetime,
}

/// How long the process holding a vault handle lives, which decides how its model is loaded
/// and let go. The adapter says so at open (`VaultOptions::lifetime`); the engine never guesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lifetime {
    /// A process that serves many operations (the MCP and web servers, whose file watcher keeps
    /// the model current; the broker, whose operations each open a handle; a library caller):
    /// the whole model, loaded at first use, and freed with the handle.
    #[default]
    Resident,
    /// One CLI command (and `paravault watch`, whose replication rounds write as a command
    /// does, with no watcher-fed model): a write plans on a partial model looked up by key in the persisted
    /// copy (`inventory_cache::keyed`) when the whole one is not loaded yet, and dropping the
    /// handle folds that partial model into the copy and leaves its memory to the process's
    /// exit (freeing a 20,000-note model was 24% of a one-note CLI write's profile).
    OneShot,
}

/// Parses and checks a note path (`note::path::parse_note_path`: `.md`, inside a P.A.R.A.
/// folder, not a name the engine owns) and refuses a symbolic link on disk anywhere along it
/// (`store::nofollow::resolve_safe`). Returns the path and its absolute location under `root`.
pub fn resolve_note_path(root: &Path, raw: &str, layout: &crate::policy::Layout) -> Result<(crate::note::path::VaultPath, PathBuf)> {
    let path = crate::note::path::parse_note_path(raw, layout)?;
    let absolute = crate::store::nofollow::resolve_safe(root, path.as_str())?;
    Ok((path, absolute))
}

impl VaultOptions {
    /// The clock these options set: `now` and `today` where given, else the system's.
    pub fn clock(&self) -> crate::clock::Clock {
        crate::clock::Clock::fixed(self.now, self.today)
    }
}

/// What an open vault holds in memory (`vault::Vault` derefs to it).
pub struct VaultState {
    root: PathBuf,
    policy: LoadedPolicy,
    options: VaultOptions,
    inventory: Mutex<model::Held>,
    catalog_state: Mutex<Option<CatalogState>>,
    /// Rendered catalog rows, reused while their notes do not change, and the entries of the
    /// folders this process's writes planned, caught up with the whole model at each plan.
    catalog_memo: catalog::CatalogMemo,
    /// The health summary and the link index, kept between requests (`summaries`).
    summaries: summaries::Summaries,
    /// Keeps the inventory equal to the disk in a long-lived process (`watch_disk`).
    watch: std::sync::OnceLock<crate::watch::DiskWatch>,
    /// The watcher being started on a thread of its own (`watch_disk`), until the first
    /// operation that needs it takes it (`watch_started`).
    watch_starting: Mutex<Option<std::thread::JoinHandle<Result<crate::watch::DiskWatch>>>>,
    freshness: Mutex<Freshness>,
    saved_inventory: Mutex<Option<SavedInventory>>,
    /// Set when the keyed inventory could not serve a write: the next persist rewrites both
    /// copies even if the whole file's bytes did not change.
    keyed_refused: std::sync::atomic::AtomicBool,
    /// Set when this process moved the replica's branch by an engine commit that git's own
    /// index has not learnt yet (a large index: `write::replica`); a long-lived process
    /// teaches it when idle (`Vault::settle_git_index`).
    git_index_owed: std::sync::atomic::AtomicBool,
    /// Set when a folder moved while a write's checks of it were deferred: the keyed copy's
    /// folder rows are stale beyond what the journal names, so this write folds its model back.
    keyed_fold_due: std::sync::atomic::AtomicBool,
    /// Set by each write this process commits: what the next search reads (the journal's tail
    /// generation) is not built yet. A long-lived adapter builds it once the write's answer is
    /// out (`take_search_owed`, `prepare_search`), off the path of both the write and the search.
    search_owed: std::sync::atomic::AtomicBool,
    /// What this process's watcher saw change since the replica last checked for outside edits
    /// (`replica_evidence`); `Unknown` until a check takes it, so a vault that never
    /// replicates keeps nothing.
    replica_evidence: Mutex<inventory::changes::ChangeSet>,
    /// Whom writes through this handle are made for; provenance comes from it (never content).
    channel: Channel,
    /// The named agent this handle writes for (`paravault mcp --agent NAME`), recorded in every
    /// receipt as `agent`; none when the adapter names none.
    agent: Option<String>,
}

/// Who is writing: set by the adapter (the CLI is a person at a terminal, the web UI a person
/// in a browser, MCP is an agent),
/// never taken from a request or a note's text. The engine derives provenance from it: the
/// receipt's `operation` and `actor`, and the `memory.write_policy` of notes it renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// An agent (MCP, or a library caller that did not say otherwise).
    #[default]
    Agent,
    /// A person at the CLI.
    Person,
    /// A person in the web UI (`paravault web`): receipts name operations `web.*`.
    Web,
}

impl Channel {
    /// The receipt's `actor`.
    pub fn actor(self) -> &'static str {
        match self {
            Channel::Agent => "agent",
            Channel::Person | Channel::Web => "human",
        }
    }
}

impl Drop for VaultState {
    fn drop(&mut self) {
        // Records this process re-read from disk after its first load (a watcher's refreshes)
        // are worth keeping. Records of its own writes are not: they were built from the bytes
        // written, carry no stamp, and the next process reads those few files anyway.
        if self.freshness().paths_refreshed > 0
            && let Some(inventory) = self.inventory.lock().unwrap_or_else(std::sync::PoisonError::into_inner).whole()
        {
            self.persist_inventory(inventory);
        }
        if self.options.lifetime == Lifetime::OneShot {
            let held = std::mem::take(self.inventory.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
            if let model::Held::Partial(model) = &held {
                self.fold_into_keyed_copy(model);
            }
            std::mem::forget(held);
        }
    }
}

impl VaultState {
    /// Loads an existing vault directory's policy (an invalid policy is refused); the model is
    /// read at first use. `vault::Vault::open` runs recovery on it next.
    pub(crate) fn load(root: &Path, options: VaultOptions) -> Result<Self> {
        if !root.is_dir() {
            return Err(Error::VaultUnusable(root.display().to_string()));
        }
        crate::store::nofollow::refuse_symlinked_state(root)?;
        let policy = LoadedPolicy::load(root)?;
        Ok(VaultState {
            root: root.to_path_buf(),
            policy,
            options,
            inventory: Mutex::new(model::Held::Nothing),
            catalog_state: Mutex::new(None),
            catalog_memo: Default::default(),
            summaries: Default::default(),
            watch: std::sync::OnceLock::new(),
            watch_starting: Mutex::new(None),
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
            keyed_refused: std::sync::atomic::AtomicBool::new(false),
            git_index_owed: std::sync::atomic::AtomicBool::new(false),
            keyed_fold_due: std::sync::atomic::AtomicBool::new(false),
            search_owed: std::sync::atomic::AtomicBool::new(false),
            replica_evidence: Mutex::new(inventory::changes::ChangeSet::unknown("no evidence is kept before the first check")),
            channel: Channel::Agent,
            agent: None,
        })
    }

    /// Creates the P.A.R.A. layout and the starter notes where missing (a fresh vault), for
    /// `vault::Vault::init`. Never overwrites an existing file.
    pub(crate) fn lay_out(root: &Path) -> Result<InitReport> {
        durable::create_dir_all(root, root)?;
        let policy = LoadedPolicy::load(root)?;
        let mut report = InitReport {
            root: root.display().to_string(),
            created_dirs: Vec::new(),
            created_notes: Vec::new(),
            kept_existing: Vec::new(),
            catalog_pages_written: Vec::new(),
            catalog_conflicts: Vec::new(),
        };
        report.created_dirs = create_layout_folders(root, &policy)?;
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
        Ok(report)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates the policy's P.A.R.A. folders (and the engine's state folder) where missing, as
    /// `init` does, and nothing else; returns those it created. A clone needs it: git carries no
    /// empty folder, and a write refuses a target folder that does not exist.
    pub(crate) fn create_layout_folders(&self) -> Result<Vec<String>> {
        create_layout_folders(&self.root, self.policy())
    }

    /// Keeps this vault's folder journal (`paravault watch`, `folder_journal`) until the process
    /// is stopped: one-shot writes then ask it which folders changed instead of a stat of each.
    /// `ready` is told once every folder is watched.
    pub fn keep_folder_journal(&self, ready: impl FnOnce(&crate::folder_journal::FolderJournalReady)) -> Result<()> {
        let mut journal = crate::folder_journal::FolderJournal::start(&self.root)?;
        ready(&journal.ready());
        journal.run(None)
    }

    /// Writes through this handle are made for `channel` (`vault::Vault::acting_for`).
    pub(crate) fn set_channel(&mut self, channel: Channel) {
        self.channel = channel;
    }

    /// Writes through this handle are made for the named `agent` (`vault::Vault::writing_for_agent`).
    pub(crate) fn set_agent(&mut self, agent: Option<String>) {
        self.agent = agent;
    }

    /// Whom writes through this handle are made for.
    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// The named agent writes through this handle are made for, if any.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    pub fn policy(&self) -> &LoadedPolicy {
        &self.policy
    }

    /// Today's date in UTC (or the configured override): [`VaultState::clock`]'s day.
    pub fn today(&self) -> NaiveDate {
        self.clock().today()
    }

    /// The vault's clock: every stamp the engine writes for this vault, and its "today".
    pub fn clock(&self) -> crate::clock::Clock {
        self.options.clock()
    }

    /// Whether git's own index may lag an engine commit this process made (`settle_git_index`).
    pub fn git_index_owed(&self) -> bool {
        self.git_index_owed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes that a write this process committed changed what searches read.
    pub(crate) fn owe_search(&self) {
        self.search_owed.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether a write this process committed changed what searches read since the last call
    /// (which clears it): an adapter then calls `prepare_search` once the write's answer is out.
    pub fn take_search_owed(&self) -> bool {
        self.search_owed.swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    /// Does ahead what the next call after a write would: takes the write's own events from the
    /// watcher's queue into the model (`observe_disk`, where a watcher runs) and builds what
    /// searches read (`search::prepare`). A search that arrives meanwhile waits for this build
    /// and takes it instead of building the same generation beside it. A failure is left to
    /// that call to report.
    pub fn prepare_search(&self) {
        if let Err(error) = self.observe_watched().and_then(|()| crate::search::prepare(self.root(), self.policy(), self.today())) {
            tracing::debug!(error = %error, "the search state after a write could not be built ahead; the next search builds it");
        }
    }

    /// Notes that git's own index lags (`true`) or caught up with (`false`) this process's engine commits.
    pub(crate) fn set_git_index_owed(&self, owed: bool) {
        self.git_index_owed.store(owed, std::sync::atomic::Ordering::Relaxed);
    }

    /// The options the vault was opened with (a vault opened on its behalf takes the same).
    pub fn options(&self) -> &VaultOptions {
        &self.options
    }

    /// The instant the engine stamps a note it renders with: now in UTC (or the configured one).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock().now()
    }
}

impl VaultState {
    /// The cross-process writer lock on a handle of its own, if no other process (and no other
    /// handle of this one, the writer's included) holds it; released when the file is dropped.
    /// Never waits. For housekeeping that needs no writer state (folding the model's keyed
    /// copy, removing leftover temporary files).
    pub(crate) fn try_lock_writer_file(&self) -> Result<Option<std::fs::File>> {
        durable::create_dir_all(&self.root, &layout::join(&self.root, layout::STATE_DIR))?;
        let lock_path = layout::join(&self.root, layout::WRITER_LOCK);
        let file = durable::open_engine_file(&self.root, &lock_path, false)
            .map_err(|e| crate::store::nofollow::io_error("opening", layout::WRITER_LOCK, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("locking", layout::WRITER_LOCK, e)),
        }
    }
}

/// The folders `init` creates where missing (the policy's scope folders, less those it says
/// not to create, and the state folder).
fn create_layout_folders(root: &Path, policy: &LoadedPolicy) -> Result<Vec<String>> {
    let skipped = &policy.policy.layout.not_created_at_init;
    let mut created = Vec::new();
    for folder in policy.scope_folders().filter(|f| !skipped.contains(f)).map(String::as_str).chain([layout::STATE_DIR]) {
        let dir = layout::join(root, folder);
        if !dir.is_dir() {
            durable::create_dir_all(root, &dir)?;
            created.push(folder.to_string());
        }
    }
    Ok(created)
}
