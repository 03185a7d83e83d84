//! Dump files: naming, assembling a [`Dump`] from the tables, and writing it
//! atomically.
//!
//! Owns the dump sequence numbers and the file protocol: the profile is
//! encoded as it is written (no encoded copy in memory) to a temporary file
//! in the destination's directory (created `O_EXCL | O_NOFOLLOW`, mode
//! 0600, locked with `flock` while it is written) and moved to the final
//! name, so a crash or a full disk never leaves a partial file under the
//! final name. An automatic name
//! never replaces an existing file (a repeated pid gets a later generation);
//! an explicit path replaces only a regular file or a symbolic link. The
//! first automatic dump of a process removes the temporary files that killed
//! processes left with the same prefix. Failures are one `<heapsample>:`
//! warning per kind.
//!
//! Never runs inside malloc: it allocates and does I/O. Dumps are serialized
//! by a lock the allocation paths never take, and `fork` never waits for it.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::ffi::CString;

use heapsample_format::{Dump, Totals, Trigger};

use crate::spin_lock::{LockClass, SpinLock};
use crate::stack_table::{OTHER_THREADS, STACKS};
use crate::warn::Kind;
use crate::{modules, state, sys, threads};

/// The name in the dump's thread list of the samples whose thread the stack
/// table no longer tells apart.
pub const OTHER_THREADS_NAME: &str = "other threads";

/// All dumps of this process, in order.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);
/// Dumps per trigger, indexed by [`trigger_index`].
static TRIGGER_SEQUENCE: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
/// Serializes dumps; holds true once the process is exiting and no dump may start any more (a dump
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
        Trigger::MemoryLimit => 5,
    }
}

/// Why a dump was not written, as an errno value.
pub type Errno = i32;

/// The automatic file name of a dump: `<prefix>.<tag>.<seq>.<t><tseq>.prof`,
/// or `<prefix>.<tag>.<seq>.f.prof` for the final dump. `<tag>` is the pid,
/// or `<pid>_<generation>` once a name of this pid was found taken (see
/// [`write_dump`]). `<seq>` has six digits (more past a million) so that
/// `ls` lists a process's dumps in the order they were written.
pub fn automatic_name(
    prefix: &str,
    tag: &str,
    seq: u64,
    trigger: Trigger,
    trigger_seq: u64,
) -> String {
    match trigger {
        Trigger::Final => format!("{prefix}.{tag}.{seq:06}.f.prof"),
        other => format!(
            "{prefix}.{tag}.{seq:06}.{}{trigger_seq}.prof",
            other.letter()
        ),
    }
}

/// Write a dump now. `path` overrides the automatic name. Returns the path
/// written and the dump itself.
///
/// An automatic name never replaces an existing file: when the name is
/// taken (an earlier process had the same pid: every container's first
/// process is pid 1, and pids wrap), this process adds a generation to its
/// pid for this and every later dump, `<pid>_<generation>`, where the
/// generation is the time in microseconds since the epoch: `_` sorts after
/// `.`, so the process's dumps list after those of the earlier process.
/// An explicit path replaces a regular file or a symbolic link (never what
/// it points to), and refuses anything else with `EINVAL`.
pub fn write_dump(trigger: Trigger, path: Option<&str>) -> Result<(String, Dump), Errno> {
    let mut closed = DUMP_LOCK.lock();
    if *closed {
        return Err(libc::ECANCELED);
    }
    if trigger == Trigger::Final {
        *closed = true;
    }
    let config = state::config();
    if path.is_none() && config.prof_prefix.is_empty() {
        return Err(libc::EINVAL);
    }
    let seq = SEQUENCE.fetch_add(1, Relaxed);
    // As in jemalloc, a dump to an explicit path does not use up a number of
    // the automatic names.
    let trigger_counter = &TRIGGER_SEQUENCE[trigger_index(trigger)];
    let trigger_seq = match path {
        Some(_) => trigger_counter.load(Relaxed),
        None => trigger_counter.fetch_add(1, Relaxed),
    };
    let dump = assemble(trigger, seq, trigger_seq);
    let target = match path {
        Some(explicit) => {
            write_atomically(explicit, &dump, Placement::Replace)?;
            explicit.to_string()
        }
        None => {
            let prefix = &config.prof_prefix;
            let target = write_automatic(prefix, seq, trigger, trigger_seq, &dump)?;
            remove_stale_temporaries_once(prefix);
            target
        }
    };
    Ok((target, dump))
}

/// The generation added to the pid in automatic names; 0 for none.
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn process_tag() -> String {
    let pid = std::process::id();
    match GENERATION.load(Relaxed) {
        0 => pid.to_string(),
        generation => format!("{pid}_{generation}"),
    }
}

/// A generation later than the current one and than the clock.
fn next_generation() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(1);
    let next = now.max(GENERATION.load(Relaxed) + 1);
    GENERATION.store(next, Relaxed);
}

fn write_automatic(
    prefix: &str,
    seq: u64,
    trigger: Trigger,
    trigger_seq: u64,
    dump: &Dump,
) -> Result<String, Errno> {
    // Each taken name moves to a later generation; a few are plenty (the
    // generation is the clock, in microseconds).
    for _ in 0..8 {
        let target = automatic_name(prefix, &process_tag(), seq, trigger, trigger_seq);
        match write_atomically(&target, dump, Placement::NoReplace) {
            Err(libc::EEXIST) => next_generation(),
            Ok(()) => return Ok(target),
            Err(errno) => return Err(errno),
        }
    }
    crate::warn!(
        Kind::DumpOther,
        "cannot write dump with prefix {prefix:?}: every name tried exists"
    );
    Err(libc::EEXIST)
}

/// Build the profile from the tables as they are now.
pub fn assemble(trigger: Trigger, seq: u64, trigger_seq: u64) -> Dump {
    let config = state::config();
    let exact = threads::exact_counts();
    let mut contexts = modules::Contexts::new();
    let stacks = STACKS.snapshot(
        config.prof_accum,
        crate::sampling::samples_every_allocation(),
        &mut |objects| contexts.number(objects),
    );
    let mut thread_list = threads::thread_infos();
    if stacks.iter().any(|stack| stack.thread == OTHER_THREADS) {
        thread_list.push(heapsample_format::ThreadInfo {
            serial: OTHER_THREADS,
            tid: 0,
            name: OTHER_THREADS_NAME.to_string(),
        });
    }
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
        modules: contexts.modules(),
        threads: thread_list,
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
    read_proc_file(c"/proc/self/cmdline")
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

/// A small /proc file read whole with plain `read`s (no `stat` to size the
/// buffer first: a forked child's exit dump reads it, and counts each call).
fn read_proc_file(path: &core::ffi::CStr) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4096);
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
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
        if n < 0 && last_errno() == libc::EINTR {
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

fn last_errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// What may be at the final name already.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A regular file or a symbolic link is replaced (the link itself, not
    /// what it points to); anything else refuses the dump with `EINVAL`.
    Replace,
    /// Nothing: an existing name fails with `EEXIST`, without a warning.
    NoReplace,
}

/// Write `dump` to a fresh temporary file next to `target` (encoded as it
/// is written: no encoded copy is held in memory), then move it to
/// `target` as `placement` allows. On failure nothing is left under
/// either name and one warning per kind of failure is printed.
///
/// The temporary file `<target>.tmp.<pid>` is locked (`flock`) until it is
/// in place, so that [`remove_stale_temporaries_once`] can tell one left
/// behind by a killed process from one being written.
pub fn write_atomically(target: &str, dump: &Dump, placement: Placement) -> Result<(), Errno> {
    let temporary = format!("{target}.tmp.{}", std::process::id());
    let (Ok(temporary_c), Ok(target_c)) = (CString::new(temporary), CString::new(target)) else {
        crate::warn!(
            Kind::DumpOther,
            "cannot write dump {target:?}: the name contains a NUL byte"
        );
        return Err(libc::EINVAL);
    };
    if placement == Placement::Replace && !replaceable(&target_c) {
        crate::warn!(
            Kind::DumpOther,
            "cannot write dump {target:?}: it exists and is not a regular file; the dump is refused"
        );
        return Err(libc::EINVAL);
    }
    let result = create_and_write(&temporary_c, dump).and_then(|fd| {
        let placed = place(&temporary_c, &target_c, placement);
        // SAFETY: fd is ours and open; closing releases the lock.
        unsafe { libc::close(fd) };
        placed
    });
    let Err((stage, errno)) = result else {
        return Ok(());
    };
    // SAFETY: valid path; removes our own partial file if there is one.
    unsafe { libc::unlink(temporary_c.as_ptr()) };
    if stage == EXISTS_STAGE {
        return Err(errno);
    }
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
    Err(errno)
}

fn lstat(path: &CString) -> Option<libc::stat> {
    // SAFETY: a valid path and a valid out pointer.
    unsafe {
        let mut status: libc::stat = core::mem::zeroed();
        (libc::lstat(path.as_ptr(), &mut status) == 0).then_some(status)
    }
}

/// True if `target` does not exist, or is a regular file or a symbolic
/// link: never replace a device node, a FIFO, a socket or a directory (a
/// dump to `/dev/null` as root would replace the system's).
fn replaceable(target: &CString) -> bool {
    lstat(target)
        .is_none_or(|status| matches!(status.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFLNK))
}

/// What failed ("create", "write", ...) and the errno.
type Failure = (&'static str, Errno);

const RENAME_STAGE: &str = "rename into place";
/// The final name exists and must not be replaced.
const EXISTS_STAGE: &str = "exists";

/// Move the written temporary file to `target`.
fn place(temporary: &CString, target: &CString, placement: Placement) -> Result<(), Failure> {
    if placement == Placement::Replace {
        // SAFETY: valid NUL-terminated paths.
        return match unsafe { libc::rename(temporary.as_ptr(), target.as_ptr()) } {
            0 => Ok(()),
            _ => Err((RENAME_STAGE, last_errno())),
        };
    }
    // SAFETY: valid NUL-terminated paths, relative to the working directory.
    let renamed = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            temporary.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    match (renamed, last_errno()) {
        (0, _) => Ok(()),
        (_, libc::EEXIST) => Err((EXISTS_STAGE, libc::EEXIST)),
        // The file system cannot rename without replacing: a hard link
        // fails on an existing name as well.
        (_, libc::EINVAL | libc::ENOSYS) => {
            // SAFETY: valid NUL-terminated paths.
            match unsafe { libc::link(temporary.as_ptr(), target.as_ptr()) } {
                0 => Ok(()),
                _ if last_errno() == libc::EEXIST => Err((EXISTS_STAGE, libc::EEXIST)),
                _ => Err((RENAME_STAGE, last_errno())),
            }
        }
        (_, errno) => Err((RENAME_STAGE, errno)),
    }
}

/// Create the temporary file, lock it and write `dump` into it; returns its
/// descriptor, still open (closing it releases the lock).
fn create_and_write(temporary: &CString, dump: &Dump) -> Result<i32, Failure> {
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
    // SAFETY: fd is ours and open. Nobody else has the new file open.
    unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) };
    match write_encoded(fd, dump) {
        Ok(()) => Ok(fd),
        Err(errno) => {
            // SAFETY: fd is ours and open.
            unsafe { libc::close(fd) };
            Err(("write", errno))
        }
    }
}

/// Set once this process looked for stale temporary files.
static STALE_CHECKED: AtomicBool = AtomicBool::new(false);

/// The pid of the process the profiler started in (0 before): only it looks
/// for stale temporary files, not its forked children (their parent's image
/// looks), which thus need not change anything at fork.
static STARTED_IN_PID: AtomicU32 = AtomicU32::new(0);

/// Remember the process the profiler starts in (from its constructor).
pub fn note_start() {
    STARTED_IN_PID.store(std::process::id(), Relaxed);
}

/// Remove the temporary files that dumps with `prefix` left behind when
/// their process was killed mid-write: `<prefix>.*.tmp.<pid>` whose pid is
/// not running and whose lock nobody holds. Once per process.
fn remove_stale_temporaries_once(prefix: &str) {
    if std::process::id() != STARTED_IN_PID.load(Relaxed) || STALE_CHECKED.swap(true, Relaxed) {
        return;
    }
    let (directory, base) = match prefix.rfind('/') {
        Some(0) => ("/", &prefix[1..]),
        Some(slash) => (&prefix[..slash], &prefix[slash + 1..]),
        None => (".", prefix),
    };
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    let own_pid = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = stale_temporary_pid(name, base) else {
            continue;
        };
        if pid != own_pid && !process_exists(pid) {
            remove_if_unlocked(&entry.path());
        }
    }
}

/// The pid of a temporary dump file name `<base>.<...>.prof.tmp.<pid>`.
fn stale_temporary_pid(name: &str, base: &str) -> Option<u32> {
    let rest = name.strip_prefix(base)?.strip_prefix('.')?;
    let (dump, pid) = rest.rsplit_once(".tmp.")?;
    if !dump.ends_with(".prof") || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 || last_errno() == libc::EPERM }
}

/// Unlink `path` if it is a regular file whose lock is free (its writer is
/// gone: a writer holds the lock until its file is in place).
fn remove_if_unlocked(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path_c) = CString::new(path.as_os_str().as_bytes()) else {
        return;
    };
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(path_c.as_ptr(), flags) };
    if fd < 0 {
        return;
    }
    // SAFETY: fd is ours and open; a valid out pointer.
    let regular = unsafe {
        let mut status: libc::stat = core::mem::zeroed();
        libc::fstat(fd, &mut status) == 0 && status.st_mode & libc::S_IFMT == libc::S_IFREG
    };
    // SAFETY: fd is ours and open.
    if regular && unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        // SAFETY: a valid path; unlink removes the name, never follows it.
        unsafe { libc::unlink(path_c.as_ptr()) };
    }
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
}

/// Encode `dump` into `fd` (the encoder writes it in chunks).
fn write_encoded(fd: i32, dump: &Dump) -> Result<(), Errno> {
    heapsample_format::encode_to(dump, &mut Descriptor(fd))
        .map_err(|error| error.raw_os_error().unwrap_or(libc::EIO))
}

/// A file descriptor this module keeps open and closes itself, as a
/// writer (`std::fs::File` would close it when dropped).
struct Descriptor(i32);

impl std::io::Write for Descriptor {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        write_all(self.0, bytes).map_err(std::io::Error::from_raw_os_error)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::io::Seek for Descriptor {
    fn seek(&mut self, position: std::io::SeekFrom) -> std::io::Result<u64> {
        let (offset, whence) = match position {
            std::io::SeekFrom::Start(offset) => (offset as i64, libc::SEEK_SET),
            std::io::SeekFrom::End(offset) => (offset, libc::SEEK_END),
            std::io::SeekFrom::Current(offset) => (offset, libc::SEEK_CUR),
        };
        // SAFETY: repositions our own open descriptor.
        match unsafe { libc::lseek(self.0, offset, whence) } {
            -1 => Err(std::io::Error::from_raw_os_error(last_errno())),
            at => Ok(at as u64),
        }
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

/// In a forked child (the dump lock is not held across `fork`: a dump in
/// progress on another thread does not delay it): the thread that may have
/// been writing a dump is gone, so release its lock, reopen dumping, start
/// the numbering and the pid's generation afresh. Writes only what differs
/// (each page written costs the child a copy-on-write fault).
///
/// # Safety
/// Only from the child's fork handler, once per fork.
#[inline]
pub unsafe fn reset_in_child() {
    crate::store_if_changed!(SEQUENCE, 0);
    for counter in &TRIGGER_SEQUENCE {
        crate::store_if_changed!(*counter, 0);
    }
    crate::store_if_changed!(GENERATION, 0);
    // SAFETY: only this thread exists in the child; a guard of the lock
    // held by a thread that did not survive the fork is never used.
    unsafe { DUMP_LOCK.reset_in_child(false) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temporary_names() {
        assert_eq!(
            stale_temporary_pid("hs.12.000001.f.prof.tmp.12", "hs"),
            Some(12)
        );
        assert_eq!(
            stale_temporary_pid("hs.1_5.000000.m0.prof.tmp.7", "hs"),
            Some(7)
        );
        assert_eq!(
            stale_temporary_pid("hsx.12.000001.f.prof.tmp.12", "hs"),
            None
        );
        assert_eq!(stale_temporary_pid("hs.12.000001.f.prof", "hs"), None);
        assert_eq!(stale_temporary_pid("hs.notes.tmp.12", "hs"), None);
        assert_eq!(
            stale_temporary_pid("hs.12.000001.f.prof.tmp.1x", "hs"),
            None
        );
    }

    #[test]
    fn names_with_a_generation_sort_after_the_plain_pid() {
        let plain = automatic_name("p", "1", 5, Trigger::Final, 0);
        let later = automatic_name("p", "1_1795371915353128", 0, Trigger::Manual, 0);
        let other = automatic_name("p", "1_1795371915359047", 0, Trigger::Final, 0);
        assert!(plain < later && later < other, "{plain} {later} {other}");
    }
}
