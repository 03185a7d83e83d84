//! `prof_exec_final`: which processes started by `exec` below a profiled
//! process write an exit dump, so that a profiled shell script or build does
//! not leave one file per command it ran.
//!
//! Owns the rule for a process that was not forked from a profiled one
//! (forked children follow `prof_fork_final`, in `lifecycle`). Such a process
//! counts as a descendant when its parent has this library loaded; the first
//! process of a run (whose parent, a shell or the `heapsample` command, is
//! not profiled) always follows `prof_final`. Under the default `all`
//! nothing is read.
//!
//! Never runs inside malloc: reads `/proc` at exit.

use crate::config::{Config, FORK_FINAL_MIN_LIFE_NS, ForkFinal};
use crate::state;

/// Does `prof_exec_final` let this process (not a forked child) write its
/// exit dump?
pub fn exit_dump_wanted(config: &Config) -> bool {
    let rule = config.prof_exec_final;
    if rule == ForkFinal::All || !parent_runs_the_profiler() {
        return true;
    }
    let sampled = state::samples_taken() > 0;
    match rule {
        ForkFinal::All => true,
        ForkFinal::None => false,
        ForkFinal::Sampled => sampled,
        ForkFinal::Lived => sampled && lifetime_ns().is_some_and(|ns| ns >= FORK_FINAL_MIN_LIFE_NS),
    }
}

/// `sysconf(_SC_CLK_TCK)` without importing `sysconf` (each import is a
/// symbol look-up at every program's start): the auxiliary vector's clock
/// tick, or 100 without one, as glibc answers.
fn clock_ticks_per_second() -> u64 {
    // SAFETY: getauxval has no preconditions.
    match unsafe { libc::getauxval(libc::AT_CLKTCK) } {
        0 => 100,
        ticks => ticks,
    }
}

/// The path of this library, as the loader knows it.
fn own_path() -> Option<Vec<u8>> {
    // SAFETY: a zeroed Dl_info is a valid out-parameter; dladdr fills it
    // for an address of this library's code.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: any address may be asked about.
    let found = unsafe { libc::dladdr(own_path as fn() -> Option<Vec<u8>> as *const _, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string of the loader.
    Some(
        unsafe { core::ffi::CStr::from_ptr(info.dli_fname) }
            .to_bytes()
            .to_vec(),
    )
}

/// True when the parent process has this library mapped (it runs the
/// profiler, preloaded or attached).
fn parent_runs_the_profiler() -> bool {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { crate::syscalls::getppid() };
    let (Some(path), Ok(maps)) = (own_path(), std::fs::read(format!("/proc/{parent}/maps"))) else {
        return false;
    };
    maps.split(|&b| b == b'\n').any(|line| {
        line.ends_with(&path)
            && line.len() > path.len()
            && line[line.len() - path.len() - 1] == b' '
    })
}

/// How long this process has lived, from `/proc/self/stat`'s start time
/// and the boot-time clock.
fn lifetime_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Fields from the third (state) on; the start time is the 22nd.
    let ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let per_second = clock_ticks_per_second();
    let started_ns = ticks.saturating_mul(1_000_000_000) / per_second;
    Some(crate::sys::clock_ns(libc::CLOCK_BOOTTIME).saturating_sub(started_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_process_has_a_lifetime_and_an_unprofiled_parent() {
        let lived = lifetime_ns().expect("/proc/self/stat");
        assert!(lived < 24 * 3600 * 1_000_000_000, "{lived}");
        assert!(!parent_runs_the_profiler());
        assert!(exit_dump_wanted(&Config {
            prof_exec_final: ForkFinal::None,
            ..Config::default()
        }));
    }

    #[test]
    fn clock_ticks_per_second_is_what_sysconf_reports() {
        // SAFETY: sysconf has no preconditions.
        let reported = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        assert_eq!(clock_ticks_per_second(), reported as u64);
    }
}
