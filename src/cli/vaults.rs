//! `paravault vaults add|list|remove`: the vault registry of the ctxvault surface, kept in the
//! user's config folder (`user_config::config_dir`), never inside a vault.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value, json};

use crate::api::memory::registry::{Authority, RegisteredVault, Registry, VaultType};
use crate::error::{Error, Result};

#[derive(Debug, Subcommand)]
pub enum VaultsAction {
    /// Register a vault under a name (its folder must exist; nothing in it is changed).
    Add {
        /// A plain name: ASCII letters, digits, '_', '-', '.'.
        name: String,
        /// The vault's root folder.
        root: PathBuf,
        /// What it holds: any (default), semantic, skill or episodic.
        #[arg(long = "type", default_value = "any")]
        vault_type: String,
        /// Answer only the agents attached with --agent.
        #[arg(long)]
        restricted: bool,
        /// An attached agent and its authority, NAME=read-only|propose|apply (repeatable).
        #[arg(long = "agent", value_name = "NAME=AUTHORITY")]
        agents: Vec<String>,
        /// What the vault is for (list_vaults shows it to agents).
        #[arg(long, default_value = "")]
        description: String,
        /// Replace an entry of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// The registered vaults.
    List,
    /// Forget a vault (its files are never touched).
    Remove {
        /// The registered name (`paravault vaults list`).
        name: String,
    },
}

fn attached(pairs: &[String]) -> Result<BTreeMap<String, Authority>> {
    let mut agents = BTreeMap::new();
    for pair in pairs {
        let (name, authority) = pair
            .split_once('=')
            .ok_or_else(|| Error::InvalidArgument { name: "agent", reason: format!("'{pair}' is not NAME=read-only|propose|apply") })?;
        agents.insert(name.trim().to_string(), Authority::parse(authority)?);
    }
    Ok(agents)
}

fn entry_json(v: &RegisteredVault) -> Value {
    json!({
        "name": v.name, "root": v.root.display().to_string(), "type": v.vault_type.name(), "restricted": v.restricted,
        "agents": v.agents.iter().map(|(a, x)| (a.clone(), json!(x.name()))).collect::<serde_json::Map<_, _>>(),
        "description": v.description,
    })
}

/// Runs one registry action and returns its JSON report.
pub fn run(action: &VaultsAction) -> Result<(Value, String)> {
    let file = Registry::file_in(&crate::api::memory::config_dir()?);
    let mut registry = Registry::load(&file)?;
    match action {
        VaultsAction::Add { name, root, vault_type, restricted, agents, description, replace } => {
            let root =
                root.canonicalize().map_err(|e| Error::InvalidArgument { name: "root", reason: format!("'{}': {e}", root.display()) })?;
            let agents = attached(agents)?;
            if !*restricted && !agents.is_empty() {
                return Err(Error::InvalidArgument {
                    name: "agent",
                    reason: "agents are attached to restricted vaults only (add --restricted)".into(),
                });
            }
            let entry = RegisteredVault {
                name: name.clone(),
                root,
                vault_type: VaultType::parse(vault_type)?,
                restricted: *restricted,
                agents,
                description: description.clone(),
            };
            let report = entry_json(&entry);
            registry.add(entry, *replace)?;
            registry.save(&file)?;
            let summary = format!("registered vault {name} in {}", file.display());
            Ok((json!({"added": report, "registry": file.display().to_string()}), summary))
        }
        VaultsAction::List => {
            let summary = format!("vaults registered in {}: {}", file.display(), registry.vaults.len());
            Ok((
                json!({"vaults": registry.vaults.values().map(entry_json).collect::<Vec<_>>(), "registry": file.display().to_string()}),
                summary,
            ))
        }
        VaultsAction::Remove { name } => {
            if !registry.remove(name) {
                return Err(Error::InvalidArgument { name: "name", reason: format!("no vault named '{name}' is registered") });
            }
            registry.save(&file)?;
            let summary = format!("removed vault {name} from {}", file.display());
            Ok((json!({"removed": name, "registry": file.display().to_string()}), summary))
        }
    }
}
