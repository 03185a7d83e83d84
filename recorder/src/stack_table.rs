//! Distinct call stacks and their sampled counts.
//!
//! Owns an insert-only table of stacks keyed by (frames, thread, module
//! epoch). Lookups are lock-free: a hashed index of stack ids over entries
//! that never move (chunks mapped on demand). Only inserting a stack never
//! seen before takes a spin lock; counts and Horvitz–Thompson weight sums are
//! atomics updated at sample events and at frees of sampled objects, never on
//! the allocation fast path. When every allocation is sampled (period 1, all
//! inclusion probabilities 1) the weight sums are not kept: they equal the
//! object and byte counts (variances 0), and [`StackTable::snapshot`] derives
//! them from those. The thread that survived a fork indexes its new stacks
//! in a one-page nursery first (the main index's pages are shared
//! copy-on-write with the parent), and a process maps the index's untouched
//! pages before its first fork so that children read them without faults.
//!
//! Runs inside malloc's slow path: no allocation through malloc (memory comes
//! from `mmap`), no lock but the insert lock, which is never held while
//! calling out.

use core::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use heapsample_format::{Stack, Weights};

use crate::nursery::Nursery;
use crate::spin_lock::{LockClass, SpinLock};
use crate::sys;
use crate::tls::EntryPlace;

const ENTRIES_PER_CHUNK: usize = 4096;
const MAX_CHUNKS: usize = 1024;
const FRAME_CHUNK_BYTES: usize = 4 << 20;

/// One distinct stack with its counters. Counters are signed so that a
/// decrement racing with `reset` never wraps to a huge number.
#[repr(C)]
pub struct StackEntry {
    hash: AtomicU64,
    frames: AtomicPtr<u64>,
    depth: AtomicU32,
    thread: AtomicU32,
    epoch: AtomicU32,
    pub live_objects: AtomicI64,
    pub live_bytes: AtomicI64,
    pub live_usable_bytes: AtomicI64,
    pub alloc_objects: AtomicI64,
    pub alloc_bytes: AtomicI64,
    /// Horvitz–Thompson sums of the live samples.
    live: WeightCells,
    /// Horvitz–Thompson sums of every sample (cumulative).
    alloc: WeightCells,
}

/// [`Weights`] as four atomic `f64`s (bit patterns), added to with a
/// compare-and-swap loop: only at sample events and sampled frees.
#[repr(C)]
struct WeightCells([AtomicU64; 4]);

impl WeightCells {
    fn add(&self, weights: &Weights, sign: f64) {
        for (cell, value) in self.0.iter().zip(weights.as_array()) {
            let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + sign * value).to_bits())
            });
        }
    }

    /// The sums, or zeros when no sample is counted (`count == 0`): the
    /// rounding left by adding and removing the same values is not shown.
    fn read(&self, count: u64) -> Weights {
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

    fn zero(&self) {
        for cell in &self.0 {
            cell.store(0, Ordering::Relaxed);
        }
    }
}

/// The weight sums of `objects` samples of `bytes` bytes in all, each taken
/// with probability 1: Σ1/p and Σs/p are the counts, the variances are 0.
fn certain_weights(objects: u64, bytes: u64) -> Weights {
    if objects == 0 {
        return Weights::default();
    }
    Weights {
        objects: objects as f64,
        bytes: bytes as f64,
        ..Weights::default()
    }
}

struct FrameArena {
    next: usize,
    end: usize,
}

/// The process's stack table.
pub struct StackTable {
    chunks: [AtomicPtr<StackEntry>; MAX_CHUNKS],
    index: AtomicPtr<AtomicU32>,
    index_bits: AtomicU32,
    count: AtomicUsize,
    insert_lock: SpinLock<FrameArena>,
    index_mapped_for_children: sys::MappedForChildren,
    /// Where a forked child indexes the stacks it interns first
    /// ([`EntryPlace::NurseryFirst`]): stack id + 1, or 0 for empty.
    nursery: Nursery<AtomicU32, NURSERY_SLOTS>,
}

/// Index slots of the nursery (one page with its flag).
const NURSERY_SLOTS: usize = 1022;

/// The process's stacks.
pub static STACKS: StackTable = StackTable::new();

/// Hash of a stack key.
pub fn hash_stack(frames: &[u64], thread: u32, epoch: u32) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64 ^ (u64::from(thread) << 32 | u64::from(epoch));
    for &frame in frames {
        hash = (hash.rotate_left(5) ^ frame).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    hash | 1 // never 0
}

impl StackTable {
    /// An empty table; [`StackTable::init`] maps its index.
    pub const fn new() -> Self {
        StackTable {
            chunks: [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_CHUNKS],
            index: AtomicPtr::new(core::ptr::null_mut()),
            index_bits: AtomicU32::new(0),
            count: AtomicUsize::new(0),
            insert_lock: SpinLock::new(LockClass::StackInsert, FrameArena { next: 0, end: 0 }),
            index_mapped_for_children: sys::MappedForChildren::new(),
            nursery: Nursery::new([const { AtomicU32::new(0) }; NURSERY_SLOTS]),
        }
    }

    /// Map an index of 2^`index_bits` slots; at most half of them are used.
    pub fn init(&self, index_bits: u32) -> bool {
        let index = sys::map_zeroed(4 << index_bits);
        if index.is_null() {
            return false;
        }
        self.index_bits.store(index_bits, Ordering::Relaxed);
        self.index.store(index.cast(), Ordering::Release);
        true
    }

    fn capacity(&self) -> usize {
        ((1usize << self.index_bits.load(Ordering::Relaxed)) / 2)
            .min(ENTRIES_PER_CHUNK * MAX_CHUNKS)
    }

    /// Number of distinct stacks.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// True if no stack was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry with id `id` (ids are dense, from 0).
    pub fn entry(&self, id: u32) -> Option<&StackEntry> {
        if id as usize >= self.len() {
            return None;
        }
        let chunk = self.chunks[id as usize / ENTRIES_PER_CHUNK].load(Ordering::Acquire);
        // SAFETY: ids below `count` lie in published chunks, fully written
        // before `count` was raised (release/acquire).
        (!chunk.is_null()).then(|| unsafe { &*chunk.add(id as usize % ENTRIES_PER_CHUNK) })
    }

    fn index_slot(&self, position: usize) -> Option<&AtomicU32> {
        let index = self.index.load(Ordering::Acquire);
        let mask = (1usize << self.index_bits.load(Ordering::Relaxed)) - 1;
        // SAFETY: the index maps 2^index_bits slots and the position is masked.
        (!index.is_null()).then(|| unsafe { &*index.add(position & mask) })
    }

    fn matches(entry: &StackEntry, hash: u64, frames: &[u64], thread: u32, epoch: u32) -> bool {
        entry.hash.load(Ordering::Relaxed) == hash && Self::has_key(entry, frames, thread, epoch)
    }

    /// True if stack `id` is `frames` of `thread` in module epoch `epoch`:
    /// how a thread checks that it sampled its previous stack again, without
    /// hashing or probing.
    pub fn holds(&self, id: u32, frames: &[u64], thread: u32, epoch: u32) -> bool {
        self.entry(id)
            .is_some_and(|entry| Self::has_key(entry, frames, thread, epoch))
    }

    fn has_key(entry: &StackEntry, frames: &[u64], thread: u32, epoch: u32) -> bool {
        if entry.depth.load(Ordering::Relaxed) as usize != frames.len()
            || entry.thread.load(Ordering::Relaxed) != thread
            || entry.epoch.load(Ordering::Relaxed) != epoch
        {
            return false;
        }
        // SAFETY: an entry's frames were written before it was published and
        // never change; `depth` of them are valid.
        let stored = unsafe {
            core::slice::from_raw_parts(entry.frames.load(Ordering::Relaxed), frames.len())
        };
        stored == frames
    }

    /// Find a stack without inserting: (id or the first free position of
    /// the main index).
    fn lookup(&self, hash: u64, frames: &[u64], thread: u32, epoch: u32) -> Result<u32, usize> {
        let found = self.lookup_main(hash, frames, thread, epoch);
        if found.is_ok() || !self.nursery.in_use() {
            return found;
        }
        for slot in self.nursery.probes(hash) {
            match self.holder_of(slot, hash, frames, thread, epoch) {
                Some(Ok(id)) => return Ok(id),
                Some(Err(())) => break,
                None => {}
            }
        }
        found
    }

    /// What an index slot says about a stack: `Some(Ok(id))` it holds the
    /// stack, `Some(Err(()))` it is empty (the probe ends), `None` it holds
    /// another.
    fn holder_of(
        &self,
        slot: &AtomicU32,
        hash: u64,
        frames: &[u64],
        thread: u32,
        epoch: u32,
    ) -> Option<Result<u32, ()>> {
        match slot.load(Ordering::Acquire) {
            0 => Some(Err(())),
            id_plus_one => self
                .entry(id_plus_one - 1)
                .filter(|entry| Self::matches(entry, hash, frames, thread, epoch))
                .map(|_| Ok(id_plus_one - 1)),
        }
    }

    fn lookup_main(
        &self,
        hash: u64,
        frames: &[u64],
        thread: u32,
        epoch: u32,
    ) -> Result<u32, usize> {
        let bits = self.index_bits.load(Ordering::Relaxed);
        let home = sys::hash_word(hash, bits);
        let mut position = home;
        loop {
            let Some(slot) = self.index_slot(position) else {
                return Err(usize::MAX);
            };
            match self.holder_of(slot, hash, frames, thread, epoch) {
                Some(Ok(id)) => return Ok(id),
                Some(Err(())) => return Err(position),
                None => {}
            }
            position += 1;
            if position - home > (1 << bits) {
                return Err(usize::MAX);
            }
        }
    }

    /// The id of this stack, inserting it if new (indexed where `place`
    /// says). None when the table or memory is exhausted.
    pub fn intern(
        &self,
        frames: &[u64],
        thread: u32,
        epoch: u32,
        place: EntryPlace,
    ) -> Option<u32> {
        let hash = hash_stack(frames, thread, epoch);
        if let Ok(id) = self.lookup(hash, frames, thread, epoch) {
            return Some(id);
        }
        let mut arena = self.insert_lock.lock();
        // Someone may have inserted it while we waited.
        let main_position = match self.lookup(hash, frames, thread, epoch) {
            Ok(id) => return Some(id),
            Err(position) => position,
        };
        let slot = match place {
            EntryPlace::NurseryFirst => self
                .nursery
                .probes(hash)
                .find(|slot| slot.load(Ordering::Relaxed) == 0),
            EntryPlace::Main => None,
        };
        let slot = match slot {
            Some(slot) => slot,
            None if main_position == usize::MAX => return None,
            None => self.index_slot(main_position)?,
        };
        let id = self.len();
        if id >= self.capacity() {
            return None;
        }
        let stored_frames = Self::store_frames(&mut arena, frames)?;
        let entry = self.new_entry(id)?;
        entry.hash.store(hash, Ordering::Relaxed);
        entry.frames.store(stored_frames, Ordering::Relaxed);
        entry.depth.store(frames.len() as u32, Ordering::Relaxed);
        entry.thread.store(thread, Ordering::Relaxed);
        entry.epoch.store(epoch, Ordering::Relaxed);
        self.count.store(id + 1, Ordering::Release);
        slot.store(id as u32 + 1, Ordering::Release);
        if place == EntryPlace::NurseryFirst {
            self.nursery.mark_used();
        }
        Some(id as u32)
    }

    fn new_entry(&self, id: usize) -> Option<&StackEntry> {
        let chunk_slot = &self.chunks[id / ENTRIES_PER_CHUNK];
        let mut chunk = chunk_slot.load(Ordering::Acquire);
        if chunk.is_null() {
            chunk = sys::map_zeroed(ENTRIES_PER_CHUNK * core::mem::size_of::<StackEntry>()).cast();
            if chunk.is_null() {
                return None;
            }
            chunk_slot.store(chunk, Ordering::Release);
        }
        // SAFETY: the chunk holds ENTRIES_PER_CHUNK zeroed entries.
        Some(unsafe { &*chunk.add(id % ENTRIES_PER_CHUNK) })
    }

    fn store_frames(arena: &mut FrameArena, frames: &[u64]) -> Option<*mut u64> {
        let bytes = core::mem::size_of_val(frames).max(8);
        if arena.next + bytes > arena.end {
            let chunk = sys::map_zeroed(FRAME_CHUNK_BYTES);
            if chunk.is_null() {
                return None;
            }
            arena.next = chunk as usize;
            arena.end = chunk as usize + FRAME_CHUNK_BYTES;
        }
        let destination = arena.next as *mut u64;
        // SAFETY: [next, next + bytes) is inside the current arena chunk and
        // belongs to no published entry yet.
        unsafe { core::ptr::copy_nonoverlapping(frames.as_ptr(), destination, frames.len()) };
        arena.next += bytes;
        Some(destination)
    }

    /// Copy every stack that has live objects, or (with `include_freed`) any
    /// allocations at all. With `counts_are_weights` (every allocation
    /// sampled, so no weight sums were kept) the weight sums are the counts.
    pub fn snapshot(&self, include_freed: bool, counts_are_weights: bool) -> Vec<Stack> {
        let mut out = Vec::new();
        for id in 0..self.len() as u32 {
            let Some(entry) = self.entry(id) else {
                continue;
            };
            let read = |counter: &AtomicI64| counter.load(Ordering::Relaxed).max(0) as u64;
            let live_objects = read(&entry.live_objects);
            let alloc_objects = read(&entry.alloc_objects);
            if live_objects == 0 && !(include_freed && alloc_objects > 0) {
                continue;
            }
            let depth = entry.depth.load(Ordering::Relaxed) as usize;
            // SAFETY: as in `matches`.
            let frames =
                unsafe { core::slice::from_raw_parts(entry.frames.load(Ordering::Relaxed), depth) };
            let (live_bytes, alloc_bytes) = (read(&entry.live_bytes), read(&entry.alloc_bytes));
            let (live, alloc) = if counts_are_weights {
                (
                    certain_weights(live_objects, live_bytes),
                    certain_weights(alloc_objects, alloc_bytes),
                )
            } else {
                (
                    entry.live.read(live_objects),
                    entry.alloc.read(alloc_objects),
                )
            };
            out.push(Stack {
                frames: frames.to_vec(),
                thread: entry.thread.load(Ordering::Relaxed),
                epoch: entry.epoch.load(Ordering::Relaxed),
                live_objects,
                live_bytes,
                live_usable_bytes: read(&entry.live_usable_bytes),
                alloc_objects,
                alloc_bytes,
                live,
                alloc,
            });
        }
        out
    }

    /// Zero every counter (for `heapsample_reset`).
    pub fn zero_counts(&self) {
        for id in 0..self.len() as u32 {
            if let Some(entry) = self.entry(id) {
                for counter in [
                    &entry.live_objects,
                    &entry.live_bytes,
                    &entry.live_usable_bytes,
                    &entry.alloc_objects,
                    &entry.alloc_bytes,
                ] {
                    counter.store(0, Ordering::Relaxed);
                }
                entry.live.zero();
                entry.alloc.zero();
            }
        }
    }

    /// Lock out inserts across `fork`.
    pub fn lock_for_fork(&self) {
        self.insert_lock.lock_for_fork();
    }

    /// In a process about to fork: map the index's untouched pages to the
    /// zero page (one `madvise`, no memory), so that forked children inherit
    /// the mappings and a lookup of a stack new to them reads the index
    /// without a page fault. Once per table; nothing on kernels before 5.14.
    pub fn map_index_for_children(&self) {
        let bytes = 4usize << self.index_bits.load(Ordering::Relaxed);
        self.index_mapped_for_children
            .map_once(self.index.load(Ordering::Acquire).cast(), bytes);
    }

    /// Undo [`StackTable::lock_for_fork`] in parent or child.
    ///
    /// # Safety
    /// Only from the fork handlers, after `lock_for_fork`.
    pub unsafe fn unlock_after_fork(&self) {
        // SAFETY: per the contract, the fork handler owns the lock.
        unsafe { self.insert_lock.force_unlock() };
    }
}

impl Default for StackTable {
    fn default() -> Self {
        Self::new()
    }
}

impl StackEntry {
    /// Count a sampled allocation of `size` requested and `usable` bytes,
    /// whose Horvitz–Thompson contribution is `weights` (None when every
    /// allocation is sampled: the counts are the sums).
    pub fn add_sample(&self, size: u64, usable: u64, weights: Option<&Weights>) {
        if let Some(weights) = weights {
            self.alloc.add(weights, 1.0);
            self.live.add(weights, 1.0);
        }
        self.alloc_objects.fetch_add(1, Ordering::Relaxed);
        self.alloc_bytes.fetch_add(size as i64, Ordering::Relaxed);
        self.live_objects.fetch_add(1, Ordering::Relaxed);
        self.live_bytes.fetch_add(size as i64, Ordering::Relaxed);
        self.live_usable_bytes
            .fetch_add(usable as i64, Ordering::Relaxed);
    }

    /// Count the free of a sampled object: `weights` are the ones its
    /// allocation added (None if it added none).
    pub fn release_sample(&self, size: u64, usable: u64, weights: Option<&Weights>) {
        if let Some(weights) = weights {
            self.live.add(weights, -1.0);
        }
        self.live_objects.fetch_sub(1, Ordering::Relaxed);
        self.live_bytes.fetch_sub(size as i64, Ordering::Relaxed);
        self.live_usable_bytes
            .fetch_sub(usable as i64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_and_keyed_by_thread_and_epoch() {
        let table = StackTable::new();
        assert!(table.init(8));
        let a = table.intern(&[1, 2, 3], 1, 0, EntryPlace::Main).unwrap();
        let b = table.intern(&[1, 2, 4], 1, 0, EntryPlace::Main).unwrap();
        assert_ne!(a, b);
        assert_eq!(table.intern(&[1, 2, 3], 1, 0, EntryPlace::Main), Some(a));
        assert_ne!(table.intern(&[1, 2, 3], 2, 0, EntryPlace::Main), Some(a));
        assert_ne!(table.intern(&[1, 2, 3], 1, 1, EntryPlace::Main), Some(a));
        assert!(table.holds(a, &[1, 2, 3], 1, 0));
        assert!(!table.holds(a, &[1, 2, 4], 1, 0));
        assert!(!table.holds(a, &[1, 2, 3], 2, 0));
        assert!(!table.holds(a, &[1, 2, 3], 1, 1));
        assert!(!table.holds(a, &[1, 2], 1, 0));
        let weights = heapsample_format::sample_weights(10, 1 << 19);
        table.entry(a).unwrap().add_sample(10, 16, Some(&weights));
        let snapshot = table.snapshot(false, false);
        assert_eq!(snapshot.len(), 1);
        assert_eq!(snapshot[0].frames, vec![1, 2, 3]);
        assert_eq!((snapshot[0].live_objects, snapshot[0].live_bytes), (1, 10));
        assert_eq!((snapshot[0].live, snapshot[0].alloc), (weights, weights));
        table
            .entry(a)
            .unwrap()
            .release_sample(10, 16, Some(&weights));
        assert!(table.snapshot(false, false).is_empty());
        let all = table.snapshot(true, false);
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].live, all[0].alloc), (Default::default(), weights));
    }

    #[test]
    fn without_kept_sums_the_counts_are_the_weights_of_certain_samples() {
        let table = StackTable::new();
        assert!(table.init(8));
        let a = table.intern(&[7], 1, 0, EntryPlace::Main).unwrap();
        let entry = table.entry(a).unwrap();
        for size in [10, 0, 4096] {
            entry.add_sample(size, size + 8, None);
        }
        entry.release_sample(4096, 4104, None);
        let (live, alloc) = (certain_sums(&[10, 0]), certain_sums(&[10, 0, 4096]));
        let snapshot = table.snapshot(true, true);
        assert_eq!((snapshot[0].live, snapshot[0].alloc), (live, alloc));
        entry.release_sample(10, 18, None);
        entry.release_sample(0, 8, None);
        let snapshot = table.snapshot(true, true);
        assert_eq!(
            (snapshot[0].live, snapshot[0].alloc),
            (Weights::default(), alloc)
        );
    }

    /// The weight sums of samples of `sizes` taken at period 1.
    fn certain_sums(sizes: &[u64]) -> Weights {
        sizes.iter().fold(Weights::default(), |sum, &size| {
            sum.plus(&heapsample_format::sample_weights(size, 1))
        })
    }

    /// A forked child's new stacks are indexed in the nursery while it has
    /// room, then in the main index; every stack is found from either place.
    #[test]
    fn nursery_first_stacks_are_found_wherever_they_were_indexed() {
        let table = Box::new(StackTable::new());
        assert!(table.init(14));
        let inherited = table.intern(&[1, 2], 1, 0, EntryPlace::Main).unwrap();
        let ids: Vec<u32> = (0..3000u64)
            .map(|i| {
                table
                    .intern(&[i, 9], 1, 0, EntryPlace::NurseryFirst)
                    .unwrap()
            })
            .collect();
        assert_eq!(table.len(), 3001);
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(
                table.intern(&[i as u64, 9], 1, 0, EntryPlace::Main),
                Some(id)
            );
            assert!(table.holds(id, &[i as u64, 9], 1, 0));
        }
        assert_eq!(
            table.intern(&[1, 2], 1, 0, EntryPlace::NurseryFirst),
            Some(inherited)
        );
        assert_eq!(table.len(), 3001, "nothing interned twice");
        let in_nursery = table
            .nursery
            .slots()
            .iter()
            .filter(|slot| slot.load(Ordering::Relaxed) != 0)
            .count();
        assert!(
            in_nursery > NURSERY_SLOTS / 2 && in_nursery <= NURSERY_SLOTS,
            "{in_nursery} stacks in the nursery"
        );
    }

    #[test]
    fn full_table_refuses() {
        let table = StackTable::new();
        assert!(table.init(4)); // 8 stacks at most
        for i in 0..8u64 {
            assert!(table.intern(&[i], 0, 0, EntryPlace::Main).is_some());
        }
        assert_eq!(table.intern(&[99], 0, 0, EntryPlace::Main), None);
        assert!(table.intern(&[3], 0, 0, EntryPlace::Main).is_some());
    }
}
