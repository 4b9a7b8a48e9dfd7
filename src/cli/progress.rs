//! The CLI's sync progress bar (indicatif on stderr): stage, count and ETA; hidden when stderr
//! is not a terminal or the output is JSON.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(crate) struct SyncBar {
    bar: Option<ProgressBar>,
    stage: Mutex<&'static str>,
}

impl SyncBar {
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
        SyncBar { bar, stage: Mutex::new("") }
    }

    pub fn update(&self, stage: &'static str, done: usize, total: usize) {
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
