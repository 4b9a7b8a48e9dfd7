//! The MCP tool table: one `ToolSpec` per tool, built from a typed parameter struct.
//!
//! Each tool is a `Deserialize + JsonSchema` parameter struct implementing `ToolParams` (its
//! name, description, answer type, whose derived schema is the declared output schema, and
//! engine call, which returns that type) plus one `spec::<P>()` line
//! in `catalog()`. Adding a tool whose engine exists is one struct and one table entry. The
//! handlers only translate arguments and call `Vault`; engine logic stays in the engine.
//!
//! This file holds the table, the schema helpers and `VaultScoped`; each tool family lives in
//! `tools/<family>.rs` (server_info, catalogs, notes, retrieval, maintenance, handoff, infra) and
//! its types are re-exported here, so `mcp::tools::<Tool>` paths are unchanged.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::api::handoff::HandoffRequest;
use crate::api::handoff::InfraRequest;
use crate::api::maintenance::ArchiveRequest;
use crate::api::maintenance::HealRequest;
use crate::api::maintenance::RotRequest;
use crate::api::policy::Policy;
use crate::api::write::{IngestRequest, SynthesizeRequest};
use crate::error::{Error, Result};
use crate::vault::Vault;

/// What a tool handler can see: the vault and facts about the running server.
pub struct ToolCtx {
    pub vault: Vault,
    pub read_only: bool,
    pub tool_count: usize,
    /// The advertised tools (their output schemas and catalog hash derived on first need).
    pub tools: super::tool_list::ToolList,
    /// The static capability manifest of this server (interfaces, search modes, OKF, models),
    /// shared with every `get_server_info` answer rather than copied into it.
    pub capabilities: std::sync::Arc<Value>,
    /// Names of the advertised tools that are read-only, and of the others.
    pub read_tools: Vec<String>,
    pub write_tools: Vec<String>,
    /// Tools in the policy that this server does not advertise (e.g. under `--read-only`).
    pub unavailable_tools: Vec<String>,
    /// Who is calling (`--agent`).
    pub agent: Option<String>,
    /// The registered vaults of the ctxvault surface, read on first use (`mcp::ctxvault`).
    pub memory: std::sync::OnceLock<crate::api::memory::vault_set::VaultSet>,
    /// The CLI's command line (vaultspec's `discover` ranks its verbs).
    pub cli: clap::Command,
}

/// A validated call, ready to run on a blocking thread.
pub(crate) type Job = Box<dyn FnOnce(&ToolCtx) -> Result<Value> + Send>;

/// The outcome of argument validation: the `vault_path` argument and the job, or the reason.
pub(crate) type Prepared = std::result::Result<(String, Job), String>;

/// One tool's parameters and behaviour.
pub(crate) trait ToolParams: DeserializeOwned + JsonSchema + Send + 'static {
    const NAME: &'static str;
    const TITLE: &'static str;
    const DESCRIPTION: &'static str;
    /// What a successful call answers; its derived JSON Schema is the tool's declared output
    /// schema, so the schema and the answer cannot drift apart.
    type Output: serde::Serialize + JsonSchema;
    /// The JSON object schema of a successful result.
    fn output_schema() -> Value {
        derived::<Self::Output>()
    }
    /// The contract's result is not an object (P.O.W.E.R.'s boolean or list): the answer's
    /// `result` field holds it, and the text content renders it as the official Python SDK
    /// renders a non-object return (`super::sdk_text_content`); structuredContent keeps the
    /// whole answer (`result` plus the added fields).
    const BARE_RESULT: bool = false;
    /// Whether the call answers from the process's model of the vault (the inventory, the
    /// search generations it serves), so that it must first read the watcher's queue
    /// (`Vault::observe_disk`) to see every edit finished before it. `false` only for a tool
    /// whose every part of its answer is read from disk by the call itself (`get_server_info`):
    /// reading the queue would buy it nothing, and the changes it leaves pending are taken by
    /// the next call that needs them.
    const OBSERVES_DISK: bool = true;
    /// Fills policy-driven parts of the input schema (enums, bounds).
    fn patch_input_schema(_schema: &mut serde_json::Map<String, Value>, _policy: &Policy) {}
    /// Runs the engine call; its answer is serialised as the JSON object result.
    fn run(self, ctx: &ToolCtx) -> Result<Self::Output>;
}

/// A row of the tool table.
pub struct ToolSpec {
    /// The surface (peer contract) the tool belongs to.
    pub surface: super::surface::Surface,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: fn(&Policy) -> serde_json::Map<String, Value>,
    pub output_schema: fn() -> Value,
    /// Deserialises the arguments; returns the `vault_path` argument and the job.
    pub prepare: fn(serde_json::Map<String, Value>) -> Prepared,
    /// `ToolParams::BARE_RESULT`.
    pub bare_result: bool,
    /// `ToolParams::OBSERVES_DISK`.
    pub observes_disk: bool,
}

/// The input schema of tool `P`: its arguments alone.
fn input_schema<P: ToolParams>(policy: &Policy) -> serde_json::Map<String, Value> {
    input_schema_of::<P, P>(policy)
}

/// The input schema of P.O.W.E.R. tool `P`: its arguments plus `vault_path`.
fn scoped_input_schema<P: ToolParams>(policy: &Policy) -> serde_json::Map<String, Value> {
    input_schema_of::<VaultScoped<P>, P>(policy)
}

fn input_schema_of<Arguments: JsonSchema + 'static, P: ToolParams>(policy: &Policy) -> serde_json::Map<String, Value> {
    let mut schema = rmcp::handler::server::tool::schema_for_input::<Arguments>()
        .unwrap_or_else(|e| panic!("BUG: invalid input schema for {}: {e}", P::NAME))
        .as_ref()
        .clone();
    inline_definitions(&mut schema);
    P::patch_input_schema(&mut schema, policy);
    declare_null_as_absent(&mut schema);
    schema
}

/// Declares what `normalise_arguments` accepts: every optional property also admits `null`
/// (its absence), as P.O.W.E.R.'s SDK-generated schemas do, so clients that validate
/// arguments before sending do not refuse the nulls LLMs produce.
fn declare_null_as_absent(schema: &mut serde_json::Map<String, Value>) {
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let Some(Value::Object(properties)) = schema.get_mut("properties") else { return };
    for (_, property) in properties.iter_mut().filter(|(name, _)| !required.contains(name)) {
        let Value::Object(property) = property else { continue };
        let null = json!("null");
        match property.get_mut("type") {
            Some(Value::String(kind)) if kind != "null" => {
                let kind = std::mem::take(kind);
                property.insert("type".into(), json!([kind, "null"]));
            }
            Some(Value::Array(kinds)) if !kinds.contains(&null) => kinds.push(null),
            Some(_) => {}
            None => {
                if let Some(Value::Array(options)) = property.get_mut("anyOf")
                    && !options.iter().any(|o| o.get("type") == Some(&null))
                {
                    options.push(json!({"type": "null"}));
                }
            }
        }
        if let Some(Value::Array(values)) = property.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
    }
}

/// Makes `schema` standard JSON Schema, as strict validators (Ajv, the TypeScript SDK's) compile
/// it: schemars marks Rust's number types with `format`s no standard defines (`uint`, `uint32`,
/// `int64`, `double`, ...), which Ajv's strict mode refuses to compile. Each such `format` is
/// dropped and its range kept as `minimum`/`maximum` (unsigned types get `minimum: 0`; a 64-bit
/// type's far end, past what a JSON number holds exactly, is left open). Applied to every
/// advertised input and output schema in one place (`tool_of`, `ToolList`). Values that are
/// data, not schemas (`enum`, `const`, `default`, `examples`), are left alone.
pub(crate) fn standardise(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if let Some(bounds) = map.get("format").and_then(Value::as_str).and_then(number_format_bounds) {
                map.remove("format");
                let (low, high) = bounds;
                if let Some(low) = low {
                    let tighter = map.get("minimum").and_then(Value::as_f64).is_some_and(|m| m >= low as f64);
                    if !tighter {
                        map.insert("minimum".into(), json!(low));
                    }
                }
                if let Some(high) = high {
                    let tighter = map.get("maximum").and_then(Value::as_f64).is_some_and(|m| m <= high as f64);
                    if !tighter {
                        map.insert("maximum".into(), json!(high));
                    }
                }
            }
            for (key, value) in map.iter_mut() {
                if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    standardise(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(standardise),
        _ => {}
    }
}

/// The range of a schemars number `format` (none for an end left open), or `None` for a format
/// that is not one of them (`date-time`, `uri`, ...: standard, kept).
fn number_format_bounds(format: &str) -> Option<(Option<i64>, Option<i64>)> {
    Some(match format {
        "uint8" => (Some(0), Some(i64::from(u8::MAX))),
        "uint16" => (Some(0), Some(i64::from(u16::MAX))),
        "uint32" => (Some(0), Some(i64::from(u32::MAX))),
        "uint" | "uint64" | "uint128" | "usize" => (Some(0), None),
        "int8" => (Some(i64::from(i8::MIN)), Some(i64::from(i8::MAX))),
        "int16" => (Some(i64::from(i16::MIN)), Some(i64::from(i16::MAX))),
        "int32" => (Some(i64::from(i32::MIN)), Some(i64::from(i32::MAX))),
        "int" | "int64" | "int128" | "isize" | "float" | "double" => (None, None),
        _ => return None,
    })
}

/// Replaces every `{"$ref": "#/$defs/X", ...}` by the definition (siblings kept) and drops
/// `$defs`, so clients that do not resolve references still see every enum and bound.
fn inline_definitions(schema: &mut serde_json::Map<String, Value>) {
    let Some(Value::Object(defs)) = schema.remove("$defs") else { return };
    fn walk(value: &mut Value, defs: &serde_json::Map<String, Value>, depth: usize) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref")
                    && let Some(Value::Object(def)) = target.strip_prefix("#/$defs/").and_then(|name| defs.get(name))
                    && depth < 32
                {
                    let def = def.clone();
                    map.remove("$ref");
                    for (key, v) in def {
                        map.entry(key).or_insert(v);
                    }
                }
                for v in map.values_mut() {
                    walk(v, defs, depth + 1);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, defs, depth + 1)),
            _ => {}
        }
    }
    for value in schema.values_mut() {
        walk(value, &defs, 0);
    }
}

/// Reads arguments the way LLM clients send them: a `null` is the parameter's absence (every
/// optional parameter has a default; a required one still fails as missing, by name), and an
/// integer parameter accepts its decimal digits as a string ("5"). Anything else is left for
/// the typed deserialisation to accept or refuse (unknown fields are refused by name).
pub(crate) fn normalise_arguments(
    input_schema: &serde_json::Map<String, Value>,
    args: serde_json::Map<String, Value>,
) -> serde_json::Map<String, Value> {
    let properties = input_schema.get("properties").and_then(Value::as_object);
    let is_integer = |name: &str| {
        properties.and_then(|p| p.get(name)).and_then(|p| p.get("type")).is_some_and(|t| match t {
            Value::String(t) => t == "integer",
            Value::Array(ts) => ts.iter().any(|t| t == "integer"),
            _ => false,
        })
    };
    args.into_iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(name, value)| match value {
            Value::String(text) if is_integer(&name) => {
                let digits = text.trim();
                let number = digits.parse::<u64>().map(Value::from).or_else(|_| digits.parse::<i64>().map(Value::from));
                (name, number.unwrap_or(Value::String(text)))
            }
            other => (name, other),
        })
        .collect()
}

/// The typed failure every tool can return (`isError: true`), as a JSON Schema.
pub(crate) fn error_schema() -> Value {
    json!({
        "type": "object",
        "description": "Present only when isError is true; code is documented in docs/errors.md.",
        "properties": {
            "code": {"type": "string"}, "message": {"type": "string"},
            "retryable": {"type": "boolean"}, "remediation": {"type": "string"}
        },
        "required": ["code", "message", "retryable", "remediation"]
    })
}

/// A tool's declared output schema: its success shape, or `{error: {...}}` as the declared
/// alternative, so that every result (success or `isError`) conforms to what tools/list says.
/// The success fields stay under `properties`; `required` moves into `anyOf`.
pub(crate) fn output_schema_with_error(success: Value) -> serde_json::Map<String, Value> {
    let mut schema = match success {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    schema.insert("type".into(), json!("object"));
    let properties = schema.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(properties) = properties {
        // A result that has an `error` field of its own (vaultspec's invoke: null, or the
        // failure of the verb it ran) admits both shapes.
        let failure = match properties.remove("error") {
            Some(own) => json!({"anyOf": [own, error_schema()]}),
            None => error_schema(),
        };
        properties.insert("error".into(), failure);
    }
    // The success branch: `required`, and any combinator of the success shape (a report whose
    // fields depend on a tag, such as vaultspec's status), which an error result need not meet.
    let mut success = serde_json::Map::new();
    if let Some(required) = schema.remove("required").filter(|r| r.as_array().is_some_and(|r| !r.is_empty())) {
        success.insert("required".into(), required);
    }
    for combinator in ["oneOf", "anyOf", "allOf"] {
        if let Some(value) = schema.remove(combinator) {
            success.insert(combinator.into(), value);
        }
    }
    if !success.is_empty() {
        schema.insert("anyOf".into(), json!([success, {"required": ["error"]}]));
    }
    schema
}

/// Deserialises tool `P`'s arguments; it is checked against no vault path.
fn prepare<P: ToolParams>(args: serde_json::Map<String, Value>) -> Prepared {
    let params: P = arguments(args)?;
    Ok((String::new(), job(params)))
}

/// Deserialises P.O.W.E.R. tool `P`'s arguments and takes out `vault_path`, which the server
/// checks before the job runs.
fn prepare_scoped<P: ToolParams>(mut args: serde_json::Map<String, Value>) -> Prepared {
    let vault_path = match args.remove("vault_path") {
        None => String::new(),
        Some(Value::String(path)) => path,
        Some(other) => {
            return Err(format!(
                "argument `vault_path`: expected a string, got {}; e.g. \"/home/you/notes\" (the configured vault root), or omit it",
                json_kind(&other)
            ));
        }
    };
    // The tool's own type lists the fields it knows; the caller may also pass `vault_path`.
    let params: P = arguments(args).map_err(|e| if e.contains("unknown field") { format!("{e} (or `vault_path`)") } else { e })?;
    Ok((vault_path, job(params)))
}

/// Deserialises a tool's arguments as `P`. A failure names the argument (serde's own message
/// names it only when it is missing or unknown), the shape `P`'s schema declares for it and an
/// example: `argument `verify`: invalid type: sequence, expected a string; expected a string,
/// e.g. "cargo test=pass"`.
pub(crate) fn arguments<P: DeserializeOwned + JsonSchema>(args: serde_json::Map<String, Value>) -> std::result::Result<P, String> {
    let value = Value::Object(args);
    serde_path_to_error::deserialize::<_, P>(&value).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.inner().to_string();
        if path == "." || path.is_empty() {
            return inner;
        }
        let top = path.split(['.', '[']).next().unwrap_or(&path).to_string();
        let mut schema = schemars::schema_for!(P).to_value();
        if let Value::Object(map) = &mut schema {
            inline_definitions(map);
        }
        match schema.get("properties").and_then(|p| p.get(&top)) {
            Some(property) => format!("argument `{path}`: {inner}; expected {}", shape_and_example(property)),
            None => format!("argument `{path}`: {inner}"),
        }
    })
}

/// What JSON kind `value` is, in words.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The alternatives of a property schema: itself, or the leaves of its `anyOf`/`oneOf`.
fn alternatives(schema: &Value) -> Vec<&Value> {
    match schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array) {
        Some(options) => options.iter().flat_map(alternatives).collect(),
        None => vec![schema],
    }
}

/// "a string, e.g. \"…\"": the shape a property schema declares, with an example value (the
/// schema's own `examples` or `default` when it has one).
fn shape_and_example(property: &Value) -> String {
    let leaves = alternatives(property);
    let mut kinds: Vec<&str> = Vec::new();
    for leaf in &leaves {
        let declared: Vec<&str> = match leaf.get("type") {
            Some(Value::String(kind)) => vec![kind.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        for kind in declared {
            if kind != "null" && !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }
    let values: Vec<&Value> =
        leaves.iter().filter_map(|l| l.get("enum").and_then(Value::as_array)).flatten().filter(|v| !v.is_null()).collect();
    let words: Vec<String> = kinds
        .iter()
        .map(|kind| match *kind {
            "string" if !values.is_empty() => format!("one of {}", values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")),
            "string" => "a string".to_string(),
            "integer" => "an integer".to_string(),
            "number" => "a number".to_string(),
            "boolean" => "a boolean".to_string(),
            "array" => "a list".to_string(),
            "object" => "an object".to_string(),
            other => other.to_string(),
        })
        .collect();
    let shape = if words.is_empty() { "a value of the declared shape".to_string() } else { words.join(" or ") };
    let example = property
        .get("examples")
        .and_then(|e| e.get(0))
        .or_else(|| property.get("default").filter(|d| !d.is_null()))
        .or_else(|| values.first().copied())
        .cloned()
        .unwrap_or_else(|| match kinds.first().copied() {
            Some("integer") => json!(leaves.iter().find_map(|l| l.get("minimum").and_then(Value::as_i64)).unwrap_or(1)),
            Some("number") => json!(0.5),
            Some("boolean") => json!(true),
            Some("array") => json!(["text"]),
            Some("object") => json!({}),
            _ => json!("text"),
        });
    format!("{shape}, e.g. {example}")
}

/// The job that runs `params` and serialises its answer.
pub(crate) fn job<P: ToolParams>(params: P) -> Job {
    Box::new(move |ctx: &ToolCtx| params.run(ctx).and_then(|answer| to_object(&answer)))
}

/// The table row of tool `P` on `surface`; it takes P's arguments alone.
pub(crate) fn spec_for<P: ToolParams>(surface: super::surface::Surface) -> ToolSpec {
    ToolSpec {
        surface,
        name: P::NAME,
        title: P::TITLE,
        description: P::DESCRIPTION,
        input_schema: input_schema::<P>,
        output_schema: P::output_schema,
        prepare: prepare::<P>,
        bare_result: P::BARE_RESULT,
        observes_disk: P::OBSERVES_DISK,
    }
}

/// The table row of P.O.W.E.R. tool `P`: every P.O.W.E.R. tool also takes `vault_path`
/// (`VaultScoped`), so no tool can leave it unchecked.
pub(crate) fn spec<P: ToolParams>() -> ToolSpec {
    ToolSpec { input_schema: scoped_input_schema::<P>, prepare: prepare_scoped::<P>, ..spec_for::<P>(super::surface::Surface::Power) }
}

/// Every tool this build implements, in catalog order (P.O.W.E.R.'s 21 plus `read_note` and
/// `get_proposal_status`).
pub fn catalog() -> Vec<ToolSpec> {
    vec![
        spec::<GetServerInfo>(),
        spec::<LintVault>(),
        spec::<GenerateIndex>(),
        spec::<ReadSubIndex>(),
        spec::<EnsureSubIndex>(),
        spec::<IngestNote>(),
        spec::<ProposeMemoryChange>(),
        spec::<ApplyMemoryChange>(),
        spec::<GetProposalStatus>(),
        spec::<ValidateMemoryState>(),
        spec::<ReadMemoryHistory>(),
        spec::<SynthesizeSession>(),
        spec::<CheckMarkdown>(),
        spec::<ReadNote>(),
        spec::<SearchVaultTool>(),
        spec::<SyncVault>(),
        spec::<GetMemoryContext>(),
        spec::<SuggestRelated>(),
        spec::<RotAudit>(),
        spec::<ArchiveNotes>(),
        spec::<HealFrontmatter>(),
        spec::<HandoffWork>(),
        spec::<InfraAction>(),
    ]
}

// ---- schema helpers ----

fn property<'a>(schema: &'a mut serde_json::Map<String, Value>, name: &str) -> Option<&'a mut serde_json::Map<String, Value>> {
    schema.get_mut("properties")?.get_mut(name)?.as_object_mut()
}

fn set_enum(schema: &mut serde_json::Map<String, Value>, name: &str, values: Vec<String>) {
    if let Some(p) = property(schema, name) {
        p.insert("enum".into(), json!(values));
    }
}

/// Sets `minimum`/`maximum` (and `default`, when given) of an integer property.
fn set_range(schema: &mut serde_json::Map<String, Value>, name: &str, min: u64, max: u64, default: Option<u64>) {
    if let Some(p) = property(schema, name) {
        p.insert("minimum".into(), json!(min));
        p.insert("maximum".into(), json!(max));
        if let Some(d) = default {
            p.insert("default".into(), json!(d));
        }
    }
}

/// Adds a description to each named property that has none (engine request types document
/// only some of their fields).
fn describe(schema: &mut serde_json::Map<String, Value>, texts: &[(&str, &str)]) {
    for (name, text) in texts {
        if let Some(p) = property(schema, name) {
            p.entry("description").or_insert_with(|| json!(text));
        }
    }
}

/// Sets a constraint keyword on a property (a string keyword on a `["string", "null"]`
/// property constrains the string case only).
fn constrain(schema: &mut serde_json::Map<String, Value>, name: &str, key: &str, value: Value) {
    if let Some(p) = property(schema, name) {
        p.insert(key.into(), value);
    }
}

/// `maxItems`, and `maxLength` of each item, of an array property.
fn constrain_list(schema: &mut serde_json::Map<String, Value>, name: &str, max_items: usize, item_chars: usize) {
    if let Some(p) = property(schema, name) {
        p.insert("maxItems".into(), json!(max_items));
        if let Some(Value::Object(items)) = p.get_mut("items") {
            items.insert("maxLength".into(), json!(item_chars));
            items.insert("minLength".into(), json!(1));
        }
    }
}

const VAULT_PATH_DOC: &str = "Optional; when given it must be the configured vault root.";

fn to_object<T: serde::Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::io("encoding", "result", std::io::Error::other(e)))
}

fn opt(text: &str) -> Option<&str> {
    let t = text.trim();
    (!t.is_empty()).then_some(t)
}

fn opt_string(text: &str) -> Option<String> {
    opt(text).map(str::to_string)
}

/// The success schema of report type `T`, derived from the type (`api::output_schema`) with
/// its `$defs` inlined.
pub(crate) fn derived<T: JsonSchema>() -> Value {
    let mut schema = crate::api::output_schema::<T>();
    if let Value::Object(map) = &mut schema {
        inline_definitions(map);
    }
    schema
}

/// `schema` with the schema of property `name` replaced: for a report field the engine hands
/// over as JSON (the receipt: `write::receipts::Receipt` serialised to a `Value` by `execute`),
/// the declared shape.
fn with_property(mut schema: Value, name: &str, property: Value) -> Value {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert(name.into(), property);
    }
    schema
}

// ---- the P.O.W.E.R. surface's vault_path argument ----

/// The schema of a P.O.W.E.R. tool's arguments plus the `vault_path` argument every P.O.W.E.R.
/// tool takes. The tool's own type stays the single definition of its parameters (names,
/// defaults, `deny_unknown_fields`); this adds `vault_path` to its schema, and
/// `prepare_scoped` takes it out before the tool's type deserialises, so the argument is
/// defined, described and checked in one place.
struct VaultScoped<R>(std::marker::PhantomData<R>);

impl<R: JsonSchema> JsonSchema for VaultScoped<R> {
    fn schema_name() -> Cow<'static, str> {
        R::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        format!("paravault::mcp::VaultScoped<{}>", R::schema_id()).into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = R::json_schema(generator);
        let properties = schema.ensure_object().entry("properties").or_insert_with(|| json!({}));
        if let Value::Object(properties) = properties {
            properties.insert("vault_path".into(), json!({"type": "string", "default": "", "description": VAULT_PATH_DOC}));
        }
        schema
    }
}

// ---- the tools, one file per family (tools/<family>.rs) ----

mod catalogs;
mod handoff;
mod infra;
mod maintenance;
mod notes;
mod retrieval;
mod server_info;

pub(crate) use catalogs::*;
pub(crate) use handoff::*;
pub(crate) use infra::*;
pub(crate) use maintenance::*;
pub(crate) use notes::*;
pub(crate) use retrieval::*;
pub(crate) use server_info::*;
