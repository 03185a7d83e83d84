//! How long sampled objects lived: one lifetime distribution per stack,
//! filled as samples are freed.
//!
//! Owns the blocks of lifetime buckets (`heapsample_format`'s log-scale
//! buckets, 1 µs to 4.8 hours), each bucket the count and requested bytes
//! of the freed samples whose lifetimes fell in it and their
//! Horvitz–Thompson sums ([`WeightCells`]; not kept when every allocation
//! is sampled, where they are the counts). A stack gets a block at its first
//! freed sample; the stack table keeps the block's id. At most
//! [`LifetimeTable::capacity`] blocks (584 bytes each, and 1,152 bytes of
//! weight sums beside it unless every allocation is sampled; mapped in
//! chunks of 64 as used: at most 9 MiB at period 1 and 27 MiB otherwise, in
//! practice a block per stack whose samples are freed); past that, lifetimes of stacks without a block are counted
//! in one reserve block that the dump shows without frames (nothing is
//! dropped).
//!
//! Runs inside free's slow path (a sampled object freed): atomics only; a
//! block is handed out under the stack table's insert lock, which the caller
//! holds. No allocation through malloc (`mmap`).

use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use heapsample_format::{LIFETIME_BUCKETS, LifetimeBucket, Weights};

use crate::chunks::Chunks;
use crate::record_counters::{WeightCells, certain_weights};
use crate::sys::OwnUse;

const BLOCKS_PER_CHUNK: usize = 64;
const MAX_CHUNKS: usize = 256;

/// One bucket of one stack's distribution: its counts.
#[repr(C)]
struct BucketCells {
    samples: AtomicU64,
    bytes: AtomicU64,
}

/// The Horvitz–Thompson sums of one stack's buckets, apart from their
/// counts: when every allocation is sampled they are not kept, and their
/// memory is never mapped.
#[repr(C)]
struct BucketWeights {
    buckets: [WeightCells; LIFETIME_BUCKETS],
}

/// One stack's lifetime distribution. All-zero is empty.
#[repr(C)]
pub struct LifetimeBlock {
    buckets: [BucketCells; LIFETIME_BUCKETS],
    /// The block's sums, null when they are not kept.
    weights: AtomicPtr<BucketWeights>,
}

impl LifetimeBlock {
    /// Count a freed sample of `size` bytes in `bucket`, with its weights
    /// (None when every allocation is sampled).
    pub fn add(&self, bucket: usize, size: u64, weights: Option<&Weights>) {
        let bucket = bucket.min(LIFETIME_BUCKETS - 1);
        let cells = &self.buckets[bucket];
        cells.samples.fetch_add(1, Ordering::Relaxed);
        cells.bytes.fetch_add(size, Ordering::Relaxed);
        if let Some(weights) = weights
            && let Some(sums) = self.weights()
        {
            sums.buckets[bucket].add(weights, 1.0);
        }
    }

    fn weights(&self) -> Option<&BucketWeights> {
        let sums = self.weights.load(Ordering::Acquire);
        // SAFETY: published sums live in a chunk that is never unmapped.
        (!sums.is_null()).then(|| unsafe { &*sums })
    }

    /// The non-empty buckets, in order; with `counts_are_weights` (every
    /// allocation sampled, no sums kept) the sums are the counts.
    pub fn read(&self, counts_are_weights: bool) -> Vec<LifetimeBucket> {
        let mut out = Vec::new();
        let sums = self.weights();
        for (bucket, cells) in self.buckets.iter().enumerate() {
            let samples = cells.samples.load(Ordering::Relaxed);
            if samples == 0 {
                continue;
            }
            let bytes = cells.bytes.load(Ordering::Relaxed);
            out.push(LifetimeBucket {
                bucket: bucket as u8,
                samples,
                sampled_bytes: bytes,
                weights: match sums {
                    Some(sums) if !counts_are_weights => sums.buckets[bucket].read(samples),
                    _ => certain_weights(samples, bytes),
                },
            });
        }
        out
    }

    fn zero(&self) {
        for cells in &self.buckets {
            cells.samples.store(0, Ordering::Relaxed);
            cells.bytes.store(0, Ordering::Relaxed);
        }
        for sums in self.weights().iter().flat_map(|sums| &sums.buckets) {
            sums.zero();
        }
    }
}

/// The blocks.
pub struct LifetimeTable {
    blocks: Chunks<LifetimeBlock, BLOCKS_PER_CHUNK, MAX_CHUNKS>,
    /// The blocks' sums, by the same ids (mapped only where kept).
    weights: Chunks<BucketWeights, BLOCKS_PER_CHUNK, MAX_CHUNKS>,
    /// Blocks handed out (ids below it are valid).
    count: AtomicUsize,
}

impl LifetimeTable {
    /// No block yet.
    pub const fn new() -> Self {
        LifetimeTable {
            blocks: Chunks::new(OwnUse::Lifetimes),
            weights: Chunks::new(OwnUse::Lifetimes),
            count: AtomicUsize::new(0),
        }
    }

    /// Blocks it can hand out, the reserve included.
    pub const fn capacity() -> usize {
        Chunks::<LifetimeBlock, BLOCKS_PER_CHUNK, MAX_CHUNKS>::CAPACITY
    }

    /// The id of the reserve block.
    pub const RESERVE: u32 = (Self::capacity() - 1) as u32;

    /// Block `id`, if handed out.
    pub fn get(&self, id: u32) -> Option<&LifetimeBlock> {
        let not_handed_out =
            id as usize >= self.count.load(Ordering::Acquire) && id != Self::RESERVE;
        if not_handed_out {
            return None;
        }
        self.blocks.get(id as usize)
    }

    /// A new block's id, or the reserve's once the others are handed out;
    /// None without memory.
    ///
    /// # Safety
    /// The caller holds the stack table's insert lock (one caller at a
    /// time).
    pub unsafe fn hand_out(&self) -> Option<u32> {
        let id = self.count.load(Ordering::Relaxed);
        if id >= Self::RESERVE as usize {
            self.map(Self::RESERVE as usize)?;
            return Some(Self::RESERVE);
        }
        self.map(id)?;
        self.count.store(id + 1, Ordering::Release);
        Some(id as u32)
    }

    /// Map block `id` and, unless every allocation is sampled, its sums
    /// (the caller holds the insert lock).
    fn map(&self, id: usize) -> Option<&LifetimeBlock> {
        let block = self.blocks.get_or_map(id)?;
        if !crate::sampling_law::samples_every_allocation() && block.weights().is_none() {
            let sums = self.weights.get_or_map(id)?;
            block
                .weights
                .store(sums as *const BucketWeights as *mut _, Ordering::Release);
        }
        Some(block)
    }

    /// The reserve block, if it was ever handed out.
    pub fn reserve(&self) -> Option<&LifetimeBlock> {
        (self.count.load(Ordering::Acquire) >= Self::RESERVE as usize)
            .then(|| self.blocks.get(Self::RESERVE as usize))
            .flatten()
    }

    /// Empty every block (for `heapsample_reset`).
    pub fn zero(&self) {
        let count = self.count.load(Ordering::Acquire);
        for id in (0..count).chain(core::iter::once(Self::RESERVE as usize)) {
            if let Some(block) = self.blocks.get(id) {
                block.zero();
            }
        }
    }
}

impl Default for LifetimeTable {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_counts_and_sums() {
        let _period = crate::sampling_law::tests::PERIOD_LOCK.lock();
        crate::sampling_law::set_lg_period(19);
        let table = Box::new(LifetimeTable::new());
        // SAFETY: one caller (this test).
        let id = unsafe { table.hand_out() }.unwrap();
        let block = table.get(id).unwrap();
        assert!(block.read(false).is_empty());
        let w = heapsample_format::sample_weights(100, 1 << 14);
        block.add(3, 100, Some(&w));
        block.add(3, 100, Some(&w));
        block.add(35, 7, None);
        let read = block.read(false);
        assert_eq!(read.len(), 2);
        assert_eq!(
            (read[0].bucket, read[0].samples, read[0].sampled_bytes),
            (3, 2, 200)
        );
        assert_eq!(read[0].weights, w.plus(&w));
        let exact = block.read(true);
        assert_eq!(exact[1].weights.objects, 1.0);
        assert_eq!(exact[1].weights.bytes, 7.0);
        table.zero();
        assert!(block.read(false).is_empty());
        assert!(table.get(id + 1).is_none());
        assert!(table.reserve().is_none());
    }

    /// When every allocation is sampled the sums are the counts: no
    /// memory is mapped for them, and the block reads the same.
    #[test]
    fn at_period_1_blocks_keep_counts_only() {
        let _period = crate::sampling_law::tests::PERIOD_LOCK.lock();
        crate::sampling_law::set_lg_period(0);
        let table = Box::new(LifetimeTable::new());
        // SAFETY: one caller (this test).
        let id = unsafe { table.hand_out() }.unwrap();
        crate::sampling_law::set_lg_period(19);
        let block = table.get(id).unwrap();
        assert!(block.weights().is_none());
        assert!(table.weights.get(id as usize).is_none());
        block.add(5, 40, None);
        block.add(5, 24, None);
        let read = block.read(true);
        assert_eq!((read[0].samples, read[0].sampled_bytes), (2, 64));
        assert_eq!(
            (read[0].weights.objects, read[0].weights.bytes),
            (2.0, 64.0)
        );
        assert_eq!(core::mem::size_of::<LifetimeBlock>(), 584);
    }

    #[test]
    fn past_its_capacity_the_table_hands_out_the_reserve() {
        let table = Box::new(LifetimeTable::new());
        table
            .count
            .store(LifetimeTable::RESERVE as usize, Ordering::Relaxed);
        // SAFETY: one caller (this test).
        let id = unsafe { table.hand_out() }.unwrap();
        assert_eq!(id, LifetimeTable::RESERVE);
        table.get(id).unwrap().add(0, 1, None);
        assert_eq!(table.reserve().unwrap().read(true).len(), 1);
    }
}
