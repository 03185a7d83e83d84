//! The malloc and free fast paths while profiling, in assembly.
//!
//! Owns the two functions that run on nearly every allocation and release
//! of a profiled program. Written as naked functions so that each is a
//! straight line ending in a tail jump to the next allocator: no stack
//! frame, no saved register, no GOT load for the profiler's own data (the
//! statics are reached `rip`-relative, the thread block through one
//! `GOTTPOFF` load). Everything that is not the common case jumps to a
//! `#[cold]` Rust function in [`crate::hooks`] with the arguments untouched.
//!
//! - [`malloc_profiled`] (7 instructions): if the request is smaller than
//!   the thread's `bytes_until_sample`, subtract it, count the call and jump
//!   to the next `malloc`; otherwise (the crossing allocation, a huge request,
//!   or a thread not set up yet whose countdown is 0) jump to
//!   [`crate::hooks::malloc_crossing`].
//! - [`free_profiled`] (7 instructions): look up the live-sample filter
//!   counter of the pointer's page; zero (no sampled object lives in any
//!   page sharing it) jumps to the next `free`, otherwise to
//!   [`crate::hooks::free_maybe_sampled`]. No per-thread state is touched.
//!
//! Runs inside malloc and free: no allocation, no locks, no calls, no
//! writes outside the calling thread's own cache line.

use core::ffi::c_void;
use core::mem::offset_of;

use crate::hooks;
use crate::live_table::{self, LiveTable};
use crate::next_alloc::{NEXT, NextAllocator};
use crate::tls::ThreadState;

/// `malloc` while profiling (not `prof_exact`).
///
/// The countdown compare is unsigned: a countdown of 0 (new thread, exiting
/// thread) and any request of at least the remaining bytes take the slow
/// path, so a huge request can never wrap the countdown. The fast path
/// counts before forwarding, so a small request that fails for lack of
/// memory is still counted as an allocation.
///
/// # Safety
/// The C contract of `malloc`; the next allocator is resolved.
#[unsafe(naked)]
pub unsafe extern "C" fn malloc_profiled(size: usize) -> *mut c_void {
    core::arch::naked_asm!(
        "mov rax, qword ptr [rip + heapsample_thread_state@GOTTPOFF]",
        "mov rcx, qword ptr fs:[rax + {countdown}]",
        "sub rcx, rdi",
        "jbe {crossing}",
        "mov qword ptr fs:[rax + {countdown}], rcx",
        "inc qword ptr fs:[rax + {allocations}]",
        "jmp qword ptr [rip + {next} + {next_malloc}]",
        countdown = const offset_of!(ThreadState, bytes_until_sample),
        allocations = const offset_of!(ThreadState, allocations),
        crossing = sym hooks::malloc_crossing,
        next = sym NEXT,
        next_malloc = const offset_of!(NextAllocator, malloc),
    )
}

/// `free` while profiling (not `prof_exact`). A null pointer lands in a
/// filter bucket like any other and is sorted out on the slow path.
///
/// # Safety
/// The C contract of `free`; the next allocator is resolved.
#[unsafe(naked)]
pub unsafe extern "C" fn free_profiled(pointer: *mut c_void) {
    core::arch::naked_asm!(
        "mov rax, rdi",
        "shr rax, {page_shift}",
        "and eax, {index_mask}",
        "lea rcx, [rip + {live}]",
        "cmp dword ptr [rcx + rax * {counter_bytes} + {filter}], 0",
        "jne {maybe_sampled}",
        "jmp qword ptr [rip + {next} + {next_free}]",
        page_shift = const live_table::FILTER_PAGE_SHIFT,
        index_mask = const live_table::FILTER_INDEX_MASK,
        live = sym live_table::LIVE,
        counter_bytes = const live_table::FILTER_COUNTER_BYTES,
        filter = const live_table::FILTER_OFFSET,
        maybe_sampled = sym hooks::free_maybe_sampled,
        next = sym NEXT,
        next_free = const offset_of!(NextAllocator, free),
    )
}

const _: () = assert!(live_table::FILTER_COUNTER_BYTES == 4);
const _: () = assert!(live_table::FILTER_INDEX_MASK <= u32::MAX as usize);
const _: () = assert!(core::mem::size_of::<LiveTable>() > live_table::FILTER_OFFSET);
