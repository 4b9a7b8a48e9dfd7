//! Agent-memory benchmark (the ctxvault surface over MCP): write_episode and supersede_episode
//! round trips next to the physical floor measured in the same run (one durable 4 KiB atomic
//! replace), on a small vault and on the big one; query_episodes by entity and by valid_at, and
//! list_entities, on a vault holding PARAVAULT_BENCH_EPISODES generated episodes (written
//! straight to disk, read once by the first call); cold start (spawn → initialize) of a server with
//! 10 registered vaults against spawning `/bin/true`. Run:
//! `cargo bench --locked --profile dev --bench memory`.
//! Environment: `PARAVAULT_BENCH_EPISODES=100000`, `PARAVAULT_BENCH_ROUNDS=40`.

// Bench fixtures are built with std::fs; the engine under test writes only through store/.
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use paravault::memory::episodes::{EpisodeRecord, EpisodeState, render_note};
use paravault::memory::registry::{RegisteredVault, Registry, VaultType};
use serde_json::json;
use support::mcp_client::McpClient;
use support::stats::report;

const BIN: &str = env!("CARGO_BIN_EXE_paravault");
const FOLDERS: [&str; 7] = ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "PROTOCOLS"];

/// The command line of a ctxvault server over `main`, with the registry in `config`.
fn server(main: &Path, config: &Path, agent: Option<&str>) -> Command {
    let mut command = Command::new(BIN);
    command.arg("--vault").arg(main).args(["mcp", "--surface", "ctxvault"]).env("PARAVAULT_CONFIG_DIR", config);
    if let Some(agent) = agent {
        command.args(["--agent", agent]);
    }
    command
}

fn make_vault(root: &Path) {
    for folder in FOLDERS {
        std::fs::create_dir_all(root.join(folder)).expect("vault folder");
    }
}

/// Writes `count` episode notes directly (as the engine renders them), over 500 entities and
/// valid times spread over ten years; a quarter are closed (superseded) versions.
fn generate(root: &Path, count: usize) {
    let folder = root.join("02_Areas/memory/episodes");
    for i in 0..count {
        let id = format!("{:032x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ 0xabcdef);
        let dir = folder.join(&id[..2]);
        if i < 256 || !dir.exists() {
            std::fs::create_dir_all(&dir).expect("shard");
        }
        let year = 2015 + (i % 10);
        let closed = i % 4 == 0;
        let record = EpisodeRecord {
            id: id.clone(),
            entities: vec![format!("entity-{}", i % 500), format!("topic-{}", i % 37)],
            source: None,
            salience: (i % 10) as f64 / 10.0,
            confidence: 1.0,
            occurred_at: None,
            valid_from: format!("{year}-01-01T00:00:00Z"),
            valid_to: closed.then(|| format!("{}-01-01T00:00:00Z", year + 1)),
            state: if closed { EpisodeState::Invalidated } else { EpisodeState::Open },
            supersedes: None,
            superseded_by: None,
            revises: None,
            revised_by: None,
            invalidation_reason: String::new(),
            recorded_op: format!("gen{i}"),
            closed_op: closed.then(|| format!("gen{i}c")),
            attestations: Vec::new(),
            disputes: Vec::new(),
        };
        let text = render_note(
            "Area",
            &record,
            &format!("statement {i} about entity-{} in {year}", i % 500),
            "paravault://bench",
            chrono::Utc::now(),
        )
        .expect("render");
        std::fs::write(dir.join(format!("{id}.md")), text).expect("write episode");
    }
}

fn floor_samples(dir: &Path, rounds: usize) -> Vec<Duration> {
    let bytes = vec![b'x'; 4096];
    (0..rounds)
        .map(|i| {
            let path = dir.join(format!("floor-{}.md", i % 4));
            let start = Instant::now();
            paravault::store::durable::replace(dir, &path, &bytes).expect("floor write");
            start.elapsed()
        })
        .collect()
}

/// `rounds` write_episode and supersede_episode round trips on `vault`, each round next to one
/// floor sample: (write samples, supersede samples, floor samples).
fn paired_writes(client: &mut McpClient, vault: &str, floor_dir: &Path, rounds: usize) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let mut write_samples = Vec::new();
    let mut supersede_samples = Vec::new();
    let mut floors = Vec::new();
    let mut last = client.call("write_episode", json!({"vault_name": vault, "content": "warm-up", "entities": ["a"]}))["episode"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    for i in 0..rounds {
        floors.extend(floor_samples(floor_dir, 1));
        let start = Instant::now();
        client.call("write_episode", json!({"vault_name": vault, "content": format!("fact {i}"), "entities": ["bench"]}));
        write_samples.push(start.elapsed());
        let start = Instant::now();
        let out = client.call("supersede_episode", json!({"vault_name": vault, "episode_id": last, "content": format!("update {i}")}));
        supersede_samples.push(start.elapsed());
        last = out["episode"]["id"].as_str().expect("id").to_string();
    }
    (write_samples, supersede_samples, floors)
}

fn main() {
    let episodes: usize = std::env::var("PARAVAULT_BENCH_EPISODES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let rounds: usize = std::env::var("PARAVAULT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    let base = tempfile::tempdir().expect("tempdir");
    let config = base.path().join("config");
    let main_root = base.path().join("main");
    make_vault(&main_root);
    let mut registry = Registry::default();
    for n in 0..10 {
        let root = base.path().join(format!("vault{n}"));
        make_vault(&root);
        if n == 0 {
            let started = Instant::now();
            generate(&root, episodes);
            println!("generated {episodes} episodes in {:.1} s", started.elapsed().as_secs_f64());
        }
        let entry = RegisteredVault {
            name: format!("vault{n}"),
            root,
            vault_type: VaultType::Any,
            restricted: false,
            agents: Default::default(),
            description: String::new(),
        };
        registry.add(entry, false).expect("register");
    }
    registry.save(&Registry::file_in(&config)).expect("save registry");

    // Cold start with 10 registered vaults (the registry is read on the first ctxvault call).
    let floor: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            Command::new("/bin/true").status().expect("spawn /bin/true");
            start.elapsed()
        })
        .collect();
    let spawn_floor = report("floor: spawn /bin/true and wait", floor, None);
    let cold: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            let mut client = McpClient::spawn(server(&main_root, &config, None));
            client.initialize("memory-bench");
            let elapsed = start.elapsed();
            client.close();
            elapsed
        })
        .collect();
    report("cold start, 10 registered vaults → initialize", cold, Some(spawn_floor));
    let first: Vec<Duration> = (0..rounds.min(10))
        .map(|_| {
            let start = Instant::now();
            let mut client = McpClient::ready(server(&main_root, &config, None), "memory-bench");
            client.call("list_vaults", json!({}));
            let elapsed = start.elapsed();
            client.close();
            elapsed
        })
        .collect();
    report("cold start → first list_vaults answered", first, Some(spawn_floor));

    let mut client = McpClient::ready(server(&main_root, &config, None), "memory-bench");
    // Writes on a small vault (vault1), paired with the floor in the same run.
    let floor_dir = base.path().join("floor");
    std::fs::create_dir_all(&floor_dir).expect("floor dir");
    let (write_samples, supersede_samples, floors) = paired_writes(&mut client, "vault1", &floor_dir, rounds);
    let floor = report("floor: durable 4 KiB replace (paired)", floors, None);
    report("write_episode over MCP (small vault)", write_samples, Some(floor));
    report("supersede_episode over MCP (small vault)", supersede_samples, Some(floor));

    // Reads on the big vault (vault0): the first call opens it and parses every episode.
    let start = Instant::now();
    let total =
        client.call("query_episodes", json!({"vault_name": "vault0", "include_closed": true, "limit": 1}))["total_matching"].clone();
    println!("vault0 first call (open + parse {total} episodes): {:.1} s", start.elapsed().as_secs_f64());
    let mut samples = Vec::new();
    for i in 0..rounds {
        let start = Instant::now();
        client.call("query_episodes", json!({"vault_name": "vault0", "entities": [format!("entity-{}", i % 500)]}));
        samples.push(start.elapsed());
    }
    report(&format!("query_episodes by entity at {episodes}"), samples, None);
    let mut samples = Vec::new();
    for i in 0..rounds {
        let start = Instant::now();
        client.call("query_episodes", json!({"vault_name": "vault0", "valid_at": format!("{}-06-01", 2015 + i % 10)}));
        samples.push(start.elapsed());
    }
    report(&format!("query_episodes by valid_at at {episodes}"), samples, None);
    let mut samples = Vec::new();
    for _ in 0..rounds.min(20) {
        let start = Instant::now();
        client.call("list_entities", json!({"vault_name": "vault0"}));
        samples.push(start.elapsed());
    }
    report(&format!("list_entities at {episodes}"), samples, None);
    // Writes on the big vault, paired with the floor in the same run.
    let (write_samples, supersede_samples, floors) = paired_writes(&mut client, "vault0", &floor_dir, rounds);
    let floor = report(&format!("floor: durable 4 KiB replace (paired, at {episodes})"), floors, None);
    report(&format!("write_episode over MCP at {episodes}"), write_samples, Some(floor));
    report(&format!("supersede_episode over MCP at {episodes}"), supersede_samples, Some(floor));
    // A write to the big vault and the query after it (the cache re-reads one note).
    let mut samples = Vec::new();
    for i in 0..rounds.min(10) {
        let start = Instant::now();
        client.call("write_episode", json!({"vault_name": "vault0", "content": format!("new {i}"), "entities": ["entity-1"]}));
        client.call("query_episodes", json!({"vault_name": "vault0", "entities": ["entity-1"]}));
        samples.push(start.elapsed());
    }
    report(&format!("write_episode + query at {episodes}"), samples, None);
    client.close();
}
