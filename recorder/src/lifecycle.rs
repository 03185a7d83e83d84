//! The profiler's life outside malloc: the constructor, the exit dump and
//! leak summary, and the fork handlers.
//!
//! Owns the order in which the profiler's locks are taken around `fork`
//! (the ranks in `spin_lock`), what a forked child resets (including its
//! sampling generator, so siblings sample independently) and which forked
//! children write an exit dump (`prof_fork_final`; processes started by
//! `exec` are `exec_final`'s).
//!
//! Never runs inside malloc: the constructor registers handlers, the exit
//! handler writes a file, the fork handlers take every profiler lock but
//! the dump lock (in a process that ever had a second thread).

use core::sync::atomic::Ordering::Relaxed;

use heapsample_format::Trigger;

use crate::config::{Config, FORK_FINAL_MIN_LIFE_NS, ForkFinal};

use crate::process::{self, FORK_RECORD};
use crate::stack_table::STACKS;
use crate::{
    dump_sequence, dump_thread, modules, own_heap, routes, state, table_setup, threads, tls,
    triggers,
};

/// The shim's constructor: start, then register the exit dump and the fork
/// handlers (here, not in a hook, so the exit dump runs after the program's
/// own atexit handlers and static destructors).
pub fn on_library_load() {
    routes::start();
    if !state::profiling() {
        return;
    }
    // SAFETY: getpid has no preconditions.
    FORK_RECORD
        .pid
        .store(unsafe { libc::getpid() } as u32, Relaxed);
    start_services();
}

/// What a profiling process sets up outside malloc once started: the dump
/// writer, the module map, the exit dump, the fork handlers, the signal
/// and pre-OOM triggers. Also called by an attach (`takeover`).
pub fn start_services() {
    process::draw_identity();
    dump_thread::set_dump_writer(write_background_dump);
    {
        // The objects loaded with the program, while relative names still
        // mean what they meant at start-up; forked children inherit the map.
        let _guard = tls::Guard::enter();
        modules::refresh();
        // dlsym may allocate: under the guard too.
        crate::sys::find_single_threaded_flag();
        crate::backtrace::use_process_libgcc();
    }
    // SAFETY: registering handlers with the C ABI and no captured state.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
    }
    triggers::install_signal_handler();
    let oom_pct = state::config().prof_oom_pct;
    if oom_pct > 0
        && let Err(why) = crate::memory_limit::discover(oom_pct)
    {
        crate::warn!(
            crate::warn::Kind::Other,
            "prof_oom_pct: {why}; pre-OOM dumps are off"
        );
    }
}

/// What the dumper thread does for each request. After a high-water dump
/// the trigger re-arms a step above the high the dump recorded (the heap
/// when the dumper began, if the write failed), or stays where it was if
/// the heap fell below the last high before the dump was assembled.
fn write_background_dump(trigger: Trigger) {
    let live_before = triggers::live_heap();
    let written = dump_sequence::write_dump(trigger, None);
    if trigger == Trigger::HighWater {
        triggers::high_water_dumped(match &written {
            Ok((_, dump)) => Some(triggers::dump_live_heap(dump)),
            Err(dump_sequence::NOT_DUE) => None,
            Err(_) => Some(live_before),
        });
    }
}

// ---- exit ----

/// Does `prof_fork_final` let this process write its exit dump?
fn exit_dump_wanted(config: &Config) -> bool {
    let at_fork = FORK_RECORD.samples_at_fork.load(Relaxed);
    if at_fork == u64::MAX {
        return crate::exec_final::exit_dump_wanted(config);
    }
    // Comparisons, not a `match`: a four-way match is compiled into a jump
    // table in .rodata, whose page a quiet child would fault in at exit.
    let policy = config.prof_fork_final;
    if policy == ForkFinal::All {
        return true;
    }
    if policy == ForkFinal::None || state::samples_taken() == at_fork {
        return false;
    }
    // Sampled or Lived, and the child sampled. The clock only then (the
    // first read of the clock's page costs a child a page fault).
    policy != ForkFinal::Lived
        || crate::sys::clock_ns(libc::CLOCK_MONOTONIC)
            .saturating_sub(FORK_RECORD.forked_at_ns.load(Relaxed))
            >= FORK_FINAL_MIN_LIFE_NS
}

#[unsafe(link_section = ".heapsample.child")]
extern "C" fn at_exit() {
    if crate::attachment::state() == crate::attachment::DETACHED {
        return; // detached: the program runs as if never profiled
    }
    let _guard = tls::Guard::enter();
    let config = state::config();
    let wanted = exit_dump_wanted(config);
    // The exit dump is the last one: writing it (or closing, without one)
    // refuses every dump that other threads might still start. A process
    // that never had another thread has none to refuse (and closing would
    // cost a forked child a copy-on-write fault).
    let written = if wanted && config.prof_final && !config.prof_prefix.is_empty() {
        dump_sequence::write_dump(Trigger::Final, None).ok()
    } else {
        if !crate::sys::single_threaded() {
            dump_sequence::close();
        }
        None
    };
    if wanted && config.prof_leak {
        let dump = match &written {
            Some((_, dump)) => dump.clone(),
            None => crate::dump_assembly::assemble(Trigger::Final),
        };
        print_leak_summary(&dump, written.as_ref().map(|(path, _)| path.as_str()));
    }
}

/// jemalloc-style leak lines: the estimated live heap at exit.
fn print_leak_summary(dump: &heapsample_format::Dump, path: Option<&str>) {
    let (mut bytes, mut objects, mut contexts) = (0.0, 0.0, 0u64);
    for stack in dump.stacks.iter().filter(|s| s.live_objects > 0) {
        objects += stack.live.objects;
        bytes += stack.live.bytes;
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
//
// A process that never had a second thread (a pre-fork server's master, a
// shell) takes no profiler lock around fork: nobody else can hold one, and
// the forking thread holds none outside its guard. Its fork handlers then
// write nothing in the parent (after its first fork) and, in the child,
// only what the child must change, since every page they wrote would cost
// parent or child a copy-on-write fault per fork.
//
// What a forked child runs of the library (`fork_child`, with what it
// inlines, and `at_exit`) lives in its own section, `.heapsample.child`, which the
// linker places between `.text` and `.plt`: a child's first touch of that
// code maps the PLT's page too (the kernel maps a file's pages around a fault
// 64 KiB at a time), which the library's destructor calls `__cxa_finalize`
// through. Spread over `.text`, the same code cost a quiet child three page
// faults instead of one.

extern "C" fn fork_prepare() {
    // A child of a profiled process that forks in turn draws its own
    // identity first, so its children name it as their parent.
    let _ = process::identity();
    let state = tls::current();
    let take_locks = state.guarded() || !crate::sys::single_threaded();
    if take_locks {
        // Allocations by other fork handlers pass through unsampled while
        // the locks are held.
        state.set_flag(tls::FLAG_GUARD | tls::FLAG_FORK_LOCKED, true);
    }
    // Once per process, before its first fork: make the tables (children
    // inherit them, and the rule cache is shared with them; not once
    // detached) and map the stack index's pages (never written pages map
    // the zero page), so that children inherit the mappings: a child's probe
    // would otherwise fault on the page it reads and again on the page it
    // writes. Not the rule cache's untouched pages: its read view is a file
    // mapping, whose pages the kernel maps 64 KiB around a fault, and
    // children inherit the pages this process has read; mapping all 64 cost
    // every fork and every child's exit their page-table entries (a quiet
    // child 3–4.6 µs, a fork 0.6–1.3 µs) for at most 4 faults of a child that
    // reads rules only its siblings wrote.
    if crate::attachment::state() != crate::attachment::DETACHED {
        table_setup::ensure();
    }
    STACKS.map_index_for_children();
    // The CPU's CRC instructions, which a dump of more than one chunk asks
    // about (several `cpuid`s: tens of microseconds in a virtual machine),
    // detected once in the parent so that children inherit the answer; a
    // process that never forks asks only if it writes such a dump.
    crate::arch::detect_crc_instructions();
    if take_locks {
        // Not the dump lock: a dump in progress must not delay fork.
        modules::lock_for_fork();
        threads::lock_for_fork();
        STACKS.lock_for_fork();
        table_setup::lock_for_fork();
        own_heap::lock_for_fork();
    }
}

extern "C" fn fork_parent() {
    let state = tls::current();
    if state.flags.load(Relaxed) & tls::FLAG_FORK_LOCKED != 0 {
        // SAFETY: each lock was taken by fork_prepare on this thread.
        unsafe {
            own_heap::unlock_after_fork();
            table_setup::unlock_after_fork();
            STACKS.unlock_after_fork();
            threads::unlock_in_parent();
            modules::unlock_after_fork();
        }
        state.set_flag(tls::FLAG_GUARD | tls::FLAG_FORK_LOCKED, false);
    }
}

/// A forked child's sampling must not repeat its siblings': the thread that
/// survived the fork gets a generator seeded from its new `pid`.
fn reseed_forking_thread(pid: u32) {
    let state = tls::current();
    let seed = crate::sampling_law::seed(state as *const tls::ThreadState as usize, pid);
    if state.sampler.reseed_after_fork(seed) {
        state.set_flag(tls::FLAG_REDRAW, true);
    }
}

#[unsafe(link_section = ".heapsample.child")]
extern "C" fn fork_child() {
    crate::spin_lock::forget_thread_id();
    let state = tls::current();
    let locked = state.flags.load(Relaxed) & tls::FLAG_FORK_LOCKED != 0;
    if locked {
        // SAFETY: the locks were taken by fork_prepare in the parent; only
        // this thread exists in the child.
        unsafe {
            own_heap::unlock_after_fork();
            table_setup::unlock_after_fork();
            STACKS.unlock_after_fork();
            threads::reset_in_child();
            modules::unlock_after_fork();
        }
    }
    // SAFETY: once per fork, in the child.
    unsafe { dump_sequence::reset_in_child() };
    dump_thread::reset_in_child();
    triggers::reset_in_child();
    // The fork time, read here and by the instruction: written by the
    // parent's prepare handler it cost the parent a copy-on-write fault per
    // fork (the page the previous fork write-protected), and read through
    // the vDSO it would cost the child a fault on the vDSO's code.
    let forked_at_ns = crate::arch::monotonic_ns_by_syscall();
    let record = &FORK_RECORD;
    record
        .samples_at_fork
        .store(state::samples_taken(), Relaxed);
    record.forked_at_ns.store(forked_at_ns, Relaxed);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    record.pid.store(pid, Relaxed);
    process::mark_identity_inherited();
    if state::exact() {
        // The child's peak is its own: from the heap it inherited, at the fork.
        state::restart_peak(forked_at_ns);
    }
    reseed_forking_thread(pid);
    crate::clock::after_fork_child();
    state.set_flag(tls::FLAG_FORKED, true);
    if locked {
        state.set_flag(tls::FLAG_GUARD | tls::FLAG_FORK_LOCKED, false);
    }
}
