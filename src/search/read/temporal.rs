//! Temporal status of notes at an `as_of` date (reference §6.6): `memory.valid_from/valid_until`
//! (inclusive) and `memory.supersedes` edges among notes active at `as_of`. Loaded once per
//! opened generation from its `note` documents; never from the vault. A tail generation's
//! table is derived from its base's: the tail's notes replace theirs, and only the edges whose
//! target one of them could resolve to are resolved again (`search::read::load_temporal`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::NaiveDate;
use serde::Serialize;

use crate::search::schema::TemporalFields;

/// Where a note stands in time at the search's `as_of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TemporalStatus {
    /// Valid at `as_of` and superseded by nothing valid then.
    Current,
    /// Out of its validity window, or superseded.
    Historical,
    /// Valid, but in a supersedes conflict.
    Conflicted,
}

/// The temporal status of each note at one date (a note not named is current), shared.
pub(crate) type Statuses = Arc<BTreeMap<String, TemporalStatus>>;

/// Memory notes of a generation and their resolved `supersedes` edges (superseder → superseded).
#[derive(Debug, Clone, Default)]
pub(crate) struct TemporalTable {
    /// The memory notes of the on-disk generation the table was read from, shared by the tables
    /// derived from it: a tail generation's table does not copy its base's notes (thousands of
    /// them, on every write), it names the notes its tail changed in `changed`.
    pub base_notes: Arc<BTreeMap<String, TemporalFields>>,
    /// Notes whose fields replace `base_notes`' (`None`: not a memory note here).
    pub changed: BTreeMap<String, Option<TemporalFields>>,
    pub edges: Vec<(String, String)>,
    /// Every `supersedes` entry as (superseder, normalised target), resolved or not.
    pub pending: Vec<(String, String)>,
    /// The note each target of `pending` names in this generation (`None`: none, or several).
    pub resolved: BTreeMap<String, Option<String>>,
}

fn date(text: &Option<String>) -> Option<NaiveDate> {
    text.as_deref().and_then(|t| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
}

/// Whether a memory note with `f` is inside its validity window at `as_of`.
fn valid_at(f: &TemporalFields, as_of: NaiveDate) -> bool {
    date(&f.valid_from).is_none_or(|d| d <= as_of) && date(&f.valid_until).is_none_or(|d| as_of <= d)
}

impl TemporalTable {
    /// The memory fields of the note at `path`, if it is a memory note.
    pub(crate) fn note(&self, path: &str) -> Option<&TemporalFields> {
        match self.changed.get(path) {
            Some(changed) => changed.as_ref(),
            None => self.base_notes.get(path),
        }
    }

    /// Every memory note, in no particular order.
    pub(crate) fn notes(&self) -> impl Iterator<Item = (&String, &TemporalFields)> {
        let base = self.base_notes.iter().filter(|(path, _)| !self.changed.contains_key(*path));
        base.chain(self.changed.iter().filter_map(|(path, fields)| fields.as_ref().map(|f| (path, f))))
    }

    fn active(&self, path: &str, as_of: NaiveDate) -> bool {
        self.note(path).is_none_or(|f| valid_at(f, as_of))
    }

    /// Status of every note the table knows about; notes not listed are current.
    pub(crate) fn statuses(&self, as_of: NaiveDate) -> BTreeMap<String, TemporalStatus> {
        let mut out = BTreeMap::new();
        for (path, fields) in self.notes() {
            if !valid_at(fields, as_of) {
                out.insert(path.clone(), TemporalStatus::Historical);
            }
        }
        let edges: Vec<&(String, String)> =
            self.edges.iter().filter(|(a, b)| a != b && self.active(a, as_of) && self.active(b, as_of)).collect();
        let mut superseded_by: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut supersedes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (a, b) in &edges {
            superseded_by.entry(b.as_str()).or_default().insert(a.as_str());
            supersedes.entry(a.as_str()).or_default().insert(b.as_str());
        }
        let set = |out: &mut BTreeMap<String, TemporalStatus>, p: &str, s: TemporalStatus| {
            let slot = out.entry(p.to_string()).or_insert(s);
            if s == TemporalStatus::Conflicted || *slot == TemporalStatus::Current {
                *slot = s;
            }
        };
        for (node, parents) in &superseded_by {
            // Heads reachable upward; a node reaching itself is on a cycle.
            let mut heads = BTreeSet::new();
            let mut seen = BTreeSet::new();
            let mut stack: Vec<&str> = parents.iter().copied().collect();
            let mut cycle = false;
            while let Some(n) = stack.pop() {
                if n == *node {
                    cycle = true;
                    continue;
                }
                if !seen.insert(n) {
                    continue;
                }
                match superseded_by.get(n) {
                    Some(up) if !up.is_empty() => stack.extend(up.iter().copied()),
                    _ => {
                        heads.insert(n);
                    }
                }
            }
            if cycle {
                set(&mut out, node, TemporalStatus::Conflicted);
            } else if heads.len() >= 2 {
                set(&mut out, node, TemporalStatus::Conflicted);
                for h in heads {
                    set(&mut out, h, TemporalStatus::Conflicted);
                }
            } else {
                set(&mut out, node, TemporalStatus::Historical);
            }
        }
        out
    }
}
