//! The ctxvault surface: ctxvault-mcp's 17 tools with their exact names, parameters and
//! defaults, over `memory` (registered vaults selected by `vault_name`, per-agent access).
//!
//! Each handler is one access check (`VaultSet::open`: who may use which vault, with what
//! authority, for which kind of memory), one engine call and its typed report serialised; each
//! tool's output schema is derived from that report type. Every answer on a named vault is an
//! `OnVault` report (the vault's name beside the report's fields); nothing here touches a file.
//!
//! The reports carry ctxvault 0.8.1's own answer field names beside paravault's (never instead
//! of them), as fields of their own, so a client written against the peer that reads answers
//! by key works unchanged. The seed (../shared/seeds/003_*.txt) names no answer field but
//! `disputed_with`, which paravault uses as it is; the others come from the peer itself (its
//! pydantic response models, compared in docs/compatibility.md "Against ctxvault 0.8.1
//! itself"): `vault_name` on every vault answer; `results` and `order_by` (query_episodes);
//! `chain` (episode_history); `total`, `episode_count` and `entity_norm` (list_entities);
//! `recorded_at` / `invalidated_at` on an episode (paravault's `known_at` / `closed_known_at`);
//! `skill` (read_skill); `filename` (write_skill); `source` and `filetype` (list_docs). The
//! peer's scores, recall counters and metadata have no paravault meaning and are not invented.
//! A memory change by an agent with `propose` authority answers `awaiting_approval` with the
//! proposal id (the engine holds it as a `memory_change` proposal).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::surface::Surface;
use super::tools::{ToolCtx, ToolParams, ToolSpec, spec_for};
use crate::api::memory::documents::{DocumentHits, DocumentList, DocumentWritten};
use crate::api::memory::episodes::{EntityList, EpisodeChanged, EpisodeHistory as HistoryReport, EpisodeMatches, EpisodesDisputed};
use crate::api::memory::registry::{Authority, VaultType};
use crate::api::memory::skills::{SkillList, SkillRead, SkillWritten};
use crate::api::memory::vault_set::{OnVault, VaultList, VaultSet};
use crate::api::memory::warmup::WarmupReport;
use crate::api::memory::{EpisodeQuery, MemoryVault, NewEpisode, Replacement};
use crate::error::Result;

#[cfg(test)]
mod tests;

/// The vaults of this server: the registry in the user's config folder, read on the first
/// ctxvault call (a server that never gets one never reads it), as seen by `--agent`.
pub(crate) fn vaults(ctx: &ToolCtx) -> Result<&VaultSet> {
    if let Some(set) = ctx.memory.get() {
        return Ok(set);
    }
    let set = VaultSet::load(&crate::api::memory::config_dir()?, ctx.agent.clone(), true)?.with_options(ctx.vault.options().clone());
    Ok(ctx.memory.get_or_init(|| set))
}

/// One call on a named vault: `VaultSet::open` checks that the caller may use `vault_name` for
/// `tool` with `authority` and that it holds `kind` of memory, `act` is the engine call on it,
/// and its report is answered beside the vault's name (`OnVault`).
fn on_vault<R: Serialize>(
    ctx: &ToolCtx,
    tool: &'static str,
    vault_name: String,
    (authority, kind): (Authority, VaultType),
    act: impl FnOnce(&MemoryVault) -> Result<R>,
) -> Result<OnVault<R>> {
    let memory = vaults(ctx)?.open(&vault_name, authority, tool, kind)?;
    let report = act(&memory)?;
    Ok(OnVault { vault_name, report })
}

fn half() -> f64 {
    0.5
}
fn one() -> f64 {
    1.0
}
fn ten() -> i64 {
    10
}
fn one_int() -> i64 {
    1
}

// ---- discovery ----

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListVaults {}

impl ToolParams for ListVaults {
    const NAME: &'static str = "list_vaults";
    const TITLE: &'static str = "List vaults";
    const DESCRIPTION: &'static str =
        "List all available vaults. Use this before querying or writing to discover which vaults exist and choose the right one.";
    type Output = VaultList;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        Ok(vaults(ctx)?.list())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WarmupStatus {
    /// A vault from list_vaults: its own embedding model's state (each vault has its policy).
    /// Without it, the model of the vault the server was started on.
    #[serde(default)]
    pub vault_name: Option<String>,
}

impl ToolParams for WarmupStatus {
    const NAME: &'static str = "warmup_status";
    const TITLE: &'static str = "Embedding model warmup status";
    const DESCRIPTION: &'static str =
        "Check if the embedding model has finished initializing. Use this to verify warmup status before attempting queries or writes.";
    type Output = WarmupReport;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        let Some(vault_name) = self.vault_name else {
            return Ok(crate::api::memory::warmup_status(&ctx.vault));
        };
        let memory = vaults(ctx)?.open(&vault_name, Authority::ReadOnly, Self::NAME, VaultType::Any)?;
        let report = crate::api::memory::warmup_status(&memory.vault);
        Ok(WarmupReport { vault_name: Some(vault_name), ..report })
    }
}

// ---- semantic vaults ----

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Query {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    /// What to search for.
    pub query: String,
}

impl ToolParams for Query {
    const NAME: &'static str = "query";
    const TITLE: &'static str = "Query a vault";
    const DESCRIPTION: &'static str = "Search for relevant information in a CtxVault vault using semantic similarity. Use this when the user asks a question that might be answered by their personal knowledge base or documents. Returns the most relevant text chunks with their source files.";
    type Output = OnVault<DocumentHits>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::ReadOnly, VaultType::Semantic), |memory| memory.query_documents(&self.query))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDocs {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
}

impl ToolParams for ListDocs {
    const NAME: &'static str = "list_docs";
    const TITLE: &'static str = "List documents";
    const DESCRIPTION: &'static str = "List all indexed documents inside a specific vault. Use this to understand what knowledge is available before performing a search.";
    type Output = OnVault<DocumentList>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::ReadOnly, VaultType::Semantic), |memory| memory.list_docs())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteDoc {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    /// The document's name inside the vault, ending in .md, .txt or .docx.
    pub file_path: String,
    /// The document's text (.md, .txt), or for .docx the file's bytes in base64: it is stored
    /// converted to Markdown and the conversion is reported.
    pub content: String,
    /// Who produced the content (recorded as provenance).
    pub generated_by: String,
    #[serde(default)]
    pub overwrite: bool,
}

impl ToolParams for WriteDoc {
    const NAME: &'static str = "write_doc";
    const TITLE: &'static str = "Write a document";
    const DESCRIPTION: &'static str = "Save new information or agent-generated content to a semantic vault for future retrieval. Use this only with semantic vaults, to persist important context, summaries, or notes that should be remembered across sessions. Supports .txt, .md, and .docx formats.";
    type Output = OnVault<DocumentWritten>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::Propose, VaultType::Semantic), |memory| {
            memory.write_doc(&self.file_path, &self.content, &self.generated_by, self.overwrite)
        })
    }
}

// ---- skill vaults ----

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSkills {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
}

impl ToolParams for ListSkills {
    const NAME: &'static str = "list_skills";
    const TITLE: &'static str = "List skills";
    const DESCRIPTION: &'static str =
        "List all available skills inside a specific vault. Use this to understand what skills are available before trying to fetch one.";
    type Output = OnVault<SkillList>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::ReadOnly, VaultType::Skill), |memory| memory.list_skills())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadSkill {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    /// The skill's name, as list_skills shows it.
    pub skill_name: String,
}

impl ToolParams for ReadSkill {
    const NAME: &'static str = "read_skill";
    const TITLE: &'static str = "Read a skill";
    const DESCRIPTION: &'static str = "Read one skill from a skill vault: its name, description and full instructions. Use this after list_skills, once you know which procedure fits the task, and follow the instructions it returns.";
    type Output = OnVault<SkillRead>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::ReadOnly, VaultType::Skill), |memory| memory.read_skill(&self.skill_name))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteSkill {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub skill_name: String,
    pub description: String,
    pub instructions: String,
    #[serde(default)]
    pub overwrite: bool,
}

impl ToolParams for WriteSkill {
    const NAME: &'static str = "write_skill";
    const TITLE: &'static str = "Write a skill";
    const DESCRIPTION: &'static str = "Create and store a new skill in a skill vault. Use this to persist procedural knowledge, instructions, or how-to guides that agents can retrieve and execute later. The skill will be indexed by name and description for fast lookup. Use this only with skill vaults.";
    type Output = OnVault<SkillWritten>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::Propose, VaultType::Skill), |memory| {
            memory.write_skill(&self.skill_name, &self.description, &self.instructions, self.overwrite)
        })
    }
}

// ---- episodic vaults ----

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteEpisode {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub content: String,
    #[serde(default)]
    pub entities: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default = "half")]
    pub salience: f64,
    #[serde(default = "one")]
    pub confidence: f64,
    #[serde(default)]
    pub occurred_at: Option<String>,
    #[serde(default)]
    pub valid_from: Option<String>,
}

impl ToolParams for WriteEpisode {
    const NAME: &'static str = "write_episode";
    const TITLE: &'static str = "Write an episode";
    const DESCRIPTION: &'static str = "Record something that happened or something the user stated, in an episodic vault. Use this for facts with a lifetime — situations, preferences, relationships, plans — rather than for documents. Give the entities it is about so it can be looked up later, and a salience between 0 and 1 for how much it matters.";
    type Output = OnVault<EpisodeChanged>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::Propose, VaultType::Episodic), |memory| {
            memory.write_episode(&NewEpisode {
                content: self.content,
                entities: self.entities,
                // ctxvault fills the source with the agent: the writer of a shared or restricted
                // vault is known.
                source: self.source.or_else(|| ctx.agent.clone()),
                salience: self.salience,
                confidence: self.confidence,
                occurred_at: self.occurred_at,
                valid_from: self.valid_from,
            })
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryEpisodes {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub entities: Vec<String>,
    #[serde(default)]
    pub valid_at: Option<String>,
    #[serde(default)]
    pub known_at: Option<String>,
    #[serde(default)]
    pub include_closed: bool,
    /// relevance (default with a query), newest (default without), oldest, valid_from,
    /// recency (ctxvault's name for valid_from's order), salience or confidence.
    #[serde(default)]
    pub order_by: Option<String>,
    #[serde(default = "ten")]
    pub limit: i64,
}

impl ToolParams for QueryEpisodes {
    const NAME: &'static str = "query_episodes";
    const TITLE: &'static str = "Query episodes";
    const DESCRIPTION: &'static str = "Retrieve episodes from an episodic vault. By default only statements that still hold are returned. Filter by entity for 'everything about X', pass valid_at to ask what was true at a past moment, or known_at to ask what the vault had already learned by then. Query text is optional and ranks results; without it the newest come first.";
    type Output = OnVault<EpisodeMatches>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        let limit = usize::try_from(self.limit).unwrap_or(0);
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::ReadOnly, VaultType::Episodic), |memory| {
            memory.query_episodes(&EpisodeQuery {
                query: self.query,
                entities: self.entities,
                valid_at: self.valid_at,
                known_at: self.known_at,
                include_closed: self.include_closed,
                order_by: self.order_by,
                limit,
            })
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfirmEpisode {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub episode_id: String,
    #[serde(default)]
    pub at: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
}

impl ToolParams for ConfirmEpisode {
    const NAME: &'static str = "confirm_episode";
    const TITLE: &'static str = "Confirm an episode";
    const DESCRIPTION: &'static str = "Record that a statement already in the vault was asserted again. Use this when you hear something the vault already holds, instead of writing it a second time: the episode stays as it is and gains one attestation, so a fact heard once can be told from one heard many times.";
    type Output = OnVault<EpisodeChanged>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::Propose, VaultType::Episodic), |memory| {
            memory.confirm_episode(&self.episode_id, self.at.as_deref(), self.source.as_deref())
        })
    }
}

/// supersede_episode (`revise` false) and revise_episode (`revise` true): one replacement of an
/// episode in `vault_name`.
fn replace_episode(
    ctx: &ToolCtx,
    tool: &'static str,
    vault_name: String,
    replacement: &Replacement,
    revise: bool,
) -> Result<OnVault<EpisodeChanged>> {
    on_vault(ctx, tool, vault_name, (Authority::Propose, VaultType::Episodic), |memory| memory.replace_episode(replacement, revise))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SupersedeEpisode {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub episode_id: String,
    pub content: String,
    #[serde(default)]
    pub entities: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub salience: Option<f64>,
}

impl ToolParams for SupersedeEpisode {
    const NAME: &'static str = "supersede_episode";
    const TITLE: &'static str = "Supersede an episode";
    const DESCRIPTION: &'static str = "Replace an episode with a corrected or updated version. The old statement is closed exactly where the new one begins and the two are linked, so the history of what changed stays readable. Entities and salience carry over from the old episode unless you pass new ones. Use this whenever new information contradicts something already recorded.";
    type Output = OnVault<EpisodeChanged>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        let replacement = Replacement {
            episode_id: self.episode_id,
            content: self.content,
            entities: self.entities,
            source: self.source,
            salience: self.salience,
        };
        replace_episode(ctx, Self::NAME, self.vault_name, &replacement, false)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReviseEpisode {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub episode_id: String,
    pub content: String,
    #[serde(default)]
    pub entities: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub salience: Option<f64>,
}

impl ToolParams for ReviseEpisode {
    const NAME: &'static str = "revise_episode";
    const TITLE: &'static str = "Revise an episode";
    const DESCRIPTION: &'static str = "Restate an episode more precisely, when the world did not change but you can now say it better ('lives in Padova' -> 'lives in Padova, in the Arcella'). The revision opens where the original did and inherits its attestations and open disputes; the original stays in the history but is no longer what the vault states. Use supersede_episode instead when the world changed.";
    type Output = OnVault<EpisodeChanged>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        let replacement = Replacement {
            episode_id: self.episode_id,
            content: self.content,
            entities: self.entities,
            source: self.source,
            salience: self.salience,
        };
        replace_episode(ctx, Self::NAME, self.vault_name, &replacement, true)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InvalidateEpisode {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub episode_id: String,
    #[serde(default)]
    pub valid_to: Option<String>,
    #[serde(default)]
    pub reason: String,
}

impl ToolParams for InvalidateEpisode {
    const NAME: &'static str = "invalidate_episode";
    const TITLE: &'static str = "Invalidate an episode";
    const DESCRIPTION: &'static str = "Mark an episode as no longer true, without deleting it. Use this when something ends and nothing replaces it. If a corrected version exists instead, use supersede_episode so the two stay linked.";
    type Output = OnVault<EpisodeChanged>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::Propose, VaultType::Episodic), |memory| {
            memory.invalidate_episode(&self.episode_id, self.valid_to.as_deref(), &self.reason)
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DisputeEpisodes {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub episode_id: String,
    pub other_id: String,
    #[serde(default)]
    pub note: String,
}

impl ToolParams for DisputeEpisodes {
    const NAME: &'static str = "dispute_episodes";
    const TITLE: &'static str = "Dispute two episodes";
    const DESCRIPTION: &'static str = "Record that two open statements cannot both hold, when you cannot tell which one is wrong. Neither is closed: both keep coming back from queries, each flagged with the other in disputed_with, so you can ask instead of assert. The dispute ends by itself when one side is invalidated or superseded. If you do know which one is wrong, use supersede_episode or invalidate_episode instead.";
    type Output = OnVault<EpisodesDisputed>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::Propose, VaultType::Episodic), |memory| {
            memory.dispute_episodes(&self.episode_id, &self.other_id, &self.note)
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EpisodeHistory {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    pub episode_id: String,
}

impl ToolParams for EpisodeHistory {
    const NAME: &'static str = "episode_history";
    const TITLE: &'static str = "Episode history";
    const DESCRIPTION: &'static str = "Show every version of a statement, oldest first. Use this to explain why the vault believes something, or to see what an episode used to say before it was corrected.";
    type Output = OnVault<HistoryReport>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::ReadOnly, VaultType::Episodic), |memory| {
            memory.episode_history(&self.episode_id)
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListEntities {
    /// Name of a vault from list_vaults.
    pub vault_name: String,
    #[serde(default)]
    pub include_closed: bool,
    #[serde(default)]
    pub valid_at: Option<String>,
    #[serde(default = "one_int")]
    pub min_episodes: i64,
}

impl ToolParams for ListEntities {
    const NAME: &'static str = "list_entities";
    const TITLE: &'static str = "List entities";
    const DESCRIPTION: &'static str = "List the entities an episodic vault knows about, with how many episodes mention each one. This is the vault's vocabulary: use it to find out what subjects exist before querying for them, to spot the name a person or thing is recorded under, or to see what has gone quiet. Unlike query_episodes it enumerates rather than ranks, so nothing is left out. By default only entities named by statements that still hold are listed; pass include_closed to see everything the vault ever recorded.";
    type Output = OnVault<EntityList>;
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        on_vault(ctx, Self::NAME, self.vault_name, (Authority::ReadOnly, VaultType::Episodic), |memory| {
            memory.list_entities(self.include_closed, self.valid_at.as_deref(), self.min_episodes)
        })
    }
}

/// The table row of ctxvault tool `P`: P.O.W.E.R.'s row on this surface.
fn spec<P: ToolParams>() -> ToolSpec {
    spec_for::<P>(Surface::Ctxvault)
}

/// The ctxvault surface's tools, in the seed's order.
pub fn catalog() -> Vec<ToolSpec> {
    vec![
        spec::<ListVaults>(),
        spec::<WarmupStatus>(),
        spec::<Query>(),
        spec::<ListDocs>(),
        spec::<WriteDoc>(),
        spec::<ListSkills>(),
        spec::<ReadSkill>(),
        spec::<WriteSkill>(),
        spec::<WriteEpisode>(),
        spec::<QueryEpisodes>(),
        spec::<ConfirmEpisode>(),
        spec::<SupersedeEpisode>(),
        spec::<ReviseEpisode>(),
        spec::<InvalidateEpisode>(),
        spec::<DisputeEpisodes>(),
        spec::<EpisodeHistory>(),
        spec::<ListEntities>(),
    ]
}
