//! Accounting for C++ `operator new`/`delete` that an allocator defines
//! itself (jemalloc, tcmalloc): such operators mostly do not call the
//! interposed malloc family, so the shim's exports count them here, unless
//! the operator called back into the malloc family (jemalloc's aligned
//! `new` calls `aligned_alloc` through its PLT), which counted it already.
//!
//! Owns the rule "each allocation and release is counted once".
//!
//! Runs inside operator new/delete: no lock, no syscall, no allocation.

use core::ffi::c_void;
use core::sync::atomic::Ordering::Relaxed;

use crate::counting::{after_alloc_any, before_free_any};
use crate::tls::{self, ThreadState};
use crate::{next_alloc, state};

/// What the calling thread had counted before forwarding to an allocator's
/// own `operator new`/`delete`, to tell afterwards whether that operator
/// called back into the interposed malloc family (jemalloc's aligned `new`
/// calls `aligned_alloc` through its PLT) and was therefore counted already.
pub struct ExternalCall {
    allocations: u64,
    frees: u64,
    usable: i64,
}

/// Note the thread's counters before forwarding to an external operator.
pub fn external_call_begin() -> ExternalCall {
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
pub unsafe fn count_external_alloc(call: ExternalCall, pointer: *mut c_void, size: usize) {
    if state::profiling() && tls::current().allocations.load(Relaxed) == call.allocations {
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(pointer, size) };
    }
}

/// Before an allocator's own `operator delete` releases `pointer`: count the
/// release and forget a live sample (it must happen before the memory is
/// released). Pair with [`external_free_end`].
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
pub unsafe fn external_free_begin(pointer: *mut c_void) -> Option<ExternalCall> {
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
pub fn external_free_end(call: Option<ExternalCall>) {
    let Some(call) = call else { return };
    let state = tls::current();
    if state.frees.load(Relaxed) != call.frees {
        ThreadState::bump(&state.frees, u64::MAX); // -1
        ThreadState::bump_signed(&state.live_usable_delta, call.usable);
    }
}
