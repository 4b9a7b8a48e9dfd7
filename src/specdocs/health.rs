//! `status` (a rollup of features and plans in flight, or a trace of one plan or feature) and
//! `check` (validators with per-check counts and findings; `fix` applies only repairs that
//! never touch prose: missing frontmatter tags and date, a stale feature index).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::Serialize;

use super::authoring::write_feature_index;
use super::ledger::{ledger_path, section_lines, section_summary};
use super::plan::{LoadedPlan, parse_plan_text, resolve_plan};
use super::{Doc, TOOL_SCHEMA_VERSION, documents, index_path_of, policy_of, read_bytes, read_text, write_document};
use crate::approvals::execute_checked as execute;
use crate::error::{Error, Result};
use crate::note::{frontmatter, yaml_edit};
use crate::vault::Vault;

/// A feature's lifecycle as people read it.
pub struct Lifecycle {
    pub status: &'static str,
    pub has_plan: bool,
    pub plan_tier: Option<&'static str>,
    pub plan_completion_percent: Option<f64>,
}

fn load(vault: &Vault, doc: &Doc) -> Option<LoadedPlan> {
    let text = read_text(vault, &doc.path).ok()?;
    parse_plan_text(doc.clone(), text).ok()
}

/// `Not Started` (no plan), `Planned` (no step closed), `In Progress`, `Completed` (every step
/// of every plan closed), from the feature's newest plan.
pub(crate) fn feature_lifecycle(vault: &Vault, docs: &[Doc], feature: &str) -> Lifecycle {
    let plans: Vec<&Doc> = docs.iter().filter(|d| d.feature == feature && d.doc_type == "plan").collect();
    let Some(latest) = plans.iter().max_by(|a, b| a.stem.cmp(&b.stem)).and_then(|d| load(vault, d)) else {
        return Lifecycle { status: "Not Started", has_plan: !plans.is_empty(), plan_tier: None, plan_completion_percent: None };
    };
    let (total, done, percent, _) = latest.body.totals();
    let status = match (total, done) {
        (0, _) | (_, 0) => "Planned",
        (t, d) if t == d => "Completed",
        _ => "In Progress",
    };
    Lifecycle { status, has_plan: true, plan_tier: Some(latest.body.tier.name()), plan_completion_percent: Some(percent) }
}

/// What `status` returns: the project-wide rollup or the trace of one plan or feature.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StatusReport {
    /// The version of the vaultspec tool schema these fields follow.
    pub tool_schema_version: String,
    /// The rollup or the trace, told apart by `kind`.
    #[serde(flatten)]
    pub view: StatusView,
}

/// The two forms of `status`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StatusView {
    /// No target: every feature, the plans in flight and vault totals.
    Rollup(Rollup),
    /// A target: its plans step by step, the documents grounding it and unlinked ledgers.
    Trace(Trace),
}

/// The project-wide rollup.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Rollup {
    /// Every feature, by name.
    pub features: Vec<FeatureStatus>,
    /// The number of features.
    pub features_total: usize,
    /// The plans with open steps.
    pub plans_in_flight: Vec<PlanInFlight>,
    /// Counts over the whole vault.
    pub totals: RollupTotals,
    /// Always empty in a rollup (the trace's field).
    pub plans: Vec<PlanTrace>,
}

/// One feature of the rollup.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FeatureStatus {
    /// The feature tag, without the # prefix.
    pub name: String,
    /// How many documents carry the feature.
    pub doc_count: usize,
    /// The newest document date of the feature.
    pub latest_activity: Option<String>,
    /// Whether the feature has a plan.
    pub has_plan: bool,
    /// Not Started, Planned, In Progress or Completed.
    pub status: String,
    /// The tier of the feature's newest plan.
    pub plan_tier: Option<String>,
    /// The completion of the feature's newest plan, in percent.
    pub plan_completion_percent: Option<f64>,
}

/// One plan with open steps.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PlanInFlight {
    /// The plan's stem.
    pub stem: String,
    /// The plan's feature.
    pub feature: String,
    /// The plan's tier (L1 to L4).
    pub tier: String,
    /// Unchecked steps.
    pub open_steps: usize,
    /// Checked steps.
    pub closed_steps: usize,
    /// All steps.
    pub total_steps: usize,
    /// Checked steps in percent, to one decimal.
    pub completion_percent: f64,
    /// The display path of the first unchecked step.
    pub next_open_step: Option<String>,
}

/// The rollup's vault-wide counts.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RollupTotals {
    /// The vaultspec documents.
    pub total_docs: usize,
    /// The features.
    pub total_features: usize,
    /// The documents by type.
    pub counts_by_type: BTreeMap<String, usize>,
    /// Documents nothing links to.
    pub orphaned_count: usize,
    /// `related:` entries that resolve to no document.
    pub dangling_link_count: usize,
}

/// The trace of one plan or feature.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Trace {
    /// `plan` (the target named a plan) or `feature`.
    pub trace_kind: String,
    /// The target, as given.
    pub target: String,
    /// The traced plans.
    pub plans: Vec<PlanTrace>,
    /// The feature's other document stems, by type.
    pub grounding: BTreeMap<String, Vec<String>>,
    /// The feature's execution documents no plan's ledger is.
    pub unlinked_execs: Vec<String>,
}

/// One plan, step by step, with its ledger.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PlanTrace {
    /// The plan's stem.
    pub stem: String,
    /// The plan's tier (L1 to L4).
    pub tier: String,
    /// The plan's steps in order.
    pub steps: Vec<StepTrace>,
}

/// One step of a traced plan.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepTrace {
    /// The step's leaf ID (S01).
    pub canonical_id: String,
    /// The step's full display path (P01.S01).
    pub display_path: String,
    /// Whether the step is checked.
    pub checked: bool,
    /// The ledger's stem when the ledger has a section for the step.
    pub record_stem: Option<String>,
    /// The step's ledger rows.
    pub row_count: usize,
    /// The step's last `verify:` entry.
    pub last_verify: Option<String>,
}

/// `status`: the rollup without a target, else the trace of a plan or feature.
pub fn status(vault: &Vault, target: Option<&str>) -> Result<StatusReport> {
    policy_of(vault)?;
    let docs = documents(vault)?;
    let view = match target.map(str::trim).filter(|t| !t.is_empty()) {
        None => StatusView::Rollup(rollup(vault, &docs)?),
        Some(target) => StatusView::Trace(trace(vault, &docs, target)?),
    };
    Ok(StatusReport { tool_schema_version: TOOL_SCHEMA_VERSION.to_string(), view })
}

fn rollup(vault: &Vault, docs: &[Doc]) -> Result<Rollup> {
    let mut by_feature: BTreeMap<&str, Vec<&Doc>> = BTreeMap::new();
    for doc in docs {
        by_feature.entry(doc.feature.as_str()).or_default().push(doc);
    }
    let mut features = Vec::new();
    for (name, feature_docs) in &by_feature {
        let lifecycle = feature_lifecycle(vault, docs, name);
        features.push(FeatureStatus {
            name: name.to_string(),
            doc_count: feature_docs.len(),
            latest_activity: feature_docs.iter().filter_map(|d| d.date.clone()).max(),
            has_plan: lifecycle.has_plan,
            status: lifecycle.status.to_string(),
            plan_tier: lifecycle.plan_tier.map(str::to_string),
            plan_completion_percent: lifecycle.plan_completion_percent,
        });
    }
    let mut in_flight = Vec::new();
    for doc in docs.iter().filter(|d| d.doc_type == "plan") {
        let Some(plan) = load(vault, doc) else { continue };
        let (total, done, percent, next) = plan.body.totals();
        if total > done {
            in_flight.push(PlanInFlight {
                stem: doc.stem.clone(),
                feature: doc.feature.clone(),
                tier: plan.body.tier.name().to_string(),
                open_steps: total - done,
                closed_steps: done,
                total_steps: total,
                completion_percent: percent,
                next_open_step: next,
            });
        }
    }
    let mut counts_by_type: BTreeMap<String, usize> = BTreeMap::new();
    for doc in docs {
        *counts_by_type.entry(doc.doc_type.clone()).or_default() += 1;
    }
    let orphaned = vault.with_inventory(|inv| docs.iter().filter(|d| inv.linkers_of(&d.path).is_empty()).count())?;
    let dangling: usize = docs.iter().map(|d| dangling_related(vault, docs, d).len()).sum();
    Ok(Rollup {
        features,
        features_total: by_feature.len(),
        plans_in_flight: in_flight,
        totals: RollupTotals {
            total_docs: docs.len(),
            total_features: by_feature.len(),
            counts_by_type,
            orphaned_count: orphaned,
            dangling_link_count: dangling,
        },
        plans: Vec::new(),
    })
}

fn plan_trace(vault: &Vault, doc: &Doc) -> Result<PlanTrace> {
    let plan = load(vault, doc)
        .ok_or_else(|| Error::NoteUnreadable { path: doc.path.to_string(), reason: "the plan cannot be read or parsed".into() })?;
    let ledger = ledger_path(vault, doc)?;
    let ledger_text = read_bytes(vault, &ledger).map(|b| String::from_utf8_lossy(&b).into_owned());
    let ledger_body = ledger_text.as_deref().map(|t| frontmatter::split(t).map_or(t, |s| s.body)).unwrap_or("");
    let ledger_stem = ledger.file_name().trim_end_matches(".md").to_string();
    let steps: Vec<StepTrace> = plan
        .body
        .steps()
        .into_iter()
        .map(|s| {
            let lines = section_lines(ledger_body, &s.canonical_id);
            let (rows, _, verify) = section_summary(&lines);
            StepTrace {
                record_stem: (!lines.is_empty()).then(|| ledger_stem.clone()),
                canonical_id: s.canonical_id,
                display_path: s.display_path,
                checked: s.checked,
                row_count: rows,
                last_verify: verify,
            }
        })
        .collect();
    Ok(PlanTrace { stem: doc.stem.clone(), tier: plan.body.tier.name().to_string(), steps })
}

fn trace(vault: &Vault, docs: &[Doc], target: &str) -> Result<Trace> {
    let exact = docs.iter().find(|d| d.doc_type == "plan" && (d.stem == super::reference_stem(target) || d.path.as_str() == target));
    let (trace_kind, feature, plans): (&str, String, Vec<&Doc>) = match exact {
        Some(plan) => ("plan", plan.feature.clone(), vec![plan]),
        None => {
            let feature = target.trim_start_matches('#').to_string();
            if !docs.iter().any(|d| d.feature == feature) {
                // The resolution rule's own error for a plan reference that names nothing,
                // blamed on the argument the caller gave (`target`, not a `plan`).
                resolve_plan(docs, target).map_err(|error| match error {
                    Error::InvalidArgument { reason, .. } => Error::InvalidArgument {
                        name: "target",
                        reason: format!("{reason}; a target is a plan's stem or path, or a feature tag, e.g. \"search-api\""),
                    },
                    other => other,
                })?;
            }
            let plans = docs.iter().filter(|d| d.feature == feature && d.doc_type == "plan").collect();
            ("feature", feature, plans)
        }
    };
    let plan_rows = plans.iter().map(|p| plan_trace(vault, p)).collect::<Result<Vec<_>>>()?;
    let mut grounding: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for doc in docs.iter().filter(|d| d.feature == feature && d.doc_type != "plan" && d.doc_type != "exec") {
        grounding.entry(doc.doc_type.clone()).or_default().push(doc.stem.clone());
    }
    let ledgers: BTreeSet<String> = plans.iter().filter_map(|p| ledger_path(vault, p).ok()).map(|p| p.to_string()).collect();
    let unlinked: Vec<String> = docs
        .iter()
        .filter(|d| d.feature == feature && d.doc_type == "exec" && !ledgers.contains(d.path.as_str()) && !d.stem.ends_with("-ledger"))
        .map(|d| d.stem.clone())
        .collect();
    Ok(Trace { trace_kind: trace_kind.to_string(), target: target.to_string(), plans: plan_rows, grounding, unlinked_execs: unlinked })
}

/// The `related:` entries of `doc` that resolve to no document.
fn dangling_related(vault: &Vault, docs: &[Doc], doc: &Doc) -> Vec<String> {
    let Some(text) = read_bytes(vault, &doc.path).map(|b| String::from_utf8_lossy(&b).into_owned()) else { return Vec::new() };
    let Ok(split) = frontmatter::split(&text) else { return Vec::new() };
    let Ok(fm) = frontmatter::parse(&split) else { return Vec::new() };
    fm.get("related")
        .and_then(serde_yaml::Value::as_sequence)
        .map(|items| {
            items
                .iter()
                .filter_map(serde_yaml::Value::as_str)
                .filter(|r| super::resolve_reference(docs, r).is_err())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The validators, in report order.
pub(crate) const CHECKS: [&str; 5] = ["frontmatter", "naming", "dangling", "plan_ids", "index"];

/// One finding.
#[derive(Debug, Clone)]
struct Finding {
    check: &'static str,
    path: String,
    message: String,
    severity: &'static str,
    fixable: bool,
}

fn findings(vault: &Vault, docs: &[Doc], feature: Option<&str>) -> Result<Vec<Finding>> {
    let policy = policy_of(vault)?;
    let mut out = Vec::new();
    let selected: Vec<&Doc> = docs.iter().filter(|d| feature.is_none_or(|f| d.feature == f)).collect();
    for doc in &selected {
        let path = doc.path.to_string();
        let text = read_bytes(vault, &doc.path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        match frontmatter::split(&text).ok().and_then(|s| frontmatter::parse(&s).ok()) {
            None => out.push(Finding {
                check: "frontmatter",
                path: path.clone(),
                message: "no readable frontmatter".into(),
                severity: "error",
                fixable: false,
            }),
            Some(fm) => {
                let tags: Vec<&str> = fm
                    .get("tags")
                    .and_then(serde_yaml::Value::as_sequence)
                    .map(|s| s.iter().filter_map(serde_yaml::Value::as_str).collect())
                    .unwrap_or_default();
                for wanted in [format!("#{}", doc.doc_type), format!("#{}", doc.feature)] {
                    if !tags.contains(&wanted.as_str()) {
                        out.push(Finding {
                            check: "frontmatter",
                            path: path.clone(),
                            message: format!("missing tag {wanted}"),
                            severity: "error",
                            fixable: true,
                        });
                    }
                }
                if fm.get("date").is_none_or(serde_yaml::Value::is_null) && doc.date.is_some() {
                    out.push(Finding {
                        check: "frontmatter",
                        path: path.clone(),
                        message: "missing date".into(),
                        severity: "error",
                        fixable: true,
                    });
                }
            }
        }
        let dated = doc.date.as_deref().map(|d| format!("{d}-{}-", doc.feature));
        let named = dated.as_ref().is_some_and(|prefix| {
            doc.stem.starts_with(prefix.as_str())
                && (doc.stem.ends_with(&format!("-{}", doc.doc_type)) || (doc.doc_type == "exec" && doc.stem.ends_with("-ledger")))
        }) || (doc.stem == format!("{}-{}", doc.date.clone().unwrap_or_default(), doc.feature));
        if !named {
            out.push(Finding {
                check: "naming",
                path: path.clone(),
                message: format!("file name is not {{date}}-{}[-{{topic}}]-{}.md", doc.feature, doc.doc_type),
                severity: "error",
                fixable: false,
            });
        }
        for target in dangling_related(vault, docs, doc) {
            out.push(Finding {
                check: "dangling",
                path: path.clone(),
                message: format!("wiki-link target not found: {target}"),
                severity: "error",
                fixable: false,
            });
        }
        if doc.doc_type == "plan"
            && let Some(plan) = load(vault, doc)
        {
            let mut seen = BTreeSet::new();
            for step in plan.body.steps() {
                if !seen.insert(step.canonical_id.clone()) {
                    out.push(Finding {
                        check: "plan_ids",
                        path: path.clone(),
                        message: format!("step ID {} appears twice", step.canonical_id),
                        severity: "error",
                        fixable: false,
                    });
                }
                if plan.body.retired.contains(&step.canonical_id) {
                    out.push(Finding {
                        check: "plan_ids",
                        path: path.clone(),
                        message: format!("step ID {} is retired but in use", step.canonical_id),
                        severity: "error",
                        fixable: false,
                    });
                }
            }
        }
    }
    let features: BTreeSet<&str> = selected.iter().map(|d| d.feature.as_str()).collect();
    for name in features {
        let index = index_path_of(policy, name)?;
        let expected = super::authoring::feature_index_body(docs, name);
        let current = read_bytes(vault, &index).map(|b| String::from_utf8_lossy(&b).into_owned());
        let fresh = current.as_deref().and_then(|t| frontmatter::split(t).ok()).is_some_and(|s| s.body == expected);
        if !fresh {
            let message = if current.is_some() { "feature index is stale" } else { "feature index is missing" };
            out.push(Finding { check: "index", path: index.to_string(), message: message.into(), severity: "warning", fixable: true });
        }
    }
    Ok(out)
}

/// Adds missing tags and date to a document's frontmatter (never its body).
fn fix_frontmatter(vault: &Vault, doc: &Doc) -> Result<bool> {
    let text = read_text(vault, &doc.path)?;
    let split = frontmatter::split(&text).map_err(|e| Error::InvalidContent { path: doc.path.to_string(), reason: e.to_string() })?;
    let fm = frontmatter::parse(&split).map_err(|e| Error::InvalidContent { path: doc.path.to_string(), reason: e.to_string() })?;
    let mut tags: Vec<String> = fm
        .get("tags")
        .and_then(serde_yaml::Value::as_sequence)
        .map(|s| s.iter().filter_map(serde_yaml::Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let mut yaml = split.yaml.to_string();
    let mut changed = false;
    for wanted in [format!("#{}", doc.doc_type), format!("#{}", doc.feature)] {
        if !tags.contains(&wanted) {
            tags.push(wanted);
            changed = true;
        }
    }
    if changed {
        let rendered: Vec<String> = tags.iter().map(|t| yaml_edit::quoted(t)).collect();
        yaml = yaml_edit::set_entry(&yaml, "tags", &format!("tags: [{}]\n", rendered.join(", ")));
    }
    if fm.get("date").is_none_or(serde_yaml::Value::is_null)
        && let Some(date) = &doc.date
    {
        yaml = yaml_edit::set_entry(&yaml, "date", &format!("date: {date}\n"));
        changed = true;
    }
    if !changed {
        return Ok(false);
    }
    let new_text = format!("{}{yaml}{}{}", split.open, split.close, split.body);
    let new_text = if split.bom { format!("\u{feff}{new_text}") } else { new_text };
    execute(vault, write_document("mcp.vaultspec.check_fix", doc.path.clone(), new_text, Some(text.as_str()), false))?;
    Ok(true)
}

/// What `check` returns: per-validator counts and the findings left after any repair.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckReport {
    /// `ok` when no error finding is left, else `failed`.
    pub status: CheckStatus,
    /// Whether repairs were asked for (`fix`).
    pub fixed: bool,
    /// Error findings left.
    pub total_errors: usize,
    /// Warning findings left.
    pub total_warnings: usize,
    /// Repairs made.
    pub total_fixed: usize,
    /// One row per validator, in report order.
    pub checks: Vec<CheckRow>,
    /// The findings left.
    pub findings: Vec<CheckFinding>,
}

/// Whether a `check` left errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// No error finding.
    Ok,
    /// At least one error finding.
    Failed,
}

/// One validator's counts.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckRow {
    /// The validator: frontmatter, naming, dangling, plan_ids or index.
    pub check: String,
    /// Its error findings.
    pub error_count: usize,
    /// Its warning findings.
    pub warning_count: usize,
    /// Its informational findings (none yet).
    pub info_count: usize,
    /// Its repairs.
    pub fixed_count: usize,
    /// Whether it found nothing.
    pub clean: bool,
}

/// One finding of `check`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckFinding {
    /// The validator that found it.
    pub check: String,
    /// The vault-relative path it concerns.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// error or warning.
    pub severity: String,
    /// Whether `fix` repairs it.
    pub fixable: bool,
}

/// `check`: the validators' report; with `fix`, safe repairs first, then the report of what is left.
pub fn check(vault: &Vault, feature: Option<&str>, fix: bool) -> Result<CheckReport> {
    let policy = policy_of(vault)?;
    let feature = feature.map(|f| f.trim().trim_start_matches('#').to_string()).filter(|f| !f.is_empty());
    let docs = documents(vault)?;
    let mut fixed_by_check: BTreeMap<&str, usize> = BTreeMap::new();
    if fix {
        let found = findings(vault, &docs, feature.as_deref())?;
        let to_fix: BTreeSet<String> = found.iter().filter(|f| f.fixable && f.check == "frontmatter").map(|f| f.path.clone()).collect();
        for doc in docs.iter().filter(|d| to_fix.contains(d.path.as_str())) {
            if fix_frontmatter(vault, doc)? {
                *fixed_by_check.entry("frontmatter").or_default() += 1;
            }
        }
        let stale: BTreeSet<String> = found.iter().filter(|f| f.check == "index").map(|f| f.path.clone()).collect();
        let features: BTreeSet<&str> = docs.iter().map(|d| d.feature.as_str()).collect();
        for name in features {
            if stale.contains(index_path_of(policy, name)?.as_str()) && write_feature_index(vault, policy, &docs, name)? {
                *fixed_by_check.entry("index").or_default() += 1;
            }
        }
    }
    let docs = documents(vault)?;
    let found = findings(vault, &docs, feature.as_deref())?;
    let mut checks = Vec::new();
    for name in CHECKS {
        let errors = found.iter().filter(|f| f.check == name && f.severity == "error").count();
        let warnings = found.iter().filter(|f| f.check == name && f.severity == "warning").count();
        let fixed = fixed_by_check.get(name).copied().unwrap_or(0);
        checks.push(CheckRow {
            check: name.to_string(),
            error_count: errors,
            warning_count: warnings,
            info_count: 0,
            fixed_count: fixed,
            clean: errors + warnings == 0,
        });
    }
    let total_errors = found.iter().filter(|f| f.severity == "error").count();
    let total_warnings = found.iter().filter(|f| f.severity == "warning").count();
    Ok(CheckReport {
        status: if total_errors == 0 { CheckStatus::Ok } else { CheckStatus::Failed },
        fixed: fix,
        total_errors,
        total_warnings,
        total_fixed: fixed_by_check.values().sum::<usize>(),
        checks,
        findings: found
            .into_iter()
            .map(|f| CheckFinding {
                check: f.check.to_string(),
                path: f.path,
                message: f.message,
                severity: f.severity.to_string(),
                fixable: f.fixable,
            })
            .collect(),
    })
}
