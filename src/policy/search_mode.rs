//! The search modes a caller may name (P.O.W.E.R.'s list and order); policy orders and validates
//! them (`domains`), search answers them.

use serde::Serialize;

use crate::error::{Error, Result};

/// A search mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    Auto,
    Fts,
    Semantic,
    Vector,
    Hybrid,
    Reranked,
    GraphAssisted,
}

impl SearchMode {
    pub fn parse(text: &str) -> Result<Self> {
        Ok(match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => SearchMode::Auto,
            "fts" => SearchMode::Fts,
            "semantic" => SearchMode::Semantic,
            "vector" => SearchMode::Vector,
            "hybrid" => SearchMode::Hybrid,
            "reranked" | "hybrid_reranked" => SearchMode::Reranked,
            "graph_assisted" => SearchMode::GraphAssisted,
            other => return Err(Error::InvalidArgument { name: "search_mode", reason: format!("unknown mode '{other}'") }),
        })
    }

    /// The canonical modes, in P.O.W.E.R.'s order (`hybrid_reranked` is an alias of reranked).
    pub(crate) const CANONICAL: [SearchMode; 7] = [
        SearchMode::Auto,
        SearchMode::Fts,
        SearchMode::Semantic,
        SearchMode::Vector,
        SearchMode::Hybrid,
        SearchMode::Reranked,
        SearchMode::GraphAssisted,
    ];

    /// Every name a caller may send (the canonical names, then the `hybrid_reranked` alias): the
    /// one list the MCP input schema's enum is built from.
    pub(crate) const ACCEPTED_NAMES: [&'static str; 8] =
        ["auto", "fts", "semantic", "vector", "hybrid", "reranked", "graph_assisted", "hybrid_reranked"];

    pub fn name(self) -> &'static str {
        match self {
            SearchMode::Auto => "auto",
            SearchMode::Fts => "fts",
            SearchMode::Semantic => "semantic",
            SearchMode::Vector => "vector",
            SearchMode::Hybrid => "hybrid",
            SearchMode::Reranked => "reranked",
            SearchMode::GraphAssisted => "graph_assisted",
        }
    }

    /// Whether the mode fails closed without a dense index (`vector`, `hybrid` and
    /// `graph_assisted` answer lexically instead, `reranked` reranks the BM25 candidates;
    /// `auto` falls back to fts).
    pub fn requires_dense_index(self) -> bool {
        matches!(self, SearchMode::Semantic)
    }
}
