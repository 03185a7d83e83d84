//! Dump files: naming, assembling a [`Dump`] from the tables, and writing it
//! atomically.
//!
//! Owns the dump sequence numbers and the file protocol: the profile is
//! encoded in memory, written to a temporary file in the destination's
//! directory (created `O_EXCL | O_NOFOLLOW`, mode 0600) and renamed over the
//! final name, so a crash or a full disk never leaves a partial file under
//! the final name. Failures are one `<heapsample>:` warning per kind.
//!
//! Never runs inside malloc: it allocates and does I/O. Dumps are serialized
//! by a lock the allocation paths never take.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::ffi::CString;

use heapsample_format::{Dump, Totals, Trigger};

use crate::spin_lock::{LockClass, SpinLock};
use crate::warn::Kind;
use crate::{modules, stack_table::STACKS, state, sys, threads};

/// All dumps of this process, in order.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);
/// Dumps per trigger, indexed by [`trigger_index`].
static TRIGGER_SEQUENCE: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
/// Serializes dumps (and keeps fork from copying a half-written one); holds
/// true once the process is exiting and no dump may start any more (a dump
/// begun after the exit dump could be cut short by the process ending and
/// leave its temporary file behind).
static DUMP_LOCK: SpinLock<bool> = SpinLock::new(LockClass::Dump, false);

fn trigger_index(trigger: Trigger) -> usize {
    match trigger {
        Trigger::Final => 0,
        Trigger::Interval => 1,
        Trigger::HighWater => 2,
        Trigger::Manual => 3,
        Trigger::Signal => 4,
    }
}

/// Why a dump was not written, as an errno value.
pub type Errno = i32;

/// The automatic file name of a dump: `<prefix>.<pid>.<seq>.<t><tseq>.prof`,
/// or `<prefix>.<pid>.<seq>.f.prof` for the final dump. `<seq>` has six
/// digits (more past a million) so that `ls` lists a process's dumps in the
/// order they were written.
pub fn automatic_name(
    prefix: &str,
    pid: u32,
    seq: u64,
    trigger: Trigger,
    trigger_seq: u64,
) -> String {
    match trigger {
        Trigger::Final => format!("{prefix}.{pid}.{seq:06}.f.prof"),
        other => format!(
            "{prefix}.{pid}.{seq:06}.{}{trigger_seq}.prof",
            other.letter()
        ),
    }
}

/// Write a dump now. `path` overrides the automatic name. Returns the path
/// written and the dump itself.
pub fn write_dump(trigger: Trigger, path: Option<&str>) -> Result<(String, Dump), Errno> {
    let mut closed = DUMP_LOCK.lock();
    if *closed {
        return Err(libc::ECANCELED);
    }
    if trigger == Trigger::Final {
        *closed = true;
    }
    let config = state::config();
    let seq = SEQUENCE.fetch_add(1, Relaxed);
    // As in jemalloc, a dump to an explicit path does not use up a number of
    // the automatic names.
    let trigger_counter = &TRIGGER_SEQUENCE[trigger_index(trigger)];
    let trigger_seq = match path {
        Some(_) => trigger_counter.load(Relaxed),
        None => trigger_counter.fetch_add(1, Relaxed),
    };
    let pid = std::process::id();
    let target = match path {
        Some(explicit) => explicit.to_string(),
        None if config.prof_prefix.is_empty() => return Err(libc::EINVAL),
        None => automatic_name(&config.prof_prefix, pid, seq, trigger, trigger_seq),
    };
    let dump = assemble(trigger, seq, trigger_seq);
    let bytes = heapsample_format::encode(&dump);
    write_atomically(&target, &bytes)?;
    Ok((target, dump))
}

/// Build the profile from the tables as they are now.
pub fn assemble(trigger: Trigger, seq: u64, trigger_seq: u64) -> Dump {
    let config = state::config();
    let exact = threads::exact_counts();
    let stacks = STACKS.snapshot(config.prof_accum);
    Dump {
        writer: concat!("heapsample ", env!("CARGO_PKG_VERSION")).to_string(),
        pid: std::process::id(),
        executable: modules::main_executable(),
        command_line: command_line(),
        time_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        trigger,
        seq,
        trigger_seq,
        lg_sample_period: crate::sampling::lg_period(),
        config: config.describe(),
        modules: modules::snapshot(),
        threads: threads::thread_infos(),
        stacks,
        totals: Totals {
            allocations: exact.allocations,
            frees: config.prof_exact.then_some(exact.frees),
            bytes_allocated: exact.bytes_allocated,
            live_usable_bytes: config
                .prof_exact
                .then_some(exact.live_usable_bytes.max(0) as u64),
            samples_taken: state::samples_taken(),
            samples_dropped: state::samples_dropped(),
            samples_live: crate::live_table::LIVE.live_count(),
            threads_seen: exact.threads_seen,
            profiler_bytes: sys::MAPPED_BYTES.load(Relaxed),
            resets: state::resets(),
        },
    }
}

fn command_line() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter(|arg| !arg.is_empty())
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Write `bytes` to a fresh temporary file next to `target`, then rename it
/// to `target`. On failure nothing is left under either name and one warning
/// per kind of failure is printed.
pub fn write_atomically(target: &str, bytes: &[u8]) -> Result<(), Errno> {
    let temporary = format!("{target}.tmp.{}", std::process::id());
    let (Ok(temporary_c), Ok(target_c)) = (CString::new(temporary), CString::new(target)) else {
        crate::warn!(
            Kind::DumpOther,
            "cannot write dump {target:?}: the name contains a NUL byte"
        );
        return Err(libc::EINVAL);
    };
    let result = create_and_write(&temporary_c, bytes).and_then(|()| {
        // SAFETY: valid NUL-terminated paths.
        match unsafe { libc::rename(temporary_c.as_ptr(), target_c.as_ptr()) } {
            0 => Ok(()),
            _ => Err((RENAME_STAGE, last_errno())),
        }
    });
    let Err((stage, errno)) = result else {
        return Ok(());
    };
    let kind = if stage == RENAME_STAGE {
        Kind::DumpRename
    } else {
        Kind::of_dump_error(errno)
    };
    crate::warn!(
        kind,
        "cannot {stage} dump {target:?}: {}; the program goes on, later dumps will retry",
        std::io::Error::from_raw_os_error(errno)
    );
    // SAFETY: valid path; removes our own partial file if there is one.
    unsafe { libc::unlink(temporary_c.as_ptr()) };
    Err(errno)
}

/// What failed ("create", "write", ...) and the errno.
type Failure = (&'static str, Errno);

const RENAME_STAGE: &str = "rename into place";

fn create_and_write(temporary: &CString, bytes: &[u8]) -> Result<(), Failure> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid NUL-terminated path.
    let mut fd = unsafe { libc::open(temporary.as_ptr(), flags, 0o600) };
    if fd < 0 && last_errno() == libc::EEXIST {
        // A stale temporary from a crashed dump of a process with our pid:
        // unlink removes the name (it never follows a link); retry once.
        // SAFETY: valid path.
        unsafe { libc::unlink(temporary.as_ptr()) };
        // SAFETY: valid path.
        fd = unsafe { libc::open(temporary.as_ptr(), flags, 0o600) };
    }
    if fd < 0 {
        return Err(("create", last_errno()));
    }
    let written = write_all(fd, bytes);
    // SAFETY: fd is ours and open.
    let closed = unsafe { libc::close(fd) };
    match written {
        Err(errno) => Err(("write", errno)),
        Ok(()) if closed != 0 => Err(("write", last_errno())),
        Ok(()) => Ok(()),
    }
}

fn write_all(fd: i32, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        // SAFETY: writes from a valid slice to our fd.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let errno = last_errno();
            if errno == libc::EINTR {
                continue;
            }
            return Err(errno);
        }
        if n == 0 {
            return Err(libc::EIO);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// Refuse every later dump (the process is exiting), after any dump being
/// written now has finished.
pub fn close() {
    *DUMP_LOCK.lock() = true;
}

/// Hold the dump lock across `fork`.
pub fn lock_for_fork() {
    DUMP_LOCK.lock_for_fork();
}

/// Release after `fork` (both sides); the child starts its own numbering.
///
/// # Safety
/// Only from the fork handlers after [`lock_for_fork`].
pub unsafe fn unlock_after_fork(in_child: bool) {
    if in_child {
        SEQUENCE.store(0, Relaxed);
        for counter in &TRIGGER_SEQUENCE {
            counter.store(0, Relaxed);
        }
    }
    // SAFETY: per the contract.
    unsafe { DUMP_LOCK.force_unlock() };
}
