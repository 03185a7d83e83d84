//! The shim's own heap: Rust allocations inside the profiler go straight to
//! the next allocator, so they are never sampled and can never recurse into
//! the hooks.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;

use heapsample_recorder::next_alloc;

struct NextAllocator;

/// malloc's minimum alignment on x86_64 glibc (and jemalloc).
const MALLOC_ALIGNMENT: usize = 16;

fn ensure_ready() {
    if !next_alloc::resolved() {
        next_alloc::ensure_resolved();
    }
}

// SAFETY: every method forwards to the next allocator with a size and
// alignment that satisfy the layout.
unsafe impl GlobalAlloc for NextAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ensure_ready();
        // SAFETY: forwarding with the layout's size and alignment.
        unsafe {
            if layout.align() <= MALLOC_ALIGNMENT {
                next_alloc::malloc(layout.size()).cast()
            } else {
                next_alloc::memalign(layout.align(), layout.size()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, _layout: Layout) {
        // SAFETY: `pointer` came from `alloc`/`realloc` above.
        unsafe { next_alloc::free(pointer.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGNMENT {
            // SAFETY: `pointer` came from `alloc` with malloc alignment.
            return unsafe { next_alloc::realloc(pointer.cast(), new_size).cast() };
        }
        // SAFETY: allocate, copy, free, with the same alignment.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let fresh = self.alloc(new_layout);
            if !fresh.is_null() {
                core::ptr::copy_nonoverlapping(pointer, fresh, layout.size().min(new_size));
                self.dealloc(pointer, layout);
            }
            fresh
        }
    }
}

#[global_allocator]
static GLOBAL: NextAllocator = NextAllocator;
