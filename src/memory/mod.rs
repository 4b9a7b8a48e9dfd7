//! Agent memory (ctxvault's model) over one vault: bitemporal episodes, skills and documents,
//! all stored as Markdown notes in the folders `policy.agent_memory` names and changed only
//! through `write::execute` (one transaction, one receipt, per tool call).
//!
//! `MemoryVault` wraps a `Vault` with what memory reads need: the parsed episode notes (kept
//! current by content hash against the inventory) and the receipts' commit times
//! (`known_times`). `registry` names vaults and who may use them; `vault_set` opens them.

pub mod documents;
pub mod docx;
pub mod episodes;
pub mod known_times;
pub mod registry;
pub mod skills;
pub mod vault_set;
pub mod warmup;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::inventory::CatchUp;
use crate::note::path::VaultPath;
use crate::vault::Vault;
use crate::write::{Mutation, NoteChange};
use episodes::{Episode, EpisodeIndex, EpisodeRecord, EpisodeState, Lens};
use known_times::{KEY_PREFIX, KnownTimes};

/// A vault with its agent-memory caches.
pub struct MemoryVault {
    pub vault: Vault,
    episodes: Mutex<EpisodeCache>,
    known: Mutex<KnownTimes>,
    /// Serialises this process's memory read-modify-write cycles (other processes and people
    /// are caught by each change's `expected_sha256`).
    writing: Mutex<()>,
    /// Whether the caller has `propose` authority here: each memory change is then held as a
    /// `memory_change` proposal (`approvals::propose_memory_change`) instead of written.
    proposes: bool,
}

/// What a memory transaction came to (one per tool call, moved once into its report: the
/// size difference of the variants costs nothing worth a box).
#[allow(clippy::large_enum_variant)]
enum Committed {
    /// Written: its receipt.
    Written(crate::write::receipts::Receipt),
    /// Held for approval (the caller has `propose` authority): what the tool answers.
    Proposed(ProposedChange),
}

/// What `write_episode`, `confirm_episode`, `supersede_episode`, `revise_episode` and
/// `invalidate_episode` answer: the episode as stored and the receipt, or, for a caller with
/// `propose` authority, the proposal and the id the episode will have.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EpisodeChanged {
    /// The written (or replacing) version as the vault now sees it (null when proposed).
    pub episode: Option<episodes::EpisodeView>,
    /// The write's receipt (absent when the change is proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptSummary>,
    /// The id of the episode the proposal writes (present only when proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episode_id: Option<String>,
    /// The version it replaces (supersede and revise only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
    /// The proposal holding the change (only for a caller with `propose` authority).
    #[serde(flatten)]
    pub proposed: Option<ProposedChange>,
}

impl EpisodeChanged {
    /// A change held as `proposal` that writes episode `episode_id`.
    fn proposed(proposal: ProposedChange, episode_id: &str) -> Self {
        EpisodeChanged { episode: None, receipt: None, episode_id: Some(episode_id.to_string()), replaced: None, proposed: Some(proposal) }
    }
}

/// `dispute_episodes`'s answer: both statements as they now stand and the receipt, or, for a
/// caller with `propose` authority, the proposal and the two ids.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EpisodesDisputed {
    /// Both versions, flagged with each other (null for one the vault cannot show; empty when
    /// proposed).
    pub episodes: Vec<Option<episodes::EpisodeView>>,
    /// The write's receipt (absent when the change is proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptSummary>,
    /// The two episodes the proposal disputes (present only when proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episode_ids: Option<Vec<String>>,
    /// The proposal holding the change (only for a caller with `propose` authority).
    #[serde(flatten)]
    pub proposed: Option<ProposedChange>,
}

/// `episode_history`'s answer: every version of a statement, oldest first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EpisodeHistory {
    /// The version asked about.
    pub episode_id: String,
    /// How many versions the chain has.
    pub count: usize,
    /// The versions, oldest first.
    pub versions: Vec<episodes::EpisodeView>,
    /// The same versions under ctxvault 0.8.1's name.
    pub chain: Vec<episodes::EpisodeView>,
    /// The untrusted-data marks (statements are note text).
    #[serde(flatten)]
    pub untrusted: Untrusted,
}

/// `query_episodes`'s answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EpisodeMatches {
    /// The matching versions, in the query's order, at most `limit`.
    pub episodes: Vec<episodes::EpisodeView>,
    /// The same versions under ctxvault 0.8.1's name.
    pub results: Vec<episodes::EpisodeView>,
    /// How many are returned.
    pub count: usize,
    /// How many matched in all.
    pub total_matching: usize,
    /// Whether more matched than are returned.
    pub truncated: bool,
    /// The valid time asked about (null: now).
    pub valid_at: Option<String>,
    /// The knowledge time asked about (null: everything recorded).
    pub known_at: Option<String>,
    /// Whether statements that no longer hold were included.
    pub include_closed: bool,
    /// How the results were ordered.
    pub ranking: EpisodeRanking,
    /// The order applied (`ranking.order_by`, under ctxvault 0.8.1's name).
    pub order_by: String,
    /// Notes of the episodes folder that are not readable episodes.
    pub unreadable_episode_notes: usize,
    /// The untrusted-data marks (statements are note text).
    #[serde(flatten)]
    pub untrusted: Untrusted,
}

/// How `query_episodes` ordered its results.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EpisodeRanking {
    /// The search mode that ranked them (`none` without query text).
    pub method: String,
    /// The order applied: relevance, newest, oldest, valid_from, salience or confidence.
    pub order_by: String,
    /// Why the search fell back (present with query text; null when it did not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<Option<String>>,
    /// How many notes the search ranked (present with query text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranked_candidates: Option<usize>,
    /// The order of the versions the search did not rank (present with query text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unranked_order: Option<String>,
}

/// `list_entities`'s answer: the vault's vocabulary.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EntityList {
    /// Each entity with how many episodes name it, alphabetical.
    pub entities: Vec<EntityCount>,
    /// How many entities are listed.
    pub count: usize,
    /// `count` under ctxvault 0.8.1's name.
    pub total: usize,
    /// Whether statements that no longer hold were counted.
    pub include_closed: bool,
    /// The valid time asked about (null: now).
    pub valid_at: Option<String>,
    /// The fewest episodes an entity needed to be listed.
    pub min_episodes: i64,
    /// The untrusted-data marks (entity names are note text).
    #[serde(flatten)]
    pub untrusted: Untrusted,
}

/// One entity of `list_entities`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EntityCount {
    /// The entity as most episodes write it.
    pub entity: String,
    /// Every spelling the episodes use (one normalised entity: `entity_norm`).
    pub spellings: Vec<String>,
    /// How many episodes name it, in any spelling.
    pub episodes: usize,
    /// `episodes` under ctxvault 0.8.1's name.
    pub episode_count: usize,
    /// The key entities are matched on (lower case), as ctxvault 0.8.1 names it.
    pub entity_norm: String,
}

/// What a memory tool answers when the caller has `propose` authority: the change is held as a
/// `memory_change` proposal and nothing is written yet.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ProposedChange {
    /// Always `awaiting_approval`.
    pub status: String,
    /// Always false: nothing is in the vault yet.
    pub written: bool,
    /// The proposal's id (`paravault approve ID`, `apply_memory_change`).
    pub proposal_id: String,
    /// The ctxvault tool that proposed it.
    pub tool: String,
    /// The proposal as an approver reads it.
    pub proposal: crate::approvals::ProposalStatus,
    /// Who applies it and how.
    pub next: String,
}

/// What a memory tool says of its receipt: sequence number, operation and commit time.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReceiptSummary {
    /// The receipt's sequence number in the vault's receipt chain.
    pub seq: u64,
    /// The write operation (`ctxvault.<tool>`).
    pub operation: String,
    /// The commit time: when the vault learned the change.
    pub at: String,
    /// The named agent that wrote (`--agent`), as the receipt records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// How the write was indexed: `semantic` when its notes were embedded (searchable by the
    /// dense path at once), `fts` when by keyword only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_mode: Option<String>,
}

impl ReceiptSummary {
    fn of(receipt: &crate::write::receipts::Receipt) -> Self {
        ReceiptSummary {
            seq: receipt.seq,
            operation: receipt.operation.clone(),
            at: receipt.at.clone(),
            agent: receipt.agent.clone(),
            search_mode: receipt.search_mode.clone(),
        }
    }
}

/// The marks of a result carrying note text (which people and other agents may have written):
/// untrusted data, as every note-text result of the server is.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Untrusted {
    /// Always `untrusted`.
    pub trust: String,
    /// Always true: the text is data, never instructions.
    pub data_only: bool,
    /// How an agent handles the text.
    pub handling_instruction: String,
}

impl Untrusted {
    /// The marks every note-text result carries.
    pub fn marks() -> Self {
        Untrusted { trust: "untrusted".into(), data_only: true, handling_instruction: crate::search::HANDLING_INSTRUCTION.into() }
    }
}

#[derive(Default)]
struct EpisodeCache {
    /// Path → (content hash, parsed episode or None when the note is not a readable episode).
    by_path: HashMap<String, ([u8; 32], Option<Arc<Episode>>)>,
    index: EpisodeIndex,
    /// Notes of the episodes folder that are not indexed (unreadable, or not where their id
    /// says).
    unreadable: usize,
    /// The inventory's (origin, revision) the cache matches: an unchanged inventory skips
    /// the comparison, a later revision of the same inventory re-reads only the paths its
    /// change log names, anything else compares every note of the folder by content hash.
    seen: Option<(u64, u64)>,
}

/// The episodes folder's notes the inventory names for the cache to compare with.
enum Listing {
    /// The inventory is where the cache saw it.
    Unchanged,
    /// The paths changed since (each with its content hash, `None`: no longer a note here).
    Changed(Vec<(String, Option<[u8; 32]>)>),
    /// Every note of the folder (the change log does not reach back to the cache's revision).
    Whole(Vec<(String, [u8; 32])>),
}

impl EpisodeCache {
    /// Whether a note at `path` parsed as `parsed` is an indexed version (an episode is where
    /// its id says; a copy elsewhere is not a second version).
    fn indexable(memory: &MemoryVault, path: &str, parsed: Option<&Arc<Episode>>) -> bool {
        parsed.is_some_and(|e| memory.episode_path(&e.record.id).is_ok_and(|p| p.as_str() == path))
    }

    /// Forgets the note at `path`.
    fn forget(&mut self, memory: &MemoryVault, path: &str) {
        if let Some((_, parsed)) = self.by_path.remove(path) {
            if Self::indexable(memory, path, parsed.as_ref()) {
                if let Some(e) = parsed {
                    self.index.remove(&e.record.id);
                }
            } else {
                self.unreadable = self.unreadable.saturating_sub(1);
            }
        }
    }

    /// Brings the note at `path` (content hash `hash` in the inventory) up to date. Returns
    /// false when the file on disk does not hold that content (a write between its plan and
    /// its rename, or an edit the inventory has not seen yet): the note is then filed under
    /// the unknown hash, so the next call reads it again.
    fn refresh(&mut self, memory: &MemoryVault, path: &str, hash: [u8; 32], times: &KnownTimes) -> Result<bool> {
        if hash != [0; 32] && self.by_path.get(path).is_some_and(|(old, _)| *old == hash) {
            return Ok(true);
        }
        let bytes = crate::store::beneath::read(memory.vault.root(), path)?;
        let Some(bytes) = bytes else {
            self.forget(memory, path);
            return Ok(false);
        };
        let settled = *blake3::hash(&bytes).as_bytes() == hash;
        let parsed = std::str::from_utf8(&bytes).ok().and_then(|text| episodes::parse_note(path, text)).map(Arc::new);
        self.forget(memory, path);
        if Self::indexable(memory, path, parsed.as_ref()) {
            if let Some(e) = &parsed {
                self.index.insert(Arc::clone(e), times);
            }
        } else {
            self.unreadable += 1;
        }
        self.by_path.insert(path.to_string(), (if settled { hash } else { [0; 32] }, parsed));
        Ok(settled)
    }
}

/// `write_episode` arguments.
#[derive(Debug, Clone, Default)]
pub struct NewEpisode {
    pub content: String,
    pub entities: Vec<String>,
    pub source: Option<String>,
    pub salience: f64,
    pub confidence: f64,
    pub occurred_at: Option<String>,
    pub valid_from: Option<String>,
}

/// `supersede_episode` / `revise_episode` arguments.
#[derive(Debug, Clone, Default)]
pub struct Replacement {
    pub episode_id: String,
    pub content: String,
    pub entities: Vec<String>,
    pub source: Option<String>,
    pub salience: Option<f64>,
}

/// `query_episodes` arguments.
#[derive(Debug, Clone, Default)]
pub struct EpisodeQuery {
    pub query: String,
    pub entities: Vec<String>,
    pub valid_at: Option<String>,
    pub known_at: Option<String>,
    pub include_closed: bool,
    pub order_by: Option<String>,
    pub limit: usize,
}

/// The orders `query_episodes` accepts.
pub(crate) const EPISODE_ORDERS: [&str; 7] = ["relevance", "newest", "oldest", "valid_from", "recency", "salience", "confidence"];

/// ctxvault 0.8.1's `recency` ranks by a decay of `valid_from` (newest valid time first): the
/// same order as `valid_from` here, so a client written for it gets that order.
fn canonical_order(order: &str) -> &str {
    if order == "recency" { "valid_from" } else { order }
}

/// `key:` and `record` under it, as the frontmatter of a memory note holds it, through the one
/// mapping renderer: the YAML emitter indents the record itself (splitting its text at `\n` and
/// indenting each piece left the lines after a U+2028 / U+2029 inside a literal block scalar
/// outdented, where they were read as fields of their own), and a record it cannot write so
/// that it reads back the same is refused, never stored changed.
pub(crate) fn frontmatter_block(key: &str, record: &impl serde::Serialize, what: &'static str) -> Result<String> {
    let encoding = |message: String| Error::io("encoding", what, std::io::Error::other(message));
    let mut block = serde_yaml::Mapping::new();
    block.insert(key.into(), serde_yaml::to_value(record).map_err(|e| encoding(e.to_string()))?);
    crate::note::frontmatter::render_mapping(&block).map_err(|problem| encoding(problem.to_string()))
}

/// A fresh random identifier (hex).
pub(crate) fn fresh_id(bytes: usize) -> String {
    crate::hex::random(bytes)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn not_found(id: &str) -> Error {
    Error::EpisodeNotFound { episode_id: id.chars().take(64).collect() }
}

/// Whether an episode id is well formed (ids are 32 lower-case hex digits).
fn plain_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl MemoryVault {
    pub fn new(vault: Vault) -> Self {
        MemoryVault {
            vault,
            episodes: Mutex::new(EpisodeCache::default()),
            known: Mutex::new(KnownTimes::default()),
            writing: Mutex::new(()),
            proposes: false,
        }
    }

    /// A vault for a caller with `propose` authority: every memory change is stored as a
    /// proposal a person (or an agent with apply authority) approves and applies by id.
    pub fn proposing(vault: Vault) -> Self {
        MemoryVault { proposes: true, ..MemoryVault::new(vault) }
    }

    /// Whether memory changes are held as proposals here.
    pub fn proposes(&self) -> bool {
        self.proposes
    }

    fn policy(&self) -> &crate::policy::AgentMemoryPolicy {
        &self.vault.policy().policy.agent_memory
    }

    /// The note of episode `id`.
    pub fn episode_path(&self, id: &str) -> Result<VaultPath> {
        if !plain_id(id) {
            return Err(not_found(id));
        }
        VaultPath::parse(&format!("{}/{}/{id}.md", self.policy().episodes_folder.trim_end_matches('/'), &id[..2]))
    }

    /// Brings the episode cache and the knowledge times up to date with the disk (the caller
    /// has observed the disk) and runs `f` over them. O(change) per call: the inventory's
    /// change log names the notes to compare again (a whole compare only when it cannot).
    pub(crate) fn with_episodes<T>(&self, f: impl FnOnce(&EpisodeIndex, &KnownTimes, usize) -> T) -> Result<T> {
        let folder = self.policy().episodes_folder.trim_end_matches('/').to_string();
        let prefix = format!("{folder}/");
        let mut cache = lock(&self.episodes);
        let seen = cache.seen;
        let (key, listing) = self.vault.with_inventory(|inv| {
            let key = inv.key();
            let listing = match inv.catch_up_from(seen) {
                CatchUp::Current => Listing::Unchanged,
                CatchUp::Changed(paths) => Listing::Changed(
                    paths
                        .into_iter()
                        .filter(|p| p.as_str().starts_with(&prefix))
                        .map(|p| (p.to_string(), inv.records.get(p).filter(|r| r.is_note()).map(|r| r.content_hash)))
                        .collect(),
                ),
                CatchUp::Whole => {
                    Listing::Whole(inv.subtree(&folder).filter(|r| r.is_note()).map(|r| (r.path.to_string(), r.content_hash)).collect())
                }
            };
            (key, listing)
        })?;
        let mut known = lock(&self.known);
        known.catch_up(self.vault.root())?;
        let mut settled = true;
        match listing {
            Listing::Unchanged => {}
            Listing::Changed(paths) => {
                for (path, hash) in paths {
                    match hash {
                        Some(hash) => settled &= cache.refresh(self, &path, hash, &known)?,
                        None => cache.forget(self, &path),
                    }
                }
            }
            Listing::Whole(listed) => {
                let listed_paths: std::collections::HashSet<&str> = listed.iter().map(|(p, _)| p.as_str()).collect();
                let gone: Vec<String> = cache.by_path.keys().filter(|p| !listed_paths.contains(p.as_str())).cloned().collect();
                for path in gone {
                    cache.forget(self, &path);
                }
                for (path, hash) in &listed {
                    settled &= cache.refresh(self, path, *hash, &known)?;
                }
            }
        }
        let learned = known.take_learned();
        if learned.everything {
            cache.index.refile(None, &known);
        } else if !learned.ops.is_empty() {
            cache.index.refile(Some(&learned.ops), &known);
        }
        // A note that did not hold what the inventory says is compared again next time.
        if settled {
            cache.seen = Some(key);
        }
        Ok(f(&cache.index, &known, cache.unreadable))
    }

    /// Runs one memory transaction: `notes` (path, new text, the sha256 it replaces or None
    /// for a new note), op id `op`, and records its receipt's commit time. For a caller with
    /// `propose` authority the same fully resolved change is stored as a `memory_change`
    /// proposal instead, and nothing is written.
    fn commit(&self, operation: &'static str, op: &str, notes: Vec<(VaultPath, String, Option<String>)>) -> Result<Committed> {
        let mutation = Mutation {
            operation: operation.into(),
            notes: notes
                .into_iter()
                .map(|(path, content, expected)| NoteChange {
                    path,
                    content: Some(content),
                    require_absent: expected.is_none(),
                    expected_sha256: expected,
                })
                .collect(),
            idempotency_key: Some(format!("{KEY_PREFIX}{op}")),
            proposal_id: None,
            log_entry: None,
            create_folders: true,
        };
        // The gate: held as a proposal for a `propose` agent, or when a `human` rule decides
        // what the change is (an edit of an existing note under an `apply` rule, …).
        let outcome = crate::approvals::commit_memory(&self.vault, mutation, self.proposes)?;
        if let crate::approvals::MemoryOutcome::Proposed(status) = outcome {
            let status = *status;
            let approval = if status.approver == crate::policy::Approver::Human {
                "a person approves it (`paravault approve ID --approver NAME` or the web UI's proposals page)"
            } else {
                "a person (`paravault apply ID --approve`, or the web UI's proposals page) or an agent with apply authority \
                 (P.O.W.E.R.'s apply_memory_change with {\"proposal_id\": ID} and approved=true) applies it"
            };
            return Ok(Committed::Proposed(ProposedChange {
                status: "awaiting_approval".into(),
                written: false,
                proposal_id: status.proposal_id.clone(),
                tool: operation.trim_start_matches("ctxvault.").to_string(),
                proposal: status,
                next: format!(
                    "nothing is in the vault yet: {approval}; the change is applied exactly as proposed, or refused with precondition_failed when a note it changes was edited since"
                ),
            }));
        }
        let crate::approvals::MemoryOutcome::Written(receipt) = outcome else { unreachable!("a proposal returned above") };
        let receipt = *receipt;
        lock(&self.known).record_receipt(&receipt.to_value());
        Ok(Committed::Written(receipt))
    }

    /// The current text's sha256 and the episode stored at `id`'s note (read under no lock;
    /// the transaction re-checks the sha256).
    fn load(&self, id: &str) -> Result<(Episode, String)> {
        let path = self.episode_path(id)?;
        let bytes = crate::store::beneath::read(self.vault.root(), path.as_str())?.ok_or_else(|| not_found(id))?;
        let text = String::from_utf8(bytes).map_err(|_| Error::NoteUnreadable { path: path.to_string(), reason: "not UTF-8".into() })?;
        let episode = episodes::parse_note(path.as_str(), &text)
            .filter(|e| e.record.id == id)
            .ok_or_else(|| Error::NoteUnreadable { path: path.to_string(), reason: "not a readable episode note".into() })?;
        Ok((episode, crate::write::sha256_hex(text.as_bytes())))
    }

    fn render(&self, record: &EpisodeRecord, content: &str, tool: &str) -> Result<String> {
        episodes::render_note(
            &self.policy().episode_note_type,
            record,
            content,
            &format!("paravault://mcp/ctxvault/{tool}"),
            self.vault.now(),
        )
    }

    fn require_content(content: &str) -> Result<()> {
        if content.trim().is_empty() {
            return Err(Error::InvalidArgument { name: "content", reason: "must not be empty".into() });
        }
        Ok(())
    }

    fn require_open(episode: &Episode) -> Result<()> {
        let r = &episode.record;
        let reason = match r.state {
            EpisodeState::Open => return Ok(()),
            EpisodeState::Superseded => format!("it was superseded by {}", r.superseded_by.as_deref().unwrap_or("?")),
            EpisodeState::Revised => format!("it was revised as {}", r.revised_by.as_deref().unwrap_or("?")),
            EpisodeState::Invalidated => "it was invalidated".to_string(),
        };
        Err(Error::EpisodeNotOpen { episode_id: r.id.clone(), reason })
    }

    fn stored(&self, id: &str, receipt: &crate::write::receipts::Receipt) -> Result<EpisodeChanged> {
        let lens = Lens { known_at: None, now: self.vault.now() };
        self.vault.observe_disk()?;
        self.with_episodes(|index, times, _| {
            let seen = index.get(id).and_then(|e| lens.see(e, times));
            EpisodeChanged {
                episode: seen.map(|s| episodes::episode_view(index, &s, &lens, times)),
                receipt: Some(ReceiptSummary::of(receipt)),
                episode_id: None,
                replaced: None,
                proposed: None,
            }
        })
    }

    /// `write_episode`: records a new statement, open from `valid_from` (else `occurred_at`,
    /// else now).
    pub fn write_episode(&self, request: &NewEpisode) -> Result<EpisodeChanged> {
        Self::require_content(&request.content)?;
        let salience = episodes::unit_interval("salience", request.salience)?;
        let confidence = episodes::unit_interval("confidence", request.confidence)?;
        let entities = episodes::clean_entities(&request.entities)?;
        let occurred =
            request.occurred_at.as_deref().filter(|t| !t.trim().is_empty()).map(|t| episodes::parse_time("occurred_at", t)).transpose()?;
        let valid_from =
            request.valid_from.as_deref().filter(|t| !t.trim().is_empty()).map(|t| episodes::parse_time("valid_from", t)).transpose()?;
        let valid_from = valid_from.or(occurred).unwrap_or_else(|| self.vault.now());
        let _writing = lock(&self.writing);
        let (id, op) = (fresh_id(16), fresh_id(16));
        let record = EpisodeRecord {
            id: id.clone(),
            entities,
            source: request.source.clone().filter(|s| !s.trim().is_empty()),
            salience,
            confidence,
            occurred_at: occurred.map(episodes::format_time),
            valid_from: episodes::format_time(valid_from),
            recorded_op: op.clone(),
            ..EpisodeRecord::default()
        };
        let text = self.render(&record, &request.content, "write_episode")?;
        match self.commit("ctxvault.write_episode", &op, vec![(self.episode_path(&id)?, text, None)])? {
            Committed::Written(receipt) => self.stored(&id, &receipt),
            Committed::Proposed(proposal) => Ok(EpisodeChanged::proposed(proposal, &id)),
        }
    }

    /// `confirm_episode`: one more attestation of an open statement.
    pub fn confirm_episode(&self, id: &str, at: Option<&str>, source: Option<&str>) -> Result<EpisodeChanged> {
        let at =
            at.filter(|t| !t.trim().is_empty()).map(|t| episodes::parse_time("at", t)).transpose()?.unwrap_or_else(|| self.vault.now());
        let _writing = lock(&self.writing);
        let (mut episode, sha) = self.load(id)?;
        Self::require_open(&episode)?;
        let op = fresh_id(16);
        episode.record.attestations.push(episodes::Attestation {
            at: episodes::format_time(at),
            source: source.map(str::trim).filter(|s| !s.is_empty()).map(str::to_string),
            op: op.clone(),
        });
        let text = self.render(&episode.record, &episode.content, "confirm_episode")?;
        match self.commit("ctxvault.confirm_episode", &op, vec![(self.episode_path(id)?, text, Some(sha))])? {
            Committed::Written(receipt) => self.stored(id, &receipt),
            Committed::Proposed(proposal) => Ok(EpisodeChanged::proposed(proposal, id)),
        }
    }

    /// `supersede_episode` / `revise_episode`: one transaction writing the closed original and
    /// its replacement.
    pub fn replace_episode(&self, request: &Replacement, revise: bool) -> Result<EpisodeChanged> {
        Self::require_content(&request.content)?;
        let salience = request.salience.map(|s| episodes::unit_interval("salience", s)).transpose()?;
        let entities = episodes::clean_entities(&request.entities)?;
        let _writing = lock(&self.writing);
        let (mut old, old_sha) = self.load(&request.episode_id)?;
        Self::require_open(&old)?;
        let (new_id, op) = (fresh_id(16), fresh_id(16));
        let now = self.vault.now();
        let old_from = episodes::parse_time("valid_from", &old.record.valid_from)?;
        let mut new = EpisodeRecord {
            id: new_id.clone(),
            entities: if entities.is_empty() { old.record.entities.clone() } else { entities },
            source: request.source.clone().filter(|s| !s.trim().is_empty()).or_else(|| old.record.source.clone()),
            salience: salience.unwrap_or(old.record.salience),
            confidence: old.record.confidence,
            occurred_at: if revise { old.record.occurred_at.clone() } else { None },
            recorded_op: op.clone(),
            ..EpisodeRecord::default()
        };
        let (operation, tool) = if revise {
            // The world did not change: same interval, same attestations, open disputes carried.
            new.valid_from = old.record.valid_from.clone();
            new.valid_to = old.record.valid_to.clone();
            new.revises = Some(old.record.id.clone());
            new.attestations = old.record.attestations.clone();
            new.disputes = old.record.disputes.clone();
            old.record.state = EpisodeState::Revised;
            old.record.revised_by = Some(new_id.clone());
            ("ctxvault.revise_episode", "revise_episode")
        } else {
            // The world changed: the old statement ends exactly where the new one begins.
            let begins = episodes::format_time(now.max(old_from));
            new.valid_from = begins.clone();
            new.supersedes = Some(old.record.id.clone());
            old.record.state = EpisodeState::Superseded;
            old.record.valid_to = Some(begins);
            old.record.superseded_by = Some(new_id.clone());
            ("ctxvault.supersede_episode", "supersede_episode")
        };
        old.record.closed_op = Some(op.clone());
        let old_text = self.render(&old.record, &old.content, tool)?;
        let new_text = self.render(&new, &request.content, tool)?;
        let notes = vec![(self.episode_path(&old.record.id)?, old_text, Some(old_sha)), (self.episode_path(&new_id)?, new_text, None)];
        match self.commit(operation, &op, notes)? {
            Committed::Written(receipt) => Ok(EpisodeChanged { replaced: Some(old.record.id), ..self.stored(&new_id, &receipt)? }),
            Committed::Proposed(proposal) => {
                Ok(EpisodeChanged { replaced: Some(old.record.id), ..EpisodeChanged::proposed(proposal, &new_id) })
            }
        }
    }

    /// `invalidate_episode`: closes an open statement at `valid_to` (default now).
    pub fn invalidate_episode(&self, id: &str, valid_to: Option<&str>, reason: &str) -> Result<EpisodeChanged> {
        let valid_to = valid_to.filter(|t| !t.trim().is_empty()).map(|t| episodes::parse_time("valid_to", t)).transpose()?;
        let _writing = lock(&self.writing);
        let (mut episode, sha) = self.load(id)?;
        Self::require_open(&episode)?;
        let from = episodes::parse_time("valid_from", &episode.record.valid_from)?;
        let to = valid_to.unwrap_or_else(|| self.vault.now());
        if to < from {
            return Err(Error::InvalidArgument {
                name: "valid_to",
                reason: format!("{} is before the episode's valid_from {}", episodes::format_time(to), episode.record.valid_from),
            });
        }
        let op = fresh_id(16);
        episode.record.state = EpisodeState::Invalidated;
        episode.record.valid_to = Some(episodes::format_time(to));
        episode.record.invalidation_reason = reason.trim().to_string();
        episode.record.closed_op = Some(op.clone());
        let text = self.render(&episode.record, &episode.content, "invalidate_episode")?;
        match self.commit("ctxvault.invalidate_episode", &op, vec![(self.episode_path(id)?, text, Some(sha))])? {
            Committed::Written(receipt) => self.stored(id, &receipt),
            Committed::Proposed(proposal) => Ok(EpisodeChanged::proposed(proposal, id)),
        }
    }

    /// `dispute_episodes`: flags two open statements with each other (one two-note transaction).
    pub fn dispute_episodes(&self, id: &str, other_id: &str, note: &str) -> Result<EpisodesDisputed> {
        if id == other_id {
            return Err(Error::InvalidArgument { name: "other_id", reason: "an episode cannot dispute itself".into() });
        }
        let _writing = lock(&self.writing);
        let (mut one, one_sha) = self.load(id)?;
        let (mut other, other_sha) = self.load(other_id)?;
        Self::require_open(&one)?;
        Self::require_open(&other)?;
        let op = fresh_id(16);
        let note = note.trim().to_string();
        one.record.disputes.push(episodes::Dispute { with: other_id.to_string(), note: note.clone(), op: op.clone() });
        other.record.disputes.push(episodes::Dispute { with: id.to_string(), note, op: op.clone() });
        let notes = vec![
            (self.episode_path(id)?, self.render(&one.record, &one.content, "dispute_episodes")?, Some(one_sha)),
            (self.episode_path(other_id)?, self.render(&other.record, &other.content, "dispute_episodes")?, Some(other_sha)),
        ];
        let receipt = match self.commit("ctxvault.dispute_episodes", &op, notes)? {
            Committed::Written(receipt) => receipt,
            Committed::Proposed(proposal) => {
                return Ok(EpisodesDisputed {
                    episodes: Vec::new(),
                    receipt: None,
                    episode_ids: Some(vec![id.to_string(), other_id.to_string()]),
                    proposed: Some(proposal),
                });
            }
        };
        let first = self.stored(id, &receipt)?;
        let second = self.stored(other_id, &receipt)?;
        Ok(EpisodesDisputed { episodes: vec![first.episode, second.episode], receipt: first.receipt, episode_ids: None, proposed: None })
    }

    /// `episode_history`: every version of the statement, oldest first.
    pub fn episode_history(&self, id: &str) -> Result<EpisodeHistory> {
        if !plain_id(id) {
            return Err(not_found(id));
        }
        let lens = Lens { known_at: None, now: self.vault.now() };
        self.with_episodes(|index, times, _| {
            if index.get(id).is_none() {
                return Err(not_found(id));
            }
            let versions: Vec<episodes::EpisodeView> = index
                .chain(id)
                .into_iter()
                .filter_map(|e| lens.see(e, times))
                .map(|s| episodes::episode_view(index, &s, &lens, times))
                .collect();
            Ok(EpisodeHistory {
                episode_id: id.to_string(),
                count: versions.len(),
                chain: versions.clone(),
                versions,
                untrusted: Untrusted::marks(),
            })
        })?
    }

    /// `query_episodes`.
    pub fn query_episodes(&self, request: &EpisodeQuery) -> Result<EpisodeMatches> {
        let max = self.policy().episodes_limit_max.max(1);
        if request.limit == 0 || request.limit > max {
            return Err(Error::InvalidArgument { name: "limit", reason: format!("must be between 1 and {max}") });
        }
        let order = request.order_by.as_deref().map(str::trim).filter(|o| !o.is_empty());
        if let Some(order) = order
            && !EPISODE_ORDERS.contains(&order)
        {
            return Err(Error::InvalidArgument {
                name: "order_by",
                reason: format!("'{order}' is not one of {}", EPISODE_ORDERS.join(", ")),
            });
        }
        let valid_at =
            request.valid_at.as_deref().filter(|t| !t.trim().is_empty()).map(|t| episodes::parse_time("valid_at", t)).transpose()?;
        let known_at =
            request.known_at.as_deref().filter(|t| !t.trim().is_empty()).map(|t| episodes::parse_time("known_at", t)).transpose()?;
        let wanted: Vec<String> = episodes::clean_entities(&request.entities)?.iter().map(|e| e.to_lowercase()).collect();
        let query = request.query.trim().to_string();
        // Ranking by the vault's search (before the cache lock: search reads the index).
        let ranking = if query.is_empty() { None } else { Some(self.rank(&query)) };
        let order = order.map_or(if ranking.is_some() { "relevance" } else { "newest" }, canonical_order);
        let lens = Lens { known_at, now: self.vault.now() };
        // The common question (no knowledge time, no query text, newest first) is answered
        // from the index: counted in O(log n) (or over the named entities' versions), and
        // only the returned versions are viewed.
        let indexed = known_at.is_none() && ranking.is_none() && order == "newest";
        let filter = match (request.include_closed, valid_at) {
            (true, _) => episodes::TimeFilter::All,
            (false, Some(t)) => episodes::TimeFilter::CurrentAt(t),
            (false, None) => episodes::TimeFilter::HoldsAt(lens.now),
        };
        self.with_episodes(|index, times, unreadable| {
            let (total, page): (usize, Vec<episodes::Seen<'_>>) = if indexed {
                let (total, top) = Self::newest_matching(index, times, &wanted, filter, request.limit);
                (total, top.into_iter().filter_map(|e| lens.see(e, times)).collect())
            } else {
                let matched = Self::matching_in_order(index, times, &lens, &wanted, request, valid_at, order, ranking.as_ref());
                (matched.len(), matched.into_iter().take(request.limit).collect())
            };
            let episodes: Vec<episodes::EpisodeView> = page.iter().map(|s| episodes::episode_view(index, s, &lens, times)).collect();
            let ranking = match &ranking {
                None => EpisodeRanking {
                    method: "none".into(),
                    order_by: order.to_string(),
                    fallback_reason: None,
                    ranked_candidates: None,
                    unranked_order: None,
                },
                Some(r) => EpisodeRanking {
                    method: r.method.clone(),
                    order_by: order.to_string(),
                    fallback_reason: Some(r.fallback_reason.clone()),
                    ranked_candidates: Some(r.ranks.len()),
                    unranked_order: Some("newest".into()),
                },
            };
            EpisodeMatches {
                count: episodes.len(),
                total_matching: total,
                truncated: total > episodes.len(),
                results: episodes.clone(),
                episodes,
                valid_at: valid_at.map(episodes::format_time),
                known_at: known_at.map(episodes::format_time),
                include_closed: request.include_closed,
                order_by: ranking.order_by.clone(),
                ranking,
                unreadable_episode_notes: unreadable,
                untrusted: Untrusted::marks(),
            }
        })
    }

    /// The unqualified view's versions naming one of `wanted` (any when empty) that pass
    /// `filter`: how many, and the first `limit` of them newest first.
    fn newest_matching<'a>(
        index: &'a EpisodeIndex,
        times: &KnownTimes,
        wanted: &'a [String],
        filter: episodes::TimeFilter,
        limit: usize,
    ) -> (usize, Vec<&'a Episode>) {
        if wanted.is_empty() {
            let total = index.count(filter);
            let top: Vec<&Episode> = index.newest_first().filter(|e| e.passes(filter)).take(limit.min(total)).map(Arc::as_ref).collect();
            return (total, top);
        }
        let mut matched: Vec<(Option<DateTime<Utc>>, &Episode)> = index
            .candidates(wanted)
            .filter(|e| episodes::names_any(&e.record, wanted) && e.passes(filter))
            .map(|e| (times.of(&e.record.recorded_op), e.as_ref()))
            .collect();
        let total = matched.len();
        let newest = |a: &(Option<DateTime<Utc>>, &Episode), b: &(Option<DateTime<Utc>>, &Episode)| {
            b.0.cmp(&a.0).then_with(|| b.1.record.id.cmp(&a.1.record.id))
        };
        if matched.len() > limit {
            matched.select_nth_unstable_by(limit, newest);
            matched.truncate(limit);
        }
        matched.sort_by(newest);
        (total, matched.into_iter().map(|(_, e)| e).collect())
    }

    /// Every version a query keeps, viewed through `lens`, in `order` (the general path: a
    /// knowledge time, a query text or an order other than newest).
    #[allow(clippy::too_many_arguments)]
    fn matching_in_order<'a>(
        index: &'a EpisodeIndex,
        times: &KnownTimes,
        lens: &Lens,
        wanted: &'a [String],
        request: &EpisodeQuery,
        valid_at: Option<DateTime<Utc>>,
        order: &str,
        ranking: Option<&Ranking>,
    ) -> Vec<episodes::Seen<'a>> {
        let mut matched: Vec<episodes::Seen<'_>> = index
            .candidates(wanted)
            .filter(|e| episodes::names_any(&e.record, wanted))
            .filter_map(|e| lens.see(e, times))
            .filter(|s| match valid_at {
                Some(t) => request.include_closed || s.current_at(t),
                None => request.include_closed || s.holds(lens.reference()),
            })
            .collect();
        let newest = |a: &episodes::Seen<'_>, b: &episodes::Seen<'_>| {
            b.recorded_at.cmp(&a.recorded_at).then_with(|| b.episode.record.id.cmp(&a.episode.record.id))
        };
        let rank_of = |s: &episodes::Seen<'_>| ranking.as_ref().and_then(|r| r.ranks.get(&s.episode.path).copied()).unwrap_or(usize::MAX);
        match order {
            "relevance" => matched.sort_by(|a, b| rank_of(a).cmp(&rank_of(b)).then_with(|| newest(a, b))),
            "oldest" => matched.sort_by(|a, b| newest(b, a)),
            "valid_from" => matched.sort_by(|a, b| b.valid_from.cmp(&a.valid_from).then_with(|| newest(a, b))),
            "salience" => {
                matched.sort_by(|a, b| b.episode.record.salience.total_cmp(&a.episode.record.salience).then_with(|| newest(a, b)))
            }
            "confidence" => {
                matched.sort_by(|a, b| b.episode.record.confidence.total_cmp(&a.episode.record.confidence).then_with(|| newest(a, b)))
            }
            _ => matched.sort_by(newest),
        }
        matched
    }

    /// Ranks episode notes by the vault's search (its `auto` mode: hybrid with a dense index,
    /// else fts), scoped to the episodes folder.
    fn rank(&self, query: &str) -> Ranking {
        let folder = self.policy().episodes_folder.trim_end_matches('/').to_string();
        let policy = self.vault.policy();
        let request = crate::search::SearchRequest {
            query: query.to_string(),
            max_results: policy.policy.search.max_results_cap,
            search_mode: crate::search::SearchMode::Auto,
            temporal_view: crate::search::TemporalView::All,
            as_of: self.vault.today(),
            domain: Some(folder),
            auto_priority: Vec::new(),
        };
        match crate::search::search(self.vault.root(), policy, request) {
            Ok(envelope) => {
                let mut ranks = HashMap::new();
                for (i, r) in envelope.results.iter().enumerate() {
                    ranks.entry(r.source.path.clone()).or_insert(i);
                }
                Ranking { method: envelope.actual_mode.to_string(), fallback_reason: envelope.fallback_reason, ranks }
            }
            Err(error) => Ranking { method: "none".into(), fallback_reason: Some(error.code().to_string()), ranks: HashMap::new() },
        }
    }

    /// `list_entities`.
    pub fn list_entities(&self, include_closed: bool, valid_at: Option<&str>, min_episodes: i64) -> Result<EntityList> {
        if min_episodes < 1 {
            return Err(Error::InvalidArgument { name: "min_episodes", reason: "must be at least 1".into() });
        }
        let valid_at = valid_at.filter(|t| !t.trim().is_empty()).map(|t| episodes::parse_time("valid_at", t)).transpose()?;
        let lens = Lens { known_at: None, now: self.vault.now() };
        let filter = match (include_closed, valid_at) {
            (true, _) => episodes::TimeFilter::All,
            (false, Some(t)) => episodes::TimeFilter::CurrentAt(t),
            (false, None) => episodes::TimeFilter::HoldsAt(lens.now),
        };
        self.with_episodes(|index, _, _| {
            let kept = index.by_id.values().filter(|e| e.passes(filter)).map(|e| &e.record);
            let counts = episodes::entity_counts(kept, min_episodes as usize);
            EntityList {
                count: counts.len(),
                total: counts.len(),
                entities: counts
                    .into_iter()
                    .map(|group| EntityCount {
                        entity_norm: group.norm,
                        entity: group.entity,
                        spellings: group.spellings,
                        episodes: group.episodes,
                        episode_count: group.episodes,
                    })
                    .collect(),
                include_closed,
                valid_at: valid_at.map(episodes::format_time),
                min_episodes,
                untrusted: Untrusted::marks(),
            }
        })
    }
}

/// A query's ranking by the vault's search.
struct Ranking {
    method: String,
    fallback_reason: Option<String>,
    /// Note path → rank (0 = best).
    ranks: HashMap<String, usize>,
}
