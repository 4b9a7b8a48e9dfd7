//! Lint: the vault-wide health report and the write gate, two uses of the same rules.
//!
//! The health report judges every in-scope file. The write gate judges only the notes a write
//! touches and the links whose resolution the write changes, so one bad note elsewhere never
//! locks out all writes. Severities come from policy. Pure over the model: no I/O. The health
//! report takes the whole model (`Inventory`); the gate, its baseline and the orphan count take
//! either model a write plans on (`ModelView`), and answer `Err(Overrun)` past a partial one.

use std::collections::HashMap;

use chrono::NaiveDate;
use serde::Serialize;

pub use crate::finding::Finding;
use crate::inventory::{Inventory, ModelView, NoteRecord, Overrun, Resolution};
use crate::note::body::Link;
use crate::note::path::VaultPath;
use crate::policy::{LoadedPolicy, Severity};
use crate::scan::PageKind;

/// The vault-wide health report.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LintReport {
    pub schema_version: u32,
    pub date: String,
    pub notes_total: usize,
    pub notes_valid: usize,
    pub blocking: bool,
    pub counts: std::collections::BTreeMap<&'static str, usize>,
    pub findings: Vec<Finding>,
    /// The generation and the model state the report was computed from (filled by `Vault`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub computed_from: Option<crate::inventory::ComputedFrom>,
}

fn finding(policy: &LoadedPolicy, rule: &'static str, path: impl ToString, line: Option<usize>, message: String) -> Finding {
    Finding { rule, severity: policy.severity(rule), path: path.to_string(), line, message, target: None, candidates: Vec::new() }
}

fn file_findings(policy: &LoadedPolicy, record: &NoteRecord, out: &mut Vec<Finding>) {
    if record.kind != PageKind::Note {
        return;
    }
    for p in &record.problems {
        out.push(finding(policy, p.rule, &record.path, p.line, p.message.clone()));
    }
}

fn link_finding(policy: &LoadedPolicy, source: &VaultPath, link: &Link, resolution: &Resolution) -> Option<Finding> {
    let (rule, message, candidates) = match resolution {
        Resolution::Resolved(_) => return None,
        Resolution::Broken => ("broken-link", format!("{} '{}' resolves to no file", link.kind.as_str(), link.target), Vec::new()),
        Resolution::Ambiguous(paths) => (
            "ambiguous-link",
            format!("{} '{}' matches {} files by name", link.kind.as_str(), link.target, paths.len()),
            paths.iter().map(ToString::to_string).collect(),
        ),
    };
    let mut f = finding(policy, rule, source, Some(link.line), message);
    f.target = Some(link.target.clone());
    f.candidates = candidates;
    Some(f)
}

fn is_stale(policy: &LoadedPolicy, record: &NoteRecord, today: NaiveDate) -> Option<NaiveDate> {
    let expiry = record.meta.expiry?;
    let exempt_folder = policy.policy.lint.freshness_exempt_folders.iter().any(|f| f == record.path.top_folder());
    let archived = record.meta.status.as_deref() == Some(policy.policy.metadata.archived_status.as_str());
    (expiry < today && !exempt_folder && !archived).then_some(expiry)
}

fn stale_finding(policy: &LoadedPolicy, record: &NoteRecord, today: NaiveDate) -> Option<Finding> {
    is_stale(policy, record, today).map(|expiry| finding(policy, "stale", &record.path, Some(1), format!("expired on {expiry}")))
}

fn orphan_exempt(policy: &LoadedPolicy, record: &NoteRecord) -> bool {
    let lint = &policy.policy.lint;
    record.kind != PageKind::Note
        || lint.orphan_exempt_names.iter().any(|n| n == record.path.file_name())
        || lint.orphan_exempt_folders.iter().any(|f| f == record.path.top_folder())
        || !record.path.as_str().contains('/')
        || record.meta.status.as_deref() == Some(policy.policy.metadata.archived_status.as_str())
}

/// Whether a record's outgoing links are judged and counted: generated catalogs are neither.
fn links_count(record: &NoteRecord) -> bool {
    !(record.generated && matches!(record.kind, PageKind::Catalog | PageKind::RootIndex))
}

/// The vault-wide report.
pub fn health_report(inventory: &Inventory, policy: &LoadedPolicy, today: NaiveDate) -> LintReport {
    let mut findings = Vec::new();
    let mut inbound: HashMap<&VaultPath, usize> = HashMap::new();
    for record in inventory.records.values() {
        file_findings(policy, record, &mut findings);
        if !links_count(record) {
            continue;
        }
        for link in &record.links {
            let resolution = inventory.resolve(&record.path, link, policy);
            if let Resolution::Resolved(target) = &resolution {
                if let Some((key, _)) = inventory.records.get_key_value(target)
                    && target != &record.path
                {
                    *inbound.entry(key).or_default() += 1;
                }
            } else if let Some(f) = link_finding(policy, &record.path, link, &resolution) {
                findings.push(f);
            }
        }
        if let Some(f) = stale_finding(policy, record, today) {
            findings.push(f);
        }
    }
    for path in &inventory.symlinked_notes {
        findings.push(finding(policy, "symlinked-note", path, None, "symbolic link; not followed or read".into()));
    }
    for unusable in &inventory.unusable_names {
        let hidden = if unusable.name.ends_with('/') { "anything in this folder" } else { "this note" };
        let message = format!(
            "a name no vault path may hold (not UTF-8, a control character or a backslash): the engine does not read, search or catalogue {hidden}; rename it"
        );
        findings.push(finding(policy, "unusable-name", unusable.shown(), None, message));
    }
    for record in inventory.records.values() {
        if !orphan_exempt(policy, record) && !inbound.contains_key(&record.path) {
            findings.push(finding(policy, "orphan", &record.path, None, "no inbound links from other notes".into()));
        }
    }
    findings.sort_by(|a, b| (&a.path, a.line, a.rule).cmp(&(&b.path, b.line, b.rule)));
    let mut counts = std::collections::BTreeMap::new();
    for f in &findings {
        *counts.entry(f.rule).or_default() += 1;
    }
    let notes_total = inventory.notes().count();
    LintReport {
        schema_version: 1,
        date: today.to_string(),
        notes_total,
        notes_valid: inventory.notes().filter(|r| r.valid).count(),
        blocking: findings.iter().any(|f| f.severity == Severity::Blocking),
        counts,
        findings,
        computed_from: None,
    }
}

/// How many of `paths` the vault-wide report would call orphans (the `orphan` rule of
/// `health_report`): notes not exempt that no other note's counted link resolves to. Orphans
/// are a health warning, never a gate finding; the write path counts them among the notes a
/// write leaves in place (the receipt's `lint_orphans`). Reads only the notes that may link
/// to each path (`ModelView::try_linkers_of`); `Err` when a partial model does not hold them.
pub fn orphans_among(inventory: &dyn ModelView, policy: &LoadedPolicy, paths: &[VaultPath]) -> Result<usize, Overrun> {
    let mut orphans = 0;
    for record in paths.iter().filter_map(|path| inventory.records().get(path)).filter(|record| !orphan_exempt(policy, record)) {
        let mut linked = false;
        'sources: for source in inventory.try_linkers_of(&record.path)?.iter().filter(|source| **source != record.path) {
            let Some(r) = inventory.records().get(source).filter(|r| links_count(r)) else { continue };
            for link in &r.links {
                if matches!(inventory.try_resolve(source, link, policy)?, Resolution::Resolved(target) if target == record.path) {
                    linked = true;
                    break 'sources;
                }
            }
        }
        orphans += usize::from(!linked);
    }
    Ok(orphans)
}

/// State captured before a write, for the gate to compare against: how links that may be
/// affected resolve, and which problems the touched notes already had.
#[derive(Debug, Default)]
pub struct LinkBaseline {
    resolutions: Vec<(VaultPath, Link, Resolution)>,
    /// Touched note → its (link kind, target) pairs that were already broken or ambiguous.
    own_link_problems: HashMap<VaultPath, std::collections::HashSet<(&'static str, String)>>,
    /// Touched notes that were already stale.
    own_stale: std::collections::HashSet<VaultPath>,
}

/// Captures how the links that may be affected by writing `touched` resolve now; `Err` when
/// a partial model does not hold what that asks.
pub fn baseline(
    inventory: &dyn ModelView,
    policy: &LoadedPolicy,
    touched: &[VaultPath],
    today: NaiveDate,
) -> Result<LinkBaseline, Overrun> {
    let mut resolutions = Vec::new();
    let mut own_link_problems: HashMap<VaultPath, std::collections::HashSet<(&'static str, String)>> = HashMap::new();
    let mut own_stale = std::collections::HashSet::new();
    for path in touched {
        if let Some(record) = inventory.records().get(path) {
            let problems = own_link_problems.entry(path.clone()).or_default();
            for link in &record.links {
                if !matches!(inventory.try_resolve(path, link, policy)?, Resolution::Resolved(_)) {
                    problems.insert((link.kind.as_str(), link.target.clone()));
                }
            }
            if is_stale(policy, record, today).is_some() {
                own_stale.insert(path.clone());
            }
        }
    }
    for path in touched {
        for source in inventory.try_linkers_of(path)? {
            if touched.contains(&source) {
                continue;
            }
            let Some(record) = inventory.records().get(&source).filter(|r| links_count(r)) else { continue };
            for link in &record.links {
                resolutions.push((source.clone(), link.clone(), inventory.try_resolve(&source, link, policy)?));
            }
        }
    }
    Ok(LinkBaseline { resolutions, own_link_problems, own_stale })
}

/// The write gate's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub blocking: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

impl GateReport {
    pub fn passed(&self) -> bool {
        self.blocking.is_empty()
    }
}

/// Judges a write after it is applied to `inventory`: the touched notes' metadata, the links
/// they introduce and staleness they introduce, plus links elsewhere that resolved before and
/// no longer do. Problems a touched note already had are reported as warnings, not blocks, so a
/// repair (heal, archive) of an imperfect note is never refused for what it did not cause.
/// `Err` when a partial model does not hold what that asks.
pub fn gate(
    inventory: &dyn ModelView,
    policy: &LoadedPolicy,
    touched: &[VaultPath],
    before: &LinkBaseline,
    today: NaiveDate,
) -> Result<GateReport, Overrun> {
    let mut findings = Vec::new();
    let mut inherited = Vec::new();
    for path in touched {
        let Some(record) = inventory.records().get(path) else { continue };
        file_findings(policy, record, &mut findings);
        if let Some(f) = stale_finding(policy, record, today) {
            if before.own_stale.contains(path) { inherited.push(f) } else { findings.push(f) }
        }
        let old = before.own_link_problems.get(path);
        for link in &record.links {
            let resolution = inventory.try_resolve(path, link, policy)?;
            if let Some(f) = link_finding(policy, path, link, &resolution) {
                if old.is_some_and(|o| o.contains(&(link.kind.as_str(), link.target.clone()))) {
                    inherited.push(f)
                } else {
                    findings.push(f)
                }
            }
        }
    }
    for (source, link, was) in &before.resolutions {
        if !matches!(was, Resolution::Resolved(_)) {
            continue;
        }
        let now = inventory.try_resolve(source, link, policy)?;
        findings.extend(link_finding(policy, source, link, &now));
    }
    let (blocking, mut warnings): (Vec<Finding>, Vec<Finding>) = findings.into_iter().partition(|f| f.severity == Severity::Blocking);
    for mut f in inherited {
        f.severity = Severity::Warning;
        f.message = format!("{} (already present before this write)", f.message);
        warnings.push(f);
    }
    Ok(GateReport { blocking, warnings })
}

/// The blocking findings the gate can judge from one note's own bytes, with no vault around
/// it (the remote's gate, `paravault gate check`): its metadata and size (`file_findings`)
/// and whether it is stale. Link findings need the whole vault; a replica's integration
/// judges those with its full gate.
pub fn note_blocking_findings(policy: &LoadedPolicy, path: &VaultPath, bytes: &[u8], today: NaiveDate) -> Vec<Finding> {
    let Some(kind) = crate::scan::classify(policy, path) else { return Vec::new() };
    let mut record = NoteRecord::empty(path.clone(), kind);
    if bytes.len() as u64 > policy.policy.limits.note_bytes_max {
        record.problems.push(crate::inventory::FileProblem {
            rule: "note-too-large",
            line: None,
            message: format!("{} bytes, over the policy limit of {} bytes", bytes.len(), policy.policy.limits.note_bytes_max),
        });
    } else {
        crate::inventory::analyse_bytes(&mut record, bytes, policy);
    }
    let mut findings = Vec::new();
    file_findings(policy, &record, &mut findings);
    findings.extend(stale_finding(policy, &record, today));
    findings.retain(|f| f.severity == Severity::Blocking);
    findings
}

/// Markdown style findings of one note (read from disk by the caller).
pub fn style_report(policy: &LoadedPolicy, path: &VaultPath, body: &str, body_first_line: usize) -> Vec<Finding> {
    crate::note::body::style_findings(body, body_first_line)
        .into_iter()
        .map(|s| finding(policy, s.rule, path, Some(s.line), s.message))
        .collect()
}

#[cfg(test)]
mod tests;
