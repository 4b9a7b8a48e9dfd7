//! The read side of the application API: search, memory context, related notes, and the
//! full `sync_vault`. Thin over `search`, which reads only published generations.

use chrono::NaiveDate;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::policy::domains::DomainRegistry;
use crate::search::{self, Envelope, NoteRef, Related, RelatedMethod, SearchMode, SearchRequest, SyncOptions, SyncReport, TemporalView};
use crate::vault::Vault;

/// `search_vault_tool` parameters as P.O.W.E.R. names them.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    pub query: String,
    #[serde(default = "twenty")]
    #[schemars(range(min = 1, max = 20))]
    pub max_results: usize,
    #[serde(default = "auto")]
    pub search_mode: String,
    #[serde(default = "current")]
    pub temporal_view: String,
    /// Inclusive ISO date lifecycle boundary (default: today UTC).
    #[serde(default)]
    pub as_of: Option<String>,
    /// A domain name from the registry (policy `domains` and `.power/domains.yaml`): scopes the
    /// results to its folder, and `auto` follows its `search_priority`.
    #[serde(default)]
    pub domain: Option<String>,
}

impl SearchParams {
    /// A full-text search for `query`, current view, whole vault, top `max_results`.
    pub fn fts(query: &str, max_results: usize) -> Self {
        SearchParams { query: query.into(), max_results, search_mode: "fts".into(), temporal_view: current(), as_of: None, domain: None }
    }
}

fn twenty() -> usize {
    20
}
fn auto() -> String {
    "auto".into()
}
fn current() -> String {
    "current".into()
}

/// `sync_vault` parameters.
#[derive(Debug, Clone, Copy, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncParams {
    #[serde(default = "yes")]
    pub fts_only: bool,
    #[serde(default)]
    pub accept_dense_loss: bool,
    #[serde(default)]
    pub force_rebuild: bool,
    #[serde(default)]
    pub allow_partial: bool,
}

fn yes() -> bool {
    true
}

impl Default for SyncParams {
    fn default() -> Self {
        SyncParams { fts_only: true, accept_dense_loss: false, force_rebuild: false, allow_partial: false }
    }
}

/// `suggest_related_tool` result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RelatedReport {
    /// The note the suggestions are for.
    pub target: String,
    /// `argument`, or `newest_timestamp` when the target was chosen by default.
    #[schemars(extend("enum" = ["argument", "newest_timestamp"]))]
    pub target_source: &'static str,
    /// The method that ran (it differs from the one asked for only on a labelled fallback).
    #[schemars(extend("enum" = ["keyword", "semantic"]))]
    pub method: &'static str,
    /// The method asked for.
    #[schemars(extend("enum" = ["keyword", "semantic"]))]
    pub requested_method: &'static str,
    /// Why the method that ran is not the one asked for.
    pub fallback_reason: Option<String>,
    /// The related notes, closest first.
    pub related: Vec<Related>,
}

/// `get_memory_context` result: the most relevant current notes for a query.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemoryContext {
    /// P.O.W.E.R.'s list of relative paths, best first.
    pub result: Vec<String>,
    /// The same notes with their titles.
    pub notes: Vec<NoteRef>,
    /// What this call did besides reading (absent when nothing): the first search generation
    /// of a vault never synced (`first_generation_published`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
}

fn temporal_view(text: &str) -> Result<TemporalView> {
    match text.trim().to_ascii_lowercase().as_str() {
        "current" | "" => Ok(TemporalView::Current),
        "historical" => Ok(TemporalView::Historical),
        "all" => Ok(TemporalView::All),
        other => {
            Err(Error::InvalidArgument { name: "temporal_view", reason: format!("'{other}' is not one of: current, historical, all") })
        }
    }
}

/// Puts `note` before the fallback reason already there.
fn prepend(note: Option<String>, reason: Option<String>) -> Option<String> {
    match (note, reason) {
        (Some(note), Some(reason)) => Some(format!("{note}; {reason}")),
        (note, reason) => note.or(reason),
    }
}

impl Vault {
    /// Runs `read` on the active generation. A vault never synced (a folder of Obsidian notes,
    /// a vault another tool served) gets its first generation on first need, as the default
    /// vault gets it at creation: offline, by keyword, the notes that cannot be indexed left out
    /// and counted (`allow_partial`); then `read` runs again. Also returns the note saying so
    /// (`first_generation_published`), for the answer's `fallback_reason`.
    fn on_a_generation<T>(&self, read: impl Fn() -> Result<T>) -> Result<(T, Option<String>)> {
        match read() {
            Err(Error::NoActiveGeneration { .. }) => {
                let report = self.sync_vault(&SyncParams { allow_partial: true, ..Default::default() })?;
                let mut note = format!(
                    "first_generation_published: the vault had no search generation; this call published its first, by keyword \
                     (fts, offline), from {} notes",
                    report.counts.indexed
                );
                if !report.exclusions.is_empty() {
                    note.push_str(&format!(" ({} left out: lint_vault says why)", report.exclusions.len()));
                }
                read().map(|value| (value, Some(note)))
            }
            other => other.map(|value| (value, None)),
        }
    }

    /// Searches the active published generation and answers with an untrusted envelope (a
    /// vault never synced first gets its first generation: `on_a_generation`).
    pub fn search(&self, params: &SearchParams) -> Result<Envelope> {
        let cap = self.policy().policy.search.max_results_cap;
        if params.max_results == 0 || params.max_results > cap {
            return Err(Error::InvalidArgument { name: "max_results", reason: format!("must be between 1 and {cap}") });
        }
        let as_of = match params.as_of.as_deref().filter(|s| !s.trim().is_empty()) {
            Some(text) => NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
                .map_err(|_| Error::InvalidArgument { name: "as_of", reason: format!("'{text}' is not an ISO date (YYYY-MM-DD)") })?,
            None => self.today(),
        };
        let search_mode = SearchMode::parse(&params.search_mode)?;
        let (domain, auto_priority) = match params.domain.as_deref().filter(|d| !d.trim().is_empty()) {
            None if search_mode == SearchMode::Auto => {
                let registry = DomainRegistry::load(self.root(), &self.policy().policy.domains)?;
                (None, registry.route(&params.query).map(|d| d.priority()).unwrap_or_default())
            }
            None => (None, Vec::new()),
            Some(name) => {
                let registry = DomainRegistry::load(self.root(), &self.policy().policy.domains)?;
                let domain = registry.get(name)?;
                (Some(domain.folder().to_string()), domain.priority())
            }
        };
        let request = SearchRequest {
            query: params.query.clone(),
            max_results: params.max_results,
            search_mode,
            temporal_view: temporal_view(&params.temporal_view)?,
            as_of,
            domain,
            auto_priority,
        };
        let (mut envelope, first) = self.on_a_generation(|| search::search(self.root(), self.policy(), request.clone()))?;
        envelope.fallback_reason = prepend(first, envelope.fallback_reason.take());
        envelope.replica = crate::write::replica::freshness(self.root());
        Ok(envelope)
    }

    /// Publishes a complete generation for the vault as it is on disk now (detects edits made
    /// outside the engine by content hash). Under the writer lock.
    pub fn sync_vault(&self, params: &SyncParams) -> Result<SyncReport> {
        self.sync_vault_with_progress(params, &|_, _, _| {})
    }

    /// `sync_vault`, reporting (stage, done, total) as it goes. A dense sync embeds first,
    /// outside the writer lock (taking it for each window's append only: `search::Staging`),
    /// then publishes under it; an FTS sync holds the lock throughout.
    pub fn sync_vault_with_progress(&self, params: &SyncParams, progress: search::Progress<'_>) -> Result<SyncReport> {
        let mut staged = 0;
        if !params.fts_only {
            // Fail closed before any work: no model, no dense sync.
            crate::embed::vault_handle(&self.policy().policy, self.root()).model()?;
            let staging =
                self.with_inventory(|inventory| search::Staging::plan(self.root(), self.policy(), inventory, params.force_rebuild))??;
            if let Some(staging) = staging {
                let under_lock = |f: &mut dyn FnMut() -> Result<()>| -> Result<()> {
                    let _writer = self.lock_writer()?;
                    f()
                };
                staged = staging.run(self.root(), self.policy(), &under_lock, progress)?;
                tracing::debug!(staged, "dense sync: chunks embedded outside the writer lock");
            }
        }
        let mut report = self.sync_under_lock(params, progress)?;
        if !params.fts_only
            && let Err(error) = crate::embed::vault_handle(&self.policy().policy, self.root()).remember_source()
        {
            tracing::warn!(error = %error, "could not record where the embedding model was found");
        }
        if staged > 0
            && let Some(dense) = report.dense.as_mut()
        {
            // What this sync embedded: outside the lock, and under it (what changed meanwhile).
            dense["embedded_now"] = (dense["embedded_now"].as_u64().unwrap_or(0) + staged as u64).into();
        }
        Ok(report)
    }

    fn sync_under_lock(&self, params: &SyncParams, progress: search::Progress<'_>) -> Result<SyncReport> {
        let mut writer = self.lock_writer()?;
        // The sync reads the vault as it is now (outside edits included): the deferred
        // intents must be finished first, so that no recovery re-applies them over it.
        writer.checkpoint_deferred(self)?;
        self.reload();
        let options = SyncOptions {
            fts_only: params.fts_only,
            accept_dense_loss: params.accept_dense_loss,
            force_rebuild: params.force_rebuild,
            allow_partial: params.allow_partial,
            // Every committed write is on disk now (recovery ran under this lock).
            covers_seq: Some(writer.last_seq()),
        };
        let clock = std::time::Instant::now();
        self.with_inventory(|inventory| {
            tracing::debug!(elapsed_ms = clock.elapsed().as_secs_f64() * 1e3, "sync: inventory loaded");
            search::sync_with_progress(self.root(), self.policy(), inventory, options, progress)
        })?
    }

    /// Paths and titles of the top hits (no bodies); a vault never synced first gets its first
    /// generation (`on_a_generation`).
    pub fn memory_context(&self, query: &str) -> Result<MemoryContext> {
        let (notes, fallback_reason) = self.on_a_generation(|| search::memory_context(self.root(), self.policy(), query, self.today()))?;
        Ok(MemoryContext { result: notes.iter().map(|n| n.path.clone()).collect(), notes, fallback_reason })
    }

    /// Notes related to `target`, from stored generation data only. An empty `target` means
    /// the most recently changed note: the valid note with the newest OKF `timestamp` (ties:
    /// the last path). `semantic` without stored vectors runs `keyword` and says why.
    pub fn suggest_related(&self, target: &str, method: &str, max_results: usize) -> Result<RelatedReport> {
        if max_results == 0 || max_results > 50 {
            return Err(Error::InvalidArgument { name: "max_results", reason: "must be between 1 and 50".into() });
        }
        let requested = match method.trim().to_ascii_lowercase().as_str() {
            "keyword" => RelatedMethod::Keyword,
            "semantic" => RelatedMethod::Semantic,
            other => return Err(Error::InvalidArgument { name: "method", reason: format!("'{other}' is not one of: semantic, keyword") }),
        };
        let (target, target_source) = match target.trim() {
            "" => (self.newest_note()?, "newest_timestamp"),
            given => (given.to_string(), "argument"),
        };
        let (hits, first) =
            self.on_a_generation(|| search::suggest_related(self.root(), self.policy(), &target, requested, max_results))?;
        Ok(RelatedReport {
            target,
            target_source,
            method: label(hits.method),
            requested_method: label(requested),
            fallback_reason: prepend(first, hits.fallback_reason),
            related: hits.related,
        })
    }

    /// The valid note with the newest OKF `timestamp` (the default `suggest_related` target).
    fn newest_note(&self) -> Result<String> {
        let newest = self.with_inventory(|inventory| {
            inventory
                .notes()
                .filter(|r| r.valid)
                .max_by(|a, b| a.meta.timestamp.cmp(&b.meta.timestamp).then(a.path.cmp(&b.path)))
                .map(|r| r.path.to_string())
        })?;
        newest.ok_or_else(|| Error::InvalidArgument {
            name: "target_path",
            reason: "the vault has no valid note to relate to; pass target_path".into(),
        })
    }
}

fn label(method: RelatedMethod) -> &'static str {
    match method {
        RelatedMethod::Keyword => "keyword",
        RelatedMethod::Semantic => "semantic",
    }
}
