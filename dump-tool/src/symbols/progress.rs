//! The progress bar of a long symbolization (on a terminal only).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A progress bar on stderr that appears only when stderr is a terminal and
/// the work has taken longer than a moment.
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: std::cell::Cell<bool>,
}

const PROGRESS_DELAY: Duration = Duration::from_millis(500);

impl Progress {
    pub fn new(wanted: bool, total: usize) -> Self {
        let bar = (wanted && std::io::stderr().is_terminal()).then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::hidden());
            if let Ok(style) =
                ProgressStyle::with_template("symbolizing {bar:30} {pos}/{len} addresses ({eta})")
            {
                bar.set_style(style);
            }
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            shown: std::cell::Cell::new(false),
        }
    }

    pub fn tick(&self, done: usize) {
        if let Some(bar) = &self.bar {
            if !self.shown.get() && self.started.elapsed() > PROGRESS_DELAY {
                bar.set_draw_target(ProgressDrawTarget::stderr());
                self.shown.set(true);
            }
            bar.inc(done as u64);
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
