//! The profiler behind `libheapsample.so`.
//!
//! This library holds every mechanism; the `heapsample` cdylib only exports
//! the C symbols and calls into [`hooks`]. Keeping the two apart lets the
//! logic be tested without interposing the test runner.
//!
//! What is where:
//! - [`hooks`]: bodies of malloc, free, calloc, realloc, ... and the routes
//!   the exported symbols jump through.
//! - [`fast_path`]: malloc's and free's profiled fast paths, in assembly.
//! - [`next_alloc`]: the next allocator (`dlsym(RTLD_NEXT)`) and the
//!   bootstrap arena used while looking it up.
//! - [`tls`]: the initial-exec per-thread block and the guard.
//! - [`sampling`]: the exponential byte countdown and its generator.
//! - [`profiler`]: start-up, the sample event, exit dump, fork handlers.
//! - [`threads`]: thread setup, registry, exit flush, exact counters.
//! - [`backtrace`]: stack capture without the shim's own frames.
//! - [`stack_table`]: distinct stacks and their sampled counts.
//! - [`live_table`]: lock-free table of live sampled addresses.
//! - [`modules`]: loaded objects and their epochs across dlclose.
//! - [`writer`]: dump assembly, file names, atomic writes.
//! - [`triggers`]: interval, high-water and signal dump triggers.
//! - [`dumper`]: the background thread that writes triggered dumps.
//! - [`api`]: `heapsample_dump`, `heapsample_set_active`, `heapsample_reset`.
//! - [`config`]: PROF_CONF parsing.
//! - [`warn`]: one-line `<heapsample>:` messages.
//! - [`own_heap`]: the profiler's own memory (mmap), never the profiled allocator.
//! - [`spin_lock`], [`sys`]: small building blocks.

pub mod api;
pub mod backtrace;
pub mod config;
pub mod dumper;
pub mod fast_path;
pub mod hooks;
pub mod live_table;
pub mod modules;
pub mod next_alloc;
pub mod own_heap;
pub mod profiler;
pub mod sampling;
pub mod spin_lock;
pub mod stack_table;
pub mod sys;
pub mod threads;
pub mod tls;
pub mod triggers;
pub mod warn;
pub mod writer;

pub use profiler::on_library_load;
