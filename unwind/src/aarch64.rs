//! The capture API on aarch64: the project's own walk, libgcc where it gives up.
//!
//! Owns the aarch64 definitions of the crate's public capture functions and
//! types, with the x86_64 signatures, so that the recorder builds unchanged.
//! Every `capture*` walks with [`crate::aarch64_walk`] (DWARF CFI with x29,
//! x30 and sp, pointer-authentication bits stripped, the `rt_sigreturn`
//! trampoline's signal frame) and captures again with libgcc's
//! `_Unwind_Backtrace` wherever that walk cannot step a frame (counted in the
//! private cache's `fallbacks`), as x86_64 does. Rules come from the same
//! caches as on x86_64 (private, shared, or private in front of shared), and
//! the remembered captures replay the unchanged outer frames of the previous
//! one from a [`StackMemo`] (`aarch64_memo`). The
//! `*_from` captures walk from themselves and keep the frames from the step
//! whose CFA is the entry's sp (on aarch64 a function's CFA is sp at its
//! entry).
//!
//! Runs inside malloc: no allocation and no lock of ours (libgcc's own
//! properties are the crate's, see its documentation).

pub use crate::aarch64_memo::StackMemo;
use crate::aarch64_memo::walk_remembered;
use crate::aarch64_walk::{Report, current_registers, walk};
use crate::cache::{LayeredStore, LocalStore, RuleCache, RuleStore, SharedRuleCache, SharedStore};
use crate::ending::{Captured, Ending};
use crate::{libgcc, libgcc_captured};

/// The stack from the caller of the `capture*` function this is inlined
/// into, with rules from `store`: the project's walk, or libgcc's where it
/// gives up (`Err`).
#[inline(always)]
fn walked_or_libgcc<S: RuleStore>(store: &mut S, frames: &mut [u64]) -> Result<usize, usize> {
    let regs = current_registers();
    match walk(store, regs, Report::After(0), frames) {
        Some(written) => Ok(core::hint::black_box(written)),
        None if libgcc::may_hold_its_lock() => Ok(0),
        None => Err(core::hint::black_box(libgcc::backtrace(frames, 2))),
    }
}

/// The stack from the caller of the `capture*` function this is inlined
/// into (`entry_sp` 0), or from the caller of the function entered with sp
/// `entry_sp`, with rules from `store` and replayed from `memo`: the
/// project's walk, or libgcc's (`Err`).
#[inline(always)]
fn remembered_or_libgcc<S: RuleStore, const LEVELS: usize>(
    store: &mut S,
    memo: &mut StackMemo<LEVELS>,
    entry_sp: u64,
    frames: &mut [u64],
) -> Result<usize, usize> {
    let regs = current_registers();
    let generation = crate::cache::current_generation();
    let report = match entry_sp {
        0 => Report::After(0),
        sp => Report::FromCfa(sp),
    };
    match walk_remembered(store, regs, report, memo, generation, frames) {
        Some(written) if written > 0 || entry_sp == 0 => Ok(core::hint::black_box(written)),
        _ if libgcc::may_hold_its_lock() => Ok(0),
        _ if entry_sp == 0 => Err(core::hint::black_box(libgcc::backtrace(frames, 2))),
        _ => Err(core::hint::black_box(libgcc::backtrace_from(
            frames, entry_sp,
        ))),
    }
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

/// Captures the current stack (the project's walk, else libgcc's).
#[inline(never)]
pub fn capture<const BUCKETS: usize>(cache: &mut RuleCache<BUCKETS>, frames: &mut [u64]) -> usize {
    let mut store = LocalStore::new(cache);
    let walked = walked_or_libgcc(&mut store, frames);
    if walked.is_err() {
        store.count_fallback();
    }
    walked.unwrap_or_else(|written| written)
}

/// [`capture_shared`](crate::capture_shared), saying why the walk ended.
#[inline(never)]
pub fn capture_shared_ending<const BUCKETS: usize>(
    cache: &SharedRuleCache<BUCKETS>,
    frames: &mut [u64],
) -> Captured {
    let walked = walked_or_libgcc(&mut SharedStore::new(cache), frames);
    ending_of(frames, walked)
}

/// Captures the current stack (the project's walk, else libgcc's).
#[inline(never)]
pub fn capture_layered<const LOCAL: usize, const SHARED: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    frames: &mut [u64],
) -> usize {
    let mut store = LayeredStore::new(LocalStore::new(local), SharedStore::new(shared));
    let walked = walked_or_libgcc(&mut store, frames);
    if walked.is_err() {
        store.count_fallback();
    }
    walked.unwrap_or_else(|written| written)
}

/// [`capture_remembered`](crate::capture_remembered), saying why the walk ended.
#[inline(never)]
pub fn capture_remembered_ending<const LOCAL: usize, const SHARED: usize, const LEVELS: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    frames: &mut [u64],
) -> Captured {
    let mut store = LayeredStore::new(LocalStore::new(local), SharedStore::new(shared));
    let walked = remembered_or_libgcc(&mut store, memo, 0, frames);
    if walked.is_err() {
        store.count_fallback();
    }
    ending_of(frames, walked)
}

/// [`capture_remembered_from`](crate::capture_remembered_from), saying why
/// the walk ended: the frames from the one whose CFA is `entry.rsp` (on
/// aarch64 sp at a function's entry is that function's CFA), by the
/// project's walk or else libgcc's, which gives the frames from this
/// capture's caller on if no frame has that CFA.
///
/// # Safety
/// As for the x86_64 function: `entry` holds sp and x29 as they were at the
/// first instruction of a running function of this thread that called this
/// capture.
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
    let mut store = LayeredStore::new(LocalStore::new(local), SharedStore::new(shared));
    let walked = remembered_or_libgcc(&mut store, memo, entry.rsp, frames);
    if walked.is_err() {
        store.count_fallback();
    }
    ending_of(frames, walked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{capture_remembered, capture_shared};

    /// Which capture a test call makes.
    #[derive(Clone, Copy)]
    enum Through {
        Private,
        Shared,
        Layered,
        Remembered,
    }

    struct Caches {
        private: Box<RuleCache<64>>,
        shared: Box<SharedRuleCache<64>>,
        memo: StackMemo<64>,
    }

    /// Captures with `through` and with libgcc at the bottom of `depth`
    /// recursive calls (the same frames above both).
    #[inline(never)]
    fn at_depth(depth: u32, through: Through, caches: &mut Caches) -> (Vec<u64>, Vec<u64>) {
        if depth > 0 {
            let result = at_depth(depth - 1, through, caches);
            return core::hint::black_box(result);
        }
        let mut own = [0u64; 64];
        let len = match through {
            Through::Private => capture(&mut caches.private, &mut own),
            Through::Shared => capture_shared(&caches.shared, &mut own),
            Through::Layered => capture_layered(&mut caches.private, &caches.shared, &mut own),
            Through::Remembered => capture_remembered(
                &mut caches.private,
                &caches.shared,
                &mut caches.memo,
                &mut own,
            ),
        };
        let mut theirs = [0u64; 64];
        let their_len = crate::capture_libgcc(&mut theirs);
        (own[..len].to_vec(), theirs[..their_len].to_vec())
    }

    #[test]
    fn every_cached_capture_agrees_with_libgcc_reuses_its_rules_and_replays() {
        for through in [
            Through::Private,
            Through::Shared,
            Through::Layered,
            Through::Remembered,
        ] {
            let mut caches = Caches {
                private: RuleCache::new_boxed(),
                shared: Box::new(SharedRuleCache::new()),
                memo: StackMemo::new(),
            };
            let (mut walked, mut replayed) = (0, 0);
            for depth in [5, 9, 5, 2, 9, 9, 12, 9, 20, 3, 20, 20] {
                let (own, theirs) = at_depth(depth, through, &mut caches);
                if matches!(through, Through::Remembered) {
                    replayed += caches.memo.replayed_frames();
                }
                // frames[0] of each is its own call site in `at_depth`.
                assert!(own.len() > depth as usize + 2, "{own:x?}");
                assert_eq!(own[1..], theirs[1..], "depth {depth}");
                walked += own.len() as u64;
            }
            // Rules are computed once per address, not per frame (a few more where
            // a bucket's ways overflow or another test invalidates the caches).
            if !matches!(through, Through::Shared) {
                let misses = caches.private.misses();
                assert!(misses * 3 < walked, "{misses} rules for {walked} frames");
            }
            assert_eq!(caches.private.fallbacks(), 0);
            if matches!(through, Through::Remembered) {
                // The repeated deep stacks replay their outer frames.
                assert!(replayed > 20, "{replayed} frames replayed");
            }
        }
    }

    #[inline(never)]
    fn via_a(caches: &mut Caches) -> (Vec<u64>, Vec<u64>) {
        core::hint::black_box(at_depth(12, Through::Remembered, caches))
    }

    #[inline(never)]
    fn via_b(caches: &mut Caches) -> (Vec<u64>, Vec<u64>) {
        core::hint::black_box(at_depth(12, Through::Remembered, caches))
    }

    #[test]
    fn a_changed_outer_caller_under_the_same_inner_frames_is_not_replayed() {
        let mut caches = Caches {
            private: RuleCache::new_boxed(),
            shared: Box::new(SharedRuleCache::new()),
            memo: StackMemo::new(),
        };
        for round in 0..6 {
            // The same frames at the same stack pointers below two callers.
            let via: fn(&mut Caches) -> (Vec<u64>, Vec<u64>) =
                if round % 2 == 0 { via_a } else { via_b };
            let (own, theirs) = via(&mut caches);
            assert_eq!(own[1..], theirs[1..], "round {round}");
        }
        let counts = caches.memo.counts();
        assert!(counts.matches >= 4 && counts.rejections >= 4, "{counts:?}");
    }
}
