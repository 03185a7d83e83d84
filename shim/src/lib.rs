//! `libheapsample.so`: the LD_PRELOAD heap profiler.
//!
//! This crate is only the C face of [`heapsample_recorder`]:
//! - `interpose.rs`: the malloc family, exported under their C names.
//! - `cxx.rs`: C++ `operator new`/`delete`, one `jmp` each through a route;
//!   the logic (forward, count only when the next definition does not itself
//!   call `malloc`) is `heapsample_recorder::cxx`.
//! - `dl.rs`: `dlclose`, so stacks in unloaded libraries still symbolize.
//! - `frames.rs`: libgcc's `__register_frame*`/`__deregister_frame*`, so the
//!   walk knows the frames a JIT registered without asking libgcc.
//! - `api.rs`: `heapsample_dump`, `heapsample_set_active`, `heapsample_reset`.
//! - `attach.rs`: the entry points of the `heapsample` command (attach,
//!   detach, status, dump) and the exports an attach redirects.
//! - `signals.rs`: `sigaction`/`signal`, to notice a program taking the dump signal.
//! - `allocator.rs`: the Rust global allocator of the shim's own code: the
//!   recorder's own heap (mmap), never the allocator being profiled.
//!
//! The constructor starts the profiler and registers the exit dump, unless
//! the library was loaded late (`dlopen`, by `heapsample attach`): then it
//! stays inert until `heapsample_attach`.

mod allocator;
mod api;
mod attach;
mod cxx;
mod dl;
mod frames;
mod interpose;
mod signals;

extern "C" fn on_load() {
    if heapsample_recorder::takeover::loaded_late(attach::own_code()) {
        return;
    }
    // Preloaded: the program's frame registrations reach `frames.rs`.
    heapsample_recorder::backtrace::sees_all_frame_registrations(true);
    heapsample_recorder::on_library_load();
}

#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;
