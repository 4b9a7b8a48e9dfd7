//! `warmup_status`: the truth about the embedding model, without ever blocking a tool.
//!
//! States: `not_configured` (no source holds the pinned model files and egress may not fetch
//! them: the vault answers lexically), `loading` (a background thread is resolving, verifying
//! and loading it), `ready` (bound, with its source and load time), `failed` (the reason; the
//! next call starts a new attempt, since a fixed model folder needs no restart). The load runs
//! on its own thread; the status call only reads state.
//!
//! `ready` answers what an agent following ctxvault's advice ("wait for ready") needs: whether
//! to query now. It is false only while a load is running (a wait of seconds); otherwise it is
//! true and `mode` says how `query` answers now (`lexical`, or the policy's
//! `search.auto_dense_mode` once the vault holds vectors), and without a model `enable` says
//! how a person enables it (issue 50), so nobody waits forever.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use schemars::JsonSchema;
use serde::Serialize;

use crate::embed::{ModelHandle, ModelSource};
use crate::policy::EgressPolicy;

#[derive(Debug, Clone)]
enum Attempt {
    Loading { since: Instant },
    Failed { code: &'static str, reason: String },
}

/// The embedding model's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WarmupState {
    /// No source holds the pinned model files and egress may not fetch them: the vault
    /// answers lexically.
    NotConfigured,
    /// A background thread is resolving, verifying and loading the model.
    Loading,
    /// The model is bound.
    Ready,
    /// The last attempt failed (the next call starts a new one).
    Failed,
}

/// How `query` (search mode `auto`) answers now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServedMode {
    /// BM25 full text only (no model, or no vectors yet).
    Lexical,
    /// BM25 and dense vectors fused (`search.auto_dense_mode: hybrid`).
    Hybrid,
    /// Dense vectors alone (`search.auto_dense_mode: semantic`).
    Semantic,
    /// Hybrid anchors expanded along links (`search.auto_dense_mode: graph_assisted`).
    GraphAssisted,
}

impl ServedMode {
    /// The mode `auto` runs with a dense index under `auto_dense_mode` (policy-validated).
    pub fn of_auto_dense(auto_dense_mode: &str) -> Self {
        match auto_dense_mode {
            "semantic" => ServedMode::Semantic,
            "graph_assisted" => ServedMode::GraphAssisted,
            _ => ServedMode::Hybrid,
        }
    }
}

/// `warmup_status`'s answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WarmupReport {
    /// The model's state.
    pub status: WarmupState,
    /// Whether to query now: false only while the model is loading (ask again in a few
    /// seconds); true otherwise, with `mode` saying how queries are answered.
    pub ready: bool,
    /// How `query` answers now: `lexical` without the model or before the vault holds vectors,
    /// else the policy's `search.auto_dense_mode` (`hybrid` by default).
    pub mode: ServedMode,
    /// One sentence for the agent or person (ctxvault's `message`).
    pub message: String,
    /// The pinned model, `repo@revision`.
    pub model: String,
    /// Why it is not ready: the missing files or the failure (null when loading or ready).
    pub reason: Option<String>,
    /// How a person enables semantic search when the model cannot be loaded (not_configured
    /// or failed only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable: Option<String>,
    /// Where the bound model's files came from (ready only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<ModelSource>,
    /// How long loading the model took, in milliseconds (ready only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_ms: Option<u64>,
    /// How long the running load has taken so far, in milliseconds (loading only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loading_ms: Option<u64>,
    /// The error code of the failure (failed only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Whether a new attempt has started (failed only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrying: Option<bool>,
    /// The vault asked about, when the call named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vault_name: Option<String>,
}

/// How a person enables the model (the words of `model_unavailable`'s remediation), and when
/// documents become semantic.
pub const HOW_TO_ENABLE: &str = "Provide config.json, tokenizer.json and model.safetensors of the pinned revision: put them in a \
     folder named by embedding.local_dir in the vault's .paravault/policy.yaml or by the server's PARAVAULT_MODEL_DIR, or place \
     the revision in the Hugging Face cache (HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub), or set `egress: \
     allow-public` to let paravault download it; restart the MCP server if you changed its environment. From then on every \
     write embeds its documents; `paravault sync --dense` embeds the ones written before.";

impl WarmupReport {
    fn new(status: WarmupState, model: &str, reason: Option<String>) -> Self {
        let (ready, message, enable) = match status {
            WarmupState::Loading => (false, "Embedding model is initializing; call warmup_status again in a few seconds.", None),
            WarmupState::Ready => (true, "Embedding model is ready.", None),
            WarmupState::NotConfigured => (
                true,
                "No embedding model is available: queries answer lexically (fts) now, and will until a person enables the model (see enable).",
                Some(HOW_TO_ENABLE.to_string()),
            ),
            WarmupState::Failed => (
                true,
                "The embedding model failed to load (see reason): queries answer lexically (fts) now; a new attempt has started.",
                Some(HOW_TO_ENABLE.to_string()),
            ),
        };
        WarmupReport {
            status,
            ready,
            mode: ServedMode::Lexical,
            message: message.to_string(),
            model: model.to_string(),
            reason,
            enable,
            source: None,
            load_ms: None,
            loading_ms: None,
            code: None,
            retrying: None,
            vault_name: None,
        }
    }
}

static ATTEMPTS: LazyLock<Mutex<HashMap<String, Attempt>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn key(handle: &ModelHandle) -> String {
    format!("{:?}", handle.config().id)
}

/// Starts loading the model in the background when its files are available and no attempt is
/// running; returns the status. `with_vectors` is the mode `auto` runs once the model is bound
/// and the vault's active generation holds vectors of this model (`None`: it holds none yet).
pub fn status(handle: Arc<ModelHandle>, with_vectors: Option<ServedMode>) -> WarmupReport {
    let described = handle.describe();
    let model = format!("{}@{}", described.model.repo, described.model.revision);
    if let Some(bound) = &described.bound {
        let report = WarmupReport {
            source: Some(bound.source.clone()),
            load_ms: Some(bound.load_ms),
            ..WarmupReport::new(WarmupState::Ready, &model, None)
        };
        return match with_vectors {
            Some(mode) => WarmupReport { mode, ..report },
            None => WarmupReport {
                message: "Embedding model is ready; the vault holds no vectors yet, so queries answer lexically until the next \
                          write embeds its documents (`paravault sync --dense` embeds the existing ones)."
                    .into(),
                ..report
            },
        };
    }
    let available = described.sources.iter().any(|s| s.files_present) || described.egress == EgressPolicy::AllowPublic;
    if !available {
        let tried: Vec<String> = described.sources.iter().map(|s| s.kind.to_string()).collect();
        let reason = format!(
            "the pinned model files are in none of: {}; egress is deny, so nothing is downloaded. Queries answer lexically (fts).",
            tried.join(", ")
        );
        return WarmupReport::new(WarmupState::NotConfigured, &model, Some(reason));
    }
    let mut attempts = ATTEMPTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let id = key(&handle);
    let previous = attempts.get(&id).cloned();
    let answer = match &previous {
        Some(Attempt::Loading { since }) => {
            return WarmupReport {
                loading_ms: Some(since.elapsed().as_millis() as u64),
                ..WarmupReport::new(WarmupState::Loading, &model, None)
            };
        }
        Some(Attempt::Failed { code, reason }) => WarmupReport {
            code: Some(code.to_string()),
            retrying: Some(true),
            ..WarmupReport::new(WarmupState::Failed, &model, Some(reason.clone()))
        },
        None => WarmupReport { loading_ms: Some(0), ..WarmupReport::new(WarmupState::Loading, &model, None) },
    };
    attempts.insert(id.clone(), Attempt::Loading { since: Instant::now() });
    drop(attempts);
    let thread_id = id.clone();
    let spawned = std::thread::Builder::new().name("paravault-warmup".into()).spawn(move || {
        let id = thread_id;
        let outcome = handle.model();
        let mut attempts = ATTEMPTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match outcome {
            Ok(_) => attempts.remove(&id),
            Err(error) => attempts.insert(id, Attempt::Failed { code: error.code(), reason: error.to_string() }),
        };
    });
    if let Err(error) = spawned {
        let mut attempts = ATTEMPTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        attempts.insert(id, Attempt::Failed { code: "io_error", reason: error.to_string() });
        return WarmupReport {
            code: Some("io_error".into()),
            ..WarmupReport::new(WarmupState::Failed, &model, Some(format!("cannot start the loader thread: {error}")))
        };
    }
    answer
}
