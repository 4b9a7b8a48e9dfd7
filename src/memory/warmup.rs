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

use serde_json::{Value, json};

use crate::embed::ModelHandle;
use crate::policy::EgressPolicy;

#[derive(Debug, Clone)]
enum Attempt {
    Loading { since: Instant },
    Failed { code: &'static str, reason: String },
}

static ATTEMPTS: LazyLock<Mutex<HashMap<String, Attempt>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn key(handle: &ModelHandle) -> String {
    format!("{:?}", handle.config().id)
}

/// Starts loading the model in the background when its files are available and no attempt is
/// running; returns the status.
pub fn status(handle: Arc<ModelHandle>) -> Value {
    let described = handle.describe();
    let model = format!("{}@{}", described.model.repo, described.model.revision);
    if let Some(bound) = &described.bound {
        return json!({"status": "ready", "ready": true, "model": model, "source": bound.source, "load_ms": bound.load_ms, "reason": Value::Null});
    }
    let available = described.sources.iter().any(|s| s.files_present) || described.egress == EgressPolicy::AllowPublic;
    if !available {
        let tried: Vec<String> = described.sources.iter().map(|s| s.kind.to_string()).collect();
        return json!({
            "status": "not_configured", "ready": false, "model": model,
            "reason": format!("the pinned model files are in none of: {}; egress is deny, so nothing is downloaded. Queries answer lexically (fts).", tried.join(", ")),
        });
    }
    let mut attempts = ATTEMPTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let id = key(&handle);
    let previous = attempts.get(&id).cloned();
    let answer = match &previous {
        Some(Attempt::Loading { since }) => {
            return json!({"status": "loading", "ready": false, "model": model, "loading_ms": since.elapsed().as_millis() as u64, "reason": Value::Null});
        }
        Some(Attempt::Failed { code, reason }) => {
            json!({"status": "failed", "ready": false, "model": model, "code": code, "reason": reason, "retrying": true})
        }
        None => json!({"status": "loading", "ready": false, "model": model, "loading_ms": 0, "reason": Value::Null}),
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
        return json!({"status": "failed", "ready": false, "model": model, "code": "io_error", "reason": format!("cannot start the loader thread: {error}")});
    }
    answer
}
