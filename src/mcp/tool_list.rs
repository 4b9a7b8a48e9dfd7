//! The advertised tool list: everything but the output schemas at startup, those on first need.
//!
//! Deriving a tool's output schema (schemars over its report type, `$defs` inlined) is most of
//! the work of building the tool list, and nothing before tools/list needs it: a call reads its
//! arguments with the input schema, the capability manifest names tools and their annotations.
//! So the server starts from the bare tools (name, title, description, input schema,
//! annotations, `_meta`) and derives every output schema once, when tools/list or a tool lookup
//! first asks; the catalog hash over the whole list once too, when get_server_info first asks.
//! What they are given is exactly what building it all at startup gave.

use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

use super::surface::Surface;
use super::tools;

/// The advertised tools, in catalog order.
pub struct ToolList {
    /// Each tool without its output schema.
    bare: Vec<Tool>,
    /// How to derive each tool's output schema (same order as `bare`).
    outputs: Vec<(Surface, fn() -> Value)>,
    /// The tools as tools/list gives them.
    complete: OnceLock<Vec<Tool>>,
    /// sha256 of the canonical JSON of `complete`.
    sha256: OnceLock<String>,
}

/// A tool's declared output schema: its success shape with the typed error as the alternative
/// (a stepstone envelope declares its own failure form: `ok: false`, `error`).
/// Standard JSON Schema, like every input schema (`tools::standardise`).
fn output_schema(surface: Surface, success: fn() -> Value) -> JsonObject {
    let mut schema = match (surface, success()) {
        (Surface::Stepstone, Value::Object(envelope)) => envelope,
        (_, success) => tools::output_schema_with_error(success),
    };
    schema.values_mut().for_each(tools::standardise);
    schema
}

impl ToolList {
    pub(crate) fn new() -> Self {
        ToolList { bare: Vec::new(), outputs: Vec::new(), complete: OnceLock::new(), sha256: OnceLock::new() }
    }

    /// Adds `tool` (without an output schema) and how to derive its output schema.
    pub(crate) fn push(&mut self, tool: Tool, surface: Surface, output: fn() -> Value) {
        self.bare.push(tool);
        self.outputs.push((surface, output));
    }

    /// The tools without their output schemas (everything a call and the capability manifest
    /// need).
    pub fn bare(&self) -> &[Tool] {
        &self.bare
    }

    pub fn len(&self) -> usize {
        self.bare.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bare.is_empty()
    }

    /// The tools as tools/list gives them (output schemas derived on the first call).
    pub fn tools(&self) -> &[Tool] {
        self.complete.get_or_init(|| {
            self.bare
                .iter()
                .zip(&self.outputs)
                .map(|(tool, &(surface, output))| {
                    let mut tool = tool.clone();
                    tool.output_schema = Some(Arc::new(output_schema(surface, output)));
                    tool
                })
                .collect()
        })
    }

    /// sha256 of the canonical JSON of `tools()` (get_server_info's `tool_catalog_sha256`).
    pub fn sha256(&self) -> &str {
        self.sha256.get_or_init(|| {
            let catalog = serde_json::to_value(self.tools()).unwrap_or(Value::Null);
            crate::api::engine::sha256_hex(super::canonical_json(&catalog).as_bytes())
        })
    }
}
