//! The cross-encoder of `search_mode=reranked` (a BERT sequence classifier such as
//! cross-encoder/ms-marco-MiniLM-L-6-v2): resolved and verified exactly like the embedding
//! model, run on the same packed CPU kernels (`bert.rs`), one logit per (query, passage) pair.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokenizers::{Tokenizer, TruncationStrategy};

use super::bert::{BertClassifier, Sequence, config_and_tokenizer};
use super::{EmbeddingPrecision, ModelConfig, ModelEnv, ModelId, ModelSection, resolve};
use crate::error::{Error, Result};
use crate::policy::Policy;

fn unavailable(reason: impl std::fmt::Display) -> Error {
    Error::RerankerUnavailable { reason: reason.to_string() }
}

/// The reranker's model configuration (the embedding's resolution, the reranker's section).
pub fn config(policy: &Policy, vault_root: Option<&Path>, env: &ModelEnv) -> ModelConfig {
    let r = &policy.reranker;
    let section = ModelSection {
        name: "reranker",
        // A reranker outputs one logit per pair.
        id: ModelId { repo: r.repo.clone(), revision: r.revision.clone(), dimension: 1, precision: EmbeddingPrecision::F32 },
        max_tokens: r.max_tokens,
        batch_size: r.batch_size,
        threads: r.threads,
        local_dir: &r.local_dir,
        hashes: &r.sha256,
        // PARAVAULT_MODEL_DIR names the embedding model's folder, never the reranker's.
        env_dir: None,
    };
    ModelConfig::of_section(section, policy, vault_root, env)
}

/// The loaded cross-encoder. Cheap to share (`Arc`).
pub struct CrossEncoder {
    id: ModelId,
    model: BertClassifier,
    tokenizer: Tokenizer,
    batch_size: usize,
    pool: rayon::ThreadPool,
}

impl CrossEncoder {
    /// Resolves, verifies and loads the model `config` names; every failure is
    /// `reranker_unavailable` naming its cause. An empty sha256 (not pinned) is refused before
    /// any file is looked for.
    pub fn load(config: &ModelConfig) -> Result<Self> {
        if let Some((file, _)) = config.hashes.files().into_iter().find(|(_, hash)| hash.is_empty()) {
            return Err(unavailable(format!(
                "{} is not pinned: reranker.sha256 has no hash for {file}; record the sha256 of the files of revision {} in the policy",
                config.id, config.id.revision
            )));
        }
        let files = resolve(config).map_err(unavailable)?;
        // transformers' `truncation=True` for a pair: the longer side loses tokens first.
        let (bert_config, tokenizer) = config_and_tokenizer(&files, config, Some(TruncationStrategy::LongestFirst)).map_err(unavailable)?;
        let model = BertClassifier::load(&files.weights, &bert_config)
            .map_err(|e| unavailable(format!("the weights do not load as a BERT sequence classifier: {e}")))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads.max(1))
            .thread_name(|i| format!("paravault-rerank-{i}"))
            .build()
            .map_err(|e| unavailable(format!("starting the inference threads: {e}")))?;
        Ok(CrossEncoder { id: config.id.clone(), model, tokenizer, batch_size: config.batch_size.max(1), pool })
    }

    pub fn id(&self) -> &ModelId {
        &self.id
    }

    /// One logit per passage for (query, passage), in order, `batch_size` pairs at a time.
    /// `None` when `deadline` passed before every batch was scored (checked between batches).
    pub fn score(&self, query: &str, passages: &[&str], deadline: Option<Instant>) -> Result<Option<Vec<f32>>> {
        let failed = |what: &str, e: &dyn std::fmt::Display| Error::EmbeddingFailed { reason: format!("reranker {what}: {e}") };
        let pairs: Vec<(String, String)> = passages.iter().map(|p| (query.to_string(), (*p).to_string())).collect();
        let encodings = self.tokenizer.encode_batch(pairs, true).map_err(|e| failed("tokenising", &e))?;
        let mut out = Vec::with_capacity(passages.len());
        for batch in encodings.chunks(self.batch_size) {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            let sequences: Vec<Sequence<'_>> = batch.iter().map(|e| Sequence { ids: e.get_ids(), type_ids: e.get_type_ids() }).collect();
            out.extend(self.pool.install(|| self.model.logits(&sequences)).map_err(|e| failed("inference", &e))?);
        }
        Ok(Some(out))
    }
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder").field("id", &self.id).field("batch_size", &self.batch_size).finish()
    }
}

/// The lazily loaded, process-shared reranker of one configuration. A failed load is not
/// remembered, so fixing the model folder needs no restart.
pub struct RerankerHandle {
    config: ModelConfig,
    loaded: OnceLock<Arc<CrossEncoder>>,
    loading: Mutex<()>,
}

impl RerankerHandle {
    pub fn model(&self) -> Result<Arc<CrossEncoder>> {
        if let Some(model) = self.loaded.get() {
            return Ok(model.clone());
        }
        let _guard = self.loading.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(model) = self.loaded.get() {
            return Ok(model.clone());
        }
        let model = Arc::new(CrossEncoder::load(&self.config)?);
        Ok(self.loaded.get_or_init(|| model).clone())
    }
}

type Registry = std::collections::HashMap<String, Arc<RerankerHandle>>;
static HANDLES: std::sync::LazyLock<Mutex<Registry>> = std::sync::LazyLock::new(|| Mutex::new(Registry::new()));

/// The process-wide reranker handle a vault's policy names.
pub fn vault_handle(policy: &Policy, vault_root: &Path) -> Arc<RerankerHandle> {
    let config = config(policy, Some(vault_root), &ModelEnv::from_process());
    let key = format!("{config:?}");
    let mut handles = HANDLES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    handles.entry(key).or_insert_with(|| Arc::new(RerankerHandle { config, loaded: OnceLock::new(), loading: Mutex::new(()) })).clone()
}
