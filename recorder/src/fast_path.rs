//! The malloc and free fast paths, in assembly.
//!
//! Owns the code that runs on nearly every allocation and release of a
//! profiled program. The exported `malloc` and `free` of the cdylib *are*
//! this code (the shim expands [`malloc_entry!`](crate::malloc_entry) and
//! [`free_entry!`](crate::free_entry) into
//! naked functions), so the common case is one straight line from the
//! caller's PLT jump to a tail jump into the next allocator: no stack frame,
//! no saved register, no call, and no extra jump in between (each taken
//! jump in that chain measured about 0.6 ns, more than all the counting).
//! The profiler's statics are reached `rip`-relative; the thread block
//! through one `GOTTPOFF` load.
//!
//! - `malloc` (6 instructions): take the request's countdown units
//!   ([`crate::thread_countdown::units`]: its bytes plus one, with `stc; sbb` on the
//!   thread's countdown in memory, [`crate::thread_countdown::Sampler`]); if the
//!   countdown stays positive, count the call and jump to the next
//!   `malloc`. Otherwise jump through [`crate::routes::MALLOC_ROUTE`] with
//!   the units taken: the route gives them back first
//!   (`Sampler::give_back`), then counts the allocation its own way. The
//!   route is the crossing allocation while profiling, the next `malloc`
//!   under `prof:false` (whose countdown is never looked at), start-up and
//!   `prof_exact` paths otherwise. The test is unsigned, so a countdown of 0
//!   always takes the route: that is how a thread not set up yet, a thread
//!   past its exit flush and `prof_exact` (which keeps its real countdown
//!   elsewhere) leave the fast path, and a huge request can never wrap the
//!   countdown. One unit per call is what makes `malloc(0)` sampled at
//!   every period.
//! - `free` (6 instructions): look up the live-sample filter counter of the
//!   pointer's page. Zero jumps through [`crate::routes::FREE_PASS`] (the
//!   next `free`; under `prof_exact`, which counts every free, free's
//!   route); anything else jumps through [`crate::routes::FREE_ROUTE`]. The
//!   counter is nonzero while a sampled object lives in a page sharing it,
//!   and for the bootstrap arena's pages once the arena is used. Before the
//!   next allocator is resolved, `FREE_PASS` holds a stand-in that resolves
//!   it first (`next_alloc`). No per-thread state is touched.
//! - `calloc` (9 instructions): malloc's path for `count × size` bytes; a
//!   product that overflows takes the route before any unit is taken, and
//!   the next `calloc` reports it.
//! - `realloc` (13 instructions): a size of 0 (a free that returns no
//!   memory) takes the route before any unit is taken; then malloc's
//!   countdown test for the new size, then free's filter test on the old
//!   pointer: a crossing or a possibly sampled old block takes the route
//!   [`crate::routes::REALLOC_ROUTE`] with the units taken. `realloc(NULL,
//!   n)` is malloc.
//!
//! On aarch64 `malloc` and `free` are the same tests in aarch64 assembly
//! (15 and 9 instructions, free through `FREE_PASS` too: the thread
//! pointer `TPIDR_EL0` plus the initial-exec offset from the GOT, the
//! statics `adrp`-relative, x16 for the tail jump); calloc and realloc are
//! Rust there
//! (`routes::calloc_fast`, `routes::realloc_fast`).
//!
//! Runs inside malloc and free: no allocation, no locks, no calls, no
//! writes outside the calling thread's own cache line.

use core::mem::offset_of;

use crate::live_table::{
    FILTER_COUNTER_BYTES, FILTER_INDEX_MASK, FILTER_OFFSET, FILTER_PAGE_SHIFT, LiveTable,
};
use crate::next_alloc::NextAllocator;
use crate::tls::ThreadState;

/// Offset of the countdown in the thread block.
pub const COUNTDOWN: usize = crate::tls::COUNTDOWN_OFFSET;
/// Offset of the allocation counter in the thread block.
pub const ALLOCATIONS: usize = offset_of!(ThreadState, allocations);
/// Offset of the next `malloc` in [`crate::next_alloc::NEXT`].
pub const NEXT_MALLOC: usize = offset_of!(NextAllocator, malloc);
/// Offset of the next `calloc` in [`crate::next_alloc::NEXT`].
pub const NEXT_CALLOC: usize = offset_of!(NextAllocator, calloc);
/// Offset of the next `realloc` in [`crate::next_alloc::NEXT`].
pub const NEXT_REALLOC: usize = offset_of!(NextAllocator, realloc);

const _: () = assert!(FILTER_COUNTER_BYTES == 4);
const _: () = assert!(FILTER_INDEX_MASK <= i32::MAX as usize);
// The x86_64 filter test masks the index with 32-bit registers.
const _: () = assert!(FILTER_PAGE_SHIFT + FILTER_INDEX_BITS == 32);
const _: () = assert!(core::mem::size_of::<LiveTable>() > FILTER_OFFSET);

/// The countdown test of the allocating fast paths, as assembly text: take
/// the units of the request in register `$size` (its bytes plus one) from
/// the thread's countdown (the thread block's address in `$block`), and jump
/// to label `2` if that does not leave it positive, the units taken.
#[doc(hidden)]
#[macro_export]
macro_rules! countdown_take_asm {
    ($size:literal, $block:literal) => {
        concat!(
            "mov ",
            $block,
            ", qword ptr [rip + heapsample_thread_state@GOTTPOFF]\n",
            "stc\n",
            "sbb qword ptr fs:[",
            $block,
            " + {countdown}], ",
            $size,
            "\n",
            "jbe 2f",
        )
    };
}

/// Count the allocation in the thread's block (address in `$block`), as
/// assembly text.
#[doc(hidden)]
#[macro_export]
macro_rules! count_call_asm {
    ($block:literal) => {
        concat!("inc qword ptr fs:[", $block, " + {allocations}]")
    };
}

/// The live-sample filter test of `free` and `realloc`, as assembly text:
/// compare the filter counter of the page of the pointer in `rdi` with 0
/// (uses `rax` and `rcx`). The filter's index is the page number's low
/// bits: the pointer's low 32 bits shifted right by the page shift, so the
/// 32-bit `mov` and `shr` leave it masked (no `and`).
#[doc(hidden)]
#[macro_export]
macro_rules! filter_test_asm {
    () => {
        concat!(
            "mov eax, edi\n",
            "shr eax, {page_shift}\n",
            "lea rcx, [rip + {live}]\n",
            "cmp dword ptr [rcx + rax * {counter_bytes} + {filter}], 0",
        )
    };
}

/// The body of the exported `malloc`: expand inside a
/// `#[unsafe(naked)] extern "C" fn malloc(size: usize) -> *mut c_void`.
#[cfg(target_arch = "x86_64")]
#[macro_export]
macro_rules! malloc_entry {
    () => {
        core::arch::naked_asm!(
            $crate::countdown_take_asm!("rdi", "rax"),
            $crate::count_call_asm!("rax"),
            "jmp qword ptr [rip + {next} + {next_malloc}]",
            "2:",
            "jmp qword ptr [rip + {route}]",
            countdown = const $crate::fast_path::COUNTDOWN,
            allocations = const $crate::fast_path::ALLOCATIONS,
            next = sym $crate::next_alloc::NEXT,
            next_malloc = const $crate::fast_path::NEXT_MALLOC,
            route = sym $crate::routes::MALLOC_ROUTE,
        )
    };
}

/// The body of the exported `free`: expand inside a
/// `#[unsafe(naked)] extern "C" fn free(pointer: *mut c_void)`.
#[cfg(target_arch = "x86_64")]
#[macro_export]
macro_rules! free_entry {
    () => {
        core::arch::naked_asm!(
            $crate::filter_test_asm!(),
            "jne 2f",
            "jmp qword ptr [rip + {pass}]",
            "2:",
            "jmp qword ptr [rip + {route}]",
            page_shift = const $crate::live_table::FILTER_PAGE_SHIFT,
            live = sym $crate::live_table::LIVE,
            counter_bytes = const $crate::live_table::FILTER_COUNTER_BYTES,
            filter = const $crate::live_table::FILTER_OFFSET,
            pass = sym $crate::routes::FREE_PASS,
            route = sym $crate::routes::FREE_ROUTE,
        )
    };
}

/// The body of the exported `calloc`: expand inside a
/// `#[unsafe(naked)] extern "C" fn calloc(count: usize, size: usize) -> *mut c_void`.
/// `rdx` (no argument of calloc's) holds the product's high half.
#[macro_export]
macro_rules! calloc_entry {
    () => {
        core::arch::naked_asm!(
            "mov rax, rdi",
            "mul rsi",
            "jc 2f",
            $crate::countdown_take_asm!("rax", "rcx"),
            $crate::count_call_asm!("rcx"),
            "jmp qword ptr [rip + {next} + {next_calloc}]",
            "2:",
            "jmp qword ptr [rip + {route}]",
            countdown = const $crate::fast_path::COUNTDOWN,
            allocations = const $crate::fast_path::ALLOCATIONS,
            next = sym $crate::next_alloc::NEXT,
            next_calloc = const $crate::fast_path::NEXT_CALLOC,
            route = sym $crate::routes::CALLOC_ROUTE,
        )
    };
}

/// The body of the exported `realloc`: expand inside a
/// `#[unsafe(naked)] extern "C" fn realloc(pointer: *mut c_void, size: usize) -> *mut c_void`.
#[macro_export]
macro_rules! realloc_entry {
    () => {
        core::arch::naked_asm!(
            "test rsi, rsi",
            "jz 2f",
            $crate::countdown_take_asm!("rsi", "rdx"),
            $crate::filter_test_asm!(),
            "jne 2f",
            $crate::count_call_asm!("rdx"),
            "jmp qword ptr [rip + {next} + {next_realloc}]",
            "2:",
            "jmp qword ptr [rip + {route}]",
            page_shift = const $crate::live_table::FILTER_PAGE_SHIFT,
            live = sym $crate::live_table::LIVE,
            counter_bytes = const $crate::live_table::FILTER_COUNTER_BYTES,
            filter = const $crate::live_table::FILTER_OFFSET,
            countdown = const $crate::fast_path::COUNTDOWN,
            allocations = const $crate::fast_path::ALLOCATIONS,
            next = sym $crate::next_alloc::NEXT,
            next_realloc = const $crate::fast_path::NEXT_REALLOC,
            route = sym $crate::routes::REALLOC_ROUTE,
        )
    };
}

/// Width of the filter index (the mask is `2^width − 1`), for aarch64's
/// `ubfx`.
pub const FILTER_INDEX_BITS: u32 = FILTER_INDEX_MASK.trailing_ones();
const _: () = assert!(FILTER_INDEX_MASK == (1 << FILTER_INDEX_BITS) - 1);

/// aarch64's `malloc` (15 instructions on the common path): the same
/// countdown test as x86_64's, `countdown + !size` (= countdown − size − 1,
/// carry clear on a borrow) stored back, and the route taken when that
/// borrowed or left 0; the thread block through the thread pointer and
/// the initial-exec offset in the GOT; the statics reached directly
/// (x16: the intra-procedure-call scratch register).
#[cfg(target_arch = "aarch64")]
#[macro_export]
macro_rules! malloc_entry {
    () => {
        core::arch::naked_asm!(
            "mrs x9, tpidr_el0",
            "adrp x10, :gottprel:heapsample_thread_state",
            "ldr x10, [x10, #:gottprel_lo12:heapsample_thread_state]",
            "add x9, x9, x10",
            "ldr x10, [x9, #{countdown}]",
            "mvn x11, x0",
            "adds x10, x10, x11",
            "str x10, [x9, #{countdown}]",
            "b.ls 2f",
            "ldr x10, [x9, #{allocations}]",
            "add x10, x10, #1",
            "str x10, [x9, #{allocations}]",
            "adrp x16, {next} + {next_malloc}",
            "ldr x16, [x16, #:lo12:{next} + {next_malloc}]",
            "br x16",
            "2:",
            "adrp x16, {route}",
            "ldr x16, [x16, #:lo12:{route}]",
            "br x16",
            countdown = const $crate::fast_path::COUNTDOWN,
            allocations = const $crate::fast_path::ALLOCATIONS,
            next = sym $crate::next_alloc::NEXT,
            next_malloc = const $crate::fast_path::NEXT_MALLOC,
            route = sym $crate::routes::MALLOC_ROUTE,
        )
    };
}

/// aarch64's `free` (9 instructions): the filter counter of the pointer's
/// page, zero to the next `free`, else the route.
#[cfg(target_arch = "aarch64")]
#[macro_export]
macro_rules! free_entry {
    () => {
        core::arch::naked_asm!(
            "ubfx x9, x0, #{page_shift}, #{index_bits}",
            "adrp x10, {live} + {filter}",
            "add x10, x10, #:lo12:{live} + {filter}",
            "add x10, x10, x9, lsl #2",
            "ldr w10, [x10]",
            "cbnz w10, 2f",
            "adrp x16, {pass}",
            "ldr x16, [x16, #:lo12:{pass}]",
            "br x16",
            "2:",
            "adrp x16, {route}",
            "ldr x16, [x16, #:lo12:{route}]",
            "br x16",
            page_shift = const $crate::live_table::FILTER_PAGE_SHIFT,
            index_bits = const $crate::fast_path::FILTER_INDEX_BITS,
            live = sym $crate::live_table::LIVE,
            filter = const $crate::live_table::FILTER_OFFSET,
            pass = sym $crate::routes::FREE_PASS,
            route = sym $crate::routes::FREE_ROUTE,
        )
    };
}
