//! The side table of the stack table: one record per (stack, thread) for
//! the threads other than a stack's owner, so that identical stacks of many
//! threads share one stack entry while the dump still says which thread
//! took which samples.
//!
//! Owns a bounded, insert-only map from (stack id, thread serial) to a
//! record of [`Counters`]: a lock-free index of record ids over records
//! that never move. It holds as many records as the stack table holds
//! stacks (the (stack, thread) entries that table had room for when threads
//! were part of its key), whatever the number of threads; once it is full
//! the stack table counts a thread's samples in the stack's own counters as
//! "other threads" (nothing is dropped).
//!
//! Runs inside malloc's slow path: no allocation through malloc (`mmap`),
//! no lock of its own: inserts are serialized by the stack table's insert
//! lock, which the caller holds.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::chunks::Chunks;
use crate::record_counters::Counters;
use crate::sys;

const RECORDS_PER_CHUNK: usize = 4096;
const MAX_CHUNKS: usize = 512;

/// One thread's samples of one stack.
#[repr(C)]
pub struct ThreadRecord {
    /// `stack << 32 | thread`, written before the record is published.
    key: AtomicU64,
    pub counters: Counters,
}

impl ThreadRecord {
    /// The stack id.
    pub fn stack(&self) -> u32 {
        (self.key.load(Ordering::Relaxed) >> 32) as u32
    }

    /// The thread's serial.
    pub fn thread(&self) -> u32 {
        self.key.load(Ordering::Relaxed) as u32
    }
}

/// The (stack, thread) records.
pub struct StackThreads {
    /// 2^`index_bits` slots of record id + 1 (0: empty), mapped at the
    /// first insert; at most half of them are used.
    index: AtomicPtr<AtomicU32>,
    index_bits: AtomicU32,
    records: Chunks<ThreadRecord, RECORDS_PER_CHUNK, MAX_CHUNKS>,
    count: AtomicUsize,
}

fn key(stack: u32, thread: u32) -> u64 {
    u64::from(stack) << 32 | u64::from(thread)
}

impl StackThreads {
    /// No record yet.
    pub const fn new() -> Self {
        StackThreads {
            index: AtomicPtr::new(core::ptr::null_mut()),
            index_bits: AtomicU32::new(0),
            records: Chunks::new(crate::sys::OwnUse::StackTable),
            count: AtomicUsize::new(0),
        }
    }

    /// Size the table for an index of 2^`index_bits` slots (mapped later):
    /// at most half as many records.
    pub fn init(&self, index_bits: u32) {
        self.index_bits.store(index_bits, Ordering::Relaxed);
    }

    /// Records it can hold.
    pub fn capacity(&self) -> usize {
        ((1usize << self.index_bits.load(Ordering::Relaxed)) / 2)
            .min(Chunks::<ThreadRecord, RECORDS_PER_CHUNK, MAX_CHUNKS>::CAPACITY)
    }

    /// Records so far.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `id` (ids are dense, from 0).
    pub fn get(&self, id: u32) -> Option<&ThreadRecord> {
        if id as usize >= self.len() {
            return None;
        }
        self.records.get(id as usize)
    }

    /// The record of `thread`'s samples of `stack`, if there is one.
    pub fn find(&self, stack: u32, thread: u32) -> Option<u32> {
        self.probe(key(stack, thread)).ok()
    }

    /// Where a key is: its record id, or the empty slot where it would go
    /// (None without an index).
    fn probe(&self, key: u64) -> Result<u32, Option<&AtomicU32>> {
        let index = self.index.load(Ordering::Acquire);
        if index.is_null() {
            return Err(None);
        }
        let bits = self.index_bits.load(Ordering::Relaxed);
        let mask = (1usize << bits) - 1;
        let home = sys::hash_word(key, bits);
        for step in 0..=mask {
            // SAFETY: the index maps 2^index_bits slots; the position is masked.
            let slot = unsafe { &*index.add((home + step) & mask) };
            match slot.load(Ordering::Acquire) {
                0 => return Err(Some(slot)),
                id_plus_one => {
                    let id = id_plus_one - 1;
                    if self
                        .get(id)
                        .is_some_and(|record| record.key.load(Ordering::Relaxed) == key)
                    {
                        return Ok(id);
                    }
                }
            }
        }
        Err(None)
    }

    /// The record of `thread`'s samples of `stack`, created if new; None
    /// when the table is full or out of memory.
    ///
    /// # Safety
    /// The caller holds the stack table's insert lock (one inserter).
    pub unsafe fn find_or_insert(&self, stack: u32, thread: u32) -> Option<u32> {
        let key = key(stack, thread);
        let id = self.len();
        if id >= self.capacity() {
            return self.probe(key).ok();
        }
        if self.index.load(Ordering::Acquire).is_null() {
            let index = sys::map_zeroed_for(
                4 << self.index_bits.load(Ordering::Relaxed),
                sys::OwnUse::StackTable,
            );
            if index.is_null() {
                return None;
            }
            self.index.store(index.cast(), Ordering::Release);
        }
        let slot = match self.probe(key) {
            Ok(found) => return Some(found),
            Err(slot) => slot?,
        };
        let record = self.records.get_or_map(id)?;
        record.key.store(key, Ordering::Relaxed);
        self.count.store(id + 1, Ordering::Release);
        slot.store(id as u32 + 1, Ordering::Release);
        Some(id as u32)
    }

    /// Zero every record's counters (for `heapsample_reset`).
    pub fn zero_counts(&self) {
        for id in 0..self.len() as u32 {
            if let Some(record) = self.get(id) {
                record.counters.zero();
            }
        }
    }
}

impl Default for StackThreads {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(index_bits: u32) -> Box<StackThreads> {
        let table = Box::new(StackThreads::new());
        table.init(index_bits);
        table
    }

    #[test]
    fn one_record_per_stack_and_thread() {
        let table = table(8);
        assert_eq!(table.find(1, 2), None);
        // SAFETY: one inserter (this test).
        let a = unsafe { table.find_or_insert(1, 2) }.unwrap();
        // SAFETY: as above.
        let b = unsafe { table.find_or_insert(2, 1) }.unwrap();
        assert_ne!(a, b);
        // SAFETY: as above.
        assert_eq!(unsafe { table.find_or_insert(1, 2) }, Some(a));
        assert_eq!(table.find(1, 2), Some(a));
        assert_eq!(table.find(2, 1), Some(b));
        let record = table.get(a).unwrap();
        assert_eq!((record.stack(), record.thread()), (1, 2));
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn full_table_finds_but_does_not_insert() {
        let table = table(10);
        assert_eq!(table.capacity(), 512);
        for thread in 0..512 {
            // SAFETY: one inserter (this test).
            assert!(unsafe { table.find_or_insert(7, thread) }.is_some());
        }
        // SAFETY: as above.
        assert_eq!(unsafe { table.find_or_insert(8, 0) }, None);
        // SAFETY: as above.
        assert!(unsafe { table.find_or_insert(7, 5) }.is_some());
        assert_eq!(table.len(), 512);
    }
}
