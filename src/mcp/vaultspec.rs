//! The vaultspec-core surface (seed 000): find, create, edit, status, check, plan_progress,
//! plan_edit and log with the seed's parameters, defaults and result shapes, each a thin call
//! into `specdocs`, and the discover/invoke gateway over the CLI (`vaultspec_gateway`).
//! `--read-only` serves status, find and check without `fix` (policy
//! `tools.check.read_only_omits`) and discover.

use schemars::JsonSchema;
use serde::Deserialize;

use super::surface::Surface;
use super::tools::{ToolCtx, ToolParams, ToolSpec, spec_for};
use super::vaultspec_gateway::{DiscoverReport, InvokeReport, InvokeRequest};
use crate::api::specdocs::authoring::{self, CreateSpec, DocumentItem, EditOperation, FindReport, FindRequest};
use crate::api::specdocs::envelope::BatchReport;
use crate::api::specdocs::health::{self, CheckReport, StatusReport};
use crate::api::specdocs::ledger::{self, LogReport, LogRequest};
use crate::api::specdocs::plan::{self, PlanEditItem, PlanEditOperation, PlanReport, StepChange, StepItem};
use crate::error::{Error, Result};

fn spec<P: ToolParams>() -> ToolSpec {
    spec_for::<P>(Surface::Vaultspec)
}

/// The vaultspec tools, in the seed's order.
pub fn catalog() -> Vec<ToolSpec> {
    vec![
        spec::<FindRequest>(),
        spec::<Create>(),
        spec::<Edit>(),
        spec::<Status>(),
        spec::<Check>(),
        spec::<PlanProgress>(),
        spec::<PlanEdit>(),
        spec::<LogRequest>(),
        spec::<Discover>(),
        spec::<InvokeRequest>(),
    ]
}

impl ToolParams for FindRequest {
    const NAME: &'static str = "find";
    const TITLE: &'static str = "Find vault documents";
    const DESCRIPTION: &'static str = "Find vault documents or list features. With no arguments, list features (name, doc_count, weight); \
         any filter (feature, type, date, text) switches to search mode and returns documents with blob_hash.";
    type Output = FindReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        authoring::find(&ctx.vault, &self)
    }
}

/// `create` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Create {
    /// Document specifications, at least one.
    pub documents: Vec<CreateSpec>,
}

impl ToolParams for Create {
    const NAME: &'static str = "create";
    const TITLE: &'static str = "Create vault documents";
    const DESCRIPTION: &'static str =
        "Scaffold one or more vault documents from templates. Items apply in order; one item's failure does not abort the batch.";
    type Output = BatchReport<DocumentItem>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        authoring::create(&ctx.vault, &self.documents)
    }
}

/// `edit` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// Edit operations, at least one.
    pub operations: Vec<EditOperation>,
}

impl ToolParams for Edit {
    const NAME: &'static str = "edit";
    const TITLE: &'static str = "Edit document prose";
    const DESCRIPTION: &'static str = "Apply one or more body-prose edits to vault documents (append_section, replace_section, set_body); \
         expected_blob_hash guards against concurrent changes. Frontmatter and file names are never touched.";
    type Output = BatchReport<DocumentItem>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        authoring::edit(&ctx.vault, &self.operations)
    }
}

/// `status` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Status {
    /// A feature tag or a plan stem/path. Omit it for a project-wide rollup.
    #[serde(default)]
    pub target: Option<String>,
}

impl ToolParams for Status {
    const NAME: &'static str = "status";
    const TITLE: &'static str = "Orient in the project";
    const DESCRIPTION: &'static str = "Orient in a vaultspec project, project-wide (rollup) or targeted at one feature or plan (trace).";
    type Output = StatusReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        health::status(&ctx.vault, self.target.as_deref())
    }
}

/// `check` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Check {
    /// Restrict the check to one feature tag, without the # prefix.
    #[serde(default)]
    pub feature: Option<String>,
    /// Apply safe auto-corrections instead of only reporting them.
    #[serde(default)]
    pub fix: bool,
}

impl ToolParams for Check {
    const NAME: &'static str = "check";
    const TITLE: &'static str = "Check vault health";
    const DESCRIPTION: &'static str =
        "Run the vault health-check suite, optionally repairing (fix applies only safe repairs that never overwrite prose).";
    type Output = CheckReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        if self.fix && ctx.read_only {
            return Err(Error::InvalidArgument { name: "fix", reason: "this server is read-only: check has no fix parameter".into() });
        }
        health::check(&ctx.vault, self.feature.as_deref(), self.fix)
    }
}

/// `plan_progress` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanProgress {
    /// A feature tag or a plan stem/path.
    pub plan: String,
    /// Step-state changes, at least one.
    pub steps: Vec<StepChange>,
}

impl ToolParams for PlanProgress {
    const NAME: &'static str = "plan_progress";
    const TITLE: &'static str = "Mark plan steps";
    const DESCRIPTION: &'static str = "Mark plan steps checked or unchecked by canonical identifier (explicit states, no toggle). \
         The plan is written once, and only if a step changed.";
    type Output = PlanReport<StepItem>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        plan::plan_progress(&ctx.vault, &self.plan, &self.steps)
    }
}

/// `plan_edit` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanEdit {
    /// A feature tag or a plan stem/path.
    pub plan: String,
    /// Plan-edit operations, at least one.
    pub operations: Vec<PlanEditOperation>,
}

impl ToolParams for PlanEdit {
    const NAME: &'static str = "plan_edit";
    const TITLE: &'static str = "Author plan steps";
    const DESCRIPTION: &'static str =
        "Author plan steps: add, insert, edit, or remove. add and insert allocate new IDs; remove retires an ID forever.";
    type Output = PlanReport<PlanEditItem>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        plan::plan_edit(&ctx.vault, &self.plan, &self.operations)
    }
}

impl ToolParams for LogRequest {
    const NAME: &'static str = "log";
    const TITLE: &'static str = "Log a step";
    const DESCRIPTION: &'static str =
        "Append one step's rows to its plan's execution ledger (idempotent: re-logging a row changes nothing).";
    type Output = LogReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ledger::log(&ctx.vault, &self)
    }
}

/// `discover` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Discover {
    /// Verb words or an intent phrase to rank the catalog against.
    pub query: String,
    /// Maximum number of ranked verbs to return.
    #[serde(default = "ten")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: usize,
}

fn ten() -> usize {
    10
}

impl ToolParams for Discover {
    const NAME: &'static str = "discover";
    const TITLE: &'static str = "Discover CLI verbs";
    const DESCRIPTION: &'static str =
        "Search paravault's CLI verb catalog and return ranked schemas (verb, description, score, supports_json, flags, arguments).";
    type Output = DiscoverReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        super::vaultspec_gateway::discover(&ctx.cli, &self.query, self.limit.min(100), &ctx.vault.policy().policy.specdocs)
    }
}

impl ToolParams for InvokeRequest {
    const NAME: &'static str = "invoke";
    const TITLE: &'static str = "Invoke a CLI verb";
    const DESCRIPTION: &'static str = "Execute one cataloged verb. A verb that runs and fails is still a successful call; its exit code and stderr \
         arrive in the error payload. Runs the served paravault binary against the served vault with --json (reserved: --vault, --json, --help).";
    type Output = InvokeReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        if ctx.read_only {
            return Err(Error::InvalidArgument { name: "verb", reason: "this server is read-only: invoke is not served".into() });
        }
        // The running server's own executable: never a PATH lookup.
        let exe = std::env::current_exe().map_err(|e| Error::io("locating", "the running paravault binary", e))?;
        super::vaultspec_gateway::invoke(&ctx.cli, &exe, ctx.vault.root(), &ctx.vault.policy().policy.specdocs, &self)
    }
}
