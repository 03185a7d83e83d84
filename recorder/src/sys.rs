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
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Bytes the profiler has mapped for itself (reported in every dump).
pub static MAPPED_BYTES: AtomicU64 = AtomicU64::new(0);

/// What a table's mapping holds: its share of [`MAPPED_BYTES`], reported
/// in each dump's cost (the rest is the profiler's other memory: the own
/// heap, the unwind rule cache, thread blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnUse {
    /// The stack table's records, index and per-thread records.
    StackTable = 0,
    /// The stacks' frames.
    Frames = 1,
    /// The live table.
    LiveTable = 2,
    /// Lifetime blocks.
    Lifetimes = 3,
}

/// Bytes mapped per [`OwnUse`] (counted when a table maps; tables are never
/// unmapped).
pub static MAPPED_FOR: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// [`map_zeroed`] for a table, counted in [`MAPPED_FOR`].
pub fn map_zeroed_for(bytes: usize, owner: OwnUse) -> *mut u8 {
    let memory = map_zeroed(bytes);
    if !memory.is_null() {
        MAPPED_FOR[owner as usize].fetch_add(bytes as u64, Ordering::Relaxed);
    }
    memory
}

/// A table's static part (a `.bss` array the library's load reserves),
/// counted as mapped for `owner` when the table is set up.
pub fn count_static_for(bytes: usize, owner: OwnUse) {
    MAPPED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    MAPPED_FOR[owner as usize].fetch_add(bytes as u64, Ordering::Relaxed);
}

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

/// Memory shared with forked children, as two views of one memory file:
/// `write`, shared (`MAP_SHARED`), and `read`, a private mapping of the
/// same pages that sees every write made through any process's `write`.
/// Unlike a shared mapping, whose page-table entries a forked child never
/// inherits (it faults on each page it reads), the read view's entries of
/// the pages this process has mapped are copied into children: the view is
/// given a private page past its end, so the kernel copies its entries at
/// fork. Nothing may write through `read`. `None` where memory
/// files cannot be made (old kernels, sandboxes).
pub struct SharedViews {
    /// The private view: read only through this.
    pub read: *mut u8,
    /// The shared view: written only through this.
    pub write: *mut u8,
}

const PAGE: usize = 4096;

/// See [`SharedViews`]; `bytes` is a multiple of the page size.
pub fn map_shared_views(bytes: usize) -> Option<SharedViews> {
    // SAFETY: a valid NUL-terminated name; the flags are defined.
    let fd =
        unsafe { crate::syscalls::memfd_create(c"heapsample-shared".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let views = map_both_views(fd, bytes);
    // SAFETY: our own descriptor; the mappings keep the file alive.
    unsafe { libc::close(fd) };
    views
}

fn map_both_views(fd: c_int, bytes: usize) -> Option<SharedViews> {
    // SAFETY: sizing our own memory file.
    if unsafe { crate::syscalls::ftruncate(fd, (bytes + PAGE) as libc::off_t) } != 0 {
        return None;
    }
    let write = map_read_write(bytes, libc::MAP_SHARED, fd)?;
    let Some(read) = map_read_write(bytes + PAGE, libc::MAP_PRIVATE, fd) else {
        // SAFETY: unmapping the view just made.
        unsafe { libc::munmap(write.cast(), bytes) };
        MAPPED_BYTES.fetch_sub(bytes as u64, Ordering::Relaxed);
        return None;
    };
    // SAFETY: the private page past the read view's end, ours to write: its
    // copy-on-write gives the view the anonymous memory that makes the
    // kernel copy the view's page-table entries at fork.
    unsafe { core::ptr::write_volatile(read.add(bytes), 1) };
    Some(SharedViews { read, write })
}

/// Map the pages of `[start, start + bytes)` of the profiler's own memory
/// now (one `madvise`; pages never written map the zero page, costing no
/// memory), so that processes forked from here on inherit the mappings and
/// read those pages without page faults. Nothing on kernels before 5.14.
pub fn map_pages_for_children(start: *mut u8, bytes: usize) {
    // SAFETY: advice on our own mapping; MADV_POPULATE_READ only maps pages
    // and fails harmlessly where unsupported.
    unsafe { crate::syscalls::madvise(start.cast(), bytes, libc::MADV_POPULATE_READ) };
}

/// Whether a table's pages were mapped for forked children
/// ([`map_pages_for_children`]), so a process does it before its first
/// fork only.
pub struct MappedForChildren(AtomicBool);

impl MappedForChildren {
    /// Not mapped yet.
    pub const fn new() -> Self {
        MappedForChildren(AtomicBool::new(false))
    }

    /// [`map_pages_for_children`] the first time only. Checked before it is
    /// set: a store at every fork would cost the parent a copy-on-write
    /// fault at every fork.
    pub fn map_once(&self, start: *mut u8, bytes: usize) {
        if start.is_null() || self.0.load(Ordering::Relaxed) {
            return;
        }
        self.0.store(true, Ordering::Relaxed);
        map_pages_for_children(start, bytes);
    }
}

impl Default for MappedForChildren {
    fn default() -> Self {
        Self::new()
    }
}

fn map_anonymous(bytes: usize, sharing: c_int) -> *mut u8 {
    map_read_write(
        bytes,
        sharing | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
    )
    .unwrap_or(core::ptr::null_mut())
}

/// `mmap` of `bytes` readable and writable memory (of `fd`, or anonymous
/// with `-1`), counted in [`MAPPED_BYTES`]; `None` on failure.
fn map_read_write(bytes: usize, flags: c_int, fd: c_int) -> Option<*mut u8> {
    // SAFETY: no address hint; `fd` is -1 for anonymous memory or the
    // caller's open file.
    let address =
        unsafe { crate::syscalls::mmap(bytes, libc::PROT_READ | libc::PROT_WRITE, flags, fd) };
    if address == libc::MAP_FAILED {
        return None;
    }
    MAPPED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    Some(address.cast())
}

/// The time of `clock` (`CLOCK_MONOTONIC`, `CLOCK_MONOTONIC_COARSE`, ...) in
/// nanoseconds. Through the vDSO: no system call.
#[inline]
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
static SINGLE_THREADED: AtomicPtr<u8> = AtomicPtr::new(&raw const NOT_KNOWN as *mut u8);

/// The flag [`single_threaded`] reads while glibc's is not known: never
/// single-threaded (never written).
static NOT_KNOWN: u8 = 0;

/// Looks up glibc's single-thread flag (outside malloc: dlsym may allocate).
pub fn find_single_threaded_flag() {
    // SAFETY: dlsym with a valid NUL-terminated name in the global scope.
    let flag = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) };
    if !flag.is_null() {
        SINGLE_THREADED.store(flag.cast(), Ordering::Relaxed);
    }
}

/// True if the C library says this process never had a second thread
/// (glibc clears the flag at the first `pthread_create` and, in the
/// versions that keep it, never sets it again). False when unknown.
pub fn single_threaded() -> bool {
    let flag = SINGLE_THREADED.load(Ordering::Relaxed);
    // SAFETY: glibc's exported `char` flag, which lives as long as libc, or
    // `NOT_KNOWN`.
    unsafe { core::ptr::read_volatile(flag) != 0 }
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
///
/// In a library loaded late (attached), `RTLD_NEXT` means nothing useful:
/// the attach registers the lookup to use instead ([`look_up_with`]), which
/// gives what the program's calls reached before.
pub fn next_definition(name: &CStr) -> *mut c_void {
    let lookup = LOOKUP.load(Ordering::Relaxed);
    if !lookup.is_null() {
        // SAFETY: only look_up_with stores here, from a `Lookup`.
        let lookup = unsafe { core::mem::transmute::<*mut (), Lookup>(lookup) };
        return lookup(name);
    }
    // SAFETY: dlsym with a valid NUL-terminated name; RTLD_NEXT searches the
    // objects loaded after the one containing this code.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// A replacement for `dlsym(RTLD_NEXT, name)`.
pub type Lookup = fn(&CStr) -> *mut c_void;

/// The registered [`Lookup`], or null.
static LOOKUP: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// From now on, [`next_definition`] asks `lookup` (set by an attach, before
/// anything is resolved).
pub fn look_up_with(lookup: Lookup) {
    LOOKUP.store(lookup as *mut (), Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: usize = 64 * PAGE;

    /// Runs `child` in a forked child and returns its exit status (the child
    /// only reads memory and calls `getrusage` and `_exit`).
    fn in_child(child: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child runs only async-signal-safe code, then `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: leaving the child without running the test harness's exit.
            unsafe { libc::_exit(child()) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "child status {status:#x}");
        libc::WEXITSTATUS(status)
    }

    fn minor_faults() -> i64 {
        // SAFETY: a zeroed rusage is a valid out-parameter.
        let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
        // SAFETY: getrusage of this process into `usage`.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        usage.ru_minflt
    }

    /// The page faults a forked child takes reading one byte of each page.
    fn child_read_faults(memory: *mut u8) -> i32 {
        in_child(|| {
            let before = minor_faults();
            let mut sum = 0u8;
            for page in 0..BYTES / PAGE {
                // SAFETY: within the mapping.
                sum =
                    sum.wrapping_add(unsafe { core::ptr::read_volatile(memory.add(page * PAGE)) });
            }
            core::hint::black_box(sum);
            (minor_faults() - before).clamp(0, 100) as i32
        })
    }

    #[test]
    fn the_read_view_sees_what_any_process_writes_through_the_write_view() {
        let views = map_shared_views(BYTES).expect("memfd_create");
        // SAFETY: within both views of the same memory.
        unsafe {
            core::ptr::write_volatile(views.write.add(100), 7);
            assert_eq!(core::ptr::read_volatile(views.read.add(100)), 7);
        }
        let status = in_child(|| {
            // SAFETY: within the write view.
            unsafe { core::ptr::write_volatile(views.write.add(3 * PAGE), 9) };
            0
        });
        assert_eq!(status, 0);
        // SAFETY: within the read view.
        let seen = unsafe { core::ptr::read_volatile(views.read.add(3 * PAGE)) };
        assert_eq!(seen, 9);
    }

    /// Why the views exist: once mapped for children, the read view costs a
    /// forked child no page fault, where a shared mapping costs it one per
    /// fault-around window at least.
    #[test]
    fn forked_children_read_the_mapped_read_view_without_page_faults() {
        let views = map_shared_views(BYTES).expect("memfd_create");
        map_pages_for_children(views.read, BYTES);
        assert_eq!(child_read_faults(views.read), 0);

        let shared = map_shared_zeroed(BYTES);
        for page in 0..BYTES / PAGE {
            // SAFETY: within the mapping.
            unsafe { core::ptr::write_volatile(shared.add(page * PAGE), 1) };
        }
        assert!(
            child_read_faults(shared) >= 1,
            "a shared mapping's children fault"
        );
    }
}
