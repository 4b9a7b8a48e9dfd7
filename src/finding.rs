//! A named lint finding and its severity: the leaf type the lint rules produce, policy weighs and
//! a gate rejection (`Error::GateRejected`) carries, so `error` needs nothing above it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a lint finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Blocking,
}

/// One named finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub path: String,
    // Absent, never null, on the wire: the schema says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub line: Option<usize>,
    pub message: String,
    /// The link target, for link findings.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub target: Option<String>,
    /// Candidate paths, for ambiguous links.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
}
