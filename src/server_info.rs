//! The cheap discovery report (doctor-report-v1 fields, reference §8) that `get_server_info`
//! answers on connect: built from the active generation's manifest and small state files only.
//! It never scans the vault, never lints, never loads a model and never touches the network.

use serde::Serialize;

use crate::error::Result;
use crate::policy::PolicySource;
use crate::search::generation;
use crate::store::layout;
use crate::vault::Vault;

#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo {
    pub schema_version: u32,
    pub command: &'static str,
    pub status: &'static str,
    pub exit_code: u8,
    pub runtime: Runtime,
    pub vault: VaultState,
    pub policy: PolicySource,
    pub embedding: EmbeddingState,
    pub issues: Vec<Issue>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Runtime {
    pub engine: &'static str,
    pub version: &'static str,
    pub platform: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VaultState {
    /// The vault folder's name (never an absolute path).
    pub path_hint: String,
    pub exists: bool,
    /// `active_generation` | `missing` | `unreadable`.
    pub index_state: &'static str,
    pub active_generation: Option<String>,
    pub source_snapshot_hash: Option<String>,
    pub scanned_notes: usize,
    pub indexed_notes: usize,
    pub excluded_notes: Vec<crate::search::generation::Exclusion>,
    /// Receipts so far (the last sequence number).
    pub last_receipt_seq: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingState {
    pub dense_index: Option<serde_json::Value>,
    /// `not_requested`: no model is loaded by this report.
    pub binding: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct Issue {
    pub code: &'static str,
    pub severity: &'static str,
    pub message: String,
    pub remediation: String,
}

fn last_receipt_seq(vault: &Vault) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(layout::join(vault.root(), layout::RECEIPTS)) else { return 0 };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(16 * 1024);
    let mut tail = String::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_string(&mut tail).is_err() {
        return 0;
    }
    tail.lines().rev().find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("seq")?.as_u64()).unwrap_or(0)
}

impl Vault {
    /// The discovery report; O(1) in vault size.
    pub fn server_info(&self) -> Result<ServerInfo> {
        let mut issues = Vec::new();
        let (index_state, manifest) = match generation::read_active(self.root()) {
            Ok(Some(id)) => match generation::read_manifest(self.root(), &id) {
                Ok(m) => ("active_generation", Some(m)),
                Err(e) => {
                    issues.push(Issue {
                        code: "active_generation_unreadable",
                        severity: "error",
                        message: e.to_string(),
                        remediation: "run sync_vault (or `paravault sync`) to publish a fresh generation".into(),
                    });
                    ("unreadable", None)
                }
            },
            Ok(None) => {
                issues.push(Issue {
                    code: "search_index_missing",
                    severity: "warning",
                    message: "no search generation has been published yet".into(),
                    remediation: "run sync_vault (or `paravault sync`); every write also publishes one".into(),
                });
                ("missing", None)
            }
            Err(e) => {
                issues.push(Issue {
                    code: "active_generation_unreadable",
                    severity: "error",
                    message: e.to_string(),
                    remediation: "run sync_vault".into(),
                });
                ("unreadable", None)
            }
        };
        if let Some(m) = manifest.as_ref().filter(|m| !m.exclusions.is_empty()) {
            issues.push(Issue {
                code: "notes_excluded",
                severity: "warning",
                message: format!("{} notes are excluded from search (each is named in vault.excluded_notes)", m.exclusions.len()),
                remediation: "run lint_vault, fix the named fields (or heal_frontmatter_tool), then sync_vault".into(),
            });
        }
        let status = if issues.iter().any(|i| i.severity == "error") {
            "error"
        } else if issues.is_empty() {
            "ok"
        } else {
            "degraded"
        };
        Ok(ServerInfo {
            schema_version: 1,
            command: "doctor",
            status,
            exit_code: u8::from(status != "ok"),
            runtime: Runtime {
                engine: "paravault",
                version: env!("CARGO_PKG_VERSION"),
                platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
            },
            vault: VaultState {
                path_hint: self.root().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                exists: self.root().is_dir(),
                index_state,
                active_generation: manifest.as_ref().map(|m| m.generation_id.clone()),
                source_snapshot_hash: manifest.as_ref().map(|m| m.source_snapshot_hash.clone()),
                scanned_notes: manifest.as_ref().map_or(0, |m| m.counts.scanned),
                indexed_notes: manifest.as_ref().map_or(0, |m| m.counts.indexed),
                excluded_notes: manifest.as_ref().map(|m| m.exclusions.clone()).unwrap_or_default(),
                last_receipt_seq: last_receipt_seq(self),
            },
            policy: self.policy().source.clone(),
            embedding: EmbeddingState {
                dense_index: manifest.as_ref().and_then(|m| m.dense.as_ref()).and_then(|d| serde_json::to_value(d).ok()),
                binding: "not_requested",
            },
            issues,
        })
    }
}
