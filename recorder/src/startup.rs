//! Start-up: resolve the next allocator, read `PROF_CONF`, choose the mode
//! (the tables are made at the first sample, by `table_setup`).
//!
//! Owns the start-up state machine. Start-up runs inside the first hook call
//! (which may come before the shim's constructor: libstdc++ allocates
//! first), under the thread's guard; concurrent first callers spin until it
//! is done, and a nested call from the start-up itself returns at once. It
//! allocates through the shim's own heap (taking its lock), makes syscalls
//! (mmap, fstat, getauxval), creates the pthread key of the exit flush and
//! may print warnings. The caller passes the function that points the hooks
//! at the routes for the chosen mode, so this layer does not depend on the
//! routes.

use core::sync::atomic::{AtomicU8, Ordering::Relaxed};

use crate::config::{self, Config};
use crate::state::{
    self, MODE_ARENA_IN_USE, MODE_PASS_THROUGH, MODE_PROFILING, MODE_PROFILING_EXACT,
};
use crate::tls;
use crate::warn::Kind;
use crate::{backtrace, next_alloc, sampling_law, threads, triggers};

const STARTING: u8 = 1;
const STARTED: u8 = 2;
static START: AtomicU8 = AtomicU8::new(0);

/// Start the profiler if nobody has: resolve the next allocator, read
/// PROF_CONF, set the mode. Returns false when the calling
/// thread is inside the resolution itself (its request must be served from
/// the bootstrap arena).
pub fn start(install_routes: fn(u8)) -> bool {
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
    state::set_mode(mode);
    install_routes(mode);
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

/// Options given by an attach (`takeover`), read instead of `PROF_CONF`.
static GIVEN_OPTIONS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Start with `options` instead of the environment's `PROF_CONF` (an
/// attach: the environment is the program's own, read long ago).
pub fn configure_from(options: String) {
    let _ = GIVEN_OPTIONS.set(options);
}

fn read_prof_conf() -> String {
    if let Some(options) = GIVEN_OPTIONS.get() {
        return options.clone();
    }
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
        state::set_config(Config {
            prof: false,
            ..Config::default()
        });
        return MODE_PASS_THROUGH;
    }
    let (parsed, warnings) = config::parse(&read_prof_conf());
    for warning in &warnings {
        crate::warn!(Kind::Config, "{warning}");
    }
    let config = state::set_config(parsed);
    if !config.prof {
        return MODE_PASS_THROUGH;
    }
    sampling_law::set_lg_period(config.lg_prof_sample);
    state::set_exact(config.prof_exact);
    state::set_start_time();
    triggers::configure(config);
    state::set_active(config.prof_active);
    // The tables are made at the first sample (`table_setup`).
    // Under prof_exact every free reaches the exact path through
    // `routes::FREE_PASS` (set with the routes).
    let fast_unwinder = backtrace::init();
    if let Err(why) = fast_unwinder
        && config.prof_unwind != config::Unwinder::Libgcc
    {
        crate::warn!(
            Kind::Other,
            "{why}; stacks are captured with libgcc's unwinder, which is slower"
        );
    }
    backtrace::use_libgcc(config.prof_unwind == config::Unwinder::Libgcc || fast_unwinder.is_err());
    threads::create_exit_key();
    if config.prof_exact {
        MODE_PROFILING_EXACT
    } else {
        MODE_PROFILING
    }
}
