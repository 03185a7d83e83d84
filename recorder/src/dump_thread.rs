//! The background dumper thread, for dumps that must not be written by the
//! thread that asked for them (a signal handler, or an allocation that
//! crossed an interval or a new high-water mark).
//!
//! Owns the thread and its request counters. Requests are wake-ups of an
//! unnamed POSIX semaphore: `sem_post` is async-signal-safe and, unlike a
//! pipe, holds no file descriptor the program could close or reuse. What
//! the thread does for a request (write a dump) is registered by
//! `lifecycle`, so this module does not depend on the writer.
//!
//! The thread exists only once a dump is due: never at start-up, so a
//! single-threaded program stays single-threaded (`unshare(CLONE_NEWUSER)`
//! keeps working) until then. Interval and high-water dumps start it from
//! the sample event that made the first one due: inside malloc, under the
//! thread's guard (`pthread_create`'s own allocations pass through the
//! interposed malloc unsampled), holding none of the profiler's locks; glibc
//! takes its own thread-list and stack-cache locks. The dump signal starts
//! it from its handler when the interrupted code holds no lock that
//! `pthread_create` needs: the thread is not inside the profiler, and was
//! interrupted outside libc, the loader, the shim and the next allocator, or
//! in a blocking system call there (waiting, so holding no allocator or
//! loader lock). Otherwise a one-shot kernel timer brings the signal back
//! 10 ms later to try again (the program sees nothing: the handler knows the
//! timer's signals), and the next sample event tries too. A forked child
//! starts its own thread the same way (the parent's did not survive the
//! fork). The thread runs with every signal blocked and its guard set for
//! good.
//!
//! Time dumps (`prof_interval_s`) are asked for by the thread itself: it
//! waits on the semaphore with a deadline at the next tick (as it does every
//! 100 ms for `prof_oom_pct`), and at a tick asks for one unless nothing was
//! sampled and no sampled block freed since the last time dump. The thread
//! starts at the first sample event after the option is read.
//!
//! Takes no profiler lock (the thread it starts takes the dump lock).

use core::cell::UnsafeCell;
use core::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed,
};

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

/// Pending requests, per trigger. A counter, so that each signal gets its
/// dump even if the thread is busy, but capped so that a program that asks
/// faster than dumps can be written cannot queue without end. Interval and
/// high-water requests that wait together are served by one dump (it
/// covers every crossing made while they waited).
struct Pending {
    interval: AtomicU32,
    high_water: AtomicU32,
    signal: AtomicU32,
    memory_limit: AtomicU32,
    time: AtomicU32,
}

static PENDING: Pending = Pending {
    interval: AtomicU32::new(0),
    high_water: AtomicU32::new(0),
    signal: AtomicU32::new(0),
    memory_limit: AtomicU32::new(0),
    time: AtomicU32::new(0),
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
        Trigger::MemoryLimit => Some(&PENDING.memory_limit),
        Trigger::Time => Some(&PENDING.time),
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
    // Called from sample events, which leave errno as they found it.
    let _errno = crate::sys::ErrnoGuard::save();
    request(trigger);
    if !STARTED.load(Relaxed) && ensure_started() {
        // SAFETY: initialised by ensure_started.
        unsafe { libc::sem_post(WAKE.0.get()) };
    }
}

/// Set when a signal asked for a dump but could not start the thread.
static START_WANTED: AtomicBool = AtomicBool::new(false);

/// A signal arrived (async-signal-safe): `info` and `context` are the
/// handler's. A signal of the program (or a user) asks for a dump; the
/// retry timer's signal only retries the start. The thread starts here if
/// the interrupted code holds no lock `pthread_create` needs; otherwise a
/// one-shot timer brings the signal back in 10 ms to try again (the sample
/// events try too).
pub fn on_dump_signal(signal: i32, info: *const libc::siginfo_t, context: *const libc::ucontext_t) {
    if !is_retry(info) {
        request(Trigger::Signal);
    }
    if STARTED.load(Relaxed) {
        return;
    }
    if tls::current().guarded() || !interrupted_where_start_is_safe(context) {
        START_WANTED.store(true, Relaxed);
        crate::state::watch_triggers();
        arm_retry(signal);
        return;
    }
    if ensure_started() {
        START_WANTED.store(false, Relaxed);
        // SAFETY: initialised by ensure_started.
        unsafe { libc::sem_post(WAKE.0.get()) };
    }
}

/// The kernel timer that brings the dump signal back while the thread
/// could not start (-1: none yet in this process).
static RETRY_TIMER: AtomicI64 = AtomicI64::new(-1);

/// The value the retry timer's signals carry.
fn retry_marker() -> *mut libc::c_void {
    (&raw const RETRY_TIMER).cast_mut().cast()
}

fn is_retry(info: *const libc::siginfo_t) -> bool {
    // SAFETY: the kernel's siginfo for this signal; si_value is meaningful
    // for timer signals, which are the only ones tested.
    !info.is_null()
        && unsafe {
            (*info).si_code == libc::SI_TIMER && (*info).si_value().sival_ptr == retry_marker()
        }
}

/// The program took the dump signal over: disarm the retry timer, so its
/// handler never receives the timer's signal.
pub fn cancel_retry() {
    let timer = RETRY_TIMER.load(Relaxed);
    if timer >= 0 {
        set_retry_timer(timer, 0);
    }
}

/// Bring `signal` back in 10 ms (raw system calls: async-signal-safe).
fn arm_retry(signal: i32) {
    let mut timer = RETRY_TIMER.load(Relaxed);
    if timer < 0 {
        // SAFETY: a zeroed sigevent is valid; the fields set describe a
        // process-directed signal carrying our marker.
        let mut event: libc::sigevent = unsafe { core::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_SIGNAL;
        event.sigev_signo = signal;
        event.sigev_value = libc::sigval {
            sival_ptr: retry_marker(),
        };
        let mut id: libc::c_int = 0;
        // SAFETY: timer_create with valid pointers.
        let created = unsafe {
            libc::syscall(
                libc::SYS_timer_create,
                libc::CLOCK_MONOTONIC,
                &event,
                &mut id,
            )
        };
        if created != 0 {
            return;
        }
        timer = i64::from(id);
        RETRY_TIMER.store(timer, Relaxed);
    }
    set_retry_timer(timer, 10_000_000);
}

/// Arm the retry timer to fire once in `nanoseconds` (0 disarms it).
fn set_retry_timer(timer: i64, nanoseconds: i64) {
    let delay = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: 0,
            tv_nsec: nanoseconds,
        },
    };
    // SAFETY: setting our own timer with a valid itimerspec.
    unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            timer as libc::c_int,
            0,
            &delay,
            core::ptr::null_mut::<libc::itimerspec>(),
        )
    };
}

/// Called at sample events: start the thread a signal could not start.
#[inline(always)]
pub fn start_if_wanted() {
    if START_WANTED.load(Relaxed) {
        start_now_wanted();
    }
}

/// [`start_if_wanted`] once a signal asked (errno saved: sample events
/// leave it as they found it).
#[cold]
#[inline(never)]
fn start_now_wanted() {
    let _errno = crate::sys::ErrnoGuard::save();
    if START_WANTED.load(Relaxed) && !STARTED.load(Relaxed) && ensure_started() {
        START_WANTED.store(false, Relaxed);
        // SAFETY: initialised by ensure_started.
        unsafe { libc::sem_post(WAKE.0.get()) };
    }
}

/// Code ranges where an interrupted thread may hold a lock that creating a
/// thread takes (libc, the loader, the shim, the next allocator).
static RISKY_CODE: [(AtomicUsize, AtomicUsize); 4] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; 4];
/// Set once [`learn_risky_code`] ran; until then no start from a handler.
static RISKY_CODE_KNOWN: AtomicBool = AtomicBool::new(false);

/// Learn where libc, the loader, the shim and the next allocator lie (at
/// start-up, before the dump signal's handler is installed).
pub fn learn_risky_code() {
    // SAFETY: looking up a symbol by name; no allocation is needed.
    let loader = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__tls_get_addr".as_ptr()) };
    let probes = [
        libc::read as *const () as usize,
        loader as usize,
        learn_risky_code as fn() as usize,
        crate::next_alloc::NEXT.malloc.address() as usize,
    ];
    for ((start, end), probe) in RISKY_CODE.iter().zip(probes) {
        let Some((low, high)) = crate::backtrace::object_range(probe).filter(|_| probe != 0) else {
            return; // unknown (no _dl_find_object): never start from a handler
        };
        start.store(low, Relaxed);
        end.store(high, Relaxed);
    }
    RISKY_CODE_KNOWN.store(true, Relaxed);
}

/// Was the interrupted thread in code that holds no allocator or loader
/// lock? Outside the risky objects, or blocked in a system call there (the
/// kernel points the saved instruction at the `syscall` to restart it, or
/// just after it with `-EINTR` in rax).
fn interrupted_where_start_is_safe(context: *const libc::ucontext_t) -> bool {
    if context.is_null() || !RISKY_CODE_KNOWN.load(Relaxed) {
        return false;
    }
    // SAFETY: the kernel's saved context of the interrupted thread.
    let pc = unsafe { crate::arch::interrupted_pc(context) };
    let risky = RISKY_CODE
        .iter()
        .any(|(start, end)| pc >= start.load(Relaxed) && pc < end.load(Relaxed));
    if !risky {
        return true;
    }
    // SAFETY: the kernel's context; pc lies in a mapped code segment of a
    // loaded object, at least one instruction from its start (a syscall
    // instruction precedes any return).
    unsafe { crate::arch::stopped_in_syscall(context, pc) }
}

/// Start the thread unless it runs. Returns true if this call started it.
/// Async-signal-safe where [`on_dump_signal`] calls it: no profiler lock,
/// no Rust allocation (its one warning formats a string and a number into
/// a stack buffer); `pthread_create` itself is safe there, since the
/// interrupted code holds none of the locks it takes
/// (`interrupted_where_start_is_safe`).
pub fn ensure_started() -> bool {
    if STARTED.load(Relaxed) || STARTING.swap(true, Relaxed) {
        return false;
    }
    let _guard = tls::Guard::enter();
    // SAFETY: initialising a process-private semaphore with value 0.
    unsafe { libc::sem_init(WAKE.0.get(), 0, 0) };
    // SAFETY: attributes initialised before use and destroyed after; the
    // entry point has the C signature pthread_create expects.
    let created = unsafe {
        let mut attributes: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attributes);
        libc::pthread_attr_setstacksize(&mut attributes, 256 * 1024);
        libc::pthread_attr_setdetachstate(&mut attributes, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = 0;
        let created =
            libc::pthread_create(&mut thread, &attributes, thread_main, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attributes);
        created
    };
    if created == 0 {
        STARTED.store(true, Relaxed);
        return true;
    }
    STARTING.store(false, Relaxed);
    crate::warn!(
        crate::warn::Kind::Other,
        "cannot start the dump thread ({}, errno {created}); background dumps are off",
        pthread_create_error(created)
    );
    false
}

/// What a `pthread_create` error means (its only errors, pthread_create(3)),
/// without the allocation that formatting an `io::Error` makes.
fn pthread_create_error(errno: i32) -> &'static str {
    match errno {
        libc::EAGAIN => "out of resources, or a limit on threads reached",
        libc::EPERM => "not permitted to set the scheduling policy",
        libc::EINVAL => "invalid thread attributes",
        _ => "unexpected error",
    }
}

extern "C" fn thread_main(_: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: naming the calling thread with a NUL-terminated name.
    unsafe { crate::syscalls::set_thread_name(c"heapsample-dump".as_ptr()) };
    run();
    core::ptr::null_mut()
}

/// True once the thread was started in this process.
pub fn started() -> bool {
    STARTED.load(Relaxed)
}

/// Set to make the thread end at its next wake-up ([`stop_thread`]).
static STOP: AtomicBool = AtomicBool::new(false);

/// End the thread, if it runs, and wait (at most a second) until it has
/// (a detach leaves no thread of the profiler in the program); a later
/// request starts a new one. Never inside malloc.
pub fn stop_thread() {
    if !STARTED.load(Relaxed) {
        return;
    }
    STOP.store(true, Relaxed);
    // SAFETY: the semaphore was initialised before STARTED was set.
    unsafe { libc::sem_post(WAKE.0.get()) };
    for _ in 0..1000 {
        if !STARTED.load(Relaxed) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Every signal's bit set by hand, not by `sigfillset` (an import the
/// loader would bind in every process): glibc's `pthread_sigmask` leaves
/// its own two internal signals unblocked whatever the set says.
fn block_all_signals() {
    // SAFETY: any bit pattern is a valid sigset_t; a valid pointer.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        core::ptr::write_bytes(&mut all, 0xff, 1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, core::ptr::null_mut());
    }
}

fn run() {
    tls::current().set_flag(tls::FLAG_GUARD, true);
    block_all_signals();
    loop {
        wait_for_request();
        if STOP.load(Relaxed) {
            // Pending requests are dropped: nothing is profiled any more.
            STARTED.store(false, Relaxed);
            STARTING.store(false, Relaxed);
            STOP.store(false, Relaxed);
            return;
        }
        if crate::memory_limit::check() {
            request(Trigger::MemoryLimit);
        }
        if time_dump_due() {
            request(Trigger::Time);
        }
        let Some(write_dump) = dump_writer() else {
            continue; // not registered yet: requests stay pending
        };
        for trigger in [
            Trigger::MemoryLimit,
            Trigger::Signal,
            Trigger::Interval,
            Trigger::Time,
            Trigger::HighWater,
        ] {
            serve(trigger, write_dump);
        }
    }
}

/// Serve the requests of `trigger` pending when the pass reaches it: one
/// dump per signal (or pre-OOM request), one dump for any number of
/// interval or high-water requests (it covers every crossing made while
/// they waited). Requests made meanwhile wait for the next pass, so that a
/// stream of one kind never starves the others.
fn serve(trigger: Trigger, write_dump: fn(Trigger)) {
    let Some(pending) = counter(trigger) else {
        return;
    };
    let requests = pending.swap(0, Relaxed);
    let dumps = match trigger {
        Trigger::Interval | Trigger::HighWater => requests.min(1),
        _ => requests,
    };
    for _ in 0..dumps {
        write_dump(trigger);
    }
}

/// Wait for a request; with the pre-OOM trigger on, at most a tenth of a
/// second, so the thread also watches the cgroup while nothing allocates.
fn wait_for_request() {
    let mut wait_ns = u64::MAX;
    if crate::memory_limit::enabled() {
        wait_ns = 100_000_000;
    }
    let period = TIME_PERIOD_NS.load(Relaxed);
    if period != 0 {
        let now = crate::sys::clock_ns(libc::CLOCK_MONOTONIC);
        let due = NEXT_TIME_DUMP_NS.load(Relaxed);
        if due == 0 {
            NEXT_TIME_DUMP_NS.store(now + period, Relaxed);
        }
        wait_ns = wait_ns.min(NEXT_TIME_DUMP_NS.load(Relaxed).saturating_sub(now).max(1));
    }
    if wait_ns == u64::MAX {
        // SAFETY: initialised before the thread was spawned.
        unsafe { libc::sem_wait(WAKE.0.get()) };
        return;
    }
    let mut deadline = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; then a timed wait on our semaphore.
    unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut deadline);
        let nanoseconds = deadline.tv_nsec as u64 + wait_ns % 1_000_000_000;
        deadline.tv_sec += (wait_ns / 1_000_000_000 + nanoseconds / 1_000_000_000) as libc::time_t;
        deadline.tv_nsec = (nanoseconds % 1_000_000_000) as libc::c_long;
        libc::sem_timedwait(WAKE.0.get(), &deadline);
    }
}

/// `prof_interval_s` in nanoseconds (0: no time dumps).
static TIME_PERIOD_NS: AtomicU64 = AtomicU64::new(0);
/// When the next time dump is due (CLOCK_MONOTONIC ns; 0: not yet set).
static NEXT_TIME_DUMP_NS: AtomicU64 = AtomicU64::new(0);
/// What the process had sampled at the last time dump asked for: the
/// samples taken, the live samples and the resets. A time dump is
/// skipped while they stay the same: nothing was sampled and no sampled
/// block freed since (a quiet process writes no time dumps).
static LAST_TIME_FINGERPRINT: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];

/// Time dumps every `seconds` (`prof_interval_s`; 0: none). The dumper
/// thread starts at the next sample event (so a process that never samples
/// gets no thread).
pub fn configure_time_dumps(seconds: u32) {
    TIME_PERIOD_NS.store(u64::from(seconds) * 1_000_000_000, Relaxed);
    if seconds != 0 {
        START_WANTED.store(true, Relaxed);
        crate::state::watch_triggers();
    }
}

/// Is a time dump due now, and has anything changed since the last one?
/// Moves the due time on either way. In the dumper thread only.
fn time_dump_due() -> bool {
    let period = TIME_PERIOD_NS.load(Relaxed);
    let due = NEXT_TIME_DUMP_NS.load(Relaxed);
    let now = crate::sys::clock_ns(libc::CLOCK_MONOTONIC);
    if period == 0 || due == 0 || now < due {
        return false;
    }
    NEXT_TIME_DUMP_NS.store(due.saturating_add(period).max(now + period / 2), Relaxed);
    let fingerprint = [
        crate::state::samples_taken(),
        crate::live_table::LIVE.live_count(),
        crate::state::resets(),
    ];
    let changed = fingerprint
        .iter()
        .zip(&LAST_TIME_FINGERPRINT)
        .any(|(now, last)| last.load(Relaxed) != *now);
    for (value, last) in fingerprint.iter().zip(&LAST_TIME_FINGERPRINT) {
        last.store(*value, Relaxed);
    }
    changed
}

/// In a forked child: the thread did not survive; forget it and its queue.
/// Writes only what differs (each page written costs the child a
/// copy-on-write fault).
#[inline]
pub fn reset_in_child() {
    crate::store_if_changed!(STARTED, false);
    crate::store_if_changed!(STARTING, false);
    // A process with time dumps restarts its thread at its next sample
    // event; its first time dump comes a period after that.
    crate::store_if_changed!(START_WANTED, TIME_PERIOD_NS.load(Relaxed) != 0);
    crate::store_if_changed!(NEXT_TIME_DUMP_NS, 0);
    crate::store_if_changed!(RETRY_TIMER, -1); // timers do not survive fork
    crate::store_if_changed!(PENDING.interval, 0);
    crate::store_if_changed!(PENDING.high_water, 0);
    crate::store_if_changed!(PENDING.signal, 0);
    crate::store_if_changed!(PENDING.memory_limit, 0);
    crate::store_if_changed!(PENDING.time, 0);
}
