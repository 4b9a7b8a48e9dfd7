//! Whole-vault summaries a person's pages show on every visit, kept between requests instead of
//! recomputed per request: the health summary (lint's blocking flag and counts, the doctor's
//! `vault_check.lint`) and the link index behind the whole-vault graph (each note's resolved
//! links out and every note's degree). Each is keyed to the model state it was computed from
//! (`Inventory::origin`, `revision`): the link index catches up in O(change) through the
//! inventory's change log; the health summary is recomputed whole when the model moved, and
//! its latest value stays readable, named as older, while a caller refreshes it.
//! *Invariant: read-only; a summary is never presented as current for a model state it was not
//! computed from.*

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::NaiveDate;

use super::Vault;
use crate::error::Result;
use crate::inventory::{ComputedFrom, Inventory, Resolution};
use crate::note::path::VaultPath;

/// The summaries of one `Vault` (empty until first asked for).
#[derive(Default)]
pub(crate) struct Summaries {
    health: Mutex<Option<HealthMemo>>,
    links: Mutex<Option<LinkIndex>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The model state a summary was computed from: the inventory's identity and revision.
type ModelKey = (u64, u64);

/// The vault-wide lint summary: whether findings block writes and how many of each rule.
#[derive(Debug, Clone)]
pub struct HealthSummary {
    pub blocking: bool,
    pub counts: BTreeMap<&'static str, usize>,
    /// What it was computed from (the generation and the model state at the time).
    pub computed_from: ComputedFrom,
}

/// The health summary's key: the model state, the number of files links resolve against
/// (adding or removing an attachment moves no revision but may break or mend an embed), and
/// the day ages were counted on.
type HealthKey = (ModelKey, usize, NaiveDate);

struct HealthMemo {
    key: HealthKey,
    summary: HealthSummary,
}

/// Each note's resolved links out (catalog pages and the note itself left out, each target
/// once) and every note's degree (links in plus links out) where it is not zero.
pub(crate) struct LinkIndex {
    key: ModelKey,
    out: HashMap<VaultPath, BTreeSet<VaultPath>>,
    degree: HashMap<VaultPath, usize>,
}

impl LinkIndex {
    fn whole(inv: &Inventory, vault: &Vault) -> Self {
        let mut index = LinkIndex { key: (inv.origin, inv.revision), out: HashMap::new(), degree: HashMap::new() };
        for record in inv.notes() {
            index.refresh(inv, vault, &record.path);
        }
        index
    }

    /// Brings the index up to `inv`: the notes the change log names, and the notes whose links
    /// may resolve differently because of them (`Inventory::linkers_of`), are resolved again;
    /// a whole rebuild when the log does not reach back far enough or the model was reloaded.
    fn catch_up(slot: &mut Option<LinkIndex>, inv: &Inventory, vault: &Vault) {
        let key = (inv.origin, inv.revision);
        let changed = match slot.as_ref() {
            Some(index) if index.key == key => return,
            Some(index) if index.key.0 == inv.origin => inv.changes.since(index.key.1),
            _ => None,
        };
        let (Some(index), Some(changed)) = (slot.as_mut(), changed) else {
            *slot = Some(LinkIndex::whole(inv, vault));
            return;
        };
        let mut again: BTreeSet<VaultPath> = BTreeSet::new();
        for path in changed {
            again.insert(path.clone());
            again.extend(inv.linkers_of(path));
        }
        for path in &again {
            index.refresh(inv, vault, path);
        }
        index.key = key;
    }

    /// Resolves `path`'s links again (none when it is no note now) and moves the degrees.
    fn refresh(&mut self, inv: &Inventory, vault: &Vault, path: &VaultPath) {
        if let Some(old) = self.out.remove(path) {
            for target in &old {
                self.bump(path, -1);
                self.bump(target, -1);
            }
        }
        let Some(record) = inv.records.get(path).filter(|r| r.is_note()) else { return };
        let targets: BTreeSet<VaultPath> = record
            .links
            .iter()
            .filter_map(|link| match inv.resolve(path, link, &vault.policy) {
                Resolution::Resolved(target) if target != *path && inv.records.get(&target).is_some_and(|r| r.is_note()) => Some(target),
                _ => None,
            })
            .collect();
        for target in &targets {
            self.bump(path, 1);
            self.bump(target, 1);
        }
        if !targets.is_empty() {
            self.out.insert(path.clone(), targets);
        }
    }

    fn bump(&mut self, path: &VaultPath, by: isize) {
        let degree = self.degree.entry(path.clone()).or_default();
        *degree = degree.saturating_add_signed(by);
        if *degree == 0 {
            self.degree.remove(path);
        }
    }

    /// The note's resolved links out.
    pub(crate) fn links_out(&self, path: &VaultPath) -> Option<&BTreeSet<VaultPath>> {
        self.out.get(path)
    }

    pub(crate) fn degree(&self, path: &VaultPath) -> usize {
        self.degree.get(path).copied().unwrap_or(0)
    }

    /// The `n` notes of highest degree (ties by path), highest first, and how many notes with
    /// any link were left out.
    pub(crate) fn most_linked(&self, n: usize) -> (Vec<VaultPath>, usize) {
        let mut ranked: Vec<(&VaultPath, usize)> = self.degree.iter().map(|(p, d)| (p, *d)).collect();
        let order = |a: &(&VaultPath, usize), b: &(&VaultPath, usize)| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0));
        let left_out = ranked.len().saturating_sub(n);
        if ranked.len() > n && n > 0 {
            ranked.select_nth_unstable_by(n - 1, order);
            ranked.truncate(n);
        } else if n == 0 {
            ranked.clear();
        }
        ranked.sort_unstable_by(order);
        (ranked.into_iter().map(|(p, _)| p.clone()).collect(), left_out)
    }
}

fn health_key(inv: &Inventory, today: NaiveDate) -> HealthKey {
    ((inv.origin, inv.revision), inv.files.len(), today)
}

impl Vault {
    /// The vault-wide health summary for the model now: the kept one when the model has not
    /// moved since it was computed (and the day is the same), else the whole lint run again.
    pub fn health_summary(&self) -> Result<HealthSummary> {
        let today = self.today();
        let key = self.with_inventory(|inv| health_key(inv, today))?;
        if let Some(memo) = lock(&self.summaries.health).as_ref().filter(|m| m.key == key) {
            return Ok(memo.summary.clone());
        }
        // Computed outside the memo's lock: a page reading the latest summary never waits for it.
        let (key, report) = self.with_inventory(|inv| (health_key(inv, today), crate::lint::health_report(inv, &self.policy, today)))?;
        let summary = HealthSummary { blocking: report.blocking, counts: report.counts, computed_from: self.computed_from()? };
        let mut memo = lock(&self.summaries.health);
        // A slower computation for an older state never replaces a newer one.
        let newer = memo.as_ref().is_none_or(|m| m.key.0.0 != key.0.0 || m.key.0.1 <= key.0.1);
        if newer {
            *memo = Some(HealthMemo { key, summary: summary.clone() });
        }
        Ok(summary)
    }

    /// The latest health summary computed, whichever model state it was computed from, and
    /// whether that is the model now (`false`: older; `health_summary` refreshes it). `None`
    /// when none was computed yet.
    pub fn health_summary_latest(&self) -> Result<Option<(HealthSummary, bool)>> {
        let today = self.today();
        let key = self.with_inventory(|inv| health_key(inv, today))?;
        Ok(lock(&self.summaries.health).as_ref().map(|m| (m.summary.clone(), m.key == key)))
    }

    /// Runs `f` over the link index brought up to the model now.
    pub(crate) fn with_link_index<T>(&self, f: impl FnOnce(&Inventory, &LinkIndex) -> T) -> Result<T> {
        self.with_inventory(|inv| {
            let mut slot = lock(&self.summaries.links);
            LinkIndex::catch_up(&mut slot, inv, self);
            f(inv, slot.as_ref().expect("BUG: catch_up fills the index"))
        })
    }
}
