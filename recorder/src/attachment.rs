//! How the profiler came into this process: preloaded (or linked), or
//! loaded late and attached to it (`takeover`), and the exact counters'
//! values at the attach.
//!
//! Owns the attach state, the attach time and the counters' baseline; the
//! dumps, the exit handler and the status read them here. A process that
//! never attaches never writes these statics.
//!
//! Runs inside malloc only as atomic loads (the exact counters subtract
//! the baseline when a dump or the status reads them).

use core::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};

/// Loaded at start-up: the loader binds the malloc family to the profiler.
pub const PRELOADED: u8 = 0;
/// Loaded late and not attached (never, or not yet): inert.
pub const LOADED: u8 = 1;
/// Loaded late and attached: the process's slots reach the profiler.
pub const ATTACHED: u8 = 2;
/// Attached once, detached since: the slots are given back, sampling is
/// off, the library stays loaded and inert.
pub const DETACHED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(PRELOADED);
/// Wall-clock time of the last attach, nanoseconds since the epoch.
static ATTACHED_UNIX_NS: AtomicU64 = AtomicU64::new(0);

/// The exact counters at the last attach, subtracted from what the
/// threads counted so that a dump counts from the attach.
static BASE_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BASE_FREES: AtomicU64 = AtomicU64::new(0);
static BASE_BYTES: AtomicU64 = AtomicU64::new(0);

/// The state (`PRELOADED`, `LOADED`, `ATTACHED`, `DETACHED`).
pub fn state() -> u8 {
    STATE.load(Relaxed)
}

/// Set the state (`takeover` only).
pub fn set_state(state: u8) {
    STATE.store(state, Relaxed);
}

/// The time of the last attach, if the process was ever attached.
pub fn attached_unix_ns() -> Option<u64> {
    match STATE.load(Relaxed) {
        ATTACHED | DETACHED => Some(ATTACHED_UNIX_NS.load(Relaxed)),
        _ => None,
    }
}

/// Note an attach now, with the exact counters as they are.
pub fn note_attach(unix_ns: u64, allocations: u64, frees: u64, bytes_allocated: u64) {
    ATTACHED_UNIX_NS.store(unix_ns, Relaxed);
    BASE_ALLOCATIONS.store(allocations, Relaxed);
    BASE_FREES.store(frees, Relaxed);
    BASE_BYTES.store(bytes_allocated, Relaxed);
}

/// `(allocations, frees, bytes_allocated)` counted since the last attach
/// (or since start-up, in a preloaded process), given the totals.
pub fn since_attach(allocations: u64, frees: u64, bytes_allocated: u64) -> (u64, u64, u64) {
    (
        allocations.wrapping_sub(BASE_ALLOCATIONS.load(Relaxed)),
        frees.wrapping_sub(BASE_FREES.load(Relaxed)),
        bytes_allocated.wrapping_sub(BASE_BYTES.load(Relaxed)),
    )
}
