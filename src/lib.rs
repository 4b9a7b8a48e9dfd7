//! paravault: a governed knowledge-vault engine.
//!
//! Reading order, which is also the layering: each module uses only those above it, with no
//! exception (`tests/it/tidy.rs` checks every `crate::` path against this order).
//! - `clock`     — the one clock: stamps (`Clock`, a vault's `VaultOptions::now`/`today`) and
//!   this machine's wall clock for file ages and unique names (leaf).
//! - `hex`       — lower-case hex, sha256 and random identifiers.
//! - `finding`   — a named lint finding and its severity (leaf).
//! - `error`     — the one error type, with stable codes.
//! - `user_config` — the per-user folder outside every vault (registry, approver secrets).
//! - `store`     — the only door to the disk for mutations (durable replace, folder handles,
//!   the journal, the git binary's plumbing, fault injection in test builds).
//! - `policy`    — governance as data (`policy/default.yaml` + vault override), search modes.
//! - `note`      — pure note model: paths, frontmatter, OKF metadata, Markdown facts (no I/O).
//! - `scan`      — which files are in scope.
//! - `inventory` — the in-memory vault model, kept current one note at a time, and its source
//!   snapshot digest.
//! - `inventory_cache` — the persisted inventory, one `redb` copy read whole or by key (sealed;
//!   reused after a stat walk).
//! - `embed`     — dense embeddings (all-MiniLM-L6-v2 on candle), the model resolved offline
//!   first and sha256-verified under policy.
//! - `lint`      — health report and write gate over the inventory.
//! - `catalog`   — `index.md` and paged `_index.md` rendering (pure) and publishing.
//! - `search`    — immutable search generations: sync, publish, query, modes.
//! - `watch`     — change detection for long-lived processes (inotify, its queue read before each call).
//! - `folder_journal` — the folder journal `paravault watch` keeps, which a write consults.
//! - `starter`   — the starter notes of a new vault.
//! - `state`     — what an open vault holds in memory (policy, model, catalogs, summaries)
//!   and every operation that needs no writer lock.
//! - `write`     — the one write transaction and its operations, run on a `VaultState`.
//! - `vault`     — the application API every adapter calls: `Vault`, a state and its writer.
//! - `approvals` — human approval: policy rules, immutable decisions, approver secrets.
//! - `retrieval`, `replicate`, `maintenance`, `doctor` — read operations; one vault on several
//!   devices over git; maintenance; the doctor report.
//! - `handoff`   — `handoff_work`: durable work packets (Task v2) with a hash-chained journal.
//! - `infra`     — `infra_action`: the INFRA-1 broker client and `paravault broker`.
//! - `goals`     — stepstone's project goals: a worklist note, its graph, the goal service.
//! - `specdocs`  — vaultspec decision documents, plans with canonical step IDs, ledgers.
//! - `memory`    — agent memory (ctxvault): episodes, skills, documents, the vault registry.
//! - `api`       — the request and report types the adapters speak (re-exported from the
//!   engine), with their derived JSON Schemas: adapters import only `api`, `vault` and `error`.
//! - `mcp`       — the MCP stdio adapter (tools, annotations and limits from policy), one
//!   surface per peer contract (`mcp::surface`).
//! - `web`       — `paravault web`: the people's HTTP adapter (review, approve, browse; axum).
//! - `cli`       — the clap adapter (starts the MCP server and the web server).
//!
//! See docs/ARCHITECTURE.md for the write path and the invariants (docs/internals.md in full).

// Unit tests build fixtures with std::fs (clippy.toml); the library itself may not.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod api;
pub mod approvals;
pub mod doctor;
pub mod embed;
pub mod error;
pub mod finding;
pub mod folder_journal;
pub mod hex;
pub mod inventory;
pub mod inventory_cache;
pub mod lint;
pub mod maintenance;
pub mod memory;
pub mod note;
pub mod policy;
pub mod replicate;
pub mod retrieval;
pub mod scan;
pub mod search;
pub mod store;
pub mod user_config;

pub use error::{Error, Result};

pub mod catalog;
pub mod cli;
pub mod clock;
pub mod goals;
pub mod handoff;
pub mod infra;
pub mod mcp;
pub mod specdocs;
pub mod starter;
pub mod state;
pub mod vault;
pub mod watch;
pub mod web;
pub mod write;

pub use vault::Vault;
