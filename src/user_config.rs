//! Where per-user state that must live outside every vault is kept (a vault registry, approver
//! secrets): `PARAVAULT_CONFIG_DIR`, else `$XDG_CONFIG_HOME/paravault`, else
//! `~/.config/paravault`.
//!
//! Nothing here creates the folder: whoever writes there does it through `store/`. A relative
//! path in either variable is refused (it would move with the working directory).

use std::path::PathBuf;

use crate::error::{Error, Result};

/// The environment variable that overrides the per-user configuration folder.
pub const CONFIG_DIR_ENV: &str = "PARAVAULT_CONFIG_DIR";

/// The per-user configuration folder (it may not exist yet).
pub fn config_dir() -> Result<PathBuf> {
    config_dir_from(|name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from))
}

/// `config_dir` over a given environment lookup (tests pass their own).
pub fn config_dir_from(var: impl Fn(&str) -> Option<PathBuf>) -> Result<PathBuf> {
    let absolute = |name: &'static str, path: PathBuf| {
        if path.is_absolute() {
            Ok(path)
        } else {
            Err(Error::InvalidArgument { name, reason: format!("{} must be an absolute path", path.display()) })
        }
    };
    if let Some(dir) = var(CONFIG_DIR_ENV) {
        return absolute(CONFIG_DIR_ENV, dir);
    }
    if let Some(xdg) = var("XDG_CONFIG_HOME") {
        return absolute("XDG_CONFIG_HOME", xdg).map(|d| d.join("paravault"));
    }
    match var("HOME") {
        Some(home) => absolute("HOME", home).map(|h| h.join(".config").join("paravault")),
        None => Err(Error::InvalidArgument {
            name: "PARAVAULT_CONFIG_DIR",
            reason: "no per-user configuration folder: set PARAVAULT_CONFIG_DIR (or HOME)".into(),
        }),
    }
}

#[cfg(test)]
mod tests;
