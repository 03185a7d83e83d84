//! The pre-OOM trigger (`prof_oom_pct`): a dump when the memory use of the
//! process's cgroup crosses a percentage of its limit, so that a process
//! about to be killed by the OOM killer leaves a profile of what filled it.
//!
//! Owns the cgroup's usage file and limit, and the crossing state: one dump
//! per crossing, re-armed once the use falls below the threshold again.
//! cgroup v2 (`memory.current` / `memory.max`) is used where its memory
//! controller manages the process; otherwise cgroup v1 (`memory.usage_in_bytes`
//! / `memory.limit_in_bytes`), as on hosts whose memory controller is still
//! on v1 (hybrid layouts). The nearest cgroup, from the process's own up to
//! the root of the hierarchy, that has a limit is watched.
//!
//! [`discover`] runs at start-up, outside malloc (it allocates and reads
//! `/proc`). [`check`] runs at sample events (inside malloc) and from the
//! dumper thread: at most once per [`CHECK_EVERY_NS`], it opens, reads and
//! closes the usage file with a stack buffer: no allocation, no lock.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The usage file watched, once found.
static USAGE_FILE: OnceLock<CString> = OnceLock::new();
/// Usage at or above this many bytes is a crossing (0: off).
static THRESHOLD: AtomicU64 = AtomicU64::new(0);
/// False after a crossing until the use falls below the threshold.
static ARMED: AtomicBool = AtomicBool::new(true);
/// CLOCK_MONOTONIC time before which no check is made.
static NEXT_CHECK_NS: AtomicU64 = AtomicU64::new(0);
/// The most frequent check: the usage file costs three system calls.
pub const CHECK_EVERY_NS: u64 = 10_000_000;

/// Where a limit was found.
#[derive(Debug, PartialEq, Eq)]
pub struct Watched {
    /// The file holding the cgroup's memory use in bytes.
    pub usage: PathBuf,
    /// The cgroup's limit in bytes.
    pub limit: u64,
}

/// Find the cgroup memory limit of this process and arm the trigger at
/// `percent` of it. Returns what is watched, or why nothing is.
pub fn discover(percent: u32) -> Result<Watched, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let watched = find_limit(&cgroups, &mounts, |path| std::fs::read_to_string(path).ok())
        .ok_or_else(|| "no memory limit applies to this process's cgroup".to_string())?;
    let usage = CString::new(watched.usage.as_os_str().as_encoded_bytes())
        .map_err(|_| "a cgroup path with a NUL byte".to_string())?;
    let _ = USAGE_FILE.set(usage);
    THRESHOLD.store(
        (watched.limit as u128 * u128::from(percent) / 100) as u64,
        Relaxed,
    );
    crate::state::watch_triggers();
    Ok(watched)
}

/// The v2 cgroup path and the v1 memory cgroup path in `/proc/self/cgroup`.
fn cgroup_paths(cgroups: &str) -> (Option<&str>, Option<&str>) {
    let (mut v2, mut v1) = (None, None);
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path);
        }
    }
    (v2, v1)
}

/// (mount root, mount point) of the cgroup v2 hierarchy and of the v1
/// memory hierarchy, from `/proc/self/mountinfo`.
type Mount<'a> = (&'a str, &'a str);

fn cgroup_mounts(mounts: &str) -> (Option<Mount<'_>>, Option<Mount<'_>>) {
    let (mut v2, mut v1) = (None, None);
    for line in mounts.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = before.split(' ').collect();
        let mut tail = after.split(' ');
        let (Some(kind), _, Some(options)) = (tail.next(), tail.next(), tail.next()) else {
            continue;
        };
        let (Some(&root), Some(&point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        if kind == "cgroup2" && v2.is_none() {
            v2 = Some((root, point));
        } else if kind == "cgroup" && options.split(',').any(|o| o == "memory") && v1.is_none() {
            v1 = Some((root, point));
        }
    }
    (v2, v1)
}

/// The nearest limited cgroup: v2 first, then v1. `read` reads a file.
pub fn find_limit(
    cgroups: &str,
    mounts: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<Watched> {
    let (path_v2, path_v1) = cgroup_paths(cgroups);
    let (mount_v2, mount_v1) = cgroup_mounts(mounts);
    let v2 = path_v2.zip(mount_v2).and_then(|(path, mount)| {
        nearest_limit(path, mount, "memory.max", "memory.current", &read)
    });
    v2.or_else(|| {
        path_v1.zip(mount_v1).and_then(|(path, mount)| {
            nearest_limit(
                path,
                mount,
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                &read,
            )
        })
    })
}

/// v1 reports "no limit" as a huge page-rounded number.
const UNLIMITED: u64 = 1 << 62;

fn nearest_limit(
    path: &str,
    (root, point): Mount<'_>,
    limit_file: &str,
    usage_file: &str,
    read: &impl Fn(&Path) -> Option<String>,
) -> Option<Watched> {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let mut directory = PathBuf::from(point);
    directory.extend(relative.split('/').filter(|part| !part.is_empty()));
    loop {
        let limit = read(&directory.join(limit_file))
            .and_then(|text| text.trim().parse::<u64>().ok())
            .filter(|&limit| limit < UNLIMITED);
        if let Some(limit) = limit
            && read(&directory.join(usage_file)).is_some()
        {
            return Some(Watched {
                usage: directory.join(usage_file),
                limit,
            });
        }
        if directory == Path::new(point) || !directory.pop() {
            return None;
        }
    }
}

/// The cgroup's memory use now, read without allocating.
fn usage_now(file: &CString) -> Option<u64> {
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { crate::syscalls::open(file.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    let mut buffer = [0u8; 32];
    // SAFETY: reading into our buffer from our descriptor, then closing it.
    let read = unsafe {
        let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
        libc::close(fd);
        read
    };
    let digits = buffer.get(..usize::try_from(read).ok()?)?;
    digits
        .iter()
        .take_while(|byte| byte.is_ascii_digit())
        .try_fold(0u64, |value, &byte| {
            value.checked_mul(10)?.checked_add(u64::from(byte - b'0'))
        })
}

/// True when the trigger watches a cgroup.
pub fn enabled() -> bool {
    THRESHOLD.load(Relaxed) != 0
}

/// Check the cgroup's use (rate-limited). Returns true when it just crossed
/// the threshold: the caller asks for a dump.
#[inline(always)]
pub fn check() -> bool {
    THRESHOLD.load(Relaxed) != 0 && check_now()
}

/// [`check`] with a threshold set (errno saved: sample events leave it as
/// they found it).
#[cold]
#[inline(never)]
fn check_now() -> bool {
    let _errno = crate::sys::ErrnoGuard::save();
    let threshold = THRESHOLD.load(Relaxed);
    if threshold == 0 {
        return false;
    }
    let now = crate::sys::clock_ns(libc::CLOCK_MONOTONIC_COARSE);
    let due = NEXT_CHECK_NS.load(Relaxed);
    if now < due
        || NEXT_CHECK_NS
            .compare_exchange(due, now + CHECK_EVERY_NS, Relaxed, Relaxed)
            .is_err()
    {
        return false;
    }
    let Some(usage) = USAGE_FILE.get().and_then(usage_now) else {
        return false;
    };
    if usage < threshold {
        ARMED.store(true, Relaxed);
        return false;
    }
    ARMED.swap(false, Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries
            .iter()
            .map(|(path, text)| (PathBuf::from(path), text.to_string()))
            .collect();
        move |path| map.get(path).cloned()
    }

    const HYBRID_MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
33 25 0:29 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory
";

    #[test]
    fn v1_memory_on_a_hybrid_host() {
        let cgroups = "9:name=systemd:/\n4:memory:/jobs/a\n0::/\n";
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/jobs/a/memory.usage_in_bytes",
                "100\n",
            ),
            (
                "/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes",
                "67108864\n",
            ),
            ("/sys/fs/cgroup/memory/jobs/memory.usage_in_bytes", "200\n"),
        ]);
        assert_eq!(
            find_limit(cgroups, HYBRID_MOUNTS, read),
            Some(Watched {
                usage: "/sys/fs/cgroup/memory/jobs/memory.usage_in_bytes".into(),
                limit: 64 << 20,
            })
        );
    }

    #[test]
    fn v2_first_and_max_means_no_limit() {
        let cgroups = "0::/app/web\n";
        let mounts = "29 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let read = files(&[
            ("/sys/fs/cgroup/app/web/memory.max", "max\n"),
            ("/sys/fs/cgroup/app/web/memory.current", "1\n"),
            ("/sys/fs/cgroup/app/memory.max", "1048576\n"),
            ("/sys/fs/cgroup/app/memory.current", "2\n"),
        ]);
        assert_eq!(
            find_limit(cgroups, mounts, read).map(|w| w.limit),
            Some(1 << 20)
        );
        assert_eq!(find_limit("0::/\n", mounts, files(&[])), None);
    }
}
