//! The bookkeeping of a thread's stack memo, the same on every architecture.
//!
//! Owns [`MemoState`]: the levels of the last walk (outermost first), the levels
//! the current walk has stepped (innermost first), the cache generation and stack
//! top they were stepped under, how the remembered walk ended, the depth of the
//! last walk made without remembering, where the last capture put the frames it
//! replayed, and the [`MemoCounts`]. Each architecture's memo (`memo` on x86_64,
//! `aarch64_memo` on aarch64) names it `StackMemo` with its own level type and
//! owns what a level is: how a new frame matches one and how replay proves one
//! current. This module never reads a level's fields nor any stack memory; it only
//! moves levels between the two arrays.
//!
//! Runs inside malloc: no allocation, no lock, no system call.

use crate::memo_counts::MemoCounts;

/// Stacks shallower than this many frames are walked without the memo:
/// remembering costs about as much per frame as stepping a cached frame, and
/// replay only pays once enough outer frames repeat. Measured per capture on the
/// x86_64 benchmark at `lg_prof_sample:0`, when captures still counted the
/// profiler's own four frames: the C++ churn's ~15-frame stacks cost 1,320
/// instructions with the memo against 1,000 without, Python's ~30-frame stacks
/// 1,870 against 2,700 (the threshold was 20 frames with those four; captures
/// from a hooked function's caller do not have them).
const REMEMBER_FROM_DEPTH: usize = 16;

/// The remembered walk ended at an outermost rule.
pub(crate) const END_OUTERMOST: u64 = 0;
/// The remembered walk filled the frame buffer: outer frames may follow.
pub(crate) const END_OPEN: u64 = 1;
// An architecture may give other small values a meaning of its own; any 8-aligned
// value is the slot where a zero return address was read.

/// One frame of a remembered walk, as an architecture's memo records it.
///
/// # Safety
/// All-zero bytes must be a valid level (plain integers), so that all-zero memory
/// is a valid empty [`MemoState`].
pub unsafe trait MemoLevel: Copy {}

/// A thread's memory of its previous stack walk, so that the next capture replays
/// the unchanged outer frames instead of stepping them. The public name is
/// `StackMemo`, with the architecture's level type.
///
/// Holds `LEVELS` levels (deeper walks are not remembered). Private to one thread
/// at a time (`&mut`); all-zero memory is a valid empty memo, so it can live in
/// zeroed heap memory. Size: 2 × `LEVELS` levels + 80 bytes.
#[repr(C)]
pub struct MemoState<Level, const LEVELS: usize> {
    /// The cache generation the levels were computed under.
    generation: u64,
    /// The stack top the levels were stepped under (a thread that moved to
    /// another stack starts afresh).
    top: u64,
    /// Levels remembered, outermost first; 0 when nothing is.
    pub(crate) len: usize,
    /// [`END_OUTERMOST`], [`END_OPEN`], the zero return address's slot, or an
    /// architecture's own small value.
    pub(crate) end: u64,
    /// Frames the last capture replayed, from `frames[replayed_from]` on.
    replayed: u64,
    replayed_from: u64,
    /// Frames of the last capture made without remembering (see
    /// [`REMEMBER_FROM_DEPTH`]).
    plain_depth: u64,
    /// Counters: see [`MemoCounts`].
    pub(crate) counts: MemoCounts,
    /// The remembered walk's levels, outermost first.
    pub(crate) levels: [Level; LEVELS],
    /// The current walk's stepped levels, innermost first.
    pub(crate) fresh: [Level; LEVELS],
}

impl<Level: MemoLevel, const LEVELS: usize> MemoState<Level, LEVELS> {
    /// An empty memo. Large: prefer `init_in_place` on zeroed memory.
    pub const fn new() -> Self {
        // SAFETY: all-zero bytes are a valid empty memo: integers, counters, and
        // levels (`MemoLevel`'s contract); `len` 0 remembers nothing.
        unsafe { core::mem::zeroed() }
    }

    /// Makes the memory at `memo` an empty memo by zeroing it.
    ///
    /// # Safety
    /// `memo` must be valid for writes of `size_of::<Self>()` bytes and suitably
    /// aligned.
    pub unsafe fn init_in_place(memo: *mut Self) {
        // SAFETY: guaranteed by the caller; all-zero bytes are a valid empty memo.
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
    /// frames that passed (on one that did not, `forget` it).
    pub fn replayed(&self) -> core::ops::Range<usize> {
        let from = self.replayed_from as usize;
        from..from + self.replayed as usize
    }

    /// What this memo has done since it was created.
    pub fn counts(&self) -> MemoCounts {
        self.counts
    }

    /// Starts a capture: true if it walks through the memo, false if it walks
    /// without (nothing is remembered and the last stack was shallow).
    #[inline(always)]
    pub(crate) fn begin_capture(&mut self) -> bool {
        self.counts.captures += 1;
        self.replayed = 0;
        self.len != 0 || self.plain_depth as usize >= REMEMBER_FROM_DEPTH
    }

    /// A capture that [`MemoState::begin_capture`] sent past the memo wrote
    /// `written` frames (`None`: libgcc redoes it).
    #[inline(always)]
    pub(crate) fn walked_plainly(&mut self, written: Option<usize>) {
        self.plain_depth = written.unwrap_or(0) as u64;
    }

    /// A capture through the memo wrote `written` frames (`None`: libgcc redoes
    /// it, so nothing was replayed); a shallow one stops remembering.
    #[inline(always)]
    pub(crate) fn walked_remembering(&mut self, written: Option<usize>) {
        match written {
            Some(written) if written < REMEMBER_FROM_DEPTH => {
                self.len = 0;
                self.plain_depth = written as u64;
            }
            Some(_) => {}
            None => {
                self.len = 0;
                self.replayed = 0;
            }
        }
    }

    /// The walk runs under cache generation `generation` on the stack below
    /// `top`: levels stepped under others are forgotten.
    #[inline(always)]
    pub(crate) fn walk_under(&mut self, generation: u64, top: u64) {
        if self.generation != generation || self.top != top {
            self.len = 0;
            self.generation = generation;
            self.top = top;
        }
    }

    /// The last capture put the frames it replayed at `frames[first..written]`.
    #[inline(always)]
    pub(crate) fn set_replayed(&mut self, first: usize, written: usize) {
        self.replayed = (written - first) as u64;
        self.replayed_from = first as u64;
    }

    /// Appends `level` to the current walk's stepped levels (`fresh[..count]` for
    /// `fresh == Some(count)`); `None` once there are too many to keep.
    #[inline(always)]
    pub(crate) fn push(&mut self, fresh: Option<usize>, level: Level) -> Option<usize> {
        let count = fresh?;
        *self.fresh.get_mut(count)? = level;
        Some(count + 1)
    }

    /// Remembers the stepped levels (`fresh[..count]`, innermost first) as the
    /// whole walk, ended with `end`; `None`: too deep to remember. The levels now
    /// remembered.
    pub(crate) fn remember_fresh(&mut self, count: Option<usize>, end: u64) -> usize {
        let Some(count) = count else {
            self.len = 0;
            return 0;
        };
        for index in 0..count {
            self.levels[index] = self.fresh[count - 1 - index];
        }
        self.len = count;
        self.end = end;
        count
    }

    /// After a replay from `levels[matched]` to the end: keeps
    /// `levels[..=matched]` and puts the stepped levels (`fresh[..count]`,
    /// innermost first) inside it, or forgets all if they do not fit. (x86_64's
    /// memo does this itself, marking each level in the same pass.)
    #[cfg(target_arch = "aarch64")]
    pub(crate) fn remember_around(&mut self, matched: usize, count: usize) {
        let total = matched + 1 + count;
        if total > LEVELS {
            self.len = 0;
            return;
        }
        for index in 0..count {
            self.levels[matched + 1 + index] = self.fresh[count - 1 - index];
        }
        self.len = total;
    }
}

impl<Level: MemoLevel, const LEVELS: usize> Default for MemoState<Level, LEVELS> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    #[repr(C)]
    struct Pair(u64, u64);

    // SAFETY: plain integers.
    unsafe impl MemoLevel for Pair {}

    #[test]
    fn the_state_is_two_arrays_of_levels_behind_80_bytes_and_starts_empty() {
        assert_eq!(core::mem::size_of::<MemoState<Pair, 4>>(), 80 + 2 * 4 * 16);
        let mut memo = MemoState::<Pair, 4>::new();
        assert!(!memo.begin_capture(), "an empty memo walks plainly");
        assert_eq!(
            (memo.len, memo.end, memo.replayed()),
            (0, END_OUTERMOST, 0..0)
        );
        assert_eq!(memo.counts().captures, 1);
        // Three stepped levels, innermost first, remembered outermost first.
        let mut fresh = Some(0);
        for pc in [1, 2, 3] {
            fresh = memo.push(fresh, Pair(pc, 0));
        }
        assert_eq!(memo.remember_fresh(fresh, END_OPEN), 3);
        let pcs: Vec<u64> = memo.levels[..memo.len].iter().map(|l| l.0).collect();
        assert_eq!(pcs, [3, 2, 1]);
        // A fifth level does not fit: the walk is too deep to remember.
        for pc in [4, 5] {
            fresh = memo.push(fresh, Pair(pc, 0));
        }
        assert_eq!(fresh, None);
        assert_eq!(memo.remember_fresh(fresh, END_OPEN), 0);
        assert_eq!(memo.len, 0);
    }
}
