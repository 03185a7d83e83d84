//! Replaying the unchanged outer part of a thread's previous capture.
//!
//! Owns [`StackMemo`]: the register state of every frame of the last walk, outermost
//! first, and [`walk_remembered`], which walks the new stack until it reaches a frame
//! whose state (pc, rsp, rbp) the memo holds, then replays the memo's outer frames
//! instead of looking up their rules.
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
use crate::memo_counts::MemoCounts;
use crate::walk::{Cursor, Registers, Start, Step, WalkEnd, read_stack, step};

/// One frame of a remembered walk: its registers, the slot its rbp was read from (0 if
/// rbp was carried over from the inner frame), and two flags in that slot's low bits
/// (slots are 8-aligned).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
struct Level {
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

/// A thread's memory of its previous stack walk, so that the next capture replays the
/// unchanged outer frames (two loads and a compare each) instead of stepping them.
///
/// Holds `LEVELS` frames (deeper walks are not remembered). Private to one thread at a
/// time (`&mut`); all-zero memory is a valid empty memo, so it can live in zeroed heap
/// memory. Size: 64 × `LEVELS` bytes + 64 (16 KiB + 64 at the default 256).
#[repr(C)]
pub struct StackMemo<const LEVELS: usize = 256> {
    /// The cache generation the levels were computed under.
    generation: u64,
    /// The [`crate::walk::stack_top`] the levels were stepped under (a thread that
    /// moved to another stack starts afresh).
    top: u64,
    /// Levels remembered, outermost first; 0 when nothing is.
    len: usize,
    /// 0: outermost; 1: buffer full; otherwise the zero return-address slot.
    end: u64,
    /// Frames the last capture replayed, from `frames[replayed_from]` on.
    replayed: u64,
    replayed_from: u64,
    /// Frames of the last capture made without remembering (see
    /// [`REMEMBER_FROM_DEPTH`]).
    plain_depth: u64,
    /// Counters: see [`MemoCounts`].
    counts: MemoCounts,
    levels: [Level; LEVELS],
    /// The current walk's stepped levels, innermost first.
    fresh: [Level; LEVELS],
}

const END_OUTERMOST: u64 = 0;
const END_OPEN: u64 = 1;
const END_NO_UNWIND_INFO: u64 = 2;

impl<const LEVELS: usize> StackMemo<LEVELS> {
    /// An empty memo. Large: prefer [`StackMemo::init_in_place`] on zeroed memory.
    pub const fn new() -> Self {
        const EMPTY: Level = Level {
            pc: 0,
            rsp: 0,
            rbp: 0,
            slot_and_flags: 0,
        };
        StackMemo {
            generation: 0,
            top: 0,
            len: 0,
            end: END_OUTERMOST,
            replayed: 0,
            replayed_from: 0,
            plain_depth: 0,
            counts: MemoCounts {
                captures: 0,
                matches: 0,
                rejections: 0,
            },
            levels: [EMPTY; LEVELS],
            fresh: [EMPTY; LEVELS],
        }
    }

    /// Makes the memory at `memo` an empty memo by zeroing it.
    ///
    /// # Safety
    /// `memo` must be valid for writes of `size_of::<StackMemo<LEVELS>>()` bytes and
    /// suitably aligned.
    pub unsafe fn init_in_place(memo: *mut Self) {
        // SAFETY: guaranteed by the caller; all-zero bytes are a valid `StackMemo`.
        unsafe { core::ptr::write_bytes(memo, 0, 1) };
    }

    /// Forgets the remembered walk (e.g. when the memo moves to another thread; not
    /// needed for correctness, which replay checks frame by frame).
    pub fn forget(&mut self) {
        self.len = 0;
    }

    /// How many of the frames the last capture returned were replayed from the memo
    /// rather than stepped.
    pub fn replayed_frames(&self) -> usize {
        self.replayed as usize
    }

    /// Where in its frames the last capture put the frames it replayed from the
    /// memo (empty if it replayed none, or was redone by libgcc). Each of them is
    /// a value that a frame of an earlier capture through this memo had (the memo
    /// holds no frame its captures did not return): a caller that checked those
    /// captures' frames need not check these again while the memo holds only
    /// frames that passed (on one that did not, [`StackMemo::forget`] it).
    pub fn replayed(&self) -> core::ops::Range<usize> {
        let from = self.replayed_from as usize;
        from..from + self.replayed as usize
    }

    /// What this memo has done since it was created.
    pub fn counts(&self) -> MemoCounts {
        self.counts
    }

    fn end(&self) -> End {
        match self.end {
            END_OUTERMOST => End::Outermost,
            END_OPEN => End::Open,
            END_NO_UNWIND_INFO => End::NoUnwindInfo,
            slot => End::ZeroAt(slot),
        }
    }

    fn set_end(&mut self, end: End) {
        self.end = match end {
            End::Outermost => END_OUTERMOST,
            End::Open => END_OPEN,
            End::NoUnwindInfo => END_NO_UNWIND_INFO,
            End::ZeroAt(slot) => slot,
        };
    }

    /// Remember a walk made only of stepped levels (`fresh[..count]`, innermost first)
    /// that ended with `end`; `end_uses_rbp`: the final step computed a CFA from rbp.
    fn remember_fresh(&mut self, count: Option<usize>, end: End, end_uses_rbp: bool) {
        let Some(count) = count else {
            self.len = 0;
            return;
        };
        for index in 0..count {
            self.levels[index] = self.fresh[count - 1 - index];
        }
        self.len = count;
        self.set_end(end);
        if count > 0 {
            let matters = end_uses_rbp || end == End::Open;
            self.levels[0].set_rbp_matters(matters);
            self.mark_rbp_use(1);
        }
    }

    /// After a replay that started at `levels[matched]`: keep `levels[..=matched]` and
    /// put the stepped levels (`fresh[..count]`, innermost first) inside it.
    fn remember_around(&mut self, matched: usize, count: usize) {
        let total = matched + 1 + count;
        if total > LEVELS {
            self.len = 0;
            return;
        }
        for index in 0..count {
            self.levels[matched + 1 + index] = self.fresh[count - 1 - index];
        }
        self.len = total;
        self.mark_rbp_use(matched + 1);
    }

    /// Sets [`RBP_MATTERS`] on `levels[first..len]` from the outer levels' flags: a
    /// level's rbp matters if the step out of it computes a CFA from rbp, or carries
    /// rbp over to an outer level where it matters.
    fn mark_rbp_use(&mut self, first: usize) {
        for index in first..self.len {
            let outer = self.levels[index - 1];
            let matters =
                outer.flag(FROM_RBP) || (outer.rbp_slot() == 0 && outer.flag(RBP_MATTERS));
            self.levels[index].set_rbp_matters(matters);
        }
    }
}

impl<const LEVELS: usize> Default for StackMemo<LEVELS> {
    fn default() -> Self {
        Self::new()
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

/// Stacks shallower than this many frames are walked without the memo: remembering
/// costs about as much per frame as stepping a cached frame, and replay only pays
/// once enough outer frames repeat. Measured per capture on the benchmark at
/// `lg_prof_sample:0`, when captures still counted the profiler's own four frames:
/// the C++ churn's ~15-frame stacks cost 1,320 instructions with the memo against
/// 1,000 without, Python's ~30-frame stacks 1,870 against 2,700 (the threshold was 20
/// frames with those four; captures from a hooked function's caller do not have them).
const REMEMBER_FROM_DEPTH: usize = 16;

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
    if memo.len == 0 && (memo.plain_depth as usize) < REMEMBER_FROM_DEPTH {
        memo.counts.captures += 1;
        memo.replayed = 0;
        let end = crate::walk::walk(start, store, frames);
        memo.plain_depth = match end {
            WalkEnd::Complete(written, _) => written as u64,
            WalkEnd::NeedsFallback => 0,
        };
        return end;
    }
    let end = walk_with_memo(start, store, memo, generation, frames);
    if end == WalkEnd::NeedsFallback {
        // libgcc rewrites the frames.
        memo.replayed = 0;
    }
    if let WalkEnd::Complete(written, _) = end
        && written < REMEMBER_FROM_DEPTH
    {
        memo.len = 0;
        memo.plain_depth = written as u64;
    }
    end
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
    memo.counts.captures += 1;
    memo.replayed = 0;
    // The start frame is never a level: its state comes from the capture (its own
    // registers, or a caller's saved at a function's entry), not from a step.
    let (mut regs, mut lookup_address, mut written) = start.begin(frames);
    let top = crate::walk::stack_top(regs.rsp);
    if memo.generation != generation || memo.top != top {
        memo.len = 0;
        memo.generation = generation;
        memo.top = top;
    }
    // Levels stepped so far (in `memo.fresh`); None once there were too many to keep.
    let mut fresh = Some(0usize);
    // Remembered levels not yet passed (`levels[..candidates]`); 0 stops matching.
    let mut candidates = memo.len;
    loop {
        if written == frames.len() {
            memo.remember_fresh(fresh, End::Open, true);
            return WalkEnd::Complete(written, Ending::FrameLimit);
        }
        let (caller, level) = match step(store, &regs, lookup_address, top, false) {
            Step::Caller {
                regs,
                rbp_slot,
                cfa_from_rbp,
            } => (regs, Level::new(regs, rbp_slot, cfa_from_rbp)),
            Step::Outermost => {
                memo.remember_fresh(fresh, End::Outermost, false);
                return WalkEnd::Complete(written, Ending::Outermost);
            }
            Step::ZeroReturn { slot, cfa_from_rbp } => {
                memo.remember_fresh(fresh, End::ZeroAt(slot), cfa_from_rbp);
                return WalkEnd::Complete(written, Ending::Outermost);
            }
            // Code without unwind information (JIT code) that keeps no frame
            // pointer ends the walk, as for libgcc. Frame-pointer steps through it
            // are not remembered (their frames' addresses are never read as code,
            // which a replay's end check would do), so the memo forgets.
            Step::NoUnwindInfo => {
                if crate::walk::step_without_cfi(&regs, top, true).is_none() {
                    memo.remember_fresh(fresh, End::NoUnwindInfo, false);
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
        fresh = fresh.and_then(|count| {
            *memo.fresh.get_mut(count)? = level;
            Some(count + 1)
        });
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
        || match memo.end() {
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
    memo.replayed = (written - first_written) as u64;
    memo.replayed_from = first_written as u64;
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
    memo.remember_around(matched, count);
    memo.replayed = (written - first_written) as u64;
    memo.replayed_from = first_written as u64;
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
    let mut count = count;
    for level in (proven..=matched).rev() {
        *memo.fresh.get_mut(count)? = memo.levels[level];
        count += 1;
    }
    Some(count)
}
