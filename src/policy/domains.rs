//! The domain registry (reference §6.8): named vault folders with a search priority.
//!
//! Domains come from the policy's `domains` list and from P.O.W.E.R.'s `.power/domains.yaml`
//! (`version: 1`, `domains: [...]`), merged; a name defined twice is an error. Each domain has a
//! lowercase-slug `name`, a vault-relative folder `path`, optional `template` and `rules`
//! (`keywords`, alias `terms` or `contains`; `tags`; `types`; a positive `weight`), and a
//! non-empty `search_priority` of canonical search modes (default `[fts, semantic]`). A
//! malformed registry fails closed (`policy_invalid`, naming the file and the reason). A search
//! with `domain` is scoped to its folder and `auto` follows its priority; `auto` without a
//! domain follows the priority of the domain whose rule keywords the query matches (`route`),
//! without scoping.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::SearchMode;
use crate::error::{Error, Result};

/// P.O.W.E.R.'s registry file, relative to the vault root.
pub(crate) const POWER_DOMAINS_FILE: &str = ".power/domains.yaml";

/// One routing rule of a domain (used to route notes and queries; all lists optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainRule {
    #[serde(default, alias = "terms", alias = "contains")]
    pub keywords: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default = "unit_weight")]
    pub weight: f64,
}

fn unit_weight() -> f64 {
    1.0
}

/// One named domain.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    pub name: String,
    /// Vault-relative folder whose notes belong to the domain.
    pub path: String,
    #[serde(default)]
    pub template: Option<String>,
    #[serde(default)]
    pub rules: Vec<DomainRule>,
    /// What `search_mode=auto` tries, in order, for a search scoped to this domain.
    #[serde(default = "default_priority")]
    pub search_priority: Vec<String>,
}

fn default_priority() -> Vec<String> {
    vec!["fts".into(), "semantic".into()]
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PowerRegistryFile {
    version: u32,
    #[serde(default)]
    domains: Vec<Domain>,
}

/// The merged, validated registry.
#[derive(Debug, Clone, Default)]
pub(crate) struct DomainRegistry {
    pub domains: Vec<Domain>,
}

impl Domain {
    /// The domain's search priority as modes (validated when the registry loads).
    pub fn priority(&self) -> Vec<SearchMode> {
        self.search_priority.iter().filter_map(|m| SearchMode::parse(m).ok()).collect()
    }

    /// The folder prefix without surrounding slashes.
    pub fn folder(&self) -> &str {
        self.path.trim().trim_matches('/')
    }
}

fn validate(domain: &Domain) -> std::result::Result<(), String> {
    let name = &domain.name;
    let slug = !name.is_empty()
        && name.len() <= 64
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !slug {
        return Err(format!("domain name '{name}' is not a lowercase slug (a-z, 0-9, '-', '_')"));
    }
    let folder = domain.folder();
    if folder.is_empty()
        || domain.path.trim().starts_with('/')
        || folder.contains('\\')
        || folder.chars().any(char::is_control)
        || folder.split('/').any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Err(format!("domain '{name}': path '{}' is not a vault-relative folder", domain.path));
    }
    if domain.search_priority.is_empty() {
        return Err(format!("domain '{name}': search_priority must not be empty"));
    }
    for mode in &domain.search_priority {
        let known = SearchMode::CANONICAL.iter().any(|m| m.name() == mode.trim().to_ascii_lowercase()) || mode == "hybrid_reranked";
        if !known {
            let names: Vec<&str> = SearchMode::CANONICAL.iter().map(|m| m.name()).collect();
            return Err(format!("domain '{name}': search_priority mode '{mode}' is not one of {}", names.join(", ")));
        }
    }
    for rule in &domain.rules {
        if !(rule.weight.is_finite() && rule.weight > 0.0) {
            return Err(format!("domain '{name}': rule weight {} must be positive", rule.weight));
        }
    }
    Ok(())
}

impl DomainRegistry {
    /// The policy's domains merged with `<vault>/.power/domains.yaml` when it exists.
    pub fn load(vault_root: &Path, policy_domains: &[Domain]) -> Result<Self> {
        let invalid = |file: &str, line: usize, reason: String| Error::PolicyInvalid { file: file.to_string(), line, reason };
        let mut domains: Vec<Domain> = Vec::new();
        for domain in policy_domains {
            validate(domain).map_err(|reason| invalid("policy domains", 1, reason))?;
            domains.push(domain.clone());
        }
        // Read beneath the root through folder handles: never through a link, never a FIFO
        // or other special file (`store::beneath::read`).
        let text = crate::store::beneath::read(vault_root, POWER_DOMAINS_FILE)?
            .map(|bytes| String::from_utf8(bytes).map_err(|_| invalid(POWER_DOMAINS_FILE, 1, "the file is not UTF-8".into())))
            .transpose()?;
        if let Some(text) = text {
            let parsed: PowerRegistryFile = serde_yaml::from_str(&text)
                .map_err(|e| invalid(POWER_DOMAINS_FILE, e.location().map_or(1, |l| l.line()), e.to_string()))?;
            if parsed.version != 1 {
                return Err(invalid(POWER_DOMAINS_FILE, 1, format!("version {} is not supported (expected 1)", parsed.version)));
            }
            for domain in parsed.domains {
                validate(&domain).map_err(|reason| invalid(POWER_DOMAINS_FILE, 1, reason))?;
                domains.push(domain);
            }
        }
        let mut names: Vec<&str> = domains.iter().map(|d| d.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(invalid(POWER_DOMAINS_FILE, 1, format!("domain '{}' is defined twice (policy and registry file)", pair[0])));
        }
        Ok(DomainRegistry { domains })
    }

    /// The domain whose rules' keywords best match the query's words (sum of the weights of the
    /// rules with a keyword among them, case-insensitive; ties: the first domain), if any.
    pub fn route(&self, query: &str) -> Option<&Domain> {
        let words: Vec<String> = query.split(|c: char| !c.is_alphanumeric() && c != '-' && c != '_').map(str::to_lowercase).collect();
        let mut best: Option<(&Domain, f64)> = None;
        for domain in &self.domains {
            let score: f64 = domain
                .rules
                .iter()
                .filter(|rule| rule.keywords.iter().any(|k| words.iter().any(|w| *w == k.trim().to_lowercase())))
                .map(|rule| rule.weight)
                .sum();
            if score > 0.0 && best.is_none_or(|(_, top)| score > top) {
                best = Some((domain, score));
            }
        }
        best.map(|(domain, _)| domain)
    }

    /// The domain named `name`, or a typed error naming the known ones.
    pub fn get(&self, name: &str) -> Result<&Domain> {
        let wanted = name.trim();
        self.domains.iter().find(|d| d.name == wanted).ok_or_else(|| {
            let reason = if self.domains.is_empty() {
                format!(
                    "'{wanted}' is not a configured domain: none are configured (define them in {POWER_DOMAINS_FILE} or the policy's domains list)"
                )
            } else {
                let known: Vec<&str> = self.domains.iter().map(|d| d.name.as_str()).collect();
                format!("'{wanted}' is not a configured domain; known domains: {}", known.join(", "))
            };
            Error::InvalidArgument { name: "domain", reason }
        })
    }
}
