//! The bodies of the interposed malloc family, called by the thin C exports
//! in the `heapsample` cdylib, and the routes the exports jump through.
//!
//! Owns the allocator contracts: each function forwards to the next
//! allocator and counts what happened. malloc's and free's common case is
//! the assembly in [`crate::fast_path`]; what it declines comes here through
//! [`MALLOC_ROUTE`] and [`FREE_ROUTE`]. calloc and realloc jump through their
//! routes to `*_profiled` paths that count after forwarding. No path here
//! takes a lock, makes a syscall or allocates unless a sample is taken;
//! everything beyond counting is in `#[cold]` functions.
//!
//! Rules kept here: calloc/reallocarray overflow gives NULL + ENOMEM; free
//! preserves errno; alignments are passed through to the allocator; malloc(0),
//! realloc(NULL, n) and realloc(p, 0) do what the allocator underneath does;
//! a live sample is forgotten before its memory is released; pointers from
//! the bootstrap arena never reach the real allocator.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use crate::live_table::LIVE;
use crate::next_alloc::{self, in_bootstrap_arena};
use crate::profiler::{
    self, EXACT, MODE, MODE_ARENA_IN_USE, MODE_PASS_THROUGH, MODE_PROFILING, MODE_UNINIT,
};
use crate::tls::{self, ThreadState};

/// Count an allocation of `size` requested bytes that returned `pointer`.
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn after_alloc(pointer: *mut c_void, size: usize) {
    if pointer.is_null() {
        return;
    }
    let state = tls::current();
    ThreadState::bump(&state.allocations, 1);
    let remaining = state
        .bytes_until_sample
        .load(Relaxed)
        .wrapping_sub(size as i64);
    state.bytes_until_sample.store(remaining, Relaxed);
    if remaining <= 0 {
        // SAFETY: forwarded from our caller's contract.
        unsafe { profiler::on_countdown_expired(pointer, size) };
    }
}

/// Forget `pointer` (non-null) if it is a live sample, before the real free.
/// Releases are counted only under `prof_exact` (see [`before_free_any`]):
/// the default free path touches no per-thread state.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn before_free(pointer: *mut c_void) {
    if LIVE.may_contain(pointer as usize) {
        // SAFETY: forwarded from our caller's contract.
        unsafe { profiler::on_sampled_free(pointer) };
    }
}

/// `prof_exact`: add (`sign` 1) or remove (-1) the usable size of a live
/// allocation from the thread's exact live heap.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[inline(always)]
unsafe fn count_usable(pointer: *mut c_void, sign: i64) {
    // SAFETY: per the contract.
    let usable = unsafe { next_alloc::usable_size(pointer) } as i64;
    ThreadState::bump_signed(&tls::current().live_usable_delta, sign * usable);
}

/// [`after_alloc`] for any mode: counts usable bytes under `prof_exact`.
///
/// # Safety
/// As for [`after_alloc`].
#[inline(always)]
unsafe fn after_alloc_any(pointer: *mut c_void, size: usize) {
    if EXACT.load(Relaxed) {
        // SAFETY: per the contract.
        return unsafe { after_alloc_exact(pointer, size) };
    }
    // SAFETY: per the contract.
    unsafe { after_alloc(pointer, size) }
}

/// [`after_alloc`] under `prof_exact`, where every allocation must reach
/// this slow path: the fast path's countdown stays 0 and the real one is
/// kept in `exact_countdown`, swapped in around the usual logic. (A nested
/// call from inside the profiler finds 0 there and draws afresh, which the
/// memoryless countdown allows.)
///
/// # Safety
/// As for [`after_alloc`].
#[cold]
unsafe fn after_alloc_exact(pointer: *mut c_void, size: usize) {
    if !pointer.is_null() {
        // SAFETY: a live allocation.
        unsafe { count_usable(pointer, 1) };
    }
    let state = tls::current();
    let countdown = state.exact_countdown.load(Relaxed);
    if !pointer.is_null() && countdown > size as i64 {
        // Not crossing: count here (bytes_allocated = bytes_base while the
        // fast path's countdown is 0).
        state
            .exact_countdown
            .store(countdown - size as i64, Relaxed);
        ThreadState::bump(&state.allocations, 1);
        ThreadState::bump(&state.bytes_base, size as u64);
        return;
    }
    state.set_countdown(state.exact_countdown.swap(0, Relaxed));
    // SAFETY: per the contract.
    unsafe { after_alloc(pointer, size) };
    let remaining = state.bytes_until_sample.load(Relaxed);
    state.set_countdown(0);
    state.exact_countdown.store(remaining, Relaxed);
}

/// [`before_free`] for any mode: counts the release and its usable bytes
/// under `prof_exact`.
///
/// # Safety
/// As for [`before_free`].
#[inline(always)]
unsafe fn before_free_any(pointer: *mut c_void) {
    if EXACT.load(Relaxed) {
        ThreadState::bump(&tls::current().frees, 1);
        // SAFETY: a live allocation.
        unsafe { count_usable(pointer, -1) };
    }
    // SAFETY: per the contract.
    unsafe { before_free(pointer) }
}

/// The state is not known yet: start the profiler. Returns false when the
/// request must be served from the bootstrap arena.
#[cold]
#[inline(never)]
fn start_or_bootstrap() -> bool {
    profiler::start()
}

// ---- routes: where each hook goes ----
//
// Each of malloc, free, calloc and realloc has a route, a function pointer
// chosen once the mode is known. malloc and free take it only when their
// assembly fast path (`fast_path`) declines: malloc's route is then the
// crossing allocation while profiling, the next malloc under `prof:false`;
// free's is the possibly sampled free, the next free under `prof:false`.
// The exported calloc and realloc always jump through theirs. Start-up and
// `prof_exact` use the `*_other` paths.

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;

/// Where `malloc` goes now.
pub static MALLOC_ROUTE: AtomicPtr<()> = AtomicPtr::new(malloc_other as MallocFn as *mut ());
/// Where `free` goes now.
pub static FREE_ROUTE: AtomicPtr<()> = AtomicPtr::new(free_other as FreeFn as *mut ());
/// Where `calloc` goes now.
pub static CALLOC_ROUTE: AtomicPtr<()> = AtomicPtr::new(calloc_other as CallocFn as *mut ());
/// Where `realloc` goes now.
pub static REALLOC_ROUTE: AtomicPtr<()> = AtomicPtr::new(realloc_other as ReallocFn as *mut ());

/// Point the hooks at the paths for `mode` (called once the mode is set).
/// Once the bootstrap arena has served a block, a free or realloc may
/// receive an arena pointer: those keep paths that recognise it.
pub fn set_routes(mode: u8) {
    let arena_in_use = mode & MODE_ARENA_IN_USE != 0;
    let next = &next_alloc::NEXT;
    let (free_other, realloc_other): (*mut (), *mut ()) = (
        free_other as FreeFn as *mut (),
        realloc_other as ReallocFn as *mut (),
    );
    let (malloc, free, calloc, realloc): (*mut (), *mut (), *mut (), *mut ()) =
        match mode & !MODE_ARENA_IN_USE {
            MODE_PASS_THROUGH if arena_in_use => (
                next.malloc.address().cast(),
                free_other,
                next.calloc.address().cast(),
                realloc_other,
            ),
            MODE_PASS_THROUGH => (
                next.malloc.address().cast(),
                next.free.address().cast(),
                next.calloc.address().cast(),
                next.realloc.address().cast(),
            ),
            MODE_PROFILING => (
                malloc_crossing as MallocFn as *mut (),
                free_maybe_sampled as FreeFn as *mut (),
                calloc_profiled as CallocFn as *mut (),
                if arena_in_use {
                    realloc_other
                } else {
                    realloc_profiled as ReallocFn as *mut ()
                },
            ),
            _ => return,
        };
    MALLOC_ROUTE.store(malloc, Relaxed);
    FREE_ROUTE.store(free, Relaxed);
    CALLOC_ROUTE.store(calloc, Relaxed);
    REALLOC_ROUTE.store(realloc, Relaxed);
}

/// `malloc` for callers inside the shim: what the exported `malloc`
/// (`fast_path::malloc_entry!`) does, in Rust.
///
/// # Safety
/// The C contract of `malloc`.
pub unsafe fn malloc(size: usize) -> *mut c_void {
    let state = tls::current();
    let countdown = state.bytes_until_sample.load(Relaxed) as u64;
    if countdown > size as u64 {
        state
            .bytes_until_sample
            .store((countdown - size as u64) as i64, Relaxed);
        ThreadState::bump(&state.allocations, 1);
        // SAFETY: a positive countdown means the profiler is running, so the
        // next allocator is resolved.
        return unsafe { next_alloc::malloc(size) };
    }
    // SAFETY: a route is always a function with malloc's signature.
    unsafe { core::mem::transmute::<*mut (), MallocFn>(MALLOC_ROUTE.load(Relaxed))(size) }
}

/// malloc's route while profiling, for the allocation that crosses the
/// countdown (or finds it at 0): allocate, then count (and sample) only if
/// it succeeded.
///
/// # Safety
/// The C contract of `malloc`; the next allocator is resolved.
#[cold]
#[inline(never)]
pub unsafe extern "C" fn malloc_crossing(size: usize) -> *mut c_void {
    // SAFETY: resolved before MODE was set.
    let pointer = unsafe { next_alloc::malloc(size) };
    // SAFETY: returned by the next allocator just now.
    unsafe { after_alloc(pointer, size) };
    pointer
}

/// Any mode but the two plain ones: not started, or the arena is in use.
#[cold]
#[inline(never)]
unsafe extern "C" fn malloc_other(size: usize) -> *mut c_void {
    if MODE.load(Relaxed) == MODE_UNINIT && !start_or_bootstrap() {
        return next_alloc::bootstrap_alloc(size, 16);
    }
    // SAFETY (both arms): resolved, mode set.
    if profiler::profiling() {
        unsafe {
            let pointer = next_alloc::malloc(size);
            after_alloc_any(pointer, size);
            pointer
        }
    } else {
        unsafe { next_alloc::malloc(size) }
    }
}

/// `free` for callers inside the shim: what the exported `free`
/// (`fast_path::free_entry!`) does, in Rust.
///
/// # Safety
/// The C contract of `free`.
pub unsafe fn free(pointer: *mut c_void) {
    if LIVE.free_takes_route(pointer as usize) {
        // SAFETY: a route is always a function with free's signature.
        unsafe { core::mem::transmute::<*mut (), FreeFn>(FREE_ROUTE.load(Relaxed))(pointer) }
    } else {
        // SAFETY: the next free, or `free_other` until it is resolved.
        unsafe { next_alloc::free(pointer) }
    }
}

/// free's route while profiling, taken when the page filter hits: forget
/// the sample, then release. Arena blocks are never released.
///
/// # Safety
/// The C contract of `free`; the next allocator is resolved.
#[cold]
#[inline(never)]
pub unsafe extern "C" fn free_maybe_sampled(pointer: *mut c_void) {
    if pointer.is_null() || in_bootstrap_arena(pointer) {
        return;
    }
    // SAFETY: a live allocation; the real free comes after.
    unsafe { profiler::on_sampled_free(pointer) };
    // SAFETY: a pointer of the next allocator, released once.
    unsafe { next_alloc::free(pointer) }
}

/// free's route at start-up, under `prof_exact`, and with the arena in use
/// under `prof:false`; also the next `free` until that is resolved.
///
/// # Safety
/// The C contract of `free`.
#[cold]
#[inline(never)]
pub unsafe extern "C" fn free_other(pointer: *mut c_void) {
    if in_bootstrap_arena(pointer) {
        return;
    }
    if MODE.load(Relaxed) == MODE_UNINIT && !start_or_bootstrap() {
        return;
    }
    // SAFETY (all arms): resolved, mode set; a live pointer, released once.
    if profiler::profiling() && !pointer.is_null() {
        unsafe { before_free_any(pointer) };
    }
    unsafe { next_alloc::free(pointer) }
}

/// `calloc`.
///
/// # Safety
/// The C contract of `calloc`.
#[inline(always)]
pub unsafe fn calloc(count: usize, size: usize) -> *mut c_void {
    // SAFETY: a route is always a function with calloc's signature.
    unsafe { core::mem::transmute::<*mut (), CallocFn>(CALLOC_ROUTE.load(Relaxed))(count, size) }
}

#[inline(never)]
unsafe extern "C" fn calloc_profiled(count: usize, size: usize) -> *mut c_void {
    // SAFETY: resolved before MODE was set.
    let pointer = unsafe { next_alloc::calloc(count, size) };
    // SAFETY: returned by the next allocator just now.
    unsafe { after_alloc(pointer, count.wrapping_mul(size)) };
    pointer
}

#[cold]
#[inline(never)]
unsafe extern "C" fn calloc_other(count: usize, size: usize) -> *mut c_void {
    if MODE.load(Relaxed) == MODE_UNINIT && !start_or_bootstrap() {
        return match count.checked_mul(size) {
            Some(bytes) => next_alloc::bootstrap_alloc(bytes, 16),
            None => enomem(),
        };
    }
    // SAFETY (both arms): resolved, mode set.
    if profiler::profiling() {
        unsafe {
            let pointer = next_alloc::calloc(count, size);
            after_alloc_any(pointer, count.wrapping_mul(size));
            pointer
        }
    } else {
        unsafe { next_alloc::calloc(count, size) }
    }
}

fn enomem() -> *mut c_void {
    next_alloc::set_errno(libc::ENOMEM);
    core::ptr::null_mut()
}

/// `realloc`.
///
/// # Safety
/// The C contract of `realloc`.
pub unsafe fn realloc(pointer: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: a route is always a function with realloc's signature.
    unsafe {
        core::mem::transmute::<*mut (), ReallocFn>(REALLOC_ROUTE.load(Relaxed))(pointer, size)
    }
}

#[cold]
#[inline(never)]
unsafe extern "C" fn realloc_other(pointer: *mut c_void, size: usize) -> *mut c_void {
    if !pointer.is_null() && in_bootstrap_arena(pointer) {
        // SAFETY: moving a bootstrap block into the real allocator.
        return unsafe { realloc_from_bootstrap(pointer, size) };
    }
    if MODE.load(Relaxed) == MODE_UNINIT && !start_or_bootstrap() {
        return if pointer.is_null() {
            next_alloc::bootstrap_alloc(size, 16)
        } else {
            core::ptr::null_mut()
        };
    }
    // SAFETY (both arms): resolved, mode set.
    if profiler::profiling() {
        unsafe { realloc_profiled(pointer, size) }
    } else {
        unsafe { next_alloc::realloc(pointer, size) }
    }
}

unsafe extern "C" fn realloc_profiled(pointer: *mut c_void, size: usize) -> *mut c_void {
    if pointer.is_null() {
        // SAFETY: realloc(NULL, n) as the allocator defines it.
        let result = unsafe { next_alloc::realloc(pointer, size) };
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(result, size) };
        return result;
    }
    let old_usable = if EXACT.load(Relaxed) {
        // SAFETY: a live allocation.
        unsafe { next_alloc::usable_size(pointer) }
    } else {
        0
    };
    // A sampled object is forgotten before the allocator may release it.
    let sampled = if LIVE.may_contain(pointer as usize) {
        // SAFETY: still allocated.
        take_live_sample(pointer)
    } else {
        None
    };
    // SAFETY: the C contract, forwarded.
    let result = unsafe { next_alloc::realloc(pointer, size) };
    if result.is_null() && size != 0 {
        // Failed: the old block is untouched and still sampled.
        if let Some((sample, _)) = sampled {
            let _ = LIVE.insert(pointer as usize, sample);
        }
        return result;
    }
    if EXACT.load(Relaxed) {
        let state = tls::current();
        ThreadState::bump(&state.frees, 1);
        ThreadState::bump_signed(&state.live_usable_delta, -(old_usable as i64));
    }
    if let Some((sample, usable)) = sampled {
        profiler::release(sample, usable);
    }
    // SAFETY: returned by the next allocator just now.
    unsafe { after_alloc_any(result, size) };
    result
}

#[cold]
fn take_live_sample(pointer: *mut c_void) -> Option<(crate::live_table::LiveSample, u64)> {
    // SAFETY: the pointer is still allocated.
    let usable = unsafe { next_alloc::usable_size(pointer) } as u64;
    LIVE.remove(pointer as usize).map(|sample| (sample, usable))
}

#[cold]
unsafe fn realloc_from_bootstrap(pointer: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: malloc's contract.
    let result = unsafe { malloc(size) };
    if !result.is_null() {
        let old_size = next_alloc::bootstrap_size(pointer);
        // SAFETY: both blocks hold at least min(old, new) bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(pointer.cast::<u8>(), result.cast(), old_size.min(size))
        };
    }
    result
}

/// `reallocarray`: realloc with an overflow check (not forwarded: glibc's
/// own would call back into our realloc and count twice, and jemalloc has
/// none).
///
/// # Safety
/// The C contract of `reallocarray`.
pub unsafe fn reallocarray(pointer: *mut c_void, count: usize, size: usize) -> *mut c_void {
    match count.checked_mul(size) {
        // SAFETY: realloc's contract.
        Some(bytes) => unsafe { realloc(pointer, bytes) },
        None => enomem(),
    }
}

/// Bring the profiler up for an aligned allocation; false means "serve from
/// the bootstrap arena".
#[inline(always)]
fn ready() -> bool {
    MODE.load(Relaxed) != profiler::MODE_UNINIT || start_or_bootstrap()
}

/// `posix_memalign`.
///
/// # Safety
/// The C contract of `posix_memalign`.
pub unsafe fn posix_memalign(out: *mut *mut c_void, alignment: usize, size: usize) -> c_int {
    if !ready() {
        let pointer = next_alloc::bootstrap_alloc(size, alignment);
        if pointer.is_null() {
            return libc::ENOMEM;
        }
        // SAFETY: `out` is valid per the contract.
        unsafe { *out = pointer };
        return 0;
    }
    // SAFETY: the C contract, forwarded.
    let result = unsafe { next_alloc::posix_memalign(out, alignment, size) };
    if result == 0 && profiler::profiling() {
        // SAFETY: written by a successful posix_memalign just now.
        unsafe { after_alloc_any(*out, size) };
    }
    result
}

/// `aligned_alloc`.
///
/// # Safety
/// The C contract of `aligned_alloc`.
pub unsafe fn aligned_alloc(alignment: usize, size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { allocate_aligned(next_alloc::aligned_alloc, alignment, size) }
}

/// `memalign`.
///
/// # Safety
/// The C contract of `memalign`.
pub unsafe fn memalign(alignment: usize, size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { allocate_aligned(next_alloc::memalign, alignment, size) }
}

/// An aligned allocation through `forward` (the next `aligned_alloc` or
/// `memalign`), counted when profiling.
///
/// # Safety
/// The C contract of `forward`.
unsafe fn allocate_aligned(
    forward: unsafe fn(usize, usize) -> *mut c_void,
    alignment: usize,
    size: usize,
) -> *mut c_void {
    if !ready() {
        return next_alloc::bootstrap_alloc(size, alignment);
    }
    // SAFETY: the C contract, forwarded.
    let pointer = unsafe { forward(alignment, size) };
    if profiler::profiling() {
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(pointer, size) };
    }
    pointer
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    }
}

/// `valloc`: page-aligned memalign.
///
/// # Safety
/// The C contract of `valloc`.
pub unsafe fn valloc(size: usize) -> *mut c_void {
    // SAFETY: memalign's contract.
    unsafe { memalign(page_size(), size) }
}

/// `pvalloc`: page-aligned, size rounded up to whole pages (at least one).
///
/// # Safety
/// The C contract of `pvalloc`.
pub unsafe fn pvalloc(size: usize) -> *mut c_void {
    let page = page_size();
    match size.checked_add(page - 1) {
        // SAFETY: memalign's contract.
        Some(padded) => unsafe { memalign(page, (padded & !(page - 1)).max(page)) },
        None => enomem(),
    }
}

/// `malloc_usable_size`.
///
/// # Safety
/// The C contract of `malloc_usable_size`.
pub unsafe fn malloc_usable_size(pointer: *mut c_void) -> usize {
    if pointer.is_null() {
        return 0;
    }
    if MODE.load(Relaxed) & profiler::MODE_ARENA_IN_USE != 0 && in_bootstrap_arena(pointer) {
        return next_alloc::bootstrap_size(pointer);
    }
    if !ready() {
        return 0;
    }
    // SAFETY: a live allocation of the next allocator.
    unsafe { next_alloc::usable_size(pointer) }
}

/// What the calling thread had counted before forwarding to an allocator's
/// own `operator new`/`delete`, to tell afterwards whether that operator
/// called back into the interposed malloc family (jemalloc's aligned `new`
/// calls `aligned_alloc` through its PLT) and was therefore counted already.
pub struct ExternalCall {
    allocations: u64,
    frees: u64,
    usable: i64,
}

/// Note the thread's counters before forwarding to an external operator.
pub fn external_call_begin() -> ExternalCall {
    let state = tls::current();
    ExternalCall {
        allocations: state.allocations.load(Relaxed),
        frees: state.frees.load(Relaxed),
        usable: 0,
    }
}

/// After an allocator's own `operator new` returned `pointer`: count it
/// unless a nested malloc-family call already did.
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
pub unsafe fn count_external_alloc(call: ExternalCall, pointer: *mut c_void, size: usize) {
    if profiler::profiling() && tls::current().allocations.load(Relaxed) == call.allocations {
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(pointer, size) };
    }
}

/// Before an allocator's own `operator delete` releases `pointer`: count the
/// release and forget a live sample (it must happen before the memory is
/// released). Pair with [`external_free_end`].
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
pub unsafe fn external_free_begin(pointer: *mut c_void) -> Option<ExternalCall> {
    if pointer.is_null() || !profiler::profiling() {
        return None;
    }
    let usable = if EXACT.load(Relaxed) {
        // SAFETY: still allocated: the real delete comes after.
        unsafe { next_alloc::usable_size(pointer) as i64 }
    } else {
        0
    };
    // SAFETY: a live allocation, released right after.
    unsafe { before_free_any(pointer) };
    let mut call = external_call_begin();
    call.usable = usable;
    Some(call)
}

/// After the operator returned: if it called the interposed `free` itself,
/// that call counted the release again; undo our count.
pub fn external_free_end(call: Option<ExternalCall>) {
    let Some(call) = call else { return };
    let state = tls::current();
    if state.frees.load(Relaxed) != call.frees {
        ThreadState::bump(&state.frees, u64::MAX); // -1
        ThreadState::bump_signed(&state.live_usable_delta, call.usable);
    }
}
