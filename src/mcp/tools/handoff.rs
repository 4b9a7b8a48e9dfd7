//! The handoff_work tool: durable work packets (Task v2).

use super::*;

pub(crate) type HandoffWork = HandoffRequest;

/// `valid_task_id` as a JSON Schema pattern.
const TASK_ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$";

impl ToolParams for HandoffWork {
    const NAME: &'static str = "handoff_work";
    const TITLE: &'static str = "Durable work packets";
    const DESCRIPTION: &'static str = "Create, list, show or advance one durable, content-free work packet: a Task v2 snapshot over a \
         hash-chained event journal. Transitions need task_id; with expected_revision a stale revision is refused \
         (without it the current revision is advanced), and with idempotency_key a retry returns the original result. It never executes \
         next_action and never writes notes.";
    type Output = crate::api::handoff::HandoffReport;
    fn patch_input_schema(schema: &mut serde_json::Map<String, Value>, policy: &Policy) {
        let h = &policy.handoff;
        constrain(schema, "task_id", "pattern", json!(TASK_ID_PATTERN));
        constrain(schema, "objective", "maxLength", json!(h.objective_chars_max));
        for name in ["next_action", "blocker", "completion_postcondition"] {
            constrain(schema, name, "maxLength", json!(h.text_chars_max));
        }
        for name in ["owner", "actor", "source_revision", "required_approval", "idempotency_key", "receipt_id"] {
            constrain(schema, name, "maxLength", json!(h.item_chars_max));
        }
        constrain_list(schema, "scope", h.scope_items_max, h.item_chars_max);
        constrain_list(schema, "changed_artifacts", h.list_items_max, h.item_chars_max);
        constrain_list(schema, "open_gates", h.list_items_max, h.item_chars_max);
        constrain(schema, "action", "description", json!("create | list | show need no revision; every other action advances the task."));
        describe(
            schema,
            &[
                ("task_id", "The task (needed by every action but list); letters, digits, '.', '_', '-'."),
                ("owner", "Who owns the task (create)."),
                ("actor", "Who performs this action."),
                ("authority", "What the task's agent may do (create; default read-only)."),
                ("source_revision", "The vault or repository revision the task starts from (create; default unknown)."),
                ("profile", "standard (default) or maintenance (enforces detect, dry-run, repair, verify, receipt)."),
                ("required_approval", "What approval an input-required task waits for."),
                (
                    "idempotency_key",
                    "Optional: a retry with the same key and request returns the original result (without it a transition is not replayable).",
                ),
                ("approved", "The user approved this step (cancel, resuming input-required, maintenance repair)."),
                ("blocker", "Why the task is blocked (input-required, fail)."),
                ("changed_artifacts", "Vault-relative paths the step changed."),
                ("phase", "The maintenance phase this step enters."),
                (
                    "expected_revision",
                    "Optional: the revision the caller last saw (a mismatch is revision_conflict; omitted: the current revision).",
                ),
            ],
        );
    }
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output> {
        ctx.vault.handoff_work(self)
    }
}
