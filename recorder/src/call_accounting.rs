//! Counting what the allocation paths did: the exact counters, the
//! sampling countdown, and handing a crossing to the sample event.
//!
//! Owns the per-call accounting shared by every route: an allocation is
//! counted after it succeeded, a possibly sampled pointer is forgotten
//! before it is released, and under `prof_exact` usable bytes and frees are
//! counted too. The common path touches only the calling thread's block;
//! everything beyond counting is in the `#[cold]` sample event.
//!
//! Runs inside malloc: no lock, no syscall, no allocation here (the sample
//! event has its own rules, see `sample`).

use core::ffi::c_void;

use crate::backtrace::HookEntry;
use crate::live_table::LIVE;
use crate::tls::{self, ThreadState};
use crate::{next_alloc, sample_event, state};

/// A route entered from an allocating fast path (or its Rust mirror) with
/// the request's countdown units taken: give them back, so that the route
/// counts the allocation its own way (only if it succeeds).
#[inline(always)]
pub fn give_back_units(size: usize) {
    tls::current().sampler.give_back(size);
}

/// Count an allocation of `size` requested bytes that returned `pointer`, in
/// the hook entered at `entry` (where a sample's stack starts).
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn after_alloc(pointer: *mut c_void, size: usize, entry: HookEntry) {
    if pointer.is_null() {
        return;
    }
    let state = tls::current();
    ThreadState::bump(&state.allocations, 1);
    if state.sampler.count(size) {
        // SAFETY: forwarded from our caller's contract.
        unsafe { sample_event::on_countdown_expired(state, pointer, size, entry) };
    }
}

/// Forget `pointer` (non-null) if it is a live sample, before the real free.
/// Releases are counted only under `prof_exact` (see [`before_free_any`]):
/// the default free path touches no per-thread state.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn before_free(pointer: *mut c_void) {
    if LIVE.may_contain(pointer as usize) {
        // SAFETY: forwarded from our caller's contract.
        let _ = unsafe { sample_event::on_sampled_free(pointer) };
    }
}

/// `prof_exact`: add the usable size of a new allocation to the exact live
/// heap.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn count_usable(pointer: *mut c_void) {
    // SAFETY: per the contract.
    let usable = unsafe { next_alloc::usable_size(pointer) } as u64;
    state::exact_live_up(usable);
}

/// [`after_alloc`] for any mode: counts usable bytes under `prof_exact`,
/// whose routes never know their entry (an entry argument would cost every
/// call there a few instructions; its samples are rare).
///
/// # Safety
/// As for [`after_alloc`].
#[inline(always)]
pub unsafe fn after_alloc_any(pointer: *mut c_void, size: usize, entry: HookEntry) {
    if state::exact() {
        // SAFETY: per the contract.
        return unsafe { after_alloc_exact_cold(pointer, size) };
    }
    // SAFETY: per the contract.
    unsafe { after_alloc(pointer, size, entry) }
}

/// [`after_alloc_exact`] out of line, for the routes shared with the
/// other modes.
///
/// # Safety
/// As for [`after_alloc`].
#[cold]
unsafe fn after_alloc_exact_cold(pointer: *mut c_void, size: usize) {
    // SAFETY: per the contract.
    unsafe { after_alloc_exact(tls::current(), pointer, size) }
}

/// [`after_alloc`] under `prof_exact`, where every allocation must reach
/// this slow path: the fast path's countdown stays 0 and the real one is
/// parked in the [`crate::thread_countdown::Sampler`], which swaps it in around the
/// usual logic at a crossing.
///
/// # Safety
/// As for [`after_alloc`]; `state` is the calling thread's.
#[inline(always)]
pub unsafe fn after_alloc_exact(state: &ThreadState, pointer: *mut c_void, size: usize) {
    if pointer.is_null() {
        return;
    }
    // SAFETY: a live allocation.
    unsafe { count_usable(pointer) };
    if state.sampler.exact_take_without_crossing(size) {
        ThreadState::bump(&state.allocations, 1);
        return;
    }
    state.sampler.unpark();
    // SAFETY: per the contract.
    unsafe { after_alloc(pointer, size, HookEntry::UNKNOWN) };
    state.sampler.park();
}

/// [`before_free`] for any mode: counts the release and its usable bytes
/// under `prof_exact`.
///
/// # Safety
/// As for [`before_free`].
#[inline(always)]
pub unsafe fn before_free_any(pointer: *mut c_void) {
    if state::exact() {
        // SAFETY: per the contract.
        return unsafe { before_free_exact(pointer) };
    }
    // SAFETY: per the contract.
    unsafe { before_free(pointer) }
}

/// [`before_free_any`] under `prof_exact`: a sampled object's usable size
/// comes from its live-table entry (every object, when every allocation is
/// sampled), any other's from the allocator.
///
/// # Safety
/// As for [`before_free`].
#[inline(always)]
pub unsafe fn before_free_exact(pointer: *mut c_void) {
    let state = tls::current();
    ThreadState::bump(&state.frees, 1);
    let sampled = if LIVE.may_contain(pointer as usize) {
        // SAFETY: forwarded from our caller's contract.
        unsafe { sample_event::on_sampled_free(pointer) }
    } else {
        None
    };
    // SAFETY: a live allocation.
    let usable = sampled.unwrap_or_else(|| unsafe { next_alloc::usable_size(pointer) } as u64);
    state::exact_live_down(usable);
}
