//! OKF metadata v1: typed view of a note's frontmatter and the problems that make it invalid.
//!
//! Unlike P.O.W.E.R., a quoted ISO-8601 `timestamp` or `expiry` means exactly what the unquoted
//! one means: YAML quoting never switches a check off. Pure: no I/O.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde_yaml::Value;

use super::frontmatter::Frontmatter;
use crate::policy::LoadedPolicy;

/// The typed fields the engine uses (catalogs, lint, search). Unknown keys stay in the mapping.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NoteMeta {
    pub note_type: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub timestamp: Option<DateTime<Utc>>,
    pub resource: Option<String>,
    pub tags: Vec<String>,
    pub owner: Option<String>,
    pub status: Option<String>,
    pub expiry: Option<NaiveDate>,
    pub related: Vec<String>,
    pub memory: Option<MemoryMeta>,
}

/// The OKF memory contract fields that affect retrieval.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemoryMeta {
    pub kind: Option<String>,
    pub valid_from: Option<NaiveDate>,
    pub valid_until: Option<NaiveDate>,
    pub supersedes: Vec<String>,
}

/// One reason a note's metadata is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetaProblem {
    pub field: String,
    pub message: String,
}

/// Parses an ISO-8601 date-time (RFC 3339, or naive = UTC; 'T' or space separator).
pub(crate) fn parse_datetime(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(text) {
        return Some(dt.with_timezone(&Utc));
    }
    let spaced = text.replacen(' ', "T", 1);
    if let Ok(dt) = DateTime::parse_from_rfc3339(&spaced) {
        return Some(dt.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(&spaced, format) {
            return Some(naive.and_utc());
        }
    }
    None
}

/// Parses an ISO-8601 date, or the date part of a date-time.
pub(crate) fn parse_date(text: &str) -> Option<NaiveDate> {
    let text = text.trim();
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok().or_else(|| parse_datetime(text).map(|dt| dt.date_naive()))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

struct Checker<'a> {
    policy: &'a LoadedPolicy,
    problems: Vec<MetaProblem>,
}

impl Checker<'_> {
    fn problem(&mut self, field: &str, message: impl Into<String>) {
        self.problems.push(MetaProblem { field: field.to_string(), message: message.into() });
    }

    fn string(&mut self, field: &str, value: &Value) -> Option<String> {
        match value {
            Value::String(s) => Some(s.trim().to_string()),
            other => {
                self.problem(field, format!("must be a string, found {}", kind(other)));
                None
            }
        }
    }

    fn one_of(&mut self, field: &str, value: &Value, allowed: &[String]) -> Option<String> {
        let text = self.string(field, value)?;
        if allowed.contains(&text) {
            Some(text)
        } else {
            let hint = closest(&text, allowed).map(|c| format!(" (did you mean {c}?)")).unwrap_or_default();
            self.problem(field, format!("'{text}' is not one of: {}{hint}", allowed.join(", ")));
            None
        }
    }

    fn date(&mut self, field: &str, value: &Value) -> Option<NaiveDate> {
        let text = self.string(field, value)?;
        let date = parse_date(&text);
        if date.is_none() {
            self.problem(field, format!("'{text}' is not an ISO-8601 date"));
        }
        date
    }

    fn string_list(&mut self, field: &str, value: &Value) -> Vec<String> {
        match value {
            Value::Null => Vec::new(),
            Value::Sequence(items) => {
                let mut out = Vec::new();
                for item in items {
                    match item {
                        Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_string()),
                        Value::String(_) => {}
                        other => self.problem(field, format!("items must be strings, found {}", kind(other))),
                    }
                }
                out
            }
            other => {
                self.problem(field, format!("must be a list of strings, found {}", kind(other)));
                Vec::new()
            }
        }
    }
}

/// Validates a frontmatter mapping against OKF metadata v1 as the policy defines it.
pub(crate) fn validate(frontmatter: &Frontmatter, loaded: &LoadedPolicy) -> (NoteMeta, Vec<MetaProblem>) {
    let policy = &loaded.policy;
    let mut c = Checker { policy: loaded, problems: Vec::new() };
    let mut meta = NoteMeta::default();
    for field in &policy.metadata.required_fields {
        if frontmatter.get(field).is_none_or(Value::is_null) {
            c.problem(field, "is required");
        }
    }
    let types: Vec<String> = c.policy.policy.note_types.keys().cloned().collect();
    if let Some(v) = frontmatter.get("type").filter(|v| !v.is_null()) {
        meta.note_type = c.one_of("type", v, &types);
    }
    if let Some(v) = frontmatter.get("title").filter(|v| !v.is_null()) {
        meta.title = c.string("title", v);
        if let Some(title) = &meta.title {
            let chars = title.chars().count();
            if chars == 0 {
                c.problem("title", "must not be empty");
            } else if chars > policy.limits.title_chars_max {
                c.problem("title", format!("is {chars} characters, over the limit of {}", policy.limits.title_chars_max));
            }
        }
    }
    if let Some(v) = frontmatter.get("description").filter(|v| !v.is_null()) {
        meta.description = c.string("description", v);
        if meta.description.as_deref() == Some("") {
            c.problem("description", "must not be empty");
        }
    }
    if let Some(v) = frontmatter.get("timestamp").filter(|v| !v.is_null())
        && let Some(text) = c.string("timestamp", v)
    {
        meta.timestamp = parse_datetime(&text);
        if meta.timestamp.is_none() {
            let hint = if NaiveDate::parse_from_str(&text, "%Y-%m-%d").is_ok() { " (a date alone is not enough: add a time)" } else { "" };
            c.problem("timestamp", format!("'{text}' is not an ISO-8601 date-time{hint}"));
        }
    }
    if let Some(v) = frontmatter.get("resource").filter(|v| !v.is_null())
        && let Some(text) = c.string("resource", v).filter(|t| !t.is_empty())
    {
        let scheme_ok = text.split_once("://").is_some_and(|(scheme, rest)| {
            !rest.is_empty() && policy.metadata.resource_schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme))
        });
        if scheme_ok {
            meta.resource = Some(text);
        } else {
            c.problem("resource", format!("'{text}' is not an {} URL", policy.metadata.resource_schemes.join("/")));
        }
    }
    if let Some(v) = frontmatter.get("tags") {
        meta.tags = c.string_list("tags", v);
    }
    if let Some(v) = frontmatter.get("owner").filter(|v| !v.is_null()) {
        meta.owner = c.string("owner", v);
    }
    if let Some(v) = frontmatter.get("status").filter(|v| !v.is_null()) {
        meta.status = c.one_of("status", v, &policy.metadata.statuses);
    }
    if let Some(v) = frontmatter.get("expiry").filter(|v| !v.is_null()) {
        meta.expiry = c.date("expiry", v);
    }
    if let Some(v) = frontmatter.get("okf_version").filter(|v| !v.is_null()) {
        c.one_of("okf_version", v, &policy.metadata.okf_versions);
    }
    if let Some(v) = frontmatter.get("related") {
        meta.related = related(&mut c, v);
    }
    if let Some(v) = frontmatter.get("memory").filter(|v| !v.is_null()) {
        meta.memory = memory(&mut c, v);
    }
    (meta, c.problems)
}

fn related(c: &mut Checker<'_>, value: &Value) -> Vec<String> {
    let Value::Sequence(items) = value else {
        if !value.is_null() {
            c.problem("related", format!("must be a list, found {}", kind(value)));
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        match item {
            Value::String(path) => out.push(path.trim().to_string()),
            Value::Mapping(map) => match map.get("path") {
                Some(Value::String(path)) => {
                    if let Some(conf) = map.get("confidence") {
                        let ok = conf.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x));
                        if !ok {
                            c.problem("related", "confidence must be a number in [0, 1]");
                        }
                    }
                    out.push(path.trim().to_string());
                }
                _ => c.problem("related", "each mapping item needs a string 'path'"),
            },
            other => c.problem("related", format!("items must be paths or mappings, found {}", kind(other))),
        }
    }
    out
}

fn memory(c: &mut Checker<'_>, value: &Value) -> Option<MemoryMeta> {
    let Value::Mapping(map) = value else {
        c.problem("memory", format!("must be a mapping, found {}", kind(value)));
        return None;
    };
    let md = c.policy.policy.metadata.clone();
    let mut memory = MemoryMeta::default();
    match map.get("kind") {
        Some(v) => memory.kind = c.one_of("memory.kind", v, &md.memory_kinds),
        None => c.problem("memory.kind", "is required when memory is present"),
    }
    if let Some(v) = map.get("confidence")
        && !v.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x))
    {
        c.problem("memory.confidence", "must be a number in [0, 1]");
    }
    if let Some(v) = map.get("valid_from").filter(|v| !v.is_null()) {
        memory.valid_from = c.date("memory.valid_from", v);
    }
    if let Some(v) = map.get("valid_until").filter(|v| !v.is_null()) {
        memory.valid_until = c.date("memory.valid_until", v);
    }
    if let (Some(from), Some(until)) = (memory.valid_from, memory.valid_until)
        && until < from
    {
        c.problem("memory.valid_until", "is before valid_from");
    }
    let list = |c: &mut Checker<'_>, key: &str| map.get(key).map(|v| c.string_list(&format!("memory.{key}"), v)).unwrap_or_default();
    memory.supersedes = match map.get("supersedes") {
        Some(Value::String(s)) => vec![s.trim().to_string()],
        _ => list(c, "supersedes"),
    };
    let sources = list(c, "sources");
    let evidence = list(c, "evidence");
    let write_policy = match map.get("write_policy") {
        Some(v) => c.one_of("memory.write_policy", v, &md.write_policies),
        None => None,
    };
    if let Some(wp) = write_policy
        && md.write_policies_needing_provenance.contains(&wp)
        && (sources.is_empty() || evidence.is_empty())
    {
        c.problem("memory.write_policy", format!("'{wp}' requires non-empty memory.sources and memory.evidence"));
    }
    if let Some(v) = map.get("sensitivity") {
        c.one_of("memory.sensitivity", v, &md.sensitivities);
    }
    Some(memory)
}

#[cfg(test)]
mod tests;

/// The allowed value a mistyped one most likely meant: the same word in another case, else the
/// nearest by Jaro-Winkler similarity when it is close (≥ 0.8).
pub fn closest<'a>(given: &str, allowed: &'a [String]) -> Option<&'a str> {
    if let Some(same) = allowed.iter().find(|a| a.eq_ignore_ascii_case(given)) {
        return Some(same);
    }
    let lower = given.to_lowercase();
    allowed
        .iter()
        .map(|a| (strsim::jaro_winkler(&lower, &a.to_lowercase()), a))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|x, y| x.0.total_cmp(&y.0))
        .map(|(_, a)| a.as_str())
}

#[cfg(test)]
mod closest_tests {
    use super::closest;

    #[test]
    fn a_mistyped_value_suggests_the_allowed_one() {
        let allowed: Vec<String> = ["Project", "Area", "Resource", "Daily Log"].iter().map(|s| s.to_string()).collect();
        assert_eq!(closest("project", &allowed), Some("Project"));
        assert_eq!(closest("Resorce", &allowed), Some("Resource"));
        assert_eq!(closest("daily log", &allowed), Some("Daily Log"));
        assert_eq!(closest("zzz", &allowed), None);
    }
}
