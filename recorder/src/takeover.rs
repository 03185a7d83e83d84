//! Taking over the malloc family of a running process: the library was
//! loaded late (`dlopen`, by `heapsample attach`), so the loader bound
//! every object's calls elsewhere, and the profiler rewrites their
//! relocation slots (`slots`) to reach its own definitions.
//!
//! Owns the attach and detach sequence and the redirected functions:
//! - attach: forward to the definitions of the process's global scope
//!   (`slots::global_definition`, registered with `sys::look_up_with`), start with the options given
//!   instead of `PROF_CONF` (first attach) or forget the samples of the
//!   previous attach (later ones), note the time and the counters'
//!   baseline, then rewrite the slots: those of releasing functions first,
//!   so no sampled block is freed behind the profiler's back while the
//!   rest are rewritten.
//! - objects loaded later are redirected as `dlopen` returns ([`after_dlopen`]);
//!   a `dlclose` forgets the slots of unloaded objects.
//! - detach: sampling off, every slot given back, the dump thread (started
//!   only by interval, high-water or pre-OOM dumps) ended. The library
//!   stays loaded and inert: a function pointer the program copied while
//!   attached still reaches a working pass-through.
//!
//! Blocks allocated before the attach are never the profiler's: a free or
//! realloc of one finds no sample and forwards it untouched.
//!
//! Never runs inside malloc: called by the `heapsample` command through the
//! library's entry points, and by the `dlopen`/`dlclose` hooks.

use core::ffi::CStr;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::fmt::Write;
use std::sync::Mutex;

use crate::attachment::{self, ATTACHED, DETACHED, LOADED};
use crate::slots::{self, Pass, Redirect, Untouchable};
use crate::{api, lifecycle, routes, startup, state, sys, threads, tls};

/// True while attached: the `dlopen` hook then redirects what it loaded.
pub static REDIRECTING: AtomicBool = AtomicBool::new(false);

/// The functions redirected and what they forward to, from the first
/// attach on.
static REDIRECTS: Mutex<Vec<Redirect>> = Mutex::new(Vec::new());

/// The options of the first attach; later attaches must match them.
static FIRST_OPTIONS: Mutex<Option<String>> = Mutex::new(None);

/// Called by the library's constructor: was the library loaded after the
/// program started (`dlopen`), so that the loader bound `malloc` elsewhere?
/// Then it stays inert until [`attach`]. A library whose hooks already ran,
/// or which loaded before the C library, is preloaded (or linked).
pub fn loaded_late(own_code: usize) -> bool {
    if state::started() {
        return false;
    }
    // Preloaded (or linked) objects load before the C library, whatever
    // they depend on; one loaded by `dlopen` comes after it. (Cheaper than
    // asking the global scope for a symbol, at every program's start.)
    let libc_code = libc::getpid as unsafe extern "C" fn() -> libc::pid_t as usize;
    let late = slots::loaded_before(own_code, libc_code) == Some(false);
    if late {
        attachment::set_state(LOADED);
    }
    late
}

/// What an attach did.
pub struct Attached {
    /// Slots rewritten.
    pub slots: usize,
    /// The options in effect.
    pub options: String,
}

/// Attach: start sampling now and redirect every loaded object's calls of
/// `names` (the library's exports, found in the library itself) to the
/// library. `options` are PROF_CONF items. An error is one line.
pub fn attach(options: &str, names: &[&'static CStr], own_code: usize) -> Result<Attached, String> {
    match attachment::state() {
        LOADED => first_attach(options, names, own_code)?,
        DETACHED => reattach(options)?,
        ATTACHED => return Err("the profiler is attached to this process already".into()),
        _ => {
            return Err(
                "the profiler was preloaded into this process: it is profiled already".into(),
            );
        }
    }
    let now = unix_ns();
    let exact = threads::exact_counts_total();
    attachment::note_attach(now, exact.allocations, exact.frees, exact.bytes_allocated);
    state::set_start_time();
    attachment::set_state(ATTACHED);
    state::set_active(true);
    REDIRECTING.store(true, Relaxed);
    let redirects = redirects();
    let untouchable = Untouchable::of_this_process(own_code);
    let mut rewritten = slots::redirect(&redirects, untouchable, Pass::Releasing);
    rewritten += slots::redirect(&redirects, untouchable, Pass::All);
    Ok(Attached {
        slots: rewritten,
        options: state::config().describe(),
    })
}

fn first_attach(options: &str, names: &[&'static CStr], own_code: usize) -> Result<(), String> {
    check_options(options)?;
    OWN_CODE.store(own_code, Relaxed);
    let redirects = resolve(names, own_code)?;
    *REDIRECTS.lock().unwrap_or_else(|p| p.into_inner()) = redirects;
    *FIRST_OPTIONS.lock().unwrap_or_else(|p| p.into_inner()) = Some(options.to_string());
    sys::look_up_with(definition_of);
    startup::configure_from(options.to_string());
    routes::start();
    if !state::profiling() {
        return Err(
            "profiling is off in this process (secure execution, or no memory for the tables)"
                .into(),
        );
    }
    lifecycle::start_services();
    SHADOW_STACK.store(shadow_stack_enabled() as u8 + 1, Relaxed);
    Ok(())
}

/// An address of the library's own code (set at the first attach).
static OWN_CODE: AtomicUsize = AtomicUsize::new(0);

/// What the library forwards `name` to: the global scope's definition
/// (found once per redirected name at the first attach).
fn definition_of(name: &CStr) -> *mut libc::c_void {
    if let Some(redirect) = REDIRECTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|r| r.name == name)
    {
        return redirect.target as *mut libc::c_void;
    }
    let untouchable = Untouchable::of_this_process(OWN_CODE.load(Relaxed));
    slots::global_definition(name, untouchable) as *mut libc::c_void
}

fn reattach(options: &str) -> Result<(), String> {
    let first = FIRST_OPTIONS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if !options.is_empty() && first.as_deref() != Some(options) {
        return Err(format!(
            "the profiler keeps the options of its first attach to this process ({:?}); \
             attach again without options, or with the same",
            first.unwrap_or_default()
        ));
    }
    api::reset();
    Ok(())
}

pub use heapsample_options::attach::check_options;

/// Each name's hook (the library's own definition, looked up in the
/// library itself) and the global scope's definition it forwards to.
fn resolve(names: &[&'static CStr], own_code: usize) -> Result<Vec<Redirect>, String> {
    let _guard = tls::Guard::enter();
    let handle = own_handle(own_code).ok_or("cannot find the profiler library's own handle")?;
    let untouchable = Untouchable::of_this_process(own_code);
    let mut redirects = Vec::with_capacity(names.len());
    for &name in names {
        // SAFETY: a handle of this library and a NUL-terminated name.
        let hook = unsafe { libc::dlsym(handle, name.as_ptr()) } as usize;
        if hook == 0 {
            return Err(format!("the profiler library lacks {name:?}"));
        }
        let target = slots::global_definition(name, untouchable);
        redirects.push(Redirect { name, hook, target });
    }
    // SAFETY: the handle of dlopen's RTLD_NOLOAD call, released once.
    unsafe { libc::dlclose(handle) };
    Ok(redirects)
}

/// A `dlopen` handle of the object holding `own_code` (loaded already).
fn own_handle(own_code: usize) -> Option<*mut libc::c_void> {
    // SAFETY: a zeroed Dl_info is a valid out-parameter.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: any address may be asked about.
    if unsafe { libc::dladdr(own_code as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: the loader's own name of a loaded object; RTLD_NOLOAD only
    // takes a reference to it.
    let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    (!handle.is_null()).then_some(handle)
}

fn redirects() -> Vec<Redirect> {
    REDIRECTS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Detach: sampling off, every rewritten slot given back. Returns the
/// number of slots restored.
pub fn detach() -> Result<usize, String> {
    if attachment::state() != ATTACHED {
        return Err(match attachment::state() {
            DETACHED => "the profiler is detached from this process already".into(),
            LOADED => "the profiler was never attached to this process".into(),
            _ => "the profiler was preloaded into this process: there is nothing to detach \
                  (`heapsample stop PID` pauses sampling)"
                .into(),
        });
    }
    REDIRECTING.store(false, Relaxed);
    let restored = slots::restore_all();
    state::set_active(false);
    attachment::set_state(DETACHED);
    crate::dump_thread::stop_thread();
    Ok(restored)
}

/// After a successful `dlopen` while attached: redirect the objects it
/// loaded (and any other not redirected yet).
pub fn after_dlopen(own_code: usize) {
    if !REDIRECTING.load(Relaxed) {
        return;
    }
    let redirects = redirects();
    let untouchable = Untouchable::of_this_process(own_code);
    slots::redirect(&redirects, untouchable, Pass::Releasing);
    slots::redirect(&redirects, untouchable, Pass::All);
}

/// After a `dlclose` while attached: forget the slots of what it unloaded.
pub fn after_dlclose() {
    if REDIRECTING.load(Relaxed) {
        slots::forget_unloaded();
    }
}

/// 0: unknown, 1: off, 2: on (user-space shadow stacks, which forbid the
/// return trick of [`return_gadget`]).
static SHADOW_STACK: AtomicU8 = AtomicU8::new(0);

#[cfg(target_arch = "x86_64")]
fn shadow_stack_enabled() -> bool {
    const ARCH_SHSTK_STATUS: libc::c_int = 0x5005;
    const ARCH_SHSTK_SHSTK: u64 = 1;
    let mut features: u64 = 0;
    // SAFETY: asks the kernel for this thread's shadow-stack features into
    // a valid u64; older kernels fail with EINVAL.
    let status = unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SHSTK_STATUS, &mut features) };
    status == 0 && features & ARCH_SHSTK_SHSTK != 0
}

/// No return trick on aarch64 (its `dlopen` hook calls the next one
/// plainly): answered as if a shadow stack forbade it.
#[cfg(not(target_arch = "x86_64"))]
fn shadow_stack_enabled() -> bool {
    true
}

/// A `ret` instruction in the same page as `return_address` (the caller
/// of the `dlopen` hook), or 0. The hook has the next `dlopen` return
/// there, then to itself: the loader sees the caller's object as the
/// caller (its RUNPATH, `$ORIGIN` and namespace) and the hook still gets
/// control back to redirect what was loaded.
pub fn return_gadget(return_address: usize) -> usize {
    if SHADOW_STACK.load(Relaxed) != 1 || return_address == 0 {
        return 0;
    }
    let page = return_address & !4095;
    // SAFETY: the caller's code page is mapped and readable (it holds the
    // instruction that called the hook).
    let code = unsafe { core::slice::from_raw_parts(page as *const u8, 4096) };
    code.iter()
        .position(|&b| b == 0xc3)
        .map_or(0, |at| page + at)
}

/// The profiler's state in this process, as `key: value` lines for
/// `heapsample status`.
pub fn status() -> String {
    let mut out = String::new();
    let mode = match attachment::state() {
        ATTACHED => "attached",
        DETACHED => "detached",
        LOADED => "loaded",
        _ => "preloaded",
    };
    let config = state::config();
    let exact = threads::exact_counts();
    let _ = writeln!(out, "mode: {mode}");
    if let Some(at) = attachment::attached_unix_ns() {
        let _ = writeln!(out, "attached_unix_ns: {at}");
    }
    let _ = writeln!(out, "profiling: {}", state::profiling());
    let _ = writeln!(out, "active: {}", state::active());
    let _ = writeln!(out, "options: {}", config.describe());
    let _ = writeln!(out, "samples_taken: {}", state::samples_taken());
    let _ = writeln!(out, "samples_dropped: {}", state::samples_dropped());
    let _ = writeln!(
        out,
        "samples_live: {}",
        crate::live_table::LIVE.live_count()
    );
    let _ = writeln!(out, "allocations: {}", exact.allocations);
    let _ = writeln!(out, "bytes_allocated: {}", exact.bytes_allocated);
    let _ = writeln!(
        out,
        "dumps_written: {}",
        crate::dump_sequence::dumps_written()
    );
    let _ = writeln!(out, "slots_redirected: {}", slots::rewritten_count());
    let _ = writeln!(out, "profiler_bytes: {}", sys::MAPPED_BYTES.load(Relaxed));
    out
}
