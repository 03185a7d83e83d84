//! C++ `operator new` / `operator delete`: what the shim's exports do.
//!
//! With libstdc++'s definitions these reach the shim through `malloc` and
//! `free` anyway, so the exports only forward: each export is a single
//! `jmp` through its route, which starts at a resolving wrapper and, once the
//! next definition is known to need no counting, points straight at it
//! (like a lazily bound PLT slot). jemalloc and tcmalloc define their own
//! operators, which mostly do not call `malloc`; when the next definition
//! lives in the same object as the next `malloc`, the wrapper counts the
//! allocation itself, unless the operator called back into the interposed
//! malloc family (jemalloc's aligned `new` calls `aligned_alloc` through its
//! PLT), which counted it already. Without any next definition (a program
//! with no C++ runtime), `new` falls back to malloc/memalign and `delete` to
//! free.
//!
//! Owns the rule "each allocation and release is counted once" and the
//! routes of the operators (a counting `operator new` at short periods:
//! its wrapper's naked stub, which passes the export's entry on so samples
//! start at the caller; see `routes`).
//!
//! Runs inside operator new/delete: no lock, no allocation; the first call
//! of each operator starts the profiler and looks the next definition up
//! (dlsym, under the thread's guard). Each wrapper opens a hook scope
//! (`spin_lock::enter_hook`), as the routes do.

use core::ffi::{CStr, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering, Ordering::Relaxed};

use crate::backtrace::{self, HookEntry};
use crate::call_accounting::{after_alloc_any, before_free_any};
use crate::tls::{self, ThreadState};
use crate::{contracts, next_alloc, routes, sampling_law, spin_lock, state, sys};

const UNKNOWN: u8 = 0;
const FORWARD_ONLY: u8 = 1;
const COUNT_HERE: u8 = 2;

/// The next definition of one operator, looked up on first use, and
/// whether the export must count what it does.
pub struct NextOperator {
    /// The mangled name, NUL-terminated.
    name: &'static str,
    address: AtomicPtr<c_void>,
    counting: AtomicU8,
}

/// Where an operator's export jumps: its resolving (and, when needed,
/// counting) wrapper at first, the next definition once nothing is left to
/// count.
pub type OperatorRoute = AtomicPtr<()>;

impl NextOperator {
    /// An operator not looked up yet; `name` ends with a NUL.
    pub const fn new(name: &'static str) -> Self {
        NextOperator {
            name,
            address: AtomicPtr::new(core::ptr::null_mut()),
            counting: AtomicU8::new(UNKNOWN),
        }
    }

    /// An operator already known to be at `address` (tests).
    pub const fn known(address: *mut c_void, count_here: bool) -> Self {
        NextOperator {
            name: "\0",
            address: AtomicPtr::new(address),
            counting: AtomicU8::new(if count_here { COUNT_HERE } else { FORWARD_ONLY }),
        }
    }

    /// The next definition and whether the export must count, or None when
    /// no later object defines the operator. Starts the profiler first.
    pub fn get(&self) -> Option<(*mut c_void, bool)> {
        let known = self.counting.load(Ordering::Acquire);
        if known != UNKNOWN {
            let address = self.address.load(Relaxed);
            return (!address.is_null()).then_some((address, known == COUNT_HERE));
        }
        routes::start();
        let Ok(name) = CStr::from_bytes_with_nul(self.name.as_bytes()) else {
            return None;
        };
        let address = {
            let _guard = tls::Guard::enter();
            sys::next_definition(name)
        };
        let counting = if !address.is_null() && same_object_as_malloc(address) {
            COUNT_HERE
        } else {
            FORWARD_ONLY
        };
        self.address.store(address, Relaxed);
        self.counting.store(counting, Ordering::Release);
        (!address.is_null()).then_some((address, counting == COUNT_HERE))
    }
}

fn same_object_as_malloc(address: *mut c_void) -> bool {
    let malloc = next_alloc::NEXT.malloc.address() as usize;
    match (
        backtrace::object_range(address as usize),
        backtrace::object_range(malloc),
    ) {
        (Some(operator), Some(allocator)) => operator == allocator,
        _ => false,
    }
}

/// What an `operator new` export's wrapper was called with beyond the
/// operator's arguments.
pub struct NewCall {
    /// Where the export was entered (unknown unless the route is the stub).
    pub entry: HookEntry,
    /// The wrapper behind a naked stub that passes the entry on: the route
    /// while the wrapper counts at short periods (see
    /// [`routes::ENTRY_STUB_MAX_LG`]).
    pub with_entry: *mut (),
}

/// The body of an `operator new` export's wrapper: resolve `next`, then
/// forward through `forward` (given the next definition's address) and
/// count when needed. Once nothing is left to count, `route` is pointed at
/// the next definition so later calls skip the wrapper; while counting at
/// short periods, at `call.with_entry`, so samples start at the caller.
/// Without a next definition, allocates `size` bytes aligned to `alignment`
/// (0: default) with the C functions; a failure then aborts unless
/// `nothrow` (there is no `std::bad_alloc` to throw).
///
/// # Safety
/// `forward` calls the next definition with the caller's arguments; the
/// C++ contract of the operator; `call.entry` as [`HookEntry::new`]
/// requires.
pub unsafe fn operator_new(
    next: &NextOperator,
    route: &OperatorRoute,
    size: usize,
    alignment: usize,
    nothrow: bool,
    forward: impl FnOnce(*mut c_void) -> *mut c_void,
    call: NewCall,
) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    let Some((address, count_here)) = next.get() else {
        // SAFETY: plain C allocation as a fallback.
        let pointer = unsafe {
            if alignment > 16 {
                contracts::memalign(alignment, size)
            } else {
                routes::malloc(size)
            }
        };
        if pointer.is_null() && !nothrow {
            out_of_memory();
        }
        return pointer;
    };
    if !count_here || !state::profiling() {
        route.store(address.cast(), Ordering::Release);
        return forward(address);
    }
    if sampling_law::lg_period() <= routes::ENTRY_STUB_MAX_LG
        && route.load(Relaxed) != call.with_entry
    {
        route.store(call.with_entry, Ordering::Release);
    }
    let counted = external_call_begin();
    let pointer = forward(address);
    // SAFETY: just returned by the next operator new; the entry per our
    // contract.
    unsafe { count_external_alloc(counted, pointer, size, call.entry) };
    pointer
}

/// The body of an `operator delete` export's wrapper (see [`operator_new`]).
///
/// # Safety
/// `forward` calls the next definition with the caller's arguments;
/// `pointer` is null or a live allocation of operator new.
pub unsafe fn operator_delete(
    next: &NextOperator,
    route: &OperatorRoute,
    pointer: *mut c_void,
    forward: impl FnOnce(*mut c_void),
) {
    let _hook = spin_lock::enter_hook();
    let Some((address, count_here)) = next.get() else {
        // SAFETY: memory from the fallback of operator new (malloc).
        return unsafe { routes::free(pointer) };
    };
    if !count_here || !state::profiling() {
        route.store(address.cast(), Ordering::Release);
        return forward(address);
    }
    // SAFETY: the caller's live pointer, released right after.
    let call = unsafe { external_free_begin(pointer) };
    forward(address);
    external_free_end(call);
}

fn out_of_memory() -> ! {
    // Only reached when no C++ runtime defines the operator, so there is no
    // std::bad_alloc to throw: fail like an uncaught one would.
    std::process::abort()
}

/// What the calling thread had counted before forwarding to an allocator's
/// own `operator new`/`delete`, to tell afterwards whether that operator
/// called back into the interposed malloc family (jemalloc's aligned `new`
/// calls `aligned_alloc` through its PLT) and was therefore counted already.
struct ExternalCall {
    allocations: u64,
    frees: u64,
    usable: i64,
}

/// Note the thread's counters before forwarding to an external operator.
fn external_call_begin() -> ExternalCall {
    let state = tls::current();
    ExternalCall {
        allocations: state.allocations.load(Relaxed),
        frees: state.frees.load(Relaxed),
        usable: 0,
    }
}

/// After an allocator's own `operator new` returned `pointer`: count it
/// unless a nested malloc-family call already did.
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
unsafe fn count_external_alloc(
    call: ExternalCall,
    pointer: *mut c_void,
    size: usize,
    entry: HookEntry,
) {
    if state::profiling() && tls::current().allocations.load(Relaxed) == call.allocations {
        // SAFETY: returned by the next allocator just now; the entry per our
        // caller's contract.
        unsafe { after_alloc_any(pointer, size, entry) };
    }
}

/// Before an allocator's own `operator delete` releases `pointer`: count the
/// release and forget a live sample (it must happen before the memory is
/// released). Pair with [`external_free_end`].
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
unsafe fn external_free_begin(pointer: *mut c_void) -> Option<ExternalCall> {
    if pointer.is_null() || !state::profiling() {
        return None;
    }
    let usable = if state::exact() {
        // SAFETY: still allocated: the real delete comes after.
        unsafe { next_alloc::usable_size(pointer) as i64 }
    } else {
        0
    };
    // SAFETY: a live allocation, released right after.
    unsafe { before_free_any(pointer) };
    let mut call = external_call_begin();
    call.usable = usable;
    Some(call)
}

/// After the operator returned: if it called the interposed `free` itself,
/// that call counted the release again; undo our count.
fn external_free_end(call: Option<ExternalCall>) {
    let Some(call) = call else { return };
    let state = tls::current();
    if state.frees.load(Relaxed) != call.frees {
        ThreadState::bump(&state.frees, u64::MAX); // -1
        crate::state::exact_live_up(call.usable as u64);
    }
}
