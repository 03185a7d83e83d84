//! The capture API on aarch64: the project's own walk, libgcc where it gives up.
//!
//! Owns the aarch64 definitions of the crate's public capture functions and
//! types, with the x86_64 signatures, so that the recorder builds unchanged.
//! Every `capture*` walks with [`crate::aarch64_walk`] (DWARF CFI with x29,
//! x30 and sp, pointer-authentication bits stripped, the `rt_sigreturn`
//! trampoline's signal frame) and captures again with libgcc's
//! `_Unwind_Backtrace` wherever that walk cannot step a frame (counted in the
//! private cache's `fallbacks`), as x86_64 does. What is not ported yet is
//! speed: the rule caches and the memo of x86_64's `walk` and `memo`, so each
//! frame's rule is computed from the CFI again; the caches are still made and
//! passed in (they cost only their zeroed, untouched memory) so that the
//! callers' layout is the same on both architectures. The `*_from` captures
//! walk from themselves and keep the frames from the step whose CFA is the
//! entry's sp (on aarch64 a function's CFA is sp at its entry).
//!
//! Runs inside malloc: no allocation and no lock of ours (libgcc's own
//! properties are the crate's, see its documentation).

use crate::aarch64_walk::{capture_from_entry, capture_skipping};
use crate::cache::{LocalStore, RuleCache, SharedRuleCache};
use crate::ending::{Captured, Ending};
use crate::memo_counts::MemoCounts;
use crate::{libgcc, libgcc_captured};

/// The stack from the caller of the `capture*` function this is inlined
/// into: the project's walk, or libgcc's where it gives up (`fallbacks`
/// counts those).
#[inline(always)]
fn walked_or_libgcc(frames: &mut [u64]) -> Result<usize, usize> {
    match capture_skipping(frames, 1) {
        Some(written) => Ok(core::hint::black_box(written)),
        None => Err(core::hint::black_box(libgcc::backtrace(frames, 2))),
    }
}

/// The length, counting a fallback to libgcc in `cache`.
#[inline(always)]
fn counted<const BUCKETS: usize>(
    walked: Result<usize, usize>,
    cache: &mut RuleCache<BUCKETS>,
) -> usize {
    walked.unwrap_or_else(|written| {
        LocalStore::new(cache).count_fallback();
        written
    })
}

/// Why a walk ended: the project's (the whole stack unless `frames` is
/// full), or libgcc's as [`libgcc_captured`] tells.
#[inline(always)]
fn ending_of(frames: &[u64], walked: Result<usize, usize>) -> Captured {
    match walked {
        Ok(len) if len == frames.len() => Captured {
            len,
            ending: Ending::FrameLimit,
        },
        Ok(len) => Captured {
            len,
            ending: Ending::Outermost,
        },
        Err(len) => libgcc_captured(frames, len),
    }
}

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

/// The memo of a thread's last walk: empty on aarch64 (its walk keeps no
/// memo yet).
#[repr(C)]
pub struct StackMemo<const LEVELS: usize> {
    counts: MemoCounts,
}

impl<const LEVELS: usize> StackMemo<LEVELS> {
    /// Forgets the last walk (none is kept).
    pub fn forget(&mut self) {}

    /// Its counters: zero.
    pub fn counts(&self) -> MemoCounts {
        self.counts
    }

    /// The frames the last capture replayed: none.
    pub fn replayed(&self) -> core::ops::Range<usize> {
        0..0
    }
}

/// Captures the current stack (the project's walk, else libgcc's).
#[inline(never)]
pub fn capture<const BUCKETS: usize>(cache: &mut RuleCache<BUCKETS>, frames: &mut [u64]) -> usize {
    counted(walked_or_libgcc(frames), cache)
}

/// Captures the current stack (the project's walk, else libgcc's).
#[inline(never)]
pub fn capture_shared<const BUCKETS: usize>(
    cache: &SharedRuleCache<BUCKETS>,
    frames: &mut [u64],
) -> usize {
    let _ = cache;
    walked_or_libgcc(frames).unwrap_or_else(|written| written)
}

/// [`capture_shared`], saying why the walk ended.
#[inline(never)]
pub fn capture_shared_ending<const BUCKETS: usize>(
    cache: &SharedRuleCache<BUCKETS>,
    frames: &mut [u64],
) -> Captured {
    let _ = cache;
    let walked = walked_or_libgcc(frames);
    ending_of(frames, walked)
}

/// Captures the current stack (the project's walk, else libgcc's).
#[inline(never)]
pub fn capture_layered<const LOCAL: usize, const SHARED: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    frames: &mut [u64],
) -> usize {
    let _ = shared;
    counted(walked_or_libgcc(frames), local)
}

/// Captures the current stack (the project's walk, else libgcc's).
#[inline(never)]
pub fn capture_remembered<const LOCAL: usize, const SHARED: usize, const LEVELS: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    frames: &mut [u64],
) -> usize {
    let _ = (shared, memo);
    counted(walked_or_libgcc(frames), local)
}

/// [`capture_remembered`], saying why the walk ended.
#[inline(never)]
pub fn capture_remembered_ending<const LOCAL: usize, const SHARED: usize, const LEVELS: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    frames: &mut [u64],
) -> Captured {
    let _ = (shared, memo);
    let walked = walked_or_libgcc(frames);
    if walked.is_err() {
        LocalStore::new(local).count_fallback();
    }
    ending_of(frames, walked)
}

/// Captures the stack from the caller of the function entered with `entry`:
/// the frames from the one whose CFA is `entry.rsp` (on aarch64 sp at a
/// function's entry is that function's CFA), by the project's walk or else
/// libgcc's, which gives the frames from this capture's caller on if no
/// frame has that CFA.
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
    let _ = (shared, memo);
    match capture_from_entry(frames, entry.rsp) {
        Some(written) => core::hint::black_box(written),
        None => {
            LocalStore::new(local).count_fallback();
            core::hint::black_box(libgcc::backtrace_from(frames, entry.rsp))
        }
    }
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
    let _ = (shared, memo);
    let walked = match capture_from_entry(frames, entry.rsp) {
        Some(written) => Ok(core::hint::black_box(written)),
        None => {
            LocalStore::new(local).count_fallback();
            Err(core::hint::black_box(libgcc::backtrace_from(
                frames, entry.rsp,
            )))
        }
    };
    ending_of(frames, walked)
}
