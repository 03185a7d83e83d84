//! The profiler's own heap, independent of the allocator it profiles.
//!
//! Owns every allocation the shim's Rust code makes (the `#[global_allocator]`
//! of `libheapsample.so` forwards here). Memory comes straight from `mmap`,
//! so a next allocator that fails, or that the program has exhausted, can
//! never make the profiler abort the program (Rust aborts on a failed
//! allocation), and the profiler's memory never mixes with the heap it
//! measures.
//!
//! Small blocks (≤ 64 KiB) come in power-of-two size classes carved from
//! 1 MiB chunks and are recycled through per-class free lists; larger blocks
//! are mapped and unmapped whole. `GlobalAlloc` passes the layout back on
//! free, so blocks carry no header. A lock serializes the (rare) calls; it
//! has the highest rank (`spin_lock::LOCK_ORDER`), so it may be taken while
//! any other profiler lock is held, and it is taken last around fork. Never
//! calls malloc. Runs inside malloc when the profiler allocates there
//! (thread set-up, a thread's first sample).

use core::alloc::Layout;
use core::ptr::null_mut;

use crate::spin_lock::{LockClass, SpinLock};
use crate::sys;

const MIN_CLASS_SHIFT: u32 = 4; // 16 bytes
const MAX_CLASS_SHIFT: u32 = 16; // 64 KiB
const CLASSES: usize = (MAX_CLASS_SHIFT - MIN_CLASS_SHIFT + 1) as usize;
const CHUNK_BYTES: usize = 1 << 20;
const PAGE: usize = 4096;

struct Heap {
    /// Heads of the free lists; a free block's first word links to the next.
    free: [*mut u8; CLASSES],
    /// The unused rest of the current chunk.
    chunk_next: usize,
    chunk_end: usize,
}

// SAFETY: the raw pointers are only touched under the lock.
unsafe impl Send for Heap {}

static HEAP: SpinLock<Heap> = SpinLock::new(
    LockClass::OwnHeap,
    Heap {
        free: [null_mut(); CLASSES],
        chunk_next: 0,
        chunk_end: 0,
    },
);

/// The size class of a layout, or None for a large block.
fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(1 << MIN_CLASS_SHIFT);
    let shift = usize::BITS - (size - 1).leading_zeros();
    (shift <= MAX_CLASS_SHIFT).then(|| (shift - MIN_CLASS_SHIFT) as usize)
}

fn class_bytes(class: usize) -> usize {
    1 << (class as u32 + MIN_CLASS_SHIFT)
}

fn large_bytes(layout: Layout) -> usize {
    (layout.size().max(1) + PAGE - 1) & !(PAGE - 1)
}

/// Allocate a block for `layout`; null when the system has no memory left.
pub fn alloc(layout: Layout) -> *mut u8 {
    take(layout).0
}

/// [`alloc`], zeroed. Only a block that was used before is cleared: a new
/// one (carved from a chunk, or a mapping of its own) is zero already, and
/// its pages stay untouched until used (a thread's cold block of tens of
/// kilobytes costs a thread that never samples no page fault).
pub fn alloc_zeroed(layout: Layout) -> *mut u8 {
    let (block, reused) = take(layout);
    if reused {
        // SAFETY: a block of at least `layout.size()` bytes, ours.
        unsafe { core::ptr::write_bytes(block, 0, layout.size()) };
    }
    block
}

/// A block for `layout` and whether it was used before (from a free list).
fn take(layout: Layout) -> (*mut u8, bool) {
    if layout.align() > PAGE {
        return (null_mut(), false);
    }
    let Some(class) = class_of(layout) else {
        return (sys::map_zeroed(large_bytes(layout)), false);
    };
    let mut heap = HEAP.lock();
    let head = heap.free[class];
    if !head.is_null() {
        // SAFETY: a free block's first word holds the next free block.
        heap.free[class] = unsafe { *head.cast::<*mut u8>() };
        return (head, true);
    }
    (carve(&mut heap, class_bytes(class)), false)
}

/// Cut a block of `bytes` (a power of two, naturally aligned) from the chunk.
fn carve(heap: &mut Heap, bytes: usize) -> *mut u8 {
    let mut start = (heap.chunk_next + bytes - 1) & !(bytes - 1);
    if heap.chunk_end == 0 || start + bytes > heap.chunk_end {
        let chunk = sys::map_zeroed(CHUNK_BYTES) as usize;
        if chunk == 0 {
            return null_mut();
        }
        heap.chunk_next = chunk;
        heap.chunk_end = chunk + CHUNK_BYTES;
        start = (chunk + bytes - 1) & !(bytes - 1);
    }
    heap.chunk_next = start + bytes;
    start as *mut u8
}

/// Return a block.
///
/// # Safety
/// `pointer` came from [`alloc`] with this `layout` and is not used again.
pub unsafe fn dealloc(pointer: *mut u8, layout: Layout) {
    let Some(class) = class_of(layout) else {
        // SAFETY: a whole mapping made by `alloc` for this layout.
        unsafe { libc::munmap(pointer.cast(), large_bytes(layout)) };
        sys::MAPPED_BYTES.fetch_sub(
            large_bytes(layout) as u64,
            core::sync::atomic::Ordering::Relaxed,
        );
        return;
    };
    let mut heap = HEAP.lock();
    // SAFETY: the block is at least 16 bytes and ours again.
    unsafe { *pointer.cast::<*mut u8>() = heap.free[class] };
    heap.free[class] = pointer;
}

/// Resize a block (allocate, copy, free).
///
/// # Safety
/// As for [`dealloc`]; `new_size` is non-zero.
pub unsafe fn realloc(pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    if let (Some(old), Ok(new_layout)) = (
        class_of(layout),
        Layout::from_size_align(new_size, layout.align()),
    ) && class_of(new_layout) == Some(old)
    {
        return pointer; // same class: the block already fits
    }
    let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
        return null_mut();
    };
    let fresh = alloc(new_layout);
    if !fresh.is_null() {
        // SAFETY: both blocks hold at least min(old, new) bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(pointer, fresh, layout.size().min(new_size));
            dealloc(pointer, layout);
        }
    }
    fresh
}

/// Hold the heap across `fork` (taken after every other profiler lock).
pub fn lock_for_fork() {
    HEAP.lock_for_fork();
}

/// Release after `fork`, in parent or child.
///
/// # Safety
/// Only from the fork handlers after [`lock_for_fork`].
pub unsafe fn unlock_after_fork() {
    // SAFETY: per the contract.
    unsafe { HEAP.force_unlock() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_reused_and_separate() {
        let small = Layout::from_size_align(24, 8).unwrap();
        let a = alloc(small);
        let b = alloc(small);
        assert!(!a.is_null() && !b.is_null() && a != b);
        assert_eq!(a as usize % 32, 0);
        // SAFETY: fresh blocks of this layout.
        unsafe {
            a.write_bytes(0xaa, 24);
            b.write_bytes(0xbb, 24);
            assert_eq!(*a.add(23), 0xaa);
            dealloc(a, small);
        }
        assert_eq!(alloc(small), a, "a freed block is reused");
        let page_aligned = Layout::from_size_align(100, 4096).unwrap();
        assert_eq!(alloc(page_aligned) as usize % 4096, 0);
        let large = Layout::from_size_align(1 << 20, 16).unwrap();
        let big = alloc(large);
        assert!(!big.is_null());
        // SAFETY: a fresh large block.
        unsafe {
            big.write_bytes(1, 1 << 20);
            let grown = realloc(big, large, 2 << 20);
            assert_eq!(*grown.add((1 << 20) - 1), 1);
            dealloc(grown, Layout::from_size_align(2 << 20, 16).unwrap());
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_new_or_reused() {
        // A size class no other test of this process uses.
        let layout = Layout::from_size_align(3000, 8).unwrap();
        let fresh = alloc_zeroed(layout);
        assert!(!fresh.is_null());
        // SAFETY: a block of 3,000 bytes, ours until freed.
        unsafe {
            assert!((0..3000).all(|i| *fresh.add(i) == 0), "a new block is zero");
            fresh.write_bytes(0xcc, 3000);
            dealloc(fresh, layout);
            let reused = alloc_zeroed(layout);
            assert_eq!(reused, fresh, "the freed block is reused");
            assert!(
                (0..3000).all(|i| *reused.add(i) == 0),
                "a reused block is cleared"
            );
            dealloc(reused, layout);
        }
        let large = Layout::from_size_align(100_000, 8).unwrap();
        let big = alloc_zeroed(large);
        // SAFETY: a mapping of its own of 100,000 bytes.
        unsafe {
            assert!((0..100_000).step_by(997).all(|i| *big.add(i) == 0));
            dealloc(big, large);
        }
    }
}
