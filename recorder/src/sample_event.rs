//! The sample event: what happens when a thread's countdown runs out (the
//! slow path of malloc), and the free of a possibly sampled object.
//!
//! Owns the recording of a sample: capture the stack, find the record it is
//! counted in (the stack table's, for this stack and thread; a thread
//! remembers its recent ones), count it and add its Horvitz–Thompson
//! weights there (not when every allocation is sampled: the counts are then
//! the weight sums), remember the address in the live table with its
//! thread and birth ([`clock`]: `CLOCK_MONOTONIC` through the time stamp
//! counter where it is invariant; read here and at the sampled free only),
//! feed the triggers, time one event in `state::TIMED_EVERY` (a second
//! clock read at its end: the sampling time in each dump's cost, never on
//! the fast path); and at the free of a sampled object (gone from the
//! live table, which alone says what is live), count its lifetime in its
//! stack's distribution.
//!
//! Runs inside malloc, under the thread's guard, and preserves errno. It
//! allocates only through the shim's own heap (never the profiled
//! allocator), and only when a thread is set up or first listed. Locks it
//! may take (see `spin_lock::LOCK_ORDER`; each waits with priority
//! inheritance): the table set-up lock (the process's first sample, which
//! makes the tables: `table_setup`), the thread registry (thread set-up, the first sample of a
//! thread in a record of its own, allocations after the exit flush), the
//! stack table's insert lock (a stack, or a thread's record of one, never
//! seen before; at a sampled free, a stack's first freed sample) and the
//! own heap's lock (through those allocations). Syscalls: the tables'
//! creation at the process's first sample, mmap when a table grows,
//! gettid/prctl at a thread's first sample, write for a one-time warning;
//! the clock is the time stamp counter or the vDSO's. Instructions that
//! trap in a virtual machine: `cpuid` once per process (the clock's
//! calibration). The triggers it
//! feeds only post requests to the dumper, which may start the dumper
//! thread (see `dumper`).

use core::ffi::c_void;
use core::sync::atomic::Ordering::Relaxed;

use crate::backtrace::HookEntry;
use crate::live_table::{LIVE, LiveSample, USABLE_UNKNOWN};
use crate::record_counters::Counters;
use crate::stack_table::STACKS;
use crate::state;
use crate::sys::{self, ErrnoGuard};
use crate::tls::{self, RecentKey, RecentStack, ThreadState};
use crate::warn::Kind;
use crate::{backtrace, clock, modules, next_alloc, sampling_law, table_setup, threads, triggers};

/// The countdown of `state` (this thread's block) reached zero with the
/// allocation `pointer` of `size` bytes, made by the hook entered at
/// `entry`: set the thread up if new, draw the next countdown, and record
/// the sample.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[cold]
#[inline(never)]
pub unsafe fn on_countdown_expired(
    state: &'static ThreadState,
    pointer: *mut c_void,
    size: usize,
    entry: HookEntry,
) {
    // SAFETY: a live allocation is not null (the contract): the allocator's
    // usable size is then asked without testing it again.
    unsafe { core::hint::assert_unchecked(!pointer.is_null()) };
    if state.flags.load(Relaxed) & (tls::FLAG_GUARD | tls::FLAG_FINAL_FLUSH) == 0
        && state.serial.load(Relaxed) != 0
        && sampling_law::samples_every_allocation()
    {
        // Every allocation is a sample (a thread set up, not guarded, not
        // past its exit flush): no interval to draw (the countdown stays at
        // 0), and nothing on this path changes errno but the cold calls
        // that save it themselves.
        let _guard = tls::EnteredFromOutside::enter(state);
        state.sampler.restart_at_zero();
        return record_and_feed::<true>(state, pointer, size, entry);
    }
    if state.guarded() {
        // The profiler's own allocation (or one a library made for it, as a
        // preloaded dlsym may), unsampled: keep the fast path fast until the
        // guard is lifted. Not when every allocation is sampled: a countdown
        // left above zero would skip the program's next allocations.
        let minimum = if sampling_law::samples_every_allocation() {
            0
        } else {
            GUARDED_MIN_INTERVAL
        };
        rearm(state, minimum);
        // A fresh draw: a placeholder left by a fork is gone with it.
        state.set_flag(tls::FLAG_REDRAW, false);
        return;
    }
    let _guard = tls::EnteredFromOutside::enter(state);
    let _errno = ErrnoGuard::save();
    if state.flags.load(Relaxed) & tls::FLAG_FINAL_FLUSH != 0 {
        table_setup::ensure();
        if threads::after_final_flush(state, size) && state::active() {
            record_sample_after_flush(state, pointer, size as u64, entry);
        }
        return;
    }
    if state.flags.load(Relaxed) & tls::FLAG_REDRAW != 0 {
        // The first crossing since a fork: the placeholder countdown gives
        // way to the real one, with this allocation counted in it.
        state.set_flag(tls::FLAG_REDRAW, false);
        if !state.sampler.redraw_after_fork() {
            return;
        }
    }
    if state.serial.load(Relaxed) == 0 && !first_interval_crossed(state) {
        return;
    }
    rearm(state, 0);
    table_setup::ensure();
    record_and_feed::<false>(state, pointer, size, entry);
}

/// Record the sample (if sampling is active) and feed the triggers; `EVERY`
/// if the caller saw that every allocation is sampled.
#[inline(always)]
fn record_and_feed<const EVERY: bool>(
    state: &ThreadState,
    pointer: *mut c_void,
    size: usize,
    entry: HookEntry,
) {
    if state::active() {
        record_sample::<EVERY>(state, pointer, size as u64, entry);
    }
    if !state::triggers_watched() {
        return;
    }
    let ext = state.ext.load(Relaxed);
    if !ext.is_null() {
        // SAFETY: the thread's own cold block, used by this thread only.
        triggers::after_sample_event(state, unsafe { &mut *ext });
    }
}

/// Set up a new thread and start its first countdown with the current
/// allocation already counted. Returns true if that allocation crossed it.
/// When every allocation is a sample, the tables are made here: a thread's
/// later samples skip the path that makes them (the process's first
/// sample, below, at longer periods).
fn first_interval_crossed(state: &'static ThreadState) -> bool {
    if sampling_law::samples_every_allocation() {
        table_setup::ensure();
    }
    threads::setup_current(state);
    let seed = sampling_law::seed(
        state as *const ThreadState as usize,
        state.serial.load(Relaxed),
    );
    state.sampler.start(seed)
}

/// The smallest countdown given while the profiler itself allocates, so its
/// own allocations do not each take the slow path.
const GUARDED_MIN_INTERVAL: i64 = 4096;

/// Draw a new countdown of at least `minimum` bytes, keeping
/// `bytes_allocated` unchanged.
fn rearm(state: &ThreadState, minimum: i64) {
    state
        .sampler
        .rearm(minimum, state as *const ThreadState as usize);
}

/// [`record_sample`] for a thread past its exit flush (out of line: the
/// sample event's own path keeps its one copy inline).
#[cold]
#[inline(never)]
fn record_sample_after_flush(
    state: &ThreadState,
    pointer: *mut c_void,
    size: u64,
    entry: HookEntry,
) {
    record_sample::<false>(state, pointer, size, entry);
}

#[inline(always)]
fn record_sample<const EVERY: bool>(
    state: &ThreadState,
    pointer: *mut c_void,
    size: u64,
    entry: HookEntry,
) {
    // Born when the allocator returned it, before the stack is captured.
    let birth = birth(state);
    let ext = state.ext.load(Relaxed);
    if ext.is_null() {
        return record_sample_exiting(state, pointer, size, birth);
    }
    // SAFETY: the thread's own cold block, used by this thread only.
    let ext = unsafe { &mut *ext };
    let max_frames = max_frames();
    let frames = capture_limit(&mut ext.frames, max_frames);
    let range = backtrace::capture_with(&mut ext.unwinder, frames, entry);
    let frames = &frames[range.start..range.end.min(range.start + max_frames)];
    let generation = modules::generation();
    let key = RecentKey::of(frames);
    if let Some(recent) = ext.recent_stacks.find(key, generation)
        && recent.frames() == frames
    {
        return record_stack_sample::<EVERY>(
            state,
            recent.record,
            recent.counters(),
            pointer,
            size,
            birth,
        );
    }
    let Some(record) = new_record(state, frames, size) else {
        return;
    };
    if let Some((held, counters)) = STACKS.frames_and_counters(record) {
        let recent = RecentStack::new(record, held, counters);
        ext.recent_stacks.remember(key, generation, recent);
    }
    record_counted_sample(state, record, pointer, size, birth);
}

/// The record a sample of `frames` (of `size` bytes) by this thread is
/// counted in, looked up (or created) in the stack table; the thread is
/// listed in the dump's threads if the record carries its name. None if the
/// sample is dropped.
/// Errno saved: the table may map memory.
#[cold]
#[inline(never)]
fn new_record(state: &ThreadState, frames: &[u64], size: u64) -> Option<u32> {
    let _errno = ErrnoGuard::save();
    if !table_setup::made() {
        drop_sample("the profiler has no tables", size);
        return None;
    }
    let mut objects = modules::LazyObjectIds::new(frames);
    let thread = state.serial.load(Relaxed);
    let place = state.entry_place();
    let Some(recorded) = STACKS.record_for(frames, &mut objects, thread, place) else {
        drop_sample("the profiler is out of memory for its stack table", size);
        return None;
    };
    if recorded.without_frames {
        crate::warn!(
            Kind::StacksWithoutFrames,
            "the stack table is full; samples of new stacks are counted without their frames"
        );
    }
    if recorded.labelled {
        threads::list_current(state);
    }
    Some(recorded.record)
}

/// The largest stack kept (`prof_bt_max`).
fn max_frames() -> usize {
    state::config().prof_bt_max as usize
}

/// The part of `buffer` a capture may fill: a little deeper than
/// `max_frames` (`prof_bt_max`), as the profiler's own frames are dropped
/// after.
fn capture_limit(buffer: &mut [u64], max_frames: usize) -> &mut [u64] {
    let limit = (max_frames + tls::OWN_FRAMES_SLACK).min(buffer.len());
    &mut buffer[..limit]
}

/// [`record_sample`] for a thread past its exit flush, without its cold block.
#[cold]
fn record_sample_exiting(state: &ThreadState, pointer: *mut c_void, size: u64, birth: u64) {
    let mut buffer = [0u64; 64];
    let max_frames = max_frames();
    let frames = capture_limit(&mut buffer, max_frames);
    let range = backtrace::capture(frames);
    let frames = &frames[range.start..range.end.min(range.start + max_frames)];
    if let Some(record) = new_record(state, frames, size) {
        record_counted_sample(state, record, pointer, size, birth);
    }
}

/// [`record_stack_sample`] in `record`, its counters looked up (a record
/// just found or made in the stack table).
#[cold]
#[inline(never)]
fn record_counted_sample(
    state: &ThreadState,
    record: u32,
    pointer: *mut c_void,
    size: u64,
    birth: u64,
) {
    match STACKS.counters(record) {
        Some(counters) => {
            record_stack_sample::<false>(state, record, counters, pointer, size, birth)
        }
        None => drop_sample("a stack record was not found", size),
    }
}

/// Count a sample in `record` (whose `counters` these are) and enter it in
/// the live table, born at `birth` (`EVERY`: see [`weights_of`]).
#[inline(always)]
fn record_stack_sample<const EVERY: bool>(
    state: &ThreadState,
    record: u32,
    counters: &Counters,
    pointer: *mut c_void,
    size: u64,
    birth: u64,
) {
    // SAFETY: `pointer` was just returned by the next allocator.
    let usable = unsafe { next_alloc::usable_size(pointer) } as u64;
    let sample = LiveSample {
        record,
        thread: state.serial.load(Relaxed),
        size,
        usable,
        birth,
    };
    let weights = weights_of::<EVERY>(sample.size);
    // One thread, under its guard: the counts need no atomic adds.
    let single_threaded = sys::single_threaded();
    if single_threaded {
        counters.add_sample_single_threaded(size, weights.as_ref());
    } else {
        counters.add_sample(size, weights.as_ref());
    }
    match LIVE.insert(pointer as usize, sample, state.entry_place()) {
        Ok(None) => {}
        // An entry whose free was never seen: when it died is not known.
        Ok(Some(stale)) => release_unseen(stale),
        Err(_) => return drop_sample("the live-sample table is full", size),
    }
    triggers::on_live_sample(size, 1);
    if state::note_sample_taken(single_threaded) {
        time_sample_event(birth);
    }
}

/// The most one timed sample event counts: a sample event takes
/// microseconds; one that took longer on the clock was mostly descheduled,
/// and at 64 events each such time would count many times over.
const MAX_TIMED_NS: u64 = 100_000;

/// A timed sample event ended: add its time since `birth` (read at its
/// start), at most [`MAX_TIMED_NS`], to the profiler's cost.
#[cold]
#[inline(never)]
fn time_sample_event(birth: u64) {
    let took = clock::now_ns().saturating_sub(birth);
    state::note_sampling_time(took.min(MAX_TIMED_NS));
}

/// When a sample of this thread is born: now on the monotonic clock (read
/// at sample events only, [`clock`]), and after the thread's previous
/// sample, so that (thread, birth) identifies a sample within the process.
fn birth(state: &ThreadState) -> u64 {
    let now = clock::now_ns();
    let birth = now.max(state.last_birth.load(Relaxed).wrapping_add(1));
    state.last_birth.store(birth, Relaxed);
    birth
}

#[cold]
#[inline(never)]
fn drop_sample(why: &str, size: u64) {
    let _errno = ErrnoGuard::save();
    let weights =
        sample_weights(size).unwrap_or_else(|| crate::record_counters::certain_weights(1, size));
    state::note_sample_dropped(&weights);
    crate::warn!(Kind::TableFull, "{why}; some allocations are not sampled");
}

/// [`sample_weights`] of a sample of `size` bytes, known to be None where
/// the caller saw that every allocation is sampled (`EVERY`: the law is
/// fixed for the process's life), without asking again.
#[inline(always)]
fn weights_of<const EVERY: bool>(size: u64) -> Option<heapsample_format::Weights> {
    if EVERY { None } else { sample_weights(size) }
}

/// The Horvitz–Thompson weights of a live sample: a function of its size
/// (kept in the live table) and the period (fixed for the process's life),
/// so a dump adds up a stack's live samples to exactly what their allocations
/// added, and a lifetime counts what its allocation did. None when every
/// allocation is sampled: each weight is then 1 and the stack's counts are
/// its sums, so none are kept.
pub fn sample_weights(size: u64) -> Option<heapsample_format::Weights> {
    if sampling_law::samples_every_allocation() {
        return None;
    }
    let probability = sampling_law::inclusion_probability(size);
    Some(heapsample_format::weights_with_probability(
        size,
        probability,
    ))
}

/// A live sample's object was freed (or reallocated); its usable size is
/// known. Its lifetime goes into its stack's distribution.
#[inline(always)]
pub fn release(sample: LiveSample) {
    let lifetime = clock::now_ns().saturating_sub(sample.birth);
    release_with(sample, Some(heapsample_format::lifetime_bucket(lifetime)));
}

/// A live sample whose free the profiler never saw (its address was
/// handed out again): it is no longer live; its lifetime is not known.
fn release_unseen(sample: LiveSample) {
    release_with(sample, None);
}

/// A live sample left the live table: the triggers stop counting it, and
/// its lifetime goes into its stack's distribution in bucket `lifetime` if
/// known.
#[inline(always)]
fn release_with(sample: LiveSample, lifetime: Option<usize>) {
    if let Some(bucket) = lifetime {
        let weights = sample_weights(sample.size);
        STACKS.count_lifetime(sample.record, sample.size, weights.as_ref(), bucket);
    }
    triggers::on_live_sample(sample.size, -1);
}

/// `sample`, just removed for the allocation `pointer`, with its usable size
/// asked of the allocator if its entry did not keep it.
///
/// # Safety
/// `pointer` is still a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn with_usable(sample: LiveSample, pointer: *mut c_void) -> LiveSample {
    if sample.usable != USABLE_UNKNOWN {
        return sample;
    }
    LiveSample {
        // SAFETY: per the contract.
        usable: unsafe { next_alloc::usable_size(pointer) } as u64,
        ..sample
    }
}

/// `pointer`, about to be freed, may be a live sample (its filter counter,
/// which the caller tested, is not 0): forget it. Returns its usable size
/// if it was one.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[cold]
#[inline(never)]
pub unsafe fn on_sampled_free(pointer: *mut c_void) -> Option<u64> {
    // Nothing here changes errno: the table, the stack's counters, and the
    // allocator's usable size at most.
    let sample = LIVE.remove_past_filter(pointer as usize)?;
    // SAFETY: the pointer is still allocated (the real free comes after).
    let sample = unsafe { with_usable(sample, pointer) };
    release(sample);
    Some(sample.usable)
}
