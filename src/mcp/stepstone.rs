//! The stepstone surface of the MCP server: stepstone's nine goal mutation tools and six
//! `stepstone://worklist` resources over `crate::goals` (the application service shared with
//! the CLI). Every answer is the service's envelope; tools put it in `structuredContent` and,
//! as JSON, in the text block, with `isError` on failure; resources put it in one
//! `application/json` text body. docs/goals.md, docs/compatibility.md#stepstone.

use rmcp::model::{Resource, ResourceTemplate};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::goals::{self, AddInput, ApplyPlanInput, ConfirmedInput, GoalRequest, Lifecycle, MoveInput, SetActiveInput, UpdateInput};
use crate::api::policy::Policy;
use crate::vault::Vault;

use super::ToolError;
use super::surface::Surface;
use super::tools::{Prepared, ToolCtx, ToolParams, ToolSpec};

/// The brainstorm-to-approved-plan workflow, written once and rendered into `apply-plan`'s
/// description, its `_meta.captureWorkflow` and its `plan`, plan-entry and `dryRun` schema
/// descriptions.
macro_rules! capture_workflow {
    () => {
        "Capturing a brainstorm as an approved goal plan: (1) turn the brainstorm into one JSON array of plan entries, one \
entry per goal ({title, description?, group?, dependsOn?, links?, ref?}); an entry names another entry of the same plan in \
dependsOn by that entry's ref, and an existing goal by its ID or a unique ID prefix; (2) call apply-plan with dryRun: true and \
fix every problem it reports (a dry run only validates and is never the user's approval); (3) show the user the validated \
array and ask them to approve that exact plan; (4) after their explicit approval apply the approved array with exactly one \
apply-plan call with dryRun omitted, which adds every entry atomically or none; never replay it as a sequence of add calls."
    };
}

/// The capture workflow text (see `capture_workflow!`).
pub(crate) const CAPTURE_WORKFLOW: &str = capture_workflow!();

/// What the four lifecycle tools say about confirmation.
macro_rules! confirmation_rule {
    () => {
        " Needs confirm: true, passed only after the user explicitly requested this exact action for this exact goal; never \
infer it from a general request, another action or goal, a previous turn or a generic permission, and never retry an \
unconfirmed call with confirm: true on your own: ask the user. Anything but literal true fails with APPROVAL_REQUIRED and \
writes nothing. expectedUpdatedAt is a concurrency precondition, never a substitute for confirmation."
    };
}

/// A stepstone tool's extra `_meta` (merged into the tool's `_meta` by the server).
pub(crate) fn tool_meta(name: &str) -> Map<String, Value> {
    let mut meta = Map::new();
    match name {
        "complete" | "reopen" | "archive" | "delete" => {
            meta.insert("confirmRequired".into(), json!(true));
        }
        "apply-plan" => {
            meta.insert("captureWorkflow".into(), json!(CAPTURE_WORKFLOW));
        }
        _ => {}
    }
    meta
}

fn describe(schema: &mut Map<String, Value>, property: &str, text: &str) {
    if let Some(Value::Object(p)) = schema.get_mut("properties").and_then(|p| p.get_mut(property)) {
        p.insert("description".into(), json!(text));
    }
}

/// The envelope of a service call as a tool result: a failure envelope is an `Err` so the
/// server sets `isError` (see `failure_json`).
fn respond(ctx: &ToolCtx, request: GoalRequest) -> crate::error::Result<goals::Envelope> {
    let envelope = goals::run(&ctx.vault, request);
    if envelope.ok { Ok(envelope) } else { Err(crate::error::Error::SurfaceFailure(Box::new(envelope.json()))) }
}

/// A failure envelope for arguments that do not deserialise (wrong type, unknown field): the
/// same `INVALID_INPUT` envelope the service gives, not the P.O.W.E.R. error shape.
fn invalid_arguments(action: &str, message: &str) -> Value {
    json!({
        "ok": false, "scope": goals::SCOPE, "action": action,
        "error": {"code": "INVALID_INPUT", "message": format!("invalid arguments: {message}"), "retryable": false},
        "meta": {"changed": false, "semanticNoOp": false, "changedFields": [], "revisions": {}},
    })
}

/// Deserialises a stepstone tool's arguments; a failure becomes a job that returns the
/// failure envelope (so it carries the tool's `action`).
fn prepare<P: ToolParams>(args: Map<String, Value>) -> Prepared {
    match super::tools::arguments::<P>(args) {
        Ok(params) => Ok((String::new(), super::tools::job(params))),
        Err(error) => {
            let envelope = invalid_arguments(P::NAME, &error);
            Ok((String::new(), Box::new(move |_: &ToolCtx| Err(crate::error::Error::SurfaceFailure(Box::new(envelope))))))
        }
    }
}

fn stepstone_spec<P: ToolParams>() -> ToolSpec {
    ToolSpec { prepare: prepare::<P>, ..super::tools::spec_for::<P>(Surface::Stepstone) }
}

/// The nine tools, in the seed's order.
pub fn catalog() -> Vec<ToolSpec> {
    vec![
        stepstone_spec::<AddGoal>(),
        stepstone_spec::<ApplyPlan>(),
        stepstone_spec::<UpdateGoal>(),
        stepstone_spec::<MoveGoal>(),
        stepstone_spec::<SetActiveGoal>(),
        stepstone_spec::<CompleteGoal>(),
        stepstone_spec::<ReopenGoal>(),
        stepstone_spec::<ArchiveGoal>(),
        stepstone_spec::<DeleteGoal>(),
    ]
}

/// The `isError` JSON of a stepstone tool: the service's failure envelope when the error
/// carries one; otherwise (a rate limit, an internal failure) an envelope built from the
/// error, with `action` from `details.action` when known.
pub(crate) fn failure_json(error: &ToolError) -> Value {
    if let Some(envelope) = error.details.as_ref().filter(|d| d.get("ok") == Some(&Value::Bool(false))) {
        return envelope.clone();
    }
    let action = error.details.as_ref().and_then(|d| d.get("action")).cloned().unwrap_or(json!(""));
    let mut body = json!({"code": error.code.to_ascii_uppercase(), "message": error.message, "retryable": error.retryable});
    if let Some(details) = &error.details {
        body["details"] = details.clone();
    }
    json!({
        "ok": false, "scope": goals::SCOPE, "action": action, "error": body,
        "meta": {"changed": false, "semanticNoOp": false, "changedFields": [], "revisions": {}},
    })
}

macro_rules! goal_tool {
    ($ty:ident, $input:ty, $name:literal, $title:literal, $description:expr, |$p:ident| $request:expr) => {
        #[doc = concat!("The stepstone `", $name, "` tool.")]
        #[derive(Debug, Deserialize)]
        #[serde(transparent)]
        pub struct $ty(pub $input);

        // The input type's own object schema, inline (a derived transparent schema would be a
        // bare `$ref`, and MCP requires an object at the root).
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                <$input as schemars::JsonSchema>::schema_name()
            }
            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <$input as schemars::JsonSchema>::json_schema(generator)
            }
        }

        impl ToolParams for $ty {
            const NAME: &'static str = $name;
            const TITLE: &'static str = $title;
            const DESCRIPTION: &'static str = $description;
            /// The envelope, success or failure.
            type Output = goals::Envelope;
            fn patch_input_schema(schema: &mut Map<String, Value>, _policy: &Policy) {
                patch_schema($name, schema);
            }
            fn run(self, ctx: &ToolCtx) -> crate::error::Result<Self::Output> {
                let $p = self.0;
                respond(ctx, $request)
            }
        }
    };
}

fn patch_schema(name: &str, schema: &mut Map<String, Value>) {
    describe(
        schema,
        "expectedUpdatedAt",
        "The goal's updatedAt from your last read; a concurrent change then returns CONFLICT instead of being overwritten.",
    );
    describe(schema, "id", "A complete goal ID or a unique ID prefix.");
    match name {
        "apply-plan" => {
            // The plan is any JSON to the engine (an array, or a string holding one): both are
            // declared, as `anyOf` (standard JSON Schema that Ajv's strict mode compiles, where
            // a `type` list with `items` beside it is a strict-mode error).
            if let Some(Value::Object(properties)) = schema.get_mut("properties") {
                properties.insert(
                    "plan".into(),
                    json!({
                        "description": concat!(
                            "A JSON array of plan entries, each {title, description?, group?, dependsOn?, links?, ref?}: ref names the \
entry for dependsOn of other entries; dependsOn also takes existing goal IDs or unique prefixes. ",
                            capture_workflow!()
                        ),
                        "anyOf": [{"type": "array", "items": {
                            "type": "object",
                            "description": concat!("One plan entry: one goal to add. ", capture_workflow!()),
                            "properties": {
                                "ref": {"type": "string", "description": "A name other entries of this plan use in dependsOn."},
                                "title": {"type": "string"}, "description": {"type": "string"}, "group": {"type": "string"},
                                "dependsOn": {"type": "array", "items": {"type": "string"}, "description": "refs of other entries, or goal IDs or unique prefixes"},
                                "links": {"type": "array", "items": {"type": "string"}, "description": "absolute http or https URLs"}
                            },
                            "required": ["title"],
                            "additionalProperties": false
                        }}, {"type": "string", "description": "The same array as JSON text."}]
                    }),
                );
            }
            describe(schema, "dryRun", concat!("true: only validate the plan (never the user's approval). ", capture_workflow!()));
        }
        "move" => {
            describe(schema, "direction", "up or down: one step in canonical order. Give exactly one of direction, beforeId, afterId.");
        }
        "complete" | "reopen" | "archive" | "delete" => {
            describe(
                schema,
                "confirm",
                "true only after the user explicitly requested this exact action for this exact goal; anything else is refused with APPROVAL_REQUIRED.",
            );
        }
        _ => {}
    }
    if matches!(name, "add" | "update") {
        describe(schema, "dependsOn", "Goal IDs or unique prefixes; on update the whole set is replaced ([] clears it).");
        describe(schema, "links", "Absolute http or https URLs for a reader; on update the whole set is replaced ([] clears it).");
    }
}

goal_tool!(
    AddGoal,
    AddInput,
    "add",
    "Add a goal",
    "Add an open Project Goal at the end of the roadmap, with optional description, group, dependencies (goal IDs or unique prefixes) and http(s) links.",
    |p| GoalRequest::Add(p)
);
goal_tool!(
    ApplyPlan,
    ApplyPlanInput,
    "apply-plan",
    "Apply a goal plan",
    concat!(
        "Validate and atomically add a JSON array of goal plan entries, or only validate it when dryRun is true. ",
        capture_workflow!()
    ),
    |p| GoalRequest::ApplyPlan(p)
);
goal_tool!(
    UpdateGoal,
    UpdateInput,
    "update",
    "Update a goal",
    "Edit a goal's title, description (or append to it), group, dependencies or links; a supplied dependsOn or links replaces the whole set. Pass expectedUpdatedAt from your last read.",
    |p| GoalRequest::Update(p)
);
goal_tool!(
    MoveGoal,
    MoveInput,
    "move",
    "Move a goal",
    "Move a goal in canonical order: direction up or down, or just before beforeId, or just after afterId.",
    |p| GoalRequest::Move(p)
);
goal_tool!(
    SetActiveGoal,
    SetActiveInput,
    "set_active",
    "Set the active goal",
    "Make an open goal the single active goal (the one being worked on; it is claimed and leaves the ready frontier).",
    |p| GoalRequest::SetActive(p)
);
goal_tool!(CompleteGoal, ConfirmedInput, "complete", "Complete a goal", concat!("Mark a goal done.", confirmation_rule!()), |p| {
    GoalRequest::Lifecycle(Lifecycle::Complete, p)
});
goal_tool!(ReopenGoal, ConfirmedInput, "reopen", "Reopen a goal", concat!("Reopen a done or archived goal.", confirmation_rule!()), |p| {
    GoalRequest::Lifecycle(Lifecycle::Reopen, p)
});
goal_tool!(ArchiveGoal, ConfirmedInput, "archive", "Archive a goal", concat!("Archive a goal.", confirmation_rule!()), |p| {
    GoalRequest::Lifecycle(Lifecycle::Archive, p)
});
goal_tool!(
    DeleteGoal,
    ConfirmedInput,
    "delete",
    "Delete a goal",
    concat!("Permanently delete a goal (the vault's receipts and journal keep its history).", confirmation_rule!()),
    |p| GoalRequest::Lifecycle(Lifecycle::Delete, p)
);

/// The URI prefix of every stepstone resource.
pub(crate) const RESOURCE_PREFIX: &str = "stepstone://worklist/";

/// The four fixed resources.
pub fn resources() -> Vec<Resource> {
    [
        ("list", "Project Goals", "List the repository's Project Goals."),
        ("next", "Next goal", "Read the first ready goal in canonical file order."),
        ("ready", "Ready goals", "Read every unblocked, unclaimed open goal in the parallel frontier."),
        ("waves", "Goal waves", "Read unfinished goals grouped into their earliest dependency waves, plus any unreachable goals."),
    ]
    .into_iter()
    .map(|(name, title, description)| {
        Resource::new(format!("{RESOURCE_PREFIX}{name}"), name)
            .with_title(title)
            .with_description(description)
            .with_mime_type("application/json")
    })
    .collect()
}

/// The two URI templates.
pub(crate) fn resource_templates() -> Vec<ResourceTemplate> {
    [
        (
            "show/{id}",
            "show",
            "Show a goal",
            "Read one goal selected by a complete ID or unique ID prefix, including whether it is blocked and the goal IDs it blocks.",
        ),
        ("find/{query}", "find", "Find goals", "Find goals whose title or description contains the query."),
    ]
    .into_iter()
    .map(|(template, name, title, description)| {
        ResourceTemplate::new(format!("{RESOURCE_PREFIX}{template}"), name)
            .with_title(title)
            .with_description(description)
            .with_mime_type("application/json")
    })
    .collect()
}

/// Why a resource URI was not read (a JSON-RPC error, not an envelope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResourceRefusal {
    /// Not a stepstone resource, or not one of the six.
    NotFound(String),
    /// A template value that is not valid percent-encoded UTF-8.
    BadEncoding(String),
}

/// Parses a resource URI into the service request it names (template values URI-decoded).
pub(crate) fn resource_request(uri: &str) -> Result<GoalRequest, ResourceRefusal> {
    let Some(rest) = uri.strip_prefix(RESOURCE_PREFIX) else { return Err(ResourceRefusal::NotFound(uri.to_string())) };
    let decode = |value: &str| {
        percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .map(|v| v.into_owned())
            .map_err(|_| ResourceRefusal::BadEncoding(uri.to_string()))
    };
    match rest.split_once('/') {
        None => match rest {
            "list" => Ok(GoalRequest::List),
            "next" => Ok(GoalRequest::Next),
            "ready" => Ok(GoalRequest::Ready),
            "waves" => Ok(GoalRequest::Waves),
            _ => Err(ResourceRefusal::NotFound(uri.to_string())),
        },
        Some(("show", id)) if !id.is_empty() && !id.contains('/') => Ok(GoalRequest::Show { id: decode(id)? }),
        Some(("find", query)) if !query.is_empty() && !query.contains('/') => Ok(GoalRequest::Find { query: decode(query)? }),
        _ => Err(ResourceRefusal::NotFound(uri.to_string())),
    }
}

/// Reads one resource: the envelope as JSON text (a failure envelope is still a body).
pub(crate) fn read_resource(vault: &Vault, uri: &str) -> Result<String, ResourceRefusal> {
    let request = resource_request(uri)?;
    Ok(goals::run(vault, request).json().to_string())
}
