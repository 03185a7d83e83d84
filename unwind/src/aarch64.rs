//! The capture API on aarch64: every walk is libgcc's `_Unwind_Backtrace`.
//!
//! Owns the aarch64 definitions of the crate's public capture functions and
//! types, with the x86_64 signatures, so that the recorder builds unchanged.
//! libgcc's aarch64 unwinder reads the DWARF CFI of each frame (x29, x30, sp),
//! strips pointer-authentication bits from return addresses
//! (`DW_CFA_AARCH64_negate_ra_state`, `xpaclri`) and steps through
//! `__kernel_rt_sigreturn`'s frame, so stacks are right; what is missing is
//! speed: the cached rules and the memo (the x86_64 `walk` and `memo`) are
//! not ported, so each capture costs what [`crate::capture_libgcc`] costs.
//! The rule caches are still made and passed in (they cost only their
//! zeroed, untouched memory) so that the callers' layout is the same on
//! both architectures.
//!
//! Runs inside malloc: no allocation and no lock of ours (libgcc's own
//! properties are the crate's, see its documentation).

use crate::cache::{RuleCache, SharedRuleCache};
use crate::ending::Captured;
use crate::{libgcc, libgcc_captured};

/// The registers of a function's entry, as on x86_64: on aarch64 `rsp` is
/// sp at the entry (the entered function's CFA: its return address is in
/// x30, not on the stack) and `rbp` is x29.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionEntry {
    /// sp at the entry.
    pub rsp: u64,
    /// x29 at the entry (the caller's frame record).
    pub rbp: u64,
}

/// Counters of a [`StackMemo`]; always zero on aarch64 (no memo).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MemoCounts {
    /// Captures through the memo.
    pub captures: u64,
    /// Captures that reached a remembered frame state and started replaying.
    pub matches: u64,
    /// Replays stopped early because a remembered slot had changed.
    pub rejections: u64,
}

/// The memo of a thread's last walk: empty on aarch64 (the walk is libgcc's).
#[repr(C)]
pub struct StackMemo<const LEVELS: usize> {
    counts: MemoCounts,
}

/// Captures the current stack (libgcc on aarch64; the cache is not used).
#[inline(never)]
pub fn capture<const BUCKETS: usize>(cache: &mut RuleCache<BUCKETS>, frames: &mut [u64]) -> usize {
    let _ = cache;
    core::hint::black_box(libgcc::backtrace(frames, 2))
}

/// Captures the current stack (libgcc on aarch64; the cache is not used).
#[inline(never)]
pub fn capture_shared<const BUCKETS: usize>(
    cache: &SharedRuleCache<BUCKETS>,
    frames: &mut [u64],
) -> usize {
    let _ = cache;
    core::hint::black_box(libgcc::backtrace(frames, 2))
}

/// [`capture_shared`], saying why the walk ended.
#[inline(never)]
pub fn capture_shared_ending<const BUCKETS: usize>(
    cache: &SharedRuleCache<BUCKETS>,
    frames: &mut [u64],
) -> Captured {
    let _ = cache;
    let len = core::hint::black_box(libgcc::backtrace(frames, 2));
    libgcc_captured(frames, len)
}

/// Captures the current stack (libgcc on aarch64; the caches are not used).
#[inline(never)]
pub fn capture_layered<const LOCAL: usize, const SHARED: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    frames: &mut [u64],
) -> usize {
    let _ = (local, shared);
    core::hint::black_box(libgcc::backtrace(frames, 2))
}

/// Captures the current stack (libgcc on aarch64; caches and memo unused).
#[inline(never)]
pub fn capture_remembered<const LOCAL: usize, const SHARED: usize, const LEVELS: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    frames: &mut [u64],
) -> usize {
    let _ = (local, shared, memo);
    core::hint::black_box(libgcc::backtrace(frames, 2))
}

/// [`capture_remembered`], saying why the walk ended.
#[inline(never)]
pub fn capture_remembered_ending<const LOCAL: usize, const SHARED: usize, const LEVELS: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    frames: &mut [u64],
) -> Captured {
    let _ = (local, shared, memo);
    let len = core::hint::black_box(libgcc::backtrace(frames, 2));
    libgcc_captured(frames, len)
}

/// Captures the stack from the caller of the function entered with `entry`:
/// libgcc's frames from the one whose CFA is `entry.rsp` (on aarch64 sp at
/// a function's entry is that function's CFA), or, if none is, the frames
/// from this capture's caller on.
///
/// # Safety
/// As for the x86_64 function: `entry` holds sp and x29 as they were at the
/// first instruction of a running function of this thread that called this
/// capture.
#[inline(never)]
pub unsafe fn capture_remembered_from<
    const LOCAL: usize,
    const SHARED: usize,
    const LEVELS: usize,
>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    entry: FunctionEntry,
    frames: &mut [u64],
) -> usize {
    let _ = (local, shared, memo);
    core::hint::black_box(libgcc::backtrace_from(frames, entry.rsp))
}

/// [`capture_remembered_from`], saying why the walk ended.
///
/// # Safety
/// As for [`capture_remembered_from`].
#[inline(never)]
pub unsafe fn capture_remembered_from_ending<
    const LOCAL: usize,
    const SHARED: usize,
    const LEVELS: usize,
>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    entry: FunctionEntry,
    frames: &mut [u64],
) -> Captured {
    let _ = (local, shared, memo);
    let len = core::hint::black_box(libgcc::backtrace_from(frames, entry.rsp));
    libgcc_captured(frames, len)
}

/// One thread's private unwinding state: on aarch64 a rule cache kept for
/// the same layout as x86_64's, and an empty memo.
#[repr(C)]
pub struct PrivateUnwinder<const LOCAL: usize, const LEVELS: usize> {
    rules: RuleCache<LOCAL>,
    memo: StackMemo<LEVELS>,
}

impl<const LOCAL: usize, const LEVELS: usize> PrivateUnwinder<LOCAL, LEVELS> {
    /// [`capture_remembered_ending`] with this state.
    #[inline(always)]
    pub fn capture<const SHARED: usize>(
        &mut self,
        shared: &SharedRuleCache<SHARED>,
        frames: &mut [u64],
    ) -> Captured {
        capture_remembered_ending(&mut self.rules, shared, &mut self.memo, frames)
    }

    /// [`capture_remembered_from`] with this state.
    ///
    /// # Safety
    /// As for [`capture_remembered_from`].
    #[inline(always)]
    pub unsafe fn capture_from<const SHARED: usize>(
        &mut self,
        shared: &SharedRuleCache<SHARED>,
        entry: FunctionEntry,
        frames: &mut [u64],
    ) -> Captured {
        // SAFETY: forwarded from our caller's contract.
        unsafe {
            capture_remembered_from_ending(&mut self.rules, shared, &mut self.memo, entry, frames)
        }
    }

    /// Forgets the last walk (none is kept on aarch64).
    pub fn forget(&mut self) {}

    /// See [`RuleCache::set_computed_only`].
    pub fn set_computed_only(&mut self, on: bool) {
        self.rules.set_computed_only(on);
    }

    /// The memo's counters (zero: no memo on aarch64).
    pub fn memo_counts(&self) -> MemoCounts {
        self.memo.counts
    }

    /// Captures redone with libgcc (none: every capture is libgcc's).
    pub fn fallbacks(&self) -> u64 {
        self.rules.fallbacks()
    }
}
