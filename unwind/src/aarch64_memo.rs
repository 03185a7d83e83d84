//! aarch64's memo of a thread's last walk: the unchanged outer frames of the
//! previous capture are replayed instead of stepped.
//!
//! Owns aarch64's [`StackMemo`] level and [`walk_remembered`] (the
//! bookkeeping around the levels is [`MemoState`]'s, shared with x86_64's
//! memo). A level is one frame
//! the last walk reached by a [`plain_step`]: its registers (pc, sp, x29) and
//! the slots that step read (the return address's, and x29's where the rule
//! restored it). A plain step is a function of the inner frame's registers,
//! the rule for its pc (fixed within a cache generation), the stack's top and
//! the values of those two slots. So once the new walk reaches a remembered
//! level's registers exactly (pc, sp and x29 all equal, in the same
//! generation and under the same top), each outer level is proven current by
//! re-reading its two slots and finding the values it was built from, and its
//! registers are what the step would compute now: the same slots are read, so
//! replay reads no memory the walk would not. The first slot that differs ends
//! the replay and the walk steps on from the last proven level. How the last
//! walk ended is replayed too: at an outermost rule (fixed), at a zero return
//! address (its slot re-read), or at a full frame buffer (stepped on). Frames
//! reached otherwise (a signal frame, a return address still in x30) are never
//! levels: a walk that needs such a step after its first reported frame
//! forgets the memo.
//!
//! The same design as x86_64's memo, with aarch64's registers (the return
//! address's slot varies per rule, and return addresses are compared stripped);
//! it compares x29 always where x86_64 derives when rbp matters.
//!
//! Runs inside malloc: no allocation, no lock, no system call; a replayed
//! frame costs one or two loads and compares.

use crate::aarch64_walk::{
    Next, Registers, Report, Stepped, VA_MASK, first_reported, plain_step, stack_top, step, walk,
    walk_on,
};
use crate::cache::RuleStore;
use crate::memo_state::{END_OPEN, END_OUTERMOST, MemoLevel, MemoState};

/// A thread's memory of its previous walk on aarch64: the shared
/// `MemoState` (in `memo_state`) with aarch64's levels. Holds `LEVELS` frames (deeper walks
/// are not remembered); private to one thread at a time (`&mut`); all-zero
/// memory is a valid empty memo. Size: 80 × `LEVELS` bytes + 80.
pub type StackMemo<const LEVELS: usize = 256> = MemoState<Stepped, LEVELS>;

// SAFETY: plain integers: all-zero bytes are a valid (empty) level.
unsafe impl MemoLevel for Stepped {}

/// True if the slot at `address` (proven live stack) still holds `value`.
#[inline(always)]
fn holds(address: u64, value: u64, mask: u64) -> bool {
    // SAFETY: a slot the step into a level read, from the inner level whose
    // state was just proven current: the step would read it now (see the
    // module documentation), so it is live stack memory of this thread.
    (unsafe { core::ptr::read_volatile(address as *const u64) } & mask) == value
}

/// [`walk`] through `memo`: replays the outer frames it finds unchanged and
/// leaves the memo describing this walk. `None` if a frame cannot be stepped.
#[inline(always)]
pub(crate) fn walk_remembered<S: RuleStore, const LEVELS: usize>(
    store: &mut S,
    regs: Registers,
    report: Report,
    memo: &mut StackMemo<LEVELS>,
    generation: u64,
    frames: &mut [u64],
) -> Option<usize> {
    if !memo.begin_capture() {
        let written = walk(store, regs, report, frames);
        memo.walked_plainly(written);
        return written;
    }
    let written = walk_with_memo(store, regs, report, memo, generation, frames);
    memo.walked_remembering(written);
    written
}

#[inline(always)]
fn walk_with_memo<S: RuleStore, const LEVELS: usize>(
    store: &mut S,
    regs: Registers,
    report: Report,
    memo: &mut StackMemo<LEVELS>,
    generation: u64,
    frames: &mut [u64],
) -> Option<usize> {
    let top = stack_top(regs.sp);
    memo.walk_under(generation, top);
    let Some(mut regs) = first_reported(store, regs, report, top)? else {
        memo.len = 0;
        return Some(0);
    };
    let Some(first) = frames.first_mut() else {
        return Some(0);
    };
    *first = regs.pc;
    let mut written = 1;
    let mut fresh = Some(0usize);
    // Remembered levels not yet passed (`levels[..candidates]`).
    let mut candidates = memo.len;
    loop {
        if written == frames.len() {
            memo.remember_fresh(fresh, END_OPEN);
            return Some(written);
        }
        let plain = if regs.exact {
            None
        } else {
            plain_step(store, regs.pc, regs.sp, regs.x29, top)
        };
        let level = match plain {
            Some(level) => level,
            None => match step(store, &regs, top) {
                Next::Outermost { ra_slot } => {
                    memo.remember_fresh(fresh, if ra_slot == 0 { END_OUTERMOST } else { ra_slot });
                    return Some(written);
                }
                // A frame no plain step reaches is no level: walk on without
                // the memo.
                Next::Caller { regs: caller, .. } => {
                    memo.len = 0;
                    frames[written] = caller.pc;
                    return walk_on(store, caller, top, frames, written + 1);
                }
                Next::GiveUp => return None,
            },
        };
        frames[written] = level.pc;
        written += 1;
        regs = level.registers();
        // Remembered levels are ordered by sp, which only grows along a walk.
        while candidates > 0 && memo.levels[candidates - 1].sp < level.sp {
            candidates -= 1;
        }
        if let Some(count) = fresh
            && candidates > 0
        {
            let matched = candidates - 1;
            let old = memo.levels[matched];
            if old.sp == level.sp && old.pc == level.pc && old.x29 == level.x29 {
                memo.counts.matches += 1;
                // The step into the matched level is this walk's.
                memo.levels[matched] = level;
                let first_replayed = written;
                let proven = replay(&memo.levels[..matched], frames, &mut written);
                memo.set_replayed(first_replayed, written);
                let ended = written == frames.len()
                    || (proven == 0
                        && match memo.end {
                            END_OUTERMOST => true,
                            END_OPEN => false,
                            slot => holds(slot, 0, u64::MAX),
                        });
                if ended {
                    memo.remember_around(matched, count);
                    return Some(written);
                }
                if proven > 0 {
                    memo.counts.rejections += 1;
                }
                // Step on from the last proven level: the proven levels follow
                // the stepped ones.
                let mut carried = fresh;
                for index in (proven..=matched).rev() {
                    carried = memo.push(carried, memo.levels[index]);
                }
                fresh = carried;
                regs = memo.levels[proven].registers();
                candidates = 0;
                continue;
            }
        }
        fresh = memo.push(fresh, level);
    }
}

/// Replays `levels` (outermost first; the level inside the last one is
/// proven current) outwards into `frames` from `written`, until a level's
/// slots differ or `frames` is full: the index of the outermost level proven.
#[inline(never)]
fn replay(levels: &[Stepped], frames: &mut [u64], written: &mut usize) -> usize {
    let mut proven = levels.len();
    while proven > 0 && *written < frames.len() {
        let outer = &levels[proven - 1];
        if !holds(outer.ra_slot, outer.pc, VA_MASK)
            || (outer.x29_slot != 0 && !holds(outer.x29_slot, outer.x29, u64::MAX))
        {
            break;
        }
        frames[*written] = outer.pc;
        *written += 1;
        proven -= 1;
    }
    proven
}
