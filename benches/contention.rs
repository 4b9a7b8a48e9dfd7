//! Many writers, one order (issue 49): N replicas, each in its own network namespace and its own
//! processes, write notes (`paravault ingest`) at a rising offered rate and `replicate` them to
//! one bare remote carrying the gate, served by `git daemon` across veth links. For each rate:
//! the time from a write's local commit to its arrival in the remote's history (p50/p99), the
//! writes integrated per second, `replicate` runs, fetch-integrate-push rounds per run, the share
//! of runs that retried and the runs that gave up after five rounds. Paired with floors from the
//! same run: one replica writing and replicating alone (the uncontended trip, gate included), and
//! a plain `git push` of a one-file commit over the same link. After the last rate every replica
//! converges and every acknowledged write is checked to be in the remote's history exactly once.
//!
//! Run (root, iproute2, git): `cargo bench --locked --profile dev --bench contention`.
//! Environment: `PARAVAULT_CONTENTION_REPLICAS` (default 12; 8–20 is the range),
//! `PARAVAULT_CONTENTION_RATES` (writes per second across the team, default `0.5,1,2,4,8`),
//! `PARAVAULT_CONTENTION_SECONDS` (per rate, default 30), `PARAVAULT_CONTENTION_SEED`.

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/it/netns.rs"]
#[allow(dead_code)]
mod netns;

#[path = "../tests/it/contention.rs"]
mod contention;

use std::time::Duration;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let replicas: usize = env("PARAVAULT_CONTENTION_REPLICAS", 12);
    let seconds: f64 = env("PARAVAULT_CONTENTION_SECONDS", 30.0);
    let seed: u64 = env("PARAVAULT_CONTENTION_SEED", 0x4931);
    let rates: Vec<f64> = std::env::var("PARAVAULT_CONTENTION_RATES")
        .unwrap_or_else(|_| "0.5,1,2,4,8".into())
        .split(',')
        .map(|r| r.trim().parse().expect("PARAVAULT_CONTENTION_RATES: numbers separated by commas"))
        .collect();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_paravault"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("contention: {replicas} replicas, each in its own network namespace, one gated remote over git://; {cores} cores");
    let team = contention::Team::start(bin, replicas);

    let (mut trip, mut push) = team.floors(0, 10);
    let trip_p50 = contention::quantile(&mut trip, 0.5).unwrap();
    let push_p50 = contention::quantile(&mut push, 0.5).unwrap();
    println!(
        "floors (same run): one replica alone, ingest → in the remote p50 {trip_p50:.0} ms (p99 {:.0}); plain git push of one file p50 {push_p50:.0} ms",
        contention::quantile(&mut trip, 0.99).unwrap()
    );
    println!(
        "{:>6} {:>6} {:>9} {:>9} {:>9} {:>6} {:>6} {:>7} {:>8} {:>6} {:>8} {:>9}",
        "rate/s", "writes", "integr/s", "p50 ms", "p99 ms", "×trip", "runs", "rounds", "retried", "gaveup", "run p50", "replicas"
    );
    let mut all = Vec::new();
    let mut dominated_at = None;
    for (k, rate) in rates.iter().enumerate() {
        let phase = team.phase(*rate, seconds, Duration::from_secs(180), seed.wrapping_add(k as u64));
        let s = phase.summary();
        println!(
            "{rate:>6.2} {:>6} {:>9.2} {:>9.0} {:>9.0} {:>6.1} {:>6} {:>7.2} {:>7.0}% {:>6} {:>8.0} {:>9}",
            s.writes,
            s.integrated_per_s,
            s.p50_ms,
            s.p99_ms,
            s.p50_ms / trip_p50,
            s.runs,
            s.mean_attempts,
            s.retried_share * 100.0,
            s.failed_runs,
            s.run_p50_ms,
            s.replicas_busy
        );
        assert_eq!(s.failed_writes, 0, "a write failed: {:?}", phase.first_failure);
        // Past saturation a push can also outlast `replication.network_timeout_s` (the remote's
        // hook starved of CPU): said, counted, and left to the next run like any failed run.
        let other =
            phase.run_failures.iter().find(|f| !f.contains("the remote moved during each of") && !f.contains("did not answer within"));
        assert!(other.is_none(), "a replicate run failed for another reason than contention: {other:?}");
        let timed_out = phase.run_failures.iter().filter(|f| f.contains("did not answer within")).count();
        if timed_out > 0 {
            println!("       ({timed_out} of the failed runs timed out at the remote rather than giving up after five rounds)");
        }
        if dominated_at.is_none() && (s.retried_share > 0.5 || s.failed_runs * 10 > s.runs) {
            dominated_at = Some(*rate);
        }
        all.extend(phase.writes);
    }
    match dominated_at {
        Some(rate) => println!(
            "retries dominate from {rate} writes/s across {replicas} replicas (over half the runs retried, or over a tenth gave up)"
        ),
        None => println!("retries never dominated up to {} writes/s", rates.last().copied().unwrap_or_default()),
    }
    team.converge();
    team.check_exactly_once(&all).expect("every acknowledged write lands exactly once");
    println!("exactly once: all {} acknowledged writes are in the remote's history once each; every replica holds its tree", all.len());
}
