//! How the walks of sampled stacks ended: counted per thread, summed at a dump.
//!
//! Owns the meaning of `tls::ThreadState::walk_ends` (one counter per
//! `heapsample_unwind::Ending`, written only by its thread with a relaxed load
//! and store: no shared cache line is written per sample) and the counts of
//! threads that exited (or of a fork parent's other threads), which their
//! exit flush folds in. A dump reads every live thread's counters and adds
//! the retired ones, as it does for the exact counters (`threads`), less
//! the counts at the last `heapsample_reset` (which forgets the samples: the
//! counts then describe the samples since, as `samples_taken` does; another
//! thread's counters are never written, so the reset keeps a baseline).
//!
//! [`count`] runs inside malloc's sample path: no allocation, lock or call.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use heapsample_format::WalkEnds;
use heapsample_unwind::Ending;

use crate::tls::{ThreadState, WALK_ENDINGS};

/// Counts of threads that no longer count in their own block.
static RETIRED: [AtomicU64; WALK_ENDINGS] = [const { AtomicU64::new(0) }; WALK_ENDINGS];

/// The totals at the last reset.
static AT_RESET: [AtomicU64; WALK_ENDINGS] = [const { AtomicU64::new(0) }; WALK_ENDINGS];

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

/// The counts of the retired threads and of `live` threads together, since
/// the last reset. `live` must be every thread that counts in its own block,
/// held still against exits (the thread registry's lock).
pub fn sum<'a>(live: impl IntoIterator<Item = &'a ThreadState>) -> WalkEnds {
    let counts = totals(live);
    let of = |ending: Ending| {
        counts[ending.index()].saturating_sub(AT_RESET[ending.index()].load(Relaxed))
    };
    WalkEnds {
        complete: of(Ending::Outermost),
        depth_limit: of(Ending::FrameLimit),
        no_unwind_info: of(Ending::NoUnwindInfo),
        unreadable_stack: of(Ending::UnknownStack),
    }
}

/// Forget the counts so far (`heapsample_reset`); `live` as for [`sum`].
pub fn forget<'a>(live: impl IntoIterator<Item = &'a ThreadState>) {
    for (at_reset, total) in AT_RESET.iter().zip(totals(live)) {
        at_reset.store(total, Relaxed);
    }
}

/// Every count since the start: the retired ones and `live` threads'.
fn totals<'a>(live: impl IntoIterator<Item = &'a ThreadState>) -> [u64; WALK_ENDINGS] {
    let mut counts: [u64; WALK_ENDINGS] = core::array::from_fn(|i| RETIRED[i].load(Relaxed));
    for state in live {
        for (total, counter) in counts.iter_mut().zip(&state.walk_ends) {
            *total += counter.load(Relaxed);
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread block of its own (the owner's counters are plain data here).
    fn block() -> Box<ThreadState> {
        // SAFETY: all-zero bytes are a valid `ThreadState` (atomics and a
        // countdown whose zero state is a new thread's, as in `.tbss`).
        Box::new(unsafe { core::mem::zeroed() })
    }

    #[test]
    fn counts_survive_exits_and_a_reset_forgets_them() {
        let (one, two) = (block(), block());
        for _ in 0..3 {
            count(&one, Ending::Outermost);
        }
        count(&two, Ending::NoUnwindInfo);
        count(&two, Ending::FrameLimit);
        let live = || [&*one, &*two];
        let ends = sum(live());
        assert_eq!(
            (ends.complete, ends.no_unwind_info, ends.depth_limit),
            (3, 1, 1)
        );
        fold_into_retired(&two);
        assert_eq!(sum([&*one]), ends, "an exited thread's counts are kept");
        forget([&*one]);
        assert_eq!(sum([&*one]), WalkEnds::default(), "forgotten at a reset");
        count(&one, Ending::UnknownStack);
        count_retired(Ending::Outermost);
        let after = sum([&*one]);
        assert_eq!((after.unreadable_stack, after.complete), (1, 1));
    }
}
