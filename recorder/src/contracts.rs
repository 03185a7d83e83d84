//! The C contracts of the malloc family beyond the routed four:
//! reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
//! malloc_usable_size, and calloc/realloc for callers inside the shim.
//!
//! Owns the rules: reallocarray and pvalloc overflow give NULL + ENOMEM;
//! alignments are passed through to the allocator (which judges them);
//! before start-up completes, requests are served from the bootstrap
//! arena; allocations are counted only once they succeeded.
//!
//! Runs inside malloc: no lock, no syscall (but `getauxval` for the page
//! size), no allocation beyond what the routes do. Each entry opens a hook
//! scope (`spin_lock::enter_hook`), as the routes do.

use core::ffi::{c_int, c_void};
use core::sync::atomic::Ordering::Relaxed;

use crate::backtrace::HookEntry;
use crate::call_accounting::after_alloc_any;
use crate::next_alloc::{self, in_bootstrap_arena};
use crate::routes::{CALLOC_ROUTE, CallocFn, REALLOC_ROUTE, ReallocFn, enomem, start_or_bootstrap};
use crate::{spin_lock, state};

/// `calloc`.
///
/// # Safety
/// The C contract of `calloc`.
#[inline(always)]
pub unsafe fn calloc(count: usize, size: usize) -> *mut c_void {
    // As the fast path: the units taken unless the product overflows (the
    // route gives them back).
    if let Some(bytes) = count.checked_mul(size) {
        let _ = crate::tls::current().sampler.take(bytes);
    }
    // SAFETY: a route is always a function with calloc's signature.
    unsafe { core::mem::transmute::<*mut (), CallocFn>(CALLOC_ROUTE.load(Relaxed))(count, size) }
}

/// `realloc`.
///
/// # Safety
/// The C contract of `realloc`.
pub unsafe fn realloc(pointer: *mut c_void, size: usize) -> *mut c_void {
    // As the fast path: the units taken unless the size is 0 (the route
    // gives them back).
    if size != 0 {
        let _ = crate::tls::current().sampler.take(size);
    }
    // SAFETY: a route is always a function with realloc's signature.
    unsafe {
        core::mem::transmute::<*mut (), ReallocFn>(REALLOC_ROUTE.load(Relaxed))(pointer, size)
    }
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
    state::started() || start_or_bootstrap()
}

/// `posix_memalign`.
///
/// # Safety
/// The C contract of `posix_memalign`.
pub unsafe fn posix_memalign(out: *mut *mut c_void, alignment: usize, size: usize) -> c_int {
    let _hook = spin_lock::enter_hook();
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
    if result == 0 && state::profiling() {
        // SAFETY: written by a successful posix_memalign just now.
        unsafe { after_alloc_any(*out, size, HookEntry::UNKNOWN) };
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
    let _hook = spin_lock::enter_hook();
    if !ready() {
        return next_alloc::bootstrap_alloc(size, alignment);
    }
    // SAFETY: the C contract, forwarded.
    let pointer = unsafe { forward(alignment, size) };
    if state::profiling() {
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(pointer, size, HookEntry::UNKNOWN) };
    }
    pointer
}

fn page_size() -> usize {
    // SAFETY: getauxval has no preconditions (the auxiliary vector's page
    // size, which is what sysconf reports, without importing sysconf).
    match unsafe { libc::getauxval(libc::AT_PAGESZ) } {
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
    let _hook = spin_lock::enter_hook();
    if pointer.is_null() {
        return 0;
    }
    if state::arena_in_use() && in_bootstrap_arena(pointer) {
        // SAFETY: a live allocation (the C contract) in the arena is one of
        // its blocks.
        return unsafe { next_alloc::bootstrap_size(pointer) };
    }
    if !ready() {
        return 0;
    }
    // SAFETY: a live allocation of the next allocator.
    unsafe { next_alloc::usable_size(pointer) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn page_size_is_what_sysconf_reports() {
        // SAFETY: sysconf has no preconditions.
        let reported = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert_eq!(super::page_size(), reported as usize);
    }
}
