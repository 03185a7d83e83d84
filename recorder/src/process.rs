//! Which process this memory belongs to: its pid, whether and when it was
//! forked, and its random identity.
//!
//! Owns the one record a forked child writes about its fork (one static, so
//! that the child's writes cost it one copy-on-write page) and the
//! process's identity: 128 random bits drawn when the profiler starts
//! (`getrandom`, in the constructor), so that two dumps are of one process
//! exactly when their ids are equal, whatever the pids (two containers' pid
//! 1). A forked child inherits its parent's memory and so its id: the
//! child's fork handler only marks it inherited, and the child draws its
//! own (the inherited one becoming its parent id) when it first needs it,
//! at its first dump or before it forks in turn.
//!
//! Never runs inside malloc: the constructor, the fork handlers and the
//! dump read and write it.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

/// What a forked child (without exec) knows of its fork, whose memory this
/// is, and who the process is.
pub struct ForkRecord {
    /// The samples taken when it was forked; `u64::MAX` in a process that
    /// was not forked.
    pub samples_at_fork: AtomicU64,
    /// When it was forked (CLOCK_MONOTONIC, nanoseconds, read by the
    /// child's fork handler; its own later forks do not change it).
    pub forked_at_ns: AtomicU64,
    /// The pid of the process this memory belongs to (0 before the
    /// constructor), set by the constructor and in each forked child.
    pub pid: AtomicU32,
    /// The identity below is the parent's (set in a forked child until it
    /// draws its own).
    identity_inherited: AtomicBool,
    /// The process's random identity, high and low halves.
    id: [AtomicU64; 2],
    /// The identity of the process it was forked from.
    parent_id: [AtomicU64; 2],
}

/// The process's record.
pub static FORK_RECORD: ForkRecord = ForkRecord {
    samples_at_fork: AtomicU64::new(u64::MAX),
    forked_at_ns: AtomicU64::new(0),
    pid: AtomicU32::new(0),
    identity_inherited: AtomicBool::new(false),
    id: [AtomicU64::new(0), AtomicU64::new(0)],
    parent_id: [AtomicU64::new(0), AtomicU64::new(0)],
};

/// True in a child that runs in this process's memory: made by `vfork` (or
/// `clone` with `CLONE_VM`) and not yet `exec`'d, as `subprocess` and
/// `posix_spawn` make them. No fork handler ran there and the memory is its
/// parent's: what the child does (resetting every signal handler, say) must
/// not change the profiler's state.
pub fn in_borrowed_memory() -> bool {
    let owner = FORK_RECORD.pid.load(Relaxed);
    // SAFETY: getpid has no preconditions.
    owner != 0 && owner != unsafe { libc::getpid() } as u32
}

fn load(cells: &[AtomicU64; 2]) -> u128 {
    u128::from(cells[0].load(Relaxed)) << 64 | u128::from(cells[1].load(Relaxed))
}

fn store(cells: &[AtomicU64; 2], value: u128) {
    cells[0].store((value >> 64) as u64, Relaxed);
    cells[1].store(value as u64, Relaxed);
}

/// Draw the process's identity (in the constructor).
pub fn draw_identity() {
    store(&FORK_RECORD.id, random_id());
}

/// In a forked child's fork handler: the identity is the parent's until the
/// child draws its own.
pub fn mark_identity_inherited() {
    FORK_RECORD.identity_inherited.store(true, Relaxed);
}

/// The process's identity and its parent's (0 if it was not forked from a
/// profiled process), drawing its own first if it was inherited.
pub fn identity() -> (u128, u128) {
    let record = &FORK_RECORD;
    if record.identity_inherited.load(Relaxed) {
        store(&record.parent_id, load(&record.id));
        store(&record.id, random_id());
        record.identity_inherited.store(false, Relaxed);
    }
    (load(&record.id), load(&record.parent_id))
}

/// 128 random bits from the kernel (`getrandom`, not blocking); if it
/// cannot give them (an old kernel, early boot), bits mixed from the time,
/// the pid and this stack's address.
fn random_id() -> u128 {
    let mut bytes = [0u8; 16];
    // SAFETY: writes at most 16 bytes into `bytes`.
    let got = unsafe {
        crate::syscalls::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), libc::GRND_NONBLOCK)
    };
    if got == bytes.len() as isize {
        return u128::from_le_bytes(bytes) | 1;
    }
    let mut state = crate::sys::clock_ns(libc::CLOCK_REALTIME)
        ^ crate::sys::clock_ns(libc::CLOCK_MONOTONIC).rotate_left(32)
        // SAFETY: getpid has no preconditions.
        ^ u64::from(unsafe { libc::getpid() } as u32) << 40
        ^ (&bytes as *const _ as u64);
    let high = crate::sampling_law::next_random(&mut state);
    let low = crate::sampling_law::next_random(&mut state);
    (u128::from(high) << 64 | u128::from(low)) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_draws_its_own_identity_and_keeps_its_parents() {
        draw_identity();
        let (parent, grandparent) = identity();
        assert_ne!(parent, 0);
        assert_eq!(identity(), (parent, grandparent), "drawn once");
        mark_identity_inherited();
        let (child, its_parent) = identity();
        assert_eq!(its_parent, parent);
        assert_ne!(child, parent);
        assert_ne!(random_id(), random_id());
    }
}
