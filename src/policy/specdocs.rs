//! The `specdocs` policy section: where each vaultspec document type lives and how it is
//! written (the engine is `crate::specdocs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where one document type lives and how it is written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DocTypePolicy {
    /// Folder pattern with `{feature}`.
    pub folder: String,
    /// The OKF `type` of the note.
    pub note_type: String,
    /// Whether `create` may scaffold it.
    pub creatable: bool,
    /// Whether `find` searches it when no type filter is given.
    pub searched_by_default: bool,
    /// Whether a `topic` filename infix is allowed.
    pub topic: bool,
    /// Document types of the same feature that must exist first (lifecycle dependencies).
    pub requires: Vec<String>,
}

/// The `specdocs` section of the policy.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpecdocsPolicy {
    pub types: BTreeMap<String, DocTypePolicy>,
    /// The feature index path pattern, with `{feature}`.
    pub index_path: String,
    pub templates_folder: String,
    pub sampled_successes: usize,
    pub default_tier: String,
    /// CLI verbs `discover` never lists and `invoke` never runs (those that install, serve,
    /// approve, change the server's configuration or the vault registry, or run commands).
    pub gateway_denylist: Vec<String>,
    /// Flags `invoke` refuses by name for every verb and `discover` withholds (each makes a
    /// verb read or run something outside the vault).
    pub gateway_refused_flags: Vec<String>,
    /// `invoke`'s timeout when the call names none, in seconds.
    pub gateway_timeout_s: f64,
    /// The largest timeout a call may ask for, in seconds.
    pub gateway_timeout_max_s: f64,
    /// Standard output kept from one invocation; the rest is read and dropped.
    pub gateway_stdout_bytes_max: usize,
    /// Standard error kept from one invocation (the tail of `error.stderr`).
    pub gateway_stderr_bytes_max: usize,
}
