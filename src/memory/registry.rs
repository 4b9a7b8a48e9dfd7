//! The vault registry: named vaults a ctxvault-surface server may serve, kept in one JSON file
//! outside every vault (`vaults.json` in the user's config folder), with per-vault access rules.
//!
//! A vault is `restricted` or open. An open vault answers any caller with apply authority; a
//! restricted one answers only the agents attached to it, each with its own authority
//! (read-only < propose < apply). `authorize` is the one access check: an unknown name, a
//! name that is not a plain vault name (a path, `..`) and a restricted vault the caller is not
//! attached to all fail with the same `vault_access_denied`, so the answer reveals nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The registry's file name inside the config folder.
pub(crate) const REGISTRY_FILE: &str = "vaults.json";

/// What a registry entry may hold (ctxvault's typed vaults); `any` holds all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VaultType {
    #[default]
    Any,
    Semantic,
    Skill,
    Episodic,
}

impl VaultType {
    pub fn name(self) -> &'static str {
        match self {
            VaultType::Any => "any",
            VaultType::Semantic => "semantic",
            VaultType::Skill => "skill",
            VaultType::Episodic => "episodic",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text.trim() {
            "any" => Ok(VaultType::Any),
            "semantic" => Ok(VaultType::Semantic),
            "skill" => Ok(VaultType::Skill),
            "episodic" => Ok(VaultType::Episodic),
            other => {
                Err(Error::InvalidArgument { name: "type", reason: format!("'{other}' is not one of any, semantic, skill, episodic") })
            }
        }
    }
}

/// What an attached agent may do on a restricted vault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Authority {
    /// Read tools only.
    ReadOnly,
    /// Reads; each memory change is held as a `memory_change` proposal (the fully resolved
    /// change) that a person, or an agent with apply authority, approves and applies by id.
    Propose,
    /// Reads and writes.
    Apply,
}

impl Authority {
    pub fn name(self) -> &'static str {
        match self {
            Authority::ReadOnly => "read-only",
            Authority::Propose => "propose",
            Authority::Apply => "apply",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text.trim() {
            "read-only" | "read_only" | "readonly" => Ok(Authority::ReadOnly),
            "propose" => Ok(Authority::Propose),
            "apply" => Ok(Authority::Apply),
            other => {
                Err(Error::InvalidArgument { name: "authority", reason: format!("'{other}' is not one of read-only, propose, apply") })
            }
        }
    }
}

/// One registered vault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredVault {
    pub name: String,
    /// Absolute root of the vault.
    pub root: PathBuf,
    #[serde(default)]
    pub vault_type: VaultType,
    #[serde(default)]
    pub restricted: bool,
    /// Attached agents and their authority (meaningful for restricted vaults).
    #[serde(default)]
    pub agents: BTreeMap<String, Authority>,
    #[serde(default)]
    pub description: String,
}

/// The registry file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub schema_version: u32,
    pub vaults: BTreeMap<String, RegisteredVault>,
}

/// Whether a vault name is a plain name: 1–64 characters of ASCII letters, digits, `_`, `-`
/// and `.`, starting with a letter or digit (so never a path, `..` or a hidden name).
pub(crate) fn is_plain_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.contains("..")
}

impl Registry {
    /// The registry file under a config folder.
    pub fn file_in(config_dir: &Path) -> PathBuf {
        config_dir.join(REGISTRY_FILE)
    }

    /// Reads the registry (a missing file is an empty registry; a malformed one is refused).
    pub fn load(file: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Registry { schema_version: 1, vaults: BTreeMap::new() }),
            Err(e) => return Err(Error::io("reading", file.display().to_string(), e)),
        };
        let registry: Registry =
            serde_json::from_str(&text).map_err(|e| Error::RegistryInvalid { file: file.display().to_string(), reason: e.to_string() })?;
        for (key, entry) in &registry.vaults {
            if key != &entry.name || !is_plain_name(key) || !entry.root.is_absolute() {
                return Err(Error::RegistryInvalid {
                    file: file.display().to_string(),
                    reason: format!("entry '{key}' needs a plain name equal to its key and an absolute root"),
                });
            }
        }
        Ok(registry)
    }

    /// Writes the registry atomically and durably (the config folder is created if missing).
    pub fn save(&self, file: &Path) -> Result<()> {
        let dir = file.parent().ok_or_else(|| Error::InvalidArgument { name: "registry", reason: "no parent folder".into() })?;
        crate::store::durable::create_dir_all(dir, dir)?;
        let mut text = serde_json::to_string_pretty(self).map_err(|e| Error::io("encoding", "registry", std::io::Error::other(e)))?;
        text.push('\n');
        crate::store::durable::replace(dir, file, text.as_bytes())
    }

    /// Adds (or, with `replace`, replaces) an entry. The root must be an existing directory.
    pub fn add(&mut self, entry: RegisteredVault, replace: bool) -> Result<()> {
        if !is_plain_name(&entry.name) {
            return Err(Error::InvalidArgument {
                name: "name",
                reason: "a vault name is 1-64 ASCII letters, digits, '_', '-' or '.', starting with a letter or digit".into(),
            });
        }
        if !entry.root.is_dir() {
            return Err(Error::InvalidArgument { name: "root", reason: format!("'{}' is not a directory", entry.root.display()) });
        }
        for agent in entry.agents.keys() {
            if !is_plain_name(agent) {
                return Err(Error::InvalidArgument { name: "agent", reason: format!("'{agent}' is not a plain agent name") });
            }
        }
        if self.vaults.contains_key(&entry.name) && !replace {
            return Err(Error::AlreadyExists { path: format!("vault '{}'", entry.name) });
        }
        self.schema_version = 1;
        self.vaults.insert(entry.name.clone(), entry);
        Ok(())
    }

    /// Removes an entry (the vault's files are never touched); false when it was not there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.vaults.remove(name).is_some()
    }

    /// The vaults `agent` may see, by name.
    pub(crate) fn visible_to<'r>(&'r self, agent: Option<&'r str>) -> impl Iterator<Item = &'r RegisteredVault> + 'r {
        self.vaults.values().filter(move |v| v.authority_of(agent).is_some())
    }

    /// The one access check: the entry named `vault_name` when `agent` may use it with
    /// `needed` authority for `tool`.
    pub(crate) fn authorize(&self, vault_name: &str, agent: Option<&str>, needed: Authority, tool: &str) -> Result<&RegisteredVault> {
        let denied = || Error::VaultAccessDenied { vault_name: printable(vault_name) };
        if !is_plain_name(vault_name) {
            return Err(denied());
        }
        let entry = self.vaults.get(vault_name).ok_or_else(denied)?;
        let authority = entry.authority_of(agent).ok_or_else(denied)?;
        if authority < needed {
            return Err(Error::AuthorityInsufficient {
                vault_name: entry.name.clone(),
                agent: agent.unwrap_or("").to_string(),
                authority: authority.name(),
                needed: needed.name(),
                tool: tool.to_string(),
            });
        }
        Ok(entry)
    }
}

impl Registry {
    /// The authority `agent` has on the vault at `root` as the registry states it: `None` when
    /// no registered vault has that root (the served vault is then the server's alone);
    /// otherwise the least authority any restricted entry for it gives the agent (`read-only`
    /// for an entry the agent is not attached to: it may read what the server serves, never
    /// write), `apply` when every entry is unrestricted.
    pub(crate) fn authority_at(&self, root: &std::path::Path, agent: Option<&str>) -> Option<Authority> {
        let canonical = root.canonicalize().ok();
        let same = |other: &std::path::Path| other == root || (canonical.is_some() && other.canonicalize().ok() == canonical);
        self.vaults.values().filter(|v| same(&v.root)).map(|v| v.authority_of(agent).unwrap_or(Authority::ReadOnly)).min()
    }
}

impl RegisteredVault {
    /// The authority `agent` has here (`None`: the vault does not exist for it).
    pub(crate) fn authority_of(&self, agent: Option<&str>) -> Option<Authority> {
        if !self.restricted {
            return Some(Authority::Apply);
        }
        agent.and_then(|a| self.agents.get(a).copied())
    }
}

/// A caller-supplied name as a refusal shows it: a plain name as given; anything else (a path,
/// a root, control characters) is never echoed.
pub fn printable(name: &str) -> String {
    if is_plain_name(name) { name.to_string() } else { "(not a vault name)".to_string() }
}
