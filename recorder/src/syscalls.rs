//! System calls the profiler makes directly, through `syscall(2)`, instead
//! of through their libc wrappers.
//!
//! Owns nothing but the calls. Each libc function the library imports is
//! looked up by the dynamic loader in every process that loads it, about
//! 600 instructions per symbol whether the function is ever called or not
//! (the loader binds every symbol at load: the shim is linked with `-z now`
//! so that forked children never bind one lazily). These are the calls of
//! the profiler's rare paths (writing a dump, the rule cache, the module
//! map, the process identity) that the Rust standard library does not
//! import anyway. Each has the wrapper's contract (and is as unsafe): the
//! result of the system call, or -1 with errno set.
//!
//! Runs inside malloc (the table mappings at the first sample): no
//! allocation, no lock.

use core::ffi::{c_char, c_int, c_long, c_uint, c_void};

/// The raw call: its result, or -1 with errno set.
///
/// # Safety
/// The caller's arguments are valid for system call `number`.
unsafe fn call(number: c_long, args: [usize; 6]) -> c_long {
    // SAFETY: per the contract; unused arguments are ignored by the kernel.
    unsafe { libc::syscall(number, args[0], args[1], args[2], args[3], args[4], args[5]) }
}

fn as_int(result: c_long) -> c_int {
    result as c_int
}

/// `open(path, flags, mode)`.
///
/// # Safety
/// `path` is a NUL-terminated string.
pub unsafe fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    let args = [
        libc::AT_FDCWD as usize,
        path as usize,
        flags as usize,
        mode as usize,
        0,
        0,
    ];
    // SAFETY: per the contract.
    as_int(unsafe { call(libc::SYS_openat, args) })
}

/// `flock(fd, operation)`.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn flock(fd: c_int, operation: c_int) -> c_int {
    // SAFETY: no memory is passed.
    as_int(unsafe {
        call(
            libc::SYS_flock,
            [fd as usize, operation as usize, 0, 0, 0, 0],
        )
    })
}

/// `fstat(fd, status)`, made as glibc (2.33 and later) makes it:
/// `newfstatat` with an empty path (a host's seccomp allow-list written
/// for its C library lets it through).
///
/// # Safety
/// `status` points to a writable `libc::stat` (the kernel's layout).
pub unsafe fn fstat(fd: c_int, status: *mut libc::stat) -> c_int {
    let args = [
        fd as usize,
        c"".as_ptr() as usize,
        status as usize,
        libc::AT_EMPTY_PATH as usize,
        0,
        0,
    ];
    // SAFETY: per the contract; the path is a NUL-terminated empty string.
    as_int(unsafe { call(libc::SYS_newfstatat, args) })
}

/// `lstat(path, status)`, made as glibc makes it: `newfstatat` from the
/// working directory without following a final symbolic link.
///
/// # Safety
/// `path` is a NUL-terminated string; `status` points to a writable
/// `libc::stat`.
pub unsafe fn lstat(path: *const c_char, status: *mut libc::stat) -> c_int {
    let args = [
        libc::AT_FDCWD as usize,
        path as usize,
        status as usize,
        libc::AT_SYMLINK_NOFOLLOW as usize,
        0,
        0,
    ];
    // SAFETY: per the contract.
    as_int(unsafe { call(libc::SYS_newfstatat, args) })
}

/// [`lstat`] of a name, its status or None.
pub fn lstat_of(path: &core::ffi::CStr) -> Option<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut status: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a writable `stat`.
    (unsafe { lstat(path.as_ptr(), &mut status) } == 0).then_some(status)
}

/// `AT_FDCWD` as a system call argument.
#[cfg(not(target_arch = "x86_64"))]
const AT_FDCWD: usize = libc::AT_FDCWD as usize;

/// `unlink(path)`.
///
/// # Safety
/// `path` is a NUL-terminated string.
pub unsafe fn unlink(path: *const c_char) -> c_int {
    // SAFETY: per the contract.
    #[cfg(target_arch = "x86_64")]
    return as_int(unsafe { call(libc::SYS_unlink, [path as usize, 0, 0, 0, 0, 0]) });
    // SAFETY: per the contract (aarch64 has only the `*at` calls).
    #[cfg(not(target_arch = "x86_64"))]
    return as_int(unsafe { call(libc::SYS_unlinkat, [AT_FDCWD, path as usize, 0, 0, 0, 0]) });
}

/// `rename(from, to)`.
///
/// # Safety
/// Both are NUL-terminated strings.
pub unsafe fn rename(from: *const c_char, to: *const c_char) -> c_int {
    // SAFETY: per the contract.
    #[cfg(target_arch = "x86_64")]
    return as_int(unsafe { call(libc::SYS_rename, [from as usize, to as usize, 0, 0, 0, 0]) });
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: per the contract (aarch64 has only the `*at` calls).
    return unsafe { renameat2(libc::AT_FDCWD, from, libc::AT_FDCWD, to, 0) };
}

/// `renameat2(from_dir, from, to_dir, to, flags)`.
///
/// # Safety
/// Both names are NUL-terminated strings.
pub unsafe fn renameat2(
    from_dir: c_int,
    from: *const c_char,
    to_dir: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    let args = [
        from_dir as usize,
        from as usize,
        to_dir as usize,
        to as usize,
        flags as usize,
        0,
    ];
    // SAFETY: per the contract.
    as_int(unsafe { call(libc::SYS_renameat2, args) })
}

/// `link(from, to)`.
///
/// # Safety
/// Both are NUL-terminated strings.
pub unsafe fn link(from: *const c_char, to: *const c_char) -> c_int {
    // SAFETY: per the contract.
    #[cfg(target_arch = "x86_64")]
    return as_int(unsafe { call(libc::SYS_link, [from as usize, to as usize, 0, 0, 0, 0]) });
    #[cfg(not(target_arch = "x86_64"))]
    let args = [AT_FDCWD, from as usize, AT_FDCWD, to as usize, 0, 0];
    // SAFETY: per the contract (aarch64 has only the `*at` calls).
    #[cfg(not(target_arch = "x86_64"))]
    return as_int(unsafe { call(libc::SYS_linkat, args) });
}

/// `lseek(fd, offset, whence)`.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn lseek(fd: c_int, offset: libc::off_t, whence: c_int) -> libc::off_t {
    // SAFETY: no memory is passed.
    unsafe {
        call(
            libc::SYS_lseek,
            [fd as usize, offset as usize, whence as usize, 0, 0, 0],
        )
    }
}

/// `pause()`: until a signal is delivered.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn pause() -> c_int {
    // SAFETY: no arguments.
    #[cfg(target_arch = "x86_64")]
    return as_int(unsafe { call(libc::SYS_pause, [0; 6]) });
    // SAFETY: no descriptors, no timeout, no mask: until a signal (aarch64
    // has no `pause`).
    #[cfg(not(target_arch = "x86_64"))]
    return as_int(unsafe { call(libc::SYS_ppoll, [0; 6]) });
}

/// `mmap(NULL, bytes, protection, flags, fd, 0)`: the address, or
/// `MAP_FAILED`.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn mmap(bytes: usize, protection: c_int, flags: c_int, fd: c_int) -> *mut c_void {
    let args = [
        0,
        bytes,
        protection as usize,
        flags as usize,
        fd as usize,
        0,
    ];
    // SAFETY: no address hint: the kernel chooses where, over nothing mapped.
    unsafe { call(libc::SYS_mmap, args) as *mut c_void }
}

/// `mprotect(start, bytes, protection)`.
///
/// # Safety
/// Changing the protection of `[start, start + bytes)` breaks nobody who
/// uses those pages.
pub unsafe fn mprotect(start: *mut c_void, bytes: usize, protection: c_int) -> c_int {
    // SAFETY: per the contract.
    as_int(unsafe {
        call(
            libc::SYS_mprotect,
            [start as usize, bytes, protection as usize, 0, 0, 0],
        )
    })
}

/// `madvise(start, bytes, advice)`.
///
/// # Safety
/// The advice does not discard memory anybody still needs.
pub unsafe fn madvise(start: *mut c_void, bytes: usize, advice: c_int) -> c_int {
    // SAFETY: per the contract.
    as_int(unsafe {
        call(
            libc::SYS_madvise,
            [start as usize, bytes, advice as usize, 0, 0, 0],
        )
    })
}

/// `ftruncate(fd, length)`.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn ftruncate(fd: c_int, length: libc::off_t) -> c_int {
    // SAFETY: no memory is passed.
    as_int(unsafe {
        call(
            libc::SYS_ftruncate,
            [fd as usize, length as usize, 0, 0, 0, 0],
        )
    })
}

/// `memfd_create(name, flags)`.
///
/// # Safety
/// `name` is a NUL-terminated string.
pub unsafe fn memfd_create(name: *const c_char, flags: c_uint) -> c_int {
    // SAFETY: per the contract.
    as_int(unsafe {
        call(
            libc::SYS_memfd_create,
            [name as usize, flags as usize, 0, 0, 0, 0],
        )
    })
}

/// `getppid()`.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn getppid() -> libc::pid_t {
    // SAFETY: no arguments.
    as_int(unsafe { call(libc::SYS_getppid, [0; 6]) })
}

/// `uname(names)`.
///
/// # Safety
/// `names` points to a writable `utsname`.
pub unsafe fn uname(names: *mut libc::utsname) -> c_int {
    // SAFETY: per the contract.
    as_int(unsafe { call(libc::SYS_uname, [names as usize, 0, 0, 0, 0, 0]) })
}

/// `getrandom(buffer, bytes, flags)`.
///
/// # Safety
/// `buffer` has `bytes` writable bytes.
pub unsafe fn getrandom(buffer: *mut c_void, bytes: usize, flags: c_uint) -> isize {
    // SAFETY: per the contract.
    unsafe {
        call(
            libc::SYS_getrandom,
            [buffer as usize, bytes, flags as usize, 0, 0, 0],
        ) as isize
    }
}

/// The calling thread's name (`prctl(PR_GET_NAME)`), NUL-terminated into
/// `name`.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn thread_name(name: &mut [u8; 16]) -> c_int {
    let args = [
        libc::PR_GET_NAME as usize,
        name.as_mut_ptr() as usize,
        0,
        0,
        0,
        0,
    ];
    // SAFETY: PR_GET_NAME writes at most 16 bytes.
    as_int(unsafe { call(libc::SYS_prctl, args) })
}

/// Name the calling thread (`prctl(PR_SET_NAME)`, what
/// `pthread_setname_np` does for the calling thread).
///
/// # Safety
/// `name` is a NUL-terminated string (at most 15 bytes are kept).
pub unsafe fn set_thread_name(name: *const c_char) -> c_int {
    let args = [libc::PR_SET_NAME as usize, name as usize, 0, 0, 0, 0];
    // SAFETY: per the contract.
    as_int(unsafe { call(libc::SYS_prctl, args) })
}

/// `sched_yield()`.
///
/// # Safety
/// As for the libc function of that name.
pub unsafe fn sched_yield() -> c_int {
    // SAFETY: no arguments.
    as_int(unsafe { call(libc::SYS_sched_yield, [0; 6]) })
}
