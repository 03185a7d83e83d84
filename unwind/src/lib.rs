//! Stack capture for heapsample that is safe to run inside an interposed `malloc`.
//!
//! The profiler records a backtrace for each sampled allocation, from inside `malloc`.
//! libgcc's `_Unwind_Backtrace` re-parses the DWARF call-frame information (CFI) of
//! every frame on every call, which costs 2–10 µs per stack. This crate walks the
//! stack with *cached* per-address unwind rules instead:
//!
//! 1. For a return address it has not seen, the `cfi` module asks glibc's lock-free
//!    `_dl_find_object` for the object's `.eh_frame_hdr`, binary-searches its FDE
//!    table, evaluates the FDE with gimli on fixed-size storage and reduces the row to
//!    a compact `Rule` (CFA = rsp|rbp + offset, return address at CFA−8,
//!    saved rbp at CFA+offset; on aarch64 CFA = sp|x29 + offset, the return
//!    address in x30 or at CFA+offset, stripped of pointer-authentication bits,
//!    saved x29 at CFA+offset).
//! 2. The rule goes into a caller-owned cache ([`RuleCache`], [`SharedRuleCache`],
//!    or both), so a warm capture is a few loads per frame.
//! 3. Whenever the fast walk stops for any reason other than reaching the outermost
//!    frame (CFA expressions, signal trampolines, unusual register rules, implausible
//!    stack values), the whole stack is captured again from scratch with libgcc's
//!    `_Unwind_Backtrace` ([`capture_libgcc`]): correctness beats speed. Sections a
//!    JIT registered with libgcc (`__register_frame*`, which the shim interposes:
//!    [`register_frames`]) are searched where no loaded object has an FDE, by the
//!    walk itself (`registered`). A frame in
//!    code without any unwind information (JIT code, an interpreter's trampoline;
//!    no object's and no registered FDE covers it, and libgcc's `rt_sigreturn`
//!    test does not match) is reported, and the walk goes on
//!    by the frame-pointer chain (`walk::frame_pointer_step`: V8, CPython's perf
//!    trampolines and the JVM with `-XX:+PreserveFramePointer` keep one), reading
//!    only the thread's own stack below its known top, and with the unwind tables
//!    again once back in code that has them. Where rbp is no frame pointer the walk
//!    ends after that frame, where libgcc's ends. Addresses reached by such a step
//!    are only looked up, never read as code. Code without unwind information that
//!    keeps no frame pointer but holds a stack address in rbp can add wrong frames
//!    above itself (as for every frame-pointer unwinder).
//! 4. [`capture_remembered`] also keeps a thread's previous walk in a
//!    [`StackMemo`] (the bookkeeping in `memo_state`, shared by both architectures;
//!    the levels and their replay in `memo`, aarch64's in `aarch64_memo`) and replays its outer frames when the new walk reaches one of their register states:
//!    two loads and a compare per frame instead of a rule lookup, re-reading exactly
//!    the slots the real step would read, so a changed caller is never replayed (the
//!    proof is in [`StackMemo`]'s module).
//! 5. Every walk says why it ended ([`Ending`], through the `*_ending` captures and
//!    [`PrivateUnwinder`]): the outermost frame, a full frame buffer, code without
//!    unwind information whose frame pointer leads nowhere, or such code on a stack
//!    of unknown bounds; libgcc's fallback is classified alike ([`libgcc_captured`]).
//!
//! # Cost per frame (callgrind, the C++ churn at `lg_prof_sample:0`, main thread)
//!
//! A step to the caller through the private cache costs about 39 instructions: the
//! rule's lookup 19 (hash, the newest way's compare, the load, the tag), the step 22
//! (the CFA, the stack top, the return address, the frame written: a step from rsp was
//! bounded when its rule was made (`rule::Rule::step`), so only the top
//! is checked when it is taken) and the saved rbp's restore 4 where the rule has one.
//! A frame replayed from the memo costs 12.6 (the return-address slot re-read and
//! compared, and the saved-rbp slot where it matters); a frame stepped while
//! remembering about 50–60 (the step, the level it leaves in the memo, the search for a
//! remembered state). A capture's own set-up is about 170 (the recorder's capture,
//! with [`capture_remembered_from_ending`] inlined into it, walks the C++ churn's
//! 7.2 frames for 437 in all). Stacks shallower than 16
//! frames are walked without the memo for that reason.
//!
//! A rule for a return address in the profiler's own code ([`set_own_code`]) is cached
//! with a mark that the fast path's tag test refuses, so the walk takes that frame on
//! its slower path and notes it ([`PrivateUnwinder::may_hold_own_frames`]): the caller
//! looks for its own frames only then, at no cost per frame otherwise.
//!
//! # Contract shared by every `capture*` function
//!
//! `frames[0]` is the address the `capture*` call returns to (a return address inside
//! its caller), `frames[1]` the caller's return address, and so on outwards, exactly as
//! `_Unwind_GetIP` reports them, minus libgcc's terminal zero entry, and then on
//! through code without unwind information by its frame pointers (3. above), where
//! libgcc stops. At most `frames.len()` entries are written; the number written is returned.
//! [`capture_remembered_from`] starts further out, at the caller of a function whose
//! entry registers it is given ([`FunctionEntry`]): its `frames[0]` is that function's
//! return address, and the frames of the function and of what it called are never
//! stepped.
//!
//! Capturing never allocates, takes no lock, makes no system call and never calls
//! `dl_iterate_phdr`; it may be called inside `malloc`, `free` and signal handlers.
//! It reads only the stack of the calling thread, below its top where that is known
//! (glibc's threads and the main thread), whatever the cached rules say.
//! (The libgcc fallback inherits libgcc's own properties: on glibc ≥ 2.35 it also uses
//! `_dl_find_object` and takes no loader lock, but it takes libgcc's object mutex if a
//! program registered frames with `__register_frame_info`, e.g. some JITs. The walk
//! itself never asks libgcc about such frames where every registration went through
//! [`register_frames`] ([`set_registrations_complete`]): it reads the registered
//! sections itself, and caches "no unwind information" for generated code. Only a
//! frame it cannot step (a CFA expression, a signal frame, an FDE it does not
//! understand) still sends the whole capture to libgcc. Where registrations may
//! bypass it (a library loaded late), it asks libgcc's `_Unwind_Find_FDE` about
//! each frame without unwind information, as before, and caches nothing for it.)
//!
//! # Which cache to use
//!
//! * [`RuleCache`] — private to one thread (`&mut`), 64 KiB by default. Fastest.
//! * [`SharedRuleCache`] — one per process (`&self`, lock-free seqlock buckets),
//!   256 KiB by default. A new thread starts warm; costs a few ns per frame more. In
//!   `MAP_SHARED` memory it also serves forked processes: each entry carries the key
//!   of the object its rule came from and applies only where the same object is
//!   mapped at the same address.
//! * [`capture_layered`] — a small private cache backed by a shared one.
//! * [`capture_remembered`] / [`PrivateUnwinder`] — the layered caches plus a
//!   thread's [`StackMemo`]: the choice for repeated captures on one thread.
//!
//! All-zero memory is a valid empty cache of either kind, so caches can live in
//! `mmap`'d memory, in a `static`, or in a zeroed heap block.
//!
//! Measured with `examples/capture_bench.rs` (release, 2 loaded vCPUs, medians; the
//! run's libgcc figures were about 2× those of an unloaded machine, so
//! absolute numbers are pessimistic):
//!
//! | ns per capture, 38 frames | warm | cold cache | first on a new thread |
//! |---|---:|---:|---:|
//! | [`capture`] (64 KiB private) | 340–390 | 12,500–15,000 | 13,600–14,900 |
//! | [`capture_shared`] (256 KiB) | 470–520 | 10,900–12,900 | 850–960 |
//! | [`capture_layered`] (4 KiB + shared) | 460–490 | 11,900–12,700 | 1,000–1,900 |
//! | [`capture_libgcc`] | 9,100–10,300 | 8,800–10,500 | 9,100–10,000 |
//!
//! # Unloading code
//!
//! Call [`invalidate_all_caches`] before (or right after) `dlclose` unmaps an object:
//! every cache, private or shared, stops using rules computed before the call. Call
//! [`forget_code_without_unwind_info`] before `dlopen`: an object may be mapped where
//! generated code without unwind information was.
//!
//! # Requirements
//!
//! x86_64 or aarch64 Linux with glibc ≥ 2.35 (`_dl_find_object`) and libgcc (libgcc_s, or
//! libgcc_eh linked statically: [`use_process_libgcc`] then answers with the process's
//! own libgcc_s where it has one).

#![cfg(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
mod aarch64_memo;
#[cfg(target_arch = "aarch64")]
mod aarch64_walk;
mod cache;
mod cfi;
mod ending;
mod libgcc;
#[cfg(target_arch = "x86_64")]
mod memo;
mod memo_counts;
mod memo_state;
mod registered;
mod rule;
#[cfg(target_arch = "x86_64")]
mod walk;

#[cfg(target_arch = "aarch64")]
pub use aarch64::{
    FunctionEntry, StackMemo, capture, capture_layered, capture_remembered_ending,
    capture_remembered_from_ending, capture_shared_ending,
};
#[cfg(target_arch = "aarch64")]
pub use aarch64_walk::capture_walked;
pub use cache::{
    RuleCache, SharedRuleCache, forget_code_without_unwind_info, invalidate_all_caches,
    set_own_code,
};
pub use cfi::ObjectKey;
pub use ending::{Captured, Ending};
pub use libgcc::use_process_libgcc;
#[cfg(target_arch = "x86_64")]
pub use memo::StackMemo;
pub use memo_counts::MemoCounts;
pub use registered::set_complete as set_registrations_complete;
pub use registered::{Registered, deregister as deregister_frames, register as register_frames};
#[cfg(target_arch = "x86_64")]
pub use walk::FunctionEntry;

#[cfg(target_arch = "x86_64")]
use cache::{LayeredStore, LocalStore, SharedStore};
#[cfg(target_arch = "x86_64")]
use walk::{Registers, Start, WalkEnd};

#[cfg(target_arch = "x86_64")]
/// Captures the current stack using a thread-private rule cache.
///
/// See the [crate documentation](crate) for the contract. Never allocates, locks or
/// makes system calls; safe inside `malloc`.
#[inline(never)]
pub fn capture<const BUCKETS: usize>(cache: &mut RuleCache<BUCKETS>, frames: &mut [u64]) -> usize {
    let regs = Registers::current();
    cache.start_capture(true);
    let mut store = LocalStore::new(cache);
    let end = walk::walk(Start::Here(regs), &mut store, frames);
    if end == WalkEnd::NeedsFallback {
        store.count_fallback();
    }
    finish(end, frames).len
}

/// Captures the current stack using a process-wide rule cache shared by all threads.
/// (See [`capture_shared_ending`] for why it ended.)
///
/// See the [crate documentation](crate) for the contract. Never allocates, locks or
/// makes system calls; safe inside `malloc`.
#[inline(always)]
pub fn capture_shared<const BUCKETS: usize>(
    cache: &SharedRuleCache<BUCKETS>,
    frames: &mut [u64],
) -> usize {
    capture_shared_ending(cache, frames).len
}

#[cfg(target_arch = "x86_64")]
/// [`capture_shared`], saying why the walk ended.
#[inline(never)]
pub fn capture_shared_ending<const BUCKETS: usize>(
    cache: &SharedRuleCache<BUCKETS>,
    frames: &mut [u64],
) -> Captured {
    let regs = Registers::current();
    let mut store = SharedStore::new(cache);
    finish(walk::walk(Start::Here(regs), &mut store, frames), frames)
}

#[cfg(target_arch = "x86_64")]
/// Captures the current stack using a thread-private cache backed by a shared one:
/// rules missing from `local` are looked up in `shared` before they are computed, and
/// computed rules go into both.
///
/// See the [crate documentation](crate) for the contract. Never allocates, locks or
/// makes system calls; safe inside `malloc`.
#[inline(never)]
pub fn capture_layered<const LOCAL: usize, const SHARED: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    frames: &mut [u64],
) -> usize {
    let regs = Registers::current();
    local.start_capture(true);
    let mut store = LayeredStore::new(LocalStore::new(local), SharedStore::new(shared));
    let end = walk::walk(Start::Here(regs), &mut store, frames);
    if end == WalkEnd::NeedsFallback {
        store.count_fallback();
    }
    finish(end, frames).len
}

/// Captures the current stack like [`capture_layered`], replaying the outer frames that
/// are unchanged since the previous capture through `memo` instead of stepping them
/// (see [`StackMemo`] for why a replayed frame is never stale).
///
/// `memo` and `local` belong to the calling thread. See the [crate documentation](crate)
/// for the contract. Never allocates, locks or makes system calls; safe inside `malloc`.
#[inline(always)]
pub fn capture_remembered<const LOCAL: usize, const SHARED: usize, const LEVELS: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    frames: &mut [u64],
) -> usize {
    capture_remembered_ending(local, shared, memo, frames).len
}

#[cfg(target_arch = "x86_64")]
/// [`capture_remembered`], saying why the walk ended.
#[inline(never)]
pub fn capture_remembered_ending<const LOCAL: usize, const SHARED: usize, const LEVELS: usize>(
    local: &mut RuleCache<LOCAL>,
    shared: &SharedRuleCache<SHARED>,
    memo: &mut StackMemo<LEVELS>,
    frames: &mut [u64],
) -> Captured {
    let regs = Registers::current();
    let generation = cache::current_generation();
    local.start_capture(true);
    let mut store = LayeredStore::new(
        LocalStore::at_generation(local, generation),
        SharedStore::at_generation(shared, generation),
    );
    let end = memo::walk_remembered(Start::Here(regs), &mut store, memo, generation, frames);
    if end == WalkEnd::NeedsFallback {
        store.count_fallback();
    }
    finish(end, frames)
}

/// Captures the stack of the caller of a function that is still running, from the
/// registers saved at that function's entry, like [`capture_remembered`] otherwise:
/// the frames of that function and of everything it called up to this capture are
/// never stepped (nor reported).
///
/// `frames[0]` is `entry`'s return address (inside the caller), then the caller's
/// return address and so on outwards: exactly libgcc's frames from the one whose
/// stack pointer is `entry.rsp + 8` (the entered function's CFA; on aarch64 the CFA
/// is `entry.rsp`, sp at the entry). The libgcc fallback
/// drops the frames before it. An `entry` that cannot be an entry on this stack (not
/// above this capture's stack pointer, or more than 64 MiB above it) gets the fallback
/// too; if libgcc finds no such frame either, the frames are those from this capture
/// outwards, as for [`capture`].
///
/// # Safety
/// `entry` must hold rsp and rbp as they were at the first instruction of a function
/// of the calling thread that has not returned yet and that called this capture,
/// directly or not (its return-address slot is then live stack memory).
#[inline(always)]
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
    // SAFETY: forwarded from our caller's contract.
    unsafe { capture_remembered_from_ending(local, shared, memo, entry, frames) }.len
}

#[cfg(target_arch = "x86_64")]
/// [`capture_remembered_from`], saying why the walk ended.
///
/// Inlined into its caller (a call, its argument moves and a prologue less per
/// capture: 13 instructions on the C++ churn, 43 on python, where the caller's
/// registers also serve the memo): its libgcc fallbacks start at a stack
/// pointer, not after a count of frames of ours, so they need no frame of
/// their own.
///
/// # Safety
/// As for [`capture_remembered_from`].
#[inline(always)]
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
    let here = Registers::current();
    let Some(caller) = entry.caller(here.rsp) else {
        local.start_capture(false);
        return libgcc_from(frames, entry.rsp.wrapping_add(8));
    };
    let generation = cache::current_generation();
    local.start_capture(true);
    let mut store = LayeredStore::new(
        LocalStore::at_generation(local, generation),
        SharedStore::at_generation(shared, generation),
    );
    match memo::walk_remembered(Start::Caller(caller), &mut store, memo, generation, frames) {
        WalkEnd::Complete(len, ending) => Captured { len, ending },
        WalkEnd::NeedsFallback => {
            store.count_fallback();
            libgcc_from(frames, caller.rsp)
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// libgcc's capture from the frame whose stack pointer is `rsp`
/// (`libgcc::backtrace_from`), for [`capture_remembered_from_ending`], which is
/// inlined: where no frame has that stack pointer, libgcc's frames start at the
/// caller of this function's caller, which is the capture's caller, as they
/// did when the capture was a function of its own.
#[cold]
#[inline(never)]
fn libgcc_from(frames: &mut [u64], rsp: u64) -> Captured {
    if libgcc::may_hold_its_lock() {
        return LIBGCC_BUSY;
    }
    // `black_box`: not a tail call (see `finish`).
    let len = core::hint::black_box(libgcc::backtrace_from(frames, rsp));
    libgcc_captured(frames, len)
}

/// One thread's private unwinding state for [`capture_remembered`]: a rule cache of
/// `LOCAL` buckets in front of a shared one, and the memo of the last walk. All-zero
/// memory is a valid empty one (build it
/// in zeroed heap memory: it is large).
#[repr(C)]
pub struct PrivateUnwinder<const LOCAL: usize, const LEVELS: usize> {
    rules: RuleCache<LOCAL>,
    memo: StackMemo<LEVELS>,
}

impl<const LOCAL: usize, const LEVELS: usize> PrivateUnwinder<LOCAL, LEVELS> {
    /// [`capture_remembered_ending`] with this state, backed by `shared`.
    #[inline(always)]
    pub fn capture<const SHARED: usize>(
        &mut self,
        shared: &SharedRuleCache<SHARED>,
        frames: &mut [u64],
    ) -> Captured {
        capture_remembered_ending(&mut self.rules, shared, &mut self.memo, frames)
    }

    /// [`capture_remembered_from_ending`] with this state, backed by `shared`.
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

    /// Forgets the last walk (the state moves to another thread).
    pub fn forget(&mut self) {
        self.memo.forget();
    }

    /// See [`RuleCache::set_computed_only`].
    pub fn set_computed_only(&mut self, on: bool) {
        self.rules.set_computed_only(on);
    }

    /// Where in its frames the last capture put those it replayed from the memo
    /// of earlier captures (see `StackMemo::replayed`).
    pub fn replayed(&self) -> core::ops::Range<usize> {
        self.memo.replayed()
    }

    /// False if the last capture's frames can be the profiler's own (in the code
    /// named by [`set_own_code`]) only where it never looked up their rules: the
    /// last frame, when the buffer filled, and the frames it replayed from its
    /// memo ([`PrivateUnwinder::replayed`]). Always true on aarch64.
    pub fn may_hold_own_frames(&self) -> bool {
        self.rules.may_hold_own_frames()
    }

    /// The memo's counters.
    pub fn memo_counts(&self) -> MemoCounts {
        self.memo.counts()
    }

    /// Captures this state redid with libgcc.
    pub fn fallbacks(&self) -> u64 {
        self.rules.fallbacks()
    }
}

/// Look up glibc's `_dl_find_object` (glibc ≥ 2.35) once, outside `malloc`'s fast
/// path. Returns false on an older glibc: every cached capture then stops at the
/// first frame and [`object_range`] finds nothing, so use [`capture_libgcc`].
pub fn init() -> bool {
    cfi::init()
}

/// The loaded object containing `address` (glibc's lock-free
/// `_dl_find_object`): its mapping and a key that tells it from any other
/// object mapped there at another time; `None` if no object maps it. Safe
/// inside `malloc` and signal handlers.
pub fn object_key(address: u64) -> Option<ObjectKey> {
    cfi::object_key(address)
}

/// `[start, end)` of the mapping of the loaded object containing `address`
/// (glibc's lock-free `_dl_find_object`), or `None` if no object maps it.
/// Safe inside `malloc` and signal handlers.
pub fn object_range(address: u64) -> Option<(u64, u64)> {
    cfi::object_range(address)
}

/// Captures the current stack with libgcc's `_Unwind_Backtrace` (no caching).
///
/// Same contract as [`capture`]; this is the reference the fast path is tested
/// against and the fallback it uses.
#[inline(never)]
pub fn capture_libgcc(frames: &mut [u64]) -> usize {
    // `libgcc::backtrace` sees its own frame and this one before our caller's.
    core::hint::black_box(libgcc::backtrace(frames, 2))
}

/// True if unwind information covers `address`: a loaded object's or a
/// registered section's (`registered`), which is all libgcc knows where
/// `registered::complete`; elsewhere libgcc's own lookup (lock-free on glibc
/// ≥ 2.35 unless frames were registered behind the profiler's back).
fn has_unwind_info(address: u64) -> bool {
    if registered::complete() {
        return cfi::rule_for_address(address) != rule::Rule::NoUnwindInfo;
    }
    libgcc::has_fde(address)
}

#[cfg(target_arch = "x86_64")]
/// Turns the fast walk's outcome into the final frame count, redoing the capture with
/// libgcc when the fast walk could not finish.
///
/// Always inlined into the `capture*` functions so that the libgcc call sees exactly
/// two frames of ours (its own and the `capture*` one) above the caller.
#[inline(always)]
fn finish(end: WalkEnd, frames: &mut [u64]) -> Captured {
    match end {
        WalkEnd::Complete(len, ending) => Captured {
            len: core::hint::black_box(len),
            ending,
        },
        // `black_box` keeps the call from becoming a tail call, which would remove the
        // `capture*` frame and change the number of frames to skip.
        WalkEnd::NeedsFallback if libgcc::may_hold_its_lock() => LIBGCC_BUSY,
        WalkEnd::NeedsFallback => {
            let len = core::hint::black_box(libgcc::backtrace(frames, 2));
            libgcc_captured(frames, len)
        }
    }
}

/// A capture that needed libgcc's walk where this thread may hold libgcc's
/// object mutex (`libgcc::may_hold_its_lock`: frames are registered and
/// libgcc is mallocing in its own FDE lookup): no frame, rather than a walk
/// that would wait for itself, counted as ending in code the walk could not
/// leave.
#[cfg(target_arch = "x86_64")]
const LIBGCC_BUSY: Captured = Captured {
    len: 0,
    ending: Ending::NoUnwindInfo,
};

/// Why libgcc's walk that wrote `frames[..len]` ended: it fills the buffer, or stops
/// at the outermost frame or at the first frame without unwind information (libgcc
/// says "end of stack" for both; an FDE lookup tells them apart).
/// It never steps by frame pointers, so it never ends for [`Ending::UnknownStack`].
/// Inside `malloc` like the walk.
pub fn libgcc_captured(frames: &[u64], len: usize) -> Captured {
    let ending = match len.checked_sub(1).map(|last| frames[last]) {
        _ if len == frames.len() => Ending::FrameLimit,
        Some(last) if !has_unwind_info(last.wrapping_sub(1)) => Ending::NoUnwindInfo,
        _ => Ending::Outermost,
    };
    Captured { len, ending }
}
