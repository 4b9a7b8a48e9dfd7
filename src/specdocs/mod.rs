//! vaultspec decision documents in the P.A.R.A. vault: feature-tagged documents (research, adr,
//! plan, reference, audit, exec) whose folders the policy decides, plans with canonical step
//! IDs (`plan`), the execution ledger (`ledger`), status and check (`health`), and the batch
//! envelope of the writing calls (`envelope`). Every write is a Markdown note written through
//! the approval gate (`approvals::execute_checked`); docs/specdocs.md describes the mapping and how a batch maps onto
//! transactions.

pub mod authoring;
pub mod envelope;
pub mod health;
pub mod ledger;
pub mod plan;

use std::sync::OnceLock;

use regex::Regex;
use sha1::{Digest, Sha1};

use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::store::nofollow::resolve_safe;
use crate::vault::Vault;
use crate::write::{Mutation, NoteChange, sha256_hex};

/// The version of the vaultspec tool shapes this engine serves (`status.tool_schema_version`).
pub(crate) const TOOL_SCHEMA_VERSION: &str = "0.1.73";

pub use crate::policy::specdocs::{DocTypePolicy, SpecdocsPolicy};

/// One vaultspec document found in the vault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    pub path: VaultPath,
    pub stem: String,
    pub doc_type: String,
    pub feature: String,
    /// The `YYYY-MM-DD` prefix of the stem, when it has one.
    pub date: Option<String>,
}

/// The git blob object id of `bytes`: SHA-1 over `blob <len>\0` followed by the bytes.
pub fn blob_hash(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `text` is a kebab-case tag: lower-case letters and digits in hyphen-joined runs.
pub(crate) fn is_kebab(text: &str) -> bool {
    static KEBAB: OnceLock<Regex> = OnceLock::new();
    KEBAB.get_or_init(|| Regex::new(r"^[a-z0-9]+(?:-[a-z0-9]+)*$").expect("BUG: kebab regex")).is_match(text)
}

/// A feature tag as callers send it: a leading `#` stripped, then it must be kebab-case.
pub(crate) fn normalise_feature(raw: &str) -> Result<String> {
    let feature = raw.trim().trim_start_matches('#').to_string();
    if is_kebab(&feature) {
        Ok(feature)
    } else {
        Err(Error::InvalidArgument { name: "feature", reason: format!("'{raw}' is not a kebab-case feature tag (e.g. search-api)") })
    }
}

/// The compiled path patterns of every document type.
pub struct Layout {
    matchers: Vec<(String, Regex)>,
    index: Regex,
}

fn pattern_regex(pattern: &str, tail: &str) -> Regex {
    // The first `{feature}` captures it; later ones match the same shape without capturing.
    let escaped = regex::escape(pattern)
        .replacen(r"\{feature\}", "(?P<feature>[a-z0-9]+(?:-[a-z0-9]+)*)", 1)
        .replace(r"\{feature\}", "[a-z0-9]+(?:-[a-z0-9]+)*");
    Regex::new(&format!("^{escaped}{tail}$")).expect("BUG: specdocs folder pattern is an escaped literal")
}

impl Layout {
    pub fn new(policy: &SpecdocsPolicy) -> Self {
        let matchers =
            policy.types.iter().map(|(name, t)| (name.clone(), pattern_regex(&t.folder, r"/(?:[^/]+/)?(?P<stem>[^/]+)\.md"))).collect();
        Layout { matchers, index: pattern_regex(&policy.index_path, "") }
    }

    /// The document `path` is, if it lies in a document type's folder.
    pub(crate) fn classify(&self, path: &VaultPath) -> Option<Doc> {
        let text = path.as_str();
        if self.index.is_match(text) {
            return None;
        }
        for (doc_type, regex) in &self.matchers {
            if let Some(caps) = regex.captures(text) {
                let stem = caps["stem"].to_string();
                if stem == "_index" {
                    return None;
                }
                let date = stem.get(..10).filter(|d| crate::note::metadata::parse_date(d).is_some() && d.len() == 10).map(str::to_string);
                return Some(Doc { path: path.clone(), stem, doc_type: doc_type.clone(), feature: caps["feature"].to_string(), date });
            }
        }
        None
    }
}

/// The policy section, or a typed error when the vault's policy has none.
pub(crate) fn policy_of(vault: &Vault) -> Result<&SpecdocsPolicy> {
    let policy = &vault.policy().policy.specdocs;
    if policy.types.is_empty() {
        return Err(Error::NotConfigured {
            capability: "specdocs",
            remediation: "the policy has no specdocs.types section; restore it from policy/default.yaml".into(),
        });
    }
    Ok(policy)
}

/// Every vaultspec document in the vault, sorted by path.
pub fn documents(vault: &Vault) -> Result<Vec<Doc>> {
    let layout = Layout::new(policy_of(vault)?);
    let mut docs = vault.with_inventory(|inv| inv.notes().filter_map(|r| layout.classify(&r.path)).collect::<Vec<_>>())?;
    docs.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
    Ok(docs)
}

/// The folder of `doc_type` for `feature`.
pub(crate) fn folder_of(policy: &SpecdocsPolicy, doc_type: &str, feature: &str) -> Result<String> {
    let t = policy
        .types
        .get(doc_type)
        .ok_or_else(|| Error::InvalidArgument { name: "type", reason: format!("unknown document type '{doc_type}'") })?;
    Ok(t.folder.replace("{feature}", feature))
}

/// The feature index path of `feature`.
pub(crate) fn index_path_of(policy: &SpecdocsPolicy, feature: &str) -> Result<VaultPath> {
    VaultPath::parse(&policy.index_path.replace("{feature}", feature))
        .map_err(|e| Error::InvalidArgument { name: "feature", reason: e.to_string() })
}

/// Reads a note's bytes (`None` when it cannot be read), through folder handles: a folder
/// swapped for a link after the check is never read through.
pub(crate) fn read_bytes(vault: &Vault, path: &VaultPath) -> Option<Vec<u8>> {
    resolve_safe(vault.root(), path.as_str()).ok()?;
    crate::store::beneath::read(vault.root(), path.as_str()).ok().flatten()
}

/// Reads a note as UTF-8 text, or a typed error.
pub(crate) fn read_text(vault: &Vault, path: &VaultPath) -> Result<String> {
    let bytes = read_bytes(vault, path).ok_or_else(|| Error::NoteUnreadable { path: path.to_string(), reason: "cannot be read".into() })?;
    String::from_utf8(bytes).map_err(|_| Error::NoteUnreadable { path: path.to_string(), reason: "is not UTF-8".into() })
}

/// The stem a reference names: a path, filename, stem, or `[[wiki-link]]` (alias and heading cut).
pub(crate) fn reference_stem(reference: &str) -> String {
    let text = reference.trim();
    let text = text.strip_prefix("[[").and_then(|t| t.strip_suffix("]]")).unwrap_or(text);
    let text = text.split('|').next().unwrap_or(text);
    let text = text.split('#').next().unwrap_or(text).trim();
    let name = text.rsplit('/').next().unwrap_or(text);
    name.strip_suffix(".md").unwrap_or(name).to_string()
}

/// Resolves a reference against `docs`: an exact path first, then the stem; more than one
/// document with the stem is ambiguous.
pub(crate) fn resolve_reference<'d>(docs: &'d [Doc], reference: &str) -> std::result::Result<&'d Doc, String> {
    let trimmed = reference.trim();
    let as_path = trimmed.strip_suffix(".md").map_or_else(|| format!("{trimmed}.md"), |_| trimmed.to_string());
    if let Some(doc) = docs.iter().find(|d| d.path.as_str() == as_path) {
        return Ok(doc);
    }
    let stem = reference_stem(trimmed);
    let matches: Vec<&Doc> = docs.iter().filter(|d| d.stem == stem).collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("Cannot resolve document: '{reference}'")),
        many => Err(format!("'{reference}' is ambiguous: {}", many.iter().map(|d| d.path.as_str()).collect::<Vec<_>>().join(", "))),
    }
}

/// The change that writes one document through the one transaction: it creates the document
/// when `current` is `None` (refused if one appeared meanwhile), and otherwise replaces it only
/// while it still holds `current` (`precondition_failed` if anyone changed it since it was read).
fn write_document(operation: &'static str, path: VaultPath, text: String, current: Option<&str>, create_folders: bool) -> Mutation {
    Mutation {
        operation: operation.into(),
        notes: vec![NoteChange {
            path,
            content: Some(text),
            require_absent: current.is_none(),
            expected_sha256: current.map(|c| sha256_hex(c.as_bytes())),
        }],
        idempotency_key: None,
        proposal_id: None,
        log_entry: None,
        create_folders,
    }
}

#[cfg(test)]
mod tests;
