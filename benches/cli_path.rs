//! CLI benchmark: what one `paravault` command costs a person or a script, next to the two
//! floors measured in the same run — the process spawn floor (`paravault --version`: exec,
//! dynamic loading, argument parsing, no vault) and the durable-write floor (one 4 KiB atomic
//! replace: write, fsync, rename, fsync dir) — on generated vaults and FOLDOC when available.
//!
//! Measured per size: `ingest` of a new note, `doctor`, `lint` and `search` of an unchanged
//! vault (the persisted inventory warm: a stat walk, no parse), ingests one after another
//! without and with the folder journal (`paravault watch`) running, the same `lint` with the
//! persisted inventory removed (every note parsed), and the peak RSS of an ingest; then an
//! ingest into a vault whose receipt log holds 100,000 receipts (opening reads only its tip).
//! Run: `cargo bench --bench cli_path` (`PARAVAULT_BENCH_SIZES=2000,20000`,
//! `PARAVAULT_BENCH_RUNS=15`). With `PARAVAULT_BENCH_BASELINE_BIN=<an older paravault>` each
//! command is run by both binaries in every round, each on its own copy of the vault (their
//! persisted state may differ in format), and each figure is printed for both with the ratio
//! (the receipt-log history is then left out).

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_paravault");

/// One binary under measurement, on its own copy of the vault.
struct Subject {
    name: &'static str,
    bin: std::path::PathBuf,
    vault: std::path::PathBuf,
}

/// The binaries this run measures on `vault`: this build's, and the baseline's on a copy when
/// `PARAVAULT_BENCH_BASELINE_BIN` names one.
fn subjects(vault: &Path) -> Vec<Subject> {
    let mut out = Vec::new();
    if let Some(baseline) = std::env::var_os("PARAVAULT_BENCH_BASELINE_BIN") {
        let copy = vault.with_extension("baseline");
        let _ = std::fs::remove_dir_all(&copy);
        support::copy_tree(vault, &copy);
        out.push(Subject { name: "old", bin: baseline.into(), vault: copy });
    }
    out.push(Subject { name: "new", bin: BIN.into(), vault: vault.to_path_buf() });
    out
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn run(vault: Option<&Path>, args: &[&str]) -> Duration {
    run_bin(Path::new(BIN), vault, args)
}

fn run_bin(bin: &Path, vault: Option<&Path>, args: &[&str]) -> Duration {
    let mut command = Command::new(bin);
    if let Some(vault) = vault {
        command.arg("--vault").arg(vault);
    }
    command.args(args).stdout(Stdio::null()).stderr(Stdio::null()).env("PARAVAULT_STDIO_WATCHDOG", "0");
    let start = Instant::now();
    let status = command.status().expect("spawn paravault");
    let elapsed = start.elapsed();
    assert!(status.code().is_some_and(|c| c <= 1), "paravault {args:?} failed: {status}");
    elapsed
}

/// Peak RSS (KiB) of one command, from the kernel's accounting of the waited child.
fn peak_rss_kib(bin: &Path, vault: &Path, args: &[&str]) -> Option<u64> {
    let output = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg(bin)
        .arg("--vault")
        .arg(vault)
        .args(args)
        .stdout(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stderr).lines().last()?.trim().parse().ok()
}

fn fsync_floor(dir: &Path) -> Duration {
    let bytes = vec![b'x'; 4096];
    let path = dir.join("floor.md");
    let start = Instant::now();
    paravault::store::durable::replace(dir, &path, &bytes).expect("floor write");
    start.elapsed()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A command's samples per subject, in subject order.
type Series = Vec<Vec<Duration>>;

fn measure(label: &str, vault: &Path, notes: usize, runs: usize) {
    let floor_dir = vault.with_extension("floor");
    std::fs::create_dir_all(&floor_dir).expect("floor dir");
    let subjects = subjects(vault);
    for s in &subjects {
        // Warm: first open syncs nothing, writes the persisted inventory and the catalogs.
        run_bin(&s.bin, Some(&s.vault), &["index"]);
        run_bin(&s.bin, Some(&s.vault), &["sync", "--allow-partial"]);
        run_bin(&s.bin, Some(&s.vault), &["lint"]);
    }
    let per_subject = || -> Series { subjects.iter().map(|_| Vec::new()).collect() };
    let (mut spawn, mut fsync) = (Vec::new(), Vec::new());
    let (mut ingest, mut doctor, mut lint, mut search, mut cold) =
        (per_subject(), per_subject(), per_subject(), per_subject(), per_subject());
    for i in 0..runs {
        spawn.push(run(None, &["--version"]));
        fsync.push(fsync_floor(&floor_dir));
        // Alternate which binary goes first, so neither always runs on a cache the other warmed.
        for k in 0..subjects.len() {
            let k = (k + i) % subjects.len();
            let s = &subjects[k];
            let name = format!("03_Resources/cli-bench-{}-{i}", std::process::id());
            ingest[k].push(run_bin(
                &s.bin,
                Some(&s.vault),
                &["ingest", &name, "--title", "CLI bench", "--description", "one note", "--content", "body"],
            ));
            doctor[k].push(run_bin(&s.bin, Some(&s.vault), &["doctor"]));
            lint[k].push(run_bin(&s.bin, Some(&s.vault), &["lint"]));
            search[k].push(run_bin(&s.bin, Some(&s.vault), &["search", "parser grammar"]));
        }
    }
    // Ingests one after another (no other command between, as a script adding notes runs
    // them): without and then with the vault's folder journal running (`paravault watch`: a
    // write asks it which folders changed instead of a stat of each). The first two writes of
    // each series are not counted (with the journal, the first records its position in the
    // keyed copy, a fold).
    let back_to_back: Vec<(Duration, Duration)> = subjects.iter().map(|s| back_to_back_ingests(s, "back", runs)).collect();
    let with_journal: Vec<Option<(Duration, Duration)>> = subjects
        .iter()
        .map(|s| {
            start_folder_journal(s).map(|mut journal| {
                let series = back_to_back_ingests(s, "journal", runs);
                let _ = journal.kill();
                let _ = journal.wait();
                series
            })
        })
        .collect();
    for i in 0..runs.min(5) {
        for k in 0..subjects.len() {
            let s = &subjects[(k + i) % subjects.len()];
            let _ = std::fs::remove_file(s.vault.join(".paravault/inventory.redb"));
            let _ = std::fs::remove_file(s.vault.join(".paravault/inventory.bin"));
            cold[(k + i) % subjects.len()].push(run_bin(&s.bin, Some(&s.vault), &["lint"]));
        }
    }
    let (spawn, fsync) = (median(spawn), median(fsync));
    let budget = spawn + fsync * 4 + Duration::from_millis(5);
    let per_k = |d: Duration| (ms(d) - ms(spawn)) / (notes as f64 / 1000.0);
    println!("{label}: {notes} notes, {runs} runs; floors: spawn {:.2} ms, durable write {:.2} ms", ms(spawn), ms(fsync));
    let paired = subjects.len() > 1;
    // The last subject is this build; a ratio is this build's p50 over the baseline's.
    let ratio = |p50s: &[Duration]| if paired { format!("   new/old {:.2}", ms(p50s[1]) / ms(p50s[0])) } else { String::new() };
    let ingest: Vec<Duration> = ingest.into_iter().map(median).collect();
    for (s, p50) in subjects.iter().zip(&ingest) {
        println!(
            "  {:<3} ingest  p50 {:>8.2} ms   target spawn + 4x floor + 5 ms = {:.2} ms: {}",
            s.name,
            ms(*p50),
            ms(budget),
            if *p50 <= budget { "met" } else { "NOT met" }
        );
    }
    if paired {
        println!("      ingest{}", ratio(&ingest));
    }
    for (label, series) in [
        ("ingest, back to back", back_to_back.into_iter().map(Some).collect::<Vec<_>>()),
        ("ingest, back to back, folder journal", with_journal),
    ] {
        for (s, series) in subjects.iter().zip(&series) {
            let Some((spawn_now, took)) = series else {
                println!("  {:<3} {label}: the folder journal did not start", s.name);
                continue;
            };
            let budget = *spawn_now + fsync * 4 + Duration::from_millis(5);
            println!(
                "  {:<3} {label:<36} p50 {:>8.2} ms   (spawn {:.2} ms) target = {:.2} ms: {}",
                s.name,
                ms(*took),
                ms(*spawn_now),
                ms(budget),
                if *took <= budget { "met" } else { "NOT met" }
            );
        }
    }
    for (name, samples) in [("doctor", doctor), ("lint", lint), ("search", search), ("lint, no persisted inventory", cold)] {
        let p50s: Vec<Duration> = samples.into_iter().map(median).collect();
        for (s, p50) in subjects.iter().zip(&p50s) {
            println!("  {:<3} {name:<28} p50 {:>8.2} ms   above spawn per 1,000 notes {:>6.2} ms", s.name, ms(*p50), per_k(*p50));
        }
        if paired {
            println!("      {name}{}", ratio(&p50s));
        }
    }
    for s in &subjects {
        // Which model the ingests planned on (a one-shot write should load a partial model by
        // key from `.paravault/inventory.redb`, not the whole model).
        let traced = Command::new(&s.bin)
            .arg("--vault")
            .arg(&s.vault)
            .args([
                "ingest",
                &format!("03_Resources/cli-bench-{}-traced", std::process::id()),
                "--title",
                "T",
                "--description",
                "d",
                "--content",
                "b",
            ])
            .env("PARAVAULT_LOG", "paravault::state::model=debug")
            .env("PARAVAULT_STDIO_WATCHDOG", "0")
            .output()
            .expect("spawn paravault");
        let stderr = String::from_utf8_lossy(&traced.stderr);
        let model = if stderr.contains("partial model loaded by key") && !stderr.contains("loading it whole") {
            "partial, looked up by key"
        } else {
            "whole"
        };
        println!("  {:<3} ingest model: {model}", s.name);
        if let Some(kib) = peak_rss_kib(
            &s.bin,
            &s.vault,
            &["ingest", "03_Resources/cli-bench-rss", "--title", "R", "--description", "d", "--content", "b"],
        ) {
            println!("  {:<3} ingest peak RSS {:.1} MiB", s.name, kib as f64 / 1024.0);
        }
    }
}

/// `paravault watch` on `vault`, once it says it watches (`None`: it did not start).
/// `runs` ingests one after another (two more first, not counted), each after a spawn-floor
/// sample: the medians of both.
fn back_to_back_ingests(s: &Subject, tag: &str, runs: usize) -> (Duration, Duration) {
    let (mut spawn, mut ingest) = (Vec::new(), Vec::new());
    for i in 0..runs + 2 {
        let name = format!("03_Resources/cli-bench-{}-{tag}-{i}", std::process::id());
        let spawned = run(None, &["--version"]);
        let took =
            run_bin(&s.bin, Some(&s.vault), &["ingest", &name, "--title", "CLI bench", "--description", "one note", "--content", "body"]);
        if i >= 2 {
            spawn.push(spawned);
            ingest.push(took);
        }
    }
    (median(spawn), median(ingest))
}

fn start_folder_journal(s: &Subject) -> Option<std::process::Child> {
    use std::io::BufRead;
    let mut child =
        Command::new(&s.bin).arg("--vault").arg(&s.vault).arg("watch").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take()?).read_line(&mut line).ok()?;
    if line.contains("\"watching\"") {
        Some(child)
    } else {
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

/// An ingest into a 2,000-note vault whose receipt log holds `receipts` earlier receipts
/// (about 900 bytes each, as the engine writes them): the open reads only the log's tip, so
/// the figure is the 2,000-note one whatever the history.
fn measure_history(receipts: usize, runs: usize) {
    let vault = support::fresh_generated_vault(2_000);
    run(Some(&vault), &["index"]);
    run(Some(&vault), &["ingest", "03_Resources/history-seed", "--title", "Seed", "--description", "d", "--content", "b"]);
    let log = vault.join(".paravault/receipts.jsonl");
    let text = std::fs::read_to_string(&log).expect("read receipts");
    let last: serde_json::Value = serde_json::from_str(text.lines().last().expect("one receipt")).expect("receipt JSON");
    let first_seq = last["seq"].as_u64().expect("seq") + 1;
    let mut history = String::with_capacity(receipts * 1000);
    for i in 0..receipts as u64 {
        let mut receipt = last.clone();
        receipt["seq"] = (first_seq + i).into();
        receipt["path"] = format!("03_Resources/history-{i}.md").into();
        receipt["idempotency_key"] = if i % 3 == 0 { format!("history-{i}") } else { String::new() }.into();
        history.push_str(&receipt.to_string());
        history.push('\n');
    }
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).expect("open receipts");
    std::io::Write::write_all(&mut file, history.as_bytes()).expect("append history");
    let floor_dir = vault.with_extension("floor");
    std::fs::create_dir_all(&floor_dir).expect("floor dir");
    let (mut spawn, mut fsync, mut ingest) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        spawn.push(run(None, &["--version"]));
        fsync.push(fsync_floor(&floor_dir));
        let name = format!("03_Resources/history-bench-{i}");
        ingest.push(run(Some(&vault), &["ingest", &name, "--title", "H", "--description", "d", "--content", "b"]));
    }
    let (spawn, fsync, ingest) = (median(spawn), median(fsync), median(ingest));
    let mib = std::fs::metadata(&log).map_or(0.0, |m| m.len() as f64 / (1 << 20) as f64);
    println!(
        "history: gen-2000 with {receipts} receipts ({mib:.0} MiB log), {runs} runs; floors: spawn {:.2} ms, durable write {:.2} ms",
        ms(spawn),
        ms(fsync)
    );
    println!("  ingest  p50 {:>8.2} ms", ms(ingest));
    if let Some(kib) = peak_rss_kib(
        Path::new(BIN),
        &vault,
        &["ingest", "03_Resources/history-rss", "--title", "R", "--description", "d", "--content", "b"],
    ) {
        println!("  ingest peak RSS {:.1} MiB", kib as f64 / 1024.0);
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("PARAVAULT_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![2_000, 20_000]);
    let runs: usize = std::env::var("PARAVAULT_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    for n in sizes {
        let vault = support::fresh_generated_vault(n);
        measure(&format!("gen-{n}"), &vault, n, runs);
    }
    if let Some(foldoc) = support::foldoc_working_copy() {
        let notes = support::count_notes(&foldoc);
        measure("foldoc", &foldoc, notes, runs);
    }
    // The receipt-log history is this build's figure alone.
    if std::env::var_os("PARAVAULT_BENCH_BASELINE_BIN").is_none() {
        measure_history(100_000, runs);
    }
}
