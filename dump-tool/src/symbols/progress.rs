//! How far a long symbolization has come, reported to whoever asked.
//!
//! Owns [`Progress`] (one report) and [`ProgressCallback`] (where reports
//! go). The library never draws anything and never writes to stderr: the
//! command line turns the reports into a bar on its terminal, the server
//! asks for none.

use std::sync::Arc;

/// One report: `done` of `total` addresses symbolized. The last report of
/// a symbolization has `done == total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// Where progress reports go: called on the symbolizing thread, often (once
/// per address), so it should be cheap.
#[derive(Clone)]
pub struct ProgressCallback(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressCallback {
    pub fn new(report: impl Fn(Progress) + Send + Sync + 'static) -> ProgressCallback {
        ProgressCallback(Arc::new(report))
    }

    pub fn report(&self, progress: Progress) {
        (self.0)(progress)
    }
}

impl std::fmt::Debug for ProgressCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressCallback")
    }
}

/// The running count of one symbolization, reporting each step to an
/// optional callback.
pub(super) struct Counter<'a> {
    callback: Option<&'a ProgressCallback>,
    done: usize,
    total: usize,
}

impl<'a> Counter<'a> {
    pub(super) fn new(callback: Option<&'a ProgressCallback>, total: usize) -> Counter<'a> {
        Counter {
            callback,
            done: 0,
            total,
        }
    }

    /// `count` more addresses done.
    pub(super) fn tick(&mut self, count: usize) {
        self.done = (self.done + count).min(self.total);
        if let Some(callback) = self.callback {
            callback.report(Progress {
                done: self.done,
                total: self.total,
            });
        }
    }

    /// The last report: everything done.
    pub(super) fn finish(&mut self) {
        let rest = self.total - self.done;
        self.tick(rest);
    }
}
