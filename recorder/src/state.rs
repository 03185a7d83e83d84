//! The profiler's process-wide state: the mode the routes were chosen for,
//! whether `prof_exact` and `prof_active` are on, the effective [`Config`],
//! the sample counters (and the weights of the samples dropped), the moment
//! the profiler started, and under `prof_exact` the live heap and its peak.
//!
//! Owns these statics; everyone else reads and changes them through the
//! functions here, so the question "is the profiler counting?" has one
//! answer ([`profiling`]). Start-up (`startup`) sets them once; the C API
//! toggles `active` and resets the counters.
//!
//! Runs inside malloc: atomics only, no lock, no allocation (except
//! [`config`] before start-up, which builds the defaults once). The exact
//! live heap is one process-wide counter that every `prof_exact` path
//! updates (the peak of a sum over threads cannot be told from per-thread
//! counters): a plain add while the process has one thread, an atomic add
//! on a shared line once it has more (the cost of an exact peak, paid only
//! under `prof_exact`); the clock is read only when the heap rises well
//! above where it was last read (see [`add_exact_live`]).

use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use heapsample_format::Weights;

use crate::config::Config;
use crate::record_counters::WeightCells;

/// Not started yet: the next hook call starts the profiler.
pub const MODE_UNINIT: u8 = 0;
/// Pure pass-through (`prof:false`, secure execution, or start-up failed).
pub const MODE_PASS_THROUGH: u8 = 1;
/// Counting and sampling.
pub const MODE_PROFILING: u8 = 2;
/// Counting and sampling with the exact live heap (`prof_exact`), on paths
/// of their own so the common configuration does not test for it.
pub const MODE_PROFILING_EXACT: u8 = 3;
/// Added to the mode when the bootstrap arena handed out memory: `free` and
/// `realloc` must then check every pointer against it, on a slower path.
pub const MODE_ARENA_IN_USE: u8 = 4;

/// What the hooks do.
static MODE: AtomicU8 = AtomicU8::new(MODE_UNINIT);
/// `prof_exact`: keep the exact live heap in usable bytes.
static EXACT: AtomicBool = AtomicBool::new(false);
/// `prof_active` / `heapsample_set_active`.
static ACTIVE: AtomicBool = AtomicBool::new(true);
/// Allocations sampled.
static SAMPLES_TAKEN: AtomicU64 = AtomicU64::new(0);
/// Samples lost because a table was full (or, inside malloc, busy).
static SAMPLES_DROPPED: AtomicU64 = AtomicU64::new(0);
/// Estimated nanoseconds spent in sample events since start: each timed
/// event ([`note_sample_taken`]) adds its time × [`TIMED_EVERY`].
static SAMPLING_NS: AtomicU64 = AtomicU64::new(0);
/// Times the samples were forgotten (`heapsample_reset`).
static RESETS: AtomicU64 = AtomicU64::new(0);
/// The Horvitz–Thompson weights of the samples dropped.
static DROPPED_WEIGHTS: WeightCells = WeightCells::new();

/// `prof_exact`: the live heap in usable bytes, every thread's.
static EXACT_LIVE: AtomicI64 = AtomicI64::new(0);
/// `prof_exact`: the highest [`EXACT_LIVE`] has been.
static PEAK: AtomicU64 = AtomicU64::new(0);
/// The live heap where the clock was last read for the peak, and when
/// (monotonic nanoseconds).
static PEAK_TIMED: AtomicU64 = AtomicU64::new(0);
static PEAK_AT_NS: AtomicU64 = AtomicU64::new(0);
/// The least rise over [`PEAK_TIMED`] that reads the clock again.
const PEAK_TIME_STEP_MIN: u64 = 4096;

static CONFIG: OnceLock<Config> = OnceLock::new();

/// When the profiler started (or was last attached), on the monotonic
/// clock and the wall clock (nanoseconds).
static START_MONOTONIC_NS: AtomicU64 = AtomicU64::new(0);
static START_UNIX_NS: AtomicU64 = AtomicU64::new(0);

/// The current mode (`MODE_*`, possibly with [`MODE_ARENA_IN_USE`]).
#[inline(always)]
pub fn mode() -> u8 {
    MODE.load(Relaxed)
}

/// Set the mode (start-up only).
pub fn set_mode(mode: u8) {
    MODE.store(mode, Relaxed);
}

/// True once start-up has chosen a mode.
#[inline(always)]
pub fn started() -> bool {
    mode() != MODE_UNINIT
}

/// True when allocations are counted and sampled, in any profiling mode
/// (with or without `prof_exact`, with or without the bootstrap arena).
#[inline(always)]
pub fn profiling() -> bool {
    matches!(
        mode() & !MODE_ARENA_IN_USE,
        MODE_PROFILING | MODE_PROFILING_EXACT
    )
}

/// True once the bootstrap arena has handed out memory.
#[inline(always)]
pub fn arena_in_use() -> bool {
    mode() & MODE_ARENA_IN_USE != 0
}

/// `prof_exact` is on.
#[inline(always)]
pub fn exact() -> bool {
    EXACT.load(Relaxed)
}

/// Set `prof_exact` (start-up only).
pub fn set_exact(on: bool) {
    EXACT.store(on, Relaxed);
}

/// Sampling is active (`prof_active`, `heapsample_set_active`).
#[inline(always)]
pub fn active() -> bool {
    ACTIVE.load(Relaxed)
}

/// Turn sampling on or off; returns the previous setting.
pub fn set_active(on: bool) -> bool {
    ACTIVE.swap(on, Relaxed)
}

/// Set once anything a sample event feeds or checks is on (an interval or
/// high-water trigger, a memory limit watched, the dumper thread wanted);
/// never cleared. While it is unset, a sample event's triggers are this one
/// test (every allocation is a sample event at `lg_prof_sample:0`).
static TRIGGERS_WATCHED: AtomicBool = AtomicBool::new(false);

/// Make sample events check the triggers from now on (see
/// [`TRIGGERS_WATCHED`]). Async-signal-safe: one atomic store.
pub fn watch_triggers() {
    TRIGGERS_WATCHED.store(true, Relaxed);
}

/// Do sample events check the triggers (see [`TRIGGERS_WATCHED`])? A
/// thread may see [`watch_triggers`] one event late, as it may any
/// trigger's state.
#[inline(always)]
pub fn triggers_watched() -> bool {
    TRIGGERS_WATCHED.load(Relaxed)
}

/// The effective configuration (defaults until start-up has read PROF_CONF).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::default)
}

/// Make `config` the effective configuration unless one is set already;
/// returns the effective one.
pub fn set_config(config: Config) -> &'static Config {
    CONFIG.get_or_init(|| config)
}

/// One sample event in this many is timed (from its birth's clock read to
/// its end: one more clock read), and stands for this many in
/// [`sampling_ns`].
pub const TIMED_EVERY: u64 = 64;

/// Count a sample taken (with a plain load and store while the process
/// has `single_threaded` one thread: the caller is under its guard, so
/// nothing else counts meanwhile). True if this event is one to time
/// (one in [`TIMED_EVERY`]: the count's 9th, 73rd, ...).
pub fn note_sample_taken(single_threaded: bool) -> bool {
    let taken = if single_threaded {
        let taken = SAMPLES_TAKEN.load(Relaxed).wrapping_add(1);
        SAMPLES_TAKEN.store(taken, Relaxed);
        taken
    } else {
        SAMPLES_TAKEN.fetch_add(1, Relaxed).wrapping_add(1)
    };
    taken % TIMED_EVERY == 9
}

/// Add a timed sample event of `ns` nanoseconds (for [`TIMED_EVERY`]).
#[cold]
pub fn note_sampling_time(ns: u64) {
    SAMPLING_NS.fetch_add(ns.saturating_mul(TIMED_EVERY), Relaxed);
}

/// Estimated nanoseconds spent in sample events since start (resets do
/// not zero it).
pub fn sampling_ns() -> u64 {
    SAMPLING_NS.load(Relaxed)
}

/// Count a sample lost, whose Horvitz–Thompson weights are `weights`.
pub fn note_sample_dropped(weights: &Weights) {
    SAMPLES_DROPPED.fetch_add(1, Relaxed);
    DROPPED_WEIGHTS.add(weights, 1.0);
}

/// The weights of the samples lost since start (or the last reset).
pub fn dropped_weights() -> Weights {
    DROPPED_WEIGHTS.read(SAMPLES_DROPPED.load(Relaxed))
}

/// Samples taken since start (or the last reset).
pub fn samples_taken() -> u64 {
    SAMPLES_TAKEN.load(Relaxed)
}

/// Samples lost since start (or the last reset).
pub fn samples_dropped() -> u64 {
    SAMPLES_DROPPED.load(Relaxed)
}

/// Zero both sample counters and count the reset (`heapsample_reset`).
pub fn reset_sample_counts() {
    SAMPLES_TAKEN.store(0, Relaxed);
    SAMPLES_DROPPED.store(0, Relaxed);
    DROPPED_WEIGHTS.zero();
    RESETS.fetch_add(1, Relaxed);
}

/// Times the samples were forgotten since start.
pub fn resets() -> u64 {
    RESETS.load(Relaxed)
}

/// Note that the profiler starts now (at start-up, and at each attach).
pub fn set_start_time() {
    START_MONOTONIC_NS.store(crate::sys::clock_ns(libc::CLOCK_MONOTONIC), Relaxed);
    START_UNIX_NS.store(crate::sys::clock_ns(libc::CLOCK_REALTIME), Relaxed);
}

/// When the profiler started: (monotonic, Unix) nanoseconds.
pub fn start_time() -> (u64, u64) {
    (
        START_MONOTONIC_NS.load(Relaxed),
        START_UNIX_NS.load(Relaxed),
    )
}

/// `prof_exact`: `bytes` usable bytes allocated, by any thread. A new
/// highest live heap is kept; the clock is read for it when the heap has
/// risen [`peak_time_margin`] above where it was last read, so the peak's
/// time is when the heap first came that close to it.
#[inline(always)]
pub fn exact_live_up(bytes: u64) {
    let live = add_exact_live(bytes as i64);
    // One signed comparison: the peak is never above i64::MAX, and never
    // below 0, so a live heap at or below 0 is never above it.
    if live > PEAK.load(Relaxed) as i64 {
        note_peak(live as u64);
    }
}

/// `prof_exact`: `bytes` usable bytes freed, by any thread.
#[inline(always)]
pub fn exact_live_down(bytes: u64) {
    add_exact_live((bytes as i64).wrapping_neg());
}

/// Add `delta` to the exact live heap; returns the new value.
#[inline(always)]
fn add_exact_live(delta: i64) -> i64 {
    if crate::sys::single_threaded() {
        add_on_the_only_thread(&EXACT_LIVE, delta)
    } else {
        EXACT_LIVE.fetch_add(delta, Relaxed).wrapping_add(delta)
    }
}

/// Add `delta` to `cell` where no other thread can run, without a locked
/// instruction; returns the new value. One `xadd`: a signal handler that
/// allocates on this thread runs before or after it, never between a load
/// and a store (these routes run outside the thread's guard), so its own
/// change is never lost.
#[inline(always)]
fn add_on_the_only_thread(cell: &AtomicI64, delta: i64) -> i64 {
    crate::arch::add_on_the_only_thread(cell, delta).wrapping_add(delta)
}

#[cold]
#[inline(never)]
fn note_peak(live: u64) {
    PEAK.fetch_max(live, Relaxed);
    let timed = PEAK_TIMED.load(Relaxed);
    if live >= timed.saturating_add(peak_time_margin(timed))
        && PEAK_TIMED
            .compare_exchange(timed, live, Relaxed, Relaxed)
            .is_ok()
    {
        PEAK_AT_NS.store(crate::sys::clock_ns(libc::CLOCK_MONOTONIC), Relaxed);
    }
}

/// How far above `timed` the live heap must rise before the peak's clock
/// is read again: 4 KiB or 1/256 of it, whichever is more.
pub fn peak_time_margin(timed: u64) -> u64 {
    (timed / 256).max(PEAK_TIME_STEP_MIN)
}

/// `prof_exact`: the peak starts again from the live heap now, at
/// `at_ns` (monotonic nanoseconds): in a forked child, whose peak is its own.
pub fn restart_peak(at_ns: u64) {
    let live = EXACT_LIVE.load(Relaxed).max(0) as u64;
    PEAK.store(live, Relaxed);
    PEAK_TIMED.store(live, Relaxed);
    PEAK_AT_NS.store(at_ns, Relaxed);
}

/// `prof_exact`: the live heap in usable bytes now.
pub fn exact_live() -> i64 {
    EXACT_LIVE.load(Relaxed)
}

/// `prof_exact`: the peak of the live heap, when the heap first came
/// within the margin of it (monotonic nanoseconds), and that margin.
pub fn exact_peak() -> (u64, u64, u64) {
    let timed = PEAK_TIMED.load(Relaxed);
    (
        PEAK.load(Relaxed),
        PEAK_AT_NS.load(Relaxed),
        peak_time_margin(timed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_add_on_the_only_thread_returns_and_keeps_the_sum() {
        let cell = AtomicI64::new(40);
        assert_eq!(add_on_the_only_thread(&cell, 2), 42);
        assert_eq!(add_on_the_only_thread(&cell, -50), -8);
        assert_eq!(cell.load(Relaxed), -8);
        let top = AtomicI64::new(i64::MAX);
        assert_eq!(
            add_on_the_only_thread(&top, 1),
            i64::MIN,
            "wraps as the atomic add does"
        );
    }
}
