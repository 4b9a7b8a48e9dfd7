//! paravault: a governed knowledge-vault engine.
//!
//! Reading order (also the layering: each module uses only those above it):
//! - `error`     — the one error type, with stable codes.
//! - `user_config` — the per-user folder outside every vault (registry, approver secrets).
//! - `policy`    — governance as data (`policy/default.yaml` + vault override).
//! - `note`      — pure note model: paths, frontmatter, OKF metadata, Markdown facts.
//! - `store`     — the only door to the disk for mutations (durable replace, fault injection).
//! - `scan`      — which files are in scope.
//! - `inventory` — the in-memory vault model, kept current one note at a time.
//! - `inventory_cache` — the persisted inventory (checksummed; reused after a stat walk).
//! - `embed`     — dense embeddings (all-MiniLM-L6-v2 on candle), the model resolved offline
//!                 first and sha256-verified under policy.
//! - `lint`      — health report and write gate over the inventory.
//! - `catalog`   — `index.md` and paged `_index.md` rendering (pure) and publishing.
//! - `watch`     — change detection for long-lived processes (file watcher + barrier).
//! - `vault`     — the application API every adapter calls.
//! - `handoff`   — `handoff_work`: durable work packets (Task v2) with a hash-chained journal.
//! - `infra`     — `infra_action`: the INFRA-1 broker client (identifiers only, Unix socket).
//! - `approvals` — human approval: policy rules, immutable decisions, approver secrets.
//! - `cli`       — the clap adapter.
//! - `mcp`       — the MCP stdio adapter (tools, annotations and limits from policy), one
//!                 surface per peer contract (`mcp::surface`).
//!
//! See docs/ARCHITECTURE.md for the write path and the invariants.

pub mod approvals;
pub mod embed;
pub mod error;
pub mod inventory;
pub mod inventory_cache;
pub mod lint;
pub mod maintenance;
pub mod note;
pub mod policy;
pub mod retrieval;
pub mod scan;
pub mod search;
pub mod server_info;
pub mod store;
pub mod user_config;

pub use error::{Error, Result};

pub mod catalog;
pub mod cli;
pub mod goals;
pub mod handoff;
pub mod infra;
pub mod mcp;
pub mod starter;
pub mod vault;
pub mod watch;
pub mod write;

pub use vault::Vault;
