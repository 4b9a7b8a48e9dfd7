//! Bitemporal episodes (ctxvault's episodic vaults) as Markdown notes.
//!
//! An episode is one note `<episodes_folder>/<id[0..2]>/<id>.md`: OKF frontmatter, an
//! `episode:` block (entities, salience, confidence, valid time, links, attestations,
//! disputes) and the statement as the body. Two clocks:
//! - **valid time**: `valid_from` .. `valid_to` (open-ended when null), when the statement holds
//!   in the world; `occurred_at` when it happened, as told.
//! - **knowledge time**: when the vault learned each fact, which is the commit time (`at`) of the
//!   receipt of the transaction that recorded it (`known_times`). A note names the op of each
//!   fact (`recorded_op`, `closed_op`, each attestation's and dispute's `op`).
//!
//! Rules (docs/memory.md): supersede closes the old version exactly where the new one begins
//! (one two-note transaction) and links both; revise opens where the original did, inherits its
//! attestations and open disputes, and takes the original out of the current view; invalidate
//! closes without deleting; dispute flags two open statements with each other until one side is
//! superseded or invalidated; confirm adds an attestation. A query `as of` a knowledge time sees
//! only facts whose receipts are not later than it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::known_times::KnownTimes;
use crate::error::{Error, Result};

/// Lifecycle state of one version (a new version is `Open`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeState {
    #[default]
    Open,
    Superseded,
    Revised,
    Invalidated,
}

impl EpisodeState {
    pub fn name(self) -> &'static str {
        match self {
            EpisodeState::Open => "open",
            EpisodeState::Superseded => "superseded",
            EpisodeState::Revised => "revised",
            EpisodeState::Invalidated => "invalidated",
        }
    }
}

/// One more assertion of a statement (`confirm_episode`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attestation {
    pub at: String,
    #[serde(default)]
    pub source: Option<String>,
    pub op: String,
}

/// A recorded conflict with another statement (`dispute_episodes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispute {
    pub with: String,
    #[serde(default)]
    pub note: String,
    pub op: String,
}

/// The `episode:` block of an episode note. Its `Default` is the life-cycle of a new version
/// (open, nothing closed, linked, attested or disputed); a writer sets the statement's fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    pub id: String,
    #[serde(default)]
    pub entities: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
    pub salience: f64,
    pub confidence: f64,
    #[serde(default)]
    pub occurred_at: Option<String>,
    pub valid_from: String,
    #[serde(default)]
    pub valid_to: Option<String>,
    pub state: EpisodeState,
    #[serde(default)]
    pub supersedes: Option<String>,
    #[serde(default)]
    pub superseded_by: Option<String>,
    #[serde(default)]
    pub revises: Option<String>,
    #[serde(default)]
    pub revised_by: Option<String>,
    #[serde(default)]
    pub invalidation_reason: String,
    /// The op that recorded this version; its receipt time is when the vault learned it.
    pub recorded_op: String,
    /// The op that closed it (supersede, revise or invalidate).
    #[serde(default)]
    pub closed_op: Option<String>,
    #[serde(default)]
    pub attestations: Vec<Attestation>,
    #[serde(default)]
    pub disputes: Vec<Dispute>,
}

/// One episode version as stored: its note path, statement and record.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    pub path: String,
    pub content: String,
    pub record: EpisodeRecord,
    /// `record.valid_from` and `record.valid_to` parsed once, when the note was read.
    pub valid_from_at: Option<DateTime<Utc>>,
    pub valid_to_at: Option<DateTime<Utc>>,
}

/// Parses a caller's time: RFC 3339 (any offset), `YYYY-MM-DDTHH:MM[:SS[.f]]` (UTC) or
/// `YYYY-MM-DD` (midnight UTC).
pub(crate) fn parse_time(name: &'static str, text: &str) -> Result<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc());
    }
    Err(Error::InvalidArgument {
        name,
        reason: format!("'{}' is not an ISO 8601 date or date-time", text.chars().take(64).collect::<String>()),
    })
}

/// The stored spelling of a time (RFC 3339, UTC, `Z`).
pub(crate) fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A stored time (unparseable text, e.g. after a hand edit, reads as absent).
fn stored_time(text: Option<&str>) -> Option<DateTime<Utc>> {
    text.and_then(|t| parse_time("stored", t).ok())
}

/// Which moment a query looks from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lens {
    /// Only facts whose receipts are at or before this (None: everything recorded).
    pub known_at: Option<DateTime<Utc>>,
    /// "Now": the reference of "still holds".
    pub now: DateTime<Utc>,
}

/// An episode version as a lens sees it.
#[derive(Debug, Clone)]
pub(crate) struct Seen<'a> {
    pub episode: &'a Episode,
    pub recorded_at: Option<DateTime<Utc>>,
    pub state: EpisodeState,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_to: Option<DateTime<Utc>>,
    pub superseded_by: Option<&'a str>,
    pub revised_by: Option<&'a str>,
    pub attestations: Vec<&'a Attestation>,
    pub disputes: Vec<&'a Dispute>,
}

/// Every episode version of a vault, by id, and the versions naming each entity (lower case),
/// kept current one version at a time (`insert` / `remove`), with what the unqualified view
/// (no `known_at`: everything recorded) needs to count and order without visiting every
/// version: the "newest" order and the valid-time bounds.
#[derive(Debug, Default, Clone)]
pub(crate) struct EpisodeIndex {
    pub by_id: HashMap<String, Arc<Episode>>,
    pub by_entity: HashMap<String, Vec<Arc<Episode>>>,
    /// (knowledge time, id) of every version: "newest" first when iterated in reverse.
    newest: BTreeSet<(Option<DateTime<Utc>>, String)>,
    /// id → the knowledge time it is filed under in `newest`.
    filed_at: HashMap<String, Option<DateTime<Utc>>>,
    /// recorded op → id (a version is filed again when its receipt is read after it).
    by_recorded_op: HashMap<String, String>,
    valid: ValidTimes,
}

/// Sorted valid-time bounds of the unqualified view, for counting in O(log n).
#[derive(Debug, Default, Clone)]
struct ValidTimes {
    /// `valid_from` of every version that can be current at some valid time (not revised, and
    /// not ending before it begins); `None` (unreadable) sorts first: always begun.
    starts: Vec<Option<DateTime<Utc>>>,
    /// The ends of those versions that have one.
    ends: Vec<DateTime<Utc>>,
    /// Open versions (they hold now).
    open: usize,
    /// The ends of invalidated versions (they hold until then).
    invalidated_ends: Vec<DateTime<Utc>>,
}

fn insert_sorted<T: Ord>(list: &mut Vec<T>, value: T) {
    let at = list.partition_point(|v| *v < value);
    list.insert(at, value);
}

fn remove_sorted<T: Ord>(list: &mut Vec<T>, value: &T) {
    let at = list.partition_point(|v| v < value);
    if list.get(at) == Some(value) {
        list.remove(at);
    }
}

impl ValidTimes {
    fn apply(&mut self, episode: &Episode, add: bool) {
        let state = episode.record.state;
        let to = episode.closed_valid_to();
        let from = episode.valid_from_at;
        let well_formed = match (from, to) {
            (Some(from), Some(to)) => from <= to,
            _ => true,
        };
        if state != EpisodeState::Revised && well_formed {
            if add {
                insert_sorted(&mut self.starts, from);
                if let Some(to) = to {
                    insert_sorted(&mut self.ends, to);
                }
            } else {
                remove_sorted(&mut self.starts, &from);
                if let Some(to) = to {
                    remove_sorted(&mut self.ends, &to);
                }
            }
        }
        match (state, to) {
            (EpisodeState::Open, _) if add => self.open += 1,
            (EpisodeState::Open, _) => self.open = self.open.saturating_sub(1),
            (EpisodeState::Invalidated, Some(to)) if add => insert_sorted(&mut self.invalidated_ends, to),
            (EpisodeState::Invalidated, Some(to)) => remove_sorted(&mut self.invalidated_ends, &to),
            _ => {}
        }
    }

    /// Versions current at valid time `at` (`Seen::current_at` under the unqualified view).
    fn current_at(&self, at: DateTime<Utc>) -> usize {
        let begun = self.starts.partition_point(|from| *from <= Some(at));
        let ended = self.ends.partition_point(|to| *to <= at);
        begun.saturating_sub(ended)
    }

    /// Versions that still hold at `at` (`Seen::holds` under the unqualified view).
    fn holding_at(&self, at: DateTime<Utc>) -> usize {
        self.open + self.invalidated_ends.len() - self.invalidated_ends.partition_point(|to| *to <= at)
    }
}

/// Which versions a query keeps, by time (the unqualified view's filters of `query_episodes`
/// and `list_entities`).
#[derive(Debug, Clone, Copy)]
pub enum TimeFilter {
    /// Every version (`include_closed`).
    All,
    /// The versions current at this valid time.
    CurrentAt(DateTime<Utc>),
    /// The versions that still hold at this moment.
    HoldsAt(DateTime<Utc>),
}

impl Episode {
    /// `valid_to` as the unqualified view sees it: only a closed version has an end.
    pub(crate) fn closed_valid_to(&self) -> Option<DateTime<Utc>> {
        if self.record.state == EpisodeState::Open { None } else { self.valid_to_at }
    }

    /// Whether the unqualified view keeps this version under `filter` (the same answer as
    /// `Lens { known_at: None, .. }.see(self)` followed by `Seen::current_at` / `Seen::holds`,
    /// without building the view).
    pub fn passes(&self, filter: TimeFilter) -> bool {
        let state = self.record.state;
        match filter {
            TimeFilter::All => true,
            TimeFilter::CurrentAt(at) => {
                state != EpisodeState::Revised
                    && self.valid_from_at.is_none_or(|from| from <= at)
                    && self.closed_valid_to().is_none_or(|to| at < to)
            }
            TimeFilter::HoldsAt(at) => match state {
                EpisodeState::Open => true,
                EpisodeState::Invalidated => self.closed_valid_to().is_some_and(|to| to > at),
                EpisodeState::Superseded | EpisodeState::Revised => false,
            },
        }
    }
}

impl Lens {
    fn knows(&self, times: &KnownTimes, op: &str) -> bool {
        match self.known_at {
            None => true,
            Some(k) => times.of(op).is_some_and(|t| t <= k),
        }
    }

    /// The version as known through this lens (`None`: not yet recorded then).
    pub fn see<'a>(&self, episode: &'a Episode, times: &KnownTimes) -> Option<Seen<'a>> {
        let r = &episode.record;
        if !self.knows(times, &r.recorded_op) {
            return None;
        }
        let closed = r.state != EpisodeState::Open && r.closed_op.as_deref().is_none_or(|op| self.knows(times, op));
        let (state, valid_to, superseded_by, revised_by) = if closed {
            (r.state, episode.valid_to_at, r.superseded_by.as_deref(), r.revised_by.as_deref())
        } else {
            (EpisodeState::Open, None, None, None)
        };
        Some(Seen {
            episode,
            recorded_at: times.of(&r.recorded_op),
            state,
            valid_from: episode.valid_from_at,
            valid_to,
            superseded_by,
            revised_by,
            attestations: r.attestations.iter().filter(|a| self.knows(times, &a.op)).collect(),
            disputes: r.disputes.iter().filter(|d| self.knows(times, &d.op)).collect(),
        })
    }

    /// The reference moment of "still holds": the knowledge time when one is given, else now.
    pub fn reference(&self) -> DateTime<Utc> {
        self.known_at.unwrap_or(self.now)
    }
}

impl Seen<'_> {
    /// Whether the statement still holds at `at`: not replaced, and not ended by then.
    pub fn holds(&self, at: DateTime<Utc>) -> bool {
        match self.state {
            EpisodeState::Open => true,
            EpisodeState::Invalidated => self.valid_to.is_some_and(|to| to > at),
            EpisodeState::Superseded | EpisodeState::Revised => false,
        }
    }

    /// Whether this version is what the vault states for valid time `at` (revised originals
    /// never are: their revision states the same interval better).
    pub(crate) fn current_at(&self, at: DateTime<Utc>) -> bool {
        self.state != EpisodeState::Revised && self.valid_from.is_none_or(|from| from <= at) && self.valid_to.is_none_or(|to| at < to)
    }
}

impl EpisodeIndex {
    /// Adds a version (replacing one with the same id).
    pub fn insert(&mut self, episode: Arc<Episode>, times: &KnownTimes) {
        let id = episode.record.id.clone();
        self.remove(&id);
        let mut names: Vec<String> = episode.record.entities.iter().map(|e| e.to_lowercase()).collect();
        names.sort();
        names.dedup();
        for name in names {
            self.by_entity.entry(name).or_default().push(Arc::clone(&episode));
        }
        let known = times.of(&episode.record.recorded_op);
        self.newest.insert((known, id.clone()));
        self.filed_at.insert(id.clone(), known);
        self.by_recorded_op.insert(episode.record.recorded_op.clone(), id.clone());
        self.valid.apply(&episode, true);
        self.by_id.insert(id, episode);
    }

    /// Removes version `id` (nothing when absent).
    pub fn remove(&mut self, id: &str) {
        let Some(episode) = self.by_id.remove(id) else { return };
        for name in episode.record.entities.iter().map(|e| e.to_lowercase()) {
            if let Some(list) = self.by_entity.get_mut(&name) {
                list.retain(|e| e.record.id != id);
                if list.is_empty() {
                    self.by_entity.remove(&name);
                }
            }
        }
        if let Some(known) = self.filed_at.remove(id) {
            self.newest.remove(&(known, id.to_string()));
        }
        if self.by_recorded_op.get(&episode.record.recorded_op).is_some_and(|owner| owner == id) {
            self.by_recorded_op.remove(&episode.record.recorded_op);
        }
        self.valid.apply(&episode, false);
    }

    /// Files again, under their knowledge time now, the versions recorded by `ops` (their
    /// receipts were read after the versions were indexed); `None`: every version.
    pub(crate) fn refile(&mut self, ops: Option<&[String]>, times: &KnownTimes) {
        let ids: Vec<String> = match ops {
            Some(ops) => ops.iter().filter_map(|op| self.by_recorded_op.get(op).cloned()).collect(),
            None => self.by_id.keys().cloned().collect(),
        };
        for id in ids {
            let Some(episode) = self.by_id.get(&id) else { continue };
            let known = times.of(&episode.record.recorded_op);
            if let Some(old) = self.filed_at.insert(id.clone(), known) {
                self.newest.remove(&(old, id.clone()));
            }
            self.newest.insert((known, id));
        }
    }

    /// How many versions the unqualified view keeps under `filter`, in O(log n).
    pub fn count(&self, filter: TimeFilter) -> usize {
        match filter {
            TimeFilter::All => self.by_id.len(),
            TimeFilter::CurrentAt(at) => self.valid.current_at(at),
            TimeFilter::HoldsAt(at) => self.valid.holding_at(at),
        }
    }

    /// Every version, newest first (by knowledge time, then id, descending: `query_episodes`'
    /// "newest" order).
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &Arc<Episode>> + '_ {
        self.newest.iter().rev().filter_map(|(_, id)| self.by_id.get(id))
    }

    /// The versions that may name one of `wanted_lower` (every version when it is empty), each
    /// once.
    pub fn candidates<'a>(&'a self, wanted_lower: &'a [String]) -> Box<dyn Iterator<Item = &'a Arc<Episode>> + 'a> {
        if wanted_lower.is_empty() {
            return Box::new(self.by_id.values());
        }
        let mut seen = std::collections::HashSet::new();
        Box::new(wanted_lower.iter().filter_map(|w| self.by_entity.get(w)).flatten().filter(move |e| seen.insert(e.record.id.as_str())))
    }

    pub fn get(&self, id: &str) -> Option<&Episode> {
        self.by_id.get(id).map(Arc::as_ref)
    }

    /// Follows `revised_by` (as the lens sees it) to the version that states `id` now.
    pub(crate) fn head_by_revision<'a>(&'a self, id: &'a str, lens: &Lens, times: &KnownTimes) -> Option<Seen<'a>> {
        let mut current = lens.see(self.get(id)?, times)?;
        for _ in 0..10_000 {
            match current.revised_by.and_then(|next| self.get(next)).and_then(|e| lens.see(e, times)) {
                Some(next) => current = next,
                None => break,
            }
        }
        Some(current)
    }

    /// The ids of the open statements this one is disputed with (open disputes only: a dispute
    /// ends when either side is superseded or invalidated; a revision carries it on).
    pub fn disputed_with(&self, seen: &Seen<'_>, lens: &Lens, times: &KnownTimes) -> Vec<String> {
        let reference = lens.reference();
        if !seen.holds(reference) {
            return Vec::new();
        }
        let mut out: Vec<String> = Vec::new();
        let mut consider = |other_id: &str| {
            if let Some(other) = self.head_by_revision(other_id, lens, times)
                && other.episode.record.id != seen.episode.record.id
                && other.holds(reference)
                && !out.contains(&other.episode.record.id)
            {
                out.push(other.episode.record.id.clone());
            }
        };
        for dispute in &seen.disputes {
            consider(&dispute.with);
        }
        out.sort();
        out
    }

    /// Every version of the statement `id` belongs to, oldest first (by the chain of
    /// supersedes / revises links).
    pub fn chain(&self, id: &str) -> Vec<&Episode> {
        let Some(mut first) = self.get(id) else { return Vec::new() };
        let mut guard = 0;
        while let Some(previous) = first.record.supersedes.as_deref().or(first.record.revises.as_deref()).and_then(|p| self.get(p)) {
            first = previous;
            guard += 1;
            if guard > 100_000 {
                break;
            }
        }
        let mut out = vec![first];
        let mut current = first;
        while let Some(next) = current.record.superseded_by.as_deref().or(current.record.revised_by.as_deref()).and_then(|n| self.get(n)) {
            if out.iter().any(|e| e.record.id == next.record.id) {
                break;
            }
            out.push(next);
            current = next;
        }
        out
    }
}

/// One episode version as a query sees it (what every episode tool answers).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EpisodeView {
    /// The version's id (32 lower-case hex digits).
    pub id: String,
    /// The statement.
    pub content: String,
    /// The entities it is about, as written.
    pub entities: Vec<String>,
    /// Where it came from, as told.
    pub source: Option<String>,
    /// How much it matters, 0 to 1.
    pub salience: f64,
    /// How sure the writer was, 0 to 1.
    pub confidence: f64,
    /// When it happened, as told.
    pub occurred_at: Option<String>,
    /// When it began to hold in the world.
    pub valid_from: String,
    /// When it stopped holding in the world (null: open-ended).
    pub valid_to: Option<String>,
    /// When the vault learned it (its receipt's commit time).
    pub known_at: Option<String>,
    /// `known_at` under ctxvault 0.8.1's name.
    pub recorded_at: Option<String>,
    /// When the vault learned it no longer holds (null while open).
    pub closed_known_at: Option<String>,
    /// `closed_known_at` under ctxvault 0.8.1's name.
    pub invalidated_at: Option<String>,
    /// Its lifecycle state as this query sees it.
    pub state: EpisodeState,
    /// Whether it holds now (or at the query's knowledge time).
    pub current: bool,
    /// The version it replaced (supersede).
    pub supersedes: Option<String>,
    /// The version that replaced it (supersede).
    pub superseded_by: Option<String>,
    /// The version it restates (revise).
    pub revises: Option<String>,
    /// The version that restates it (revise).
    pub revised_by: Option<String>,
    /// Why it was invalidated ("" unless invalidated).
    pub invalidation_reason: String,
    /// How many times it was asserted (the first time included).
    pub attestations: usize,
    /// Each later assertion (`confirm_episode`).
    pub attested_at: Vec<AttestedAt>,
    /// The open statements it is disputed with, by id.
    pub disputed_with: Vec<String>,
    /// The episode note's vault path.
    pub path: String,
}

/// One later assertion of an episode.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct AttestedAt {
    /// When it was asserted again.
    pub at: String,
    /// Who or what asserted it.
    pub source: Option<String>,
}

/// The view of `seen` every episode tool answers.
pub(crate) fn episode_view(index: &EpisodeIndex, seen: &Seen<'_>, lens: &Lens, times: &KnownTimes) -> EpisodeView {
    let r = &seen.episode.record;
    let closed_known_at =
        if seen.state == EpisodeState::Open { None } else { r.closed_op.as_deref().and_then(|op| times.of(op)).map(format_time) };
    let known_at = seen.recorded_at.map(format_time);
    EpisodeView {
        id: r.id.clone(),
        content: seen.episode.content.clone(),
        entities: r.entities.clone(),
        source: r.source.clone(),
        salience: r.salience,
        confidence: r.confidence,
        occurred_at: r.occurred_at.clone(),
        valid_from: r.valid_from.clone(),
        valid_to: seen.valid_to.map(format_time),
        recorded_at: known_at.clone(),
        known_at,
        invalidated_at: closed_known_at.clone(),
        closed_known_at,
        state: seen.state,
        current: seen.holds(lens.reference()),
        supersedes: r.supersedes.clone(),
        superseded_by: seen.superseded_by.map(str::to_string),
        revises: r.revises.clone(),
        revised_by: seen.revised_by.map(str::to_string),
        invalidation_reason: if seen.state == EpisodeState::Invalidated { r.invalidation_reason.clone() } else { String::new() },
        attestations: 1 + seen.attestations.len(),
        attested_at: seen.attestations.iter().map(|a| AttestedAt { at: a.at.clone(), source: a.source.clone() }).collect(),
        disputed_with: index.disputed_with(seen, lens, times),
        path: seen.episode.path.clone(),
    }
}

/// One entity of `list_entities`: every spelling of one normalised (lower-case) name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntityGroup {
    /// The lower-case key entities are matched on (as `query_episodes` matches them).
    pub norm: String,
    /// The spelling used by the most episodes (the first in byte order on a tie).
    pub entity: String,
    /// Every spelling seen, in byte order.
    pub spellings: Vec<String>,
    /// How many episodes name the entity in any spelling (an episode counts once).
    pub episodes: usize,
}

/// Entity counts for `list_entities`: one row per normalised name, counted across its
/// spellings (as `query_episodes` matches entities), alphabetical by that name, never ranked.
pub(crate) fn entity_counts<'a>(records: impl Iterator<Item = &'a EpisodeRecord>, min_episodes: usize) -> Vec<EntityGroup> {
    // norm → (episodes naming it, episodes per spelling).
    let mut by_norm: std::collections::BTreeMap<String, (usize, std::collections::BTreeMap<&'a str, usize>)> =
        std::collections::BTreeMap::new();
    for record in records {
        let mut counted: Vec<String> = Vec::new();
        for (i, entity) in record.entities.iter().enumerate() {
            let norm = entity.to_lowercase();
            let group = by_norm.entry(norm.clone()).or_default();
            if !record.entities[..i].contains(entity) {
                *group.1.entry(entity.as_str()).or_default() += 1;
            }
            if !counted.contains(&norm) {
                group.0 += 1;
                counted.push(norm);
            }
        }
    }
    by_norm
        .into_iter()
        .filter(|(_, (n, _))| *n >= min_episodes.max(1))
        .map(|(norm, (episodes, spellings))| {
            // The most used spelling; on a tie the first in byte order (max_by_key keeps the last maximum).
            let entity = spellings.iter().rev().max_by_key(|(_, n)| **n).map(|(s, _)| s.to_string()).unwrap_or_else(|| norm.clone());
            EntityGroup { norm, entity, spellings: spellings.keys().map(|s| s.to_string()).collect(), episodes }
        })
        .collect()
}

/// Renders an episode note: OKF frontmatter, the `episode:` block, the statement as body.
pub fn render_note(note_type: &str, record: &EpisodeRecord, content: &str, operation_source: &str, now: DateTime<Utc>) -> Result<String> {
    let body = format!("\n{content}\n");
    let one_line: String = content.split_whitespace().collect::<Vec<_>>().join(" ");
    let title: String = one_line.chars().take(80).collect();
    let description: String = one_line.chars().take(150).collect();
    let block = super::frontmatter_block("episode", record, "episode")?;
    let quote = crate::note::yaml_edit::quoted;
    Ok(format!(
        "---\ntype: {}\ntitle: {}\ndescription: {}\ntags: [\"episode\"]\nokf_version: \"0.2\"\nmemory:\n  kind: episodic\n  sources: [{}]\n  evidence: [{}]\n  write_policy: agent-proposed\n{block}timestamp: {}\n---\n{body}",
        quote(note_type),
        quote(&title),
        quote(&description),
        quote(operation_source),
        quote(&format!("sha256:{}", crate::write::sha256_hex(body.as_bytes()))),
        now.to_rfc3339_opts(SecondsFormat::Secs, true),
    ))
}

/// Reads an episode note back (`None`: not an episode note, or unreadable).
pub(crate) fn parse_note(path: &str, text: &str) -> Option<Episode> {
    let split = crate::note::frontmatter::split(text).ok()?;
    #[derive(Deserialize)]
    struct Front {
        episode: EpisodeRecord,
    }
    let front: Front = serde_yaml::from_str(split.yaml).ok()?;
    let body = split.body;
    let content = body.strip_prefix('\n').unwrap_or(body);
    let content = content.strip_suffix('\n').unwrap_or(content);
    let (valid_from_at, valid_to_at) = (stored_time(Some(&front.episode.valid_from)), stored_time(front.episode.valid_to.as_deref()));
    Some(Episode { path: path.to_string(), content: content.to_string(), record: front.episode, valid_from_at, valid_to_at })
}

/// Checks a score in [0, 1].
pub(crate) fn unit_interval(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(Error::InvalidArgument { name, reason: format!("{value} is not between 0 and 1") })
    }
}

/// Trims entity names, drops empty ones and duplicates (first spelling kept).
pub(crate) fn clean_entities(entities: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for e in entities {
        let e = e.trim();
        if e.is_empty() {
            continue;
        }
        if e.chars().count() > 200 || e.chars().any(char::is_control) {
            return Err(Error::InvalidArgument {
                name: "entities",
                reason: "an entity is at most 200 characters, without control characters".into(),
            });
        }
        if !out.iter().any(|o| o == e) {
            out.push(e.to_string());
        }
    }
    if out.len() > 64 {
        return Err(Error::InvalidArgument { name: "entities", reason: "at most 64 entities".into() });
    }
    Ok(out)
}

/// Whether an episode names any of `wanted` (case-insensitive; empty `wanted` matches all).
pub(crate) fn names_any(record: &EpisodeRecord, wanted_lower: &[String]) -> bool {
    wanted_lower.is_empty() || record.entities.iter().any(|e| wanted_lower.iter().any(|w| *w == e.to_lowercase()))
}
