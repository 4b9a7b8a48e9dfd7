//! Project goals benchmark (docs/goals.md): `ready` and `waves` over 10,000 goals with random
//! dependencies (the pure analysis, and the whole service read: note parse included), and a goal
//! mutation over MCP (`update` through `paravault mcp --surface stepstone`) next to the paired
//! physical floor (one durable 4 KiB atomic replace sampled right before each call, as in
//! benches/write_path.rs). Run: `cargo bench --locked --profile dev --bench goals`.
//! Environment: `PARAVAULT_BENCH_GOALS=10000`, `PARAVAULT_BENCH_ROUNDS=50`.

// Bench fixtures are built with std::fs; the engine under test writes only through store/.
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use paravault::goals::graph::Analysis;
use paravault::goals::{self, Goal, GoalRequest, GoalStatus, Worklist};
use paravault::vault::{Vault, VaultOptions};
use serde_json::json;
use support::mcp_client::McpClient;
use support::stats::report;

const BIN: &str = env!("CARGO_BIN_EXE_paravault");

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A seeded xorshift: the same random graph on every run.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// `n` goals, each depending on up to 3 random earlier goals (plus a few random later ones,
/// so cycles exist), a fifth of them done, a twentieth archived.
fn random_worklist(n: usize) -> Worklist {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let id = |i: usize| format!("g{i:09}");
    let goals = (0..n)
        .map(|i| {
            let mut depends_on: Vec<String> = (0..random.below(4)).filter(|_| i > 0).map(|_| id(random.below(i))).collect();
            if random.below(100) == 0 {
                depends_on.push(id(random.below(n)));
            }
            depends_on.dedup();
            let status = match random.below(20) {
                0..=3 => GoalStatus::Done,
                4 => GoalStatus::Archived,
                _ => GoalStatus::Open,
            };
            Goal {
                id: id(i),
                title: format!("Goal number {i}"),
                description: Some(format!("What goal {i} means.")),
                group: Some(format!("group {}", i % 17)),
                status,
                active: false,
                depends_on,
                links: Vec::new(),
                created_at: "2026-01-01T00:00:00.000Z".into(),
                updated_at: "2026-01-01T00:00:00.000Z".into(),
            }
        })
        .collect();
    Worklist { revision: 1, goals }
}

fn analysis(n: usize, rounds: usize) {
    let worklist = random_worklist(n);
    let edges: usize = worklist.goals.iter().map(|g| g.depends_on.len()).sum();
    println!("{n} goals, {edges} dependencies");
    let mut ready = Vec::new();
    let mut waves = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let found = Analysis::of(&worklist).ready(&worklist.goals);
        ready.push(started.elapsed());
        std::hint::black_box(found);
        let started = Instant::now();
        let analysis = Analysis::of(&worklist);
        let layered = analysis.waves(&worklist.goals);
        waves.push(started.elapsed());
        std::hint::black_box(layered);
    }
    report(&format!("ready, analysis only ({n} goals)"), ready, None);
    report(&format!("waves, analysis only ({n} goals)"), waves, None);
}

/// The service reads over a stored worklist of `n` goals (parse, analysis, envelope).
fn service_reads(n: usize, rounds: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("vault");
    Vault::init(&root, VaultOptions::default()).expect("init");
    // 10,000 goals are about 2.5 MB of Markdown: over the default 1 MiB note limit.
    std::fs::write(root.join(".paravault/policy.yaml"), "limits:\n  note_bytes_max: 16777216\n").expect("policy");
    let worklist = random_worklist(n);
    let frame = goals::format::new_frame("Project");
    let text = goals::format::render(&frame, &worklist, "2026-01-01T00:00:00Z");
    std::fs::write(root.join("01_Projects/Project Goals.md"), &text).expect("worklist");
    println!("worklist note: {} bytes", text.len());
    let vault = Vault::open(&root, VaultOptions::default()).expect("open");
    for (label, request) in [("ready", GoalRequest::Ready), ("waves", GoalRequest::Waves)] {
        let samples: Vec<Duration> = (0..rounds)
            .map(|_| {
                let started = Instant::now();
                let envelope = goals::run(&vault, request.clone());
                let elapsed = started.elapsed();
                assert!(envelope.ok, "{label}: {}", envelope.json());
                elapsed
            })
            .collect();
        report(&format!("{label}, service read ({n} goals, parse incl.)"), samples, None);
    }
}

/// A stepstone server over `vault`, initialized.
fn stepstone_client(vault: &Path) -> McpClient {
    let mut command = Command::new(BIN);
    command.arg("--vault").arg(vault).args(["mcp", "--surface", "stepstone"]);
    McpClient::ready(command, "goals-bench")
}

/// One durable 4 KiB atomic replace (the physical floor), in a folder beside the vault.
fn floor_sample(dir: &Path, i: usize) -> Duration {
    let bytes = vec![b'x'; 4096];
    let path = dir.join(format!("floor-{}.md", i % 4));
    let started = Instant::now();
    paravault::store::durable::replace(dir, &path, &bytes).expect("floor write");
    started.elapsed()
}

fn mutation_over_mcp(rounds: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("vault");
    Vault::init(&root, VaultOptions::default()).expect("init");
    let floor_dir = dir.path().join("floor");
    std::fs::create_dir(&floor_dir).expect("floor dir");
    let mut client = stepstone_client(&root);
    let mut last = String::new();
    for i in 0..20 {
        let added =
            client.call("add", json!({"title": format!("Goal {i}"), "dependsOn": if last.is_empty() { json!([]) } else { json!([last]) }}));
        last = added["result"]["goal"]["id"].as_str().expect("id").to_string();
    }
    let (mut floor, mut update) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        floor.push(floor_sample(&floor_dir, i));
        let started = Instant::now();
        client.call("update", json!({"id": last, "title": format!("Renamed {i}")}));
        update.push(started.elapsed());
    }
    client.close();
    let floor_p50 = report("floor: durable 4 KiB replace, paired", floor, None);
    report("update over MCP (20-goal worklist)", update, Some(floor_p50));
}

fn main() {
    let n = env_usize("PARAVAULT_BENCH_GOALS", 10_000);
    let rounds = env_usize("PARAVAULT_BENCH_ROUNDS", 50);
    analysis(n, rounds);
    service_reads(n, rounds.min(20));
    mutation_over_mcp(rounds);
}
