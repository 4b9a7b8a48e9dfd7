//! Search benchmark: full FTS sync throughput (generated 20,000-note vault and FOLDOC), query
//! latency p50/p99 at 100,000 notes (in-process; the short queries below, then 10-, 100- and
//! 300-word queries of the vault's own words), and publishing one changed note at 2,000 vs
//! 100,000 notes. Run: `cargo bench --bench search_path` (sizes via `PARAVAULT_BENCH_SEARCH`,
//! default `2000,20000,100000`).

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use paravault::Vault;
use paravault::retrieval::SearchParams;

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn full_sync(label: &str, root: &Path) -> (f64, usize) {
    // The vault was just generated or copied: flush its dirty pages first, so the figure is the
    // sync's own work, not the kernel writing the generator's 20k files back meanwhile.
    let _ = std::process::Command::new("sync").status();
    let vault = Vault::open(root, Default::default()).expect("open");
    let start = Instant::now();
    let report = vault.sync_vault(&paravault::retrieval::SyncParams { allow_partial: true, ..Default::default() }).expect("sync");
    let secs = start.elapsed().as_secs_f64();
    let notes = report.counts.indexed;
    println!(
        "{label:<34} full sync: {notes} notes in {secs:.2} s = {:>8.0} notes/s (inventory load + index + publish)",
        notes as f64 / secs
    );
    (secs, notes)
}

const QUERIES: &[&str] = &[
    "vault search",
    "index policy",
    "graph memory agent",
    "\"catalog note\"",
    "receipt",
    "archive lint",
    "semantic retrieval",
    "project plan",
    "daily log review",
    "knowledge base",
];

fn queries(label: &str, root: &Path, rounds: usize) {
    let short: Vec<String> = QUERIES.iter().map(|q| q.to_string()).collect();
    latency(label, root, &short, rounds);
    for words in [10, 100, 300] {
        let long: Vec<String> = (0..10).map(|i| support::vocabulary_query(i, words)).collect();
        latency(&format!("{label} ({words}-word queries)"), root, &long, (rounds / 3).max(3));
    }
}

fn latency(label: &str, root: &Path, queries: &[String], rounds: usize) {
    let vault = Vault::open(root, Default::default()).expect("open");
    let run = |q: &str| {
        vault
            .search(&SearchParams {
                query: q.into(),
                max_results: 10,
                search_mode: "fts".into(),
                temporal_view: "current".into(),
                as_of: None,
                domain: None,
            })
            .expect("search")
    };
    // The first pass warms the caches (the page cache; the scorer's per-block bounds, built per
    // segment and term on first use): its mean is the cold figure.
    let start = Instant::now();
    for q in queries {
        run(q);
    }
    let cold = start.elapsed().as_secs_f64() * 1e3 / queries.len() as f64;
    let mut samples = Vec::new();
    for _ in 0..rounds {
        for q in queries {
            let start = Instant::now();
            std::hint::black_box(run(q));
            samples.push(start.elapsed());
        }
    }
    samples.sort();
    println!(
        "{label:<34} query p50 {:.3} ms  p99 {:.3} ms  (n={}; first pass mean {cold:.3} ms)",
        pct(&samples, 0.5),
        pct(&samples, 0.99),
        samples.len()
    );
}

fn publish_one(label: &str, root: &Path, n: usize, writes: usize) {
    let vault = Vault::open(root, Default::default()).expect("open");
    let samples = support::publish_changed_notes(&vault, n, writes);
    println!("{label:<34} publish one changed note (durable): p50 {:.2} ms  p90 {:.2} ms", pct(&samples, 0.5), pct(&samples, 0.9));
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("PARAVAULT_BENCH_SEARCH")
        .unwrap_or_else(|_| "2000,20000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    for n in sizes {
        let root = support::fresh_generated_vault(n);
        let label = format!("generated {n}");
        full_sync(&label, &root);
        queries(&label, &root, if n >= 100_000 { 30 } else { 50 });
        publish_one(&label, &root, n, 15);
        let _ = std::fs::remove_dir_all(&root);
    }
    if std::env::var_os("PARAVAULT_BENCH_SKIP_FOLDOC").is_none()
        && let Some(root) = support::foldoc_working_copy()
    {
        full_sync("FOLDOC", &root);
        queries("FOLDOC", &root, 50);
    }
}
