//! The profiler behind `libheapsample.so`.
//!
//! This library holds every mechanism; the `heapsample` cdylib only exports
//! the C symbols and calls into [`contracts`], [`routes`] and [`cxx`].
//! Keeping the two apart lets the logic be tested without interposing the
//! test runner.
//!
//! Layers, each importing only from the layers above it in this list (and
//! within its own layer without cycles; `tests/layers.rs` checks it). Code
//! that runs inside malloc lives in layers 0–8 and never imports layer 9,
//! which does I/O.
//!
//! 0. leaves: [`arch`] (what differs by processor), [`sys`] (mmap, errno), [`syscalls`] (system calls made
//!    without their libc wrappers), [`clock`] (the time of sample events),
//!    [`warn`](mod@warn), [`config`] (PROF_CONF, the `heapsample-options`
//!    crate's, re-exported),
//!    [`sampling_law`] (the law of the countdown), [`thread_countdown`] (one thread's
//!    countdown), [`nursery`] (a table's page for a forked child's entries),
//!    [`chunks`] (table entries that never move), [`record_counters`] (one record
//!    of sampled counts and weights).
//! 1. [`tls`]: the initial-exec per-thread block and the guard.
//! 2. [`spin_lock`] (and the lock order), which keeps each thread's kernel
//!    id in the thread's block.
//! 3. tables: [`live_table`], [`stack_threads`], [`lifetimes`],
//!    [`stack_table`], [`object_ids`], [`modules`], [`backtrace`],
//!    [`walk_ends`] (why each sample's walk ended), [`own_heap`].
//! 4. [`next_alloc`]: the next allocator and the bootstrap arena.
//! 5. [`state`]: the process-wide mode, flags, configuration and counters,
//!    behind functions; [`attachment`]: preloaded or attached, since when.
//! 6. events: [`sample_event`] (the sample event), [`threads`] (set-up, registry,
//!    exit flush), [`triggers`] (when a dump is due), [`memory_limit`]
//!    (the cgroup's use against its limit), [`dump_thread`] (the request queue
//!    and the thread; what it writes is registered from layer 9),
//!    [`table_setup`] (the tables, made at the first sample).
//! 7. dispatch: [`startup`], [`call_accounting`], [`routes`].
//! 8. hooks: [`contracts`] (the rest of the malloc family), [`fast_path`]
//!    (malloc's and free's assembly), [`cxx`] (C++ operator accounting).
//! 9. never inside malloc: [`process`] (the process's identity and fork
//!    record), [`process_context`] (where it runs: architecture,
//!    namespaces, cgroup), [`dump_assembly`] (what a dump holds),
//!    [`jitdump`] (the jitdump format), [`runtime_names`] (the perf map's
//!    and jitdump's names of JIT code in a dump),
//!    [`dump_file`] (writing one atomically), [`dump_series`] (the dumps
//!    this process keeps, thinned to their bounds), [`dump_sequence`] (when,
//!    in what order and under what name dumps are written), [`api`] (the C API),
//!    [`lifecycle`] (constructor, exit, fork), [`exec_final`] (which
//!    descendants started by `exec` write an exit dump), [`slots`]
//!    (relocation slots) and [`takeover`] (attach and detach).

pub mod api;
pub mod arch;
pub mod attachment;
pub mod backtrace;
pub mod chunks;
pub mod clock;
pub use heapsample_options::config;
pub mod call_accounting;
pub mod contracts;
pub mod cxx;
pub mod dump_assembly;
pub mod dump_file;
pub mod dump_sequence;
pub mod dump_series;
pub mod dump_thread;
pub mod exec_final;
pub mod fast_path;
pub mod jitdump;
pub mod lifecycle;
pub mod lifetimes;
pub mod live_table;
pub mod memory_limit;
pub mod modules;
pub mod next_alloc;
pub mod nursery;
pub mod object_ids;
pub mod own_heap;
pub mod process;
pub mod process_context;
pub mod record_counters;
pub mod routes;
pub mod runtime_names;
pub mod sample_event;
pub mod sampling_law;
pub mod slots;
pub mod spin_lock;
pub mod stack_table;
pub mod stack_threads;
pub mod startup;
pub mod state;
pub mod sys;
pub mod syscalls;
pub mod table_setup;
pub mod takeover;
pub mod thread_countdown;
pub mod threads;
pub mod tls;
pub mod triggers;
pub mod walk_ends;
pub mod warn;

pub use lifecycle::on_library_load;
