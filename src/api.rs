//! The application API the adapters (`cli/`, `mcp/`, `web/`) speak: every request and report
//! type they name, gathered from the engine modules that define them, plus the application
//! services that are not `Vault` methods.
//!
//! An adapter imports `crate::api::…`, `crate::vault::Vault` (with its own report types) and
//! `crate::error`; `tests/it/tidy.rs` fails on any other engine module an adapter names (the
//! exceptions it lists are justified there). Types are re-exported, not moved: each stays
//! defined beside the engine code that fills it. The groups mirror the engine's areas so a
//! reader sees where a type comes from; the report types the MCP tools return derive
//! `schemars::JsonSchema`, and their output schemas are generated from them
//! ([`output_schema`]).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::vault::Vault;

/// Requests and reports of the write operations (`ingest_note`, `synthesize_session`, the
/// propose/apply pair, the receipt chain).
pub mod write {
    pub use crate::vault::ReceiptDay;
    pub use crate::write::operations::{IngestRequest, MemoryHistory, Proposal, SynthesizeRequest};
    pub use crate::write::receipts::{ChainReport, NoteHashes, Receipt};
}

/// Search and sync (the retrieval envelope, the sync report, the modes a caller may name).
pub mod search {
    pub use crate::policy::SearchMode;
    pub use crate::retrieval::{MemoryContext, RelatedReport, SearchParams, SyncParams};
    pub use crate::search::{Envelope, HANDLING_INSTRUCTION, Progress, ReplicaFreshness, SyncReport, rank_texts};
}

/// The one doctor report (`get_server_info`'s cheap form, `paravault doctor`'s checked form).
pub mod doctor {
    pub use crate::doctor::{DoctorReport, VaultCheck};
}

/// The lint report and its findings.
pub mod lint {
    pub use crate::finding::{Finding, Severity};
    pub use crate::lint::LintReport;
}

/// Maintenance requests and reports (rot audit, archive, heal, Markdown fixes).
pub mod maintenance {
    pub use crate::maintenance::archive::{ArchiveReport, ArchiveRequest};
    pub use crate::maintenance::heal::{HealReport, HealRequest};
    pub use crate::maintenance::markdown_fix::MarkdownRequest;
    pub use crate::maintenance::rot::{RotReport, RotRequest};
}

/// Human approval: decisions, proposals, their review, and the approvers' secrets.
/// Replication over git (docs/replication.md).
pub mod replicate {
    pub use crate::replicate::{CloneReport, ConflictReport, RemoteAddReport, ReplicaStatus, ReplicateReport, clone_vault};

    /// The gate on a shared remote (`paravault gate`).
    pub mod gate {
        pub use crate::replicate::gate::{GateCheckReport, GateInstallReport, Refusal, check, current_binary, install};
    }
}

pub mod approvals {
    pub use crate::approvals::review::BeforeImage;
    pub use crate::approvals::{
        ApprovalChannel, Decision, DecisionRecord, DecisionRequest, Operation, ProposalReview, ProposalState, ProposalStatus,
    };
    pub use crate::policy::Approver;

    /// Approver secrets, kept outside every vault (`user_config`).
    pub mod secrets {
        pub use crate::approvals::secrets::{
            AuthenticatedApprover, add_approver, add_signing_key, approver_names, authenticate, default_dir, public_key,
        };
    }

    /// Signed approvals: approvers' keys, the vault's registry of them, policy signatures.
    pub mod keys {
        pub use crate::approvals::keys::{ActiveKeys, KeyAction, KeyChange, PolicySignature};
    }
}

/// Task hand-off and the infrastructure broker.
pub mod handoff {
    pub use crate::handoff::{HandoffAction, HandoffReport, HandoffRequest, Task, TaskList};
    pub use crate::infra::broker::{BrokerOptions, BrokerReady};
    pub use crate::infra::{InfraRequest, InfraResult, InfraStatus};
}

/// Project goals (stepstone): the requests and the one application service both adapters call.
pub mod goals {
    pub use crate::goals::{
        AddInput, ApplyPlanInput, ConfirmedInput, Direction, Envelope, EnvelopeError, EnvelopeMeta, GoalRequest, Lifecycle, MoveInput,
        SCOPE, SetActiveInput, UpdateInput, run,
    };
}

/// vaultspec decision documents: the requests and the services the vaultspec surface calls.
pub mod specdocs {
    pub use crate::policy::specdocs::SpecdocsPolicy;

    /// The batch envelope of create, edit, plan_progress and plan_edit.
    pub mod envelope {
        pub use crate::specdocs::envelope::{BatchReport, BatchStatus, ItemError};
    }
    /// Find, create and edit decision documents.
    pub mod authoring {
        pub use crate::specdocs::authoring::{
            CreateSpec, DocumentItem, DocumentRow, EditOperation, FeatureLifecycleRow, FeatureRow, FindReport, FindRequest, FindRows,
            create, edit, find,
        };
    }
    /// Status and check of the documents.
    pub mod health {
        pub use crate::specdocs::health::{
            CheckFinding, CheckReport, CheckRow, CheckStatus, FeatureStatus, PlanInFlight, PlanTrace, Rollup, RollupTotals, StatusReport,
            StatusView, StepTrace, Trace, check, status,
        };
    }
    /// The per-plan ledger.
    pub mod ledger {
        pub use crate::specdocs::ledger::{LogReport, LogRequest, log};
    }
    /// Plans and their steps.
    pub mod plan {
        pub use crate::specdocs::plan::{PlanEditItem, PlanEditOperation, PlanReport, StepChange, StepItem, plan_edit, plan_progress};
    }
}

/// Agent memory: the registry of named vaults (in the per-user folder) and a server's set of
/// them.
pub mod memory {
    pub use crate::user_config::config_dir;

    /// The named vaults and their authority.
    pub mod registry {
        pub use crate::memory::registry::{Authority, RegisteredVault, Registry, VaultType};
    }
    /// A server's vaults, each opened lazily, and what `list_vaults` answers.
    pub mod vault_set {
        pub use crate::memory::vault_set::{OnVault, VaultEntry, VaultList, VaultSet};
    }
    /// Documents of semantic vaults: what `query`, `list_docs` and `write_doc` answer.
    pub mod documents {
        pub use crate::memory::documents::{DocumentEntry, DocumentHit, DocumentHits, DocumentList, DocumentWritten};
        pub use crate::memory::docx::ConversionReport;
    }
    /// Skills of skill vaults: what `list_skills`, `read_skill` and `write_skill` answer.
    pub mod skills {
        pub use crate::memory::skills::{PeerSkill, SkillList, SkillRead, SkillSummary, SkillWritten};
    }
    /// The embedding model's state (`warmup_status`).
    pub mod warmup {
        pub use crate::memory::warmup::{HOW_TO_ENABLE, ServedMode, WarmupReport, WarmupState};
    }
    /// Episode requests (`write_episode`, `query_episodes`, `supersede_episode`, …), and the
    /// parts every memory answer shares.
    pub use crate::memory::{EpisodeQuery, MemoryVault, NewEpisode, ProposedChange, ReceiptSummary, Replacement, Untrusted};
    /// What the episode tools answer.
    pub mod episodes {
        pub use crate::memory::episodes::{AttestedAt, EpisodeState, EpisodeView};
        pub use crate::memory::{
            EntityCount, EntityList, EpisodeChanged, EpisodeHistory, EpisodeMatches, EpisodeRanking, EpisodesDisputed,
        };
    }

    /// `warmup_status` of `vault`: its embedding model not configured, loading, ready or
    /// failed with the reason, and the mode its queries are answered in (never waits for the
    /// model).
    pub fn warmup_status(vault: &crate::vault::Vault) -> warmup::WarmupReport {
        let policy = &vault.policy().policy;
        let handle = crate::embed::vault_handle(policy, vault.root());
        // The active generation holds vectors of this model: `auto` runs the policy's dense mode.
        let with_vectors = crate::search::generation::read_active(vault.root())
            .ok()
            .flatten()
            .and_then(|id| crate::search::generation::read_manifest(vault.root(), &id).ok())
            .and_then(|manifest| manifest.dense)
            .filter(|dense| dense.model == *handle.id())
            .map(|_| warmup::ServedMode::of_auto_dense(&policy.search.auto_dense_mode));
        crate::memory::warmup::status(handle, with_vectors)
    }
}

/// Policy values an adapter shows or fills its schemas from.
pub mod policy {
    pub use crate::policy::{DEFAULT_SYNTHESIS_TYPE, EgressPolicy, LoadedPolicy, Policy};
}

/// Notes as an adapter renders them: the typed path and the frontmatter reader.
pub mod note {
    /// A wikilink's target as the engine resolves it (alias, heading and block id stripped).
    pub use crate::note::body::wiki_target;
    /// The allowed value a mistyped one most likely meant ("did you mean …?").
    pub use crate::note::metadata::closest;
    pub use crate::note::path::VaultPath;
    /// Untrusted text as a reviewer must see it (control, bidi and invisible characters escaped).
    pub use crate::note::visible;

    /// Splitting and parsing a note's frontmatter (exact bytes kept).
    pub mod frontmatter {
        pub use crate::note::frontmatter::{parse, split};
    }
}

/// Long-running processes (the MCP server, the broker): how they learn to stop.
pub mod process {
    pub use crate::infra::broker::stop_signal;
}

/// Engine-owned names and digests an adapter reports.
pub mod engine {
    pub use crate::hex::{encode as hex_encode, sha256_hex};
    pub use crate::store::layout::{SEARCH_INDEX_DIR, STATE_DIR};
}

/// One page of a category catalog (`read_sub_index`, `ensure_sub_index`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CatalogPage {
    pub category: String,
    pub page: u32,
    pub content: String,
}

impl Vault {
    /// Page `page` of `category`'s existing catalog; never generates it.
    pub fn sub_index_page(&self, category: String, page: u32) -> crate::Result<CatalogPage> {
        let content = self.read_sub_index(&category, page as usize)?;
        Ok(CatalogPage { category, page, content })
    }

    /// Page `page` of `category`'s catalog, regenerated first when needed.
    pub fn ensured_sub_index_page(&self, category: String, page: u32) -> crate::Result<CatalogPage> {
        let content = self.ensure_sub_index(&category, page as usize)?;
        Ok(CatalogPage { category, page, content })
    }
}

/// P.O.W.E.R.'s `validate_memory_state`: the vault is valid when no finding blocks.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MemoryValidity {
    /// P.O.W.E.R.'s boolean: no blocking finding anywhere.
    pub result: bool,
    pub blocking: Vec<crate::finding::Finding>,
}

impl Vault {
    /// Whether the vault is valid (no blocking finding, the worklist included) and the
    /// blocking findings.
    pub fn memory_validity(&self) -> crate::Result<MemoryValidity> {
        let report = self.lint_vault()?;
        let blocking: Vec<_> = report.findings.into_iter().filter(|f| f.severity == crate::finding::Severity::Blocking).collect();
        Ok(MemoryValidity { result: blocking.is_empty(), blocking })
    }
}

/// The JSON Schema of what a tool returns on success, generated from its report type `T` as
/// it serialises (fields skipped when empty are optional; every other field is required).
/// `$defs` stay in the schema; the MCP adapter inlines them.
pub fn output_schema<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().for_serialize().into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
        map.remove("title");
    }
    schema
}
