//! How the walks of sampled stacks ended: counted per thread, summed at a dump.
//!
//! Owns the meaning of `tls::ThreadState::walk_ends` (one counter per
//! `heapsample_unwind::Ending`, written only by its thread with a relaxed load
//! and store: no shared cache line is written per sample) and the counts of
//! threads that exited (or of a fork parent's other threads), which their
//! exit flush folds in. A dump reads every live thread's counters and adds
//! the retired ones, as it does for the exact counters (`threads`).
//!
//! [`count`] runs inside malloc's sample path: no allocation, lock or call.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use heapsample_format::WalkEnds;
use heapsample_unwind::Ending;

use crate::tls::{ThreadState, WALK_ENDINGS};

/// Counts of threads that no longer count in their own block.
static RETIRED: [AtomicU64; WALK_ENDINGS] = [const { AtomicU64::new(0) }; WALK_ENDINGS];

/// Count a walk of the calling thread (`state` is its own block) that ended so.
#[inline(always)]
pub fn count(state: &ThreadState, ending: Ending) {
    ThreadState::bump(&state.walk_ends[ending.index()], 1);
}

/// Count a walk of a thread past its exit flush, whose block is folded no more.
#[cold]
pub fn count_retired(ending: Ending) {
    RETIRED[ending.index()].fetch_add(1, Relaxed);
}

/// Move a thread's counts into the retired ones (its exit flush, or a fork
/// child's other threads), zeroing them.
pub fn fold_into_retired(state: &ThreadState) {
    for (retired, counter) in RETIRED.iter().zip(&state.walk_ends) {
        retired.fetch_add(counter.swap(0, Relaxed), Relaxed);
    }
}

/// The counts of the retired threads and of `live` threads together.
pub fn sum<'a>(live: impl IntoIterator<Item = &'a ThreadState>) -> WalkEnds {
    let mut counts: [u64; WALK_ENDINGS] = core::array::from_fn(|i| RETIRED[i].load(Relaxed));
    for state in live {
        for (total, counter) in counts.iter_mut().zip(&state.walk_ends) {
            *total += counter.load(Relaxed);
        }
    }
    let of = |ending: Ending| counts[ending.index()];
    WalkEnds {
        complete: of(Ending::Outermost),
        depth_limit: of(Ending::FrameLimit),
        no_unwind_info: of(Ending::NoUnwindInfo),
        unreadable_stack: of(Ending::UnknownStack),
    }
}
