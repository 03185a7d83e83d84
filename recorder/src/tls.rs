//! Per-thread hot state in initial-exec TLS.
//!
//! Owns the block every malloc touches: the sampling countdown (a
//! [`Sampler`], which alone changes it) and the exact counters. The fast
//! path reads and writes only its first cache line; the second holds what
//! only `prof_exact`, the fork handlers and the profiler's locks use. It
//! lives in a `.tbss` symbol declared with `global_asm!` and is reached
//! with `fs:[0] + GOTTPOFF`, so reading it is two instructions and never
//! calls `__tls_get_addr` (which may allocate after a `dlopen`). A new thread's block is zero, and there is no
//! destructor. It also defines the thread's cold block ([`ThreadExt`]:
//! frame buffer, private unwinding state, recently sampled stacks), which
//! `threads` allocates and pools.
//!
//! Fields are atomics only so that the dump can read other threads' counters
//! without a data race; the owning thread updates them with plain relaxed
//! loads and stores (no read-modify-write instruction, no lock prefix).
//!
//! Runs inside malloc: no allocation, no locks, no calls.

use core::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::config::MAX_BT_MAX;
use crate::record_counters::Counters;
use crate::thread_countdown::Sampler;

/// The thread is inside the profiler's own machinery: allocations pass
/// through unsampled.
pub const FLAG_GUARD: u32 = 1;
/// The thread is resolving the next allocator: nested calls are served
/// from the bootstrap arena.
pub const FLAG_RESOLVING: u32 = 4;

/// The thread's [`heapsample_format::ThreadInfo`] was recorded (at its
/// first sample).
pub const FLAG_LISTED: u32 = 8;

/// The thread ran its last exit flush: later allocations fold at once.
pub const FLAG_FINAL_FLUSH: u32 = 16;

/// The thread is forking and took the profiler's locks for it.
pub const FLAG_FORK_LOCKED: u32 = 32;

/// The thread is the one that survived a fork into this process (see
/// [`EntryPlace`]).
pub const FLAG_FORKED: u32 = 64;

/// The thread's countdown is the one-unit placeholder a fork left: its next
/// crossing draws the real countdown (`Sampler::redraw_after_fork`).
pub const FLAG_REDRAW: u32 = 128;

/// Where the stack and live tables put an entry a thread creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryPlace {
    /// The table's main part.
    Main,
    /// The table's one-page nursery first, its main part when that is full:
    /// for the thread that survived a fork. A table's main part is hashed
    /// over many pages the process shares copy-on-write with its parent, so
    /// each new entry there would cost the child a page fault; in the
    /// nursery its new entries share one page.
    NurseryFirst,
}

/// The hot per-thread block: two cache lines, the first one hot.
#[repr(C, align(64))]
pub struct ThreadState {
    /// The sampling countdown (the fast path's only write besides
    /// `allocations`).
    pub sampler: Sampler,
    /// Allocation calls that returned memory.
    pub allocations: AtomicU64,
    /// Free calls with a non-null pointer (kept under `prof_exact` only).
    pub frees: AtomicU64,
    /// The thread's larger, cold state (frame buffer and so on), or null.
    pub ext: AtomicPtr<ThreadExt>,
    /// `FLAG_*` bits.
    pub flags: AtomicU32,
    /// The thread's serial number (0 until the thread is set up).
    pub serial: AtomicU32,
    // ---- second line: cold ----
    /// The thread's kernel id for the profiler's locks (0 until a lock
    /// needs it; see `spin_lock`).
    pub kernel_tid: AtomicU32,
    /// The birth (`CLOCK_MONOTONIC`, nanoseconds, read through `clock`) of
    /// the thread's last sample: the next one is born later (see `sample`).
    pub last_birth: AtomicU64,
    /// How the walks of the thread's samples ended, by
    /// `heapsample_unwind::Ending::index` (owned by `walk_ends`).
    pub walk_ends: [AtomicU64; WALK_ENDINGS],
}

/// The reasons a walk ends (`heapsample_unwind::Ending`).
pub const WALK_ENDINGS: usize = heapsample_unwind::Ending::ALL.len();

/// Cold per-thread state, reached through `ThreadState::ext`.
pub struct ThreadExt {
    /// Where a stack is captured before it is interned: room for the
    /// deepest stack kept plus the profiler's own frames, dropped after.
    pub frames: [u64; FRAME_BUFFER_LEN],
    /// `bytes_allocated` already handed to the interval trigger.
    pub bytes_fed: u64,
    /// The thread's private unwinding state (used by `backtrace`).
    pub unwinder: ThreadUnwinder,
    /// Stacks the thread sampled recently, by [`RecentStacks::find`].
    pub recent_stacks: RecentStacks,
}

/// The innermost frames a [`RecentKey`] hashes.
const RECENT_KEY_FRAMES: usize = 8;

/// Sets of [`RecentStacks`] (two stacks each).
const RECENT_SETS: usize = 128;

/// A thread's recently sampled stacks: a two-way set-associative table of
/// the stack-table records it counted them in, keyed by a hash of the
/// innermost [`RECENT_KEY_FRAMES`] frames and the depth, so that a stack
/// sampled again is found with one comparison of its frames instead of
/// looking up the objects they lie in and probing the stack table, and counted
/// without a lookup of its record. (Keyed by two frames,
/// stacks that share them but differ further out, as every caller of one
/// allocating helper does, kept evicting one another; hashing every frame of
/// a deep stack cost more than the lookups it saved.) All-zero is empty.
#[repr(C)]
pub struct RecentStacks {
    sets: [[LastStack; 2]; RECENT_SETS],
}

/// The key of a stack in [`RecentStacks`]: a hash of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecentKey(u64);

impl RecentKey {
    /// The key of `frames`: two frames per multiplication (the second
    /// turned half round, so that swapping a pair changes the key), the
    /// set's index taken from the high bits the last multiplication mixed.
    #[inline(always)]
    pub fn of(frames: &[u64]) -> RecentKey {
        const MIX: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut key = frames.len() as u64;
        let mut pairs = frames[..frames.len().min(RECENT_KEY_FRAMES)].chunks_exact(2);
        for pair in &mut pairs {
            key = (key.rotate_left(23) ^ pair[0] ^ pair[1].rotate_left(32)).wrapping_mul(MIX);
        }
        if let [last] = pairs.remainder() {
            key = (key.rotate_left(23) ^ last).wrapping_mul(MIX);
        }
        RecentKey(key | 1)
    }

    fn set(self) -> usize {
        (self.0 >> (64 - RECENT_SETS.trailing_zeros())) as usize
    }
}

impl RecentStacks {
    /// The stack remembered under key `key` in module generation
    /// `generation` (to be verified: different stacks may share a key).
    #[inline]
    pub fn find(&self, key: RecentKey, generation: u32) -> Option<&RecentStack> {
        self.sets[key.set()]
            .iter()
            .find(|way| way.key == key.0 && way.generation == generation)
            .map(|way| &way.stack)
    }

    /// Remember `stack` under key `key`, looked up in `generation`,
    /// evicting the set's older way.
    pub fn remember(&mut self, key: RecentKey, generation: u32, stack: RecentStack) {
        let set = &mut self.sets[key.set()];
        set[1] = set[0];
        set[0] = LastStack {
            key: key.0,
            generation,
            stack,
        };
    }

    fn clear(&mut self) {
        self.sets = [[LastStack::NONE; 2]; RECENT_SETS];
    }
}

/// A stack a thread sampled: the stack-table record it counted it in, and
/// that record's frames and counters, which stay where they are for the
/// process's life (the stack table's entries never move or go away).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecentStack {
    pub record: u32,
    frames: *const u64,
    depth: usize,
    counters: *const Counters,
}

// SAFETY: its pointers are to 'static stack-table memory, which any thread
// may read (atomics, or frames that never change once published).
unsafe impl Send for RecentStack {}

impl RecentStack {
    /// What is remembered of `record`, whose `frames` and `counters` are
    /// its stack-table entry's.
    pub fn new(record: u32, frames: &'static [u64], counters: &'static Counters) -> RecentStack {
        RecentStack {
            record,
            frames: frames.as_ptr(),
            depth: frames.len(),
            counters,
        }
    }

    /// The record's frames.
    #[inline(always)]
    pub fn frames(&self) -> &'static [u64] {
        // SAFETY: made by `new` from a 'static slice (a `NONE` way is never
        // found: its key is 0).
        unsafe { core::slice::from_raw_parts(self.frames, self.depth) }
    }

    /// The record's counters.
    #[inline(always)]
    pub fn counters(&self) -> &'static Counters {
        // SAFETY: made by `new` from a 'static reference.
        unsafe { &*self.counters }
    }
}

/// Buckets of a thread's private rule cache (4 ways each: 1,024 rules, 16 KiB).
pub const PRIVATE_RULE_BUCKETS: usize = 256;

/// A thread's private rule cache and the memo of its last stack walk.
pub type ThreadUnwinder =
    heapsample_unwind::PrivateUnwinder<PRIVATE_RULE_BUCKETS, FRAME_BUFFER_LEN>;

impl ThreadExt {
    /// A new, zeroed block on the heap (large: never built on the stack).
    pub fn new_boxed() -> Box<ThreadExt> {
        let layout = std::alloc::Layout::new::<ThreadExt>();
        // SAFETY: the layout has a non-zero size.
        let memory = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<ThreadExt>();
        if memory.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: all-zero bytes are a valid `ThreadExt` (integers, and caches
        // and stack ids for which zero means empty), allocated with its layout.
        unsafe { Box::from_raw(memory) }
    }

    /// Make a block taken from the pool ready for a new thread.
    pub fn reset(&mut self) {
        self.bytes_fed = 0;
        self.unwinder.forget();
        self.recent_stacks.clear();
    }
}

/// A stack a thread sampled ([`RecentStack`]), the hash of its frames and
/// the module generation its record was looked up in
/// (`modules::generation`): a sample with the same frames in the same
/// generation goes to the same record, without a lookup. A key of 0 is
/// "none" (keys are odd); all-zero is a valid `NONE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LastStack {
    key: u64,
    generation: u32,
    stack: RecentStack,
}

impl LastStack {
    /// Nothing remembered.
    const NONE: LastStack = LastStack {
        key: 0,
        generation: 0,
        stack: RecentStack {
            record: 0,
            frames: core::ptr::null(),
            depth: 0,
            counters: core::ptr::null(),
        },
    };
}

/// Frames the profiler's own code may add at the leaf of a capture.
pub const OWN_FRAMES_SLACK: usize = 16;
/// Capacity of a thread's capture buffer.
pub const FRAME_BUFFER_LEN: usize = MAX_BT_MAX as usize + OWN_FRAMES_SLACK;

/// Size of [`ThreadState`] in bytes.
pub const THREAD_STATE_BYTES: usize = core::mem::size_of::<ThreadState>();
const _: () = assert!(THREAD_STATE_BYTES == 128);
const _: () = assert!(core::mem::offset_of!(ThreadState, serial) < 64);

/// Offset of the sampling countdown in the thread block (for the assembly
/// fast path).
pub const COUNTDOWN_OFFSET: usize =
    core::mem::offset_of!(ThreadState, sampler) + crate::thread_countdown::COUNTDOWN_OFFSET;

impl ThreadState {
    /// Adds to a counter of this thread. Only the owning thread may call it.
    #[inline(always)]
    pub fn bump(counter: &AtomicU64, by: u64) {
        counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
    }

    /// Adds to a signed counter of this thread. Only the owning thread may call it.
    #[inline(always)]
    pub fn bump_signed(counter: &AtomicI64, by: i64) {
        counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
    }

    /// Bytes the thread allocated since it was set up (or last folded): the
    /// countdown units it used up less one for each counted call.
    pub fn bytes_allocated(&self) -> u64 {
        self.sampler
            .units_used()
            .wrapping_sub(self.allocations.load(Relaxed))
    }

    /// True while the thread is inside the profiler.
    #[inline(always)]
    pub fn guarded(&self) -> bool {
        self.flags.load(Relaxed) & FLAG_GUARD != 0
    }

    /// Where the tables put the entries this thread creates.
    pub fn entry_place(&self) -> EntryPlace {
        if self.flags.load(Relaxed) & FLAG_FORKED != 0 {
            EntryPlace::NurseryFirst
        } else {
            EntryPlace::Main
        }
    }

    /// Sets or clears flag bits. Only the owning thread may call it.
    pub fn set_flag(&self, flag: u32, on: bool) {
        let flags = self.flags.load(Relaxed);
        self.flags
            .store(if on { flags | flag } else { flags & !flag }, Relaxed);
    }
}

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".section .tbss.heapsample_thread_state,\"awT\",@nobits",
    ".p2align 6",
    ".globl heapsample_thread_state",
    ".hidden heapsample_thread_state",
    ".type heapsample_thread_state, @object",
    ".size heapsample_thread_state, {size}",
    "heapsample_thread_state:",
    ".zero {size}",
    ".text",
    size = const THREAD_STATE_BYTES,
);

/// The calling thread's hot state.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn current() -> &'static ThreadState {
    let address: *const ThreadState;
    // SAFETY: reads the thread pointer and the linker-computed offset of our
    // initial-exec TLS symbol; the sum is this thread's block, valid
    // (and zero-initialised by the loader) for the thread's whole life.
    unsafe {
        core::arch::asm!(
            "mov {addr}, qword ptr fs:[0]",
            "add {addr}, qword ptr [rip + heapsample_thread_state@GOTTPOFF]",
            addr = out(reg) address,
            options(nostack, pure, readonly),
        );
        &*address
    }
}

#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".section .tbss.heapsample_thread_state,\"awT\",%nobits",
    ".p2align 6",
    ".globl heapsample_thread_state",
    ".hidden heapsample_thread_state",
    ".type heapsample_thread_state, %object",
    ".size heapsample_thread_state, {size}",
    "heapsample_thread_state:",
    ".zero {size}",
    ".text",
    size = const THREAD_STATE_BYTES,
);

/// The calling thread's hot state.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub fn current() -> &'static ThreadState {
    let address: *const ThreadState;
    // SAFETY: reads the thread pointer (TPIDR_EL0) and the linker-computed
    // offset of our initial-exec TLS symbol from the GOT; the sum is this
    // thread's block, valid (and zero-initialised by the loader) for the
    // thread's whole life.
    unsafe {
        core::arch::asm!(
            "mrs {addr}, tpidr_el0",
            "adrp {offset}, :gottprel:heapsample_thread_state",
            "ldr {offset}, [{offset}, #:gottprel_lo12:heapsample_thread_state]",
            "add {addr}, {addr}, {offset}",
            addr = out(reg) address,
            offset = out(reg) _,
            options(nostack, pure, readonly, preserves_flags),
        );
        &*address
    }
}

/// A scope that marks the thread as inside the profiler.
pub struct Guard {
    was_guarded: bool,
}

impl Guard {
    /// Enter the profiler on this thread.
    pub fn enter() -> Guard {
        let state = current();
        let was_guarded = state.guarded();
        state.set_flag(FLAG_GUARD, true);
        Guard { was_guarded }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.was_guarded {
            current().set_flag(FLAG_GUARD, false);
        }
    }
}

/// [`Guard`] for a thread known not to be guarded, whose block the caller
/// holds already: no second lookup of the block, nothing to remember.
pub struct EnteredFromOutside<'a> {
    state: &'a ThreadState,
}

impl<'a> EnteredFromOutside<'a> {
    /// Enter the profiler on the thread of `state`, which is not guarded.
    #[inline(always)]
    pub fn enter(state: &'a ThreadState) -> EnteredFromOutside<'a> {
        debug_assert!(!state.guarded());
        state.set_flag(FLAG_GUARD, true);
        EnteredFromOutside { state }
    }
}

impl Drop for EnteredFromOutside<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.state.set_flag(FLAG_GUARD, false);
    }
}
