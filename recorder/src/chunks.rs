//! Dense arrays of table entries that never move: chunks of zeroed memory
//! mapped on demand, so an entry's address stays valid for the process's
//! life and lock-free readers need no lock.
//!
//! Owns the chunk pointers; what an entry holds, how ids are handed out and
//! who may map a chunk are the table's (one inserter at a time).
//!
//! Runs inside malloc: no allocation through malloc (`mmap`), no lock.

use core::sync::atomic::{AtomicPtr, Ordering};

use crate::sys;

/// Up to `CHUNKS` chunks of `PER_CHUNK` entries of `T`, each all-zero until
/// written. `T` must be valid when all-zero (atomics).
pub struct Chunks<T, const PER_CHUNK: usize, const CHUNKS: usize> {
    chunks: [AtomicPtr<T>; CHUNKS],
    owner: sys::OwnUse,
}

impl<T, const PER_CHUNK: usize, const CHUNKS: usize> Chunks<T, PER_CHUNK, CHUNKS> {
    /// Entries it can hold.
    pub const CAPACITY: usize = PER_CHUNK * CHUNKS;

    /// No chunk mapped yet; the chunks count as `owner`'s memory.
    pub const fn new(owner: sys::OwnUse) -> Self {
        Chunks {
            chunks: [const { AtomicPtr::new(core::ptr::null_mut()) }; CHUNKS],
            owner,
        }
    }

    /// Entry `id` if its chunk is mapped. The table decides whether the
    /// entry was published (ids below its count).
    pub fn get(&self, id: usize) -> Option<&T> {
        let chunk = self.chunks.get(id / PER_CHUNK)?.load(Ordering::Acquire);
        // SAFETY: a published chunk holds PER_CHUNK entries and is never
        // unmapped; the index is reduced modulo PER_CHUNK.
        (!chunk.is_null()).then(|| unsafe { &*chunk.add(id % PER_CHUNK) })
    }

    /// Entry `id`, mapping its chunk first if needed; None beyond the
    /// capacity or without memory. Only one thread at a time may call it
    /// (the table's inserter).
    pub fn get_or_map(&self, id: usize) -> Option<&T> {
        let slot = self.chunks.get(id / PER_CHUNK)?;
        if slot.load(Ordering::Acquire).is_null() {
            let chunk = sys::map_zeroed_for(PER_CHUNK * core::mem::size_of::<T>(), self.owner);
            if chunk.is_null() {
                return None;
            }
            slot.store(chunk.cast(), Ordering::Release);
        }
        self.get(id)
    }
}
