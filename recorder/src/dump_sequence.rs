//! Dumps: when one may be written, what it is called, and in what order.
//!
//! Owns the dump sequence numbers (per process and per trigger), what the
//! written dumps cost (count, bytes, time: each dump's `cost` reports those
//! written before it), the lock
//! that serializes dumps and closes them at exit, and the automatic names:
//! `<prefix>.<pid>.<seq>.<trigger><n>.prof`, where a pid already used in the
//! directory (a container's first process is pid 1 every time) gets a
//! generation, so an automatic name never replaces an existing file. What a
//! dump holds is `dump_assembly`'s; writing the file is `dump_file`'s;
//! keeping the automatic dumps within their bounds is `dump_series`'.
//!
//! Never runs inside malloc: it allocates and does I/O. Dumps are serialized
//! by a lock the allocation paths never take, and `fork` never waits for it.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use heapsample_format::{Dump, Trigger};

use crate::dump_assembly::assemble;
use crate::dump_file::{self, Errno, Placement};
use crate::spin_lock::{LockClass, SpinLock};
use crate::warn::Kind;
use crate::{dump_series, state, triggers};

/// [`write_dump`]'s answer for a background dump that would repeat the
/// previous one of its trigger, and is not written.
pub const NOT_DUE: Errno = libc::EALREADY;

/// All dumps of this process, in order.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);
/// Dumps per trigger, indexed by [`trigger_index`].
static TRIGGER_SEQUENCE: [AtomicU64; 7] = [const { AtomicU64::new(0) }; 7];
/// What this process's written dumps cost: how many, their bytes and the
/// nanoseconds spent assembling and writing them (reported in the next
/// dump's `cost`).
static WRITTEN: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];
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
        Trigger::Time => 6,
    }
}

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
///
/// An interval or high-water dump that would repeat what the previous one
/// of its trigger showed (no interval boundary crossed since, no higher
/// heap: requests queued while the dumper was busy, or a high the heap left
/// before it could be written) is not written, and uses up no number:
/// [`NOT_DUE`].
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
    let started = std::time::Instant::now();
    let mut dump = assemble(trigger);
    if !triggers::still_due(trigger, &dump) {
        return Err(NOT_DUE);
    }
    dump.cost.dumps_written = WRITTEN[0].load(Relaxed);
    dump.cost.dump_bytes = WRITTEN[1].load(Relaxed);
    dump.cost.dump_ns = WRITTEN[2].load(Relaxed);
    dump.seq = SEQUENCE.fetch_add(1, Relaxed);
    // As in jemalloc, a dump to an explicit path does not use up a number of
    // the automatic names.
    let trigger_counter = &TRIGGER_SEQUENCE[trigger_index(trigger)];
    dump.trigger_seq = match path {
        Some(_) => trigger_counter.load(Relaxed),
        None => trigger_counter.fetch_add(1, Relaxed),
    };
    let (seq, trigger_seq) = (dump.seq, dump.trigger_seq);
    let target = match path {
        Some(explicit) => {
            dump_file::write_atomically(explicit, explicit, &dump, Placement::Replace)?;
            explicit.to_string()
        }
        None => {
            let bounds = dump_series::Bounds::configured();
            // SAFETY: the dump lock is held (`closed`).
            dump.removed_dumps = unsafe { dump_series::before_writing(bounds) };
            let target = write_automatic(&config.prof_prefix, seq, trigger, trigger_seq, &dump)?;
            let reported = dump.removed_dumps.len();
            // SAFETY: the dump lock is held (`closed`).
            unsafe { dump_series::written(bounds, &target, &dump, reported) };
            target
        }
    };
    triggers::dumped(trigger, &dump);
    count_written(&target, started);
    Ok((target, dump))
}

/// Add a written dump to [`WRITTEN`] (its size as the file system reports
/// it: the file was just renamed into place).
fn count_written(target: &str, started: std::time::Instant) {
    let bytes = std::ffi::CString::new(target)
        .ok()
        .and_then(|path| crate::syscalls::lstat_of(&path))
        .map_or(0, |status| status.st_size as u64);
    WRITTEN[0].fetch_add(1, Relaxed);
    WRITTEN[1].fetch_add(bytes, Relaxed);
    WRITTEN[2].fetch_add(started.elapsed().as_nanos() as u64, Relaxed);
}

/// Dumps numbered so far in this process (written or attempted).
pub fn dumps_written() -> u64 {
    SEQUENCE.load(Relaxed)
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
        match dump_file::write_atomically(prefix, &target, dump, Placement::NoReplace) {
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
    for counter in &WRITTEN {
        crate::store_if_changed!(*counter, 0);
    }
    // SAFETY: only this thread exists in the child; a guard of the lock
    // held by a thread that did not survive the fork is never used.
    unsafe { DUMP_LOCK.reset_in_child(false) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_a_generation_sort_after_the_plain_pid() {
        let plain = automatic_name("p", "1", 5, Trigger::Final, 0);
        let later = automatic_name("p", "1_1795371915353128", 0, Trigger::Manual, 0);
        let other = automatic_name("p", "1_1795371915359047", 0, Trigger::Final, 0);
        assert!(plain < later && later < other, "{plain} {later} {other}");
    }
}
