//! Where per-user state that must live outside every vault is kept (approver secrets).
//!
//! `PARAVAULT_CONFIG_DIR`, else `$XDG_CONFIG_HOME/paravault`, else `~/.config/paravault`.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// The per-user configuration folder (it may not exist yet).
pub fn config_dir() -> Result<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = non_empty("PARAVAULT_CONFIG_DIR") {
        return absolute("PARAVAULT_CONFIG_DIR", dir);
    }
    if let Some(dir) = non_empty("XDG_CONFIG_HOME") {
        return absolute("XDG_CONFIG_HOME", dir.join("paravault"));
    }
    match non_empty("HOME") {
        Some(home) => absolute("HOME", home.join(".config").join("paravault")),
        None => Err(Error::NotConfigured {
            capability: "the per-user configuration folder",
            remediation: "set PARAVAULT_CONFIG_DIR (or XDG_CONFIG_HOME or HOME) to an absolute folder".into(),
        }),
    }
}

fn absolute(variable: &'static str, dir: PathBuf) -> Result<PathBuf> {
    if dir.is_absolute() {
        Ok(dir)
    } else {
        Err(Error::NotConfigured {
            capability: "the per-user configuration folder",
            remediation: format!("{variable} must name an absolute folder"),
        })
    }
}
