//! Stack capture for sampled allocations.
//!
//! Owns the choice of unwinder and the removal of the shim's own frames. The
//! default is `heapsample-unwind` with one process-wide rule cache (a new
//! thread starts warm, and 1,000 short-lived threads cost no memory of their
//! own); `prof_unwind:libgcc` selects libgcc's `_Unwind_Backtrace`, which on
//! glibc ≥ 2.35 also finds unwind tables through the lock-free
//! `_dl_find_object` and does not allocate, but costs 2–10 µs per stack.
//!
//! Runs inside malloc's slow path: no allocation, no locks of ours.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// Rules cached for every thread of the process (256 KiB of zeroed .bss,
/// touched as used).
static RULES: heapsample_unwind::SharedRuleCache = heapsample_unwind::SharedRuleCache::new();
static USE_LIBGCC: AtomicBool = AtomicBool::new(false);

/// Use libgcc's unwinder instead of the cached one.
pub fn use_libgcc(on: bool) {
    USE_LIBGCC.store(on, Relaxed);
}

/// Forget cached unwind rules (around `dlclose`).
pub fn invalidate() {
    heapsample_unwind::invalidate_all_caches();
}

/// The address range of the object that contains the profiler's code.
static OWN_START: AtomicUsize = AtomicUsize::new(0);
static OWN_END: AtomicUsize = AtomicUsize::new(0);

/// Find the unwinder's glibc entry point and learn the profiler's own address
/// range, so its frames can be dropped. Returns false when the cached
/// unwinder cannot work here (glibc < 2.35): use libgcc's.
pub fn init() -> bool {
    if !heapsample_unwind::init() {
        return false;
    }
    if let Some((start, end)) = object_range(init as fn() -> bool as usize) {
        OWN_START.store(start, Relaxed);
        OWN_END.store(end, Relaxed);
    }
    true
}

fn is_own(address: usize) -> bool {
    address >= OWN_START.load(Relaxed) && address < OWN_END.load(Relaxed)
}

/// Capture the calling thread's return addresses, innermost first, without
/// the profiler's own frames. Returns how many were written to `frames`.
#[inline(never)]
pub fn capture(frames: &mut [u64]) -> usize {
    let captured = if USE_LIBGCC.load(Relaxed) {
        heapsample_unwind::capture_libgcc(frames)
    } else {
        heapsample_unwind::capture_shared(&RULES, frames)
    };
    drop_own_frames(&mut frames[..captured])
}

/// Remove the frames that lie in the profiler's own object, in place.
fn drop_own_frames(frames: &mut [u64]) -> usize {
    let mut kept = 0;
    for index in 0..frames.len() {
        let address = frames[index];
        if !is_own(address as usize) {
            frames[kept] = address;
            kept += 1;
        }
    }
    kept
}

/// Start and end of the object containing `address`, lock-free.
pub fn object_range(address: usize) -> Option<(usize, usize)> {
    heapsample_unwind::object_range(address as u64)
        .map(|(start, end)| (start as usize, end as usize))
}
