//! `find`, `create` and `edit` over vaultspec documents. A create or edit item is one write
//! transaction (its own receipt), applied in order, so a later item sees an earlier one's
//! write; the feature index of every feature that gained a document is regenerated after the
//! batch, in one more transaction.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::envelope::{BatchReport, ItemError, ItemOutcome, envelope};
use super::{
    Doc, SpecdocsPolicy, blob_hash, documents, folder_of, index_path_of, normalise_feature, policy_of, read_bytes, read_text,
    write_document,
};
use crate::approvals::execute_checked as execute;
use crate::error::{Error, Result};
use crate::note::frontmatter;
use crate::note::path::VaultPath;
use crate::store::nofollow::resolve_safe;
use crate::vault::Vault;
use crate::write::Mutation;

/// The frontmatter key that marks a feature index as the engine's to regenerate.
pub(crate) const INDEX_MARKER_KEY: &str = "generated_by";
pub(crate) const INDEX_MARKER: &str = "paravault-specdocs";

/// How much document text `find` inlines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BodyMode {
    #[default]
    None,
    Excerpt,
    Full,
}

/// `find` parameters.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindRequest {
    /// Feature filter, without the # prefix. Passing it switches find to search mode.
    #[serde(default)]
    pub feature: Option<String>,
    /// Document-type filter (adr, plan, research, reference, audit, exec, index: the feature indexes). Default in search mode: adr, plan, research, reference, in that order.
    #[serde(default, rename = "type")]
    pub types: Option<Vec<String>>,
    /// Exact ISO-8601 date filter.
    #[serde(default)]
    pub date: Option<String>,
    /// Case-insensitive substring over the document stem and feature tag.
    #[serde(default)]
    pub text: Option<String>,
    /// In search mode, how much document text to inline in each row.
    #[serde(default)]
    pub body: BodyMode,
    /// In feature-listing mode, enrich each row with status, types, earliest_date and has_plan.
    #[serde(default)]
    pub json: bool,
    /// Maximum number of rows (1 to 100).
    #[serde(default = "twenty")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: usize,
}

fn twenty() -> usize {
    20
}

/// The document type of feature indexes in `find` (they are not a type of the policy: the
/// engine writes them, nobody creates them).
const INDEX_TYPE: &str = "index";

/// The seed's order of the default search types.
const SEED_TYPE_ORDER: [&str; 4] = ["adr", "plan", "research", "reference"];

/// Characters of body text an `excerpt` row carries.
const EXCERPT_CHARS: usize = 400;

/// What `find` returns: the feature listing or the matching documents, under `result`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FindReport {
    /// The feature rows (no filter given) or the document rows (search mode).
    pub result: FindRows,
}

/// The rows of one `find` call: features or documents, never both.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum FindRows {
    /// The feature listing, heaviest first.
    Features(Vec<FeatureRow>),
    /// The matching documents.
    Documents(Vec<DocumentRow>),
}

/// One row of the feature listing.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FeatureRow {
    /// The feature tag, without the # prefix.
    pub name: String,
    /// How many documents carry the feature.
    pub doc_count: usize,
    /// The number of links into the feature's documents from anywhere in the vault.
    pub weight: usize,
    /// The lifecycle fields (`json: true` only).
    #[serde(flatten)]
    pub lifecycle: Option<FeatureLifecycleRow>,
}

/// The lifecycle fields of a feature row (`find` with `json: true`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FeatureLifecycleRow {
    /// Not Started, Planned, In Progress or Completed.
    pub status: String,
    /// The document types the feature has, sorted.
    pub types: BTreeSet<String>,
    /// The earliest document date of the feature.
    pub earliest_date: Option<String>,
    /// Whether the feature has a plan.
    pub has_plan: bool,
}

/// One document-search row.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocumentRow {
    /// The document's file stem.
    pub name: String,
    /// The document type (research, adr, plan…).
    #[serde(rename = "type")]
    pub doc_type: String,
    /// The document's feature tag.
    pub feature: String,
    /// The document's date, when it has one.
    pub date: Option<String>,
    /// The vault-relative path.
    pub path: String,
    /// The git blob hash of the file (null when it cannot be read).
    pub blob_hash: Option<String>,
    /// A `file://` URI of the document.
    pub resource_uri: String,
    /// The body prose, whole or an excerpt (`body` full or excerpt only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// `find`: the feature listing (no filter) or matching documents.
pub fn find(vault: &Vault, request: &FindRequest) -> Result<FindReport> {
    if !(1..=100).contains(&request.limit) {
        return Err(Error::InvalidArgument { name: "limit", reason: format!("{} is outside 1..=100", request.limit) });
    }
    let policy = policy_of(vault)?;
    let docs = documents(vault)?;
    let search_mode = request.feature.is_some() || request.types.is_some() || request.date.is_some() || request.text.is_some();
    if !search_mode {
        let mut rows = feature_rows(vault, &docs, request.json)?;
        rows.truncate(request.limit);
        return Ok(FindReport { result: FindRows::Features(rows) });
    }
    let types: Vec<String> = match &request.types {
        Some(types) => {
            for t in types {
                if !policy.types.contains_key(t) && t != INDEX_TYPE {
                    return Err(Error::InvalidArgument {
                        name: "type",
                        reason: format!(
                            "unknown document type '{t}' (known: {}, {INDEX_TYPE}), e.g. [\"adr\", \"plan\"]",
                            policy.types.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
            }
            let mut named: Vec<String> = Vec::new();
            for t in types {
                if !named.contains(t) {
                    named.push(t.clone());
                }
            }
            named
        }
        None => {
            // The seed's order (adr, plan, research, reference), which decides what a `limit`
            // crowds out; a type the seed does not name follows, by name.
            let mut default: Vec<String> =
                policy.types.iter().filter(|(_, t)| t.searched_by_default).map(|(name, _)| name.clone()).collect();
            default.sort_by_key(|t| (SEED_TYPE_ORDER.iter().position(|s| s == t).unwrap_or(SEED_TYPE_ORDER.len()), t.clone()));
            default
        }
    };
    // Feature indexes are documents of type `index` (the seed's `.index.md` per feature),
    // found when asked for by name.
    let mut indexes: Vec<Doc> = Vec::new();
    if types.iter().any(|t| t == INDEX_TYPE) {
        let features: BTreeSet<&str> = docs.iter().map(|d| d.feature.as_str()).collect();
        for feature in features {
            let path = index_path_of(policy, feature)?;
            if read_bytes(vault, &path).is_some() {
                let stem = path.as_str().rsplit('/').next().unwrap_or_default().trim_end_matches(".md").to_string();
                indexes.push(Doc { path, stem, doc_type: INDEX_TYPE.to_string(), feature: feature.to_string(), date: None });
            }
        }
    }
    let feature = request.feature.as_deref().map(|f| f.trim().trim_start_matches('#').to_string());
    let text = request.text.as_deref().map(str::to_lowercase);
    let mut rows = Vec::new();
    'types: for doc_type in &types {
        for doc in docs.iter().chain(&indexes).filter(|d| &d.doc_type == doc_type) {
            if feature.as_ref().is_some_and(|f| *f != doc.feature)
                || request.date.as_ref().is_some_and(|d| doc.date.as_deref() != Some(d.trim()))
                || text.as_ref().is_some_and(|t| !doc.stem.to_lowercase().contains(t) && !doc.feature.contains(t.as_str()))
            {
                continue;
            }
            if rows.len() >= request.limit {
                break 'types;
            }
            rows.push(document_row(vault, doc, request.body));
        }
    }
    Ok(FindReport { result: FindRows::Documents(rows) })
}

/// One document-search row.
pub(crate) fn document_row(vault: &Vault, doc: &Doc, body: BodyMode) -> DocumentRow {
    let bytes = read_bytes(vault, &doc.path);
    let blob_hash = bytes.as_deref().map(blob_hash);
    let body = (body != BodyMode::None).then(|| {
        let text = bytes.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let prose = frontmatter::split(&text).map_or(text.as_str(), |s| s.body).to_string();
        if body == BodyMode::Excerpt { prose.chars().take(EXCERPT_CHARS).collect() } else { prose }
    });
    DocumentRow {
        name: doc.stem.clone(),
        doc_type: doc.doc_type.clone(),
        feature: doc.feature.clone(),
        date: doc.date.clone(),
        path: doc.path.to_string(),
        blob_hash,
        resource_uri: format!("file://{}", doc.path.under(vault.root()).display()),
        body,
    }
}

/// The feature-listing rows, heaviest first: name, doc_count, weight (the number of links into
/// the feature's documents from anywhere in the vault), and with `rich` the lifecycle fields.
pub(crate) fn feature_rows(vault: &Vault, docs: &[Doc], rich: bool) -> Result<Vec<FeatureRow>> {
    let mut by_feature: BTreeMap<&str, Vec<&Doc>> = BTreeMap::new();
    for doc in docs {
        by_feature.entry(doc.feature.as_str()).or_default().push(doc);
    }
    let weights: BTreeMap<&str, usize> = vault.with_inventory(|inv| {
        by_feature.iter().map(|(name, docs)| (*name, docs.iter().map(|d| inv.linkers_of(&d.path).len()).sum())).collect()
    })?;
    let mut rows = Vec::new();
    for (name, feature_docs) in &by_feature {
        let lifecycle = rich.then(|| {
            let lifecycle = super::health::feature_lifecycle(vault, docs, name);
            FeatureLifecycleRow {
                status: lifecycle.status.to_string(),
                types: feature_docs.iter().map(|d| d.doc_type.clone()).collect(),
                earliest_date: feature_docs.iter().filter_map(|d| d.date.clone()).min(),
                has_plan: lifecycle.has_plan,
            }
        });
        rows.push(FeatureRow {
            name: name.to_string(),
            doc_count: feature_docs.len(),
            weight: weights.get(name).copied().unwrap_or(0),
            lifecycle,
        });
    }
    rows.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
    Ok(rows)
}

/// One `create` item.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSpec {
    /// Required. Feature tag, in kebab-case. A leading # is stripped.
    pub feature: String,
    /// research (default), adr, plan, reference or audit.
    #[serde(default, rename = "type")]
    pub doc_type: Option<String>,
    /// Rendered into the document's heading.
    #[serde(default)]
    pub title: Option<String>,
    /// ISO-8601 date; default today (UTC).
    #[serde(default)]
    pub date: Option<String>,
    /// Seed prose, appended under a ## Context heading.
    #[serde(default)]
    pub content: Option<String>,
    /// Documents to link in related: (path, filename, stem or [[wiki-link]]).
    #[serde(default)]
    pub related: Option<Vec<String>>,
    /// Only the document's own directory and feature tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Plan tier L1 to L4 (plans only; default L1).
    #[serde(default)]
    pub tier: Option<String>,
    /// Kebab-case filename infix (adr, audit, reference, research).
    #[serde(default)]
    pub topic: Option<String>,
}

/// What one created document is.
struct Created {
    doc: Doc,
    blob_hash: String,
    warnings: Vec<String>,
}

/// One `create` or `edit` item's row.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocumentItem {
    /// The item's position in the request, from 0.
    pub index: usize,
    /// What the item named: `type:feature` (create) or the document reference (edit).
    pub target: String,
    /// created, updated, unchanged or failed.
    pub status: String,
    /// The document's vault-relative path (null when the item failed).
    pub path: Option<String>,
    /// The document's git blob hash after the item (null when the item failed).
    pub blob_hash: Option<String>,
    /// Why the item failed (null when it did not).
    pub error: Option<ItemError>,
    /// What went wrong around a successful item (a feature index not regenerated).
    pub warnings: Vec<String>,
}

/// `create`: scaffolds each document in order; one transaction per item.
pub fn create(vault: &Vault, specs: &[CreateSpec]) -> Result<BatchReport<DocumentItem>> {
    if specs.is_empty() {
        return Err(Error::InvalidArgument { name: "documents", reason: "at least one document specification is required".into() });
    }
    let policy = policy_of(vault)?;
    let mut docs = documents(vault)?;
    let mut outcomes = Vec::new();
    let mut touched: BTreeSet<String> = BTreeSet::new();
    for (index, spec) in specs.iter().enumerate() {
        let doc_type = spec.doc_type.clone().unwrap_or_else(|| "research".into());
        let target = format!("{doc_type}:{}", spec.feature.trim().trim_start_matches('#'));
        match create_one(vault, policy, &docs, spec, &doc_type) {
            Ok(created) => {
                touched.insert(created.doc.feature.clone());
                let warned = !created.warnings.is_empty();
                let row = DocumentItem {
                    index,
                    target,
                    status: "created".into(),
                    path: Some(created.doc.path.to_string()),
                    blob_hash: Some(created.blob_hash),
                    error: None,
                    warnings: created.warnings,
                };
                outcomes.push(ItemOutcome::success("created", row, warned));
                docs.push(created.doc);
            }
            Err(message) => outcomes.push(ItemOutcome::failure(DocumentItem {
                index,
                target,
                status: "failed".into(),
                path: None,
                blob_hash: None,
                error: Some(ItemError::new(message)),
                warnings: Vec::new(),
            })),
        }
    }
    for feature in &touched {
        if let Err(error) = write_feature_index(vault, policy, &docs, feature) {
            let warning = format!("the feature index of '{feature}' was not regenerated: {error}");
            if let Some(item) = outcomes.iter_mut().rev().find(|o| !o.failed && o.row.target.ends_with(&format!(":{feature}"))) {
                item.warned = true;
                item.row.warnings.push(warning);
            }
        }
    }
    Ok(envelope(outcomes, policy.sampled_successes))
}

/// The template of `doc_type`: the vault's, else the engine's default.
fn template(vault: &Vault, policy: &SpecdocsPolicy, doc_type: &str) -> std::result::Result<String, String> {
    let in_vault = format!("{}/{doc_type}.md", policy.templates_folder.trim_end_matches('/'));
    if let Ok(path) = VaultPath::parse(&in_vault)
        && resolve_safe(vault.root(), path.as_str()).is_ok()
    {
        // Read through folder handles: a folder swapped for a link is never read through.
        match crate::store::beneath::read(vault.root(), path.as_str()) {
            Ok(Some(bytes)) => return String::from_utf8(bytes).map_err(|_| format!("the template {in_vault} cannot be read: not UTF-8")),
            Ok(None) => {}
            Err(e) => return Err(format!("the template {in_vault} cannot be read: {e}")),
        }
    }
    default_template(doc_type)
        .map(str::to_string)
        .ok_or_else(|| format!("no template for document type '{doc_type}' ({in_vault} is missing)"))
}

/// The engine's default templates (data files under policy/templates/specdocs/).
pub(crate) fn default_template(doc_type: &str) -> Option<&'static str> {
    Some(match doc_type {
        "research" => include_str!("../../policy/templates/specdocs/research.md"),
        "adr" => include_str!("../../policy/templates/specdocs/adr.md"),
        "plan" => include_str!("../../policy/templates/specdocs/plan.md"),
        "reference" => include_str!("../../policy/templates/specdocs/reference.md"),
        "audit" => include_str!("../../policy/templates/specdocs/audit.md"),
        _ => return None,
    })
}

fn yaml_string(text: &str) -> serde_yaml::Value {
    serde_yaml::Value::String(text.to_string())
}

/// The frontmatter of a new document, stamped `now` (the vault's clock), or the typed reason
/// the YAML emitter cannot write it so that it reads back the same (never an empty block).
#[allow(clippy::too_many_arguments)]
pub(crate) fn document_frontmatter(
    policy: &SpecdocsPolicy,
    doc_type: &str,
    feature: &str,
    title: &str,
    date: &str,
    related: &[String],
    extra: &[(&str, serde_yaml::Value)],
    now: chrono::DateTime<chrono::Utc>,
) -> std::result::Result<String, frontmatter::FrontmatterProblem> {
    let note_type = policy.types.get(doc_type).map_or("Project", |t| t.note_type.as_str());
    let mut map = serde_yaml::Mapping::new();
    map.insert(yaml_string("type"), yaml_string(note_type));
    map.insert(yaml_string("title"), yaml_string(title));
    map.insert(yaml_string("description"), yaml_string(&format!("{doc_type} document of feature {feature}")));
    map.insert(yaml_string("timestamp"), yaml_string(&now.format("%Y-%m-%dT%H:%M:%SZ").to_string()));
    map.insert(
        yaml_string("tags"),
        serde_yaml::Value::Sequence(vec![yaml_string(&format!("#{doc_type}")), yaml_string(&format!("#{feature}"))]),
    );
    map.insert(yaml_string("date"), yaml_string(date));
    map.insert(yaml_string("related"), serde_yaml::Value::Sequence(related.iter().map(|r| yaml_string(&format!("[[{r}]]"))).collect()));
    for (key, value) in extra {
        map.insert(yaml_string(key), value.clone());
    }
    Ok(format!("---\n{}---\n", frontmatter::render_mapping(&map)?))
}

fn create_one(
    vault: &Vault,
    policy: &SpecdocsPolicy,
    docs: &[Doc],
    spec: &CreateSpec,
    doc_type: &str,
) -> std::result::Result<Created, String> {
    let feature = normalise_feature(&spec.feature).map_err(|e| e.to_string())?;
    if doc_type == "index" {
        return Err("index documents are auto-generated after a create batch; they cannot be created".into());
    }
    let type_policy = policy.types.get(doc_type).ok_or_else(|| {
        format!(
            "invalid document type '{doc_type}' (one of: {})",
            policy.types.iter().filter(|(_, t)| t.creatable).map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
        )
    })?;
    for required in &type_policy.requires {
        if !docs.iter().any(|d| d.feature == feature && &d.doc_type == required) {
            return Err(format!("{doc_type}:{feature} requires a {required} document of feature '{feature}', and none exists yet"));
        }
    }
    if !type_policy.creatable {
        return Err(format!("{doc_type} documents cannot be created: execution is recorded with log"));
    }
    let mut extra = Vec::new();
    if doc_type == "plan" {
        let tier = spec.tier.clone().unwrap_or_else(|| policy.default_tier.clone());
        super::plan::Tier::parse(&tier)?;
        extra.push(("tier", yaml_string(&tier)));
        extra.push(("retired_steps", serde_yaml::Value::Sequence(Vec::new())));
    }
    if let Some(topic) = &spec.topic {
        if !type_policy.topic {
            return Err(format!("topic is valid only for adr, audit, reference and research documents, not {doc_type}"));
        }
        if !super::is_kebab(topic) {
            return Err(format!("topic '{topic}' is not kebab-case"));
        }
    }
    let date = match &spec.date {
        Some(date) => {
            let trimmed = date.trim();
            if trimmed.len() != 10 || chrono::NaiveDate::parse_from_str(trimmed, "%Y-%m-%d").is_err() {
                return Err(format!("date '{date}' is not an ISO-8601 date (YYYY-MM-DD)"));
            }
            trimmed.to_string()
        }
        None => vault.today().format("%Y-%m-%d").to_string(),
    };
    for tag in spec.tags.iter().flatten() {
        let bare = tag.trim().trim_start_matches('#');
        if bare != doc_type && bare != feature {
            return Err(format!("tag '{tag}' is not allowed: a document carries only #{doc_type} and #{feature}"));
        }
    }
    let mut related = Vec::new();
    for reference in spec.related.iter().flatten() {
        let doc = super::resolve_reference(docs, reference).map_err(|m| format!("unresolvable related reference: {m}"))?;
        if !related.contains(&doc.stem) {
            related.push(doc.stem.clone());
        }
    }
    let stem = match &spec.topic {
        Some(topic) => format!("{date}-{feature}-{topic}-{doc_type}"),
        None => format!("{date}-{feature}-{doc_type}"),
    };
    let folder = folder_of(policy, doc_type, &feature).map_err(|e| e.to_string())?;
    let path = VaultPath::parse(&format!("{folder}/{stem}.md")).map_err(|e| e.to_string())?;
    // Looked up through folder handles (a folder swapped for a link is never asked); the write
    // itself requires the note to be absent.
    if docs.iter().any(|d| d.path == path)
        || (resolve_safe(vault.root(), path.as_str()).is_ok()
            && crate::store::beneath::exists(vault.root(), path.as_str()).is_ok_and(|e| e))
    {
        return Err(format!("{} already exists", path.as_str()));
    }
    let title = spec.title.clone().filter(|t| !t.trim().is_empty()).unwrap_or_else(|| format!("{feature} {doc_type}"));
    let body = template(vault, policy, doc_type)?
        .replace("{{title}}", &title)
        .replace("{{feature}}", &feature)
        .replace("{{date}}", &date)
        .replace("{{type}}", doc_type);
    let mut text = document_frontmatter(policy, doc_type, &feature, &title, &date, &related, &extra, vault.now())
        .map_err(|problem| problem.to_string())?;
    text.push_str(&body);
    if let Some(content) = spec.content.as_deref().filter(|c| !c.trim().is_empty()) {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("\n## Context\n\n{}\n", content.trim_end()));
    }
    let mutation = Mutation {
        log_entry: Some(format!("vaultspec create {}", path.as_str())),
        ..write_document("mcp.vaultspec.create", path.clone(), text.clone(), None, true)
    };
    execute(vault, mutation).map_err(|e| e.to_string())?;
    let doc = Doc { path, stem, doc_type: doc_type.to_string(), feature, date: Some(date) };
    Ok(Created { doc, blob_hash: blob_hash(text.as_bytes()), warnings: Vec::new() })
}

/// The body of a feature index: every document of the feature as a wikilink, by type.
pub(crate) fn feature_index_body(docs: &[Doc], feature: &str) -> String {
    let mut by_type: BTreeMap<&str, Vec<&Doc>> = BTreeMap::new();
    for doc in docs.iter().filter(|d| d.feature == feature) {
        by_type.entry(doc.doc_type.as_str()).or_default().push(doc);
    }
    let mut body = format!("# {feature} index\n\nGenerated by paravault from the feature's documents; edits here are replaced.\n");
    for (doc_type, docs) in by_type {
        body.push_str(&format!("\n## {doc_type}\n\n"));
        for doc in docs {
            body.push_str(&format!("- [[{}]]\n", doc.stem));
        }
    }
    body
}

/// Regenerates the feature index of `feature` when its list changed (one transaction). An index
/// without the engine's marker was written by someone else and is never overwritten.
pub(crate) fn write_feature_index(vault: &Vault, policy: &SpecdocsPolicy, docs: &[Doc], feature: &str) -> Result<bool> {
    let path = index_path_of(policy, feature)?;
    let body = feature_index_body(docs, feature);
    let current = read_bytes(vault, &path).map(|b| String::from_utf8_lossy(&b).into_owned());
    if let Some(current) = &current {
        let split = frontmatter::split(current).ok();
        let marked = split
            .as_ref()
            .and_then(|s| frontmatter::parse(s).ok())
            .is_some_and(|fm| fm.get(INDEX_MARKER_KEY).and_then(serde_yaml::Value::as_str) == Some(INDEX_MARKER));
        if !marked {
            return Err(Error::AlreadyExists { path: path.to_string() });
        }
        if split.is_some_and(|s| s.body == body) {
            return Ok(false);
        }
    }
    let mut map = serde_yaml::Mapping::new();
    map.insert(yaml_string("type"), yaml_string(policy.types.get("plan").map_or("Project", |t| t.note_type.as_str())));
    map.insert(yaml_string("title"), yaml_string(&format!("{feature} index")));
    map.insert(yaml_string("description"), yaml_string(&format!("Every vaultspec document of feature {feature}")));
    map.insert(yaml_string("timestamp"), yaml_string(&vault.now().format("%Y-%m-%dT%H:%M:%SZ").to_string()));
    map.insert(yaml_string("tags"), serde_yaml::Value::Sequence(vec![yaml_string("#index"), yaml_string(&format!("#{feature}"))]));
    map.insert(yaml_string(INDEX_MARKER_KEY), yaml_string(INDEX_MARKER));
    let yaml = frontmatter::render_mapping(&map).map_err(|e| Error::InvalidContent { path: path.to_string(), reason: e.to_string() })?;
    let text = format!("---\n{yaml}---\n{body}");
    execute(vault, write_document("mcp.vaultspec.feature_index", path, text, current.as_deref(), true))?;
    Ok(true)
}

/// One `edit` operation.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditOperation {
    /// Required. A stem, filename, path or [[wiki-link]].
    pub target: String,
    /// Required. append_section, replace_section or set_body.
    pub operation: String,
    /// Required. The body (set_body) or the section prose.
    pub content: String,
    /// Exact heading-line text, e.g. "## Context" (section operations).
    #[serde(default)]
    pub section: Option<String>,
    /// Optimistic-concurrency guard: the document's blob hash as last read.
    #[serde(default)]
    pub expected_blob_hash: Option<String>,
}

/// `edit`: body-prose edits applied in order, one transaction per item.
pub fn edit(vault: &Vault, operations: &[EditOperation]) -> Result<BatchReport<DocumentItem>> {
    if operations.is_empty() {
        return Err(Error::InvalidArgument { name: "operations", reason: "at least one edit operation is required".into() });
    }
    let policy = policy_of(vault)?;
    let docs = documents(vault)?;
    let mut outcomes = Vec::new();
    for (index, op) in operations.iter().enumerate() {
        match edit_one(vault, &docs, op) {
            Ok((path, hash, changed)) => {
                let status = if changed { "updated" } else { "unchanged" };
                let row = DocumentItem {
                    index,
                    target: op.target.clone(),
                    status: status.into(),
                    path: Some(path),
                    blob_hash: Some(hash),
                    error: None,
                    warnings: Vec::new(),
                };
                outcomes.push(ItemOutcome::success(status, row, false));
            }
            Err(error) => outcomes.push(ItemOutcome::failure(DocumentItem {
                index,
                target: op.target.clone(),
                status: "failed".into(),
                path: None,
                blob_hash: None,
                error: Some(error),
                warnings: Vec::new(),
            })),
        }
    }
    Ok(envelope(outcomes, policy.sampled_successes))
}

/// The body after one section or body operation, or the failure's error object.
pub(crate) fn compose_body(body: &str, operation: &str, section: Option<&str>, content: &str) -> std::result::Result<String, ItemError> {
    let mut content = content.to_string();
    if !content.ends_with('\n') {
        content.push('\n');
    }
    match operation {
        "set_body" => return Ok(content),
        "append_section" | "replace_section" => {}
        other => return Err(ItemError::new(format!("unknown operation '{other}' (append_section, replace_section or set_body)"))),
    }
    let Some(section) = section.map(str::trim_end).filter(|s| !s.is_empty()) else {
        return Err(ItemError::new(format!("{operation} needs a section (the exact heading line, e.g. \"## Context\")")));
    };
    let lines: Vec<&str> = body.split_inclusive('\n').collect();
    let mut in_fence = false;
    let mut headings = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_end();
        if trimmed.trim_start().starts_with("```") || trimmed.trim_start().starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence && trimmed.starts_with('#') {
            let level = trimmed.chars().take_while(|c| *c == '#').count();
            if trimmed[level..].starts_with(' ') || trimmed.len() == level {
                headings.push((i, level, trimmed));
            }
        }
    }
    let Some(&(start, level, _)) = headings.iter().find(|(_, _, text)| *text == section) else {
        return Err(ItemError { section_not_found: true, ..ItemError::new(format!("section '{section}' not found")) });
    };
    let end = headings.iter().find(|(i, l, _)| *i > start && *l <= level).map_or(lines.len(), |(i, _, _)| *i);
    let mut out = String::with_capacity(body.len() + content.len() + 2);
    for line in &lines[..=start] {
        out.push_str(line);
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if operation == "append_section" {
        let kept: String = lines[start + 1..end].concat();
        out.push_str(&kept);
        if !kept.is_empty() && !kept.ends_with("\n\n") {
            if !kept.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str(&content);
    } else {
        out.push('\n');
        out.push_str(&content);
    }
    if end < lines.len() {
        out.push('\n');
        for line in &lines[end..] {
            out.push_str(line);
        }
    }
    Ok(out)
}

fn edit_one(vault: &Vault, docs: &[Doc], op: &EditOperation) -> std::result::Result<(String, String, bool), ItemError> {
    let doc = super::resolve_reference(docs, &op.target).map_err(ItemError::new)?;
    let text = read_text(vault, &doc.path).map_err(|e| ItemError::new(e.to_string()))?;
    let current_hash = blob_hash(text.as_bytes());
    if let Some(expected) = &op.expected_blob_hash
        && expected.trim() != current_hash
    {
        let message = format!(
            "conflict: {} changed since it was read (expected blob {expected}, found {current_hash}); nothing was written",
            doc.path.as_str()
        );
        return Err(ItemError { conflict: true, ..ItemError::new(message) });
    }
    let split = frontmatter::split(&text).map_err(|e| ItemError::new(format!("{} has no readable frontmatter: {e}", doc.path.as_str())))?;
    let head = &text[..text.len() - split.body.len()];
    let body = compose_body(split.body, &op.operation, op.section.as_deref(), &op.content)?;
    let new_text = format!("{head}{body}");
    if new_text == text {
        return Ok((doc.path.to_string(), current_hash, false));
    }
    let mutation = write_document("mcp.vaultspec.edit", doc.path.clone(), new_text.clone(), Some(text.as_str()), false);
    execute(vault, mutation).map_err(|e| {
        let conflict = matches!(e, Error::PreconditionFailed { .. });
        ItemError { conflict, ..ItemError::new(e.to_string()) }
    })?;
    Ok((doc.path.to_string(), blob_hash(new_text.as_bytes()), true))
}
