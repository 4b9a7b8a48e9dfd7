//! Where an earlier dense sync found each model, per user (`models.json` in the user's config
//! folder, outside every vault): a model given for one shell (`PARAVAULT_MODEL_DIR`, a
//! Hugging Face cache named by `HF_HOME`) is found again by the next shell, and an MCP server
//! started by a client, without a setting of its own. Only a folder whose files pass the
//! policy's sha256 is ever used (`resolve` checks as for any source), and nothing is ever
//! downloaded because of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ModelId;
use crate::error::{Error, Result};

/// The file's name in the per-user config folder.
pub(crate) const FILE: &str = "models.json";

/// `repo@revision` → the folder holding its files.
fn read(file: &Path) -> BTreeMap<String, PathBuf> {
    std::fs::read(file).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default()
}

fn key(id: &ModelId) -> String {
    format!("{}@{}", id.repo, id.revision)
}

/// The folder an earlier dense sync found `id` in, if one was recorded.
pub(crate) fn lookup(file: &Path, id: &ModelId) -> Option<PathBuf> {
    read(file).remove(&key(id)).filter(|dir| dir.is_absolute())
}

/// Records `dir` (absolute) as where `id` was found. Rewrites the file only when it changes.
pub(crate) fn record(file: &Path, id: &ModelId, dir: &Path) -> Result<()> {
    let dir = std::path::absolute(dir).map_err(|e| Error::io("resolving", dir.display().to_string(), e))?;
    let mut all = read(file);
    if all.get(&key(id)) == Some(&dir) {
        return Ok(());
    }
    all.insert(key(id), dir);
    let folder = file.parent().ok_or_else(|| Error::InvalidArgument { name: "models.json", reason: "no parent folder".into() })?;
    crate::store::durable::create_dir_all(folder, folder)?;
    let mut text = serde_json::to_string_pretty(&all).map_err(|e| Error::io("encoding", FILE, std::io::Error::other(e)))?;
    text.push('\n');
    crate::store::durable::replace(folder, file, text.as_bytes())
}
