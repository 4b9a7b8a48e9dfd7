//! The CLI's progress of a long job (sync, rot audit, archive, heal) on stderr: on a terminal an indicatif bar (stage, count, rate, ETA;
//! not with `--json`); off a terminal one plain line every few seconds while a stage runs
//! (`embedding 1200/5183 (35.1/s, ETA 1m 53s)`), so a log shows a long job moving. stdout is
//! never touched.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a plain progress line is printed off a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

pub(crate) struct JobBar {
    bar: Option<ProgressBar>,
    stage: Mutex<&'static str>,
    /// Off a terminal: when the stage started and when the last line was printed.
    lines: Option<Mutex<(Instant, Instant)>>,
}

/// `1m 53s`, `42s`.
fn duration_words(seconds: f64) -> String {
    let s = seconds.round() as u64;
    if s >= 60 { format!("{}m {:02}s", s / 60, s % 60) } else { format!("{s}s") }
}

/// One plain progress line: stage, n/N, rate and ETA once there is a rate.
pub(crate) fn progress_line(stage: &str, done: usize, total: usize, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if done == 0 || secs <= 0.0 {
        return format!("{stage} {done}/{total}");
    }
    let rate = done as f64 / secs;
    let eta = total.saturating_sub(done) as f64 / rate;
    format!("{stage} {done}/{total} ({rate:.1}/s, ETA {})", duration_words(eta))
}

/// Runs a long job with its progress drawn on stderr (a `JobBar`), cleared when it ends.
pub(crate) fn with_bar<T>(json: bool, job: impl FnOnce(crate::api::search::Progress<'_>) -> T) -> T {
    let bar = JobBar::new(json);
    let out = job(&|stage, done, total| bar.update(stage, done, total));
    bar.finish();
    out
}

impl JobBar {
    pub fn new(json: bool) -> Self {
        let visible = !json && std::io::stderr().is_terminal();
        let bar = visible.then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {per_sec} ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar
        });
        let lines = (!std::io::stderr().is_terminal()).then(|| Mutex::new((Instant::now(), Instant::now())));
        JobBar { bar, stage: Mutex::new(""), lines }
    }

    pub fn update(&self, stage: &'static str, done: usize, total: usize) {
        if let Some(lines) = &self.lines {
            let mut current = self.stage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut times = lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            if *current != stage {
                *current = stage;
                *times = (now, now);
            }
            if now.duration_since(times.1) >= LINE_EVERY {
                times.1 = now;
                eprintln!("{}", progress_line(stage, done, total, now.duration_since(times.0)));
            }
            return;
        }
        let Some(bar) = &self.bar else { return };
        let mut current = self.stage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *current != stage {
            *current = stage;
            bar.set_prefix(stage);
            bar.reset();
        }
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_names_stage_count_rate_and_eta() {
        assert_eq!(progress_line("embedding", 0, 10, Duration::from_secs(1)), "embedding 0/10");
        assert_eq!(progress_line("embedding", 1200, 5183, Duration::from_secs(34)), "embedding 1200/5183 (35.3/s, ETA 1m 53s)");
        assert_eq!(progress_line("reading", 50, 100, Duration::from_secs(5)), "reading 50/100 (10.0/s, ETA 5s)");
    }
}
