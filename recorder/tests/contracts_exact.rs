//! The routes under `prof_exact` at the recorder level (this test process
//! starts the profiler with `PROF_CONF=prof_exact:true`): every allocation
//! and release is counted once, with its usable bytes.

use core::ffi::c_void;
use core::sync::atomic::Ordering::Relaxed;
use std::sync::Once;

use heapsample_recorder::{contracts, cxx, next_alloc, routes, state, tls};

/// The live heap is one counter of the whole process: the tests that read
/// it take turns.
static LIVE_HEAP: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn start() -> std::sync::MutexGuard<'static, ()> {
    static START: Once = Once::new();
    START.call_once(|| {
        // SAFETY: set before the profiler reads it, inside a Once, before
        // any test of this process calls into the recorder.
        unsafe { std::env::set_var("PROF_CONF", "prof_exact:true") };
        assert!(routes::start());
    });
    assert!(state::profiling() && state::exact(), "prof_exact is on");
    LIVE_HEAP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// (allocations, frees) counted on this thread, and the live usable bytes.
fn counts() -> (u64, u64, i64) {
    let state = tls::current();
    (
        state.allocations.load(Relaxed),
        state.frees.load(Relaxed),
        state::exact_live(),
    )
}

#[test]
fn malloc_free_calloc_realloc_each_count_once_with_usable_bytes() {
    let _turn = start();
    let before = counts();
    // SAFETY: the C contracts.
    unsafe {
        let a = routes::malloc(100);
        let usable_a = contracts::malloc_usable_size(a) as i64;
        assert_eq!(counts(), (before.0 + 1, before.1, before.2 + usable_a));
        let b = contracts::calloc(10, 10);
        let usable_b = contracts::malloc_usable_size(b) as i64;
        let c = contracts::realloc(a, 5000);
        let usable_c = contracts::malloc_usable_size(c) as i64;
        assert_eq!(
            counts(),
            (before.0 + 3, before.1 + 1, before.2 + usable_b + usable_c),
            "realloc counts the release of the old block and the new block"
        );
        routes::free(b);
        routes::free(c);
        routes::free(core::ptr::null_mut());
    }
    assert_eq!(counts(), (before.0 + 3, before.1 + 3, before.2));
}

#[test]
fn a_reentrant_operator_delete_is_counted_once() {
    let _turn = start();
    extern "C-unwind" fn reentrant_delete(pointer: *mut c_void) {
        // SAFETY: allocated by the next malloc; counted by routes::free.
        unsafe { routes::free(pointer) }
    }
    extern "C-unwind" fn independent_delete(pointer: *mut c_void) {
        // SAFETY: allocated by the next malloc.
        unsafe { next_alloc::free(pointer) }
    }
    for operator in [
        reentrant_delete as extern "C-unwind" fn(*mut c_void),
        independent_delete,
    ] {
        // SAFETY: a block of the next allocator, forgotten by nobody yet.
        let pointer = unsafe { routes::malloc(64) };
        let before = counts();
        let next = cxx::NextOperator::known(operator as *mut c_void, true);
        let route = cxx::OperatorRoute::new(core::ptr::null_mut());
        // SAFETY: forwards to the operator with the caller's pointer.
        unsafe { cxx::operator_delete(&next, &route, pointer, |_| operator(pointer)) };
        let after = counts();
        assert_eq!(after.1, before.1 + 1, "one release, not two");
        assert!(
            after.2 < before.2,
            "its usable bytes left the live heap once"
        );
    }
}
