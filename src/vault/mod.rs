//! The application API: one `Vault` per root, the only entry point adapters (CLI, MCP, web)
//! use. A `Vault` is the façade over what an open vault holds in memory (`state::VaultState`:
//! policy, the model kept equal to the disk, catalog state, summaries, and every operation
//! that needs no writer lock, reached through `Deref`) and its single writer
//! (`write::Writer`: the lock, the journal, the receipt log), owned here directly. Every
//! operation that takes the writer lock is a method of `Vault`: the core writes in `writes`,
//! each feature's in its own module (`approvals`, `replicate`, `maintenance`, …), which pass
//! the state and the writer to the one transaction (`write::execute`).
//! *Invariant: `state` and `write` never name `Vault`; the writer is reached only through it.*

mod writes;

use std::path::Path;

use crate::error::Result;
use crate::state::VaultState;
use crate::store::layout;
use crate::write::Writer;
use crate::write::receipts::Receipt;

pub use crate::state::{
    ATTACHMENT_BYTES_MAX, Channel, FolderHealth, Freshness, GraphNode, HealthSummary, IndexReport, InitReport, Lifetime, LinkGraph,
    LinkTarget, MarkdownReport, NoteSlice, ReceiptActivity, ReceiptDay, TagCount, TitleMatch, TitleMatches, VaultOptions,
    resolve_note_path, tag_key,
};
pub(crate) use crate::state::{RootSource, looks_like_a_vault, resolve_root};

/// An open vault: its state and its writer.
pub struct Vault {
    state: VaultState,
    writer: Writer,
}

/// Reads and the model are the state's; a `Vault` adds what takes the writer lock.
impl std::ops::Deref for Vault {
    type Target = VaultState;
    fn deref(&self) -> &VaultState {
        &self.state
    }
}

impl Drop for Vault {
    /// Checkpoints this process's deferred writes; the state then persists what it must of the
    /// model (`VaultState`'s own drop, after this one).
    fn drop(&mut self) {
        if self.has_deferred_writes()
            && let Err(error) = self.checkpoint_pending()
        {
            tracing::warn!(error = %error, "could not checkpoint deferred writes; the next open finishes them from the journal");
        }
    }
}

impl Vault {
    /// Opens an existing vault directory and loads its policy (an invalid policy is refused);
    /// a committed write that waits in the journal is finished first (crash recovery at open,
    /// under the writer lock).
    pub fn open(root: &Path, options: VaultOptions) -> Result<Self> {
        let vault = Vault { state: VaultState::load(root, options)?, writer: Writer::default() };
        if layout::join(root, layout::JOURNAL).exists() {
            // Crash recovery at open, under the writer lock, before any other write — unless
            // another writer holds the lock now: readers never wait for a writer (they answer
            // from the published state), and the holder, or the next writer, finishes any
            // pending intent. A retryable failure (a full disk) does not stop reads either:
            // the pending intent stays in the journal and the next write (or open) finishes it.
            match vault.writer.try_lock(&vault.state) {
                Ok(Some(writer)) => drop(writer),
                Ok(None) => tracing::debug!("another writer holds the lock; recovery at open left to it"),
                Err(error) if error.retryable() => {
                    tracing::warn!(error = %error, "recovery at open failed; reads go on, the next write retries it");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(vault)
    }

    /// Creates the P.A.R.A. layout and the starter notes where missing, then opens the vault
    /// and renders its catalogs. Never overwrites an existing file.
    pub fn init(root: &Path, options: VaultOptions) -> Result<(Self, InitReport)> {
        let mut report = VaultState::lay_out(root)?;
        let vault = Vault::open(root, options)?;
        let index = vault.generate_index()?;
        report.catalog_pages_written = index.pages_written;
        report.catalog_conflicts = index.conflicts;
        Ok((vault, report))
    }

    /// A fresh handle on the same vault with the same options and channel: a long-lived
    /// process that must see the disk anew for each request (the INFRA-1 broker) opens one.
    pub fn reopened(&self) -> Result<Vault> {
        Vault::open(self.root(), self.options().clone()).map(|vault| vault.acting_for(self.channel()))
    }

    /// This handle, writing for `channel` (adapters call it once, right after opening).
    pub fn acting_for(mut self, channel: Channel) -> Self {
        self.state.set_channel(channel);
        self
    }

    /// This handle, writing for the named `agent` (adapters call it once, right after
    /// opening, with the name the server was started for): receipts record it.
    pub fn writing_for_agent(mut self, agent: Option<String>) -> Self {
        self.state.set_agent(agent);
        self
    }

    /// This vault's writer, for the write path's functions that take the lock themselves.
    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// Takes the writer lock (in-process mutex, then the cross-process file lock), catches up
    /// with receipts other processes wrote, and finishes any committed transaction left
    /// unfinished (one another live process applied is left to its own checkpoint for a while:
    /// `write::writer::LEFT_TO_OWNER_FOR`).
    pub fn lock_writer(&self) -> Result<crate::write::WriterGuard<'_>> {
        self.writer.lock(&self.state)
    }

    /// `lock_writer` if no other holder has the lock now; `None` at once otherwise.
    pub(crate) fn try_lock_writer(&self) -> Result<Option<crate::write::WriterGuard<'_>>> {
        self.writer.try_lock(&self.state)
    }

    /// Runs one write transaction the approval gate cleared (`write::execute`).
    pub(crate) fn execute(&self, mutation: crate::write::Mutation, cleared: crate::write::Cleared) -> Result<Receipt> {
        crate::write::execute(&self.state, &self.writer, mutation, cleared)
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
        self.writer.checkpoint_pending(&self.state)
    }

    /// Teaches git's own index the engine commits this process made since it last did
    /// (`write::replica::settle_git_index`): long-lived processes call it when idle.
    pub fn settle_git_index(&self) -> Result<()> {
        crate::write::replica::settle_git_index(&self.state, &self.writer)
    }

    /// Regenerates `index.md` and every directory catalog that changed.
    pub fn generate_index(&self) -> Result<IndexReport> {
        self.regenerate_catalogs(None)
    }

    /// Regenerates the catalogs of `dirs` only (plus the root index), under the writer lock.
    pub fn regenerate_catalogs(&self, only_dirs: Option<&std::collections::BTreeSet<String>>) -> Result<IndexReport> {
        let _writer = self.lock_writer()?;
        self.state.regenerate_catalogs_locked(only_dirs)
    }

    /// Renders a category's catalog if needed, then returns the requested page.
    pub fn ensure_sub_index(&self, category: &str, page: usize) -> Result<String> {
        let dirs = self.state.sub_index_dirs(category)?;
        self.regenerate_catalogs(Some(&dirs))?;
        self.read_sub_index(category, page)
    }
}
