//! Write-path benchmark: ingest and apply latency (p50/p90/p99 and mean, folds of the search
//! tail included) on 2,000- and 20,000-note vaults, next to the physical floor measured in the
//! same run (one durable 4 KiB atomic replace: write, fsync, rename, fsync dir), and what a
//! search right after a write costs (it builds the tail generation in memory) against a search
//! of an unchanged generation. Run: `cargo bench --bench write_path`.
//! Environment: `PARAVAULT_BENCH_SIZES=2000,20000`, `PARAVAULT_BENCH_WRITES=40`.

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

use paravault::Vault;
use paravault::write::operations::IngestRequest;
use serde_json::Value;
use support::stats::{floor_sample, p50};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(label: &str, mut samples: Vec<Duration>, floor: Duration) -> Duration {
    samples.sort();
    let (p50, p90, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.9), percentile(&samples, 0.99));
    let mean = samples.iter().sum::<Duration>() / samples.len().max(1) as u32;
    println!(
        "{label:<28} n={:<4} p50 {:>8.2} ms  p90 {:>8.2} ms  p99 {:>8.2} ms  mean {:>7.2} ms  p50/floor {:>5.2}x",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p90.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3,
        p50.as_secs_f64() / floor.as_secs_f64()
    );
    p50
}

fn generate(root: &Path, notes: usize) {
    let folders = ["01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "00_Inbox"];
    let types = ["Project", "Area", "Resource", "Archive", "Daily Log", "Resource"];
    let words = ["vault", "search", "index", "note", "graph", "policy", "receipt", "agent", "memory", "archive", "lint", "catalog"];
    for (i, folder) in folders.iter().enumerate() {
        std::fs::create_dir_all(root.join(folder)).unwrap();
        let _ = types[i];
    }
    std::fs::create_dir_all(root.join("PROTOCOLS")).unwrap();
    for n in 0..notes {
        let f = n % folders.len();
        let dir = root.join(folders[f]).join(format!("topic-{:02}", (n / folders.len()) % 40)).join(format!("sub-{}", n % 5));
        std::fs::create_dir_all(&dir).unwrap();
        let body: String = (0..200).map(|w| words[(n * 7 + w * 13) % words.len()]).collect::<Vec<_>>().join(" ");
        let text = format!(
            "---\ntype: {}\ntitle: Note {n}\ndescription: Generated note {n}\ntimestamp: 2026-01-01T00:00:00Z\ntags: [bench]\n---\n# Note {n}\n\n{body}\n\nSee [[note-{}]].\n",
            types[f],
            (n + 1) % notes
        );
        std::fs::write(dir.join(format!("note-{n}.md")), text).unwrap();
    }
}

fn measure(notes: usize, writes: usize) -> BTreeMap<&'static str, Duration> {
    let dir = tempfile::Builder::new()
        .prefix("pv-bench-")
        .tempdir_in(std::env::var("PARAVAULT_BENCH_DIR").unwrap_or_else(|_| "target".into()))
        .unwrap();
    let root = dir.path();
    let started = Instant::now();
    generate(root, notes);
    let vault = Vault::open(root, Default::default()).unwrap();
    vault.generate_index().unwrap();
    vault.sync_vault(&paravault::retrieval::SyncParams::default()).unwrap();
    println!("-- {notes} notes (generated, catalogued and indexed in {:.1} s)", started.elapsed().as_secs_f64());
    // The floor is sampled right before every write (same disk, same moment): this machine's
    // fsync latency drifts by 3x within minutes, so a floor measured apart is not comparable.
    let floor_dir = tempfile::Builder::new().prefix("pv-floor-").tempdir_in(root.parent().unwrap()).unwrap();
    let mut out = BTreeMap::new();
    let mut floor_ingest = Vec::new();
    let mut ingest = Vec::new();
    let mut phases: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for i in 0..writes {
        let request = IngestRequest {
            name: format!("01_Projects/bench-{i}"),
            note_type: "Project".into(),
            title: format!("Bench note {i}"),
            description: "A note written by the benchmark".into(),
            content: format!("Body of bench note {i} about the vault search index. See [[note-{i}]]."),
            ..Default::default()
        };
        floor_ingest.push(floor_sample(floor_dir.path(), i));
        let start = Instant::now();
        let receipt = vault.ingest_note(&request).unwrap().to_value();
        ingest.push(start.elapsed());
        if let Some(Value::Object(p)) = receipt.get("phase_ms") {
            for (k, v) in p {
                phases.entry(k.clone()).or_default().push(v.as_f64().unwrap_or(0.0));
            }
        }
    }
    let floor_p50 = p50(&floor_ingest);
    summary("floor, sampled before each ingest", floor_ingest, floor_p50);
    out.insert("ingest", summary("ingest_note", ingest, floor_p50));
    let medians: Vec<String> = phases
        .iter()
        .map(|(k, v)| {
            let mut v = v.clone();
            v.sort_by(f64::total_cmp);
            format!("{k} {:.2}", v[v.len() / 2])
        })
        .collect();
    println!("   ingest phase medians (ms): {}", medians.join(", "));
    let mut apply = Vec::new();
    let mut floor_apply = Vec::new();
    for i in 0..writes {
        let path = format!("01_Projects/bench-{i}.md");
        let text = std::fs::read_to_string(root.join(&path)).unwrap();
        let proposal = vault.propose_memory_change(&path, &format!("{text}\nEdited.\n"), None, None).unwrap();
        let map: BTreeMap<String, Value> = serde_json::from_value(serde_json::to_value(&proposal).unwrap()).unwrap();
        floor_apply.push(floor_sample(floor_dir.path(), i));
        let start = Instant::now();
        vault.apply_memory_change(&map, true).unwrap();
        apply.push(start.elapsed());
    }
    let floor_p50 = p50(&floor_apply);
    summary("floor, sampled before each apply", floor_apply, floor_p50);
    out.insert("apply", summary("apply_memory_change", apply, floor_p50));
    // A search right after a write reads the new tail generation (built on first use); a
    // second search of the same generation is the steady-state cost.
    let search = |query: &str| {
        let params = paravault::retrieval::SearchParams::fts(query, 10);
        let start = Instant::now();
        let envelope = vault.search(&params).unwrap();
        (start.elapsed(), envelope)
    };
    let (mut fresh, mut cached) = (Vec::new(), Vec::new());
    for i in 0..writes.min(30) {
        let request = IngestRequest {
            name: format!("01_Projects/probe-{i}"),
            note_type: "Project".into(),
            title: format!("Probe note {i}"),
            description: "A note the benchmark searches for at once".into(),
            content: format!("Probe body quasarprobe{i} about the vault. See [[note-{i}]]."),
            ..Default::default()
        };
        vault.ingest_note(&request).unwrap();
        let (elapsed, envelope) = search(&format!("quasarprobe{i}"));
        assert_eq!(envelope.result_count, 1, "a write is searchable at once");
        fresh.push(elapsed);
        cached.push(search(&format!("quasarprobe{i}")).0);
    }
    summary("search after a write", fresh, floor_p50);
    summary("search, same generation", cached, floor_p50);
    out
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("PARAVAULT_BENCH_SIZES")
        .unwrap_or_else(|_| "2000,20000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let writes: usize = std::env::var("PARAVAULT_BENCH_WRITES").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    let results: Vec<(usize, BTreeMap<&str, Duration>)> = sizes.iter().map(|&n| (n, measure(n, writes))).collect();
    if let (Some((small, a)), Some((large, b))) = (results.first(), results.last())
        && small != large
    {
        for op in ["ingest", "apply"] {
            println!("{op}: p50 at {large} notes / p50 at {small} notes = {:.2}x", b[op].as_secs_f64() / a[op].as_secs_f64());
        }
    }
}
