//! Where the process runs, for its dumps: the architecture, the host
//! name, the namespaces (`/proc/self/ns/*` inode numbers), the cgroup
//! (`/proc/self/cgroup`) and the pid in each PID namespace (`NSpid` of
//! `/proc/self/status`).
//!
//! Read at each dump (a process may move to another cgroup, and a forked
//! child's pids differ), by the thread writing it. Never runs inside
//! malloc: it allocates and reads `/proc`. Whatever cannot be read is left
//! empty or 0. Also the one reader of small `/proc` files for the dump
//! ([`read_proc_file`]).

use heapsample_format::{Namespaces, ProcessContext};

use crate::sys;

/// The process's context now.
pub fn read() -> ProcessContext {
    let status = read_proc_file(c"/proc/self/status");
    let cgroup = read_proc_file(c"/proc/self/cgroup");
    ProcessContext {
        architecture: std::env::consts::ARCH.to_string(),
        hostname: hostname(),
        namespaces: Namespaces {
            pid: namespace(c"/proc/self/ns/pid"),
            mnt: namespace(c"/proc/self/ns/mnt"),
            user: namespace(c"/proc/self/ns/user"),
            net: namespace(c"/proc/self/ns/net"),
            uts: namespace(c"/proc/self/ns/uts"),
            ipc: namespace(c"/proc/self/ns/ipc"),
            cgroup: namespace(c"/proc/self/ns/cgroup"),
        },
        cgroup: cgroup_path(&text(&cgroup)),
        ns_pids: ns_pids(&status),
    }
}

/// A `/proc` file's bytes as text: checked by `from_utf8`, whose ASCII
/// path reads a word at a time (a forked child's exit dump reads two such
/// files: validating them byte by byte, as the lossy conversion does,
/// cost 11,000 instructions of a `/bin/true`'s exit dump), and converted
/// lossily only if they are not UTF-8 (a process name may not be).
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match core::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The inode number of a namespace file, 0 if it cannot be opened.
fn namespace(path: &core::ffi::CStr) -> u64 {
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { crate::syscalls::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return 0;
    }
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut status: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: fd is ours and open; `status` is writable.
    let ok = unsafe { crate::syscalls::fstat(fd, &mut status) } == 0;
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    if ok { status.st_ino } else { 0 }
}

fn hostname() -> String {
    // SAFETY: an all-zero `utsname` is a valid value to be overwritten.
    let mut names: libc::utsname = unsafe { core::mem::zeroed() };
    // SAFETY: `names` is writable.
    if unsafe { crate::syscalls::uname(&mut names) } != 0 {
        return String::new();
    }
    // SAFETY: uname NUL-terminates the field.
    let name = unsafe { core::ffi::CStr::from_ptr(names.nodename.as_ptr()) };
    name.to_string_lossy().into_owned()
}

/// The cgroup v2 path (the `0::` line), or the first controller's path of
/// a v1 hierarchy.
pub(crate) fn cgroup_path(cgroup: &str) -> String {
    let path = |line: &str| line.splitn(3, ':').nth(2).map(str::to_string);
    cgroup
        .lines()
        .find(|line| line.starts_with("0::"))
        .and_then(path)
        .or_else(|| cgroup.lines().next().and_then(path))
        .unwrap_or_default()
}

/// The `NSpid` line's pids, outermost namespace first. Found by one search
/// of the bytes (`memmem`), not line by line over checked text: every dump
/// reads the status file (1.4 KB), and the line walk over checked text cost
/// a `/bin/true`'s exit dump 2,900 instructions more.
pub(crate) fn ns_pids(status: &[u8]) -> Vec<u32> {
    const KEY: &[u8] = b"NSpid:";
    let start = if status.starts_with(KEY) {
        Some(KEY.len())
    } else {
        memchr::memmem::find(status, b"\nNSpid:").map(|at| at + 1 + KEY.len())
    };
    let Some(start) = start else {
        return Vec::new();
    };
    let rest = &status[start..];
    let line = &rest[..memchr::memchr(b'\n', rest).unwrap_or(rest.len())];
    line.split(u8::is_ascii_whitespace)
        .filter_map(|pid| core::str::from_utf8(pid).ok()?.parse().ok())
        .collect()
}

/// A small /proc file read whole with plain `read`s (no `stat` to size the
/// buffer first: a forked child's exit dump reads it, and counts each call).
pub(crate) fn read_proc_file(path: &core::ffi::CStr) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4096);
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { crate::syscalls::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return bytes;
    }
    loop {
        if bytes.len() == bytes.capacity() {
            bytes.reserve(bytes.capacity());
        }
        let spare = bytes.spare_capacity_mut();
        // SAFETY: reading into the vector's spare capacity from our fd.
        let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), spare.len()) };
        if n < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        // SAFETY: `n` more bytes were just initialised by read.
        unsafe { bytes.set_len(bytes.len() + n as usize) };
    }
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nspid_line_lists_the_pid_in_each_namespace() {
        let status = b"Name:\tleak\nTgid:\t4242\nNSpid:\t4242\t1\nPPid:\t1\n";
        assert_eq!(ns_pids(status), vec![4242, 1]);
        assert_eq!(ns_pids(b"Name:\tx\n"), Vec::<u32>::new());
        assert_eq!(ns_pids(b"NSpid:\t7"), vec![7]);
        assert_eq!(ns_pids(b"Name:\tNSpid:\t9\nNSpid:\t8 3\n"), vec![8, 3]);
    }

    #[test]
    fn the_cgroup_is_the_unified_hierarchys_path() {
        assert_eq!(
            cgroup_path("0::/system.slice/app.service\n"),
            "/system.slice/app.service"
        );
        let v1 = "12:memory:/docker/abc\n11:cpu:/docker/abc\n";
        assert_eq!(cgroup_path(v1), "/docker/abc");
    }

    #[test]
    fn this_process_has_namespaces_and_its_own_pid() {
        let context = read();
        assert_eq!(context.architecture, std::env::consts::ARCH);
        assert_ne!(context.namespaces.pid, 0);
        assert_ne!(context.namespaces.mnt, 0);
        assert_eq!(context.ns_pids.first(), Some(&std::process::id()));
    }
}
