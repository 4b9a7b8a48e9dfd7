//! `rot_audit`: redundant, outdated and trivial notes, and freshness scores.
//!
//! Redundancy is title-token Jaccard ≥ the policy threshold, found with an inverted index and
//! prefix filtering (tokens ordered rarest first; two sets reach Jaccard t only if they share a
//! token among the first |A| − ⌈t·|A|⌉ + 1 of either), so it never compares all pairs. Pure over
//! the inventory; thresholds and half-lives come from policy.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::inventory::{Inventory, NoteRecord};
use crate::policy::{EgressPolicy, LoadedPolicy};

/// `rot_audit` parameters (P.O.W.E.R.'s names).
#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RotRequest {
    #[serde(default)]
    pub extended: bool,
    #[serde(default)]
    pub allow_link_rot: bool,
    #[serde(default)]
    pub allow_remote_llm: bool,
    #[serde(default)]
    pub approved: bool,
    /// Items per list on this page (default and bound: policy `maintenance.report_items_*`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_items: Option<usize>,
    /// `next_cursor` of the previous page (absent: the first page).
    #[serde(default)]
    pub cursor: Option<String>,
    /// Every item on one page, bound or not (the CLI's `--all`; never set over MCP).
    #[serde(skip)]
    pub unbounded: bool,
}

/// Exact item counts of each list of a rot report, before paging.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct RotTotals {
    /// Redundant pairs.
    pub redundant: usize,
    /// Outdated notes.
    pub outdated: usize,
    /// Trivial notes.
    pub trivial: usize,
    /// Notes past their freshness.
    pub stale_freshness: usize,
    /// Near-duplicate pairs.
    pub near_duplicates: usize,
    /// External links checked.
    pub link_rot: usize,
}

/// Which page of a rot report this is.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Page {
    /// Position of the first item of each list on this page.
    pub offset: usize,
    /// The most items of each list a page holds.
    pub max_items: usize,
    /// Whether any list has items past this page.
    pub truncated: bool,
    /// Pass as `cursor` for the next page (absent on the last one).
    pub next_cursor: Option<String>,
}

/// Two notes whose bodies share most of their words.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RedundantPair {
    /// One note's vault-relative path.
    pub a: String,
    /// The other note's vault-relative path.
    pub b: String,
    /// The Jaccard similarity of their word sets.
    pub jaccard: f64,
}

/// A note past its `expiry` date.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Outdated {
    /// The note's vault-relative path.
    pub path: String,
    /// Its expiry date.
    pub expiry: String,
}

/// A note with almost no body.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Trivial {
    /// The note's vault-relative path.
    pub path: String,
    /// The characters of its body.
    pub body_chars: usize,
}

/// A note whose freshness decayed below the threshold.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Freshness {
    /// The note's vault-relative path.
    pub path: String,
    /// Its OKF type.
    pub note_type: String,
    /// Days since its timestamp.
    pub age_days: f64,
    /// The freshness half-life of its type, in days.
    pub half_life_days: f64,
    /// Its freshness score (1 fresh, towards 0 stale).
    pub score: f64,
}

/// Two notes whose bodies mean nearly the same (cosine of their stored vectors' centres).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NearDuplicate {
    /// One note's vault-relative path.
    pub a: String,
    /// The other note's vault-relative path.
    pub b: String,
    /// The cosine of their vectors' centres.
    pub cosine: f64,
}

/// Each note's unit vector (the centre of its stored chunk vectors), by path.
#[derive(Debug, Clone, Default)]
pub struct NoteVectors {
    pub paths: Vec<String>,
    pub dimension: usize,
    /// `paths.len() × dimension`, row-major.
    pub data: Vec<f32>,
}

/// Pairs with cosine ≥ `threshold`: exact, every pair compared with the SIMD dot product on all
/// cores (n²/2 dot products: ~0.1 s for 5,000 notes on two cores). Sorted by cosine, then paths.
pub fn near_duplicates(vectors: &NoteVectors, threshold: f64) -> Vec<NearDuplicate> {
    near_duplicates_with_progress(vectors, threshold, &super::unwatched)
}

/// [`near_duplicates`], reporting `comparing` (notes compared with every later one) to
/// `progress`: the rows go to the thread pool a block at a time, a report after each block.
pub(crate) fn near_duplicates_with_progress(vectors: &NoteVectors, threshold: f64, progress: super::Progress<'_>) -> Vec<NearDuplicate> {
    use rayon::prelude::*;
    /// Rows per block; the later rows of the triangle are cheaper, so blocks are by row count.
    const BLOCK: usize = 256;
    let dim = vectors.dimension;
    let n = vectors.paths.len();
    if dim == 0 || n < 2 {
        return Vec::new();
    }
    let row = |i: usize| &vectors.data[i * dim..(i + 1) * dim];
    let arch = pulp::Arch::new();
    let mut pairs: Vec<NearDuplicate> = Vec::new();
    for start in (0..n).step_by(BLOCK) {
        progress("comparing", start, n);
        let block: Vec<NearDuplicate> = (start..(start + BLOCK).min(n))
            .into_par_iter()
            .flat_map_iter(|i| {
                let a = row(i);
                let found: Vec<(usize, f32)> = arch.dispatch(|| {
                    ((i + 1)..n).map(|j| (j, crate::search::dense::dot(a, row(j)))).filter(|(_, c)| f64::from(*c) >= threshold).collect()
                });
                found.into_iter().map(move |(j, c)| (i, j, c))
            })
            .map(|(i, j, c)| {
                let (a, b) = if vectors.paths[i] <= vectors.paths[j] { (i, j) } else { (j, i) };
                NearDuplicate { a: vectors.paths[a].clone(), b: vectors.paths[b].clone(), cosine: (f64::from(c) * 1e4).round() / 1e4 }
            })
            .collect();
        pairs.extend(block);
    }
    progress("comparing", n, n);
    pairs.sort_by(|x, y| y.cosine.total_cmp(&x.cosine).then_with(|| x.a.cmp(&y.a)).then_with(|| x.b.cmp(&y.b)));
    pairs
}

/// A section that did not run, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Skipped {
    /// The section.
    pub section: &'static str,
    /// Why it did not run.
    pub reason: String,
}

/// What `rot_audit` returns: the vault's rot, one page of each list.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RotReport {
    /// The report format's version.
    pub schema_version: u32,
    /// The audit's date.
    pub date: String,
    /// The notes audited.
    pub notes_audited: usize,
    /// The thresholds applied, by name.
    pub thresholds: BTreeMap<&'static str, f64>,
    /// Pairs of notes that share most of their words.
    pub redundant: Vec<RedundantPair>,
    /// Notes past their expiry.
    pub outdated: Vec<Outdated>,
    /// Notes with almost no body.
    pub trivial: Vec<Trivial>,
    /// Notes whose freshness decayed.
    pub stale_freshness: Vec<Freshness>,
    /// `extended` only, from the active generation's dense index.
    pub near_duplicates: Vec<NearDuplicate>,
    /// `allow_link_rot` + `approved` + egress allow-public only: every external link checked.
    pub link_rot: Vec<super::link_rot::LinkCheck>,
    /// Sections that did not run, and why.
    pub skipped: Vec<Skipped>,
    /// Exact sizes of the lists above before paging, and which page they hold.
    pub totals: RotTotals,
    /// Which page this is.
    pub page: Page,
    /// The person's approval the link checks ran under (a `human` rule for `link_rot`):
    /// `{approver, channel, decided_at, decision_sha256}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_rot_approval: Option<serde_json::Value>,
    /// The generation and the model state the audit was computed from (filled by `Vault`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub computed_from: Option<crate::inventory::ComputedFrom>,
}

impl RotReport {
    /// Cuts every list to the page `request` asks for (bounded by policy unless `unbounded`),
    /// recording exact totals first.
    pub(crate) fn paginate(&mut self, request: &RotRequest, policy: &LoadedPolicy) -> Result<()> {
        let m = &policy.policy.maintenance;
        let max_items = match (request.unbounded, request.max_items) {
            (true, _) => usize::MAX,
            (false, None) => m.report_items_default,
            (false, Some(n)) if (1..=m.report_items_max).contains(&n) => n,
            (false, Some(_)) => {
                return Err(Error::InvalidArgument { name: "max_items", reason: format!("must be between 1 and {}", m.report_items_max) });
            }
        };
        let offset = match &request.cursor {
            None => 0,
            Some(cursor) => cursor.parse::<usize>().map_err(|_| Error::InvalidArgument {
                name: "cursor",
                reason: "is not a cursor this audit returned (pass next_cursor unchanged)".into(),
            })?,
        };
        self.totals = RotTotals {
            redundant: self.redundant.len(),
            outdated: self.outdated.len(),
            trivial: self.trivial.len(),
            stale_freshness: self.stale_freshness.len(),
            near_duplicates: self.near_duplicates.len(),
            link_rot: self.link_rot.len(),
        };
        fn cut<T>(list: &mut Vec<T>, offset: usize, max_items: usize) -> bool {
            let rest = list.len().saturating_sub(offset);
            list.drain(..offset.min(list.len()));
            list.truncate(max_items);
            rest > max_items
        }
        let mut truncated = false;
        truncated |= cut(&mut self.redundant, offset, max_items);
        truncated |= cut(&mut self.outdated, offset, max_items);
        truncated |= cut(&mut self.trivial, offset, max_items);
        truncated |= cut(&mut self.stale_freshness, offset, max_items);
        truncated |= cut(&mut self.near_duplicates, offset, max_items);
        truncated |= cut(&mut self.link_rot, offset, max_items);
        self.page = Page {
            offset,
            max_items: max_items.min(usize::MAX / 2),
            truncated,
            next_cursor: truncated.then(|| (offset + max_items).to_string()),
        };
        Ok(())
    }
}

/// Lower-cased alphanumeric title tokens (deduplicated).
pub(crate) fn title_tokens(title: &str) -> Vec<String> {
    let mut tokens: Vec<String> = title.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase).collect();
    tokens.sort();
    tokens.dedup();
    tokens
}

/// All pairs with title-token Jaccard ≥ `threshold`, by prefix filtering.
pub(crate) fn redundant_pairs(titles: &[(String, Vec<String>)], threshold: f64) -> Vec<RedundantPair> {
    let mut df: HashMap<&str, usize> = HashMap::new();
    for (_, tokens) in titles {
        for t in tokens {
            *df.entry(t.as_str()).or_default() += 1;
        }
    }
    // Token ids ordered rarest first (ties by text), so prefixes hold the rarest tokens.
    let mut order: Vec<(&str, usize)> = df.iter().map(|(t, n)| (*t, *n)).collect();
    order.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
    let rank: HashMap<&str, usize> = order.iter().enumerate().map(|(i, (t, _))| (*t, i)).collect();
    let sets: Vec<Vec<usize>> = titles
        .iter()
        .map(|(_, tokens)| {
            let mut ids: Vec<usize> = tokens.iter().map(|t| rank[t.as_str()]).collect();
            ids.sort_unstable();
            ids
        })
        .collect();
    let prefix_len = |n: usize| n - ((threshold * n as f64).ceil() as usize).min(n) + 1;
    let mut index: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut out = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        if set.is_empty() {
            continue;
        }
        let mut candidates: Vec<usize> = Vec::new();
        for token in &set[..prefix_len(set.len()).min(set.len())] {
            if let Some(list) = index.get(token) {
                candidates.extend(list);
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        for j in candidates {
            let other = &sets[j];
            let shared = set.iter().filter(|t| other.binary_search(t).is_ok()).count();
            let jaccard = shared as f64 / (set.len() + other.len() - shared) as f64;
            if jaccard >= threshold {
                let (a, b) = (&titles[j].0, &titles[i].0);
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                out.push(RedundantPair { a: a.clone(), b: b.clone(), jaccard: (jaccard * 1000.0).round() / 1000.0 });
            }
        }
        for token in &set[..prefix_len(set.len()).min(set.len())] {
            index.entry(*token).or_default().push(i);
        }
    }
    out.sort_by(|x, y| (&x.a, &x.b).cmp(&(&y.a, &y.b)));
    out
}

fn freshness(record: &NoteRecord, policy: &LoadedPolicy, now: DateTime<Utc>) -> Option<Freshness> {
    let timestamp = record.meta.timestamp?;
    let note_type = record.meta.note_type.clone().unwrap_or_default();
    let half_life = policy.half_life_days(&note_type);
    let age_days = ((now - timestamp).num_seconds() as f64 / 86_400.0).max(0.0);
    let score = (-age_days / half_life).exp2();
    Some(Freshness {
        path: record.path.to_string(),
        note_type,
        age_days: (age_days * 10.0).round() / 10.0,
        half_life_days: half_life,
        score: (score * 1000.0).round() / 1000.0,
    })
}

/// Runs the audit over the inventory (no dense vectors: `extended` names the skipped section).
pub fn audit(inventory: &Inventory, policy: &LoadedPolicy, request: &RotRequest, today: NaiveDate) -> Result<RotReport> {
    audit_with_vectors(
        inventory,
        policy,
        request,
        today,
        Err("no dense index: near-duplicate detection reads stored vectors, and this vault has none".into()),
        None,
        &super::unwatched,
    )
}

/// Runs the audit; `vectors` are the notes' stored dense vectors (or why there are none).
pub(crate) fn audit_with_vectors(
    inventory: &Inventory,
    policy: &LoadedPolicy,
    request: &RotRequest,
    today: NaiveDate,
    vectors: std::result::Result<NoteVectors, String>,
    external_links: Option<Vec<(String, usize, String)>>,
    progress: super::Progress<'_>,
) -> Result<RotReport> {
    let m = &policy.policy.maintenance;
    let archived = policy.policy.metadata.archived_status.as_str();
    let archive_folder = policy.policy.layout.archive_folder.as_str();
    let notes: Vec<&NoteRecord> = inventory.notes().filter(|r| r.valid).collect();
    let titles: Vec<(String, Vec<String>)> =
        notes.iter().map(|r| (r.path.to_string(), title_tokens(r.meta.title.as_deref().unwrap_or("")))).collect();
    let now = today.and_time(chrono::NaiveTime::MIN).and_utc();
    let mut report = RotReport {
        schema_version: 1,
        date: today.to_string(),
        notes_audited: notes.len(),
        thresholds: [
            ("redundant_title_jaccard", m.redundant_title_jaccard),
            ("trivial_body_chars", m.trivial_body_chars as f64),
            ("freshness_report_below", m.freshness_report_below),
            ("near_duplicate_cosine", m.near_duplicate_cosine),
        ]
        .into_iter()
        .collect(),
        redundant: redundant_pairs(&titles, m.redundant_title_jaccard),
        outdated: Vec::new(),
        trivial: Vec::new(),
        stale_freshness: Vec::new(),
        near_duplicates: Vec::new(),
        link_rot: Vec::new(),
        skipped: Vec::new(),
        totals: RotTotals::default(),
        page: Page { offset: 0, max_items: 0, truncated: false, next_cursor: None },
        link_rot_approval: None,
        computed_from: None,
    };
    for record in &notes {
        let live = record.path.top_folder() != archive_folder && record.meta.status.as_deref() != Some(archived);
        if let Some(expiry) = record.meta.expiry
            && expiry < today
            && live
        {
            report.outdated.push(Outdated { path: record.path.to_string(), expiry: expiry.to_string() });
        }
        if record.body_chars < m.trivial_body_chars {
            report.trivial.push(Trivial { path: record.path.to_string(), body_chars: record.body_chars });
        }
        if let Some(f) = freshness(record, policy, now).filter(|f| f.score < m.freshness_report_below && live) {
            report.stale_freshness.push(f);
        }
    }
    report.stale_freshness.sort_by(|a, b| a.score.total_cmp(&b.score).then(a.path.cmp(&b.path)));
    if request.extended {
        match vectors {
            Ok(vectors) => report.near_duplicates = near_duplicates_with_progress(&vectors, m.near_duplicate_cosine, progress),
            Err(reason) => report.skipped.push(Skipped { section: "near_duplicate_bodies", reason }),
        }
    }
    if request.allow_link_rot {
        let reason = if !request.approved {
            Some("link checks need approved=true".to_string())
        } else if policy.policy.egress != EgressPolicy::AllowPublic {
            Some("the egress policy is 'deny'; link checks need egress: allow-public".to_string())
        } else if external_links.is_none() {
            Some("link checks read note bodies; run rot_audit on the vault (Vault::rot_audit)".to_string())
        } else {
            None
        };
        match (reason, external_links) {
            (Some(reason), _) => report.skipped.push(Skipped { section: "link_rot", reason }),
            (None, Some(links)) => {
                let limits = super::link_rot::LinkRotLimits {
                    timeout: std::time::Duration::from_millis(m.link_rot_timeout_ms),
                    max_redirects: m.link_rot_max_redirects,
                    max_links: m.link_rot_max_links,
                };
                let (checks, left_out) = super::link_rot::check_links(&links, &limits, super::link_rot::is_public, progress);
                report.link_rot = checks;
                if left_out > 0 {
                    report.skipped.push(Skipped {
                        section: "link_rot",
                        reason: format!("{left_out} more URLs not checked (maintenance.link_rot_max_links = {})", m.link_rot_max_links),
                    });
                }
            }
            (None, None) => {}
        }
    }
    if request.allow_remote_llm {
        // P.O.W.E.R. reports a section it cannot run instead of failing the audit.
        report.skipped.push(Skipped {
            section: "semantic_contradictions",
            reason: "not_configured: no remote LLM endpoint is configured in this engine; the other sections ran".into(),
        });
    }
    Ok(report)
}

impl crate::vault::Vault {
    /// `rot_audit`: the audit over the current inventory; `extended` adds near-duplicate bodies
    /// from the active generation's stored vectors (never re-embedding anything).
    pub fn rot_audit(&self, request: &RotRequest) -> Result<RotReport> {
        self.rot_audit_with_progress(request, &super::unwatched)
    }

    /// [`Vault::rot_audit`], reporting its long sections to `progress`: `comparing` (near
    /// duplicates, with `extended`) and `checking links` (link rot).
    pub fn rot_audit_with_progress(&self, request: &RotRequest, progress: super::Progress<'_>) -> Result<RotReport> {
        let vectors = if request.extended { self.note_vectors() } else { Err(String::new()) };
        let today = self.today();
        let checks_links = request.allow_link_rot && request.approved && self.policy().policy.egress == EgressPolicy::AllowPublic;
        let links = if checks_links { Some(self.external_links()?) } else { None };
        // Link checks are egress: under a `human` rule for `link_rot` a person approves exactly
        // the URLs that will be contacted (docs/governance.md) before any request is sent.
        let approval = match &links {
            Some(links) => {
                let (paths, request) = link_rot_request(links, self.policy().policy.maintenance.link_rot_max_links);
                crate::approvals::gate_action(self, crate::approvals::Operation::LinkRot, &paths, &request)?
            }
            None => None,
        };
        let mut report = self.with_inventory(|inv| audit_with_vectors(inv, self.policy(), request, today, vectors, links, progress))??;
        report.link_rot_approval = approval;
        report.paginate(request, self.policy())?;
        report.computed_from = Some(self.computed_from()?);
        Ok(report)
    }

    /// (note path, line, url) of every external http(s) link in the valid notes.
    fn external_links(&self) -> Result<Vec<(String, usize, String)>> {
        let paths: Vec<(crate::note::path::VaultPath, usize)> =
            self.with_inventory(|inv| inv.notes().filter(|r| r.valid).map(|r| (r.path.clone(), r.body_first_line)).collect())?;
        let mut out = Vec::new();
        // Read through folder handles, each folder once for its run of notes (never by path).
        let mut cursor = crate::store::beneath::FolderCursor::new(self.root());
        for (path, first_line) in paths {
            let Ok(Some(bytes)) = cursor.read(path.as_str()) else { continue };
            let Ok(text) = String::from_utf8(bytes) else { continue };
            let body = crate::note::frontmatter::split(&text).map(|s| s.body.to_string()).unwrap_or(text.clone());
            for (url, line) in crate::note::body::external_urls(&body, first_line) {
                out.push((path.to_string(), line, url));
            }
        }
        Ok(out)
    }

    fn note_vectors(&self) -> std::result::Result<NoteVectors, String> {
        let acquired =
            crate::search::generation::acquire(self.root(), self.policy()).map_err(|e| format!("no published search generation: {e}"))?;
        let view = acquired
            .generation
            .dense()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no dense index: near-duplicate detection reads stored vectors; run sync with fts_only=false".to_string())?;
        let centres = view.note_vectors();
        let mut out = NoteVectors { dimension: view.arena.dimension, ..Default::default() };
        self.with_inventory(|inv| {
            for record in inv.notes().filter(|r| r.valid) {
                if let Some(v) = centres.get(&crate::search::dense::note_key(record.path.as_str())) {
                    out.paths.push(record.path.to_string());
                    out.data.extend_from_slice(v);
                }
            }
        })
        .map_err(|e| e.to_string())?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;

/// What a link-rot run contacts, as a person approves it: the notes holding the links that
/// will be checked (sorted) and `{urls}`, the distinct URLs `check_links` will request (the
/// first `max_links` in reading order), sorted. Redirect targets are not known in advance:
/// each hop is still held to public addresses.
pub(crate) fn link_rot_request(links: &[(String, usize, String)], max_links: usize) -> (Vec<String>, serde_json::Value) {
    let mut urls: Vec<&str> = Vec::new();
    let mut paths = std::collections::BTreeSet::new();
    for (path, _, url) in links {
        if !urls.contains(&url.as_str()) {
            if urls.len() >= max_links {
                continue;
            }
            urls.push(url);
        }
        paths.insert(path.clone());
    }
    urls.sort_unstable();
    (paths.into_iter().collect(), serde_json::json!({ "urls": urls }))
}
