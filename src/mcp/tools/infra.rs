//! The infra_action tool: an INFRA-1 broker request by identifiers only.

use super::*;

/// `infra::valid_identifier` as a JSON Schema pattern.
const IDENTIFIER_PATTERN: &str = "^[A-Za-z0-9._:-]{1,128}$";

pub(crate) type InfraAction = InfraRequest;

impl ToolParams for InfraAction {
    const NAME: &'static str = "infra_action";
    const TITLE: &'static str = "INFRA-1 broker action";
    const DESCRIPTION: &'static str = "Ask the configured local INFRA-1 broker to act by identifiers only, never with hosts, commands \
         or credentials. The result carries a power.infra-receipt.v1 or a power.infra-block.v1 with a stable reason code; an absent \
         broker is blocked MISSING_EXECUTION_CAPABILITY, never a fallback.";
    type Output = crate::api::handoff::InfraResult;
    fn patch_input_schema(schema: &mut serde_json::Map<String, Value>, _policy: &Policy) {
        for name in ["target", "profile", "idempotency_key", "run_id", "approval_ref", "task_id"] {
            constrain(schema, name, "pattern", json!(IDENTIFIER_PATTERN));
        }
        constrain(schema, "operation", "description", json!("What the broker is asked to do; replicate needs broker-side approval."));
        describe(
            schema,
            &[
                ("target", "A broker-side target identifier."),
                ("profile", "A broker-side profile identifier."),
                ("dry_run", "Ask for a dry run where the operation supports one."),
                ("idempotency_key", "Required for replicate."),
                ("run_id", "Required for verify: the run_<sha256> the broker issued."),
                ("approval_ref", "Only with replicate: a broker-side approval reference (approved=true is not accepted here)."),
                ("task_id", "Correlates with a handoff_work task; needs idempotency_key and expected_revision."),
                ("expected_revision", "The correlated task's revision; needs task_id."),
            ],
        );
    }
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.infra_action(self)
    }
}
