//! MCP surfaces: which peer system's tool contract a server speaks (P.O.W.E.R., ctxvault,
//! stepstone, vaultspec-core), each a thin adapter over the one engine.
//!
//! A server exposes the surfaces chosen at start (`paravault mcp --surface power,stepstone`;
//! default P.O.W.E.R.'s, so existing clients see no change). Tool names keep each seed's exact
//! spelling, so two surfaces must never advertise the same name: `catalogs` refuses such a
//! selection before the server starts. A surface also decides how an `isError` result reads
//! (`failure_json`), because each seed documents its own failure shape.

use serde_json::{Value, json};

use super::ToolError;
use super::tools::ToolSpec;

/// One peer system's MCP contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Surface {
    /// P.O.W.E.R. (seed 004): the default tool surface.
    Power,
    /// ctxvault (seed 003): episodes, skills, documents, several vaults.
    Ctxvault,
    /// stepstone (seed 001): project goals.
    Stepstone,
    /// vaultspec-core (seed 000): decision documents, plans, ledgers.
    Vaultspec,
}

impl Surface {
    /// Every surface, in the order `--surface` lists them.
    pub const ALL: [Surface; 4] = [Surface::Power, Surface::Ctxvault, Surface::Stepstone, Surface::Vaultspec];

    /// The name `--surface` takes.
    pub fn name(self) -> &'static str {
        match self {
            Surface::Power => "power",
            Surface::Ctxvault => "ctxvault",
            Surface::Stepstone => "stepstone",
            Surface::Vaultspec => "vaultspec",
        }
    }

    /// Parses a comma-separated list (`power,stepstone`): names are case-insensitive, repeats
    /// are kept once, an empty list or an unknown name is an error naming the valid ones.
    pub(crate) fn parse_list(text: &str) -> Result<Vec<Surface>, String> {
        let mut surfaces = Vec::new();
        for raw in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some(surface) = Surface::ALL.into_iter().find(|s| s.name().eq_ignore_ascii_case(raw)) else {
                return Err(format!("unknown surface {raw:?}; choose from {}", Surface::names()));
            };
            if !surfaces.contains(&surface) {
                surfaces.push(surface);
            }
        }
        if surfaces.is_empty() {
            return Err(format!("no surface named; choose from {}", Surface::names()));
        }
        Ok(surfaces)
    }

    fn names() -> String {
        Surface::ALL.map(Surface::name).join(", ")
    }

    /// The JSON of an `isError` result on this surface.
    pub(crate) fn failure_json(self, error: &ToolError) -> Value {
        match self {
            Surface::Stepstone => super::stepstone::failure_json(error),
            Surface::Power | Surface::Ctxvault | Surface::Vaultspec => {
                let mut body =
                    json!({"code": error.code, "message": error.message, "retryable": error.retryable, "remediation": error.remediation});
                if let Some(details) = &error.details {
                    body["details"] = details.clone();
                }
                json!({ "error": body })
            }
        }
    }
}

/// The tool specs one surface implements.
pub fn catalog(surface: Surface) -> Vec<ToolSpec> {
    match surface {
        Surface::Power => super::tools::catalog(),
        Surface::Ctxvault => super::ctxvault::catalog(),
        Surface::Stepstone => super::stepstone::catalog(),
        Surface::Vaultspec => super::vaultspec::catalog(),
    }
}

/// The tool specs of every selected surface, refusing a selection in which two surfaces
/// advertise the same tool name (agents call tools by name; a collision would make one of them
/// unreachable).
pub fn catalogs(surfaces: &[Surface]) -> Result<Vec<ToolSpec>, String> {
    let mut all: Vec<ToolSpec> = Vec::new();
    for &surface in surfaces {
        for spec in catalog(surface) {
            if let Some(taken) = all.iter().find(|s| s.name == spec.name) {
                return Err(format!(
                    "surfaces {} and {} both define the tool {:?}; serve them from separate servers",
                    taken.surface.name(),
                    surface.name(),
                    spec.name
                ));
            }
            all.push(spec);
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests;
