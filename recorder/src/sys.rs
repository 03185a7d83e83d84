//! The profiler's calls into the system: raw memory for its tables, errno,
//! clocks, and looking up the next definition of a symbol.
//!
//! Tables are mapped with `mmap` (never through the interposed allocator) and
//! never unmapped: threads may still touch them while the process exits.
//! Untouched pages cost no memory.
//!
//! Runs inside malloc: `mmap`, errno and vDSO clock reads only; [`next_definition`]
//! (dlsym) may allocate and is called under the thread's guard.

use core::ffi::{CStr, c_int, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Bytes the profiler has mapped for itself (reported in every dump).
pub static MAPPED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Map `bytes` of zeroed, private memory. Returns null on failure (for
/// example under `ulimit -v`); callers then degrade instead of failing.
pub fn map_zeroed(bytes: usize) -> *mut u8 {
    map_anonymous(bytes, libc::MAP_PRIVATE)
}

/// Map `bytes` of zeroed memory that forked children share with this
/// process (`MAP_SHARED`): what one process writes there, the others see.
/// Returns null on failure.
pub fn map_shared_zeroed(bytes: usize) -> *mut u8 {
    map_anonymous(bytes, libc::MAP_SHARED)
}

fn map_anonymous(bytes: usize, sharing: c_int) -> *mut u8 {
    // SAFETY: an anonymous mapping has no preconditions.
    let address = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            sharing | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return core::ptr::null_mut();
    }
    MAPPED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    address.cast()
}

/// The time of `clock` (`CLOCK_MONOTONIC`, `CLOCK_MONOTONIC_COARSE`, ...) in
/// nanoseconds. Through the vDSO: no system call.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the time into `now`; the clocks callers pass always exist.
    unsafe { libc::clock_gettime(clock, &mut now) };
    (now.tv_sec as u64).saturating_mul(1_000_000_000) + now.tv_nsec as u64
}

/// Stores `value` into the atomic `cell` unless it already holds it. For
/// state a forked child resets: in the child every page the parent wrote
/// is shared copy-on-write, and a store that changes nothing would still
/// cost the child a page fault and a page copy.
#[macro_export]
macro_rules! store_if_changed {
    ($cell:expr, $value:expr) => {{
        let (cell, value) = (&$cell, $value);
        if cell.load(core::sync::atomic::Ordering::Relaxed) != value {
            cell.store(value, core::sync::atomic::Ordering::Relaxed);
        }
    }};
}

/// glibc's `__libc_single_threaded` (glibc 2.32 and later), looked up once
/// at load; null where the C library has none.
static SINGLE_THREADED: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());

/// Looks up glibc's single-thread flag (outside malloc: dlsym may allocate).
pub fn find_single_threaded_flag() {
    // SAFETY: dlsym with a valid NUL-terminated name in the global scope.
    let flag = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) };
    SINGLE_THREADED.store(flag.cast(), Ordering::Relaxed);
}

/// True if the C library says this process never had a second thread
/// (glibc clears the flag at the first `pthread_create` and, in the
/// versions that keep it, never sets it again). False when unknown.
pub fn single_threaded() -> bool {
    let flag = SINGLE_THREADED.load(Ordering::Relaxed);
    // SAFETY: a non-null pointer is glibc's exported `char` flag, which
    // lives as long as libc.
    !flag.is_null() && unsafe { core::ptr::read_volatile(flag) } != 0
}

/// Fibonacci hashing of a word into `bits` bits.
#[inline(always)]
pub fn hash_word(word: u64, bits: u32) -> usize {
    (word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// The calling thread's errno.
pub fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Set the calling thread's errno.
pub fn set_errno(value: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

/// Keeps the calling thread's errno: saved when made, restored when
/// dropped. Every path of the profiler that may run between a program's
/// call and its look at errno holds one. Async-signal-safe.
pub struct ErrnoGuard(c_int);

impl ErrnoGuard {
    /// Save errno.
    #[inline]
    pub fn save() -> ErrnoGuard {
        ErrnoGuard(errno())
    }
}

impl Drop for ErrnoGuard {
    #[inline]
    fn drop(&mut self) {
        set_errno(self.0);
    }
}

/// The next definition of `name` after the object containing this code, in
/// symbol lookup order (`dlsym(RTLD_NEXT, name)`), or null. May allocate
/// (glibc's dlsym reports errors in a malloc'ed buffer): call it under the
/// thread's guard, or where the bootstrap arena can serve.
pub fn next_definition(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a valid NUL-terminated name; RTLD_NEXT searches the
    // objects loaded after the one containing this code.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// A function of a later object, looked up with [`next_definition`] on
/// first use and cached (a racing first use looks it up twice, harmlessly).
pub struct LazyNext {
    name: &'static CStr,
    address: AtomicPtr<c_void>,
}

impl LazyNext {
    /// Not looked up yet.
    pub const fn new(name: &'static CStr) -> LazyNext {
        LazyNext {
            name,
            address: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// The next definition, or null when no later object defines it.
    pub fn get(&self) -> *mut c_void {
        let mut address = self.address.load(Ordering::Relaxed);
        if address.is_null() {
            address = next_definition(self.name);
            self.address.store(address, Ordering::Relaxed);
        }
        address
    }
}
