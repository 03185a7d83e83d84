//! The series of automatic dumps this process wrote in this run, kept
//! within `prof_dump_limit` and `prof_dump_bytes` by thinning.
//!
//! Owns the list of the dumps this process wrote and has not removed (name,
//! device, inode, size, trigger, time, the live heap it showed), the rule
//! that picks which one goes ([`removal_choice`]) and the removals not yet
//! reported in a dump. A name is removed only while `lstat` still finds the
//! very file written there (same device, inode and size, a regular file):
//! a file this process did not write is never touched, whatever its name.
//!
//! Accessed only under the dump lock (`dump_sequence` holds it for every
//! call), on the thread writing a dump: never inside malloc. A forked child
//! inherits the parent's list in memory but not its series: the list carries
//! the pid that wrote it and is dropped at the child's first dump (nothing
//! is freed in the fork handler).

use core::cell::UnsafeCell;
use std::ffi::CString;

use heapsample_format::{Dump, RemovedDump, Trigger};

use crate::warn::Kind;

/// One dump of the series, as written.
#[derive(Clone, Debug)]
struct Kept {
    name: String,
    seq: u64,
    trigger: Trigger,
    time_unix_ns: u64,
    device: u64,
    inode: u64,
    size: u64,
    /// The live heap it showed, bytes.
    heap: f64,
}

/// What the rule needs to know of a dump of the series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeriesPoint {
    /// When it was written.
    pub time_unix_ns: u64,
    /// It must stay (first, largest heap, newest, asked for by a user).
    pub kept_for_good: bool,
}

/// Which dump of `series` (in the order written) to remove: of those that
/// may go, the one whose removal leaves the smallest gap between its
/// neighbours, the older on a tie; None when none may go. The first and
/// the newest never go (they have no two neighbours).
pub fn removal_choice(series: &[SeriesPoint]) -> Option<usize> {
    (1..series.len().saturating_sub(1))
        .filter(|&at| !series[at].kept_for_good)
        .min_by_key(|&at| {
            series[at + 1]
                .time_unix_ns
                .saturating_sub(series[at - 1].time_unix_ns)
        })
}

/// The triggers of dumps a user asked for (and the exit dump): never
/// removed.
fn asked_for(trigger: Trigger) -> bool {
    matches!(trigger, Trigger::Manual | Trigger::Signal | Trigger::Final)
}

/// The live heap a dump shows: exact when it has it, else the estimate.
fn heap_of(dump: &Dump) -> f64 {
    match dump.totals.live_usable_bytes {
        Some(exact) => exact as f64,
        None => dump.stacks.iter().map(|stack| stack.live.bytes).sum(),
    }
}

struct Series {
    /// The process that wrote `kept` (0: none yet).
    pid: u32,
    kept: Vec<Kept>,
    /// Removed and not yet reported in a written dump.
    unreported: Vec<RemovedDump>,
}

struct SeriesCell(UnsafeCell<Series>);

// SAFETY: only used under the dump lock (see the module doc).
unsafe impl Sync for SeriesCell {}

static SERIES: SeriesCell = SeriesCell(UnsafeCell::new(Series {
    pid: 0,
    kept: Vec::new(),
    unreported: Vec::new(),
}));

/// The series, for the caller holding the dump lock.
///
/// # Safety
/// The caller holds the dump lock and uses the reference only while it does.
#[allow(clippy::mut_from_ref)]
unsafe fn series() -> &'static mut Series {
    // SAFETY: per the contract, one user at a time.
    let series = unsafe { &mut *SERIES.0.get() };
    let pid = std::process::id();
    if series.pid != pid {
        // A forked child's copy of its parent's series: not its own.
        series.pid = pid;
        series.kept.clear();
        series.unreported.clear();
    }
    series
}

/// The bounds of the series, from the configuration (0: none).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Most dumps.
    pub count: u64,
    /// Most bytes.
    pub bytes: u64,
}

impl Bounds {
    /// The configured bounds.
    pub fn configured() -> Bounds {
        let config = crate::state::config();
        Bounds {
            count: u64::from(config.prof_dump_limit),
            bytes: config.prof_dump_bytes,
        }
    }

    fn passed_by(self, count: u64, bytes: u64) -> bool {
        (self.count != 0 && count > self.count) || (self.bytes != 0 && bytes > self.bytes)
    }
}

impl Series {
    fn bytes(&self) -> u64 {
        self.kept.iter().map(|kept| kept.size).sum()
    }

    fn points(&self) -> Vec<SeriesPoint> {
        let largest = self
            .kept
            .iter()
            .enumerate()
            .max_by(|(at, a), (bt, b)| a.heap.total_cmp(&b.heap).then(bt.cmp(at)))
            .map(|(at, _)| at);
        self.kept
            .iter()
            .enumerate()
            .map(|(at, kept)| SeriesPoint {
                time_unix_ns: kept.time_unix_ns,
                kept_for_good: asked_for(kept.trigger) || Some(at) == largest,
            })
            .collect()
    }

    /// Remove dumps until `extra` more dumps of `extra_bytes` fit the
    /// bounds, or none may go.
    fn thin(&mut self, bounds: Bounds, extra: u64, extra_bytes: u64) {
        while bounds.passed_by(
            self.kept.len() as u64 + extra,
            self.bytes().saturating_add(extra_bytes),
        ) {
            let Some(at) = removal_choice(&self.points()) else {
                crate::warn!(
                    Kind::DumpSeries,
                    "the dumps that must be kept (first, largest heap, newest, asked for) pass prof_dump_limit or prof_dump_bytes; they stay"
                );
                return;
            };
            let kept = self.kept.remove(at);
            if remove_if_ours(&kept) {
                self.unreported.push(RemovedDump {
                    file_name: file_name(&kept.name),
                    seq: kept.seq,
                    trigger: kept.trigger,
                    time_unix_ns: kept.time_unix_ns,
                });
            }
        }
    }
}

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// Remove `kept`'s name if it still holds the file this process wrote
/// there; true if removed.
fn remove_if_ours(kept: &Kept) -> bool {
    let Ok(path) = CString::new(kept.name.as_str()) else {
        return false;
    };
    let ours = crate::syscalls::lstat_of(&path).is_some_and(|status| {
        status.st_mode & libc::S_IFMT == libc::S_IFREG
            && (status.st_dev, status.st_ino, status.st_size as u64)
                == (kept.device, kept.inode, kept.size)
    });
    // SAFETY: a valid path; unlink removes the name, never follows it.
    ours && unsafe { crate::syscalls::unlink(path.as_ptr()) } == 0
}

/// Before an automatic dump is written: make room for it (one more dump,
/// as large as the newest), and return the removals to report in it.
///
/// # Safety
/// The caller holds the dump lock.
pub unsafe fn before_writing(bounds: Bounds) -> Vec<RemovedDump> {
    // SAFETY: per the contract.
    let series = unsafe { series() };
    let newest_size = series.kept.last().map_or(0, |kept| kept.size);
    series.thin(bounds, 1, newest_size);
    series.unreported.clone()
}

/// After an automatic dump was written to `name` (the removals returned by
/// [`before_writing`] are now reported): add it, and thin the series to its
/// bounds (what goes now is reported in the next dump).
///
/// # Safety
/// The caller holds the dump lock.
pub unsafe fn written(bounds: Bounds, name: &str, dump: &Dump, reported: usize) {
    // SAFETY: per the contract.
    let series = unsafe { series() };
    series
        .unreported
        .drain(..reported.min(series.unreported.len()));
    let Some(status) = CString::new(name)
        .ok()
        .and_then(|path| crate::syscalls::lstat_of(&path))
    else {
        return;
    };
    series.kept.push(Kept {
        name: name.to_string(),
        seq: dump.seq,
        trigger: dump.trigger,
        time_unix_ns: dump.time_unix_ns,
        device: status.st_dev,
        inode: status.st_ino,
        size: status.st_size as u64,
        heap: heap_of(dump),
    });
    series.thin(bounds, 0, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(times: &[u64]) -> Vec<SeriesPoint> {
        times
            .iter()
            .map(|&time_unix_ns| SeriesPoint {
                time_unix_ns,
                kept_for_good: false,
            })
            .collect()
    }

    #[test]
    fn the_removal_leaves_the_smallest_gap() {
        assert_eq!(removal_choice(&points(&[0, 10, 11, 12, 30])), Some(2));
        assert_eq!(
            removal_choice(&points(&[0, 1, 2, 3])),
            Some(1),
            "older on a tie"
        );
        assert_eq!(removal_choice(&points(&[0, 5])), None);
        let mut guarded = points(&[0, 10, 11, 12, 30]);
        guarded[2].kept_for_good = true;
        assert_eq!(removal_choice(&guarded), Some(1));
    }

    /// The bound stated in MALLOC_CONF.md: a dump every second for ten
    /// minutes into a series of 50 (one dump kept for good in the middle)
    /// leaves no gap over `2 × span / (limit − 6)` (or the interval itself,
    /// before the series is full); the even spacing is `span / (limit − 1)`.
    /// Why: the widest gap `G` was made by a removal that picked the
    /// smallest merged pair, so every other pair of neighbouring gaps then
    /// summed to `G` or more; gaps only grow, and at least
    /// `(limit − 6) / 2` disjoint such pairs (all but the ones beside the
    /// first, the newest and a dump kept for good) make up the span.
    #[test]
    fn a_thinned_series_stays_spread() {
        let limit = 50;
        let mut series: Vec<SeriesPoint> = Vec::new();
        let mut worst = 0f64;
        for second in 0..600u64 {
            series.push(SeriesPoint {
                time_unix_ns: second * 1_000_000_000,
                kept_for_good: second == 0 || second == 217,
            });
            while series.len() > limit {
                let newest = series.len() - 1;
                let mut view = series.clone();
                view[newest].kept_for_good = true;
                let at = removal_choice(&view).expect("one may go");
                series.remove(at);
            }
            let span = series.last().unwrap().time_unix_ns - series[0].time_unix_ns;
            let widest = series
                .windows(2)
                .map(|pair| pair[1].time_unix_ns - pair[0].time_unix_ns)
                .max()
                .unwrap_or(0);
            let bound = (2 * span / (limit as u64 - 6)).max(1_000_000_000);
            if series.len() == limit {
                worst = worst.max(widest as f64 * (limit as f64 - 1.0) / span as f64);
            }
            assert!(
                widest <= bound,
                "at {second} s: gap {widest} over span {span}"
            );
        }
        assert_eq!(series.len(), limit);
        eprintln!("widest gap / even spacing, worst: {worst:.2}");
    }
}
