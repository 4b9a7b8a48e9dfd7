//! Where a vault is: `--vault`, the environment, or the default location. *Invariant:
//! `resolve_root` reads the environment only and never touches the disk; `looks_like_a_vault`
//! only asks whether folders exist.*

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};

/// Where the vault root came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RootSource {
    Flag,
    ParavaultEnv,
    PowerEnv,
    /// The current folder, which looks like a vault (`looks_like_a_vault`).
    CurrentFolder,
    Default,
}

/// Whether `dir` looks like a vault: it has the engine's `.paravault/` folder, or two or more
/// of the P.A.R.A. folders. The CLI then uses it rather than the default vault.
pub(crate) fn looks_like_a_vault(dir: &Path) -> bool {
    const PARA: [&str; 6] = ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs"];
    dir.join(".paravault").is_dir() || PARA.iter().filter(|f| dir.join(f).is_dir()).count() >= 2
}

/// Resolves the vault root: `--vault`, else `PARAVAULT_VAULT_DIR`, else `POWER_VAULT_DIR`, else
/// the default location (`$XDG_DATA_HOME/paravault/vault`, else `~/.local/share/paravault/vault`).
pub(crate) fn resolve_root(flag: Option<&Path>) -> Result<(PathBuf, RootSource)> {
    if let Some(path) = flag {
        return Ok((path.to_path_buf(), RootSource::Flag));
    }
    for (var, source) in [("PARAVAULT_VAULT_DIR", RootSource::ParavaultEnv), ("POWER_VAULT_DIR", RootSource::PowerEnv)] {
        if let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Ok((PathBuf::from(value), source));
        }
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .ok_or_else(|| Error::VaultUnusable("no --vault, PARAVAULT_VAULT_DIR, POWER_VAULT_DIR, XDG_DATA_HOME or HOME".into()))?;
    Ok((data.join("paravault").join("vault"), RootSource::Default))
}
