//! Latency summaries the benches print: p50/p90/p99 of a sample set, with the ratio of p50 to
//! the floor measured in the same run when there is one.

use std::time::Duration;

/// Milliseconds, as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `p` quantile (0..=1) of sorted samples (nearest rank).
pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The median of unsorted samples (nearest rank).
pub fn p50(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    pct(&sorted, 0.5)
}

/// One durable 4 KiB atomic replace in `dir` (write, fsync, rename, fsync the folder): the
/// physical floor of a write, sampled beside the measured writes (this machine's fsync latency
/// drifts by 3x within minutes, so a floor measured apart is not comparable).
pub fn floor_sample(dir: &std::path::Path, i: usize) -> Duration {
    let bytes = vec![b'x'; 4096];
    let path = dir.join(format!("floor-{}.md", i % 4));
    let start = std::time::Instant::now();
    paravault::store::durable::replace(dir, &path, &bytes).expect("floor write");
    start.elapsed()
}

/// Prints one line with p50/p90/p99 of `samples` (and p50 over `floor`) and returns p50.
pub fn report(label: &str, mut samples: Vec<Duration>, floor: Option<Duration>) -> Duration {
    samples.sort();
    let p50 = pct(&samples, 0.5);
    let ratio = floor.map(|f| format!("  p50/floor {:>6.2}x", p50.as_secs_f64() / f.as_secs_f64())).unwrap_or_default();
    println!(
        "{label:<52} n={:<4} p50 {:>8.3} ms  p90 {:>8.3} ms  p99 {:>8.3} ms{ratio}",
        samples.len(),
        ms(p50),
        ms(pct(&samples, 0.9)),
        ms(pct(&samples, 0.99))
    );
    p50
}
