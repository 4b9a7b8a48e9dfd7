//! Plans: tiers L1–L4, step rows with canonical identifiers (`S##`, under `P##` phases and
//! `W##` waves) and computed display paths, `plan_progress` (explicit states, one write at the
//! end, only when a step changed) and `plan_edit` (add/insert allocate new IDs, remove retires
//! an ID forever, a guard refuses a write that would lose IDs nobody named).
//!
//! A step row is a checklist line `- [ ] S03: <action> — scope: <scope>`; a phase or wave is a
//! heading whose text starts with its ID (`## P01: …`, `## W01: …`). Retired IDs are kept in
//! the plan's `retired_steps:` frontmatter list; the next ID is one past the highest live or
//! retired one, so nothing is ever reused or renumbered.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::envelope::{BatchReport, ItemError, ItemOutcome, envelope};
use super::{Doc, documents, policy_of, read_text, write_document};
use crate::approvals::execute_checked as execute;
use crate::error::{Error, Result};
use crate::note::{frontmatter, yaml_edit};
use crate::vault::Vault;

/// A plan's complexity tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    L1,
    L2,
    L3,
    L4,
}

impl Tier {
    pub fn parse(text: &str) -> std::result::Result<Tier, String> {
        match text.trim() {
            "L1" => Ok(Tier::L1),
            "L2" => Ok(Tier::L2),
            "L3" => Ok(Tier::L3),
            "L4" => Ok(Tier::L4),
            other => Err(format!("invalid tier '{other}' (one of L1, L2, L3, L4)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tier::L1 => "L1",
            Tier::L2 => "L2",
            Tier::L3 => "L3",
            Tier::L4 => "L4",
        }
    }
}

fn step_regex() -> &'static Regex {
    static STEP: OnceLock<Regex> = OnceLock::new();
    STEP.get_or_init(|| Regex::new(r"^(\s*)- \[([ xX])\] (S\d{2,})(?::\s?(.*))?$").expect("BUG: step regex"))
}

fn container_regex() -> &'static Regex {
    static CONTAINER: OnceLock<Regex> = OnceLock::new();
    CONTAINER.get_or_init(|| Regex::new(r"^#{1,6}\s+([WP])(\d{2,})\b").expect("BUG: container regex"))
}

/// The separator between a step's action and its scope.
const SCOPE_SEPARATOR: &str = " — scope: ";

/// One step as read from the plan body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub canonical_id: String,
    pub display_path: String,
    pub checked: bool,
    pub action: String,
    pub scope: String,
    pub phase: Option<String>,
    /// Index of the step's line in the body.
    pub line: usize,
}

/// A plan body as lines, with its tier and retired IDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanBody {
    pub lines: Vec<String>,
    pub tier: Tier,
    pub retired: BTreeSet<String>,
}

fn number(id: &str) -> u64 {
    id[1..].parse().unwrap_or(0)
}

/// Renders a step row.
pub(crate) fn step_line(id: &str, checked: bool, action: &str, scope: &str) -> String {
    let mark = if checked { 'x' } else { ' ' };
    let action = action.replace(['\n', '\r'], " ");
    let scope = scope.replace(['\n', '\r'], " ");
    if scope.trim().is_empty() {
        format!("- [{mark}] {id}: {}", action.trim())
    } else {
        format!("- [{mark}] {id}: {}{SCOPE_SEPARATOR}{}", action.trim(), scope.trim())
    }
}

impl PlanBody {
    pub fn parse(body: &str, tier: Tier, retired: BTreeSet<String>) -> Self {
        PlanBody { lines: body.lines().map(str::to_string).collect(), tier, retired }
    }

    pub fn render(&self) -> String {
        let mut out = self.lines.join("\n");
        out.push('\n');
        out
    }

    /// Every step in body order, with display paths.
    pub fn steps(&self) -> Vec<Step> {
        let mut wave: Option<String> = None;
        let mut phase: Option<String> = None;
        let mut out = Vec::new();
        let mut in_fence = false;
        for (i, line) in self.lines.iter().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                in_fence = !in_fence;
            }
            if in_fence {
                continue;
            }
            if let Some(caps) = container_regex().captures(line) {
                let id = format!("{}{}", &caps[1], &caps[2]);
                if &caps[1] == "W" {
                    wave = Some(id);
                    phase = None;
                } else {
                    phase = Some(id);
                }
                continue;
            }
            if let Some(caps) = step_regex().captures(line) {
                let id = caps[3].to_string();
                let text = caps.get(4).map_or("", |m| m.as_str());
                let (action, scope) = text.rsplit_once(SCOPE_SEPARATOR).unwrap_or((text, ""));
                let mut path = Vec::new();
                if self.tier >= Tier::L3
                    && let Some(w) = &wave
                {
                    path.push(w.clone());
                }
                if self.tier >= Tier::L2
                    && let Some(p) = &phase
                {
                    path.push(p.clone());
                }
                path.push(id.clone());
                out.push(Step {
                    canonical_id: id,
                    display_path: path.join("."),
                    checked: &caps[2] != " ",
                    action: action.trim().to_string(),
                    scope: scope.trim().to_string(),
                    phase: phase.clone(),
                    line: i,
                });
            }
        }
        out
    }

    /// Resolves a canonical leaf ID or a full display path to one step.
    pub fn find(&self, step_ref: &str) -> std::result::Result<Step, String> {
        self.find_in(&self.steps(), step_ref).cloned()
    }

    /// `find` over steps already read (they stay valid while only check marks change).
    pub(crate) fn find_in<'s>(&self, steps: &'s [Step], step_ref: &str) -> std::result::Result<&'s Step, String> {
        let wanted = step_ref.trim();
        let matches: Vec<&Step> =
            steps.iter().filter(|s| if wanted.contains('.') { s.display_path == wanted } else { s.canonical_id == wanted }).collect();
        match matches.len() {
            1 => Ok(matches[0]),
            0 if self.retired.contains(wanted) => Err(format!("step {wanted} was removed; its ID is retired")),
            0 => Err(format!("unknown step '{wanted}'")),
            _ => Err(format!(
                "step ID '{wanted}' is ambiguous; name one of: {}",
                matches.iter().map(|s| s.display_path.as_str()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// The next free step ID: one past every live and retired ID.
    pub fn next_id(&self) -> String {
        let highest = self.steps().iter().map(|s| number(&s.canonical_id)).chain(self.retired.iter().map(|r| number(r))).max().unwrap_or(0);
        format!("S{:02}", highest + 1)
    }

    /// Sets the state of the step row at `line`; `Ok(true)` when it changed.
    pub(crate) fn set_state_at(&mut self, line: usize, checked: bool) -> std::result::Result<bool, String> {
        let text = self.lines.get(line).ok_or("BUG: no such step line")?;
        let caps = step_regex().captures(text).ok_or("BUG: step line no longer parses")?;
        let mark = caps.get(2).ok_or("BUG: step mark")?;
        if (mark.as_str() != " ") == checked {
            return Ok(false);
        }
        let mut updated = text.clone();
        updated.replace_range(mark.range(), if checked { "x" } else { " " });
        self.lines[line] = updated;
        Ok(true)
    }

    /// The line index after which a new step of `phase_id` goes.
    fn append_point(&self, phase_id: Option<&str>) -> std::result::Result<usize, String> {
        let steps = self.steps();
        let phase = match phase_id {
            Some(p) => {
                if self.tier < Tier::L2 {
                    return Err(format!("phase_id {p} given, but the plan is tier {}: phases exist from L2", self.tier.name()));
                }
                Some(p.trim().to_string())
            }
            None if self.tier >= Tier::L2 => {
                let last = self
                    .lines
                    .iter()
                    .rev()
                    .find_map(|l| container_regex().captures(l).filter(|c| &c[1] == "P").map(|c| format!("P{}", &c[2])));
                Some(last.ok_or_else(|| format!("the plan is tier {} and has no phase: give phase_id", self.tier.name()))?)
            }
            None => None,
        };
        match &phase {
            Some(p) => {
                if let Some(last) = steps.iter().rfind(|s| s.phase.as_deref() == Some(p.as_str())) {
                    return Ok(last.line);
                }
                self.lines
                    .iter()
                    .position(|l| container_regex().captures(l).is_some_and(|c| format!("{}{}", &c[1], &c[2]) == *p))
                    .ok_or_else(|| format!("unknown phase '{p}'"))
            }
            None => Ok(match steps.last() {
                Some(last) => last.line,
                None => self.lines.iter().position(|l| l.trim() == "## Steps").unwrap_or(usize::MAX),
            }),
        }
    }

    fn insert_line(&mut self, after: usize, line: String) {
        if after == usize::MAX {
            if self.lines.last().is_some_and(|l| !l.trim().is_empty()) {
                self.lines.push(String::new());
            }
            self.lines.push("## Steps".into());
            self.lines.push(String::new());
            self.lines.push(line);
            return;
        }
        let is_heading = self.lines.get(after).is_some_and(|l| l.trim_start().starts_with('#'));
        if is_heading {
            self.lines.insert(after + 1, String::new());
            self.lines.insert(after + 2, line);
        } else {
            self.lines.insert(after + 1, line);
        }
    }

    /// `add`: a new step at the end of the plan or of a phase; returns its ID.
    pub fn add(&mut self, action: &str, scope: &str, phase_id: Option<&str>) -> std::result::Result<String, String> {
        require_text(action, "action")?;
        require_text(scope, "scope")?;
        let after = self.append_point(phase_id)?;
        let id = self.next_id();
        self.insert_line(after, step_line(&id, false, action, scope));
        Ok(id)
    }

    /// `insert`: a new step before or after an anchor step; returns its ID.
    pub fn insert(&mut self, action: &str, scope: &str, before: Option<&str>, after: Option<&str>) -> std::result::Result<String, String> {
        require_text(action, "action")?;
        require_text(scope, "scope")?;
        let (anchor, place_before) = match (before, after) {
            (Some(b), None) => (self.find(b)?, true),
            (None, Some(a)) => (self.find(a)?, false),
            _ => return Err("insert needs exactly one of before or after".into()),
        };
        let id = self.next_id();
        let line = step_line(&id, false, action, scope);
        let at = if place_before { anchor.line } else { anchor.line + 1 };
        self.lines.insert(at, line);
        Ok(id)
    }

    /// `edit`: a step's action and/or scope.
    pub fn edit(&mut self, step_ref: &str, action: Option<&str>, scope: Option<&str>) -> std::result::Result<String, String> {
        if action.is_none() && scope.is_none() {
            return Err("edit needs action or scope".into());
        }
        let step = self.find(step_ref)?;
        let action = action.unwrap_or(&step.action);
        let scope = scope.unwrap_or(&step.scope);
        require_text(action, "action")?;
        let indent: String = self.lines[step.line].chars().take_while(|c| c.is_whitespace()).collect();
        self.lines[step.line] = format!("{indent}{}", step_line(&step.canonical_id, step.checked, action, scope));
        Ok(step.canonical_id)
    }

    /// `remove`: deletes the step row and retires its ID.
    pub fn remove(&mut self, step_ref: &str) -> std::result::Result<String, String> {
        let step = self.find(step_ref)?;
        self.lines.remove(step.line);
        self.retired.insert(step.canonical_id.clone());
        Ok(step.canonical_id)
    }

    /// Post-batch totals: total, completed, percent, next open step.
    pub fn totals(&self) -> (usize, usize, f64, Option<String>) {
        let steps = self.steps();
        let done = steps.iter().filter(|s| s.checked).count();
        let percent = if steps.is_empty() { 0.0 } else { (done as f64 * 1000.0 / steps.len() as f64).round() / 10.0 };
        (steps.len(), done, percent, steps.iter().find(|s| !s.checked).map(|s| s.display_path.clone()))
    }
}

fn require_text(text: &str, name: &str) -> std::result::Result<(), String> {
    if text.trim().is_empty() { Err(format!("{name} is required")) } else { Ok(()) }
}

/// The write guard: the new body may lose exactly the IDs the batch removed, may not hold an ID
/// twice, and may not revive a retired one.
pub fn guard(before: &PlanBody, after: &PlanBody, removed: &BTreeSet<String>) -> std::result::Result<(), String> {
    let old: BTreeSet<String> = before.steps().into_iter().map(|s| s.canonical_id).collect();
    let new_steps = after.steps();
    let mut seen = BTreeSet::new();
    for step in &new_steps {
        if !seen.insert(step.canonical_id.clone()) {
            return Err(format!("the write would hold step ID {} twice", step.canonical_id));
        }
        if before.retired.contains(&step.canonical_id) {
            return Err(format!("the write would reuse retired step ID {}", step.canonical_id));
        }
    }
    let lost: Vec<&String> = old.iter().filter(|id| !seen.contains(*id) && !removed.contains(*id)).collect();
    if !lost.is_empty() {
        return Err(format!(
            "the write would retire step IDs the operation did not name: {}",
            lost.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(())
}

/// A plan document loaded for editing.
pub(crate) struct LoadedPlan {
    pub doc: Doc,
    pub text: String,
    pub body: PlanBody,
    /// Byte length of everything before the body (delimiters and frontmatter).
    head_len: usize,
    yaml: String,
}

/// The plan resolution rule: an exact stem or path first; else a feature tag naming exactly one
/// plan; several plans of the feature are refused with the candidates.
pub(crate) fn resolve_plan<'d>(docs: &'d [Doc], reference: &str) -> Result<&'d Doc> {
    let plans: Vec<&Doc> = docs.iter().filter(|d| d.doc_type == "plan").collect();
    let trimmed = reference.trim();
    let stem = super::reference_stem(trimmed);
    let as_path = if trimmed.ends_with(".md") { trimmed.to_string() } else { format!("{trimmed}.md") };
    if let Some(plan) = plans.iter().find(|d| d.path.as_str() == as_path).or_else(|| plans.iter().find(|d| d.stem == stem)) {
        return Ok(plan);
    }
    let feature = trimmed.trim_start_matches('#');
    let of_feature: Vec<&&Doc> = plans.iter().filter(|d| d.feature == feature).collect();
    match of_feature.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::InvalidArgument { name: "plan", reason: format!("'{reference}' names no plan (by stem, path or feature tag)") }),
        many => Err(Error::InvalidArgument {
            name: "plan",
            reason: format!(
                "feature '{feature}' has {} plans; name one by stem: {}",
                many.len(),
                many.iter().map(|d| d.stem.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

/// Parses a plan document's text.
pub(crate) fn parse_plan_text(doc: Doc, text: String) -> Result<LoadedPlan> {
    let split = frontmatter::split(&text).map_err(|e| Error::InvalidContent { path: doc.path.to_string(), reason: e.to_string() })?;
    let fm = frontmatter::parse(&split).map_err(|e| Error::InvalidContent { path: doc.path.to_string(), reason: e.to_string() })?;
    let tier = match fm.get("tier").and_then(serde_yaml::Value::as_str) {
        Some(t) => Tier::parse(t).map_err(|reason| Error::InvalidContent { path: doc.path.to_string(), reason })?,
        None => Tier::L1,
    };
    let retired: BTreeSet<String> = fm
        .get("retired_steps")
        .and_then(serde_yaml::Value::as_sequence)
        .map(|s| s.iter().filter_map(serde_yaml::Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let body = PlanBody::parse(split.body, tier, retired);
    let head_len = text.len() - split.body.len();
    let yaml = split.yaml.to_string();
    Ok(LoadedPlan { doc, head_len, yaml, body, text })
}

/// Loads the plan `reference` resolves to.
pub(crate) fn load_plan(vault: &Vault, docs: &[Doc], reference: &str) -> Result<LoadedPlan> {
    let doc = resolve_plan(docs, reference)?.clone();
    let text = read_text(vault, &doc.path)?;
    parse_plan_text(doc, text)
}

/// The plan's new text: frontmatter with `retired_steps` and a fresh `timestamp`, then the body.
pub(crate) fn render_plan(plan: &LoadedPlan, body: &PlanBody, now: chrono::DateTime<chrono::Utc>) -> String {
    let retired: Vec<String> = body.retired.iter().map(|r| yaml_edit::quoted(r)).collect();
    let mut yaml = yaml_edit::set_entry(&plan.yaml, "retired_steps", &format!("retired_steps: [{}]\n", retired.join(", ")));
    let now = now.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    yaml = yaml_edit::set_entry(&yaml, "timestamp", &format!("timestamp: {}\n", yaml_edit::quoted(&now)));
    let head = &plan.text[..plan.head_len];
    let close_start = head.rfind("---").unwrap_or(head.len());
    let open_end = head.find('\n').map_or(0, |i| i + 1);
    format!("{}{}{}{}", &head[..open_end], yaml, &head[close_start..], body.render())
}

fn write_plan(vault: &Vault, plan: &LoadedPlan, body: &PlanBody, operation: &'static str) -> Result<()> {
    let text = render_plan(plan, body, vault.now());
    execute(vault, write_document(operation, plan.doc.path.clone(), text, Some(plan.text.as_str()), false)).map(|_| ())
}

/// What `plan_progress` and `plan_edit` return: the batch envelope plus the plan's totals
/// after the batch.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PlanReport<R> {
    /// The batch envelope of the items.
    #[serde(flatten)]
    pub batch: BatchReport<R>,
    /// The plan's stem.
    pub plan: String,
    /// The plan's steps.
    pub total_steps: usize,
    /// The checked steps.
    pub steps_completed: usize,
    /// Checked steps in percent, to one decimal.
    pub completion_percent: f64,
    /// The display path of the first unchecked step.
    pub next_open_step: Option<String>,
}

/// One `plan_progress` item's row.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepItem {
    /// The step as the change named it.
    pub step_id: String,
    /// The state asked for, as given.
    pub state: String,
    /// updated, unchanged or failed.
    pub status: String,
    /// Why the change failed (failed items only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ItemError>,
}

/// One `plan_edit` item's row.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PlanEditItem {
    /// The operation, as given.
    pub operation: String,
    /// created, updated, removed or failed.
    pub status: String,
    /// The step's canonical ID (a failed item: the step_id given, if any).
    pub step_id: Option<String>,
    /// Why the operation failed (failed items only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ItemError>,
}

fn with_totals<R>(batch: BatchReport<R>, stem: &str, body: &PlanBody) -> PlanReport<R> {
    let (total, done, percent, next) = body.totals();
    PlanReport {
        batch,
        plan: stem.to_string(),
        total_steps: total,
        steps_completed: done,
        completion_percent: percent,
        next_open_step: next,
    }
}

/// One `plan_progress` change.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepChange {
    /// A canonical leaf ID (S01) or a full display path (P01.S01, W01.P01.S01).
    pub step_id: String,
    /// "checked" or "unchecked".
    pub state: String,
}

/// `plan_progress`: explicit states, the plan written once at the end, only if a step changed.
pub fn plan_progress(vault: &Vault, plan_ref: &str, changes: &[StepChange]) -> Result<PlanReport<StepItem>> {
    if changes.is_empty() {
        return Err(Error::InvalidArgument { name: "steps", reason: "at least one step change is required".into() });
    }
    let policy = policy_of(vault)?;
    let docs = documents(vault)?;
    let plan = load_plan(vault, &docs, plan_ref)?;
    let mut body = plan.body.clone();
    // Only check marks change below, so the steps read once stay valid for the whole batch.
    let steps = body.steps();
    let mut outcomes = Vec::new();
    let mut changed = false;
    for change in changes {
        let target = match change.state.as_str() {
            "checked" => Ok(true),
            "unchecked" => Ok(false),
            other => Err(format!("invalid state '{other}' (checked or unchecked)")),
        };
        let outcome = target.and_then(|checked| {
            let line = body.find_in(&steps, &change.step_id)?.line;
            body.set_state_at(line, checked)
        });
        match outcome {
            Ok(did) => {
                changed |= did;
                let status = if did { "updated" } else { "unchanged" };
                let row = StepItem { step_id: change.step_id.clone(), state: change.state.clone(), status: status.into(), error: None };
                outcomes.push(ItemOutcome::success(status, row, false));
            }
            Err(message) => outcomes.push(ItemOutcome::failure(StepItem {
                step_id: change.step_id.clone(),
                state: change.state.clone(),
                status: "failed".into(),
                error: Some(ItemError::new(message)),
            })),
        }
    }
    if changed {
        guard(&plan.body, &body, &BTreeSet::new()).map_err(|reason| Error::InvalidArgument { name: "steps", reason })?;
        write_plan(vault, &plan, &body, "mcp.vaultspec.plan_progress")?;
    }
    Ok(with_totals(envelope(outcomes, policy.sampled_successes), &plan.doc.stem, &body))
}

/// One `plan_edit` operation.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanEditOperation {
    /// add, insert, edit or remove.
    pub operation: String,
    /// The step's imperative statement (required for add and insert).
    #[serde(default)]
    pub action: Option<String>,
    /// The file or area the step touches (required for add and insert).
    #[serde(default)]
    pub scope: Option<String>,
    /// The P## anchor to add under (tier L2 and higher).
    #[serde(default)]
    pub phase_id: Option<String>,
    /// The S## anchor to insert before.
    #[serde(default)]
    pub before: Option<String>,
    /// The S## anchor to insert after.
    #[serde(default)]
    pub after: Option<String>,
    /// The target step of edit or remove.
    #[serde(default)]
    pub step_id: Option<String>,
}

/// Applies one plan-edit operation to `body`: `(status, step_id)` or the failure message.
pub(crate) fn apply_edit(
    body: &mut PlanBody,
    op: &PlanEditOperation,
    removed: &mut BTreeSet<String>,
) -> std::result::Result<(&'static str, String), String> {
    let text = |o: &Option<String>| o.clone().unwrap_or_default();
    match op.operation.as_str() {
        "add" => body.add(&text(&op.action), &text(&op.scope), op.phase_id.as_deref()).map(|id| ("created", id)),
        "insert" => body.insert(&text(&op.action), &text(&op.scope), op.before.as_deref(), op.after.as_deref()).map(|id| ("created", id)),
        "edit" => {
            let step = op.step_id.as_deref().ok_or("edit needs step_id")?;
            body.edit(step, op.action.as_deref(), op.scope.as_deref()).map(|id| ("updated", id))
        }
        "remove" => {
            let step = op.step_id.as_deref().ok_or("remove needs step_id")?;
            let id = body.remove(step)?;
            removed.insert(id.clone());
            Ok(("removed", id))
        }
        other => Err(format!("unknown operation '{other}' (add, insert, edit or remove)")),
    }
}

/// `plan_edit`: operations in order against one parsed plan; one write (and guard) at the end.
pub fn plan_edit(vault: &Vault, plan_ref: &str, operations: &[PlanEditOperation]) -> Result<PlanReport<PlanEditItem>> {
    if operations.is_empty() {
        return Err(Error::InvalidArgument { name: "operations", reason: "at least one plan-edit operation is required".into() });
    }
    let policy = policy_of(vault)?;
    let docs = documents(vault)?;
    let plan = load_plan(vault, &docs, plan_ref)?;
    let mut body = plan.body.clone();
    let mut removed = BTreeSet::new();
    let mut outcomes = Vec::new();
    for op in operations {
        match apply_edit(&mut body, op, &mut removed) {
            Ok((status, id)) => {
                let row = PlanEditItem { operation: op.operation.clone(), status: status.into(), step_id: Some(id), error: None };
                outcomes.push(ItemOutcome::success(status, row, false));
            }
            Err(message) => outcomes.push(ItemOutcome::failure(PlanEditItem {
                operation: op.operation.clone(),
                status: "failed".into(),
                step_id: op.step_id.clone(),
                error: Some(ItemError::new(message)),
            })),
        }
    }
    if body != plan.body {
        guard(&plan.body, &body, &removed).map_err(|reason| Error::InvalidArgument { name: "operations", reason })?;
        write_plan(vault, &plan, &body, "mcp.vaultspec.plan_edit")?;
    }
    Ok(with_totals(envelope(outcomes, policy.sampled_successes), &plan.doc.stem, &body))
}
