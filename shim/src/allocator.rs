//! The shim's own heap: Rust allocations inside the profiler go to
//! `heapsample_recorder::own_heap` (memory from `mmap`), never to the
//! allocator being profiled: they are never sampled, can never recurse into
//! the hooks, and cannot fail because the program's allocator does.

use core::alloc::{GlobalAlloc, Layout};

use heapsample_recorder::own_heap;

struct OwnHeap;

// SAFETY: own_heap returns blocks of at least the layout's size and
// alignment, or null, and takes back exactly what it handed out.
unsafe impl GlobalAlloc for OwnHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        own_heap::alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        own_heap::alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` came from `alloc` with this layout.
        unsafe { own_heap::dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for dealloc; new_size is non-zero per GlobalAlloc.
        unsafe { own_heap::realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: OwnHeap = OwnHeap;
