//! The execution ledger (`log`): one document per plan, created on the first call, with one
//! `## S##` section per step holding `A:`/`M:`/`D:`/`R:old->new` rows, `verify: <command>=pass|fail`,
//! `by:` and exception `note:` lines. Idempotent: a line already in the section is not added
//! again, and a call that adds nothing writes nothing. A malformed row writes nothing.

use std::sync::OnceLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::authoring::document_frontmatter;
use super::plan::load_plan;
use super::{Doc, documents, folder_of, normalise_feature, policy_of, read_bytes, write_document};
use crate::approvals::execute_checked as execute;
use crate::error::{Error, Result};
use crate::note::frontmatter;
use crate::note::path::VaultPath;
use crate::vault::Vault;

/// `log` parameters.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogRequest {
    /// Feature tag, with or without #.
    pub feature: String,
    /// The parent plan's stem.
    pub plan: String,
    /// Canonical step id (S01) or display path (P01.S01).
    pub step: String,
    /// One OP:path per path touched: A: added, M: modified, D: deleted, R:old->new renamed.
    #[serde(default)]
    pub rows: Option<Vec<String>>,
    /// A check that ran, as <command>=pass or <command>=fail; a list of such checks is accepted
    /// too (vaultspec-core 0.3.9 sends one), each its own `verify:` line.
    #[serde(default)]
    pub verify: Option<Verify>,
    /// The persona that closed the step.
    #[serde(default)]
    pub by: Option<String>,
    /// Exception notes only.
    #[serde(default)]
    pub notes: Option<Vec<String>>,
}

/// `log`'s `verify`: the seed's one check, or the list vaultspec-core 0.3.9 sends.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Verify {
    /// One check, as <command>=pass or <command>=fail.
    One(String),
    /// Several checks, each as <command>=pass or <command>=fail.
    Many(Vec<String>),
}

impl From<&str> for Verify {
    fn from(check: &str) -> Self {
        Verify::One(check.to_string())
    }
}

impl Verify {
    fn checks(&self) -> Vec<&str> {
        match self {
            Verify::One(check) => vec![check.as_str()],
            Verify::Many(checks) => checks.iter().map(String::as_str).collect(),
        }
    }
}

fn row_regex() -> &'static Regex {
    static ROW: OnceLock<Regex> = OnceLock::new();
    ROW.get_or_init(|| Regex::new(r"^(?:[AMD]:\s*\S.*|R:\s*\S.*?\s*->\s*\S.*)$").expect("BUG: row regex"))
}

fn verify_regex() -> &'static Regex {
    static VERIFY: OnceLock<Regex> = OnceLock::new();
    VERIFY.get_or_init(|| Regex::new(r"^\S.*=(pass|fail)$").expect("BUG: verify regex"))
}

/// A row in canonical form (`A: path`, `R: old -> new`), or why it is malformed.
pub(crate) fn canonical_row(row: &str) -> std::result::Result<String, String> {
    let row = row.trim();
    if row.contains('\n') || !row_regex().is_match(row) {
        return Err(format!("malformed row '{row}': expected A:path, M:path, D:path or R:old->new"));
    }
    let (op, rest) = row.split_at(2);
    let rest = rest.trim();
    if op == "R:" {
        let (old, new) = rest.split_once("->").ok_or_else(|| format!("malformed rename row '{row}'"))?;
        return Ok(format!("R: {} -> {}", old.trim(), new.trim()));
    }
    Ok(format!("{op} {rest}"))
}

/// The ledger path of a plan: `{exec folder}/{base}/{base}-ledger.md`, base = stem without `-plan`.
pub(crate) fn ledger_path(vault: &Vault, plan: &Doc) -> Result<VaultPath> {
    let policy = policy_of(vault)?;
    let base = plan.stem.strip_suffix("-plan").unwrap_or(&plan.stem);
    let folder = folder_of(policy, "exec", &plan.feature)?;
    VaultPath::parse(&format!("{folder}/{base}/{base}-ledger.md"))
        .map_err(|e| Error::InvalidArgument { name: "plan", reason: e.to_string() })
}

/// The lines of one step's section in a ledger body (without the heading).
pub(crate) fn section_lines<'b>(body: &'b str, step: &str) -> Vec<&'b str> {
    let heading = format!("## {step}");
    let mut inside = false;
    let mut out = Vec::new();
    for line in body.lines() {
        if line.starts_with("## ") {
            inside = line.trim_end() == heading;
            continue;
        }
        if inside && line.starts_with("- ") {
            out.push(&line[2..]);
        }
    }
    out
}

/// Counts of a section: (rows, notes, last verify).
pub(crate) fn section_summary(lines: &[&str]) -> (usize, usize, Option<String>) {
    let rows = lines.iter().filter(|l| row_regex().is_match(l)).count();
    let notes = lines.iter().filter(|l| l.starts_with("note: ")).count();
    let verify = lines.iter().rev().find_map(|l| l.strip_prefix("verify: ")).map(str::to_string);
    (rows, notes, verify)
}

/// The ledger body with `entries` merged into the step's section (missing ones appended).
fn merge(body: &str, step: &str, entries: &[String]) -> (String, bool) {
    let existing: Vec<&str> = section_lines(body, step);
    let missing: Vec<&String> = entries.iter().filter(|e| !existing.contains(&e.as_str())).collect();
    if missing.is_empty() {
        return (body.to_string(), false);
    }
    let heading = format!("## {step}");
    let lines: Vec<&str> = body.lines().collect();
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let new_lines: Vec<String> = missing.iter().map(|e| format!("- {e}")).collect();
    match lines.iter().position(|l| l.trim_end() == heading) {
        Some(start) => {
            let end = lines.iter().enumerate().skip(start + 1).find(|(_, l)| l.starts_with("## ")).map_or(lines.len(), |(i, _)| i);
            let last_entry = (start + 1..end).rev().find(|i| lines[*i].starts_with("- ")).unwrap_or(start);
            let at = if last_entry == start { start + 1 } else { last_entry + 1 };
            if last_entry == start {
                out.insert(at, String::new());
                for (k, line) in new_lines.into_iter().enumerate() {
                    out.insert(at + 1 + k, line);
                }
            } else {
                for (k, line) in new_lines.into_iter().enumerate() {
                    out.insert(at + k, line);
                }
            }
        }
        None => {
            while out.last().is_some_and(|l| l.trim().is_empty()) {
                out.pop();
            }
            out.push(String::new());
            out.push(heading);
            out.push(String::new());
            out.extend(new_lines);
        }
    }
    let mut text = out.join("\n");
    text.push('\n');
    (text, true)
}

/// What `log` returns: the ledger and the step's section after the append.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LogReport {
    /// The ledger's vault-relative path.
    pub path: String,
    /// The step's canonical ID.
    pub step: String,
    /// The step's rows in the ledger now.
    pub rows: usize,
    /// The step's notes in the ledger now.
    pub notes: usize,
    /// Whether the ledger was written.
    pub changed: bool,
    /// Whether the ledger was created by this call.
    pub created: bool,
}

/// `log`: appends one step's rows to its plan's ledger.
pub fn log(vault: &Vault, request: &LogRequest) -> Result<LogReport> {
    let policy = policy_of(vault)?;
    let feature = normalise_feature(&request.feature)?;
    let mut entries = Vec::new();
    for row in request.rows.iter().flatten() {
        entries.push(canonical_row(row).map_err(|reason| Error::InvalidArgument { name: "rows", reason })?);
    }
    for verify in request.verify.as_ref().map(Verify::checks).unwrap_or_default() {
        let verify = verify.trim();
        if verify.contains('\n') || !verify_regex().is_match(verify) {
            return Err(Error::InvalidArgument {
                name: "verify",
                reason: format!(
                    "malformed verify '{verify}': expected <command>=pass or <command>=fail (a string or a list of them), e.g. \"cargo test=pass\""
                ),
            });
        }
        entries.push(format!("verify: {verify}"));
    }
    if let Some(by) = request.by.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
        if by.contains('\n') {
            return Err(Error::InvalidArgument { name: "by", reason: "must be one line".into() });
        }
        entries.push(format!("by: {by}"));
    }
    for note in request.notes.iter().flatten() {
        let note = note.trim();
        if note.is_empty() || note.contains('\n') {
            return Err(Error::InvalidArgument { name: "notes", reason: "each note must be one non-empty line".into() });
        }
        entries.push(format!("note: {note}"));
    }
    let docs = documents(vault)?;
    let plan_doc = docs
        .iter()
        .find(|d| d.doc_type == "plan" && (d.stem == super::reference_stem(&request.plan) || d.path.as_str() == request.plan.trim()))
        .ok_or_else(|| Error::InvalidArgument { name: "plan", reason: format!("'{}' names no plan", request.plan) })?;
    if plan_doc.feature != feature {
        return Err(Error::InvalidArgument {
            name: "feature",
            reason: format!("plan {} belongs to feature '{}', not '{feature}'", plan_doc.stem, plan_doc.feature),
        });
    }
    let plan = load_plan(vault, &docs, &plan_doc.stem)?;
    let step = plan.body.find(&request.step).map_err(|reason| Error::InvalidArgument { name: "step", reason })?;
    let path = ledger_path(vault, plan_doc)?;
    let current = read_bytes(vault, &path)
        .map(|b| String::from_utf8(b).map_err(|_| Error::NoteUnreadable { path: path.to_string(), reason: "is not UTF-8".into() }))
        .transpose()?;
    let created = current.is_none();
    let (head, body) = match &current {
        Some(text) => {
            let split = frontmatter::split(text).map_err(|e| Error::InvalidContent { path: path.to_string(), reason: e.to_string() })?;
            (text[..text.len() - split.body.len()].to_string(), split.body.to_string())
        }
        None => {
            let stem = path.file_name().trim_end_matches(".md").to_string();
            let title = format!("Execution ledger of {}", plan_doc.stem);
            (
                document_frontmatter(
                    policy,
                    "exec",
                    &feature,
                    &title,
                    &stem[..10.min(stem.len())],
                    std::slice::from_ref(&plan_doc.stem),
                    &[],
                    vault.now(),
                )
                .map_err(|e| Error::InvalidContent { path: path.to_string(), reason: e.to_string() })?,
                format!("# {title}\n"),
            )
        }
    };
    let (new_body, changed) = merge(&body, &step.canonical_id, &entries);
    if changed || created {
        let text = format!("{head}{new_body}");
        execute(vault, write_document("mcp.vaultspec.log", path.clone(), text, current.as_deref(), true))?;
    }
    let lines = section_lines(&new_body, &step.canonical_id);
    let (rows, notes, _) = section_summary(&lines);
    Ok(LogReport { path: path.to_string(), step: step.canonical_id, rows, notes, changed: changed || created, created })
}
