//! The malloc family's C contracts and the routes, at the recorder level:
//! the profiler is started in this test process (default options) and the
//! recorder's entry points are called directly. The test harness's own
//! allocations do not go through them, so each test thread's counters
//! change only by what the test does.

use core::ffi::c_void;
use core::sync::atomic::Ordering::Relaxed;

use heapsample_recorder::live_table::LIVE;
use heapsample_recorder::{contracts, cxx, next_alloc, routes, state, sys, tls};

fn start() {
    assert!(routes::start(), "the profiler must start");
    assert!(state::profiling(), "default options profile");
    assert!(!state::exact());
}

/// Allocation calls counted on this thread so far.
fn allocations() -> u64 {
    tls::current().allocations.load(Relaxed)
}

/// Large enough to be sampled with probability 1 - e^-128 at the default
/// mean period of 512 KiB.
const SURELY_SAMPLED: usize = 64 << 20;

#[test]
fn malloc_zero_does_what_the_allocator_does_and_is_counted() {
    start();
    let before = allocations();
    // SAFETY: the C contract of malloc/free.
    unsafe {
        let pointer = routes::malloc(0);
        assert!(!pointer.is_null(), "glibc's malloc(0) returns a block");
        assert_eq!(allocations(), before + 1);
        routes::free(pointer);
        routes::free(core::ptr::null_mut());
    }
    assert_eq!(allocations(), before + 1, "free counts no allocation");
}

#[test]
fn calloc_overflow_is_null_and_enomem_and_not_counted() {
    start();
    let before = allocations();
    sys::set_errno(0);
    // SAFETY: the C contract of calloc.
    let pointer = unsafe { contracts::calloc(usize::MAX / 2, 3) };
    assert!(pointer.is_null());
    assert_eq!(sys::errno(), libc::ENOMEM);
    assert_eq!(allocations(), before);
}

#[test]
fn calloc_zeroes_and_counts() {
    start();
    let before = allocations();
    // SAFETY: the C contract of calloc/free; 128 bytes are readable.
    unsafe {
        let pointer = contracts::calloc(16, 8).cast::<u8>();
        assert!(!pointer.is_null());
        assert!((0..128).all(|i| *pointer.add(i) == 0));
        routes::free(pointer.cast());
    }
    assert_eq!(allocations(), before + 1);
}

#[test]
fn realloc_null_grow_shrink_and_zero() {
    start();
    let before = allocations();
    // SAFETY: the C contract of realloc; sizes as allocated.
    unsafe {
        let pointer = contracts::realloc(core::ptr::null_mut(), 16).cast::<u8>();
        assert!(!pointer.is_null(), "realloc(NULL, n) allocates");
        for i in 0..16 {
            *pointer.add(i) = i as u8;
        }
        let grown = contracts::realloc(pointer.cast(), 100_000).cast::<u8>();
        assert!(!grown.is_null());
        assert!(
            (0..16).all(|i| *grown.add(i) == i as u8),
            "grow keeps contents"
        );
        let shrunk = contracts::realloc(grown.cast(), 8).cast::<u8>();
        assert!(!shrunk.is_null());
        assert!(
            (0..8).all(|i| *shrunk.add(i) == i as u8),
            "shrink keeps the prefix"
        );
        assert_eq!(
            allocations(),
            before + 3,
            "each realloc that returned memory"
        );
        let freed = contracts::realloc(shrunk.cast(), 0);
        assert!(
            freed.is_null(),
            "glibc's realloc(p, 0) frees and returns NULL"
        );
    }
    assert_eq!(allocations(), before + 3);
}

#[test]
fn reallocarray_overflow_keeps_the_block() {
    start();
    // SAFETY: the C contracts; the block stays valid after the failure.
    unsafe {
        let pointer = routes::malloc(32).cast::<u8>();
        *pointer = 7;
        let before = allocations();
        sys::set_errno(0);
        let result = contracts::reallocarray(pointer.cast(), usize::MAX / 4, 8);
        assert!(result.is_null());
        assert_eq!(sys::errno(), libc::ENOMEM);
        assert_eq!(*pointer, 7, "the original block is untouched");
        assert_eq!(allocations(), before);
        routes::free(pointer.cast());
    }
}

#[test]
fn alignments_are_honoured_or_refused_by_the_allocator() {
    start();
    let before = allocations();
    // SAFETY: the C contracts of the aligned allocators.
    unsafe {
        let mut out: *mut c_void = core::ptr::null_mut();
        assert_eq!(contracts::posix_memalign(&mut out, 64, 100), 0);
        assert_eq!(out as usize % 64, 0);
        routes::free(out);
        let marker = core::ptr::dangling_mut::<c_void>();
        let mut untouched = marker;
        assert_eq!(
            contracts::posix_memalign(&mut untouched, 24, 100),
            libc::EINVAL,
            "not a power of two"
        );
        assert_eq!(untouched, marker, "out is not written on failure");
        let aligned = contracts::aligned_alloc(4096, 4096);
        assert_eq!(aligned as usize % 4096, 0);
        routes::free(aligned);
        let memaligned = contracts::memalign(256, 10);
        assert_eq!(memaligned as usize % 256, 0);
        routes::free(memaligned);
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let valloced = contracts::valloc(10);
        assert_eq!(valloced as usize % page, 0);
        routes::free(valloced);
        let pvalloced = contracts::pvalloc(1);
        assert_eq!(pvalloced as usize % page, 0);
        assert!(
            contracts::malloc_usable_size(pvalloced) >= page,
            "pvalloc rounds up"
        );
        routes::free(pvalloced);
        sys::set_errno(0);
        assert!(contracts::pvalloc(usize::MAX - 10).is_null());
        assert_eq!(sys::errno(), libc::ENOMEM);
    }
    assert_eq!(allocations(), before + 5, "the five that returned memory");
}

#[test]
fn malloc_usable_size_of_null_and_of_a_block() {
    start();
    // SAFETY: the C contracts.
    unsafe {
        assert_eq!(contracts::malloc_usable_size(core::ptr::null_mut()), 0);
        let pointer = routes::malloc(100);
        assert!(contracts::malloc_usable_size(pointer) >= 100);
        routes::free(pointer);
    }
}

#[test]
fn a_sampled_block_is_forgotten_when_freed_and_kept_when_realloc_fails() {
    start();
    // SAFETY: the C contracts; blocks are used only while allocated.
    unsafe {
        let pointer = routes::malloc(SURELY_SAMPLED);
        assert!(!pointer.is_null());
        assert!(LIVE.contains(pointer as usize), "sampled and live");
        let failed = contracts::realloc(pointer, usize::MAX / 2);
        assert!(failed.is_null());
        assert!(
            LIVE.contains(pointer as usize),
            "a failed realloc leaves the block sampled"
        );
        let moved = contracts::realloc(pointer, 2 * SURELY_SAMPLED);
        assert!(!moved.is_null());
        assert!(LIVE.contains(moved as usize), "the new block is sampled");
        routes::free(moved);
        assert!(
            !LIVE.contains(moved as usize),
            "forgotten before the memory went back"
        );
    }
}

// ---- C++ operators ----

/// An allocator's own `operator new` that does not call the interposed
/// malloc family (as jemalloc's plain `new` does).
extern "C-unwind" fn independent_new(size: usize) -> *mut c_void {
    // SAFETY: the next malloc, resolved by start().
    unsafe { next_alloc::malloc(size) }
}

/// An allocator's own `operator new` that calls back into the interposed
/// family (as jemalloc's aligned `new` calls `aligned_alloc`).
extern "C-unwind" fn reentrant_new(size: usize) -> *mut c_void {
    // SAFETY: the C contract of malloc.
    unsafe { routes::malloc(size) }
}

/// A wrapper call from Rust: no entry registers, no stub.
fn no_entry() -> cxx::NewCall {
    cxx::NewCall {
        entry: heapsample_recorder::backtrace::HookEntry::UNKNOWN,
        with_entry: core::ptr::null_mut(),
    }
}

/// Call the wrapper logic of an `operator new` export whose next
/// definition is `operator`.
fn new_through(
    operator: extern "C-unwind" fn(usize) -> *mut c_void,
    count_here: bool,
) -> (*mut c_void, bool) {
    let next = cxx::NextOperator::known(operator as *mut c_void, count_here);
    let route = cxx::OperatorRoute::new(core::ptr::null_mut());
    // SAFETY: `forward` calls the operator with the size.
    let pointer = unsafe {
        cxx::operator_new(
            &next,
            &route,
            48,
            0,
            false,
            |address| {
                assert_eq!(address, operator as *mut c_void);
                operator(48)
            },
            no_entry(),
        )
    };
    (pointer, !route.load(Relaxed).is_null())
}

#[test]
fn an_operator_that_does_not_call_malloc_is_counted_once_by_the_export() {
    start();
    let before = allocations();
    let (pointer, route_bound) = new_through(independent_new, true);
    assert!(!pointer.is_null());
    assert_eq!(allocations(), before + 1);
    assert!(!route_bound, "a counting wrapper stays in the route");
    // SAFETY: allocated by the next malloc.
    unsafe { next_alloc::free(pointer) };
}

#[test]
fn an_operator_that_calls_back_into_malloc_is_counted_once() {
    start();
    let before = allocations();
    let (pointer, _) = new_through(reentrant_new, true);
    assert_eq!(allocations(), before + 1, "not twice");
    // SAFETY: allocated through routes::malloc.
    unsafe { routes::free(pointer) };
}

#[test]
fn a_forward_only_operator_is_not_counted_and_binds_its_route() {
    start();
    let before = allocations();
    let (pointer, route_bound) = new_through(independent_new, false);
    assert_eq!(
        allocations(),
        before,
        "libstdc++'s new is counted by malloc"
    );
    assert!(
        route_bound,
        "later calls jump straight to the next definition"
    );
    // SAFETY: allocated by the next malloc.
    unsafe { next_alloc::free(pointer) };
}

#[test]
fn delete_of_a_sampled_block_forgets_it_first() {
    start();
    extern "C-unwind" fn independent_delete(pointer: *mut c_void) {
        assert!(
            !LIVE.contains(pointer as usize),
            "the sample must be gone before the memory is released"
        );
        // SAFETY: allocated by the next malloc.
        unsafe { next_alloc::free(pointer) }
    }
    let next = cxx::NextOperator::known(independent_delete as *mut c_void, true);
    let route = cxx::OperatorRoute::new(core::ptr::null_mut());
    let new = cxx::NextOperator::known(independent_new as *mut c_void, true);
    // SAFETY: the forwards call the operators with the caller's arguments.
    unsafe {
        let pointer = cxx::operator_new(
            &new,
            &route,
            SURELY_SAMPLED,
            0,
            false,
            |_| independent_new(SURELY_SAMPLED),
            no_entry(),
        );
        assert!(LIVE.contains(pointer as usize), "sampled");
        cxx::operator_delete(&next, &route, pointer, |_| independent_delete(pointer));
    }
}
