//! `libheapsample.so`: the LD_PRELOAD heap profiler.
//!
//! This crate is only the C face of [`heapsample_recorder`]:
//! - `interpose.rs`: the malloc family, exported under their C names.
//! - `cxx.rs`: C++ `operator new`/`delete`, forwarded to the next definition
//!   and counted only when that definition does not itself call `malloc`.
//! - `dl.rs`: `dlclose`, so stacks in unloaded libraries still symbolize.
//! - `api.rs`: `heapsample_dump`, `heapsample_set_active`, `heapsample_reset`.
//! - `signals.rs`: `sigaction`/`signal`, to notice a program taking the dump signal.
//! - `allocator.rs`: the Rust global allocator of the shim's own code, which
//!   goes straight to the next allocator and is never sampled.
//!
//! The constructor starts the profiler and registers the exit dump.

mod allocator;
mod api;
mod cxx;
mod dl;
mod interpose;
mod signals;

extern "C" fn on_load() {
    heapsample_recorder::on_library_load();
}

#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;
