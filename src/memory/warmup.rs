//! `warmup_status`: the truth about the embedding model, without ever blocking a tool.
//!
//! States: `not_configured` (no source holds the pinned model files and egress may not fetch
//! them: the vault answers lexically), `loading` (a background thread is resolving, verifying
//! and loading it), `ready` (bound, with its source and load time), `failed` (the reason; the
//! next call starts a new attempt, since a fixed model folder needs no restart). The load runs
//! on its own thread; the status call only reads state.

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

/// `warmup_status`'s answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WarmupReport {
    /// The model's state.
    pub status: WarmupState,
    /// Whether the model is ready (`status` is `ready`).
    pub ready: bool,
    /// The pinned model, `repo@revision`.
    pub model: String,
    /// Why it is not ready: the missing files or the failure (null when loading or ready).
    pub reason: Option<String>,
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

impl WarmupReport {
    fn new(status: WarmupState, model: &str, reason: Option<String>) -> Self {
        WarmupReport {
            status,
            ready: status == WarmupState::Ready,
            model: model.to_string(),
            reason,
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
/// running; returns the status.
pub fn status(handle: Arc<ModelHandle>) -> WarmupReport {
    let described = handle.describe();
    let model = format!("{}@{}", described.model.repo, described.model.revision);
    if let Some(bound) = &described.bound {
        return WarmupReport {
            source: Some(bound.source.clone()),
            load_ms: Some(bound.load_ms),
            ..WarmupReport::new(WarmupState::Ready, &model, None)
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
