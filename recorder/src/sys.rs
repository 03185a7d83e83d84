//! Raw memory for the profiler's tables, straight from the kernel.
//!
//! Tables are mapped with `mmap` (never through the interposed allocator) and
//! never unmapped: threads may still touch them while the process exits.
//! Untouched pages cost no memory.

use core::sync::atomic::{AtomicU64, Ordering};

/// Bytes the profiler has mapped for itself (reported in every dump).
pub static MAPPED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Map `bytes` of zeroed, private memory. Returns null on failure (for
/// example under `ulimit -v`); callers then degrade instead of failing.
pub fn map_zeroed(bytes: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping has no preconditions.
    let address = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return core::ptr::null_mut();
    }
    MAPPED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    address.cast()
}

/// Fibonacci hashing of a word into `bits` bits.
#[inline(always)]
pub fn hash_word(word: u64, bits: u32) -> usize {
    (word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}
