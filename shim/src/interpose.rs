//! The malloc family under its C names. Each export is a one-line call into
//! `heapsample_recorder::contracts`, where the logic and its tests live.
//! malloc, free, calloc and realloc are the recorder's assembly fast paths
//! themselves (`heapsample_recorder::fast_path`), which jump through the
//! hook's route when they decline (the next allocator itself under
//! `prof:false`). On aarch64 malloc and free are assembly too; calloc and
//! realloc the same paths in Rust (`heapsample_recorder::routes::calloc_fast`
//! and `realloc_fast`).

use core::ffi::{c_int, c_void};

use heapsample_recorder::contracts;

/// # Safety
/// The C contract of `malloc`.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    heapsample_recorder::malloc_entry!()
}

/// # Safety
/// The C contract of `free`.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(pointer: *mut c_void) {
    heapsample_recorder::free_entry!()
}

/// # Safety
/// The C contract of `calloc`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    heapsample_recorder::calloc_entry!()
}

/// # Safety
/// The C contract of `calloc`.
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { heapsample_recorder::routes::calloc_fast(count, size) }
}

/// # Safety
/// The C contract of `realloc`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(pointer: *mut c_void, size: usize) -> *mut c_void {
    heapsample_recorder::realloc_entry!()
}

/// # Safety
/// The C contract of `realloc`.
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(pointer: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { heapsample_recorder::routes::realloc_fast(pointer, size) }
}

/// # Safety
/// The C contract of `reallocarray`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(
    pointer: *mut c_void,
    count: usize,
    size: usize,
) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { contracts::reallocarray(pointer, count, size) }
}

/// # Safety
/// The C contract of `posix_memalign`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(
    out: *mut *mut c_void,
    alignment: usize,
    size: usize,
) -> c_int {
    // SAFETY: same contract.
    unsafe { contracts::posix_memalign(out, alignment, size) }
}

/// # Safety
/// The C contract of `aligned_alloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(alignment: usize, size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { contracts::aligned_alloc(alignment, size) }
}

/// # Safety
/// The C contract of `memalign`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(alignment: usize, size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { contracts::memalign(alignment, size) }
}

/// # Safety
/// The C contract of `valloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { contracts::valloc(size) }
}

/// # Safety
/// The C contract of `pvalloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { contracts::pvalloc(size) }
}

/// # Safety
/// The C contract of `malloc_usable_size`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(pointer: *mut c_void) -> usize {
    // SAFETY: same contract.
    unsafe { contracts::malloc_usable_size(pointer) }
}
