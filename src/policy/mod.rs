//! Governance as data: the policy loaded from `policy/default.yaml` and a vault override.
//!
//! The shipped default is embedded in the binary. A vault may override parts of it in
//! `.paravault/policy.yaml`: maps merge by key, lists and scalars replace. An invalid file is
//! refused at open with its name, line and reason. This module never touches the vault's notes.

pub mod approvals;
pub mod domains;
mod search_mode;
pub mod specdocs;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_yaml::Value;

use crate::error::{Error, Result};
pub use crate::finding::Severity;
use crate::hex;
pub use search_mode::SearchMode;

/// The width of the vectors this engine embeds (all-MiniLM-L6-v2): the only `embedding.dimension`
/// a policy may name (`embed::DIMENSION`).
pub(crate) const EMBEDDING_DIMENSION: usize = 384;

/// The note type of a session synthesis when the caller names none (`synthesize_session`, the
/// CLI's `synthesize --type`): episodic memory goes to the daily log.
pub const DEFAULT_SYNTHESIS_TYPE: &str = "Daily Log";

/// The shipped default policy.
pub(crate) const DEFAULT_POLICY_YAML: &str = include_str!("../../policy/default.yaml");
const DEFAULT_POLICY_NAME: &str = "policy/default.yaml";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Layout {
    pub para_folders: Vec<String>,
    pub extra_scope_folders: Vec<String>,
    pub catalog_categories: Vec<String>,
    pub catalog_extra_folders: Vec<String>,
    /// Scope folders `init` does not create (they are linted when a person makes them).
    pub not_created_at_init: Vec<String>,
    pub archive_folder: String,
    pub inbox_folder: String,
    pub excluded_dirs: Vec<String>,
    pub root_daily_log_pattern: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NoteTypePolicy {
    pub folder: String,
    pub half_life_days: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetadataPolicy {
    pub required_fields: Vec<String>,
    pub statuses: Vec<String>,
    pub archived_status: String,
    pub okf_versions: Vec<String>,
    pub memory_kinds: Vec<String>,
    pub write_policies: Vec<String>,
    pub write_policies_needing_provenance: Vec<String>,
    /// Write policies only a person's channel (the CLI) may put in a note's text.
    pub person_only_write_policies: Vec<String>,
    pub sensitivities: Vec<String>,
    pub resource_schemes: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LintPolicy {
    pub rules: BTreeMap<String, Severity>,
    pub orphan_exempt_names: Vec<String>,
    pub orphan_exempt_folders: Vec<String>,
    pub freshness_exempt_folders: Vec<String>,
    pub attachment_extensions: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub note_bytes_max: u64,
    pub title_chars_max: usize,
    pub catalog_page_bytes_max: usize,
    pub catalog_description_chars: usize,
    pub read_note_bytes_max: usize,
    pub report_findings_max: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Boosts {
    pub title: f32,
    pub tags: f32,
    pub description: f32,
    pub section: f32,
    pub body: f32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchPolicy {
    pub generations_kept: usize,
    pub boosts: Boosts,
    /// BM25 term-frequency saturation k1 (Lucene's formula, `search::read::bm25`).
    pub bm25_k1: f32,
    /// BM25 length normalisation b (0 = none, 1 = full).
    pub bm25_b: f32,
    /// Where BM25's document length comes from: `exact` (token counts) or `quantised`
    /// (Lucene's one-byte field norm).
    pub bm25_lengths: String,
    /// Characters of a query that are analysed; a longer query is cut there and says so.
    pub query_chars_max: usize,
    pub rrf_k: u32,
    pub max_results_cap: usize,
    pub chunk_min_words: usize,
    /// A publish that leaves more segments than this merges them (amortised compaction).
    pub max_segments: usize,
    /// Writes served from the journal's tail (an in-memory segment over the active generation)
    /// before the writer folds them into an on-disk generation (see docs/write-path.md).
    pub tail_writes_max: usize,
    /// What `auto` runs when a verified dense index exists: semantic, hybrid or graph_assisted.
    pub auto_dense_mode: String,
    /// How deep each ranked list goes before reciprocal-rank fusion.
    pub fusion_depth: usize,
    /// graph_assisted: link hops from each anchor (0-2) and the score decay per hop.
    pub graph_hops: usize,
    pub graph_decay: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaintenancePolicy {
    pub redundant_title_jaccard: f64,
    pub trivial_body_chars: usize,
    pub freshness_report_below: f64,
    pub near_duplicate_cosine: f64,
    pub healed_description_chars: usize,
    /// The type `heal_frontmatter` gives a note in the inbox folder (which implies no type):
    /// a quick Obsidian note there becomes valid. Empty: such notes stay refused.
    pub heal_inbox_type: String,
    /// rot_audit link checks (allow_link_rot + approved + egress allow-public).
    pub link_rot_timeout_ms: u64,
    pub link_rot_max_redirects: usize,
    pub link_rot_max_links: usize,
    /// Items per list of a maintenance report an agent receives, unless it asks for fewer
    /// (`max_items`), and the most it may ask for; totals stay exact and `truncated` says so.
    pub report_items_default: usize,
    pub report_items_max: usize,
}

/// Expected sha256 (lowercase hex) of each model file the engine reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelFileHashes {
    #[serde(rename = "model.safetensors")]
    pub model_safetensors: String,
    #[serde(rename = "tokenizer.json")]
    pub tokenizer_json: String,
    #[serde(rename = "config.json")]
    pub config_json: String,
}

impl ModelFileHashes {
    /// (file name in the model folder, expected sha256), in the order they are checked.
    pub fn files(&self) -> [(&'static str, &str); 3] {
        [("config.json", &self.config_json), ("tokenizer.json", &self.tokenizer_json), ("model.safetensors", &self.model_safetensors)]
    }
}

/// The cross-encoder of `search_mode=reranked`: which one, pinned how, and its budget.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RerankerPolicy {
    /// Hugging Face repository, `owner/name`.
    pub repo: String,
    /// The repository commit (40 hex digits).
    pub revision: String,
    /// Token cut of each (query, passage) pair, the passage cut first.
    pub max_tokens: usize,
    /// How many fused candidates are reranked (the rest follow in fused order).
    pub candidates: usize,
    /// Pairs per inference batch.
    pub batch_size: usize,
    /// Wall-clock budget of the reranking; past it the fused order is returned, with the reason.
    pub time_budget_ms: u64,
    /// Inference threads; the RAYON_NUM_THREADS environment variable, when set, wins.
    pub threads: usize,
    /// Explicit model folder; empty means none.
    pub local_dir: String,
    /// sha256 of every file; an empty hash means the model is not pinned and reranked fails closed.
    pub sha256: ModelFileHashes,
}

/// The dense embedding model: which one, pinned how, and how it runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingPolicy {
    /// Hugging Face repository, `owner/name`.
    pub repo: String,
    /// The repository commit (40 hex digits).
    pub revision: String,
    pub dimension: usize,
    pub max_tokens: usize,
    pub batch_size: usize,
    pub threads: usize,
    /// The arithmetic of the dense layers' products: `f32`, or `int8` weights and activations
    /// (docs/embedding.md). Part of the model's identity: a dense index is never shared by
    /// vectors of two precisions.
    pub precision: EmbeddingPrecision,
    /// Explicit model folder; empty means none.
    pub local_dir: String,
    pub sha256: ModelFileHashes,
}

/// `embedding.precision`: how the encoder's dense layers multiply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingPrecision {
    /// f32 weights and activations: the model's own arithmetic.
    #[default]
    F32,
    /// The dense layers' weights quantised to 8 bits in blocks of 32 (GGML Q8_0), their inputs
    /// quantised on the fly, products accumulated in integers (candle's quantised matmul).
    Int8,
}

impl EmbeddingPrecision {
    pub fn is_f32(&self) -> bool {
        *self == EmbeddingPrecision::F32
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EmbeddingPrecision::F32 => "f32",
            EmbeddingPrecision::Int8 => "int8",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Egress {
    #[default]
    None,
    ModelDownload,
    Network,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    #[default]
    None,
    Caller,
    Explicit,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolRisk {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub egress: Egress,
    pub approval: Approval,
    /// A tool that is not read-only but is still served under `--read-only` without these
    /// parameters (vaultspec's `check` without `fix`); empty: not served read-only.
    pub read_only_omits: Vec<String>,
}

/// Whether the engine may reach the network (model downloads only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub enum EgressPolicy {
    /// No network access.
    #[default]
    #[serde(rename = "deny")]
    Deny,
    /// Public model downloads are allowed.
    #[serde(rename = "allow-public")]
    AllowPublic,
}

/// Bounds of `handoff_work` work packets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffPolicy {
    pub objective_chars_max: usize,
    pub text_chars_max: usize,
    pub scope_items_max: usize,
    pub list_items_max: usize,
    pub item_chars_max: usize,
    pub list_tasks_max: usize,
}

/// Project goals (stepstone's worklist; `crate::goals`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GoalsPolicy {
    /// The vault's worklist note (vault-relative, inside a P.A.R.A. folder).
    pub worklist_path: String,
    pub title_chars_max: usize,
    pub description_chars_max: usize,
    pub group_chars_max: usize,
    /// Entries of `dependsOn` and of `links` per goal.
    pub list_items_max: usize,
    pub link_chars_max: usize,
    pub plan_entries_max: usize,
    pub goals_max: usize,
}

/// Replication over git (`paravault replicate`, docs/replication.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplicationPolicy {
    /// The longest a git fetch, ls-remote or push may run before it is stopped and the run fails
    /// with `replication_failed` (a partition never hangs `replicate`).
    pub network_timeout_s: u64,
    /// Long-running processes (`paravault mcp`, `paravault watch`) of a replica run
    /// `replicate` every this many seconds (at least 5); null (the default) = only when asked.
    pub interval_s: Option<u64>,
}

/// The INFRA-1 broker client (`infra_action`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InfraPolicy {
    /// Unix-domain socket of the local broker; null = use `PARAVAULT_INFRA_SOCKET`, else absent.
    pub broker_socket: Option<String>,
    /// The uid the broker must run as (the socket's peer credentials, checked before the
    /// request is sent); null = the uid this process runs as (`paravault broker` runs as the
    /// vault's owner).
    pub broker_uid: Option<u32>,
    pub timeout_ms: u64,
    pub response_bytes_max: usize,
}

/// Folders of agent memory notes (vault-relative; each under a P.A.R.A. or extra-scope folder)
/// and the note type each kind is written as.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentMemoryPolicy {
    pub episodes_folder: String,
    pub episode_note_type: String,
    pub skills_folder: String,
    pub skill_note_type: String,
    pub documents_folder: String,
    pub document_note_type: String,
    /// Most episodes one query_episodes call returns.
    pub episodes_limit_max: usize,
}

/// Who approves governed operations (`approvals:`; src/approvals, docs/governance.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsPolicy {
    /// Ordered rules; for each path the first rule naming the operation and matching decides.
    pub rules: Vec<ApprovalRule>,
    /// The `paravault web` address people review proposals at (e.g. `http://127.0.0.1:8742`):
    /// set, an agent's `human_approval_required` carries `<review_url>/proposals/<id>`.
    pub review_url: Option<String>,
}

/// One `approvals.rules` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// `apply`, `archive`, `heal`, `markdown_fix`, `goals_complete`, `goals_reopen`,
    /// `goals_archive`, `goals_delete`, `link_rot`, `infra_replicate` (`approvals::Operation`).
    pub operations: Vec<String>,
    /// Glob patterns over vault paths (`*` stays inside one folder, `**` crosses folders);
    /// empty = every path.
    #[serde(default)]
    pub paths: Vec<String>,
    pub approver: Approver,
}

/// Who may approve: the caller (`approved=true`) or a person with an approver secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Approver {
    Caller,
    Human,
}

/// The whole policy, after merging the default with a vault override.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    pub schema_version: u32,
    pub layout: Layout,
    pub note_types: BTreeMap<String, NoteTypePolicy>,
    pub default_half_life_days: f64,
    pub metadata: MetadataPolicy,
    pub lint: LintPolicy,
    pub limits: Limits,
    pub search: SearchPolicy,
    pub maintenance: MaintenancePolicy,
    pub embedding: EmbeddingPolicy,
    pub reranker: RerankerPolicy,
    pub rate_limits: BTreeMap<String, u32>,
    /// Tools charged to another tool's rate limit (tool → the tool whose limit it shares).
    pub rate_limit_shared: BTreeMap<String, String>,
    pub tools: BTreeMap<String, ToolRisk>,
    pub approval_required: Vec<String>,
    pub approvals: ApprovalsPolicy,
    pub egress: EgressPolicy,
    pub handoff: HandoffPolicy,
    pub infra: InfraPolicy,
    pub replication: ReplicationPolicy,
    /// Where agent memory (ctxvault's episodes, skills and documents) lives (docs/memory.md).
    pub agent_memory: AgentMemoryPolicy,
    pub goals: GoalsPolicy,
    /// Named search domains (merged with `.power/domains.yaml`; see `domains`).
    pub domains: Vec<domains::Domain>,
    /// vaultspec decision documents: where each document type lives (`specdocs`).
    pub specdocs: specdocs::SpecdocsPolicy,
}

/// The lint rules the engine implements; a policy may weigh them but not invent others.
pub(crate) const KNOWN_LINT_RULES: &[&str] = &[
    "utf8-bom",
    "metadata-missing",
    "metadata-invalid",
    "note-too-large",
    "note-unreadable",
    "symlinked-note",
    "unusable-name",
    "broken-link",
    "ambiguous-link",
    "orphan",
    "stale",
    "trailing-whitespace",
    "inconsistent-list-markers",
    "header-jump",
    "missing-code-language",
    "goals-worklist-invalid",
];

/// Where the effective policy came from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PolicySource {
    /// The built-in default policy the override layers on.
    pub default: &'static str,
    /// The vault's policy override file, vault-relative (null without one).
    pub override_file: Option<String>,
}

/// The policy's `root_daily_log_pattern`, compiled on its first use: a command that meets no
/// Markdown file at the vault root besides its index and log never pays the compile (about
/// 0.7 ms and 1 MB of every CLI command, `\d` being a Unicode class). Its syntax is checked at
/// every load; a policy typed from its texts has it compiled at load too, so a pattern past the
/// regex size limit is refused there and never kept (`layout::POLICY_CACHE`).
#[derive(Debug, Clone)]
pub struct RootDailyLog {
    pattern: String,
    compiled: std::sync::OnceLock<Option<regex::Regex>>,
}

impl RootDailyLog {
    /// Whether a file name at the vault root is a daily log.
    pub fn is_match(&self, name: &str) -> bool {
        let compiled = self.compiled.get_or_init(|| match regex::Regex::new(&self.pattern) {
            Ok(regex) => Some(regex),
            // Only a kept parse edited by hand to a pattern past the size limit gets here.
            Err(error) => {
                tracing::error!(%error, "root_daily_log_pattern does not compile; no root file is a daily log");
                None
            }
        });
        compiled.as_ref().is_some_and(|regex| regex.is_match(name))
    }

    /// The pattern as the policy states it.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }
}

/// A loaded, validated policy plus compiled helpers.
#[derive(Debug, Clone)]
pub struct LoadedPolicy {
    pub policy: Policy,
    pub source: PolicySource,
    pub root_daily_log: RootDailyLog,
    /// blake3 of the policy texts it was built from (default, then override): what derived
    /// state such as the persisted inventory must have been computed under.
    pub digest: [u8; 32],
}

/// blake3 of the policy texts (the default, then the override): what derived state must have
/// been computed under.
fn texts_digest(override_text: Option<&str>) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(DEFAULT_POLICY_YAML.as_bytes());
    if let Some(text) = override_text {
        hasher.update(b"\0override\0");
        hasher.update(text.as_bytes());
    }
    *hasher.finalize().as_bytes()
}

/// The kept parse (`layout::POLICY_CACHE`): the typed policy and what it was parsed from, in
/// postcard behind a blake3 checksum of those bytes (`store::checksummed`: a copy edited or
/// damaged by hand is parsed again, never used). Postcard, not JSON: the JSON copy was two parses (the policy was a
/// string inside it), a third of a one-note CLI write's opening.
/// (`P`: the policy, or a borrow of it when it is written.)
#[derive(Serialize, Deserialize)]
struct ParsedPolicy<P = Policy> {
    engine: String,
    /// `texts_digest`.
    digest: [u8; 32],
    policy: P,
}

impl<P: Serialize> ParsedPolicy<P> {
    fn encode(&self) -> Option<Vec<u8>> {
        crate::store::checksummed::encode(self)
    }
}

impl ParsedPolicy {
    fn decode(bytes: &[u8]) -> Option<Self> {
        crate::store::checksummed::decode(bytes).ok()
    }
}

fn line_of_key(text: &str, key: &str) -> usize {
    text.lines().position(|l| l.trim_start().starts_with(&format!("{key}:"))).map_or(1, |i| i + 1)
}

fn parse_layer(text: &str, file: &str) -> Result<(Value, Policy)> {
    let invalid = |line, reason: String| Error::PolicyInvalid { file: file.to_string(), line, reason };
    let value: Value = serde_yaml::from_str(text).map_err(|e| invalid(e.location().map_or(1, |l| l.line()), e.to_string()))?;
    let value = match value {
        Value::Null => Value::Mapping(Default::default()),
        Value::Mapping(m) => Value::Mapping(m),
        _ => return Err(invalid(1, "a policy file must be a mapping".into())),
    };
    // Type-check this layer on its own so errors point at its own lines.
    let typed: Policy = serde_yaml::from_str(text).map_err(|e| invalid(e.location().map_or(1, |l| l.line()), strip_location(&e)))?;
    Ok((value, typed))
}

/// The default policy typed from its text (the same checks as a layer's, without the YAML
/// value a merge needs).
fn parse_default() -> Result<Policy> {
    serde_yaml::from_str(DEFAULT_POLICY_YAML).map_err(|e| Error::PolicyInvalid {
        file: DEFAULT_POLICY_NAME.to_string(),
        line: e.location().map_or(1, |l| l.line()),
        reason: strip_location(&e),
    })
}

fn strip_location(error: &serde_yaml::Error) -> String {
    let text = error.to_string();
    text.find(" at line ").map_or(text.clone(), |i| text[..i].to_string())
}

fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(base), Value::Mapping(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

impl LoadedPolicy {
    /// Loads the default policy merged with `<vault>/.paravault/policy.yaml` when it exists.
    /// The typed result is kept beside them (`layout::POLICY_CACHE`, postcard) and reused while the
    /// engine and both texts are the same (blake3): typing the YAML was about 1 ms of every
    /// command. The reused policy is validated again like a parsed one.
    pub fn load(vault_root: &Path) -> Result<Self> {
        use crate::store::{durable, layout};
        let override_path = layout::join(vault_root, layout::POLICY_OVERRIDE);
        let override_text = match durable::read_engine_file(vault_root, &override_path) {
            Ok(bytes) => Some(
                String::from_utf8(bytes)
                    .map_err(|e| Error::io("reading", layout::POLICY_OVERRIDE, std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("reading", layout::POLICY_OVERRIDE, e)),
        };
        let digest = texts_digest(override_text.as_deref());
        let cache = layout::join(vault_root, layout::POLICY_CACHE);
        let cached = durable::read_engine_file(vault_root, &cache)
            .ok()
            .and_then(|bytes| ParsedPolicy::decode(&bytes))
            .filter(|parsed| parsed.engine == env!("CARGO_PKG_VERSION") && parsed.digest == digest);
        if let Some(parsed) = cached {
            return Self::validated(parsed.policy, override_text.as_deref(), digest, Compile::OnFirstUse);
        }
        let loaded = Self::from_texts(override_text.as_deref())?;
        // A cache: a failure to keep it only costs the next command a parse. Only kept in a
        // vault that has its state folder already (opening a folder never creates one).
        let state_dir = std::fs::symlink_metadata(layout::join(vault_root, layout::STATE_DIR)).is_ok_and(|m| m.is_dir());
        if state_dir
            && let Some(bytes) = (ParsedPolicy { engine: env!("CARGO_PKG_VERSION").to_string(), digest, policy: &loaded.policy }).encode()
        {
            let kept = durable::write_cache(vault_root, &cache, &bytes)
                // An earlier engine's JSON copy goes once this one is kept (it is never read).
                .and_then(|()| durable::remove_unsynced(vault_root, &layout::join(vault_root, layout::RETIRED_POLICY_CACHE)));
            if let Err(error) = kept {
                tracing::debug!(%error, "could not keep the parsed policy");
            }
        }
        Ok(loaded)
    }

    /// Builds the policy from the embedded default and optional override text.
    pub fn from_texts(override_text: Option<&str>) -> Result<Self> {
        let policy = match override_text {
            // Layers are merged as YAML values, then typed once.
            Some(text) => {
                let (mut merged, _) = parse_layer(DEFAULT_POLICY_YAML, DEFAULT_POLICY_NAME)?;
                let (over, _) = parse_layer(text, crate::store::layout::POLICY_OVERRIDE)?;
                merge(&mut merged, over);
                serde_yaml::from_value(merged).map_err(|e| Error::PolicyInvalid {
                    file: crate::store::layout::POLICY_OVERRIDE.to_string(),
                    line: 1,
                    reason: e.to_string(),
                })?
            }
            // The default alone is typed straight from its text: one parse, not three.
            None => parse_default()?,
        };
        Self::validated(policy, override_text, texts_digest(override_text), Compile::Now)
    }

    /// The policy typed from `override_text` (or the default alone), checked.
    fn validated(policy: Policy, override_text: Option<&str>, digest: [u8; 32], compile: Compile) -> Result<Self> {
        let (file, text) = match override_text {
            Some(text) => (crate::store::layout::POLICY_OVERRIDE, text),
            None => (DEFAULT_POLICY_NAME, DEFAULT_POLICY_YAML),
        };
        validate(&policy, file, text)?;
        let pattern = &policy.layout.root_daily_log_pattern;
        let compiled = std::sync::OnceLock::new();
        if compile == Compile::Now {
            let regex = regex::Regex::new(pattern).map_err(|e| Error::PolicyInvalid {
                file: file.to_string(),
                line: line_of_key(text, "root_daily_log_pattern"),
                reason: format!("invalid pattern: {e}"),
            })?;
            let _ = compiled.set(Some(regex));
        }
        let root_daily_log = RootDailyLog { pattern: pattern.clone(), compiled };
        Ok(LoadedPolicy {
            policy,
            source: PolicySource {
                default: DEFAULT_POLICY_NAME,
                override_file: override_text.map(|_| crate::store::layout::POLICY_OVERRIDE.to_string()),
            },
            root_daily_log,
            digest,
        })
    }

    /// The severity of a lint rule (rules are validated at load, so every known rule has one).
    pub fn severity(&self, rule: &str) -> Severity {
        self.policy.lint.rules.get(rule).copied().unwrap_or(Severity::Blocking)
    }

    /// Folders whose notes are in scope (P.A.R.A. plus extras).
    pub(crate) fn scope_folders(&self) -> impl Iterator<Item = &String> {
        self.policy.layout.para_folders.iter().chain(&self.policy.layout.extra_scope_folders)
    }

    /// Folders that get catalogs.
    pub(crate) fn catalog_folders(&self) -> impl Iterator<Item = &String> {
        self.policy.layout.catalog_categories.iter().chain(&self.policy.layout.catalog_extra_folders)
    }

    pub(crate) fn half_life_days(&self, note_type: &str) -> f64 {
        self.policy.note_types.get(note_type).map_or(self.policy.default_half_life_days, |t| t.half_life_days)
    }
}

/// When `LoadedPolicy::validated` compiles the root daily-log pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compile {
    /// At load (a policy typed from its texts): a pattern past the size limit is refused.
    Now,
    /// On its first use (the kept parse of texts that compiled when they were typed).
    OnFirstUse,
}

fn validate(policy: &Policy, file: &str, text: &str) -> Result<()> {
    let invalid = |key: &str, reason: String| Error::PolicyInvalid { file: file.to_string(), line: line_of_key(text, key), reason };
    if policy.schema_version != 1 {
        return Err(invalid("schema_version", format!("schema_version {} is not supported (expected 1)", policy.schema_version)));
    }
    for rule in policy.lint.rules.keys() {
        if !KNOWN_LINT_RULES.contains(&rule.as_str()) {
            return Err(invalid(rule, format!("unknown lint rule '{rule}' (known: {})", KNOWN_LINT_RULES.join(", "))));
        }
    }
    for rule in KNOWN_LINT_RULES {
        if !policy.lint.rules.contains_key(*rule) {
            return Err(invalid("rules", format!("lint rule '{rule}' has no severity")));
        }
    }
    if policy.layout.para_folders.is_empty() {
        return Err(invalid("para_folders", "at least one P.A.R.A. folder is required".into()));
    }
    let known_folder = |f: &String| policy.layout.para_folders.contains(f) || policy.layout.extra_scope_folders.contains(f);
    for (name, note_type) in &policy.note_types {
        if !known_folder(&note_type.folder) {
            return Err(invalid("folder", format!("note type '{name}' names folder '{}', which is not a scope folder", note_type.folder)));
        }
        if note_type.half_life_days.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return Err(invalid("half_life_days", format!("note type '{name}' needs a positive half_life_days")));
        }
    }
    for category in &policy.layout.catalog_categories {
        if !policy.layout.para_folders.contains(category) {
            return Err(invalid("catalog_categories", format!("catalog category '{category}' is not a P.A.R.A. folder")));
        }
    }
    if !policy.metadata.required_fields.iter().any(|f| f == "type") {
        return Err(invalid("required_fields", "required_fields must include 'type'".into()));
    }
    if policy.limits.catalog_page_bytes_max < 4096 {
        return Err(invalid("catalog_page_bytes_max", "catalog_page_bytes_max must be at least 4096".into()));
    }
    if policy.limits.note_bytes_max == 0 || policy.limits.title_chars_max == 0 {
        return Err(invalid("limits", "limits must be positive".into()));
    }
    let m = &policy.maintenance;
    for (key, value) in [
        ("redundant_title_jaccard", m.redundant_title_jaccard),
        ("near_duplicate_cosine", m.near_duplicate_cosine),
        ("freshness_report_below", m.freshness_report_below),
    ] {
        if !(0.0..=1.0).contains(&value) || value == 0.0 {
            return Err(invalid(key, format!("{key} must be in (0, 1]")));
        }
    }
    if policy.search.generations_kept == 0 {
        return Err(invalid("generations_kept", "generations_kept must be at least 1".into()));
    }
    let b = &policy.search.boosts;
    for (name, value) in [("title", b.title), ("tags", b.tags), ("description", b.description), ("section", b.section), ("body", b.body)] {
        if !(value.is_finite() && (0.0..=100.0).contains(&value)) {
            return Err(invalid("boosts", format!("search boost '{name}' must be a number in [0, 100], found {value}")));
        }
    }
    if b.body <= 0.0 {
        return Err(invalid("boosts", "search boost 'body' must be positive".into()));
    }
    if !(policy.search.bm25_k1.is_finite() && (0.0..=10.0).contains(&policy.search.bm25_k1)) {
        return Err(invalid("bm25_k1", format!("search.bm25_k1 must be a number in [0, 10], found {}", policy.search.bm25_k1)));
    }
    if !(policy.search.bm25_b.is_finite() && (0.0..=1.0).contains(&policy.search.bm25_b)) {
        return Err(invalid("bm25_b", format!("search.bm25_b must be a number in [0, 1], found {}", policy.search.bm25_b)));
    }
    if !matches!(policy.search.bm25_lengths.as_str(), "exact" | "quantised") {
        return Err(invalid(
            "bm25_lengths",
            format!("search.bm25_lengths must be exact or quantised, found '{}'", policy.search.bm25_lengths),
        ));
    }
    if !(16..=100_000).contains(&policy.search.query_chars_max) {
        return Err(invalid("query_chars_max", "search.query_chars_max must be 16-100000".into()));
    }
    if policy.search.chunk_min_words == 0 {
        return Err(invalid("chunk_min_words", "chunk_min_words must be at least 1".into()));
    }
    if !(1..=100).contains(&policy.search.max_results_cap) {
        return Err(invalid("max_results_cap", "max_results_cap must be in 1..=100".into()));
    }
    if !matches!(policy.search.auto_dense_mode.as_str(), "semantic" | "hybrid" | "graph_assisted") {
        return Err(invalid("auto_dense_mode", "search.auto_dense_mode must be semantic, hybrid or graph_assisted".into()));
    }
    let m = &policy.maintenance;
    if !m.heal_inbox_type.is_empty() && !policy.note_types.contains_key(&m.heal_inbox_type) {
        return Err(invalid("heal_inbox_type", format!("maintenance.heal_inbox_type '{}' is not a note type", m.heal_inbox_type)));
    }
    if !(100..=60_000).contains(&m.link_rot_timeout_ms) || m.link_rot_max_redirects > 10 || !(1..=10_000).contains(&m.link_rot_max_links) {
        return Err(invalid(
            "link_rot_timeout_ms",
            "maintenance.link_rot_timeout_ms must be 100-60000, link_rot_max_redirects 0-10, link_rot_max_links 1-10000".into(),
        ));
    }
    if !(10..=1000).contains(&policy.search.fusion_depth) {
        return Err(invalid("fusion_depth", "search.fusion_depth must be between 10 and 1000".into()));
    }
    if policy.search.graph_hops > 2 || !(0.0..=1.0).contains(&policy.search.graph_decay) {
        return Err(invalid("graph_hops", "search.graph_hops must be 0-2 and search.graph_decay within 0-1".into()));
    }
    if !(1..=1024).contains(&policy.search.tail_writes_max) {
        return Err(invalid("tail_writes_max", "search.tail_writes_max must be 1-1024".into()));
    }
    if policy.search.max_segments < 2 {
        return Err(invalid("max_segments", "max_segments must be at least 2".into()));
    }
    for (tool, per_minute) in &policy.rate_limits {
        if *per_minute == 0 {
            return Err(invalid(tool, format!("rate limit for '{tool}' must be at least 1 per minute")));
        }
    }
    if policy.limits.report_findings_max == 0 {
        return Err(invalid("report_findings_max", "limits.report_findings_max must be at least 1".into()));
    }
    for (tool, bucket) in &policy.rate_limit_shared {
        if !policy.rate_limits.contains_key(bucket) {
            return Err(invalid(tool, format!("rate_limit_shared: '{tool}' shares '{bucket}', which has no rate limit")));
        }
    }
    let (h, g) = (&policy.handoff, &policy.goals);
    let positive = [
        ("handoff", "objective_chars_max", h.objective_chars_max),
        ("handoff", "text_chars_max", h.text_chars_max),
        ("handoff", "scope_items_max", h.scope_items_max),
        ("handoff", "list_items_max", h.list_items_max),
        ("handoff", "item_chars_max", h.item_chars_max),
        ("handoff", "list_tasks_max", h.list_tasks_max),
        ("goals", "title_chars_max", g.title_chars_max),
        ("goals", "description_chars_max", g.description_chars_max),
        ("goals", "group_chars_max", g.group_chars_max),
        ("goals", "list_items_max", g.list_items_max),
        ("goals", "link_chars_max", g.link_chars_max),
        ("goals", "plan_entries_max", g.plan_entries_max),
        ("goals", "goals_max", g.goals_max),
    ];
    if let Some((section, key, _)) = positive.into_iter().find(|(_, _, value)| *value == 0) {
        return Err(invalid(key, format!("{section}.{key} must be at least 1")));
    }
    // The shape only (policy sits below `note`): the goals service parses it as a `VaultPath`
    // before every use, which refuses anything else a path can carry.
    let worklist = Path::new(&g.worklist_path);
    let relative = !worklist.is_absolute() && worklist.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    if !relative || !g.worklist_path.ends_with(".md") {
        return Err(invalid("worklist_path", "goals.worklist_path must be a vault-relative Markdown path".into()));
    }
    if policy.replication.interval_s.is_some_and(|s| !(5..=86_400).contains(&s)) {
        return Err(invalid("interval_s", "replication.interval_s must be null (off) or between 5 and 86400 seconds".into()));
    }
    if policy.infra.timeout_ms == 0 || policy.infra.timeout_ms > 600_000 {
        return Err(invalid("timeout_ms", "infra.timeout_ms must be between 1 and 600000".into()));
    }
    if !(1024..=1_048_576).contains(&policy.infra.response_bytes_max) {
        return Err(invalid("response_bytes_max", "infra.response_bytes_max must be between 1024 and 1048576".into()));
    }
    if let Some(socket) = &policy.infra.broker_socket
        && (socket.is_empty() || !Path::new(socket).is_absolute())
    {
        return Err(invalid("broker_socket", "infra.broker_socket must be an absolute path or null".into()));
    }
    approvals::validate_rules(&policy.approvals).map_err(|reason| invalid("approvals", reason))?;
    validate_embedding(&policy.embedding, &invalid)?;
    validate_reranker(&policy.reranker, &invalid)?;
    // The syntax only (cheap); the compile is `LoadedPolicy::validated`'s.
    regex_syntax::Parser::new()
        .parse(&policy.layout.root_daily_log_pattern)
        .map(drop)
        .map_err(|e| invalid("root_daily_log_pattern", format!("invalid pattern: {}", regex::Error::Syntax(e.to_string()))))
}

/// The largest token cut the supported BERT models accept (their position-embedding table).
const EMBEDDING_MAX_TOKENS_LIMIT: usize = 512;

/// A model pinned on the Hugging Face hub: `repo` is `owner/name`, `revision` a commit hash.
fn validate_pinned_model(section: &str, repo: &str, revision: &str, invalid: &dyn Fn(&str, String) -> Error) -> Result<()> {
    let mut parts = repo.split('/');
    let repo_ok = matches!((parts.next(), parts.next(), parts.next()), (Some(owner), Some(name), None) if !owner.is_empty() && !name.is_empty())
        && !repo.contains("..")
        && repo.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    if !repo_ok {
        return Err(invalid("repo", format!("{section}.repo '{repo}' must be a Hugging Face repository 'owner/name'")));
    }
    if !hex::is_lower_hex(revision, 40) {
        return Err(invalid("revision", format!("{section}.revision '{revision}' must be a commit hash (40 lowercase hex digits)")));
    }
    Ok(())
}

fn validate_embedding(e: &EmbeddingPolicy, invalid: &dyn Fn(&str, String) -> Error) -> Result<()> {
    validate_pinned_model("embedding", &e.repo, &e.revision, invalid)?;
    if e.dimension != EMBEDDING_DIMENSION {
        return Err(invalid(
            "dimension",
            format!("embedding.dimension {} is not supported (this engine embeds {})", e.dimension, EMBEDDING_DIMENSION),
        ));
    }
    if e.max_tokens == 0 || e.max_tokens > EMBEDDING_MAX_TOKENS_LIMIT {
        return Err(invalid("max_tokens", format!("embedding.max_tokens must be in 1..={EMBEDDING_MAX_TOKENS_LIMIT}")));
    }
    if e.batch_size == 0 {
        return Err(invalid("batch_size", "embedding.batch_size must be at least 1".into()));
    }
    if e.threads == 0 {
        return Err(invalid("threads", "embedding.threads must be at least 1".into()));
    }
    for (file, hash) in e.sha256.files() {
        if !hex::is_lower_hex(hash, 64) {
            return Err(invalid(file, format!("embedding.sha256 of {file} must be 64 lowercase hex digits")));
        }
    }
    Ok(())
}

fn validate_reranker(r: &RerankerPolicy, invalid: &dyn Fn(&str, String) -> Error) -> Result<()> {
    validate_pinned_model("reranker", &r.repo, &r.revision, invalid)?;
    if r.max_tokens < 8 || r.max_tokens > EMBEDDING_MAX_TOKENS_LIMIT {
        return Err(invalid("max_tokens", format!("reranker.max_tokens must be in 8..={EMBEDDING_MAX_TOKENS_LIMIT}")));
    }
    if !(1..=100).contains(&r.candidates) || r.batch_size == 0 || r.threads == 0 {
        return Err(invalid("candidates", "reranker.candidates must be 1-100, batch_size and threads at least 1".into()));
    }
    if r.time_budget_ms > 60_000 {
        return Err(invalid("time_budget_ms", "reranker.time_budget_ms must be at most 60000".into()));
    }
    for (file, hash) in r.sha256.files() {
        if !hash.is_empty() && !hex::is_lower_hex(hash, 64) {
            return Err(invalid(file, format!("reranker.sha256 of {file} must be empty (not pinned) or 64 lowercase hex digits")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
