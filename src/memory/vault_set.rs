//! The vaults one server serves: the registry, the calling agent, and each registered vault
//! opened on first use as its own `Vault` (own writer lock, journal, receipts, generations).
//!
//! Every tool call goes through `open`: the access check first (`Registry::authorize`, which
//! reveals nothing about vaults the caller may not see), then the vault type, then the vault.
//! Opening is lazy, so a server with many registered vaults starts without touching them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use super::MemoryVault;
use super::registry::{Authority, Registry, VaultType};
use crate::error::{Error, Result};
use crate::vault::{Vault, VaultOptions};

/// `list_vaults`'s answer: the vaults this agent may use.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VaultList {
    /// The visible vaults, by name.
    pub vaults: Vec<VaultEntry>,
    /// How many vaults are listed.
    pub count: usize,
    /// The calling agent (`--agent`; null without one).
    pub agent: Option<String>,
}

/// One vault of `list_vaults`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VaultEntry {
    /// The vault's name (what every other tool takes as `vault_name`).
    pub name: String,
    /// The kind of memory it holds: `semantic`, `skill`, `episodic` or `any`.
    #[serde(rename = "type")]
    pub vault_type: String,
    /// What the vault is for.
    pub description: String,
    /// Whether only attached agents may use it.
    pub restricted: bool,
    /// The calling agent's authority on it (`read-only`, `propose`, …; null when it has none
    /// of its own).
    pub authority: Option<String>,
}

/// An answer of a tool called on a named vault, with the vault's name (as ctxvault 0.8.1
/// answers it) beside the report's own fields.
#[derive(Debug, Clone, Serialize)]
pub struct OnVault<T> {
    /// The vault the tool ran on.
    pub vault_name: String,
    /// The tool's report.
    #[serde(flatten)]
    pub report: T,
}

/// The report's derived schema (its description included) with the required `vault_name`
/// added, as the answer serialises (a derive would describe every answer with this wrapper's
/// text instead of its report's).
impl<T: JsonSchema> JsonSchema for OnVault<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("OnVault_{}", T::schema_name()).into()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        format!("paravault::memory::OnVault<{}>", T::schema_id()).into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut vault_name = generator.subschema_for::<String>();
        vault_name.insert("description".into(), "The vault the tool ran on.".into());
        let mut schema = T::json_schema(generator);
        let object = schema.ensure_object();
        let properties = object.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert("vault_name".into(), vault_name.to_value());
        }
        let required = object.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Some(required) = required.as_array_mut() {
            required.insert(0, "vault_name".into());
        }
        schema
    }
}

/// Registered vaults as seen by one agent.
pub struct VaultSet {
    registry: Registry,
    agent: Option<String>,
    open: Mutex<HashMap<String, Arc<MemoryVault>>>,
    /// Whether opened vaults watch the disk (a long-lived server does; a one-shot caller not).
    watch: bool,
    /// What every vault of the set is opened with: the server's own clock and "today".
    options: VaultOptions,
}

impl VaultSet {
    pub fn new(registry: Registry, agent: Option<String>, watch: bool) -> Self {
        VaultSet {
            registry,
            agent: agent.filter(|a| !a.trim().is_empty()),
            open: Mutex::new(HashMap::new()),
            watch,
            options: VaultOptions::default(),
        }
    }

    /// Opens every vault of the set with `options` (the server's `PARAVAULT_NOW` /
    /// `PARAVAULT_TODAY`), not the defaults.
    pub fn with_options(self, options: VaultOptions) -> Self {
        VaultSet { options, ..self }
    }

    /// Reads the registry of a config folder.
    pub fn load(config_dir: &Path, agent: Option<String>, watch: bool) -> Result<Self> {
        Ok(Self::new(Registry::load(&Registry::file_in(config_dir))?, agent, watch))
    }

    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// `list_vaults`: the vaults this agent may use, with its authority on each.
    pub fn list(&self) -> VaultList {
        let agent = self.agent.as_deref();
        let vaults: Vec<VaultEntry> = self
            .registry
            .visible_to(agent)
            .map(|v| VaultEntry {
                name: v.name.clone(),
                vault_type: v.vault_type.name().to_string(),
                description: v.description.clone(),
                restricted: v.restricted,
                authority: v.authority_of(agent).map(|a| a.name().to_string()),
            })
            .collect();
        VaultList { count: vaults.len(), vaults, agent: self.agent.clone() }
    }

    /// The vault `vault_name`, when this agent may use it with `needed` authority for `tool`
    /// and it holds memory of `kind` (opened on first use).
    pub fn open(&self, vault_name: &str, needed: Authority, tool: &str, kind: VaultType) -> Result<Arc<MemoryVault>> {
        let entry = self.registry.authorize(vault_name, self.agent.as_deref(), needed, tool)?;
        if entry.vault_type != VaultType::Any && kind != VaultType::Any && entry.vault_type != kind {
            return Err(Error::WrongVaultType {
                vault_name: entry.name.clone(),
                vault_type: entry.vault_type.name(),
                tool: tool.to_string(),
                needed: kind.name(),
            });
        }
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(vault) = open.get(&entry.name) {
            vault.vault.observe_disk()?;
            return Ok(Arc::clone(vault));
        }
        // The root is never named to the agent: a failure to open names the vault only.
        let vault = Vault::open(&entry.root, self.options.clone())
            .map_err(|error| match error {
                Error::VaultUnusable(_) => Error::VaultUnusable(format!("registered vault '{}'", entry.name)),
                other => other,
            })?
            .writing_for_agent(self.agent.clone());
        if self.watch {
            vault.watch_disk();
        }
        vault.observe_disk()?;
        // A `propose` agent's memory changes are held as proposals (its authority here never
        // changes while the server runs: one agent, one registry).
        let proposes = entry.authority_of(self.agent.as_deref()) == Some(Authority::Propose);
        let vault = Arc::new(if proposes { MemoryVault::proposing(vault) } else { MemoryVault::new(vault) });
        open.insert(entry.name.clone(), Arc::clone(&vault));
        Ok(vault)
    }

    /// Makes every opened vault's deferred writes durable (the server's idle tick and stop).
    pub fn checkpoint_pending(&self) {
        let open: Vec<Arc<MemoryVault>> = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
        for vault in open {
            if vault.vault.has_deferred_writes()
                && let Err(error) = vault.vault.checkpoint_pending()
            {
                tracing::warn!(error = %error, "memory vault checkpoint failed; the next write or open retries");
            }
        }
    }
}
