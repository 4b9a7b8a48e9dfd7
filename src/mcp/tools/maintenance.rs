//! The maintenance tools: rot_audit, archive_notes and heal_frontmatter_tool.

use super::*;

pub(crate) type RotAudit = RotRequest;

impl ToolParams for RotAudit {
    const NAME: &'static str = "rot_audit";
    const TITLE: &'static str = "Audit knowledge rot";
    const DESCRIPTION: &'static str = "Report redundant titles, outdated (expired) and trivial notes, and notes whose freshness score \
         2^(-age/half-life) is below the policy threshold; extended adds near-duplicate bodies from the stored dense vectors. \
         Read-only; sections that cannot run are listed under skipped.";
    type Output = crate::api::maintenance::RotReport;
    fn patch_input_schema(schema: &mut serde_json::Map<String, Value>, _policy: &Policy) {
        describe(
            schema,
            &[
                (
                    "extended",
                    "Also run the sections that need stored vectors (near-duplicate bodies); skipped with a reason when there are none.",
                ),
                (
                    "allow_link_rot",
                    "Check external links; needs approved=true and egress allow-public, otherwise the section is skipped with the reason.",
                ),
                (
                    "allow_remote_llm",
                    "Send candidate pairs to a remote LLM; no endpoint is configured, so true lists semantic_contradictions under skipped (not_configured).",
                ),
                (
                    "approved",
                    "The user approved the network access that allow_link_rot needs; where the vault's approvals policy gives link_rot to a person, the call returns human_approval_required with a proposal id until a person approves.",
                ),
            ],
        );
    }
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.rot_audit_with_progress(&self, &crate::mcp::progress::report)
    }
}

pub(crate) type ArchiveNotes = ArchiveRequest;

impl ToolParams for ArchiveNotes {
    const NAME: &'static str = "archive_notes";
    const TITLE: &'static str = "Archive notes";
    const DESCRIPTION: &'static str = "Preview (dry_run, the default) or move notes with status archived or a past expiry into the \
         archive folder, keeping their path below it, setting status archived and rewriting links that would break, in one \
         transaction. A live run needs approved=true after the user approves the preview.";
    type Output = crate::api::maintenance::ArchiveReport;
    fn output_schema() -> Value {
        with_property(derived::<Self::Output>(), "receipt", derived::<crate::api::write::Receipt>())
    }
    fn patch_input_schema(schema: &mut serde_json::Map<String, Value>, _policy: &Policy) {
        describe(
            schema,
            &[
                ("dry_run", "true (default): report what would move and which links would be rewritten; change nothing."),
                ("approved", "Must be true for dry_run=false: the user explicitly approved this archive run."),
            ],
        );
    }
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.archive_notes_with_progress(&self, &crate::mcp::progress::report)
    }
}

/// heal_frontmatter_tool takes archive_notes' request type (`maintenance::RunRequest`); this
/// newtype makes it a tool of its own, with the same arguments and schema.
#[derive(Debug)]
pub(crate) struct HealFrontmatter(HealRequest);

impl<'de> Deserialize<'de> for HealFrontmatter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        HealRequest::deserialize(deserializer).map(HealFrontmatter)
    }
}

impl JsonSchema for HealFrontmatter {
    fn schema_name() -> Cow<'static, str> {
        HealRequest::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        "paravault::mcp::HealFrontmatter".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        HealRequest::json_schema(generator)
    }
}

impl ToolParams for HealFrontmatter {
    const NAME: &'static str = "heal_frontmatter_tool";
    const TITLE: &'static str = "Repair frontmatter";
    const DESCRIPTION: &'static str = "Preview (dry_run, the default) or apply frontmatter repairs (type casing and inference, title, \
         description, timestamps, tags, quarantined foreign values) in one transaction; untouched keys keep their text. Never \
         repairs links or calls an LLM. A live run needs approved=true after the user approves the preview.";
    type Output = crate::api::maintenance::HealReport;
    fn output_schema() -> Value {
        with_property(derived::<Self::Output>(), "receipt", derived::<crate::api::write::Receipt>())
    }
    fn patch_input_schema(schema: &mut serde_json::Map<String, Value>, _policy: &Policy) {
        describe(
            schema,
            &[
                ("dry_run", "true (default): list every repair per note; change nothing."),
                ("approved", "Must be true for dry_run=false: the user explicitly approved these repairs."),
            ],
        );
    }
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.heal_frontmatter_with_progress(&self.0, &crate::mcp::progress::report)
    }
}
