//! Replaying the unchanged outer part of a thread's previous capture.
//!
//! Owns x86_64's [`StackMemo`] level: the register state of a frame of the last walk
//! (pc, rsp, rbp) and the saved-rbp slot its step read, with how a new frame matches
//! it and how replay proves it current; and [`walk_remembered`], which walks the new
//! stack until it reaches a frame whose state the memo holds, then replays the memo's
//! outer frames instead of looking up their rules. The bookkeeping around the levels
//! (generation, stack top, length, end, counters) is [`MemoState`]'s, shared with
//! aarch64's memo.
//!
//! # Why a replayed frame can never be stale
//!
//! [`step`] is a function of four things only: the frame's registers, the rule for its
//! pc (fixed within one cache generation), the top of the stack it may read below
//! (fixed for a thread on one stack) and the values of at most two stack slots (the
//! return address at CFA−8, and the saved rbp if the rule restores it), whose
//! addresses follow from the registers and the rule. A memo level records, for the
//! step that produced it, the resulting registers and the saved-rbp slot it read; the
//! return-address slot is its `rsp − 8`.
//!
//! Replay starts only at a frame whose registers equal a memo level's, in the same
//! generation and under the same stack top, and for each outer level re-reads exactly the slots the real step would
//! read and compares them with the values the level was built from. By induction each
//! replayed level is what [`step`] would compute now: the same slots are read, in the
//! same order, so replay also touches no memory the real walk would not. The first
//! slot that differs ends the replay, and the walk goes on normally from the last
//! level that was proven. How the old walk ended is replayed the same way (an
//! outermost rule needs no read; a zero return address is re-read; code without
//! unwind information is looked up again). A caller whose return address was
//! rewritten (a trampoline, a coroutine switch, a `longjmp` that reused the frames)
//! therefore never gets a stale suffix: its slot value differs and the walk continues
//! from there.
//!
//! The walk's start frame is never a level and never matched: its state is not the
//! result of a step but comes from the capture itself, either the capture's own
//! registers or, for [`crate::capture_remembered_from`], the caller of a hooked
//! function as its entry registers give it ([`crate::FunctionEntry`]: the same state
//! that stepping out of the frames in between would compute). Levels begin with the
//! start frame's caller, so every replay still starts from a state a real step
//! produced in this walk.
//!
//! rbp is the one register that code without frame pointers uses for data, so its
//! value changes between calls in frames whose return addresses do not. A level's rbp
//! is therefore compared only where it can matter: where a later step of the
//! remembered walk computes a CFA from it, directly or after carrying it over unchanged
//! (flag [`RBP_MATTERS`], derived from the rules). Elsewhere its value reaches no
//! address and no frame, so any value gives the same steps. Replay compares a
//! saved-rbp slot only where the value matters ([`CHECK_RBP`]; where rbp was carried
//! over unchanged and matters, the inner level's comparison covers it). A walk that
//! goes on after a replay stops recovers the real rbp first, re-reading the
//! saved-rbp slots of the replayed levels as the real steps do, so it goes on from the
//! real registers.
//!
//! Runs inside malloc: no allocation, no locks, no system calls; the replay costs two
//! loads and a compare per frame.

use crate::cache::RuleStore;
use crate::ending::Ending;
use crate::memo_state::{END_OPEN, END_OUTERMOST, MemoLevel, MemoState};
use crate::walk::{Cursor, Registers, Start, Step, WalkEnd, read_stack, step};

/// One frame of a remembered walk: its registers, the slot its rbp was read from (0 if
/// rbp was carried over from the inner frame), and two flags in that slot's low bits
/// (slots are 8-aligned).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Level {
    pc: u64,
    rsp: u64,
    rbp: u64,
    slot_and_flags: u64,
}

/// The step into this level computed the CFA from rbp.
const FROM_RBP: u64 = 1;
/// This level's rbp value influences a later step of the remembered walk (a CFA
/// computed from rbp, possibly after rbp was carried over): only then must it match.
const RBP_MATTERS: u64 = 2;
/// [`RBP_MATTERS`] and the step into this level read rbp from a slot: replay must
/// compare that slot's value. (Where rbp was carried over and matters, the inner
/// level's rbp matters too, so its comparison covers this level's.)
const CHECK_RBP: u64 = 4;
const FLAGS: u64 = FROM_RBP | RBP_MATTERS | CHECK_RBP;

impl Level {
    fn new(regs: Registers, rbp_slot: u64, cfa_from_rbp: bool) -> Level {
        Level {
            pc: regs.pc,
            rsp: regs.rsp,
            rbp: regs.rbp,
            slot_and_flags: rbp_slot | if cfa_from_rbp { FROM_RBP } else { 0 },
        }
    }

    fn rbp_slot(&self) -> u64 {
        self.slot_and_flags & !FLAGS
    }

    fn flag(&self, flag: u64) -> bool {
        self.slot_and_flags & flag != 0
    }

    fn set_rbp_matters(&mut self, matters: bool) {
        let flags = match (matters, self.rbp_slot() != 0) {
            (false, _) => 0,
            (true, false) => RBP_MATTERS,
            (true, true) => RBP_MATTERS | CHECK_RBP,
        };
        self.slot_and_flags = self.slot_and_flags & !(RBP_MATTERS | CHECK_RBP) | flags;
    }

    /// True if `regs` (a real frame state) is this level's state, as far as the rest of
    /// the remembered walk can tell.
    fn matches(&self, regs: &Registers) -> bool {
        self.rsp == regs.rsp
            && self.pc == regs.pc
            && (!self.flag(RBP_MATTERS) || self.rbp == regs.rbp)
    }

    /// Re-does the memory reads of the step into this level from the inner level,
    /// whose state was just proven current, and compares what matters: true if they
    /// give what the level was built from (so the level is current too).
    #[inline(always)]
    fn still_current(&self) -> bool {
        // SAFETY: `rsp - 8` is the return-address slot and `rbp_slot` the saved-rbp
        // slot that `step` read when it built this level from the inner level, whose
        // state was just proven current; `step` would read exactly these slots now
        // (see the module documentation), so they are live stack memory.
        let return_address = unsafe { read_stack(self.rsp - 8) };
        return_address == self.pc
            // SAFETY: as above.
            && (!self.flag(CHECK_RBP) || unsafe { read_stack(self.rbp_slot()) } == self.rbp)
    }
}

/// The real rbp of `levels[proven]`, given the real rbp `rbp` of `levels[matched]`
/// and that the levels between were replayed: re-reads the saved-rbp slots the real
/// steps read (replay compares only those whose value matters).
fn real_rbp(levels: &[Level], matched: usize, proven: usize, mut rbp: u64) -> u64 {
    for level in levels[proven..matched].iter().rev() {
        let slot = level.rbp_slot();
        if slot != 0 {
            // SAFETY: as in `Level::still_current`: the level is proven current.
            rbp = unsafe { read_stack(slot) };
        }
    }
    rbp
}

/// How the remembered walk ended after its outermost level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The outermost level's rule said "outermost".
    Outermost,
    /// The next return-address slot (at this address) held 0.
    ZeroAt(u64),
    /// No unwind information covered the outermost level's code, libgcc stops there
    /// and no frame-pointer step went on (stepped again on every replay: code may
    /// since have been generated there, and the step depends on rbp).
    NoUnwindInfo,
    /// The frame buffer was full: outer frames may follow.
    Open,
}

/// A thread's memory of its previous stack walk on x86_64, so that the next capture
/// replays the unchanged outer frames (two loads and a compare each) instead of
/// stepping them: the shared `MemoState` (in `memo_state`) with x86_64's levels.
///
/// Holds `LEVELS` frames (deeper walks are not remembered). Private to one thread at a
/// time (`&mut`); all-zero memory is a valid empty memo, so it can live in zeroed heap
/// memory. Size: 64 × `LEVELS` bytes + 80 (16 KiB + 80 at the default 256).
pub type StackMemo<const LEVELS: usize = 256> = MemoState<Level, LEVELS>;

// SAFETY: plain integers: all-zero bytes are a valid (empty) level.
unsafe impl MemoLevel for Level {}

/// [`End::NoUnwindInfo`] in [`MemoState::end`] (x86_64's own value).
const END_NO_UNWIND_INFO: u64 = 2;

impl<const LEVELS: usize> StackMemo<LEVELS> {
    /// How the remembered walk ended.
    fn remembered_end(&self) -> End {
        match self.end {
            END_OUTERMOST => End::Outermost,
            END_OPEN => End::Open,
            END_NO_UNWIND_INFO => End::NoUnwindInfo,
            slot => End::ZeroAt(slot),
        }
    }

    /// Remember a walk made only of stepped levels (`fresh[..count]`, innermost first)
    /// that ended with `end`; `end_uses_rbp`: the final step computed a CFA from rbp.
    fn remember_walk(&mut self, count: Option<usize>, end: End, end_uses_rbp: bool) {
        if self.remember_fresh(count, end_code(end)) > 0 {
            let matters = end_uses_rbp || end == End::Open;
            self.levels[0].set_rbp_matters(matters);
            self.mark_rbp_use(1);
        }
    }

    /// After a replay that started at `levels[matched]`: keep `levels[..=matched]` and
    /// put the stepped levels (`fresh[..count]`, innermost first) inside it.
    ///
    /// Each stepped level is marked as `mark_rbp_use` marks it, as it is put in
    /// place: one pass.
    fn remember_replayed(&mut self, matched: usize, count: usize) {
        let total = matched + 1 + count;
        if total > LEVELS {
            self.len = 0;
            return;
        }
        let mut outer = self.levels[matched];
        for index in 0..count {
            let mut level = self.fresh[count - 1 - index];
            level.set_rbp_matters(rbp_matters_below(&outer));
            self.levels[matched + 1 + index] = level;
            outer = level;
        }
        self.len = total;
    }

    /// Sets [`RBP_MATTERS`] on `levels[first..len]` from the outer levels' flags: a
    /// level's rbp matters if the step out of it computes a CFA from rbp, or carries
    /// rbp over to an outer level where it matters.
    fn mark_rbp_use(&mut self, first: usize) {
        for index in first..self.len {
            let matters = rbp_matters_below(&self.levels[index - 1]);
            self.levels[index].set_rbp_matters(matters);
        }
    }
}

/// Whether the rbp of the level inside `outer` matters: the step out of it (into
/// `outer`) computes a CFA from rbp, or carries rbp over to `outer`, where it
/// matters.
#[inline(always)]
fn rbp_matters_below(outer: &Level) -> bool {
    outer.flag(FROM_RBP) || (outer.rbp_slot() == 0 && outer.flag(RBP_MATTERS))
}

/// How `end` is kept in [`MemoState::end`].
fn end_code(end: End) -> u64 {
    match end {
        End::Outermost => END_OUTERMOST,
        End::Open => END_OPEN,
        End::NoUnwindInfo => END_NO_UNWIND_INFO,
        End::ZeroAt(slot) => slot,
    }
}

/// Outcome of replaying from a matched level.
enum Replay {
    /// The capture is complete with this many frames, ended so; the memo is updated.
    Complete(usize, Ending),
    /// Replay proved the levels down to `levels[proven]`, whose real registers are
    /// `regs`, and the walk must step on from there; `written` frames are in the buffer.
    StepFrom {
        proven: usize,
        regs: Registers,
        written: usize,
    },
}

/// Like [`crate::walk::walk`], but replays the outer frames it finds unchanged in
/// `memo`, and leaves the memo describing this walk. `generation` is the rule caches'
/// current generation. A thread whose last stack was shallow walks without the memo.
#[inline(always)]
pub(crate) fn walk_remembered<S: RuleStore, const LEVELS: usize>(
    start: Start,
    store: &mut S,
    memo: &mut StackMemo<LEVELS>,
    generation: u64,
    frames: &mut [u64],
) -> WalkEnd {
    if !memo.begin_capture() {
        let end = crate::walk::walk(start, store, frames);
        memo.walked_plainly(written(end));
        return end;
    }
    let end = walk_with_memo(start, store, memo, generation, frames);
    memo.walked_remembering(written(end));
    end
}

/// The frames a walk wrote; `None` if libgcc redoes it.
#[inline(always)]
fn written(end: WalkEnd) -> Option<usize> {
    match end {
        WalkEnd::Complete(written, _) => Some(written),
        WalkEnd::NeedsFallback => None,
    }
}

/// [`walk_remembered`] through the memo.
#[inline(always)]
fn walk_with_memo<S: RuleStore, const LEVELS: usize>(
    start: Start,
    store: &mut S,
    memo: &mut StackMemo<LEVELS>,
    generation: u64,
    frames: &mut [u64],
) -> WalkEnd {
    // The start frame is never a level: its state comes from the capture (its own
    // registers, or a caller's saved at a function's entry), not from a step.
    let (mut regs, mut lookup_address, mut written) = start.begin(frames);
    let top = crate::walk::stack_top(regs.rsp);
    memo.walk_under(generation, top);
    // Levels stepped so far (in `memo.fresh`); None once there were too many to keep.
    let mut fresh = Some(0usize);
    // Remembered levels not yet passed (`levels[..candidates]`); 0 stops matching.
    let mut candidates = memo.len;
    loop {
        if written == frames.len() {
            memo.remember_walk(fresh, End::Open, true);
            return WalkEnd::Complete(written, Ending::FrameLimit);
        }
        let (caller, level) = match step(store, &regs, lookup_address, top, false) {
            Step::Caller {
                regs,
                rbp_slot,
                cfa_from_rbp,
            } => (regs, Level::new(regs, rbp_slot, cfa_from_rbp)),
            Step::Outermost => {
                memo.remember_walk(fresh, End::Outermost, false);
                return WalkEnd::Complete(written, Ending::Outermost);
            }
            Step::ZeroReturn { slot, cfa_from_rbp } => {
                memo.remember_walk(fresh, End::ZeroAt(slot), cfa_from_rbp);
                return WalkEnd::Complete(written, Ending::Outermost);
            }
            // Code without unwind information (JIT code) that keeps no frame
            // pointer ends the walk, as for libgcc. Frame-pointer steps through it
            // are not remembered (their frames' addresses are never read as code,
            // which a replay's end check would do), so the memo forgets.
            Step::NoUnwindInfo => {
                if crate::walk::step_without_cfi(&regs, top, true).is_none() {
                    memo.remember_walk(fresh, End::NoUnwindInfo, false);
                    return WalkEnd::Complete(written, crate::walk::stranded(top));
                }
                memo.len = 0;
                let at = Cursor {
                    regs,
                    lookup_address,
                    written,
                };
                return crate::walk::walk_on_without_cfi(at, store, top, frames);
            }
            Step::Unsupported => {
                memo.len = 0;
                return WalkEnd::NeedsFallback;
            }
        };
        frames[written] = caller.pc;
        written += 1;
        regs = caller;
        lookup_address = caller.pc - 1;
        // Remembered levels are ordered by rsp, which only grows along a walk.
        while candidates > 0 && memo.levels[candidates - 1].rsp < caller.rsp {
            candidates -= 1;
        }
        if let Some(count) = fresh
            && candidates > 0
            && memo.levels[candidates - 1].matches(&caller)
        {
            let matched = candidates - 1;
            memo.counts.matches += 1;
            // The step into the matched level is this walk's: keep its slot and flag.
            let mut stepped = level;
            stepped.set_rbp_matters(memo.levels[matched].flag(RBP_MATTERS));
            memo.levels[matched] = stepped;
            match replay(memo, matched, count, caller.rbp, frames, written) {
                Replay::Complete(total, ending) => return WalkEnd::Complete(total, ending),
                Replay::StepFrom {
                    proven,
                    regs: real,
                    written: now,
                } => {
                    fresh = carry_proven(memo, matched, proven, count);
                    regs = real;
                    lookup_address = real.pc - 1;
                    written = now;
                    candidates = 0;
                    continue;
                }
            }
        }
        fresh = memo.push(fresh, level);
    }
}

/// Replays `memo.levels[..matched]` outwards after the walk reached the state of
/// `levels[matched]` with real rbp `rbp`, `count` stepped levels and `written` frames.
fn replay<const LEVELS: usize>(
    memo: &mut StackMemo<LEVELS>,
    matched: usize,
    count: usize,
    rbp: u64,
    frames: &mut [u64],
    mut written: usize,
) -> Replay {
    let first_written = written;
    let replayed = replay_levels(&memo.levels[..matched], &mut frames[written..]);
    written += replayed;
    let level = matched - replayed;
    if level > 0 {
        if written == frames.len() {
            // Full: the remembered outer levels stay valid records for later captures.
            let ending = Ending::FrameLimit;
            return finish_replay(memo, matched, count, written, first_written, ending);
        }
        memo.counts.rejections += 1;
        let rbp = real_rbp(&memo.levels, matched, level, rbp);
        return step_from(memo, level, rbp, written, first_written);
    }
    let full = written == frames.len();
    let ended = full
        || match memo.remembered_end() {
            End::Outermost => true,
            // SAFETY: the slot `step` read when it found the zero return address, from
            // the outermost level, whose state was just proven current.
            End::ZeroAt(slot) => (unsafe { read_stack(slot) }) == 0,
            // Stepped again from the outermost level with its real rbp: code may
            // since have been generated there, and whether a frame-pointer step goes
            // on depends on rbp.
            End::NoUnwindInfo => false,
            End::Open => false,
        };
    if ended {
        let ending = if full {
            Ending::FrameLimit
        } else {
            Ending::Outermost
        };
        return finish_replay(memo, matched, count, written, first_written, ending);
    }
    let rbp = real_rbp(&memo.levels, matched, 0, rbp);
    step_from(memo, 0, rbp, written, first_written)
}

/// Replays `levels` (outermost first) from the innermost outwards into `frames`,
/// until a level's slots differ or `frames` is full: the levels replayed. A loop of
/// its own, apart from the walk's, keeps it to two loads and a compare per level
/// (and one more of each where a saved rbp matters).
#[inline(never)]
fn replay_levels(levels: &[Level], frames: &mut [u64]) -> usize {
    let todo = levels.len().min(frames.len());
    let (levels, frames) = (&levels[levels.len() - todo..], &mut frames[..todo]);
    let mut done = 0;
    while done < todo {
        let outer = &levels[todo - 1 - done];
        if !outer.still_current() {
            break;
        }
        frames[done] = outer.pc;
        done += 1;
    }
    done
}

fn step_from<const LEVELS: usize>(
    memo: &mut StackMemo<LEVELS>,
    proven: usize,
    rbp: u64,
    written: usize,
    first_written: usize,
) -> Replay {
    memo.set_replayed(first_written, written);
    let level = &memo.levels[proven];
    Replay::StepFrom {
        proven,
        regs: Registers {
            pc: level.pc,
            rsp: level.rsp,
            rbp,
        },
        written,
    }
}

fn finish_replay<const LEVELS: usize>(
    memo: &mut StackMemo<LEVELS>,
    matched: usize,
    count: usize,
    written: usize,
    first_written: usize,
    ending: Ending,
) -> Replay {
    memo.remember_replayed(matched, count);
    memo.set_replayed(first_written, written);
    Replay::Complete(written, ending)
}

/// Replay stopped at `levels[proven]`: move the proven levels `levels[matched..=proven]`
/// (inner to outer) behind the stepped ones in `fresh`, where the walk goes on. A
/// carried level's rbp may differ from the real one where it did not matter; it is only
/// ever compared with real values, so at worst a later match is missed.
fn carry_proven<const LEVELS: usize>(
    memo: &mut StackMemo<LEVELS>,
    matched: usize,
    proven: usize,
    count: usize,
) -> Option<usize> {
    let mut fresh = Some(count);
    for level in (proven..=matched).rev() {
        fresh = memo.push(fresh, memo.levels[level]);
    }
    fresh
}
