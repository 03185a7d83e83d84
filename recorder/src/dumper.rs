//! The background dumper thread, for dumps that must not be written by the
//! thread that asked for them (a signal handler, or an allocation that
//! crossed an interval or a new high-water mark).
//!
//! Owns the thread and its request counters. Requests are wake-ups of an
//! unnamed POSIX semaphore: `sem_post` is async-signal-safe and, unlike a
//! pipe, holds no file descriptor the program could close or reuse. The
//! thread is created on first need (not at start-up, so single-threaded-only
//! calls such as `unshare(CLONE_NEWUSER)` keep working in programs that never
//! ask for a background dump), runs with every signal blocked and its guard
//! set for good, and is recreated lazily in a forked child.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering::Relaxed};

use heapsample_format::Trigger;

use crate::tls;

/// What the thread does for each request: write a dump of that trigger.
/// Registered by the layer that writes files (`lifecycle`), so that this
/// module, reached from inside malloc, does not depend on the writer.
static WRITE_DUMP: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Register what the thread does for each request (once, at load).
/// Requests made before are kept and served once it is registered.
pub fn set_dump_writer(write: fn(Trigger)) {
    WRITE_DUMP.store(write as *mut (), Relaxed);
    if STARTED.load(Relaxed) {
        // SAFETY: the semaphore was initialised before STARTED was set.
        unsafe { libc::sem_post(WAKE.0.get()) };
    }
}

fn dump_writer() -> Option<fn(Trigger)> {
    let address = WRITE_DUMP.load(Relaxed);
    // SAFETY: only set_dump_writer stores here, from a `fn(Trigger)`.
    (!address.is_null()).then(|| unsafe { core::mem::transmute::<*mut (), fn(Trigger)>(address) })
}

/// Pending requests, per trigger. A counter, so that each interval crossing
/// gets its dump even if the thread is busy, but capped so that a program
/// that allocates faster than dumps can be written cannot queue without end.
struct Pending {
    interval: AtomicU32,
    high_water: AtomicU32,
    signal: AtomicU32,
}

static PENDING: Pending = Pending {
    interval: AtomicU32::new(0),
    high_water: AtomicU32::new(0),
    signal: AtomicU32::new(0),
};

/// The most requests of one kind that may wait.
const MAX_PENDING: u32 = 16;

struct Semaphore(UnsafeCell<libc::sem_t>);
// SAFETY: a POSIX semaphore is made to be shared between threads.
unsafe impl Sync for Semaphore {}

static WAKE: Semaphore =
    // SAFETY: an all-zero sem_t is a valid argument for sem_init, which
    // `ensure_started` calls before any use.
    Semaphore(UnsafeCell::new(unsafe { core::mem::zeroed() }));
static STARTED: AtomicBool = AtomicBool::new(false);
static STARTING: AtomicBool = AtomicBool::new(false);

fn counter(trigger: Trigger) -> Option<&'static AtomicU32> {
    match trigger {
        Trigger::Interval => Some(&PENDING.interval),
        Trigger::HighWater => Some(&PENDING.high_water),
        Trigger::Signal => Some(&PENDING.signal),
        Trigger::Final | Trigger::Manual => None,
    }
}

/// Ask for a dump of `trigger` in the background. Safe in a signal handler
/// once the thread is started (it only increments a counter and posts).
pub fn request(trigger: Trigger) {
    let Some(pending) = counter(trigger) else {
        return;
    };
    let _ = pending.fetch_update(Relaxed, Relaxed, |n| (n < MAX_PENDING).then_some(n + 1));
    if STARTED.load(Relaxed) {
        // SAFETY: the semaphore was initialised before STARTED was set.
        unsafe { libc::sem_post(WAKE.0.get()) };
    }
}

/// Request from a context that may start the thread (not a signal handler).
pub fn request_and_start(trigger: Trigger) {
    request(trigger);
    if !STARTED.load(Relaxed) && ensure_started() {
        // SAFETY: initialised by ensure_started.
        unsafe { libc::sem_post(WAKE.0.get()) };
    }
}

/// Start the thread unless it runs. Returns true if this call started it.
pub fn ensure_started() -> bool {
    if STARTED.load(Relaxed) || STARTING.swap(true, Relaxed) {
        return false;
    }
    let _guard = tls::Guard::enter();
    // SAFETY: initialising a process-private semaphore with value 0.
    unsafe { libc::sem_init(WAKE.0.get(), 0, 0) };
    let spawned = std::thread::Builder::new()
        .name("heapsample-dump".into())
        .stack_size(256 * 1024)
        .spawn(run);
    match spawned {
        Ok(_) => {
            STARTED.store(true, Relaxed);
            true
        }
        Err(error) => {
            STARTING.store(false, Relaxed);
            crate::warn!(
                crate::warn::Kind::Other,
                "cannot start the dump thread ({error}); background dumps are off"
            );
            false
        }
    }
}

fn block_all_signals() {
    // SAFETY: a filled set and a valid pointer.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, core::ptr::null_mut());
    }
}

fn take(pending: &AtomicU32) -> bool {
    pending
        .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

fn run() {
    tls::current().set_flag(tls::FLAG_GUARD, true);
    block_all_signals();
    loop {
        // SAFETY: initialised before the thread was spawned.
        if unsafe { libc::sem_wait(WAKE.0.get()) } != 0 {
            continue; // EINTR
        }
        let Some(write_dump) = dump_writer() else {
            continue; // not registered yet: requests stay pending
        };
        for trigger in [Trigger::Signal, Trigger::Interval, Trigger::HighWater] {
            if let Some(pending) = counter(trigger) {
                while take(pending) {
                    write_dump(trigger);
                }
            }
        }
    }
}

/// In a forked child: the thread did not survive; forget it and its queue.
pub fn reset_in_child() {
    STARTED.store(false, Relaxed);
    STARTING.store(false, Relaxed);
    PENDING.interval.store(0, Relaxed);
    PENDING.high_water.store(0, Relaxed);
    PENDING.signal.store(0, Relaxed);
}
