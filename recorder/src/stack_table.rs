//! Distinct call stacks, and the records their samples are counted in.
//!
//! Owns an insert-only table of stacks keyed by their frames and the ids of
//! the loaded objects those frames lie in (`modules`), whichever thread
//! took them. Lookups are lock-free: an index of stack ids, hashed by the
//! frames, over entries that never move (chunks mapped on demand). A stack
//! whose frames all lie in the program's own objects has no object ids and
//! is found without looking them up ([`Objects`]). Only inserting a stack
//! never seen before takes a spin lock.
//!
//! Samples are counted in *records* ([`Counters`]: cumulative counts and
//! Horvitz–Thompson weight sums, updated at sample events, never on the
//! allocation fast path; which samples are live is the live table's, and a
//! dump passes their counts in, [`LiveCounts`]). A stack's own
//! record belongs to its owner, the thread that first sampled it; other
//! threads' samples of it go to their records in the bounded side table
//! (`stack_threads`). When that is full, a stack whose record a thread
//! cannot get relabels its own record "other threads" ([`OTHER_THREADS`])
//! for good, and counts the sample there: its thread is forgotten, the
//! sample is not. When the stack table itself is full, a new stack is
//! counted in one entry without frames, kept in reserve for that: the
//! estimates stay unbiased and the dump shows how much went there.
//!
//! The thread that survived a fork indexes its new stacks in a one-page
//! nursery first (the main index's pages are shared copy-on-write with the
//! parent), and a process maps the index's untouched pages before its
//! first fork so that children read them without faults.
//!
//! Each stack also has a lifetime distribution of its freed samples
//! (`lifetimes`), whatever thread allocated them: a block handed out at its
//! first freed sample, under the insert lock.
//!
//! Runs inside malloc's slow path (and free's, for lifetimes): no
//! allocation through malloc (memory comes from `mmap`), no lock but the
//! insert lock, which is never held while calling out.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use heapsample_format::{LifetimeBucket, Stack, Weights};

use crate::chunks::Chunks;
use crate::lifetimes::{LifetimeBlock, LifetimeTable};
use crate::nursery::Nursery;
use crate::record_counters::Counters;
use crate::spin_lock::{LockClass, SpinLock};
use crate::stack_threads::StackThreads;
use crate::sys;
use crate::tls::EntryPlace;

const ENTRIES_PER_CHUNK: usize = 4096;
const MAX_CHUNKS: usize = 1024;
const FRAME_CHUNK_BYTES: usize = 4 << 20;

/// The thread serial of a record that holds the samples of threads it no
/// longer tells apart (no thread has serial 0).
pub const OTHER_THREADS: u32 = 0;

/// Set in a record id that names a (stack, thread) record of the side
/// table; without it a record id is a stack id.
pub const THREAD_RECORD: u32 = 1 << 23;

/// One distinct stack: its key, its owner and its own record.
#[repr(C)]
pub struct StackEntry {
    hash: AtomicU64,
    /// `depth` frames, then `objects` object ids (one per word).
    key: AtomicPtr<u64>,
    depth: AtomicU32,
    objects: AtomicU32,
    /// The serial of the thread whose samples `counters` holds, or
    /// [`OTHER_THREADS`].
    owner: AtomicU32,
    /// The stack's lifetime block (null before its first freed sample).
    lifetimes: AtomicPtr<LifetimeBlock>,
    counters: Counters,
}

impl StackEntry {
    fn frames(&self) -> &[u64] {
        // SAFETY: an entry's key was written before it was published and
        // never changes; `depth` frames start it.
        unsafe {
            core::slice::from_raw_parts(
                self.key.load(Ordering::Relaxed),
                self.depth.load(Ordering::Relaxed) as usize,
            )
        }
    }

    fn objects(&self) -> &[u64] {
        let depth = self.depth.load(Ordering::Relaxed) as usize;
        // SAFETY: as in `frames`; `objects` words follow the frames.
        unsafe {
            core::slice::from_raw_parts(
                self.key.load(Ordering::Relaxed).add(depth),
                self.objects.load(Ordering::Relaxed) as usize,
            )
        }
    }

    /// True if this is the stack of `frames` in `objects`. An entry without
    /// object ids matches its frames whatever `objects` would say: its
    /// frames lie in the program's own objects, which are never unloaded, so
    /// their ids are none (and are not looked up).
    fn has_key(&self, frames: &[u64], objects: &mut impl Objects) -> bool {
        if self.depth.load(Ordering::Relaxed) as usize != frames.len() || self.frames() != frames {
            return false;
        }
        let stored = self.objects();
        stored.is_empty() || {
            let objects = objects.ids();
            stored.len() == objects.len()
                && stored
                    .iter()
                    .zip(objects)
                    .all(|(&stored, &object)| stored == u64::from(object))
        }
    }
}

/// The ids of the loaded objects a stack's frames lie in outside the
/// program's own (`modules`), sorted; none if they all lie in the program's
/// own. Found only if a lookup needs them.
pub trait Objects {
    /// The ids.
    fn ids(&mut self) -> &[u32];
}

impl Objects for &[u32] {
    fn ids(&mut self) -> &[u32] {
        self
    }
}

/// Where the next stack's key is copied to.
struct FrameArena {
    next: usize,
    end: usize,
}

/// The record a sample is counted in ([`StackTable::record_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// A stack id, or [`THREAD_RECORD`] with a side-table record id.
    pub record: u32,
    /// The record is labelled with the sampling thread (its own record, not
    /// "other threads"): the thread belongs in the dump's thread list.
    pub labelled: bool,
    /// The stack table was full: the sample went to the entry without frames.
    pub without_frames: bool,
}

/// A record's live samples as a dump counts them: what one walk of the live
/// table found of them, so that a dump's stacks count exactly the samples it
/// lists.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LiveCounts {
    pub objects: u64,
    pub bytes: u64,
    pub usable_bytes: u64,
    pub weights: Weights,
}

/// The process's stack table.
pub struct StackTable {
    entries: Chunks<StackEntry, ENTRIES_PER_CHUNK, MAX_CHUNKS>,
    index: AtomicPtr<AtomicU32>,
    index_bits: AtomicU32,
    count: AtomicUsize,
    insert_lock: SpinLock<FrameArena>,
    index_mapped_for_children: sys::MappedForChildren,
    /// Where a forked child indexes the stacks it interns first
    /// ([`EntryPlace::NurseryFirst`]): stack id + 1, or 0 for empty.
    nursery: Nursery<AtomicU32, NURSERY_SLOTS>,
    /// Records of threads other than a stack's owner.
    threads: StackThreads,
    /// The stacks' lifetime distributions.
    lifetimes: LifetimeTable,
}

/// Index slots of the nursery (one page with its flag).
const NURSERY_SLOTS: usize = 1022;

/// The process's stacks.
pub static STACKS: StackTable = StackTable::new();

/// Hash of a stack's frames (stacks of the same frames in other objects
/// share it).
pub fn hash_stack(frames: &[u64]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for &frame in frames {
        hash = (hash.rotate_left(5) ^ frame).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    hash | 1 // never 0
}

impl StackTable {
    /// An empty table; [`StackTable::init`] maps its index.
    pub const fn new() -> Self {
        StackTable {
            entries: Chunks::new(crate::sys::OwnUse::StackTable),
            index: AtomicPtr::new(core::ptr::null_mut()),
            index_bits: AtomicU32::new(0),
            count: AtomicUsize::new(0),
            insert_lock: SpinLock::new(LockClass::StackInsert, FrameArena { next: 0, end: 0 }),
            index_mapped_for_children: sys::MappedForChildren::new(),
            nursery: Nursery::new([const { AtomicU32::new(0) }; NURSERY_SLOTS]),
            threads: StackThreads::new(),
            lifetimes: LifetimeTable::new(),
        }
    }

    /// Map an index of 2^`index_bits` slots; at most half of them are used.
    pub fn init(&self, index_bits: u32) -> bool {
        let index = sys::map_zeroed_for(4 << index_bits, sys::OwnUse::StackTable);
        if index.is_null() {
            return false;
        }
        self.index_bits.store(index_bits, Ordering::Relaxed);
        self.index.store(index.cast(), Ordering::Release);
        self.threads.init(index_bits);
        true
    }

    /// Stacks the table can hold, the one without frames kept in reserve
    /// included.
    fn capacity(&self) -> usize {
        ((1usize << self.index_bits.load(Ordering::Relaxed)) / 2)
            .min(Chunks::<StackEntry, ENTRIES_PER_CHUNK, MAX_CHUNKS>::CAPACITY)
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
    fn entry(&self, id: u32) -> Option<&StackEntry> {
        if id as usize >= self.len() {
            return None;
        }
        // Ids below `count` lie in chunks fully written before `count` was
        // raised (release/acquire).
        self.entries.get(id as usize)
    }

    /// The counters of a record (a stack id, or a side-table record).
    pub fn counters(&self, record: u32) -> Option<&Counters> {
        if record & THREAD_RECORD != 0 {
            return Some(&self.threads.get(record & !THREAD_RECORD)?.counters);
        }
        Some(&self.entry(record)?.counters)
    }

    /// The stack a record counts samples of.
    fn stack_of(&self, record: u32) -> Option<u32> {
        if record & THREAD_RECORD != 0 {
            return Some(self.threads.get(record & !THREAD_RECORD)?.stack());
        }
        Some(record)
    }

    /// True if `record` counts samples of a stack of these `frames`.
    pub fn record_holds(&self, record: u32, frames: &[u64]) -> bool {
        self.frames_and_counters(record)
            .is_some_and(|(held, _)| held == frames)
    }

    /// The frames of the stack `record` counts samples of, and its
    /// counters: what a thread remembers of a stack it sampled, to
    /// recognise it again with one comparison of its frames and count it
    /// without a lookup (entries never move or go away: [`Chunks`]).
    pub fn frames_and_counters(&self, record: u32) -> Option<(&[u64], &Counters)> {
        if record & THREAD_RECORD != 0 {
            let thread_record = self.threads.get(record & !THREAD_RECORD)?;
            let entry = self.entry(thread_record.stack())?;
            return Some((entry.frames(), &thread_record.counters));
        }
        let entry = self.entry(record)?;
        Some((entry.frames(), &entry.counters))
    }

    /// A sample of `record` of `size` bytes (`weights`: what its allocation
    /// added, None when every allocation is sampled) was freed after living
    /// for a time in bucket `lifetime`: count it in its stack's lifetime
    /// distribution (the stack's first freed sample takes the insert lock
    /// for its block; without memory the lifetime is not counted).
    #[inline(always)]
    pub fn count_lifetime(
        &self,
        record: u32,
        size: u64,
        weights: Option<&Weights>,
        lifetime: usize,
    ) {
        let Some(entry) = self.stack_of(record).and_then(|stack| self.entry(stack)) else {
            return;
        };
        if let Some(block) = self.lifetime_block(entry) {
            block.add(lifetime, size, weights);
        }
    }

    /// The lifetime block of `entry`, handed out if it has none.
    #[inline(always)]
    fn lifetime_block(&self, entry: &StackEntry) -> Option<&LifetimeBlock> {
        let block = entry.lifetimes.load(Ordering::Acquire);
        if block.is_null() {
            return self.new_lifetime_block(entry);
        }
        // SAFETY: a published block lives in a chunk that is never unmapped.
        Some(unsafe { &*block })
    }

    #[cold]
    #[inline(never)]
    fn new_lifetime_block(&self, entry: &StackEntry) -> Option<&LifetimeBlock> {
        let _inserting = self.insert_lock.lock();
        let block = entry.lifetimes.load(Ordering::Acquire);
        if !block.is_null() {
            // SAFETY: as in `lifetime_block`.
            return Some(unsafe { &*block });
        }
        // SAFETY: the insert lock is held.
        let id = unsafe { self.lifetimes.hand_out() }?;
        let block = self.lifetimes.get(id)?;
        entry.lifetimes.store(
            block as *const LifetimeBlock as *mut LifetimeBlock,
            Ordering::Release,
        );
        Some(block)
    }

    /// The lifetimes of `entry`'s freed samples, if it has a block of its
    /// own (the reserve's are the dump's stack without frames).
    fn lifetimes_of(&self, entry: &StackEntry, counts_are_weights: bool) -> Vec<LifetimeBucket> {
        let block = entry.lifetimes.load(Ordering::Acquire);
        let reserve = self.lifetimes.reserve();
        if block.is_null() || reserve.is_some_and(|r| core::ptr::eq(r, block)) {
            return Vec::new();
        }
        // SAFETY: as in `lifetime_block`.
        unsafe { &*block }.read(counts_are_weights)
    }

    fn index_slot(&self, position: usize) -> Option<&AtomicU32> {
        let index = self.index.load(Ordering::Acquire);
        let mask = (1usize << self.index_bits.load(Ordering::Relaxed)) - 1;
        // SAFETY: the index maps 2^index_bits slots and the position is masked.
        (!index.is_null()).then(|| unsafe { &*index.add(position & mask) })
    }

    /// Find a stack without inserting: (id or the first free position of
    /// the main index).
    fn lookup(&self, hash: u64, frames: &[u64], objects: &mut impl Objects) -> Result<u32, usize> {
        let found = self.lookup_main(hash, frames, objects);
        if found.is_ok() || !self.nursery.in_use() {
            return found;
        }
        for slot in self.nursery.probes(hash) {
            match self.holder_of(slot, hash, frames, objects) {
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
        objects: &mut impl Objects,
    ) -> Option<Result<u32, ()>> {
        match slot.load(Ordering::Acquire) {
            0 => Some(Err(())),
            id_plus_one => self
                .entry(id_plus_one - 1)
                .filter(|entry| {
                    entry.hash.load(Ordering::Relaxed) == hash && entry.has_key(frames, objects)
                })
                .map(|_| Ok(id_plus_one - 1)),
        }
    }

    fn lookup_main(
        &self,
        hash: u64,
        frames: &[u64],
        objects: &mut impl Objects,
    ) -> Result<u32, usize> {
        let bits = self.index_bits.load(Ordering::Relaxed);
        let home = sys::hash_word(hash, bits);
        let mut position = home;
        loop {
            let Some(slot) = self.index_slot(position) else {
                return Err(usize::MAX);
            };
            match self.holder_of(slot, hash, frames, objects) {
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

    /// The record a sample of `frames` (in loaded objects `objects`) taken
    /// by thread `thread` is counted in: the stack's own record if `thread`
    /// owns it (a new stack is owned by the thread that interns it) or if it
    /// holds other threads' samples; else the thread's record in the side
    /// table, created if new; when that is full, the stack's own record,
    /// relabelled "other threads". A new stack goes where `place` says; when
    /// the table is full it is counted in the entry without frames. None
    /// only without memory.
    pub fn record_for(
        &self,
        frames: &[u64],
        objects: &mut impl Objects,
        thread: u32,
        place: EntryPlace,
    ) -> Option<Recorded> {
        let (stack, without_frames) = match self.intern(frames, objects, thread, place, false) {
            Some(stack) => (stack, false),
            None => (self.intern(&[], &mut &[][..], thread, place, true)?, true),
        };
        let entry = self.entry(stack)?;
        let owner = entry.owner.load(Ordering::Relaxed);
        let recorded = |record, labelled| Recorded {
            record,
            labelled,
            without_frames,
        };
        if owner == thread || owner == OTHER_THREADS {
            return Some(recorded(stack, owner == thread));
        }
        let found = self.threads.find(stack, thread).or_else(|| {
            let _inserting = self.insert_lock.lock();
            // SAFETY: the insert lock is held.
            unsafe { self.threads.find_or_insert(stack, thread) }
        });
        match found {
            Some(record) => Some(recorded(THREAD_RECORD | record, true)),
            None => {
                entry.owner.store(OTHER_THREADS, Ordering::Relaxed);
                Some(recorded(stack, false))
            }
        }
    }

    /// The id of this stack, inserting it (owned by `owner`, indexed where
    /// `place` says) if new. None when the table is full (the last entry is
    /// kept for `reserve`) or out of memory.
    fn intern(
        &self,
        frames: &[u64],
        objects: &mut impl Objects,
        owner: u32,
        place: EntryPlace,
        reserve: bool,
    ) -> Option<u32> {
        let hash = hash_stack(frames);
        if let Ok(id) = self.lookup(hash, frames, objects) {
            return Some(id);
        }
        let limit = self.capacity() - usize::from(!reserve);
        if self.len() >= limit {
            return None;
        }
        let mut arena = self.insert_lock.lock();
        // Someone may have inserted it while we waited.
        let main_position = match self.lookup(hash, frames, objects) {
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
        if id >= limit {
            return None;
        }
        let objects = objects.ids();
        let key = Self::store_key(&mut arena, frames, objects)?;
        let entry = self.entries.get_or_map(id)?;
        entry.hash.store(hash, Ordering::Relaxed);
        entry.key.store(key, Ordering::Relaxed);
        entry.depth.store(frames.len() as u32, Ordering::Relaxed);
        entry.objects.store(objects.len() as u32, Ordering::Relaxed);
        entry.owner.store(owner, Ordering::Relaxed);
        self.count.store(id + 1, Ordering::Release);
        slot.store(id as u32 + 1, Ordering::Release);
        if place == EntryPlace::NurseryFirst {
            self.nursery.mark_used();
        }
        Some(id as u32)
    }

    /// Copy a key (the frames, then one word per object id) into the arena.
    fn store_key(arena: &mut FrameArena, frames: &[u64], objects: &[u32]) -> Option<*mut u64> {
        let words = frames.len() + objects.len();
        let bytes = (words * 8).max(8);
        if arena.next + bytes > arena.end {
            let chunk = sys::map_zeroed_for(FRAME_CHUNK_BYTES, sys::OwnUse::Frames);
            if chunk.is_null() {
                return None;
            }
            arena.next = chunk as usize;
            arena.end = chunk as usize + FRAME_CHUNK_BYTES;
        }
        let destination = arena.next as *mut u64;
        // SAFETY: [next, next + bytes) is inside the current arena chunk and
        // belongs to no published entry yet.
        let stored = unsafe { core::slice::from_raw_parts_mut(destination, words) };
        stored[..frames.len()].copy_from_slice(frames);
        for (word, &object) in stored[frames.len()..].iter_mut().zip(objects) {
            *word = u64::from(object);
        }
        arena.next += bytes;
        Some(destination)
    }

    /// Copy every record that has live objects (as `live` counts them), or
    /// (with `include_freed`) any allocations at all, as a dump's stacks: one
    /// per stack and thread the table tells apart (its frames, the record's
    /// thread, its live counts from `live` and its cumulative ones),
    /// a stack's lifetime distribution on its own record's (with
    /// `include_freed`, or while it has live objects). `context` names the
    /// module context of a stack's objects (the dump's epoch). With
    /// `counts_are_weights` (every allocation sampled, so no weight sums were
    /// kept) the weight sums are the counts. Lifetimes counted in the reserve
    /// block come last, on a stack without frames. Returns the stacks and,
    /// for each of them, its record.
    pub fn snapshot(
        &self,
        include_freed: bool,
        counts_are_weights: bool,
        live: &dyn Fn(u32) -> LiveCounts,
        context: &mut dyn FnMut(&[u64]) -> u32,
    ) -> (Vec<Stack>, Vec<u32>) {
        let mut out = Vec::new();
        let mut records = Vec::new();
        let mut push = |entry: &StackEntry, record: u32, thread: u32, counters: &Counters| {
            let counts = counters.read(counts_are_weights);
            let live = live(record);
            if live.objects == 0 && !(include_freed && counts.alloc_objects > 0) {
                return;
            }
            let lifetimes = if record & THREAD_RECORD == 0 {
                self.lifetimes_of(entry, counts_are_weights)
            } else {
                Vec::new()
            };
            records.push(record);
            out.push(Stack {
                frames: entry.frames().to_vec(),
                thread,
                epoch: context(entry.objects()),
                live_objects: live.objects,
                live_bytes: live.bytes,
                live_usable_bytes: live.usable_bytes,
                alloc_objects: counts.alloc_objects,
                alloc_bytes: counts.alloc_bytes,
                live: live.weights,
                alloc: counts.alloc,
                lifetimes,
            });
        };
        for id in 0..self.len() as u32 {
            if let Some(entry) = self.entry(id) {
                push(
                    entry,
                    id,
                    entry.owner.load(Ordering::Relaxed),
                    &entry.counters,
                );
            }
        }
        for id in 0..self.threads.len() as u32 {
            let Some(record) = self.threads.get(id) else {
                continue;
            };
            if let Some(entry) = self.entry(record.stack()) {
                push(entry, THREAD_RECORD | id, record.thread(), &record.counters);
            }
        }
        let reserve = self.lifetimes.reserve().map(|b| b.read(counts_are_weights));
        if let Some(lifetimes) = reserve.filter(|l| include_freed && !l.is_empty()) {
            records.push(u32::MAX);
            out.push(Stack {
                thread: OTHER_THREADS,
                epoch: context(&[]),
                lifetimes,
                ..Stack::default()
            });
        }
        (out, records)
    }

    /// Zero every counter (for `heapsample_reset`).
    pub fn zero_counts(&self) {
        for id in 0..self.len() as u32 {
            if let Some(entry) = self.entry(id) {
                entry.counters.zero();
            }
        }
        self.threads.zero_counts();
        self.lifetimes.zero();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table(index_bits: u32) -> Box<StackTable> {
        let table = Box::new(StackTable::new());
        assert!(table.init(index_bits));
        table
    }

    /// Live counts per record as a walk of the live table would find them
    /// for `samples` (record, bytes, weights).
    fn walked(samples: &[(u32, u64, Weights)]) -> impl Fn(u32) -> LiveCounts + '_ {
        move |record| {
            let mut counts = LiveCounts::default();
            for &(_, size, weights) in samples.iter().filter(|s| s.0 == record) {
                counts.objects += 1;
                counts.bytes += size;
                counts.usable_bytes += size;
                counts.weights = counts.weights.plus(&weights);
            }
            counts
        }
    }

    fn record(table: &StackTable, frames: &[u64], mut objects: &[u32], thread: u32) -> Recorded {
        table
            .record_for(frames, &mut objects, thread, EntryPlace::Main)
            .unwrap()
    }

    #[test]
    fn one_entry_per_stack_keyed_by_frames_and_objects() {
        let table = table(8);
        let a = record(&table, &[1, 2, 3], &[5], 1);
        assert_eq!((a.labelled, a.without_frames), (true, false));
        assert_ne!(record(&table, &[1, 2, 4], &[5], 1).record, a.record);
        assert_ne!(record(&table, &[1, 2, 3], &[6], 1).record, a.record);
        assert_ne!(record(&table, &[1, 2, 3], &[5, 6], 1).record, a.record);
        assert_eq!(record(&table, &[1, 2, 3], &[5], 1), a);
        assert_eq!(table.len(), 4);
        assert!(table.record_holds(a.record, &[1, 2, 3]));
        assert!(!table.record_holds(a.record, &[1, 2, 4]));
        assert!(!table.record_holds(a.record, &[1, 2]));
        // Another thread: the same stack, a record of its own.
        let b = record(&table, &[1, 2, 3], &[5], 2);
        assert_eq!(table.len(), 4, "no new stack for another thread");
        assert!(b.record & THREAD_RECORD != 0 && b.labelled);
        assert!(table.record_holds(b.record, &[1, 2, 3]));
        assert_eq!(record(&table, &[1, 2, 3], &[5], 2), b);
    }

    /// A stack without object ids lies in the program's own objects: its
    /// frames alone find it, and its object ids are never asked for.
    #[test]
    fn a_stack_without_objects_is_found_without_them() {
        struct Unasked;
        impl Objects for Unasked {
            fn ids(&mut self) -> &[u32] {
                panic!("object ids looked up for a stack that has none")
            }
        }
        let table = table(8);
        let own = record(&table, &[7, 8], &[], 1).record;
        let found = table.record_for(&[7, 8], &mut Unasked, 1, EntryPlace::Main);
        assert_eq!(found.map(|r| r.record), Some(own));
    }

    #[test]
    fn snapshot_has_a_stack_per_thread_with_its_counts() {
        let table = table(8);
        let weights = heapsample_format::sample_weights(10, 1 << 19);
        let mut live = Vec::new();
        for thread in [1, 2, 2] {
            let recorded = record(&table, &[1, 2, 3], &[7], thread);
            let counters = table.counters(recorded.record).unwrap();
            counters.add_sample(10, Some(&weights));
            live.push((recorded.record, 10, weights));
        }
        let mut contexts = Vec::new();
        let (snapshot, records) = table.snapshot(false, false, &walked(&live), &mut |objects| {
            contexts.push(objects.to_vec());
            9
        });
        assert_eq!(records.len(), snapshot.len());
        assert_eq!(contexts, [vec![7], vec![7]]);
        let threads: Vec<(u32, u64, u64, u32)> = snapshot
            .iter()
            .map(|s| (s.thread, s.live_objects, s.alloc_objects, s.epoch))
            .collect();
        assert_eq!(threads, [(1, 1, 1, 9), (2, 2, 2, 9)]);
        assert!(snapshot.iter().all(|s| s.frames == [1, 2, 3]));
        assert_eq!(snapshot[1].live, weights.plus(&weights));
        assert_eq!(snapshot[1].alloc, weights.plus(&weights));
        // Records with allocations but nothing live: only with include_freed.
        assert!(
            table
                .snapshot(false, false, &walked(&[]), &mut |_| 0)
                .0
                .is_empty()
        );
        assert_eq!(
            table
                .snapshot(true, false, &walked(&[]), &mut |_| 0)
                .0
                .len(),
            2
        );
        table.zero_counts();
        assert!(
            table
                .snapshot(true, false, &walked(&[]), &mut |_| 0)
                .0
                .is_empty()
        );
    }

    /// A stack's freed samples, whichever thread allocated them, fill one
    /// lifetime distribution, carried by the stack's own record.
    #[test]
    fn lifetimes_belong_to_the_stack_and_travel_with_its_own_record() {
        let table = table(8);
        let own = record(&table, &[1, 2], &[], 1).record;
        let other = record(&table, &[1, 2], &[], 2).record;
        assert_ne!(own, other);
        for recorded in [own, own, other] {
            let counters = table.counters(recorded).unwrap();
            counters.add_sample(10, None);
        }
        table.count_lifetime(own, 10, None, 4);
        table.count_lifetime(other, 10, None, 4);
        table.count_lifetime(own, 10, None, 0);
        let (snapshot, records) = table.snapshot(true, true, &walked(&[]), &mut |_| 0);
        assert_eq!(records, [own, other]);
        let buckets: Vec<(u8, u64)> = snapshot[0]
            .lifetimes
            .iter()
            .map(|b| (b.bucket, b.samples))
            .collect();
        assert_eq!(buckets, [(0, 1), (4, 2)]);
        assert!(snapshot[1].lifetimes.is_empty());
        let counts: Vec<(u64, u64)> = snapshot
            .iter()
            .map(|s| (s.live_objects, s.alloc_objects))
            .collect();
        assert_eq!(counts, [(0, 2), (0, 1)], "counted in their own records");
        table.zero_counts();
        let (snapshot, _) = table.snapshot(true, true, &walked(&[]), &mut |_| 0);
        assert!(snapshot.is_empty());
    }

    /// Once the side table is full, a thread's samples of a stack it does
    /// not own go to the stack's own record, labelled "other threads" from
    /// then on; nothing is lost.
    #[test]
    fn without_room_for_a_thread_the_stack_counts_other_threads() {
        let table = table(8);
        for thread in 2..2 + table.threads.capacity() as u32 {
            assert!(record(&table, &[1], &[], 1).labelled);
            assert!(record(&table, &[1], &[], thread).record & THREAD_RECORD != 0);
        }
        let late = record(&table, &[1], &[], 1_000_000);
        assert_eq!((late.record & THREAD_RECORD, late.labelled), (0, false));
        table.counters(late.record).unwrap().add_sample(8, None);
        let owner = record(&table, &[1], &[], 1);
        assert_eq!((owner.record, owner.labelled), (late.record, false));
        let live = [(late.record, 8, heapsample_format::sample_weights(8, 1))];
        let (snapshot, _) = table.snapshot(false, true, &walked(&live), &mut |_| 0);
        assert_eq!(snapshot.len(), 1);
        assert_eq!(
            (snapshot[0].thread, snapshot[0].live_objects),
            (OTHER_THREADS, 1)
        );
    }

    /// A forked child's new stacks are indexed in the nursery while it has
    /// room, then in the main index; every stack is found from either place.
    #[test]
    fn nursery_first_stacks_are_found_wherever_they_were_indexed() {
        let table = table(14);
        let inherited = record(&table, &[1, 2], &[], 1).record;
        let ids: Vec<u32> = (0..3000u64)
            .map(|i| {
                table
                    .record_for(&[i, 9], &mut &[][..], 1, EntryPlace::NurseryFirst)
                    .unwrap()
                    .record
            })
            .collect();
        assert_eq!(table.len(), 3001);
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(record(&table, &[i as u64, 9], &[], 1).record, id);
        }
        let again = table.record_for(&[1, 2], &mut &[][..], 1, EntryPlace::NurseryFirst);
        assert_eq!(again.unwrap().record, inherited);
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

    /// A full table counts new stacks in its one entry without frames (kept
    /// in reserve); known stacks keep their entries.
    #[test]
    fn full_table_counts_new_stacks_without_frames() {
        let table = table(4); // 8 stacks at most, one of them in reserve
        for i in 0..7u64 {
            assert!(!record(&table, &[i], &[], 1).without_frames);
        }
        let overflow = record(&table, &[99], &[], 1);
        assert!(overflow.without_frames);
        let other = record(&table, &[100], &[3], 2);
        assert!(other.without_frames);
        assert_eq!(table.stack_of(other.record), Some(7));
        assert_eq!(record(&table, &[3], &[], 1).record, 3);
        table.counters(overflow.record).unwrap().add_sample(8, None);
        let live = [(overflow.record, 8, heapsample_format::sample_weights(8, 1))];
        let (snapshot, _) = table.snapshot(false, true, &walked(&live), &mut |_| 0);
        assert_eq!(snapshot.len(), 1);
        assert!(snapshot[0].frames.is_empty());
    }
}
