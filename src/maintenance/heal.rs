//! `heal_frontmatter_tool`: repairs of reference §7, applied through the write transaction.
//!
//! Type casing, type from the folder, title from the file name, description from the first
//! paragraph, date-only or string timestamps made date-times, missing timestamps set, non-string
//! tags made strings, foreign `status`/`related`/`expiry`/`resource` values quarantined under
//! `x-<key>`. Dates stay unquoted dates; untouched keys keep their exact text. Malformed YAML is
//! refused, never guessed at. Dry run by default; the report lists every change per note.

use serde::Serialize;
use serde_json::Value;
use serde_yaml::Value as Yaml;

use crate::approvals::Operation;
use crate::error::Result;
use crate::inventory::NoteRecord;
use crate::note::frontmatter;
use crate::note::metadata::{self, parse_date, parse_datetime};
use crate::note::yaml_edit::{quoted, rename_key, set_entry};
use crate::policy::LoadedPolicy;
use crate::vault::Vault;
use crate::write::{NoteChange, sha256_hex};

/// `heal_frontmatter_tool` parameters (dry_run defaults to true).
pub type HealRequest = super::RunRequest;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FieldRepair {
    pub field: String,
    pub action: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NoteRepair {
    pub path: String,
    pub repairs: Vec<FieldRepair>,
    /// Problems that remain after the repairs (the note is then not written).
    pub unresolved: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HealReport {
    pub dry_run: bool,
    pub notes: Vec<NoteRepair>,
    pub refused: Vec<NoteRepair>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
}

fn title_from_file_name(name: &str) -> String {
    let stem = name.strip_suffix(".md").unwrap_or(name);
    let b = stem.as_bytes();
    let undated =
        if b.len() > 11 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-' && matches!(b[10], b'_' | b'-' | b' ') {
            &stem[11..]
        } else {
            stem
        };
    undated
        .split(['_', '-', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map_or_else(String::new, |c| c.to_uppercase().collect::<String>() + chars.as_str())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn first_paragraph(body: &str, max_chars: usize) -> Option<String> {
    let paragraph = body
        .split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty() && !p.starts_with('#') && !p.starts_with("```") && !p.starts_with("---"))?;
    let flat = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(if flat.chars().count() > max_chars { flat.chars().take(max_chars).collect::<String>().trim_end().to_string() } else { flat })
}

/// The type a note's folder implies: the note type living there, or for the inbox the policy's
/// `maintenance.heal_inbox_type`.
fn type_for_folder(policy: &LoadedPolicy, folder: &str) -> Option<String> {
    let p = &policy.policy;
    p.note_types.iter().find(|(_, t)| t.folder == folder).map(|(name, _)| name.clone()).or_else(|| {
        (folder == p.layout.inbox_folder && !p.maintenance.heal_inbox_type.is_empty()).then(|| p.maintenance.heal_inbox_type.clone())
    })
}

/// Computes the healed text of one note; `None` when nothing needs repair.
fn heal_text(
    record: &NoteRecord,
    text: &str,
    policy: &LoadedPolicy,
    now: &str,
) -> std::result::Result<Option<(String, NoteRepair)>, NoteRepair> {
    let mut repair = NoteRepair { path: record.path.to_string(), repairs: Vec::new(), unresolved: Vec::new() };
    let mut note = |field: &str, action: String| repair.repairs.push(FieldRepair { field: field.to_string(), action });
    let (prefix, mut yaml, close, body) = match frontmatter::split(text) {
        Ok(s) => {
            (format!("{}{}", if s.bom { "\u{feff}" } else { "" }, s.open), s.yaml.to_string(), s.close.to_string(), s.body.to_string())
        }
        Err(frontmatter::FrontmatterProblem::Missing) => {
            note("frontmatter", "added a frontmatter block".into());
            ("---\n".to_string(), String::new(), "---\n".to_string(), text.to_string())
        }
        Err(problem) => {
            repair.unresolved.push(problem.to_string());
            return Err(repair);
        }
    };
    let mapping = if yaml.trim().is_empty() {
        serde_yaml::Mapping::new()
    } else {
        match serde_yaml::from_str::<Yaml>(&yaml) {
            Ok(Yaml::Mapping(m)) => m,
            Ok(_) | Err(_) => {
                repair.unresolved.push("the frontmatter is malformed YAML or not a mapping; heal never guesses".into());
                return Err(repair);
            }
        }
    };
    let get_str = |key: &str| mapping.get(key).and_then(Yaml::as_str).map(str::trim).filter(|s| !s.is_empty());
    let folder_type = type_for_folder(policy, record.path.top_folder());
    // type
    let types: Vec<&String> = policy.policy.note_types.keys().collect();
    match get_str("type") {
        Some(t) if types.iter().any(|k| *k == t) => {}
        Some(t) => match types.iter().find(|k| k.eq_ignore_ascii_case(t)).map(|k| (*k).clone()).or_else(|| folder_type.clone()) {
            Some(fixed) => {
                yaml = set_entry(&yaml, "type", &format!("type: {}", quoted(&fixed)));
                note("type", format!("'{t}' → '{fixed}'"));
            }
            None => repair.unresolved.push(format!("type '{t}' is invalid and the folder implies none")),
        },
        None => match &folder_type {
            Some(fixed) => {
                yaml = set_entry(&yaml, "type", &format!("type: {}", quoted(fixed)));
                note("type", format!("set to '{fixed}' from the folder"));
            }
            None => repair.unresolved.push("type is missing and the folder implies none".into()),
        },
    }
    if get_str("title").is_none() {
        let title = title_from_file_name(record.path.file_name());
        yaml = set_entry(&yaml, "title", &format!("title: {}", quoted(&title)));
        note("title", format!("set to '{title}' from the file name"));
    }
    if get_str("description").is_none() {
        let description = first_paragraph(&body, policy.policy.maintenance.healed_description_chars)
            .unwrap_or_else(|| get_str("title").map_or_else(|| title_from_file_name(record.path.file_name()), str::to_string));
        yaml = set_entry(&yaml, "description", &format!("description: {}", quoted(&description)));
        note("description", "set from the first paragraph".into());
    }
    match mapping.get("timestamp") {
        None | Some(Yaml::Null) => {
            yaml = set_entry(&yaml, "timestamp", &format!("timestamp: {now}"));
            note("timestamp", format!("set to {now}"));
        }
        Some(Yaml::String(s)) if parse_datetime(s).is_none() => match parse_date(s) {
            Some(d) => {
                yaml = set_entry(&yaml, "timestamp", &format!("timestamp: {d}T00:00:00Z"));
                note("timestamp", format!("date '{s}' → {d}T00:00:00Z"));
            }
            None => {
                yaml = rename_key(&yaml, "timestamp", "x-timestamp");
                yaml = set_entry(&yaml, "timestamp", &format!("timestamp: {now}"));
                note("timestamp", format!("unparseable '{s}' kept as x-timestamp; set to {now}"));
            }
        },
        Some(Yaml::String(_)) => {}
        Some(other) => {
            let _ = other;
            yaml = rename_key(&yaml, "timestamp", "x-timestamp");
            yaml = set_entry(&yaml, "timestamp", &format!("timestamp: {now}"));
            note("timestamp", "non-string value kept as x-timestamp".into());
        }
    }
    if let Some(Yaml::Sequence(items)) = mapping.get("tags")
        && items.iter().any(|i| !matches!(i, Yaml::String(_)))
    {
        let tags: Vec<String> = items
            .iter()
            .filter_map(|i| match i {
                Yaml::String(s) => Some(s.clone()),
                Yaml::Number(n) => Some(n.to_string()),
                Yaml::Bool(b) => Some(b.to_string()),
                _ => None,
            })
            .collect();
        yaml = set_entry(&yaml, "tags", &format!("tags: [{}]", tags.iter().map(|t| quoted(t)).collect::<Vec<_>>().join(", ")));
        note("tags", "non-string items made strings".into());
    }
    // Foreign values the validator rejects are quarantined, never deleted.
    if let Some(split) = frontmatter::split(&format!("---\n{yaml}---\n")).ok()
        && let Ok(fm) = frontmatter::parse(&split)
    {
        let (_, problems) = metadata::validate(&fm, policy);
        for key in ["status", "related", "expiry", "resource", "okf_version", "memory", "owner"] {
            if problems.iter().any(|p| p.field == key || p.field.starts_with(&format!("{key}."))) {
                yaml = rename_key(&yaml, key, &format!("x-{key}"));
                note(key, format!("invalid value kept as x-{key}"));
            }
        }
    }
    if repair.repairs.is_empty() {
        return Ok(None);
    }
    let healed = format!("{prefix}{yaml}{}{close}{body}", if yaml.ends_with('\n') || yaml.is_empty() { "" } else { "\n" });
    let split = frontmatter::split(&healed).map_err(|p| NoteRepair { unresolved: vec![p.to_string()], ..repair.clone() })?;
    let fm = frontmatter::parse(&split).map_err(|p| NoteRepair { unresolved: vec![p.to_string()], ..repair.clone() })?;
    let (_, problems) = metadata::validate(&fm, policy);
    repair.unresolved.extend(problems.into_iter().map(|p| format!("{}: {}", p.field, p.message)));
    if repair.unresolved.is_empty() { Ok(Some((healed, repair))) } else { Err(repair) }
}

impl Vault {
    /// Previews (dry run) or applies (approved) frontmatter repairs.
    pub fn heal_frontmatter(&self, request: &HealRequest) -> Result<HealReport> {
        self.heal_frontmatter_with_progress(request, &super::unwatched)
    }

    /// [`Vault::heal_frontmatter`], reporting `reading` (the notes to repair) and `writing`
    /// (the one transaction) to `progress`.
    pub fn heal_frontmatter_with_progress(&self, request: &HealRequest, progress: super::Progress<'_>) -> Result<HealReport> {
        request.check_approved("heal_frontmatter_tool")?;
        let now = self.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let policy = self.policy().clone();
        let records: Vec<NoteRecord> = self.with_inventory(|inv| inv.notes().filter(|r| !r.valid).cloned().collect())?;
        let mut report = HealReport { dry_run: request.dry_run, notes: Vec::new(), refused: Vec::new(), receipt: None };
        let mut changes = Vec::new();
        // Read through folder handles, each folder once for its run of notes: a folder swapped
        // for a link is never read through.
        let mut cursor = crate::store::beneath::FolderCursor::new(self.root());
        for (done, record) in records.iter().enumerate() {
            super::report(progress, "reading", done, records.len());
            let Ok(Some(bytes)) = cursor.read(record.path.as_str()) else {
                report.refused.push(NoteRepair {
                    path: record.path.to_string(),
                    repairs: Vec::new(),
                    unresolved: vec!["cannot read the note".into()],
                });
                continue;
            };
            let Ok(text) = String::from_utf8(bytes.clone()) else {
                report.refused.push(NoteRepair {
                    path: record.path.to_string(),
                    repairs: Vec::new(),
                    unresolved: vec!["not valid UTF-8".into()],
                });
                continue;
            };
            match heal_text(record, &text, &policy, &now) {
                Ok(Some((healed, repair))) => {
                    changes.push(NoteChange {
                        path: record.path.clone(),
                        content: Some(healed),
                        require_absent: false,
                        expected_sha256: Some(sha256_hex(&bytes)),
                    });
                    report.notes.push(repair);
                }
                Ok(None) => {}
                Err(repair) => report.refused.push(repair),
            }
        }
        progress("reading", records.len(), records.len());
        if request.dry_run || changes.is_empty() {
            return Ok(report);
        }
        let log_entry = format!("\n## [{}] heal | Healed {} notes\n- Action: heal_frontmatter_tool\n", self.today(), report.notes.len());
        let writing = changes.len();
        progress("writing", 0, writing);
        let receipt = super::write_governed(self, Operation::Heal, "maintenance.heal", changes, Some(log_entry), false)?;
        progress("writing", writing, writing);
        report.receipt = Some(receipt);
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
