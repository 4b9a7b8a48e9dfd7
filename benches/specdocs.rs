//! vaultspec documents benchmark: a create batch of 100 documents (100 transactions and the
//! feature index), plan_progress closing every step of a 500-step plan (one write), each next to
//! the physical floor measured in the same run (one durable 4 KiB atomic replace: write, fsync,
//! rename, fsync dir), and find over 10,000 documents (reads only: the listing, a feature
//! search, a text search). Run: `cargo bench --locked --profile dev --bench specdocs`.
//! Environment: `PARAVAULT_BENCH_DIR` (default `target`), `PARAVAULT_BENCH_RUNS=5`.

// Bench fixtures are built with std::fs; the engine under test writes only through store/.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::time::{Duration, Instant};

use paravault::Vault;
use paravault::specdocs::authoring::{CreateSpec, FindRequest, FindRows, create, find};
use paravault::specdocs::plan::{StepChange, plan_progress};
use paravault::vault::VaultOptions;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The median of `runs` durable 4 KiB atomic replaces in a folder beside the vault.
fn floor(dir: &Path, runs: usize) -> Duration {
    let bytes = vec![b'x'; 4096];
    median(
        (0..runs.max(5))
            .map(|i| {
                let path = dir.join(format!("floor-{}.md", i % 4));
                let start = Instant::now();
                paravault::store::durable::replace(dir, &path, &bytes).expect("floor write");
                start.elapsed()
            })
            .collect(),
    )
}

fn fresh_vault(base: &Path) -> (tempfile::TempDir, Vault) {
    let dir = tempfile::Builder::new().prefix("pv-specdocs-").tempdir_in(base).unwrap();
    for folder in ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs"] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    let vault = Vault::open(dir.path(), VaultOptions::default()).unwrap();
    (dir, vault)
}

/// Where a create batch's time goes: the receipts' `phase_ms` (lock, plan, commit, apply,
/// publish) summed over its item transactions, and the time outside them (validation, the
/// feature indexes, the envelope).
struct CreateRun {
    elapsed: Duration,
    phases: std::collections::BTreeMap<String, f64>,
    transactions_ms: f64,
}

fn create_batch(base: &Path) -> CreateRun {
    let (_dir, vault) = fresh_vault(base);
    let specs: Vec<CreateSpec> = (0..100)
        .map(|i| CreateSpec {
            feature: format!("feature-{}", i % 10),
            doc_type: Some("research".into()),
            topic: Some(format!("topic-{i}")),
            date: Some("2026-05-30".into()),
            ..Default::default()
        })
        .collect();
    let start = Instant::now();
    let out = create(&vault, &specs).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(out.counts.get("created"), Some(&100), "{out:?}");
    let mut phases = std::collections::BTreeMap::new();
    let mut transactions_ms = 0.0;
    for receipt in vault.read_memory_history(1000, 0).unwrap().iter().filter(|r| r["operation"] == "mcp.vaultspec.create") {
        for (phase, ms) in receipt["phase_ms"].as_object().into_iter().flatten() {
            *phases.entry(phase.clone()).or_insert(0.0) += ms.as_f64().unwrap_or(0.0);
        }
        transactions_ms += receipt["duration_ms"].as_str().and_then(|d| d.parse::<f64>().ok()).unwrap_or(0.0);
    }
    CreateRun { elapsed, phases, transactions_ms }
}

fn progress_500(base: &Path) -> Duration {
    let (dir, vault) = fresh_vault(base);
    let folder = dir.path().join("01_Projects/big/plan");
    std::fs::create_dir_all(&folder).unwrap();
    let mut text = String::from(
        "---\ntype: Project\ntitle: big plan\ndescription: plan document of feature big\ntimestamp: 2026-05-30T00:00:00Z\ntags: ['#plan', '#big']\ndate: 2026-05-30\ntier: L1\nretired_steps: []\n---\n# big plan\n\n## Steps\n\n",
    );
    for i in 1..=500 {
        text.push_str(&format!("- [ ] S{i:02}: step {i} — scope: src/file_{i}.rs\n"));
    }
    std::fs::write(folder.join("2026-05-30-big-plan.md"), text).unwrap();
    vault.reload();
    let steps: Vec<StepChange> = (1..=500).map(|i| StepChange { step_id: format!("S{i:02}"), state: "checked".into() }).collect();
    let start = Instant::now();
    let out = plan_progress(&vault, "2026-05-30-big-plan", &steps).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(out.steps_completed, 500, "{out:?}");
    elapsed
}

fn find_10k(base: &Path, runs: usize) -> (Duration, Duration, Duration) {
    let (dir, vault) = fresh_vault(base);
    let types = ["research", "adr", "plan", "reference", "audit"];
    for i in 0..10_000 {
        let feature = format!("feature-{}", i % 200);
        let doc_type = types[i % types.len()];
        let folder = dir.path().join(format!("01_Projects/{feature}/{doc_type}"));
        std::fs::create_dir_all(&folder).unwrap();
        let stem = format!("2026-05-30-{feature}-t{i}-{doc_type}");
        let text = format!(
            "---\ntype: Project\ntitle: {stem}\ndescription: {doc_type} document of feature {feature}\ntimestamp: 2026-05-30T00:00:00Z\ntags: ['#{doc_type}', '#{feature}']\ndate: 2026-05-30\n---\n# {stem}\n\nBody {i}.\n"
        );
        std::fs::write(folder.join(format!("{stem}.md")), text).unwrap();
    }
    vault.reload();
    find(&vault, &FindRequest { limit: 20, ..Default::default() }).unwrap();
    let time = |request: FindRequest| {
        median(
            (0..runs)
                .map(|_| {
                    let start = Instant::now();
                    let rows = find(&vault, &request).unwrap();
                    assert!(match &rows.result {
                        FindRows::Features(rows) => !rows.is_empty(),
                        FindRows::Documents(rows) => !rows.is_empty(),
                    });
                    start.elapsed()
                })
                .collect(),
        )
    };
    (
        time(FindRequest { limit: 100, ..Default::default() }),
        time(FindRequest { feature: Some("feature-7".into()), limit: 20, ..Default::default() }),
        time(FindRequest { text: Some("t9998".into()), limit: 20, ..Default::default() }),
    )
}

fn main() {
    let base = std::path::PathBuf::from(std::env::var("PARAVAULT_BENCH_DIR").unwrap_or_else(|_| "target".into()));
    std::fs::create_dir_all(&base).unwrap();
    let runs: usize = std::env::var("PARAVAULT_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let floor_dir = tempfile::Builder::new().prefix("pv-floor-").tempdir_in(&base).unwrap();
    let floor = floor(floor_dir.path(), 9);
    println!("fsync floor (4 KiB durable replace)  median {:>8.2} ms", ms(floor));
    let mut creates: Vec<CreateRun> = (0..runs.min(3)).map(|_| create_batch(&base)).collect();
    creates.sort_by_key(|run| run.elapsed);
    let create_run = &creates[creates.len() / 2];
    let create = create_run.elapsed;
    println!(
        "create batch of 100 documents        median {:>8.2} ms  ({:.2} ms per item, {:.2}x the floor per item)",
        ms(create),
        ms(create) / 100.0,
        ms(create) / 100.0 / ms(floor)
    );
    let per_item: Vec<String> = create_run.phases.iter().map(|(phase, total)| format!("{phase} {:.2}", total / 100.0)).collect();
    println!(
        "  per item, from the receipts (ms): {}; in the transaction {:.2}, outside it {:.2}",
        per_item.join(", "),
        create_run.transactions_ms / 100.0,
        (ms(create) - create_run.transactions_ms) / 100.0
    );
    let progress = median((0..runs).map(|_| progress_500(&base)).collect());
    println!("plan_progress, 500 steps, one write  median {:>8.2} ms  ({:.2}x the floor)", ms(progress), ms(progress) / ms(floor));
    let (listing, feature, text) = find_10k(&base, runs);
    println!(
        "find over 10,000 documents: listing {:>8.2} ms, feature search {:>8.2} ms, text search {:>8.2} ms",
        ms(listing),
        ms(feature),
        ms(text)
    );
}
