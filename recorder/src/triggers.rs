//! When to dump while the program runs: every 2^`lg_prof_interval` bytes
//! allocated, at new high-water marks of the live heap, and on a signal.
//!
//! Owns the process-wide accumulators behind those triggers. They are fed
//! only at sample events (each thread hands over the bytes it allocated since
//! its previous event, as jemalloc does), so the malloc fast path writes no
//! shared cache line; a trigger is therefore late by at most about one
//! sampling period per thread. A trigger posts a request to the dumper
//! (`dumper`): the allocation that crossed a boundary never writes the file
//! itself.
//!
//! Owns too the rule that background dumps never repeat a moment: an
//! interval dump is written only if a boundary was crossed since the last
//! one, a high-water dump only if its heap exceeds the last one's
//! ([`still_due`], asked by the writer once a dump is assembled).
//!
//! Sample events check the triggers only once something that feeds them is
//! on (`state::watch_triggers`, called by whatever turns one on: the
//! configuration, a watched memory limit, a wanted dumper thread), so that
//! at `lg_prof_sample:0` with none on they cost one test per allocation.
//!
//! [`after_sample_event`] runs inside malloc (the sample event): atomics
//! only, no lock, no allocation, except that a due interval or high-water
//! dump starts the dumper thread if it is not running (`dumper`). The
//! signal handler posts a request and, if the dumper thread is not running
//! yet, starts it when the interrupted code allows (`dump_thread::on_dump_signal`).
//! The rest runs at start-up (configure), in the constructor (installing
//! the handler), in the interposed `sigaction` and in the writer.

use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

use heapsample_format::Trigger;

use crate::config::Config;
use crate::tls::{ThreadExt, ThreadState};
use crate::warn::Kind;
use crate::{dump_thread, sampling_law, state};

/// Bytes between interval dumps; 0 when off.
static INTERVAL: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated process-wide, as fed at sample events.
static ALLOCATED: AtomicU64 = AtomicU64::new(0);

static HIGH_WATER_ON: AtomicBool = AtomicBool::new(false);
static EXACT_LIVE: AtomicBool = AtomicBool::new(false);
/// The live heap at which the next high-water dump is due: set at start-up
/// and, after each high-water dump, a step above the high it recorded.
static NEXT_HIGH_WATER: AtomicU64 = AtomicU64::new(0);
/// A high-water dump is requested and not yet written.
static HIGH_WATER_REQUESTED: AtomicBool = AtomicBool::new(false);

/// Sampled estimate of the live heap in requested bytes (each live sample
/// weighs the inverse of its probability of having been sampled).
static LIVE_ESTIMATE: AtomicI64 = AtomicI64::new(0);

static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Set the triggers up from the configuration (at start-up).
pub fn configure(config: &Config) {
    if config.lg_prof_interval >= 0 {
        INTERVAL.store(1u64 << config.lg_prof_interval, Relaxed);
    }
    HIGH_WATER_ON.store(config.prof_gdump, Relaxed);
    EXACT_LIVE.store(config.prof_exact, Relaxed);
    NEXT_HIGH_WATER.store(config.prof_gdump_step.step_over(0), Relaxed);
    SIGNAL.store(config.prof_signal, Relaxed);
    if config.lg_prof_interval >= 0 || config.prof_gdump {
        state::watch_triggers();
    }
    dump_thread::configure_time_dumps(config.prof_interval_s);
}

/// The bytes a sampled object of `size` bytes stands for (its
/// Horvitz–Thompson weight, as in the dump).
pub fn sample_weight(size: u64) -> i64 {
    if sampling_law::samples_every_allocation() {
        return size as i64;
    }
    (size as f64 / sampling_law::inclusion_probability(size)) as i64
}

/// A sample of `size` bytes was recorded (`+1`) or its object freed (`-1`).
#[inline]
pub fn on_live_sample(size: u64, sign: i64) {
    // Read only by the high-water trigger on the sampled estimate.
    if HIGH_WATER_ON.load(Relaxed) && !EXACT_LIVE.load(Relaxed) {
        LIVE_ESTIMATE.fetch_add(sign * sample_weight(size), Relaxed);
    }
}

/// The live heap the high-water trigger watches.
pub fn live_heap() -> u64 {
    let live = if EXACT_LIVE.load(Relaxed) {
        state::exact_live()
    } else {
        LIVE_ESTIMATE.load(Relaxed)
    };
    live.max(0) as u64
}

/// Called at each sample event of a thread (after its countdown was
/// redrawn) once `state::triggers_watched`: hand over what the thread allocated since its
/// last event and check the triggers. (Until then the interval trigger is
/// off, so what a thread allocated need not be handed over.)
#[inline(always)]
pub fn after_sample_event(state: &ThreadState, ext: &mut ThreadExt) {
    dump_thread::start_if_wanted();
    if crate::memory_limit::check() {
        dump_thread::request_and_start(Trigger::MemoryLimit);
    }
    let allocated = state.bytes_allocated();
    let new_bytes = allocated.wrapping_sub(ext.bytes_fed);
    ext.bytes_fed = allocated;
    let interval = INTERVAL.load(Relaxed);
    if interval != 0 {
        let before = ALLOCATED.fetch_add(new_bytes, Relaxed);
        let after = before.wrapping_add(new_bytes);
        if after.checked_div(interval) != before.checked_div(interval) {
            dump_thread::request_and_start(Trigger::Interval);
        }
    }
    if HIGH_WATER_ON.load(Relaxed) {
        check_high_water();
    }
}

/// Request a high-water dump once the live heap reaches the due point,
/// unless one is already requested: a dump written late records the heap
/// it finds, which covers every crossing made while it waited, so crossings
/// never queue up dumps of the same heap.
fn check_high_water() {
    if HIGH_WATER_REQUESTED.load(Acquire) || live_heap() < NEXT_HIGH_WATER.load(Relaxed) {
        return;
    }
    if !HIGH_WATER_REQUESTED.swap(true, Acquire) {
        dump_thread::request_and_start(Trigger::HighWater);
    }
}

/// The dumper wrote (or failed to write, or found not due) the requested
/// high-water dump. `recorded` is the live heap the written dump recorded
/// (for a write that failed, the heap when the dumper began), `None` if the
/// dump was found not due. After a dump, the next one is due a step above
/// the high that dump recorded, whatever the dumper's delay: the heap the
/// program reached while the dump was being written is a new high only if
/// it lies a step above. A dump found not due leaves the next one where it
/// was. The trigger is checked again at once: a crossing made while this
/// request was pending asked for nothing, and a program that stopped
/// allocating makes no sample event that would ask later.
pub fn high_water_dumped(recorded: Option<u64>) {
    if let Some(recorded) = recorded {
        // Never below the last dump written: a failed write's heap may lie
        // under it, and a mark there would request dumps found not due,
        // one after another.
        let high = recorded.max(HIGH_WATER_DUMPED.load(Relaxed));
        let step = state::config().prof_gdump_step;
        NEXT_HIGH_WATER.store(high.saturating_add(step.step_over(high)), Relaxed);
    }
    HIGH_WATER_REQUESTED.store(false, Release);
    check_high_water();
}

/// Exact bytes allocated in the last interval dump written.
static INTERVAL_DUMPED: AtomicU64 = AtomicU64::new(0);
/// The live heap ([`dump_live_heap`]) of the last high-water dump written.
static HIGH_WATER_DUMPED: AtomicU64 = AtomicU64::new(0);

/// The live heap a dump records, as the high-water trigger measures it: the
/// exact usable bytes under `prof_exact`, else the sampled estimate.
pub fn dump_live_heap(dump: &heapsample_format::Dump) -> u64 {
    dump.totals.live_usable_bytes.unwrap_or_else(|| {
        let estimate: f64 = dump.stacks.iter().map(|stack| stack.live.bytes).sum();
        estimate as u64
    })
}

/// Is a background dump of `trigger`, just assembled, still worth writing,
/// by the rule that background dumps never repeat a moment? An interval
/// dump only if its exact bytes allocated lie in a later interval than the
/// last one's: requests that queued up while the dumper was busy, or a
/// boundary fed only after the last dump had counted its bytes, are covered
/// by that dump, not dumped again. A high-water dump only if its live heap
/// exceeds the last one's: high-water dumps only ever rise. Any other dump:
/// yes. Asked by the writer, under its lock.
pub fn still_due(trigger: Trigger, dump: &heapsample_format::Dump) -> bool {
    match trigger {
        Trigger::Interval => {
            let interval = INTERVAL.load(Relaxed).max(1);
            dump.totals.bytes_allocated / interval > INTERVAL_DUMPED.load(Relaxed) / interval
        }
        Trigger::HighWater => dump_live_heap(dump) > HIGH_WATER_DUMPED.load(Relaxed),
        _ => true,
    }
}

/// A dump of `trigger` was written (under the writer's lock).
pub fn dumped(trigger: Trigger, dump: &heapsample_format::Dump) {
    match trigger {
        Trigger::Interval => INTERVAL_DUMPED.store(dump.totals.bytes_allocated, Relaxed),
        Trigger::HighWater => HIGH_WATER_DUMPED.store(dump_live_heap(dump), Relaxed),
        _ => {}
    }
}

/// In a forked child: the parent's requests died with its dumper.
#[inline]
pub fn reset_in_child() {
    crate::store_if_changed!(HIGH_WATER_REQUESTED, false);
}

/// Forget the sampled live-heap estimate (with the samples, on reset).
pub fn reset_estimate() {
    LIVE_ESTIMATE.store(0, Relaxed);
}

extern "C" fn on_signal(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // Async-signal-safe: a counter and sem_post (or the dumper's start, when
    // the interrupted code allows it); errno is preserved.
    let _errno = crate::sys::ErrnoGuard::save();
    dump_thread::on_dump_signal(signal, info, context.cast());
}

static HANDLER_INSTALLED: AtomicBool = AtomicBool::new(false);

/// True if `signal` is the dump signal and its handler is installed: a
/// change of its disposition by the program matters.
pub fn handles_dump_signal(signal: libc::c_int) -> bool {
    signal != 0 && signal == SIGNAL.load(Relaxed) && HANDLER_INSTALLED.load(Relaxed)
}

/// The program is changing the disposition of `signal` (its `sigaction` or
/// `signal` call, interposed, in the process that owns this memory): if
/// that is the dump signal, the program's handler wins and signal dumps
/// stop, with one warning.
pub fn on_program_sigaction(signal: libc::c_int) {
    if handles_dump_signal(signal) && HANDLER_INSTALLED.swap(false, Relaxed) {
        dump_thread::cancel_retry();
        crate::warn!(
            Kind::Signal,
            "prof_signal: the program installed its own handler for signal {}; signal dumps are off",
            crate::config::signal_name(signal)
        );
    }
}

/// Install the dump signal's handler if the signal still has its default
/// disposition (called from the constructor); otherwise warn once.
pub fn install_signal_handler() {
    let signal = SIGNAL.load(Relaxed);
    if signal == 0 {
        return;
    }
    dump_thread::learn_risky_code();
    // SAFETY: querying and setting a disposition with valid structures.
    unsafe {
        let mut current: libc::sigaction = core::mem::zeroed();
        if libc::sigaction(signal, core::ptr::null(), &mut current) != 0 {
            return;
        }
        if current.sa_sigaction != libc::SIG_DFL {
            crate::warn!(
                Kind::Signal,
                "prof_signal: signal {} already has a handler; signal dumps are off",
                crate::config::signal_name(signal)
            );
            return;
        }
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = on_signal
            as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
            as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
        // The mask is empty: `action` was zeroed (no `sigemptyset` import).
        if libc::sigaction(signal, &action, core::ptr::null_mut()) != 0 {
            return;
        }
    }
    HANDLER_INSTALLED.store(true, Relaxed);
}
