//! Dense text embeddings: all-MiniLM-L6-v2 (BERT) on candle, resolved and verified under policy.
//!
//! - `resolve` — where the model files come from (explicit folder → Hugging Face cache → a
//!   download only when the policy's egress is `allow-public`) and their sha256 check.
//! - `minilm`  — the model itself: tokenise (256-token cut, pad to the longest in the batch),
//!   BERT forward, mean pooling over the attention mask, L2 normalisation.
//! - `cross_encoder` — the reranker (a BERT sequence classifier) on the same kernels.
//! - `ModelHandle` (here) — the lazily loaded, process-shared model a vault holds, and the
//!   `describe()` the doctor report shows.
//!
//! A search generation records the `ModelId` its vectors were made with; vectors from another
//! `ModelId` are never mixed with them.

mod bert;
pub mod cross_encoder;
mod minilm;
pub(crate) mod remembered;
mod resolve;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use minilm::MiniLm;
pub use resolve::{ModelSource, VerifiedModel, resolve};

use crate::error::Result;
pub use crate::policy::EmbeddingPrecision;
use crate::policy::{EgressPolicy, ModelFileHashes, Policy};

/// The width of every vector this engine produces (all-MiniLM-L6-v2's hidden size); policy
/// validates `embedding.dimension` against the same constant.
pub const DIMENSION: usize = crate::policy::EMBEDDING_DIMENSION;

/// One embedding: unit length (L2), `DIMENSION` wide.
pub(crate) type Vector = [f32; DIMENSION];

/// Which model made a vector: what a search generation's manifest records.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelId {
    /// Hugging Face repository, `owner/name`.
    pub repo: String,
    /// The repository commit the files belong to.
    pub revision: String,
    /// The length of its vectors.
    pub dimension: usize,
    /// The arithmetic of its dense layers (`embedding.precision`). Absent from a manifest (one
    /// written before the key existed, or any f32 one) means f32.
    #[serde(default, skip_serializing_if = "EmbeddingPrecision::is_f32")]
    pub precision: EmbeddingPrecision,
}

impl std::fmt::Display for ModelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.repo, &self.revision[..self.revision.len().min(12)])?;
        if !self.precision.is_f32() {
            write!(f, " ({})", self.precision.as_str())?;
        }
        Ok(())
    }
}

/// The process environment the model resolution reads, captured once so that tests (and
/// embedders of the library) can pass their own without touching the process environment.
#[derive(Debug, Clone, Default)]
pub struct ModelEnv {
    /// `PARAVAULT_MODEL_DIR`: an explicit model folder.
    pub model_dir: Option<PathBuf>,
    /// `HF_HUB_CACHE`: the Hugging Face hub cache folder itself.
    pub hf_hub_cache: Option<PathBuf>,
    /// `HF_HOME`: its `hub/` subfolder is the cache.
    pub hf_home: Option<PathBuf>,
    /// `HOME`: `~/.cache/huggingface/hub` is the cache when neither of the above is set.
    pub home: Option<PathBuf>,
    /// `HF_ENDPOINT`: the hub to download from (only ever contacted under `allow-public`).
    pub hf_endpoint: Option<String>,
    /// `RAYON_NUM_THREADS`: when set, it wins over the policy's `embedding.threads`.
    pub rayon_num_threads: Option<usize>,
    /// The per-user configuration folder (`user_config::config_dir`): its `models.json` names
    /// where an earlier dense sync found each model (`remembered`).
    pub config_dir: Option<PathBuf>,
}

impl ModelEnv {
    /// Reads the variables from the process environment (empty values count as unset).
    pub(crate) fn from_process() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        ModelEnv {
            model_dir: var("PARAVAULT_MODEL_DIR").map(PathBuf::from),
            hf_hub_cache: var("HF_HUB_CACHE").map(PathBuf::from),
            hf_home: var("HF_HOME").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
            hf_endpoint: var("HF_ENDPOINT").and_then(|v| v.into_string().ok()),
            rayon_num_threads: var("RAYON_NUM_THREADS").and_then(|v| v.to_str()?.trim().parse().ok()).filter(|n| *n > 0),
            config_dir: crate::user_config::config_dir().ok(),
        }
    }
}

/// The default hub a download goes to.
pub(crate) const DEFAULT_HF_ENDPOINT: &str = "https://huggingface.co";

/// Where the inference thread count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadsSource {
    Policy,
    RayonNumThreads,
}

/// Everything the embedding needs, from the policy and the environment. Building it touches
/// neither the disk nor the network.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The policy section the model comes from: `embedding` or `reranker` (named in errors).
    pub section: &'static str,
    pub id: ModelId,
    pub max_tokens: usize,
    pub batch_size: usize,
    pub threads: usize,
    pub threads_source: ThreadsSource,
    pub hashes: ModelFileHashes,
    /// The policy's `embedding.local_dir`, resolved against the vault root.
    pub policy_dir: Option<PathBuf>,
    /// `PARAVAULT_MODEL_DIR`.
    pub env_dir: Option<PathBuf>,
    /// The Hugging Face hub cache folder (holds `models--owner--name/`).
    pub hf_cache: Option<PathBuf>,
    pub hf_endpoint: String,
    pub egress: EgressPolicy,
    /// The per-user `models.json` (`remembered`): where an earlier dense sync found the model.
    pub remembered_file: Option<PathBuf>,
}

impl ModelConfig {
    /// The configuration a vault at `vault_root` (for a relative `local_dir`) gets.
    pub fn from_policy(policy: &Policy, vault_root: Option<&Path>, env: &ModelEnv) -> Self {
        let e = &policy.embedding;
        let section = ModelSection {
            name: "embedding",
            id: ModelId { repo: e.repo.clone(), revision: e.revision.clone(), dimension: e.dimension, precision: e.precision },
            max_tokens: e.max_tokens,
            batch_size: e.batch_size,
            threads: e.threads,
            local_dir: &e.local_dir,
            hashes: &e.sha256,
            env_dir: env.model_dir.clone(),
        };
        Self::of_section(section, policy, vault_root, env)
    }

    /// The resolution every model section shares: its folder (relative to the vault), the
    /// Hugging Face cache, threads (`RAYON_NUM_THREADS` wins), endpoint and egress.
    pub(crate) fn of_section(section: ModelSection<'_>, policy: &Policy, vault_root: Option<&Path>, env: &ModelEnv) -> Self {
        let policy_dir = (!section.local_dir.trim().is_empty()).then(|| {
            let dir = PathBuf::from(section.local_dir.trim());
            match vault_root {
                Some(root) if dir.is_relative() => root.join(dir),
                _ => dir,
            }
        });
        let hf_cache = env
            .hf_hub_cache
            .clone()
            .or_else(|| env.hf_home.as_ref().map(|h| h.join("hub")))
            .or_else(|| env.home.as_ref().map(|h| h.join(".cache").join("huggingface").join("hub")));
        let (threads, threads_source) = match env.rayon_num_threads {
            Some(n) => (n, ThreadsSource::RayonNumThreads),
            None => (section.threads, ThreadsSource::Policy),
        };
        ModelConfig {
            section: section.name,
            id: section.id,
            max_tokens: section.max_tokens,
            batch_size: section.batch_size,
            threads,
            threads_source,
            hashes: section.hashes.clone(),
            policy_dir,
            env_dir: section.env_dir,
            hf_cache,
            hf_endpoint: env.hf_endpoint.clone().unwrap_or_else(|| DEFAULT_HF_ENDPOINT.to_string()),
            egress: policy.egress,
            remembered_file: env.config_dir.as_ref().map(|d| d.join(remembered::FILE)),
        }
    }
}

/// What one model section of the policy (`embedding:`, `reranker:`) names.
pub(crate) struct ModelSection<'p> {
    pub name: &'static str,
    pub id: ModelId,
    pub max_tokens: usize,
    pub batch_size: usize,
    pub threads: usize,
    pub local_dir: &'p str,
    pub hashes: &'p crate::policy::ModelFileHashes,
    /// The folder an environment variable names for this model, if any.
    pub env_dir: Option<PathBuf>,
}

/// A candidate source as the doctor report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SourceStatus {
    /// `policy embedding.local_dir`, `PARAVAULT_MODEL_DIR`, `hugging face cache` or `download`.
    pub kind: &'static str,
    pub location: String,
    /// Whether every model file is there (existence only: nothing is read or hashed).
    pub files_present: bool,
}

/// What is bound once the model has loaded.
#[derive(Debug, Clone, Serialize)]
pub struct BoundModel {
    pub source: ModelSource,
    pub load_ms: u64,
}

/// `ModelHandle::describe`: what is configured, in resolution order, and what is bound.
#[derive(Debug, Clone, Serialize)]
pub struct ModelDescription {
    pub model: ModelId,
    pub max_tokens: usize,
    pub batch_size: usize,
    pub threads: usize,
    pub threads_source: ThreadsSource,
    pub egress: EgressPolicy,
    pub sources: Vec<SourceStatus>,
    pub bound: Option<BoundModel>,
}

/// The lazily loaded model: resolved, verified and loaded on first use, once, then shared.
/// A failed load is not remembered, so fixing the model folder needs no restart.
pub struct ModelHandle {
    config: ModelConfig,
    loaded: OnceLock<(Arc<MiniLm>, BoundModel)>,
    loading: Mutex<()>,
}

impl ModelHandle {
    pub fn new(config: ModelConfig) -> Self {
        ModelHandle { config, loaded: OnceLock::new(), loading: Mutex::new(()) }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn id(&self) -> &ModelId {
        &self.config.id
    }

    /// The model, loading it on first use (resolution, sha256 check, load).
    pub fn model(&self) -> Result<Arc<MiniLm>> {
        if let Some((model, _)) = self.loaded.get() {
            return Ok(model.clone());
        }
        let _guard = self.loading.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((model, _)) = self.loaded.get() {
            return Ok(model.clone());
        }
        let started = Instant::now();
        let verified = resolve(&self.config)?;
        let source = verified.source.clone();
        let model = Arc::new(MiniLm::load(verified, &self.config)?);
        let bound = BoundModel { source, load_ms: started.elapsed().as_millis() as u64 };
        let (model, _) = self.loaded.get_or_init(|| (model, bound));
        Ok(model.clone())
    }

    /// Embeds passages (loading the model on first use); one unit vector per passage, in order.
    pub fn embed_passages(&self, passages: &[String]) -> Result<Vec<Vector>> {
        self.model()?.embed_passages(passages)
    }

    /// Records, per user, the folder the loaded model came from when no vault setting names it
    /// (`PARAVAULT_MODEL_DIR` or a Hugging Face cache), so that the next shell or MCP server
    /// finds it too (`remembered`). Nothing when the model is not loaded, came from the
    /// policy's own folder, or there is no per-user config folder.
    pub fn remember_source(&self) -> Result<()> {
        let (Some((_, bound)), Some(file)) = (self.loaded.get(), self.config.remembered_file.as_deref()) else { return Ok(()) };
        let dir = match &bound.source {
            ModelSource::LocalDir { origin: "PARAVAULT_MODEL_DIR", dir } => dir,
            ModelSource::HfCache { snapshot } | ModelSource::Downloaded { snapshot } => snapshot,
            ModelSource::LocalDir { .. } => return Ok(()),
        };
        remembered::record(file, &self.config.id, dir)
    }

    /// What is configured and what is bound; reads no file contents and never loads the model.
    pub fn describe(&self) -> ModelDescription {
        let c = &self.config;
        let files_in = |dir: &Path| c.hashes.files().iter().all(|(name, _)| dir.join(name).is_file());
        let mut sources = Vec::new();
        if let Some(dir) = &c.policy_dir {
            sources.push(SourceStatus {
                kind: "policy embedding.local_dir",
                location: dir.display().to_string(),
                files_present: files_in(dir),
            });
        }
        if let Some(dir) = &c.env_dir {
            sources.push(SourceStatus { kind: "PARAVAULT_MODEL_DIR", location: dir.display().to_string(), files_present: files_in(dir) });
        }
        if c.policy_dir.is_none() && c.env_dir.is_none() {
            match &c.hf_cache {
                Some(hub) => {
                    let found = resolve::find_in_cache(hub, &c.id, &c.hashes);
                    sources.push(SourceStatus {
                        kind: "hugging face cache",
                        location: hub.display().to_string(),
                        files_present: found.iter().all(Option::is_some),
                    });
                }
                None => sources.push(SourceStatus {
                    kind: "hugging face cache",
                    location: "(no HF_HUB_CACHE, HF_HOME or HOME)".into(),
                    files_present: false,
                }),
            }
            if let Some(dir) = c.remembered_file.as_deref().and_then(|file| remembered::lookup(file, &c.id)) {
                sources.push(SourceStatus {
                    kind: "the folder an earlier dense sync used (models.json)",
                    location: dir.display().to_string(),
                    files_present: files_in(&dir),
                });
            }
            if c.egress == EgressPolicy::AllowPublic {
                sources.push(SourceStatus { kind: "download", location: c.hf_endpoint.clone(), files_present: false });
            }
        }
        ModelDescription {
            model: c.id.clone(),
            max_tokens: c.max_tokens,
            batch_size: c.batch_size,
            threads: c.threads,
            threads_source: c.threads_source,
            egress: c.egress,
            sources,
            bound: self.loaded.get().map(|(_, bound)| bound.clone()),
        }
    }
}

impl std::fmt::Debug for ModelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelHandle").field("model", &self.config.id).field("loaded", &self.loaded.get().is_some()).finish()
    }
}

/// Cosine similarity of two unit vectors (their dot product), accumulated in f64.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na * nb) }
}

type HandleRegistry = std::collections::HashMap<String, Arc<ModelHandle>>;
static HANDLES: std::sync::LazyLock<Mutex<HandleRegistry>> = std::sync::LazyLock::new(|| Mutex::new(HandleRegistry::new()));

/// The process-wide handle for `config`: one model load per configuration per process (the
/// MCP server, the CLI and tests all share it).
pub(crate) fn shared_handle(config: ModelConfig) -> Arc<ModelHandle> {
    let key = format!("{config:?}");
    let mut handles = HANDLES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    handles.entry(key).or_insert_with(|| Arc::new(ModelHandle::new(config))).clone()
}

/// The handle a vault's policy names (environment read from the process).
pub fn vault_handle(policy: &Policy, vault_root: &Path) -> Arc<ModelHandle> {
    shared_handle(ModelConfig::from_policy(policy, Some(vault_root), &ModelEnv::from_process()))
}
