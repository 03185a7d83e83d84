//! The entry points the `heapsample` command calls in a running process
//! (through ptrace, on a thread stopped where it holds no lock of the
//! allocator, the loader or the profiler): attach, detach, status, dump.
//! Each writes one line (or, for the status, a few) into the caller's
//! buffer and returns 0 on success. The logic is
//! `heapsample_recorder::takeover`.

use core::ffi::{CStr, c_char, c_int};

use heapsample_recorder::{api, takeover};

/// The exports whose relocation slots an attach rewrites: the malloc
/// family, C++ `operator new`/`delete`, `dlopen` and `dlclose`.
pub const REDIRECTED: &[&CStr] = &[
    c"malloc",
    c"free",
    c"calloc",
    c"realloc",
    c"reallocarray",
    c"posix_memalign",
    c"aligned_alloc",
    c"memalign",
    c"valloc",
    c"pvalloc",
    c"malloc_usable_size",
    c"_Znwm",
    c"_Znam",
    c"_ZnwmRKSt9nothrow_t",
    c"_ZnamRKSt9nothrow_t",
    c"_ZnwmSt11align_val_t",
    c"_ZnamSt11align_val_t",
    c"_ZnwmSt11align_val_tRKSt9nothrow_t",
    c"_ZnamSt11align_val_tRKSt9nothrow_t",
    c"_ZdlPv",
    c"_ZdaPv",
    c"_ZdlPvm",
    c"_ZdaPvm",
    c"_ZdlPvSt11align_val_t",
    c"_ZdaPvSt11align_val_t",
    c"_ZdlPvmSt11align_val_t",
    c"_ZdaPvmSt11align_val_t",
    c"_ZdlPvRKSt9nothrow_t",
    c"_ZdaPvRKSt9nothrow_t",
    c"_ZdlPvSt11align_val_tRKSt9nothrow_t",
    c"_ZdaPvSt11align_val_tRKSt9nothrow_t",
    c"dlopen",
    c"dlclose",
];

/// An address of this library's code that is no export (exports may be
/// bound elsewhere when the library is loaded late).
pub fn own_code() -> usize {
    own_code as fn() -> usize as usize
}

/// Copies `text` into `out` (at most `capacity - 1` bytes, NUL-terminated).
///
/// # Safety
/// `out` is null or valid for `capacity` bytes.
unsafe fn put(text: &str, out: *mut c_char, capacity: usize) {
    if out.is_null() || capacity == 0 {
        return;
    }
    let length = text.len().min(capacity - 1);
    // SAFETY: within the caller's buffer per the contract.
    unsafe {
        core::ptr::copy_nonoverlapping(text.as_ptr(), out.cast(), length);
        *out.add(length) = 0;
    }
}

/// Attach: start sampling now with `options` (PROF_CONF items) and redirect
/// every loaded object's malloc family to the profiler. Writes what was done,
/// or why not, into `message`. Returns 0 on success.
///
/// # Safety
/// `options` is a NUL-terminated string; `message` is null or valid for
/// `capacity` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn heapsample_attach(
    options: *const c_char,
    message: *mut c_char,
    capacity: usize,
) -> c_int {
    // SAFETY: NUL-terminated per the contract.
    let options = unsafe { CStr::from_ptr(options) }.to_string_lossy();
    let (text, status) = match takeover::attach(&options, REDIRECTED, own_code()) {
        Ok(done) => (
            format!("{} slots redirected; options {}", done.slots, done.options),
            0,
        ),
        Err(why) => (why, 1),
    };
    // SAFETY: per the contract.
    unsafe { put(&text, message, capacity) };
    status
}

/// Detach: sampling off, every redirected slot given back; the library
/// stays loaded and inert. Returns 0 on success.
///
/// # Safety
/// `message` is null or valid for `capacity` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn heapsample_detach(message: *mut c_char, capacity: usize) -> c_int {
    let (text, status) = match takeover::detach() {
        Ok(restored) => (format!("{restored} slots restored"), 0),
        Err(why) => (why, 1),
    };
    // SAFETY: per the contract.
    unsafe { put(&text, message, capacity) };
    status
}

/// The profiler's state as `key: value` lines. Returns 0.
///
/// # Safety
/// `out` is null or valid for `capacity` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn heapsample_status(out: *mut c_char, capacity: usize) -> c_int {
    // SAFETY: per the contract.
    unsafe { put(&takeover::status(), out, capacity) };
    0
}

/// Write a dump now under the automatic `m` name and put its path into
/// `out`. Returns 0, or an errno value (with the reason in `out`).
///
/// # Safety
/// `out` is null or valid for `capacity` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn heapsample_dump_named(out: *mut c_char, capacity: usize) -> c_int {
    let (text, status) = match api::dump_named() {
        Ok(path) => (path, 0),
        Err(errno) => (std::io::Error::from_raw_os_error(errno).to_string(), errno),
    };
    // SAFETY: per the contract.
    unsafe { put(&text, out, capacity) };
    status
}
