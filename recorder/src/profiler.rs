//! The profiler's process-wide state: start-up, the sample event (the slow
//! path of malloc), the free of a sampled object, the exit dump and the fork
//! handlers.
//!
//! Owns the mode the hooks dispatch on, the effective [`Config`], and the
//! sample counters. The sample event runs inside malloc: it allocates only
//! through the Rust global allocator (straight to the next allocator, never
//! sampled) under the thread's guard, takes no lock but the stack table's
//! insert lock, and preserves errno.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use heapsample_format::Trigger;

use crate::config::{self, Config};
use crate::live_table::{LIVE, LiveSample, MAX_STACK_ID};
use crate::stack_table::STACKS;
use crate::tls::{self, ThreadState};
use crate::warn::Kind;
use crate::{
    backtrace, dumper, modules, next_alloc, own_heap, sampling, threads, triggers, writer,
};

/// Not started yet: the next hook call starts the profiler.
pub const MODE_UNINIT: u8 = 0;
/// Pure pass-through (`prof:false`, secure execution, or start-up failed).
pub const MODE_PASS_THROUGH: u8 = 1;
/// Counting and sampling.
pub const MODE_PROFILING: u8 = 2;
/// Counting and sampling with the exact live heap (`prof_exact`), on paths
/// of their own so the common configuration does not test for it.
pub const MODE_PROFILING_EXACT: u8 = 3;
/// Added to the mode when the bootstrap arena handed out memory: `free` and
/// `realloc` must then check every pointer against it, on a slower path.
pub const MODE_ARENA_IN_USE: u8 = 4;

/// What the hooks do; read on every call.
pub static MODE: AtomicU8 = AtomicU8::new(MODE_UNINIT);
/// `prof_exact`: keep the exact live heap in usable bytes.
pub static EXACT: AtomicBool = AtomicBool::new(false);
/// `prof_active` / `heapsample_set_active`.
pub static ACTIVE: AtomicBool = AtomicBool::new(true);
/// Allocations sampled.
pub static SAMPLES_TAKEN: AtomicU64 = AtomicU64::new(0);
/// Samples lost because a table was full.
pub static SAMPLES_DROPPED: AtomicU64 = AtomicU64::new(0);

static CONFIG: OnceLock<Config> = OnceLock::new();
const STARTING: u8 = 1;
const STARTED: u8 = 2;
static START: AtomicU8 = AtomicU8::new(0);

/// The effective configuration (defaults until start-up has read PROF_CONF).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::default)
}

/// Start the profiler if nobody has: resolve the next allocator, read
/// PROF_CONF, map the tables, set the mode. Returns false when the calling
/// thread is inside the resolution itself (its request must be served from
/// the bootstrap arena).
pub fn start() -> bool {
    if !next_alloc::ensure_resolved() {
        return false;
    }
    loop {
        match START.compare_exchange(0, STARTING, Relaxed, Relaxed) {
            Ok(_) => break,
            Err(STARTED) => return true,
            Err(_) if tls::current().guarded() => return true, // our own start-up, nested
            Err(_) => core::hint::spin_loop(),
        }
    }
    let _guard = tls::Guard::enter();
    let mut mode = configure();
    if next_alloc::bootstrap_used() {
        mode |= MODE_ARENA_IN_USE;
    }
    MODE.store(mode, Relaxed);
    crate::hooks::set_routes(mode);
    START.store(STARTED, Relaxed);
    true
}

fn in_secure_execution() -> bool {
    // SAFETY: getauxval has no preconditions.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

unsafe extern "C" {
    fn secure_getenv(name: *const core::ffi::c_char) -> *mut core::ffi::c_char;
}

fn read_prof_conf() -> String {
    // SAFETY: secure_getenv with a NUL-terminated name; the result, if not
    // null, is a NUL-terminated string owned by the environment.
    let value = unsafe { secure_getenv(c"PROF_CONF".as_ptr()) };
    if value.is_null() {
        return String::new();
    }
    // SAFETY: non-null result of getenv.
    unsafe { core::ffi::CStr::from_ptr(value) }
        .to_string_lossy()
        .into_owned()
}

fn configure() -> u8 {
    crate::warn::remember_stderr();
    if in_secure_execution() {
        let _ = CONFIG.set(Config {
            prof: false,
            ..Config::default()
        });
        return MODE_PASS_THROUGH;
    }
    let (parsed, warnings) = config::parse(&read_prof_conf());
    for warning in &warnings {
        crate::warn!(Kind::Config, "{warning}");
    }
    let config = CONFIG.get_or_init(|| parsed);
    if !config.prof {
        return MODE_PASS_THROUGH;
    }
    sampling::set_lg_period(config.lg_prof_sample);
    EXACT.store(config.prof_exact, Relaxed);
    triggers::configure(config);
    ACTIVE.store(config.prof_active, Relaxed);
    let (live_bits, stack_bits) = table_sizes(config.lg_prof_sample);
    if !LIVE.init(live_bits) || !STACKS.init(stack_bits) {
        crate::warn!(
            Kind::Other,
            "cannot map the profiler's tables; profiling is off"
        );
        return MODE_PASS_THROUGH;
    }
    if config.prof_exact {
        // Every free must reach the exact path.
        LIVE.pin_all();
    }
    let fast_unwinder = backtrace::init();
    if !fast_unwinder && config.prof_unwind != config::Unwinder::Libgcc {
        crate::warn!(
            Kind::Other,
            "this glibc has no _dl_find_object (2.35+); stacks are captured with libgcc's unwinder, which is slower"
        );
    }
    backtrace::use_libgcc(config.prof_unwind == config::Unwinder::Libgcc || !fast_unwinder);
    threads::create_exit_key();
    if config.prof_exact {
        MODE_PROFILING_EXACT
    } else {
        MODE_PROFILING
    }
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

/// True when allocations are counted and sampled.
#[inline(always)]
pub fn profiling() -> bool {
    matches!(
        MODE.load(Relaxed) & !MODE_ARENA_IN_USE,
        MODE_PROFILING | MODE_PROFILING_EXACT
    )
}

/// The shim's constructor: start, then register the exit dump and the fork
/// handlers (here, not in a hook, so the exit dump runs after the program's
/// own atexit handlers and static destructors).
pub fn on_library_load() {
    start();
    if !profiling() {
        return;
    }
    // The objects loaded with the program, while relative names still mean
    // what they meant at start-up; forked children inherit the map.
    {
        let _guard = tls::Guard::enter();
        modules::refresh();
    }
    // SAFETY: registering handlers with the C ABI and no captured state.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
    }
    triggers::install_signal_handler();
}

// ---- the sample event: malloc's slow path ----

/// The countdown of `state` reached zero with the allocation `pointer` of
/// `size` bytes: set the thread up if new, draw the next countdown, and
/// record the sample.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[cold]
#[inline(never)]
pub unsafe fn on_countdown_expired(pointer: *mut c_void, size: usize) {
    let state = tls::current();
    if state.guarded() {
        // The profiler's own allocation: keep the fast path fast until the
        // guard is lifted, without sampling.
        rearm(state, GUARDED_MIN_INTERVAL);
        return;
    }
    let errno = next_alloc::errno();
    let _guard = tls::Guard::enter();
    if state.flags.load(Relaxed) & tls::FLAG_FINAL_FLUSH != 0 {
        if threads::after_final_flush(state, size) && ACTIVE.load(Relaxed) {
            record_sample(state, pointer, size as u64);
        }
        next_alloc::set_errno(errno);
        return;
    }
    if state.serial.load(Relaxed) == 0 && !first_interval_crossed(state) {
        next_alloc::set_errno(errno);
        return;
    }
    rearm(state, 0);
    if ACTIVE.load(Relaxed) {
        record_sample(state, pointer, size as u64);
    }
    let ext = state.ext.load(Relaxed);
    if !ext.is_null() {
        // SAFETY: the thread's own cold block, used by this thread only.
        triggers::after_sample_event(state, unsafe { &mut *ext });
    }
    next_alloc::set_errno(errno);
}

/// Set up a new thread and start its first countdown with the current
/// allocation already counted. Returns true if that allocation crossed it.
fn first_interval_crossed(state: &'static ThreadState) -> bool {
    threads::setup_current(state);
    let mut rng = state.rng.load(Relaxed);
    let interval = sampling::draw_interval(&mut rng);
    state.rng.store(rng, Relaxed);
    let remaining = state.bytes_until_sample.load(Relaxed) + interval;
    state.set_countdown(remaining);
    remaining <= 0
}

/// The smallest countdown given while the profiler itself allocates, so its
/// own allocations do not each take the slow path.
const GUARDED_MIN_INTERVAL: i64 = 4096;

/// Draw a new countdown of at least `minimum` bytes, keeping
/// `bytes_allocated` unchanged.
fn rearm(state: &ThreadState, minimum: i64) {
    let mut rng = state.rng.load(Relaxed);
    if rng == 0 {
        rng = sampling::seed(state as *const ThreadState as usize, 0);
    }
    let interval = sampling::draw_interval(&mut rng).max(minimum);
    state.rng.store(rng, Relaxed);
    state.set_countdown(interval);
}

fn record_sample(state: &ThreadState, pointer: *mut c_void, size: u64) {
    let max_frames = config().prof_bt_max as usize;
    let mut exiting_buffer = [0u64; 64];
    let ext = state.ext.load(Relaxed);
    let buffer: &mut [u64] = if ext.is_null() {
        &mut exiting_buffer
    } else {
        // SAFETY: the thread's own cold block, used by this thread only.
        unsafe { &mut (*ext).frames }
    };
    // Capture a little deeper: the profiler's own frames are dropped after.
    let limit = (max_frames + threads::OWN_FRAMES_SLACK).min(buffer.len());
    let depth = backtrace::capture(&mut buffer[..limit]).min(max_frames);
    let epoch = modules::epoch_for(&buffer[..depth]);
    let thread = state.serial.load(Relaxed);
    let Some(id) = STACKS.intern(&buffer[..depth], thread, epoch) else {
        return drop_sample("the stack table is full");
    };
    let Some(entry) = STACKS.entry(id).filter(|_| id <= MAX_STACK_ID) else {
        return drop_sample("the stack table is full");
    };
    // SAFETY: `pointer` was just returned by the next allocator.
    let usable = unsafe { next_alloc::usable_size(pointer) } as u64;
    entry.add_sample(size, usable);
    match LIVE.insert(pointer as usize, LiveSample { stack_id: id, size }) {
        Ok(None) => {}
        Ok(Some(stale)) => release(stale, usable),
        Err(_) => {
            entry.release_sample(size, usable);
            return drop_sample("the live-sample table is full");
        }
    }
    triggers::on_live_sample(size, 1);
    SAMPLES_TAKEN.fetch_add(1, Relaxed);
    threads::list_current(state);
}

fn drop_sample(why: &str) {
    SAMPLES_DROPPED.fetch_add(1, Relaxed);
    crate::warn!(Kind::TableFull, "{why}; some allocations are not sampled");
}

/// A live sample's object was freed (or its entry replaced).
pub fn release(sample: LiveSample, usable: u64) {
    if let Some(entry) = STACKS.entry(sample.stack_id) {
        entry.release_sample(sample.size, usable);
    }
    triggers::on_live_sample(sample.size, -1);
}

/// `pointer`, about to be freed, may be a live sample: forget it.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[cold]
#[inline(never)]
pub unsafe fn on_sampled_free(pointer: *mut c_void) {
    let errno = next_alloc::errno();
    if let Some(sample) = LIVE.remove(pointer as usize) {
        // SAFETY: the pointer is still allocated (the real free comes after).
        let usable = unsafe { next_alloc::usable_size(pointer) } as u64;
        release(sample, usable);
    }
    next_alloc::set_errno(errno);
}

// ---- exit ----

extern "C" fn at_exit() {
    let _guard = tls::Guard::enter();
    let config = config();
    // The exit dump is the last one: writing it (or closing, without one)
    // refuses every dump that other threads might still start.
    let written = if config.prof_final && !config.prof_prefix.is_empty() {
        writer::write_dump(Trigger::Final, None).ok()
    } else {
        writer::close();
        None
    };
    if config.prof_leak {
        let dump = match &written {
            Some((_, dump)) => dump.clone(),
            None => writer::assemble(Trigger::Final, 0, 0),
        };
        print_leak_summary(&dump, written.as_ref().map(|(path, _)| path.as_str()));
    }
}

/// jemalloc-style leak lines: the estimated live heap at exit.
fn print_leak_summary(dump: &heapsample_format::Dump, path: Option<&str>) {
    let period = dump.sample_period();
    let (mut bytes, mut objects, mut contexts) = (0.0, 0.0, 0u64);
    for stack in dump.stacks.iter().filter(|s| s.live_objects > 0) {
        let (n, b) = heapsample_format::unsample(stack.live_objects, stack.live_bytes, period);
        objects += n;
        bytes += b;
        contexts += 1;
    }
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let (bytes, objects) = (bytes.round() as u64, objects.round() as u64);
    crate::warn::say(format_args!(
        "Leak approximation summary: ~{bytes} byte{}, ~{objects} object{}, >= {contexts} context{}",
        plural(bytes),
        plural(objects),
        plural(contexts)
    ));
    match path {
        Some(path) => crate::warn::say(format_args!("Run heapdiff on {path:?} for leak detail")),
        None => crate::warn::say(format_args!(
            "No dump was written (prof_final:false or the write failed); no leak detail"
        )),
    }
}

// ---- fork ----

extern "C" fn fork_prepare() {
    tls::current().set_flag(tls::FLAG_GUARD, true);
    writer::lock_for_fork();
    modules::lock_for_fork();
    threads::lock_for_fork();
    STACKS.lock_for_fork();
    own_heap::lock_for_fork();
}

extern "C" fn fork_parent() {
    // SAFETY: each lock was taken by fork_prepare on this thread.
    unsafe {
        own_heap::unlock_after_fork();
        STACKS.unlock_after_fork();
        threads::unlock_in_parent();
        modules::unlock_after_fork();
        writer::unlock_after_fork(false);
    }
    tls::current().set_flag(tls::FLAG_GUARD, false);
}

extern "C" fn fork_child() {
    // SAFETY: the locks were taken by fork_prepare in the parent; only this
    // thread exists in the child.
    unsafe {
        own_heap::unlock_after_fork();
        STACKS.unlock_after_fork();
        threads::reset_in_child();
        modules::unlock_after_fork();
        writer::unlock_after_fork(true);
    }
    dumper::reset_in_child();
    tls::current().set_flag(tls::FLAG_GUARD, false);
}
