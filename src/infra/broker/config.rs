//! The INFRA-1 broker's configuration: the targets a person allows, each a git remote *name* of
//! the vault (its URL stays in git's own configuration, never read here), with its approval and
//! dry-run policies, the caller principals that may ask, and named profiles that override them.
//!
//! ```yaml
//! schema: paravault.broker.v1
//! targets:
//!   backup-1:
//!     remote: origin            # a remote `paravault remote add` configured
//!     approval: explicit        # standing | explicit (a person approves each replicate)
//!     dry_run_policy: required  # required | standing (a replicate needs a fresh dry run)
//!     principals: ["uid:1000"]  # callers (SO_PEERCRED) allowed to ask for this target
//!     profiles:                 # optional; a request naming another profile is refused
//!       nightly: { approval: standing, dry_run_policy: standing }
//! ```
//!
//! The file is the person's: it must be a regular file (not a link) owned by the user the
//! broker runs as and writable by nobody else, like ssh's own configuration. Unknown keys are
//! refused. The broker re-reads it for every request, so an edit applies at once and an edit
//! that breaks it blocks every request with `POLICY_INVALID` until it is fixed.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::infra::valid_identifier;

/// The schema line the configuration must carry.
pub const CONFIG_SCHEMA: &str = "paravault.broker.v1";

/// Who approves a target's `replicate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// The person approved replication to this target once and for all (this file).
    Standing,
    /// Each replicate needs `approval_ref`: a proposal a person approved with
    /// `paravault approve` (or the web UI), used once.
    Explicit,
}

/// Whether a target's `replicate` needs a dry run first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DryRunPolicy {
    /// An `rsync-dry-run` of the target must have seen the vault and the remote as they are.
    Required,
    /// No dry run needed.
    Standing,
}

/// The broker's configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerConfig {
    pub schema: String,
    pub targets: BTreeMap<String, Target>,
}

/// One target a caller may name.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The vault's git remote name (`paravault remote add NAME URL`).
    pub remote: String,
    pub approval: ApprovalPolicy,
    pub dry_run_policy: DryRunPolicy,
    /// `uid:<n>` of each caller allowed to ask for this target.
    pub principals: Vec<String>,
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// A named profile of a target: overrides of its policies.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default)]
    pub approval: Option<ApprovalPolicy>,
    #[serde(default)]
    pub dry_run_policy: Option<DryRunPolicy>,
}

/// The policies a request runs under: its target's, with its profile's overrides.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub remote: String,
    pub approval: ApprovalPolicy,
    pub dry_run_policy: DryRunPolicy,
}

/// Why a request is refused by the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    TargetNotAllowed,
    PrincipalDenied,
    ProfileNotFound,
}

fn valid_remote_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('-') && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn valid_principal(principal: &str) -> bool {
    principal.strip_prefix("uid:").is_some_and(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()))
}

impl BrokerConfig {
    /// Parses and checks the configuration's text.
    pub fn parse(text: &str) -> Result<BrokerConfig, String> {
        let config: BrokerConfig = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        config.check()?;
        Ok(config)
    }

    /// Reads `path` (a regular file owned by this user and writable by nobody else) and parses it.
    pub fn load(path: &Path) -> Result<BrokerConfig, String> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot read it ({e})"))?;
        if !meta.file_type().is_file() {
            return Err("it is not a regular file (a link is refused)".into());
        }
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return Err(format!("it is owned by uid {}, not by uid {me} that the broker runs as", meta.uid()));
        }
        if meta.mode() & 0o022 != 0 {
            return Err("it is writable by its group or by others (chmod go-w)".into());
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it ({e})"))?;
        BrokerConfig::parse(&text)
    }

    fn check(&self) -> Result<(), String> {
        if self.schema != CONFIG_SCHEMA {
            return Err(format!("schema must be {CONFIG_SCHEMA}"));
        }
        if self.targets.is_empty() {
            return Err("no target is configured".into());
        }
        for (id, target) in &self.targets {
            if !valid_identifier(id) {
                return Err(format!("target '{id}' is not an identifier (^[A-Za-z0-9._:-]{{1,128}}$)"));
            }
            if !valid_remote_name(&target.remote) {
                return Err(format!("target '{id}': remote must be a git remote name (letters, digits, '.', '_', '-'), never a URL"));
            }
            if target.principals.is_empty() {
                return Err(format!("target '{id}': principals lists nobody"));
            }
            if let Some(bad) = target.principals.iter().find(|p| !valid_principal(p)) {
                return Err(format!("target '{id}': principal '{bad}' is not uid:<n>"));
            }
            if let Some(bad) = target.profiles.keys().find(|p| !valid_identifier(p)) {
                return Err(format!("target '{id}': profile '{bad}' is not an identifier"));
            }
        }
        Ok(())
    }

    /// Whether `principal` may ask for any target at all.
    pub fn knows_principal(&self, principal: &str) -> bool {
        self.targets.values().any(|t| t.principals.iter().any(|p| p == principal))
    }

    /// The policies `principal` asking for `target` with `profile` runs under.
    pub fn resolve(&self, principal: &str, target: &str, profile: Option<&str>) -> Result<Resolved, Refusal> {
        let found = self.targets.get(target).ok_or(Refusal::TargetNotAllowed)?;
        if !found.principals.iter().any(|p| p == principal) {
            return Err(Refusal::PrincipalDenied);
        }
        let overrides = match profile {
            Some(name) => found.profiles.get(name).cloned().ok_or(Refusal::ProfileNotFound)?,
            None => Profile::default(),
        };
        Ok(Resolved {
            remote: found.remote.clone(),
            approval: overrides.approval.unwrap_or(found.approval),
            dry_run_policy: overrides.dry_run_policy.unwrap_or(found.dry_run_policy),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "schema: paravault.broker.v1\ntargets:\n  backup-1:\n    remote: origin\n    approval: explicit\n    dry_run_policy: required\n    principals: ['uid:1000']\n    profiles:\n      nightly: { approval: standing }\n";

    #[test]
    fn a_good_configuration_resolves_targets_principals_and_profiles() {
        let config = BrokerConfig::parse(GOOD).unwrap();
        let plain = config.resolve("uid:1000", "backup-1", None).unwrap();
        assert_eq!(
            (plain.approval, plain.dry_run_policy, plain.remote.as_str()),
            (ApprovalPolicy::Explicit, DryRunPolicy::Required, "origin")
        );
        let nightly = config.resolve("uid:1000", "backup-1", Some("nightly")).unwrap();
        assert_eq!((nightly.approval, nightly.dry_run_policy), (ApprovalPolicy::Standing, DryRunPolicy::Required));
        assert_eq!(config.resolve("uid:1000", "backup-2", None).unwrap_err(), Refusal::TargetNotAllowed);
        assert_eq!(config.resolve("uid:1001", "backup-1", None).unwrap_err(), Refusal::PrincipalDenied);
        assert_eq!(config.resolve("uid:1000", "backup-1", Some("weekly")).unwrap_err(), Refusal::ProfileNotFound);
        assert!(config.knows_principal("uid:1000") && !config.knows_principal("uid:0"));
    }

    #[test]
    fn bad_configurations_are_refused_with_a_reason() {
        for (bad, why) in [
            (GOOD.replace("paravault.broker.v1", "v2"), "schema"),
            (GOOD.replace("remote: origin", "remote: 'ssh://host/x.git'"), "never a URL"),
            (GOOD.replace("['uid:1000']", "[]"), "nobody"),
            (GOOD.replace("uid:1000", "root"), "uid:<n>"),
            (GOOD.replace("approval: explicit", "approval: sometimes"), "unknown variant"),
            (GOOD.replace("    remote: origin\n", "    remote: origin\n    host: example.org\n"), "unknown field"),
            ("schema: paravault.broker.v1\ntargets: {}\n".to_string(), "no target"),
            (GOOD.replace("backup-1:", "'back up':"), "identifier"),
        ] {
            let error = BrokerConfig::parse(&bad).unwrap_err();
            assert!(error.contains(why), "{why}: {error}");
        }
    }
}
