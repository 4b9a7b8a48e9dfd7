//! Finding the model files and checking them: explicit folder → Hugging Face cache → download.
//!
//! Order, with no silent fallback between steps:
//! 1. an explicit folder — the policy's `embedding.local_dir`, else `PARAVAULT_MODEL_DIR`. When
//!    one is configured it is the only source: missing or mismatching files are errors.
//! 2. the Hugging Face cache at the pinned revision (`snapshots/<revision>/`, or a
//!    `refs/<revision>` file naming the snapshot), looked up offline.
//! 3. a download of that revision into the cache — only when the policy's egress is
//!    `allow-public`; under `deny` the network is never touched and the error says how to
//!    provide the files.
//!
//! Every file is read into memory and its sha256 compared with the policy's before any of it
//! is parsed; the bytes that were hashed are the bytes that are loaded.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{ModelConfig, ModelId};
use crate::error::{Error, Result};
use crate::policy::{EgressPolicy, ModelFileHashes};

/// Where the bound model's files came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelSource {
    /// An explicit folder; `origin` names the setting that pointed at it.
    LocalDir { origin: &'static str, dir: PathBuf },
    /// A snapshot folder of the Hugging Face cache.
    HfCache { snapshot: PathBuf },
    /// Downloaded just now (egress `allow-public`) into the cache's snapshot folder.
    Downloaded { snapshot: PathBuf },
}

/// The three model files, read and checked against the policy's sha256.
pub struct VerifiedModel {
    pub source: ModelSource,
    pub config_json: Vec<u8>,
    pub tokenizer_json: Vec<u8>,
    pub weights: Vec<u8>,
}

const HOW_TO_PROVIDE: &str = "Provide config.json, tokenizer.json and model.safetensors of the pinned revision: put them in a folder \
     named by embedding.local_dir in .paravault/policy.yaml or by PARAVAULT_MODEL_DIR, or place the revision in the Hugging Face \
     cache (HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub), or set `egress: allow-public` to let paravault download it";

/// Resolves, reads and verifies the model files named by `config`.
pub fn resolve(config: &ModelConfig) -> Result<VerifiedModel> {
    let explicit = match (&config.policy_dir, &config.env_dir) {
        (Some(dir), _) => {
            Some((if config.section == "reranker" { "policy reranker.local_dir" } else { "policy embedding.local_dir" }, dir))
        }
        (None, Some(dir)) => Some(("PARAVAULT_MODEL_DIR", dir)),
        (None, None) => None,
    };
    if let Some((origin, dir)) = explicit {
        let paths = config.hashes.files().map(|(name, _)| dir.join(name));
        let missing = missing_names(&config.hashes, &paths.clone().map(|p| p.is_file().then_some(p)));
        if !missing.is_empty() {
            return Err(Error::ModelUnavailable {
                model: config.id.to_string(),
                reason: format!("the folder named by {origin} lacks {}", missing.join(", ")),
                remediation: format!("Put the files of the pinned revision there, or unset {origin}."),
            });
        }
        return read_verified(config, ModelSource::LocalDir { origin, dir: dir.clone() }, &paths);
    }

    let found = match &config.hf_cache {
        Some(hub) => find_in_cache(hub, &config.id, &config.hashes),
        None => [None, None, None],
    };
    if let [Some(a), Some(b), Some(c)] = &found {
        let snapshot = a.parent().map(Path::to_path_buf).unwrap_or_default();
        return read_verified(config, ModelSource::HfCache { snapshot }, &[a.clone(), b.clone(), c.clone()]);
    }
    let missing = missing_names(&config.hashes, &found);
    // Where an earlier dense sync found it (per user: `remembered`), before any download.
    if let Some(dir) = config.remembered_file.as_deref().and_then(|file| super::remembered::lookup(file, &config.id)) {
        let paths = config.hashes.files().map(|(name, _)| dir.join(name));
        if paths.iter().all(|p| p.is_file()) {
            return read_verified(
                config,
                ModelSource::LocalDir { origin: "the folder an earlier dense sync used (models.json)", dir },
                &paths,
            );
        }
    }

    match (config.egress, &config.hf_cache) {
        (EgressPolicy::Deny, _) => Err(Error::EgressDenied {
            what: format!("{} model {} (not in the Hugging Face cache: {})", config.section, config.id, missing.join(", ")),
            remediation: HOW_TO_PROVIDE.to_string(),
        }),
        (EgressPolicy::AllowPublic, None) => Err(Error::ModelUnavailable {
            model: config.id.to_string(),
            reason: "there is no Hugging Face cache folder to download into (none of HF_HUB_CACHE, HF_HOME, HOME is set)".into(),
            remediation: "Set HF_HUB_CACHE or HF_HOME.".into(),
        }),
        (EgressPolicy::AllowPublic, Some(hub)) => {
            let paths = download(config, hub)?;
            let snapshot = paths[0].parent().map(Path::to_path_buf).unwrap_or_default();
            read_verified(config, ModelSource::Downloaded { snapshot }, &paths)
        }
    }
}

/// The cache's path of each model file at the pinned revision, offline (`None`: not there).
pub(crate) fn find_in_cache(hub: &Path, id: &ModelId, hashes: &ModelFileHashes) -> [Option<PathBuf>; 3] {
    let repo = hf_hub::Repo::with_revision(id.repo.clone(), hf_hub::RepoType::Model, id.revision.clone());
    let snapshot = hub.join(repo.folder_name()).join("snapshots").join(&id.revision);
    let cache = hf_hub::Cache::new(hub.to_path_buf()).repo(repo);
    hashes.files().map(|(name, _)| {
        let direct = snapshot.join(name);
        // hf-hub resolves only through a `refs/<revision>` file; a pinned commit usually has a
        // snapshot folder of its own name and no such ref, so that is looked at first.
        if direct.is_file() { Some(direct) } else { cache.get(name).filter(|p| p.is_file()) }
    })
}

fn missing_names(hashes: &ModelFileHashes, found: &[Option<PathBuf>; 3]) -> Vec<&'static str> {
    hashes.files().iter().zip(found).filter(|(_, f)| f.is_none()).map(|((name, _), _)| *name).collect()
}

fn download(config: &ModelConfig, hub: &Path) -> Result<[PathBuf; 3]> {
    let unavailable = |reason: String| Error::ModelUnavailable {
        model: config.id.to_string(),
        reason,
        remediation: format!("Check that {} is reachable, or provide the files offline. {HOW_TO_PROVIDE}.", config.hf_endpoint),
    };
    let api = hf_hub::api::sync::ApiBuilder::from_cache(hf_hub::Cache::new(hub.to_path_buf()))
        .with_endpoint(config.hf_endpoint.clone())
        .with_progress(false)
        .build()
        .map_err(|e| unavailable(format!("the download client could not be built: {e}")))?;
    let repo = api.repo(hf_hub::Repo::with_revision(config.id.repo.clone(), hf_hub::RepoType::Model, config.id.revision.clone()));
    let mut paths = Vec::with_capacity(3);
    for (name, _) in config.hashes.files() {
        tracing::info!(file = name, model = %config.id, endpoint = %config.hf_endpoint, "downloading embedding model file");
        let path = repo.get(name).map_err(|e| unavailable(format!("downloading {name} failed: {e}")))?;
        paths.push(path);
    }
    Ok([paths[0].clone(), paths[1].clone(), paths[2].clone()])
}

fn read_verified(config: &ModelConfig, source: ModelSource, paths: &[PathBuf; 3]) -> Result<VerifiedModel> {
    let mut contents = Vec::with_capacity(3);
    for ((name, expected), path) in config.hashes.files().iter().zip(paths) {
        let bytes = std::fs::read(path).map_err(|e| Error::ModelUnavailable {
            model: config.id.to_string(),
            reason: format!("{name} cannot be read: {e}"),
            remediation: HOW_TO_PROVIDE.to_string(),
        })?;
        let found = sha256_hex(&bytes);
        if found != *expected {
            return Err(Error::ModelVerificationFailed {
                model: config.id.to_string(),
                file: (*name).to_string(),
                expected: (*expected).to_string(),
                found,
                remediation: format!(
                    "the file from {} is not the pinned one; replace it with the file of revision {} (or correct embedding.sha256 if the policy is wrong)",
                    source_label(&source),
                    config.id.revision
                ),
            });
        }
        contents.push(bytes);
    }
    let weights = contents.pop().unwrap_or_default();
    let tokenizer_json = contents.pop().unwrap_or_default();
    let config_json = contents.pop().unwrap_or_default();
    Ok(VerifiedModel { source, config_json, tokenizer_json, weights })
}

fn source_label(source: &ModelSource) -> &'static str {
    match source {
        ModelSource::LocalDir { origin, .. } => origin,
        ModelSource::HfCache { .. } => "the Hugging Face cache",
        ModelSource::Downloaded { .. } => "the download",
    }
}

pub(crate) use crate::hex::sha256_hex;
