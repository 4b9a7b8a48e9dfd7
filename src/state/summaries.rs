//! Whole-vault summaries a person's pages show on every visit, kept between requests instead of
//! recomputed per request: the health summary (lint's blocking flag and counts, the doctor's
//! `vault_check.lint`) and the link index behind the whole-vault graph (each note's resolved
//! links out and every note's degree). Each is keyed to the model state it was computed from
//! (`Inventory::origin`, `revision`): the link index catches up in O(change) through the
//! inventory's change log; the health summary is recomputed whole when the model moved, and
//! its latest value stays readable, named as older, while a caller refreshes it. Two more for
//! the charts and the quick switcher: the receipt log counted per day over a bounded window
//! (caught up in O(new receipts) by the log's length), and a title index (each note's title
//! and file name from every word start, in order, so a prefix is a range: O(matches)).
//! *Invariant: read-only; a summary is never presented as current for a model state it was not
//! computed from.*

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::NaiveDate;

use super::VaultState;
use crate::error::Result;
use crate::inventory::{CatchUp, ComputedFrom, Inventory, Resolution};
use crate::note::path::VaultPath;

/// The summaries of one `Vault` (empty until first asked for).
#[derive(Default)]
pub(crate) struct Summaries {
    health: Mutex<Option<HealthMemo>>,
    links: Mutex<Option<LinkIndex>>,
    activity: Mutex<Option<ActivityMemo>>,
    titles: Mutex<Option<TitleIndex>>,
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
    /// Per folder (down to two levels: `01_Projects/alpha`), in path order: its notes and
    /// their stale, orphan, broken-link and invalid counts from the same lint.
    pub folders: Arc<Vec<FolderHealth>>,
    /// What it was computed from (the generation and the model state at the time).
    pub computed_from: ComputedFrom,
}

/// One folder's share of the vault-wide lint (`HealthSummary::folders`): the notes directly in
/// it or below it (down to two levels; deeper folders count in their second-level one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FolderHealth {
    /// The folder (`""`: the vault root's own notes).
    pub folder: String,
    pub notes: usize,
    pub invalid: usize,
    /// Notes whose `expiry` has passed (lint's `stale`: not archived, not in an exempt folder).
    pub stale: usize,
    pub orphans: usize,
    /// Links that resolve to no file, counted where the link is written.
    pub broken_links: usize,
}

/// The folder a note or finding path counts in: its first two folders.
pub(crate) fn chart_folder(path: &str) -> &str {
    let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    match dir.match_indices('/').nth(1) {
        Some((second, _)) => &dir[..second],
        None => dir,
    }
}

fn folder_health(inv: &Inventory, findings: &[crate::finding::Finding]) -> Vec<FolderHealth> {
    let mut folders: BTreeMap<&str, FolderHealth> = BTreeMap::new();
    for record in inv.notes() {
        let folder = chart_folder(record.path.as_str());
        let entry = folders.entry(folder).or_insert_with(|| FolderHealth { folder: folder.to_string(), ..FolderHealth::default() });
        entry.notes += 1;
        entry.invalid += usize::from(!record.valid);
    }
    for finding in findings {
        let Some(entry) = folders.get_mut(chart_folder(&finding.path)) else { continue };
        match finding.rule {
            "stale" => entry.stale += 1,
            "orphan" => entry.orphans += 1,
            "broken-link" => entry.broken_links += 1,
            _ => {}
        }
    }
    folders.into_values().collect()
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
    fn whole(inv: &Inventory, vault: &VaultState) -> Self {
        let mut index = LinkIndex { key: inv.key(), out: HashMap::new(), degree: HashMap::new() };
        for record in inv.notes() {
            index.refresh(inv, vault, &record.path);
        }
        index
    }

    /// Brings the index up to `inv`: the notes the change log names, and the notes whose links
    /// may resolve differently because of them (`Inventory::linkers_of`), are resolved again;
    /// a whole rebuild when the log does not reach back far enough or the model was reloaded.
    fn catch_up(slot: &mut Option<LinkIndex>, inv: &Inventory, vault: &VaultState) {
        bring_up(
            slot,
            inv,
            |index| &mut index.key,
            || LinkIndex::whole(inv, vault),
            |index, changed| {
                let mut again: BTreeSet<VaultPath> = BTreeSet::new();
                for path in changed {
                    again.insert(path.clone());
                    again.extend(inv.linkers_of(path));
                }
                for path in &again {
                    index.refresh(inv, vault, path);
                }
            },
        );
    }

    /// Resolves `path`'s links again (none when it is no note now) and moves the degrees.
    fn refresh(&mut self, inv: &Inventory, vault: &VaultState, path: &VaultPath) {
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
    (inv.key(), inv.files.len(), today)
}

impl VaultState {
    /// The vault-wide health summary for the model now: the kept one when the model has not
    /// moved since it was computed (and the day is the same), else the whole lint run again.
    pub fn health_summary(&self) -> Result<HealthSummary> {
        let today = self.today();
        let key = self.with_inventory(|inv| health_key(inv, today))?;
        if let Some(memo) = lock(&self.summaries.health).as_ref().filter(|m| m.key == key) {
            return Ok(memo.summary.clone());
        }
        // Computed outside the memo's lock: a page reading the latest summary never waits for it.
        let (key, report, folders) = self.with_inventory(|inv| {
            let report = crate::lint::health_report(inv, &self.policy, today);
            let folders = folder_health(inv, &report.findings);
            (health_key(inv, today), report, folders)
        })?;
        let summary = HealthSummary {
            blocking: report.blocking,
            counts: report.counts,
            folders: Arc::new(folders),
            computed_from: self.computed_from()?,
        };
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

/// Receipts read back at most when the receipt days are first counted (the window is then
/// `cut` and says so).
pub(crate) const RECEIPTS_COUNTED_MAX: usize = 500_000;

/// The receipt days kept between requests (`Vault::receipt_days`, in the write layer that reads
/// the log).
pub(crate) struct ActivityMemo {
    /// The first day counted.
    pub from: NaiveDate,
    pub counts: DayCounts,
}

/// The receipt log per day over a window (`Vault::receipt_days`).
#[derive(Debug, Clone)]
pub struct ReceiptActivity {
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// Every day from `from` to `to`, oldest first (a day without receipts counts zero).
    pub days: Vec<ReceiptDay>,
    /// The log held more receipts in the window than are counted (`RECEIPTS_COUNTED_MAX`);
    /// the oldest days are missing some.
    pub cut: bool,
}

impl VaultState {
    /// The kept receipt days (held while the caller counts or catches them up).
    pub(crate) fn receipt_days_memo(&self) -> MutexGuard<'_, Option<ActivityMemo>> {
        lock(&self.summaries.activity)
    }
}

/// One UTC day of the receipt log, counted (`ReceiptLog::days`): what the charts of activity
/// and health over time draw. Only what receipts carry: the vault-wide note and invalid-note
/// counts are those of the day's last ok write that recorded them (`notes_scanned`,
/// `notes_excluded`, counted as the write left the model); broken links are recorded by no
/// receipt.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReceiptDay {
    pub date: chrono::NaiveDate,
    /// Receipts of the day, ok and aborted.
    pub receipts: usize,
    /// Aborted receipts (a write refused or failed before its commit point).
    pub aborted: usize,
    /// Notes the day's ok receipts wrote (a multi-note receipt counts each of its notes).
    pub notes_written: usize,
    /// Ok receipts that carry an approval record: writes a person's (or a signed) decision let
    /// through.
    pub approved_writes: usize,
    /// Notes in the vault as the day's last ok write that recorded it left them.
    pub notes: Option<u64>,
    /// Invalid notes (excluded from search and catalogs) as that write left them.
    pub invalid_notes: Option<u64>,
    /// Of the notes the day's ok writes wrote, those no other note links to (`lint_orphans`,
    /// summed); `None` when no receipt of the day recorded it.
    pub orphans_written: Option<u64>,
    /// The seq of the receipt `notes` and `invalid_notes` come from.
    #[serde(skip)]
    counts_seq: u64,
}

/// The fields of a receipt line the day counts read (the rest is skipped, not parsed).
#[derive(serde::Deserialize)]
pub struct DayFields {
    #[serde(default)]
    at: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    notes: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    approval: Option<serde_json::Value>,
    #[serde(default)]
    notes_scanned: Option<String>,
    #[serde(default)]
    notes_excluded: Option<String>,
    #[serde(default)]
    lint_orphans: Option<String>,
}

impl DayFields {
    pub(crate) fn date(&self) -> Option<chrono::NaiveDate> {
        chrono::DateTime::parse_from_rfc3339(&self.at).ok().map(|at| at.with_timezone(&chrono::Utc).date_naive())
    }
}

impl ReceiptDay {
    /// A day without receipts.
    pub(crate) fn empty(date: chrono::NaiveDate) -> Self {
        ReceiptDay { date, ..ReceiptDay::default() }
    }

    /// Adds one receipt of this day (in any order: the counts come from the highest seq).
    fn add(&mut self, line: &DayFields) {
        self.receipts += 1;
        if line.status != "ok" {
            self.aborted += usize::from(line.status == "aborted");
            return;
        }
        self.notes_written += line.notes.as_ref().map_or(1, Vec::len);
        self.approved_writes += usize::from(line.approval.as_ref().is_some_and(serde_json::Value::is_object));
        if let Some(orphans) = line.lint_orphans.as_deref().and_then(|n| n.parse::<u64>().ok()) {
            *self.orphans_written.get_or_insert(0) += orphans;
        }
        let scanned = line.notes_scanned.as_deref().and_then(|n| n.parse::<u64>().ok());
        let excluded = line.notes_excluded.as_deref().and_then(|n| n.parse::<u64>().ok());
        if let (Some(scanned), Some(excluded)) = (scanned, excluded)
            && (self.notes.is_none() || line.seq >= self.counts_seq)
        {
            self.notes = Some(scanned);
            self.invalid_notes = Some(excluded);
            self.counts_seq = line.seq;
        }
    }
}

/// Receipt days counted from the log (`ReceiptLog::days`), and how far the count read.
#[derive(Debug, Clone, Default)]
pub struct DayCounts {
    pub days: std::collections::BTreeMap<chrono::NaiveDate, ReceiptDay>,
    /// The log's length in bytes the counts reach (complete lines only).
    pub len: u64,
    /// The newest receipts read back stopped at the cap before reaching the window's first day.
    pub cut: bool,
}

impl DayCounts {
    /// Counts a parsed line dated `date` when it falls in the window starting `from`.
    pub(crate) fn add(&mut self, fields: &DayFields, date: chrono::NaiveDate, from: chrono::NaiveDate) {
        if date >= from {
            self.days.entry(date).or_insert_with(|| ReceiptDay::empty(date)).add(fields);
        }
    }

    pub(crate) fn add_line(&mut self, line: &[u8], from: chrono::NaiveDate) {
        let Ok(fields) = serde_json::from_slice::<DayFields>(line) else { return };
        if let Some(date) = fields.date() {
            self.add(&fields, date, from);
        }
    }
}

/// Characters of a title kept in a title-index key (longer queries are checked against the
/// whole title).
const TITLE_KEY_CHARS: usize = 32;

/// A title or name as the switcher compares it: lower-cased, whitespace folded to one space.
fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// The keys a note is found under: its folded title and file name (without `.md`) from every
/// word start, each cut to `TITLE_KEY_CHARS`; `true` marks the whole-text starts.
fn title_keys(title: &str, stem: &str) -> Vec<(bool, Box<str>)> {
    let mut keys: Vec<(bool, Box<str>)> = Vec::new();
    for text in [fold(title), fold(stem)] {
        let mut previous_alphanumeric = false;
        for (at, c) in text.char_indices() {
            let start = c.is_alphanumeric() && !previous_alphanumeric;
            previous_alphanumeric = c.is_alphanumeric();
            if start || at == 0 {
                let key: String = text[at..].chars().take(TITLE_KEY_CHARS).collect();
                keys.push((at == 0, key.into_boxed_str()));
            }
        }
    }
    // A key that is both a whole-text start and a word start is kept as the start.
    keys.sort_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
    keys.dedup_by(|a, b| a.1 == b.1);
    keys
}

/// A note as the switcher lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TitleMatch {
    pub path: String,
    /// The note's title, or its file name when it has none.
    pub title: String,
}

/// What `Vault::find_titles` answers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TitleMatches {
    pub matches: Vec<TitleMatch>,
    /// More notes match than were listed.
    pub more: bool,
}

/// The title index behind the quick switcher (`Vault::find_titles`).
pub(crate) struct TitleIndex {
    key: ModelKey,
    /// Whole titles and names (folded, cut) → their notes.
    starts: BTreeMap<Box<str>, Vec<VaultPath>>,
    /// The same from every later word start.
    words: BTreeMap<Box<str>, Vec<VaultPath>>,
    /// Each note's title as indexed (its keys are made again from it to take them out when the
    /// note changes: kept once per note, not once per key).
    of: HashMap<VaultPath, Box<str>>,
}

fn shown_title(record: &crate::inventory::NoteRecord) -> String {
    match record.meta.title.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(title) => title.to_string(),
        None => record.path.file_name().trim_end_matches(".md").to_string(),
    }
}

impl TitleIndex {
    fn whole(inv: &Inventory) -> Self {
        let mut index = TitleIndex { key: inv.key(), starts: BTreeMap::new(), words: BTreeMap::new(), of: HashMap::new() };
        for record in inv.notes() {
            index.refresh(inv, &record.path);
        }
        index
    }

    fn catch_up(slot: &mut Option<TitleIndex>, inv: &Inventory) {
        bring_up(
            slot,
            inv,
            |index| &mut index.key,
            || TitleIndex::whole(inv),
            |index, changed| {
                for path in changed {
                    index.refresh(inv, path);
                }
            },
        );
    }

    fn refresh(&mut self, inv: &Inventory, path: &VaultPath) {
        let stem = path.file_name().trim_end_matches(".md");
        let old = self.of.remove(path).map(|title| title_keys(&title, stem)).unwrap_or_default();
        for (start, key) in old {
            let map = if start { &mut self.starts } else { &mut self.words };
            if let Some(paths) = map.get_mut(&key) {
                paths.retain(|p| p != path);
                if paths.is_empty() {
                    map.remove(&key);
                }
            }
        }
        let Some(record) = inv.records.get(path).filter(|r| r.is_note()) else { return };
        let title = shown_title(record);
        for (start, key) in title_keys(&title, stem) {
            let map = if start { &mut self.starts } else { &mut self.words };
            map.entry(key).or_default().push(path.clone());
        }
        self.of.insert(path.clone(), title.into_boxed_str());
    }

    /// The notes whose title or name starts with `query` (whole-text starts first, then word
    /// starts), each once, at most `limit`; reads at most a bounded number of keys.
    fn find(&self, inv: &Inventory, query: &str, limit: usize) -> TitleMatches {
        let wanted = fold(query);
        let probe: String = wanted.chars().take(TITLE_KEY_CHARS).collect();
        let long = probe.len() < wanted.len();
        let mut seen: BTreeSet<&VaultPath> = BTreeSet::new();
        let mut matches = Vec::new();
        let mut more = false;
        let mut budget = limit.saturating_mul(8).saturating_add(64);
        'maps: for map in [&self.starts, &self.words] {
            for (key, paths) in map.range::<str, _>((Bound::Included(probe.as_str()), Bound::Unbounded)) {
                if !key.starts_with(probe.as_str()) {
                    break;
                }
                for path in paths {
                    if budget == 0 {
                        more = true;
                        break 'maps;
                    }
                    budget -= 1;
                    let Some(record) = inv.records.get(path) else { continue };
                    let title = shown_title(record);
                    if long && !fold(&title).contains(&wanted) && !fold(path.file_name()).contains(&wanted) {
                        continue;
                    }
                    if !seen.insert(path) {
                        continue;
                    }
                    if matches.len() == limit {
                        more = true;
                        break 'maps;
                    }
                    matches.push(TitleMatch { path: path.to_string(), title });
                }
            }
        }
        TitleMatches { matches, more }
    }
}

/// Brings an index kept beside the model (in `slot`, `key` its model key) up to `inv`:
/// nothing when it is current, `refresh` with the paths changed since it was built, or a
/// `whole` rebuild when only that can tell (`Inventory::catch_up_from`).
fn bring_up<I>(
    slot: &mut Option<I>,
    inv: &Inventory,
    key: impl Fn(&mut I) -> &mut ModelKey,
    whole: impl FnOnce() -> I,
    refresh: impl FnOnce(&mut I, Vec<&VaultPath>),
) {
    match inv.catch_up_from(slot.as_mut().map(|index| *key(index))) {
        CatchUp::Current => {}
        CatchUp::Whole => *slot = Some(whole()),
        CatchUp::Changed(changed) => {
            // `Changed` answers the key the index kept, so the index is there.
            if let Some(index) = slot.as_mut() {
                refresh(index, changed);
                *key(index) = inv.key();
            }
        }
    }
}

impl VaultState {
    /// The notes whose title or file name starts with `query`, or has a word starting with it
    /// (no case, whitespace folded): the quick switcher's answer, at most `limit` (`more` when
    /// there were others). From the kept title index, caught up in O(change) from the
    /// inventory's change log: O(matches) per call, never a scan of every note.
    pub fn find_titles(&self, query: &str, limit: usize) -> Result<TitleMatches> {
        if fold(query).is_empty() || limit == 0 {
            return Ok(TitleMatches { matches: Vec::new(), more: false });
        }
        self.with_inventory(|inv| {
            let mut slot = lock(&self.summaries.titles);
            TitleIndex::catch_up(&mut slot, inv);
            slot.as_ref().expect("BUG: catch_up fills the index").find(inv, query, limit)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_folders_are_the_first_two_levels() {
        assert_eq!(chart_folder("root.md"), "");
        assert_eq!(chart_folder("01_Projects/plan.md"), "01_Projects");
        assert_eq!(chart_folder("01_Projects/alpha/plan.md"), "01_Projects/alpha");
        assert_eq!(chart_folder("01_Projects/alpha/deep/er/plan.md"), "01_Projects/alpha");
    }

    #[test]
    fn title_keys_start_at_every_word_and_mark_the_whole_text() {
        let keys = title_keys("The  Garden River", "garden-river");
        let texts: Vec<(bool, &str)> = keys.iter().map(|(s, k)| (*s, &**k)).collect();
        assert!(texts.contains(&(true, "the garden river")), "{texts:?}");
        assert!(texts.contains(&(false, "garden river")), "{texts:?}");
        assert!(texts.contains(&(false, "river")), "{texts:?}");
        assert!(texts.contains(&(true, "garden-river")), "{texts:?}");
        assert!(texts.contains(&(false, "river")) && !texts.iter().any(|(_, k)| k.starts_with(' ') || k.starts_with('-')), "{texts:?}");
        let long = title_keys(&"x".repeat(100), "n");
        assert!(long.iter().all(|(_, k)| k.chars().count() <= TITLE_KEY_CHARS));
    }
}
