//! The one doctor report (doctor-report-v1 fields, reference §8): `get_server_info` answers its
//! cheap form on connect, `paravault doctor` (and the web dashboard) the same report with the
//! whole-vault check added.
//!
//! The cheap form is built from the active generation's manifest and small state files only: it
//! never scans the vault, never lints and never touches the network; it loads the model only when
//! a provider probe is asked for (`server_info_with(true)`), and that probe never downloads. The
//! whole-vault check (`doctor()`) reads every note through the inventory and lints it.

use schemars::JsonSchema;
use serde::Serialize;

use crate::embed::{ModelConfig, ModelEnv, ModelHandle};
use crate::error::{Error, Result};
use crate::policy::{EgressPolicy, PolicySource};
use crate::search::generation;
use crate::store::layout;
use crate::vault::Vault;

/// The doctor report. `vault_check` is present only when the whole vault was checked
/// (`Vault::doctor`); without it the report is exactly the doctor-report-v1 of `get_server_info`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DoctorReport {
    /// Version of the doctor-report-v1 shape (1).
    pub schema_version: u32,
    /// `doctor`.
    pub command: &'static str,
    /// `error` when any issue is an error, `degraded` when there is any other issue, else `ok`.
    #[schemars(extend("enum" = ["ok", "degraded", "error"]))]
    pub status: &'static str,
    /// 0 when the status is `ok`, else 1.
    pub exit_code: u8,
    /// The engine answering.
    pub runtime: Runtime,
    /// How inference is configured.
    pub configuration: Configuration,
    /// The vault and its active search generation.
    pub vault: VaultState,
    /// Where the effective policy came from.
    pub policy: PolicySource,
    /// The embedding model and the dense index.
    pub embedding: EmbeddingState,
    /// What needs attention, each with its remediation.
    pub issues: Vec<Issue>,
    /// On a replica: the team commit its answers reflect and how far behind the remote it was
    /// when it last looked (absent on a vault that is not a replica).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<crate::search::ReplicaFreshness>,
    /// The whole-vault check (`paravault doctor` and the web dashboard only; `get_server_info`
    /// never has it, so its schema leaves it out).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub vault_check: Option<VaultCheck>,
}

/// What a whole-vault check found (`paravault doctor`): counts from reading every note, the lint
/// summary, the configured model's sources, and the state the answer was computed from.
#[derive(Debug, Clone, Serialize)]
pub struct VaultCheck {
    /// The vault root as this process opened it (the person's own CLI; `get_server_info` never
    /// reveals a path).
    pub path: String,
    pub notes: usize,
    pub notes_valid: usize,
    pub notes_invalid: usize,
    pub system_pages: usize,
    pub files: usize,
    /// Notes with invalid metadata (excluded from catalogs and search), each with its reasons.
    pub invalid_notes: Vec<Exclusion>,
    pub lint: LintSummary,
    /// The configured model: sources in resolution order (existence only) and what this process
    /// has bound.
    pub embedding_configured: crate::embed::ModelDescription,
    /// How this process keeps its model equal to the disk, and the leftovers it removed.
    pub freshness: crate::vault::Freshness,
    pub computed_from: crate::inventory::ComputedFrom,
    /// Whether the vault's folder journal (`paravault watch`) answered (without one, one-shot
    /// writes stat every folder).
    pub folder_journal_running: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Exclusion {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct LintSummary {
    pub blocking: bool,
    pub counts: std::collections::BTreeMap<&'static str, usize>,
}

/// The engine answering.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Runtime {
    /// `paravault`.
    pub engine: &'static str,
    /// The engine's version.
    pub version: &'static str,
    /// `<os>-<arch>` of the build.
    pub platform: String,
    /// The P.O.W.E.R. (power-framework) release whose MCP contract this engine serves (seed
    /// 004): what a P.O.W.E.R. agent compares to detect version skew.
    pub power_framework: &'static str,
}

/// The P.O.W.E.R. release whose contract the default surface serves (`Runtime::power_framework`).
pub const POWER_FRAMEWORK_CONTRACT: &str = "3.7.11";

/// How inference is configured (from the policy and the environment; nothing is loaded).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Configuration {
    /// Where embeddings are computed (`cpu`).
    pub embed_device: &'static str,
    /// Threads the embedder may use.
    pub embed_threads: usize,
    /// No reranker model exists in this engine.
    pub reranker_device: Option<&'static str>,
    /// Whether the engine may reach the network (model downloads only).
    pub egress: EgressPolicy,
}

/// The vault and its active search generation.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VaultState {
    /// The configured vault root, absolute and resolved (doctor report v1): what a `vault_path`
    /// argument must resolve to.
    pub path: String,
    /// The vault folder's name.
    pub path_hint: String,
    /// First 16 hex digits of the sha256 of the canonical root path: stable while the vault
    /// stays where it is, and reveals no path.
    pub vault_id: String,
    /// Whether the vault root exists.
    pub exists: bool,
    /// Whether the vault root is a folder.
    pub is_directory: bool,
    /// The search index, vault-relative.
    pub database_path: &'static str,
    /// `active_generation` | `missing` | `unreadable`.
    #[schemars(extend("enum" = ["active_generation", "missing", "unreadable"]))]
    pub index_state: &'static str,
    /// The active search generation's id (null without one).
    pub active_generation: Option<String>,
    /// The hash of the vault state the active generation was built from (null without one).
    pub source_snapshot_hash: Option<String>,
    /// Notes the active generation scanned.
    pub scanned_notes: usize,
    /// Notes the active generation indexed.
    pub indexed_notes: usize,
    /// Section documents of the active generation (from its recorded tantivy commit).
    pub indexed_chunks: Option<u64>,
    /// Notes the active generation left out, and why.
    pub excluded_notes: Vec<crate::search::generation::Exclusion>,
    /// Receipts so far (the last sequence number).
    pub last_receipt_seq: u64,
    /// Writes committed after the active generation: searches serve them from the journal's
    /// tail (generation `<active_generation>+<seq>`) until the writer folds them into a new
    /// generation (every `search.tail_writes_max` writes).
    pub tail_writes: usize,
    /// Proposals waiting for a person's decision under the policy's `approvals:` rules (reads
    /// the stored proposals: O(proposals)). None when they cannot be read.
    pub pending_approvals: Option<usize>,
}

/// The embedding model and the dense index.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EmbeddingState {
    /// The inference provider (`candle-cpu`).
    pub provider: &'static str,
    /// The device asked for (`cpu`).
    pub requested_device: &'static str,
    /// The providers this build has.
    pub available_providers: Vec<&'static str>,
    /// `repo@revision` from the policy.
    pub model: String,
    /// Whether every model file is present where the policy and environment point (file
    /// existence only: nothing is read or hashed).
    pub model_cached: bool,
    /// The active generation's dense index (null without one: semantic modes answer lexically
    /// or fail closed).
    pub dense_index: Option<crate::search::dense::DenseManifest>,
    /// Doctor report v1's values: `not_requested` (no model is loaded by this report; the
    /// `embedding_binding_not_requested` issue says so), `verified` (the probe loaded the model
    /// and verified its files), `not_verified` (the probe found no model files offline) or
    /// `failed` (the files are there but did not verify or load; an issue says why).
    #[schemars(extend("enum" = ["not_requested", "verified", "not_verified", "failed"]))]
    pub binding: &'static str,
    /// The provider the probe bound the model with (null unless `bound`).
    pub bound_provider: Option<&'static str>,
    /// Whether a provider probe was asked for (`probe_provider`).
    pub probe_requested: bool,
    /// How long the probe took, in seconds (null without a probe).
    pub probe_seconds: Option<f64>,
}

/// Something that needs attention.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Issue {
    /// A stable issue code.
    pub code: &'static str,
    /// `warning` or `error`.
    #[schemars(extend("enum" = ["warning", "error"]))]
    pub severity: &'static str,
    /// What was found.
    pub message: String,
    /// What to do about it.
    pub remediation: String,
}

fn vault_id(root: &std::path::Path) -> String {
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    crate::write::sha256_hex(canonical.to_string_lossy().as_bytes())[..16].to_string()
}

/// The last receipt's sequence number, read again only when the receipt log's stamp moved
/// (the log is only appended to: every receipt changes its length).
fn last_receipt_seq(vault: &Vault) -> u64 {
    let root = vault.root();
    let stamp = file_stamp(&layout::join(root, layout::RECEIPTS));
    if let Some((known, seq)) = lock_seen(&SEEN).get(root).and_then(|s| s.receipts)
        && Some(known) == stamp
    {
        return seq;
    }
    let seq = read_last_receipt_seq(vault);
    if let Some(stamp) = stamp {
        lock_seen(&SEEN).entry(root.to_path_buf()).or_default().receipts = Some((stamp, seq));
    }
    seq
}

fn read_last_receipt_seq(vault: &Vault) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = crate::store::durable::open_engine_read(vault.root(), &layout::join(vault.root(), layout::RECEIPTS)) else {
        return 0;
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(16 * 1024);
    let mut tail = String::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_string(&mut tail).is_err() {
        return 0;
    }
    tail.lines().rev().find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("seq")?.as_u64()).unwrap_or(0)
}

/// Live documents of a recorded tantivy `meta.json`: Σ (max_doc − deleted) over its segments.
fn live_docs(tantivy_meta: &str) -> Option<u64> {
    let meta: serde_json::Value = serde_json::from_str(tantivy_meta).ok()?;
    meta.get("segments")?.as_array()?.iter().try_fold(0u64, |sum, segment| {
        let max_doc = segment.get("max_doc")?.as_u64()?;
        let deleted = segment.get("deletes").and_then(|d| d.get("num_deleted_docs")).and_then(serde_json::Value::as_u64).unwrap_or(0);
        Some(sum + max_doc.saturating_sub(deleted))
    })
}

const PROVIDER: &str = "candle-cpu";

impl Vault {
    /// The discovery report; O(1) in vault size. Loads no model.
    pub fn server_info(&self) -> Result<DoctorReport> {
        self.server_info_with(false)
    }

    /// The discovery report; with `probe_provider` it also resolves, verifies and loads the
    /// configured model offline (egress forced to `deny`: a missing model is reported, never
    /// downloaded) and reports the binding. O(1) in vault size either way.
    pub(crate) fn server_info_with(&self, probe_provider: bool) -> Result<DoctorReport> {
        let mut issues = Vec::new();
        let (index_state, manifest) = match seen_active(self.root()) {
            Ok(Some(id)) => match seen_manifest(self.root(), &id) {
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
        let mut config = ModelConfig::from_policy(&self.policy().policy, Some(self.root()), &ModelEnv::from_process());
        let configuration = Configuration {
            embed_device: "cpu",
            embed_threads: config.threads,
            reranker_device: None,
            egress: self.policy().policy.egress,
        };
        let described = ModelHandle::new(config.clone()).describe();
        let mut embedding = EmbeddingState {
            provider: PROVIDER,
            requested_device: "cpu",
            available_providers: vec![PROVIDER],
            model: config.id.to_string(),
            model_cached: described.sources.iter().any(|s| s.files_present),
            dense_index: manifest.as_ref().and_then(|m| m.dense.clone()),
            binding: "not_requested",
            bound_provider: None,
            probe_requested: probe_provider,
            probe_seconds: None,
        };
        if !probe_provider {
            // Doctor report v1: a configured model is not a bound one, and this report says so.
            issues.push(Issue {
                code: "embedding_binding_not_requested",
                severity: "warning",
                message: "the embedding model was not loaded by this read-only discovery call (its binding is unverified)".into(),
                remediation: "call get_server_info with probe_provider=true (loads the model offline, never downloads)".into(),
            });
        }
        if probe_provider {
            config.egress = EgressPolicy::Deny;
            let started = std::time::Instant::now();
            let loaded = ModelHandle::new(config).model();
            embedding.probe_seconds = Some((started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0);
            match loaded {
                Ok(_) => {
                    embedding.binding = "verified";
                    embedding.bound_provider = Some(PROVIDER);
                }
                Err(e) => {
                    embedding.binding =
                        if matches!(e, Error::ModelUnavailable { .. } | Error::EgressDenied { .. }) { "not_verified" } else { "failed" };
                    issues.push(Issue {
                        code: "embedding_model_unavailable",
                        severity: "warning",
                        message: e.to_string(),
                        remediation:
                            "provide the pinned model files offline (embedding.local_dir, PARAVAULT_MODEL_DIR or the Hugging Face \
                                      cache); semantic modes stay unavailable until then"
                                .into(),
                    });
                }
            }
        }
        let replica = crate::write::replica::freshness(self.root());
        if let Some(error) = replica.as_ref().and_then(|r| r.last_error.as_ref()) {
            issues.push(Issue {
                code: "replication_failing",
                severity: "warning",
                message: format!("the last `replicate` failed ({error}); answers reflect the team history as of replica.looked_at"),
                remediation: "run `paravault replicate` (its error says what to fix: the network, the remote, a push the gate refused)"
                    .into(),
            });
        }
        let status = status_of(&issues);
        Ok(DoctorReport {
            schema_version: 1,
            command: "doctor",
            status,
            exit_code: u8::from(status != "ok"),
            runtime: Runtime {
                engine: "paravault",
                version: env!("CARGO_PKG_VERSION"),
                platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
                power_framework: POWER_FRAMEWORK_CONTRACT,
            },
            configuration,
            vault: VaultState {
                path: self.root().canonicalize().unwrap_or_else(|_| self.root().to_path_buf()).display().to_string(),
                path_hint: self.root().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                vault_id: vault_id(self.root()),
                exists: self.root().exists(),
                is_directory: self.root().is_dir(),
                database_path: layout::SEARCH_INDEX_DIR,
                index_state,
                active_generation: manifest.as_ref().map(|m| m.generation_id.clone()),
                source_snapshot_hash: manifest.as_ref().map(|m| m.source_snapshot_hash.clone()),
                scanned_notes: manifest.as_ref().map_or(0, |m| m.counts.scanned),
                indexed_notes: manifest.as_ref().map_or(0, |m| m.counts.indexed),
                indexed_chunks: manifest.as_ref().and_then(|m| m.live_docs.map(|docs| docs.saturating_sub(m.counts.indexed as u64))),
                excluded_notes: manifest.as_ref().map(|m| m.exclusions.clone()).unwrap_or_default(),
                last_receipt_seq: last_receipt_seq(self),
                pending_approvals: self.pending_approvals().ok(),
                tail_writes: manifest.as_ref().map_or(0, |m| tail_writes(self.root(), m)),
            },
            policy: self.policy().source.clone(),
            embedding,
            issues,
            replica,
            vault_check: None,
        })
    }

    /// The doctor report with the whole-vault check: every note read (through the inventory)
    /// and linted (the lint summary is kept while the model does not move,
    /// `Vault::health_summary`). The manifest-based `notes_excluded` issue is replaced by the check's own count
    /// (the disk now, not the last generation).
    pub fn doctor(&self) -> Result<DoctorReport> {
        let lint = self.health_summary()?;
        self.doctor_with(lint)
    }

    /// The doctor report for a page that must not wait for a whole lint: the lint part is the
    /// latest health summary computed (`Vault::health_summary_latest`), computed now only when
    /// there is none yet. `true` when it is for the model now; `false`: it is older (its
    /// `computed_from` says what it was computed from) and the caller refreshes it
    /// (`health_summary`).
    pub fn doctor_latest(&self) -> Result<(DoctorReport, bool)> {
        match self.health_summary_latest()? {
            Some((lint, current)) => Ok((self.doctor_with(lint)?, current)),
            None => Ok((self.doctor()?, true)),
        }
    }

    fn doctor_with(&self, lint: crate::vault::HealthSummary) -> Result<DoctorReport> {
        let mut report = self.server_info_with(false)?;
        let check = self.with_inventory(|inv| {
            let notes: Vec<_> = inv.notes().collect();
            VaultCheck {
                path: self.root().display().to_string(),
                notes: notes.len(),
                notes_valid: notes.iter().filter(|r| r.valid).count(),
                notes_invalid: notes.iter().filter(|r| !r.valid).count(),
                system_pages: inv.records.len() - notes.len(),
                files: inv.files.len(),
                invalid_notes: notes
                    .iter()
                    .filter(|r| !r.valid)
                    .map(|r| Exclusion {
                        path: r.path.to_string(),
                        reason: r.problems.iter().map(|p| format!("{}: {}", p.rule, p.message)).collect::<Vec<_>>().join("; "),
                    })
                    .collect(),
                lint: LintSummary { blocking: lint.blocking, counts: lint.counts.clone() },
                embedding_configured: crate::embed::vault_handle(&self.policy().policy, self.root()).describe(),
                freshness: self.freshness(),
                computed_from: lint.computed_from.clone(),
                folder_journal_running: crate::folder_journal::ask(self.root(), None).is_some(),
            }
        })?;
        let issues = &mut report.issues;
        // A person's whole-vault check: an unprobed binding is not a finding about the vault
        // (semantic search and dense syncs check the model themselves), so it leaves `doctor`'s
        // status and exit code alone.
        issues.retain(|i| i.code != "notes_excluded" && i.code != "embedding_binding_not_requested");
        if check.notes_invalid > 0 {
            issues.push(Issue {
                code: "notes_excluded",
                severity: "warning",
                message: format!("{} notes have invalid metadata and are excluded from catalogs and search", check.notes_invalid),
                remediation: "run `paravault lint` and fix the named fields (or `paravault heal`)".into(),
            });
        }
        if lint.blocking {
            issues.push(Issue {
                code: "lint_blocking",
                severity: "warning",
                message: "the vault has blocking lint findings (writes to the affected notes will be refused)".into(),
                remediation: "run `paravault lint` for the list".into(),
            });
        }
        let configured = &check.embedding_configured;
        if let Some(d) = &report.embedding.dense_index {
            if !configured.sources.iter().any(|s| s.files_present) && configured.bound.is_none() {
                issues.push(Issue {
                    code: "embedding_model_missing",
                    severity: "error",
                    message: format!(
                        "the active generation has a dense index ({} chunks, {}) but no configured source holds the model files: semantic and hybrid search cannot run, and writes land without their vectors (owed until a dense sync)",
                        d.chunks, d.model
                    ),
                    remediation: "put the model in embedding.local_dir or PARAVAULT_MODEL_DIR (see docs/embedding.md), or run `paravault sync --accept-dense-loss`".into(),
                });
            }
            if !d.owed.is_empty() {
                issues.push(Issue {
                    code: "vectors_owed",
                    severity: "warning",
                    message: format!(
                        "{} notes have no dense vectors yet (written while the embedding model was unavailable): semantic results cannot include them, keyword search does",
                        d.owed.len()
                    ),
                    remediation: "run `paravault sync --dense` where the model is found (or write with the model: the next write embeds them)".into(),
                });
            }
            if d.model != configured.model || d.max_tokens != configured.max_tokens {
                issues.push(Issue {
                    code: "embedding_model_changed",
                    severity: "error",
                    message: format!(
                        "the dense index was built with {} (cut {}), the policy names {} (cut {})",
                        d.model, d.max_tokens, configured.model, configured.max_tokens
                    ),
                    remediation: "run `paravault sync --dense --force-rebuild`".into(),
                });
            }
        }
        report.status = status_of(&report.issues);
        report.exit_code = u8::from(report.status != "ok");
        report.vault_check = Some(check);
        Ok(report)
    }
}

/// `error` if any issue is an error, `degraded` if there is any issue, else `ok`.
fn status_of(issues: &[Issue]) -> &'static str {
    if issues.iter().any(|i| i.severity == "error") {
        "error"
    } else if issues.is_empty() {
        "ok"
    } else {
        "degraded"
    }
}

/// Committed intents after `manifest`'s generation (0 when the journal cannot be read: the
/// doctor report never fails on it). The journal is read again only when its stamp moved, and
/// then only from where the last read ended (`journal::read_committed_since`): a write appends
/// an intent with the texts of every catalog page it rewrote, and the report needs only the
/// records' heads.
fn tail_writes(root: &std::path::Path, manifest: &generation::Manifest) -> usize {
    if !crate::search::tail::servable(manifest) {
        return 0;
    }
    let known = lock_seen(&SEEN).get_mut(root).and_then(|s| s.tail.take());
    let stamp = crate::store::journal::JournalStamp::read(root).ok().flatten();
    let tail = match known {
        Some(known) if Some(known.stamp) == stamp => known,
        known => match crate::store::journal::read_committed_since(root, known.as_ref().map(|k| &k.cursor)) {
            Ok(Some(read)) => {
                let mut heads = match known {
                    Some(known) if !read.whole => known.heads,
                    _ => Vec::new(),
                };
                heads.extend(read.records.iter().map(|r| (r.seq(), r.done())));
                SeenTail { stamp: read.stamp, cursor: read.cursor, heads }
            }
            _ => return 0,
        },
    };
    let count = crate::search::tail::count_heads_after(tail.heads.iter().copied(), manifest.covers_seq);
    lock_seen(&SEEN).entry(root.to_path_buf()).or_default().tail = Some(tail);
    count
}

/// The journal as the report last read it: its stamp then, where the read ended, and each
/// record's sequence number and `StoredRecord::done`.
struct SeenTail {
    stamp: crate::store::journal::JournalStamp,
    cursor: crate::store::journal::JournalCursor,
    heads: Vec<(u64, Option<bool>)>,
}

/// What the cheap report read of a vault's state files, kept per vault root with the identity
/// of what it was read from: `get_server_info` is asked often, and the active manifest (its
/// exclusions and tantivy commit, parsed) and the journal (up to `search.tail_writes_max`
/// intents, each with the texts of the catalog pages it rewrote) change only with a publish
/// or a write.
#[derive(Default)]
struct Seen {
    /// (generation id, the manifest file's stamp, the manifest with its live document count).
    manifest: Option<(String, FileStamp, std::sync::Arc<SeenManifest>)>,
    /// The journal's records' heads, kept to be read on from where the last read ended.
    tail: Option<SeenTail>,
    /// (the `ACTIVE` file's stamp, the id it names).
    active: Option<(FileStamp, String)>,
    /// (the receipt log's stamp, the last receipt's sequence number).
    receipts: Option<(FileStamp, u64)>,
}

/// A manifest as the report reads it: the manifest, and the live documents of its commit.
struct SeenManifest {
    manifest: generation::Manifest,
    live_docs: Option<u64>,
}

impl std::ops::Deref for SeenManifest {
    type Target = generation::Manifest;
    fn deref(&self) -> &generation::Manifest {
        &self.manifest
    }
}

/// (length, modification time in ns, inode) of a file.
type FileStamp = (u64, i128, u64);

static SEEN: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, Seen>>> =
    std::sync::LazyLock::new(Default::default);

fn lock_seen<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn file_stamp(path: &std::path::Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((meta.len(), i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()), meta.ino()))
}

/// The id `ACTIVE` names, read again only when the file changed (a publish replaces it). A
/// replacement may reuse a freed inode and keep the length, so a stamp is remembered only once
/// its modification time is more than two seconds old (git's racy-clean rule): a later publish
/// then has a later time.
fn seen_active(root: &std::path::Path) -> Result<Option<String>> {
    let stamp = file_stamp(&layout::join(root, layout::SEARCH_ACTIVE));
    if let Some((known, id)) = lock_seen(&SEEN).get(root).and_then(|s| s.active.clone())
        && Some(known) == stamp
    {
        return Ok(Some(id));
    }
    let id = generation::read_active(root)?;
    let settled = |stamp: &FileStamp| crate::inventory::now_ns() - stamp.1 > 2_000_000_000;
    if let (Some(stamp), Some(id)) = (stamp.filter(settled), &id) {
        lock_seen(&SEEN).entry(root.to_path_buf()).or_default().active = Some((stamp, id.clone()));
    }
    Ok(id)
}

/// The manifest of generation `id`, read again only when its file changed.
fn seen_manifest(root: &std::path::Path, id: &str) -> Result<std::sync::Arc<SeenManifest>> {
    let stamp = file_stamp(&generation::manifest_path(root, id));
    if let Some((known_id, known, manifest)) = lock_seen(&SEEN).get(root).and_then(|s| s.manifest.clone())
        && known_id == id
        && Some(known) == stamp
    {
        return Ok(manifest);
    }
    let manifest = generation::read_manifest(root, id)?;
    let live_docs = live_docs(&manifest.tantivy_meta);
    let seen = std::sync::Arc::new(SeenManifest { manifest, live_docs });
    if let Some(stamp) = stamp {
        lock_seen(&SEEN).entry(root.to_path_buf()).or_default().manifest = Some((id.to_string(), stamp, seen.clone()));
    }
    Ok(seen)
}
