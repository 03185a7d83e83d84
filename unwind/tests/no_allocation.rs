//! Capturing must not allocate: a counting global allocator sees zero allocations on
//! the capturing thread during cold, warm and fallback captures of every kind.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::{chain, through_c, through_cfa_expression};
use heapsample_unwind::{
    RuleCache, SharedRuleCache, capture, capture_layered, capture_libgcc, capture_shared,
    invalidate_all_caches,
};

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

struct CountingAllocator;

// SAFETY: forwards to `System`; the thread-local counter is const-initialised and has
// no destructor, so touching it never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

static SHARED: SharedRuleCache = SharedRuleCache::new();

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Captures with every method; returns the allocations made while doing so.
#[inline(never)]
fn allocations_during_captures(private: &mut RuleCache, small: &mut RuleCache<64>) -> u64 {
    let mut frames = [0u64; 256];
    let before = allocations();
    let mut written = capture(private, &mut frames);
    written += capture_shared(&SHARED, &mut frames);
    written += capture_layered(small, &SHARED, &mut frames);
    written += capture_libgcc(&mut frames);
    let after = allocations();
    assert!(written > 0);
    after - before
}

#[test]
fn capture_never_allocates() {
    let mut private = <RuleCache>::new_boxed();
    let mut small = RuleCache::<64>::new_boxed();
    let mut total = 0;
    for round in 0..3 {
        if round == 2 {
            invalidate_all_caches();
        }
        chain(30, &mut || {
            total += allocations_during_captures(&mut private, &mut small);
            through_c(5, &mut || {
                total += allocations_during_captures(&mut private, &mut small);
                through_cfa_expression(&mut || {
                    total += allocations_during_captures(&mut private, &mut small);
                    0
                })
            })
        });
    }
    assert!(
        private.misses() > 0 && private.fallbacks() > 0,
        "all paths were exercised"
    );
    assert_eq!(total, 0, "allocations during capture");
    // The counter works.
    let before = allocations();
    drop(std::hint::black_box(vec![1u8; 10]));
    assert_eq!(allocations() - before, 1);
}
