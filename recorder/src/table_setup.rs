//! When the profiler's tables are made: at the first sample event, not at
//! start-up.
//!
//! Owns the creation of the live table's slots, the stack table's index and
//! the unwind rule cache all threads and forked children share. A process
//! that never samples and never forks (most short commands at the default
//! period) maps none of them: no system calls, no page faults, nothing for
//! its exit to tear down. A process about to fork makes them first, if it
//! has not yet, so that its children inherit and share them (a shell makes
//! them at its first command). Until
//! they are made every lookup misses (the live table's filter, which frees
//! test, is static and never needs them).
//!
//! Runs inside malloc, at a sample event under the thread's guard. Takes its
//! own lock (`spin_lock::LOCK_ORDER`), which the fork handlers take too, so
//! a child never inherits tables half made, nor the rule cache's memory
//! file descriptor still open; concurrent first samples of several threads
//! wait for the one that makes them. Syscalls, once per process: mmap,
//! memfd_create, ftruncate, close. A table that cannot be mapped is
//! reported once; every sample is then dropped, and counted as dropped.

use core::sync::atomic::{
    AtomicU8,
    Ordering::{Acquire, Release},
};

use crate::live_table::LIVE;
use crate::spin_lock::{LockClass, SpinLock};
use crate::stack_table::STACKS;
use crate::warn::Kind;
use crate::{backtrace, state, sys};

const NOT_MADE: u8 = 0;
const MADE: u8 = 1;
const FAILED: u8 = 2;

static TABLES: AtomicU8 = AtomicU8::new(NOT_MADE);
static SETUP: SpinLock<()> = SpinLock::new(LockClass::TableSetup, ());

/// Make the tables unless made (at a sample event, before the sample is
/// recorded; when every allocation is a sample, at a thread's set-up, which
/// comes before its first): true when samples can be recorded. Without them
/// the stack table's lookups ([`made`] guards them) and the live table's
/// inserts fail, and the sample is dropped and counted as dropped.
pub fn ensure() -> bool {
    match TABLES.load(Acquire) {
        MADE => true,
        FAILED => false,
        _ => make(),
    }
}

/// True once the tables exist.
pub fn made() -> bool {
    TABLES.load(Acquire) == MADE
}

#[cold]
#[inline(never)]
fn make() -> bool {
    let _errno = sys::ErrnoGuard::save();
    let _setup = SETUP.lock();
    match TABLES.load(Acquire) {
        MADE => return true,
        FAILED => return false,
        _ => {}
    }
    let config = state::config();
    let (live_bits, stack_bits) = table_sizes(config.lg_prof_sample);
    if !LIVE.init(live_bits) || !STACKS.init(stack_bits) {
        crate::warn!(
            Kind::TableFull,
            "cannot map the profiler's tables; samples are dropped"
        );
        TABLES.store(FAILED, Release);
        return false;
    }
    if !backtrace::make_rule_cache() && !backtrace::uses_libgcc() {
        backtrace::use_libgcc(true);
        crate::warn!(
            Kind::Other,
            "cannot map the unwind rule cache; stacks are captured with libgcc's \
             unwinder, which is slower"
        );
    }
    TABLES.store(MADE, Release);
    true
}

/// log2 of the live-table and stack-index sizes for a sampling period: a
/// shorter period keeps more samples live. Hashing spreads entries over the
/// whole table, so its size is resident memory once enough samples are
/// live: 2^16 slots (1 MiB) at the default period holds samples for a
/// ~16 GiB heap before probes lengthen; 2^18 (4 MiB) at lg 14 for ~2 GiB.
fn table_sizes(lg_sample: u32) -> (u32, u32) {
    let live_bits = (32u32.saturating_sub(lg_sample)).clamp(16, 22);
    let stack_bits = (34u32.saturating_sub(lg_sample)).clamp(16, 22);
    (live_bits, stack_bits)
}

/// Hold off table creation across `fork` (the prepare handler).
pub fn lock_for_fork() {
    SETUP.lock_for_fork();
}

/// Undo [`lock_for_fork`] in parent or child.
///
/// # Safety
/// Only from the fork handlers, after [`lock_for_fork`].
pub unsafe fn unlock_after_fork() {
    // SAFETY: per the contract, the fork handler owns the lock.
    unsafe { SETUP.force_unlock() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sizes_follow_the_period_within_bounds() {
        assert_eq!(table_sizes(19), (16, 16));
        assert_eq!(table_sizes(14), (18, 20));
        assert_eq!(table_sizes(0), (22, 22));
    }
}
