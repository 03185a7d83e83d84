//! The symbolization's progress bar on stderr: drawn only when stderr is a
//! terminal and the work has taken longer than a moment, cleared when it
//! ends. The library only reports progress ([`ProgressCallback`]); this is
//! the one place that draws it.

use heapdiff::symbols::{Progress, ProgressCallback};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long the work runs before the bar appears.
const DELAY: Duration = Duration::from_millis(500);

/// A callback drawing the bar, or None when stderr is not a terminal.
pub fn on_terminal() -> Option<ProgressCallback> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    if let Ok(style) =
        ProgressStyle::with_template("symbolizing {bar:30} {pos}/{len} addresses ({eta})")
    {
        bar.set_style(style);
    }
    let started = Instant::now();
    let shown = AtomicBool::new(false);
    Some(ProgressCallback::new(move |progress: Progress| {
        if progress.done >= progress.total {
            bar.finish_and_clear();
            return;
        }
        if !shown.load(Relaxed) && started.elapsed() > DELAY {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown.store(true, Relaxed);
        }
        bar.set_length(progress.total as u64);
        bar.set_position(progress.done as u64);
    }))
}
