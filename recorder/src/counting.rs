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
use core::sync::atomic::Ordering::Relaxed;

use crate::live_table::LIVE;
use crate::tls::{self, ThreadState};
use crate::{next_alloc, sample, state};

/// Count an allocation of `size` requested bytes that returned `pointer`.
///
/// # Safety
/// `pointer` is null or a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn after_alloc(pointer: *mut c_void, size: usize) {
    if pointer.is_null() {
        return;
    }
    let state = tls::current();
    ThreadState::bump(&state.allocations, 1);
    let remaining = state
        .bytes_until_sample
        .load(Relaxed)
        .wrapping_sub(size as i64);
    state.bytes_until_sample.store(remaining, Relaxed);
    if remaining <= 0 {
        // SAFETY: forwarded from our caller's contract.
        unsafe { sample::on_countdown_expired(pointer, size) };
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
        unsafe { sample::on_sampled_free(pointer) };
    }
}

/// `prof_exact`: add (`sign` 1) or remove (-1) the usable size of a live
/// allocation from the thread's exact live heap.
///
/// # Safety
/// `pointer` is a live allocation of the next allocator.
#[inline(always)]
pub unsafe fn count_usable(pointer: *mut c_void, sign: i64) {
    // SAFETY: per the contract.
    let usable = unsafe { next_alloc::usable_size(pointer) } as i64;
    ThreadState::bump_signed(&tls::current().live_usable_delta, sign * usable);
}

/// [`after_alloc`] for any mode: counts usable bytes under `prof_exact`.
///
/// # Safety
/// As for [`after_alloc`].
#[inline(always)]
pub unsafe fn after_alloc_any(pointer: *mut c_void, size: usize) {
    if state::exact() {
        // SAFETY: per the contract.
        return unsafe { after_alloc_exact(pointer, size) };
    }
    // SAFETY: per the contract.
    unsafe { after_alloc(pointer, size) }
}

/// [`after_alloc`] under `prof_exact`, where every allocation must reach
/// this slow path: the fast path's countdown stays 0 and the real one is
/// kept in `exact_countdown`, swapped in around the usual logic. (A nested
/// call from inside the profiler finds 0 there and draws afresh, which the
/// memoryless countdown allows.)
///
/// # Safety
/// As for [`after_alloc`].
#[cold]
pub unsafe fn after_alloc_exact(pointer: *mut c_void, size: usize) {
    if !pointer.is_null() {
        // SAFETY: a live allocation.
        unsafe { count_usable(pointer, 1) };
    }
    let state = tls::current();
    let countdown = state.exact_countdown.load(Relaxed);
    if !pointer.is_null() && countdown > size as i64 {
        // Not crossing: count here (bytes_allocated = bytes_base while the
        // fast path's countdown is 0).
        state
            .exact_countdown
            .store(countdown - size as i64, Relaxed);
        ThreadState::bump(&state.allocations, 1);
        ThreadState::bump(&state.bytes_base, size as u64);
        return;
    }
    state.set_countdown(state.exact_countdown.swap(0, Relaxed));
    // SAFETY: per the contract.
    unsafe { after_alloc(pointer, size) };
    let remaining = state.bytes_until_sample.load(Relaxed);
    state.set_countdown(0);
    state.exact_countdown.store(remaining, Relaxed);
}

/// [`before_free`] for any mode: counts the release and its usable bytes
/// under `prof_exact`.
///
/// # Safety
/// As for [`before_free`].
#[inline(always)]
pub unsafe fn before_free_any(pointer: *mut c_void) {
    if state::exact() {
        ThreadState::bump(&tls::current().frees, 1);
        // SAFETY: a live allocation.
        unsafe { count_usable(pointer, -1) };
    }
    // SAFETY: per the contract.
    unsafe { before_free(pointer) }
}
