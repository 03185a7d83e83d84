//! The profiler's process-wide state: the mode the routes were chosen for,
//! whether `prof_exact` and `prof_active` are on, the effective [`Config`],
//! and the sample counters.
//!
//! Owns these statics; everyone else reads and changes them through the
//! functions here, so the question "is the profiler counting?" has one
//! answer ([`profiling`]). Start-up (`startup`) sets them once; the C API
//! toggles `active` and resets the counters.
//!
//! Runs inside malloc: atomics only, no lock, no allocation (except
//! [`config`] before start-up, which builds the defaults once).

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use crate::config::Config;

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
/// Times the samples were forgotten (`heapsample_reset`).
static RESETS: AtomicU64 = AtomicU64::new(0);

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

/// The effective configuration (defaults until start-up has read PROF_CONF).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::default)
}

/// Make `config` the effective configuration unless one is set already;
/// returns the effective one.
pub fn set_config(config: Config) -> &'static Config {
    CONFIG.get_or_init(|| config)
}

/// Count a sample taken.
pub fn note_sample_taken() {
    SAMPLES_TAKEN.fetch_add(1, Relaxed);
}

/// Count a sample lost.
pub fn note_sample_dropped() {
    SAMPLES_DROPPED.fetch_add(1, Relaxed);
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
