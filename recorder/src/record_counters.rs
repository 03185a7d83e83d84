//! The counters of one record of sampled allocations: cumulative raw counts
//! and Horvitz–Thompson weight sums of every sample counted in it.
//!
//! Owns the block's layout and its arithmetic; the stack table decides what
//! a block stands for (a stack of one thread, or of the threads it no longer
//! tells apart). What is live is not counted here: the live table owns the
//! live samples, and a dump counts them from its walk of that table
//! (`dump_contents`). Counters are signed so that an addition racing with a
//! reset never wraps to a huge number. When every allocation is sampled
//! (period 1, all inclusion probabilities 1) the weight sums are not kept:
//! they equal the object and byte counts (variances 0), and
//! [`Counters::read`] derives them from those.
//!
//! What a dump reads while threads allocate: a record belongs to the stack
//! table, not to the thread, so a thread's exit loses none of its counts
//! (nothing waits to be merged). A sample event that finished before the
//! dump began is in it; one running during the dump may not be yet (a count
//! may lag), and none is counted twice (each event adds once, to one
//! record).
//!
//! Runs inside malloc (sample events): atomics only (atomic adds, or plain
//! loads and stores while the process has one thread), no allocation, no
//! lock, no call.

use core::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use heapsample_format::Weights;

/// The counts and weight sums of the samples counted in one record.
#[repr(C)]
pub struct Counters {
    alloc_objects: AtomicI64,
    alloc_bytes: AtomicI64,
    /// Horvitz–Thompson sums of every sample (cumulative).
    alloc: WeightCells,
}

/// What [`Counters::read`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CountsRead {
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
    pub alloc: Weights,
}

impl Counters {
    /// Count a sampled allocation of `size` bytes, whose Horvitz–Thompson
    /// contribution is `weights` (None when every allocation is sampled:
    /// the counts are the sums).
    #[inline(always)]
    pub fn add_sample(&self, size: u64, weights: Option<&Weights>) {
        if let Some(weights) = weights {
            self.alloc.add(weights, 1.0);
        }
        self.alloc_objects.fetch_add(1, Ordering::Relaxed);
        self.alloc_bytes.fetch_add(size as i64, Ordering::Relaxed);
    }

    /// [`Counters::add_sample`] while the process has one thread: no other
    /// thread writes or reads the counters, and the caller runs under the
    /// thread's guard (no nested sample event on this thread), so plain
    /// loads and stores count the same without the atomic adds' locked
    /// instructions.
    #[inline(always)]
    pub fn add_sample_single_threaded(&self, size: u64, weights: Option<&Weights>) {
        if let Some(weights) = weights {
            self.alloc.add(weights, 1.0);
        }
        let add = |counter: &AtomicI64, value: i64| {
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(value),
                Ordering::Relaxed,
            )
        };
        add(&self.alloc_objects, 1);
        add(&self.alloc_bytes, size as i64);
    }

    /// The counts and sums now. With `counts_are_weights` (every allocation
    /// sampled, so no sums were kept) the sums are the counts.
    pub fn read(&self, counts_are_weights: bool) -> CountsRead {
        let read = |counter: &AtomicI64| counter.load(Ordering::Relaxed).max(0) as u64;
        let (alloc_objects, alloc_bytes) = (read(&self.alloc_objects), read(&self.alloc_bytes));
        let alloc = if counts_are_weights {
            certain_weights(alloc_objects, alloc_bytes)
        } else {
            self.alloc.read(alloc_objects)
        };
        CountsRead {
            alloc_objects,
            alloc_bytes,
            alloc,
        }
    }

    /// True if a sample was ever counted here (since the last reset).
    pub fn any_alloc(&self) -> bool {
        self.alloc_objects.load(Ordering::Relaxed) > 0
    }

    /// Zero every counter (for `heapsample_reset`).
    pub fn zero(&self) {
        for counter in [&self.alloc_objects, &self.alloc_bytes] {
            counter.store(0, Ordering::Relaxed);
        }
        self.alloc.zero();
    }
}

/// [`Weights`] as four atomic `f64`s (bit patterns), added to with a
/// compare-and-swap loop: only at sample events and sampled frees. All-zero
/// is empty.
#[repr(C)]
pub struct WeightCells([AtomicU64; 4]);

impl WeightCells {
    /// Empty sums.
    pub const fn new() -> WeightCells {
        WeightCells([const { AtomicU64::new(0) }; 4])
    }

    /// Add `sign` times `weights` (a sample counted, or taken out).
    pub fn add(&self, weights: &Weights, sign: f64) {
        for (cell, value) in self.0.iter().zip(weights.as_array()) {
            let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + sign * value).to_bits())
            });
        }
    }

    /// The sums, or zeros when no sample is counted (`count == 0`): the
    /// rounding left by adding and removing the same variances is not shown.
    pub fn read(&self, count: u64) -> Weights {
        if count == 0 {
            return Weights::default();
        }
        let [objects, bytes, objects_variance, bytes_variance] = self
            .0
            .each_ref()
            .map(|cell| f64::from_bits(cell.load(Ordering::Relaxed)).max(0.0));
        Weights {
            objects,
            bytes,
            objects_variance,
            bytes_variance,
        }
    }

    /// Empty the sums.
    pub fn zero(&self) {
        for cell in &self.0 {
            cell.store(0, Ordering::Relaxed);
        }
    }
}

impl Default for WeightCells {
    fn default() -> Self {
        WeightCells::new()
    }
}

/// The weight sums of `objects` samples of `bytes` bytes in all, each taken
/// with probability 1: Σ1/p and Σs/p are the counts, the variances are 0.
pub fn certain_weights(objects: u64, bytes: u64) -> Weights {
    if objects == 0 {
        return Weights::default();
    }
    Weights {
        objects: objects as f64,
        bytes: bytes as f64,
        ..Weights::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed() -> Box<Counters> {
        // SAFETY: all-zero bytes are a valid `Counters` (atomics and f64 bits).
        unsafe { Box::new(core::mem::zeroed()) }
    }

    #[test]
    fn sums_follow_samples() {
        let counters = zeroed();
        let weights = heapsample_format::sample_weights(10, 1 << 19);
        counters.add_sample(10, Some(&weights));
        counters.add_sample(10, Some(&weights));
        let read = counters.read(false);
        assert_eq!((read.alloc_objects, read.alloc_bytes), (2, 20));
        assert_eq!(read.alloc, weights.plus(&weights));
        counters.zero();
        assert!(!counters.any_alloc());
        assert_eq!(counters.read(false), CountsRead::default());
    }

    #[test]
    fn without_kept_sums_the_counts_are_the_weights_of_certain_samples() {
        let counters = zeroed();
        for size in [10, 0, 4096] {
            counters.add_sample(size, None);
        }
        let read = counters.read(true);
        assert_eq!(read.alloc, certain_sums(&[10, 0, 4096]));
    }

    #[test]
    fn single_threaded_counting_counts_the_same() {
        let (shared, alone) = (zeroed(), zeroed());
        let weights = heapsample_format::sample_weights(10, 1 << 19);
        for (size, weights) in [(10, Some(&weights)), (0, None), (4096, None)] {
            shared.add_sample(size, weights);
            alone.add_sample_single_threaded(size, weights);
        }
        assert_eq!(shared.read(false), alone.read(false));
        assert_eq!(alone.read(false).alloc_bytes, 4106);
    }

    /// The weight sums of samples of `sizes` taken at period 1.
    fn certain_sums(sizes: &[u64]) -> Weights {
        sizes.iter().fold(Weights::default(), |sum, &size| {
            sum.plus(&heapsample_format::sample_weights(size, 1))
        })
    }
}
