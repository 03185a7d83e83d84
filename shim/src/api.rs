//! The profiler's C API; declared in `shim/include/heapsample.h`.

use core::ffi::{CStr, c_char, c_int};

use heapsample_recorder::api;

/// Write a dump now: to `path`, or to the automatic name
/// `<prof_prefix>.<pid>.<seq>.m<mseq>.prof` when `path` is NULL.
/// Returns 0, or an errno value (e.g. EACCES, ENOENT, ENOSPC; ENOTSUP when
/// profiling is off; EINVAL for a NULL path with an empty `prof_prefix`;
/// ECANCELED once the process is exiting).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn heapsample_dump(path: *const c_char) -> c_int {
    if path.is_null() {
        return api::dump(None);
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    match unsafe { CStr::from_ptr(path) }.to_str() {
        Ok(path) => api::dump(Some(path)),
        Err(_) => libc::EINVAL,
    }
}

/// Turn sampling on (`on != 0`) or off. Returns the previous setting (1 or
/// 0), or -1 when the shim runs with `prof:false`.
#[unsafe(no_mangle)]
pub extern "C" fn heapsample_set_active(on: c_int) -> c_int {
    api::set_active(on != 0)
}

/// Forget all samples taken so far; later dumps show only what is sampled
/// from now on. Exact process counters are kept.
#[unsafe(no_mangle)]
pub extern "C" fn heapsample_reset() {
    api::reset();
}
