//! The live-sample table: which addresses are sampled objects still alive.
//!
//! Owns a lock-free open-addressing map from address to (stack-table
//! record, size), plus a small counting filter indexed by the address's page
//! number modulo 32768 (pages 128 MiB apart share a counter), so that a free of an
//! unsampled pointer costs one load of a 128 KiB `.bss` array and one
//! well-predicted branch (the assembly in `fast_path` reads it directly).
//! Untouched filter pages read as the shared zero page. Counters can also be
//! pinned: the bootstrap arena's pages, and all of them under `prof_exact`,
//! so that those frees take the slow path too. An entry is removed *before* the real free, so
//! when the allocator hands the same address out again it can never be taken
//! for the old sample.
//!
//! Forked children write as few of the pages they share copy-on-write with
//! their parent as they can: the thread that survived the fork puts its
//! samples in a one-page nursery first, slots are claimed without a read
//! before the write, and a process maps the slots' untouched pages before
//! its first fork so that children read them without faults.
//!
//! Runs inside malloc and free: no allocation, no locks. Insert and remove
//! are compare-and-swap on the slot; the table is sized once at start-up and
//! a sample that finds no slot within the probe limit is dropped (counted).

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::nursery::Nursery;
use crate::sys;
use crate::tls::EntryPlace;

const EMPTY: usize = 0;
const TOMBSTONE: usize = 1;
const PROBE_LIMIT: usize = 64;
const FILTER_BITS: u32 = 15;
const SIZE_BITS: u32 = 40;
const SIZE_MASK: u64 = (1 << SIZE_BITS) - 1;

/// The largest stack-table record id an entry can hold.
pub const MAX_RECORD: u32 = (1 << (64 - SIZE_BITS)) - 1;

#[repr(C)]
struct Slot {
    address: AtomicUsize,
    /// `record << 40 | requested size` (sizes above 1 TiB are clamped),
    /// the stack-table record the sample is counted in.
    value: AtomicU64,
}

impl Slot {
    const fn empty() -> Slot {
        Slot {
            address: AtomicUsize::new(EMPTY),
            value: AtomicU64::new(0),
        }
    }

    /// Take this slot for `address` if it is free (empty or a tombstone):
    /// a compare-and-swap without a read before it (the read would cost a
    /// second page fault on a page no sample used yet).
    #[inline(always)]
    fn claim(&self, address: usize, sample: LiveSample) -> bool {
        let claimed =
            match self
                .address
                .compare_exchange(EMPTY, address, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => true,
                Err(TOMBSTONE) => self
                    .address
                    .compare_exchange(TOMBSTONE, address, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok(),
                Err(_) => false,
            };
        if claimed {
            self.value.store(sample.pack(), Ordering::Release);
        }
        claimed
    }
}

/// The main slots one address may occupy: from its home, in order.
struct MainProbe<'a> {
    slots: &'a Slot,
    home: usize,
    mask: usize,
}

impl<'a> MainProbe<'a> {
    /// The `at`-th slot of the probe sequence.
    #[inline(always)]
    fn slot(&self, at: usize) -> &'a Slot {
        // SAFETY: `slots` starts the mapping of `mask + 1` slots and the
        // index is masked.
        unsafe { &*(self.slots as *const Slot).add((self.home + at) & self.mask) }
    }
}

/// The first of `probes` that holds `address`: a probe sequence ends at an
/// empty slot (tombstones do not end it).
#[inline(always)]
fn slot_holding<'a>(probes: impl Iterator<Item = &'a Slot>, address: usize) -> Option<&'a Slot> {
    for slot in probes {
        match slot.address.load(Ordering::Acquire) {
            found if found == address => return Some(slot),
            EMPTY => return None,
            _ => {}
        }
    }
    None
}

/// What the table remembers about a live sampled object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveSample {
    pub record: u32,
    pub size: u64,
}

impl LiveSample {
    fn pack(self) -> u64 {
        u64::from(self.record) << SIZE_BITS | self.size.min(SIZE_MASK)
    }
    fn unpack(value: u64) -> LiveSample {
        LiveSample {
            record: (value >> SIZE_BITS) as u32,
            size: value & SIZE_MASK,
        }
    }
}

/// Why an insert failed.
#[derive(Debug, PartialEq, Eq)]
pub struct TableFull;

/// The table. One per process, set up by [`LiveTable::init`].
#[repr(C)]
pub struct LiveTable {
    slots: AtomicPtr<Slot>,
    slot_bits: AtomicU32,
    slots_mapped_for_children: sys::MappedForChildren,
    filter: [AtomicU32; FILTER_LEN],
    live: AtomicU64,
    /// Where a forked child puts its samples first
    /// ([`EntryPlace::NurseryFirst`]).
    nursery: Nursery<Slot, NURSERY_SLOTS>,
}

/// Slots of the nursery (one page with its flag).
const NURSERY_SLOTS: usize = 255;

const FILTER_LEN: usize = 1 << FILTER_BITS;

/// A filter counter holds its live entries in the low 24 bits and its pins
/// in the high 8: the assembly free path tests the whole word, the table's
/// own lookups only the entries.
const PIN: u32 = 1 << 24;
const ENTRIES_MASK: u32 = PIN - 1;

/// Addresses share a filter counter per page of this many bytes (log2).
pub const FILTER_PAGE_SHIFT: u32 = 12;

/// The mask that turns a page number into a filter index.
pub const FILTER_INDEX_MASK: usize = FILTER_LEN - 1;

/// Byte offset of the filter's first counter in a [`LiveTable`] (the
/// assembly free path indexes it directly).
pub const FILTER_OFFSET: usize = core::mem::offset_of!(LiveTable, filter);

/// Size in bytes of one filter counter.
pub const FILTER_COUNTER_BYTES: usize = core::mem::size_of::<AtomicU32>();

/// The process's live-sample table.
pub static LIVE: LiveTable = LiveTable::new();

#[inline(always)]
fn page_bucket(address: usize) -> usize {
    (address >> FILTER_PAGE_SHIFT) & FILTER_INDEX_MASK
}

impl LiveTable {
    /// An empty, unmapped table (every lookup misses).
    pub const fn new() -> Self {
        LiveTable {
            slots: AtomicPtr::new(core::ptr::null_mut()),
            slot_bits: AtomicU32::new(0),
            slots_mapped_for_children: sys::MappedForChildren::new(),
            filter: [const { AtomicU32::new(0) }; FILTER_LEN],
            live: AtomicU64::new(0),
            nursery: Nursery::new([const { Slot::empty() }; NURSERY_SLOTS]),
        }
    }

    /// Map a table of 2^`slot_bits` slots. Returns false if memory could not
    /// be mapped (sampling then stays off).
    pub fn init(&self, slot_bits: u32) -> bool {
        let slots = sys::map_zeroed(core::mem::size_of::<Slot>() << slot_bits);
        if slots.is_null() {
            return false;
        }
        self.slot_bits.store(slot_bits, Ordering::Relaxed);
        self.slots.store(slots.cast(), Ordering::Release);
        true
    }

    /// In a process about to fork: map the slots' untouched pages to the
    /// zero page, so that forked children inherit the mappings. A child's
    /// free of an unsampled object that shares a filter counter with a
    /// sample probes a slot no sample ever used; without this, each such
    /// slot page would cost the child a page fault. Once per table.
    pub fn map_slots_for_children(&self) {
        let bytes = core::mem::size_of::<Slot>() << self.slot_bits.load(Ordering::Relaxed);
        self.slots_mapped_for_children
            .map_once(self.slots.load(Ordering::Acquire).cast(), bytes);
    }

    fn slot(&self, index: usize) -> &Slot {
        let mask = (1usize << self.slot_bits.load(Ordering::Relaxed)) - 1;
        // SAFETY: `slots` maps 2^slot_bits slots (init) and the index is masked.
        unsafe { &*self.slots.load(Ordering::Acquire).add(index & mask) }
    }

    #[inline(always)]
    fn filter_bucket(&self, address: usize) -> &AtomicU32 {
        &self.filter[page_bucket(address)]
    }

    /// Where `address` may sit in the main slots (the mapping and its size
    /// read once); `None` before the table is mapped.
    #[inline(always)]
    fn main_probe(&self, address: usize) -> Option<MainProbe<'_>> {
        let slots = self.slots.load(Ordering::Acquire);
        let bits = self.slot_bits.load(Ordering::Relaxed);
        // SAFETY: a non-null `slots` maps 2^bits slots (init), for good.
        let slots = unsafe { slots.as_ref() }?;
        Some(MainProbe {
            slots,
            home: sys::hash_word(address as u64, bits),
            mask: (1usize << bits) - 1,
        })
    }

    /// Make every free in `[start, start + len)` take free's route (the
    /// bootstrap arena). Pins stay for the process's life.
    pub fn pin_pages(&self, start: usize, len: usize) {
        let pages = (len >> FILTER_PAGE_SHIFT).clamp(1, FILTER_LEN);
        for page in 0..pages {
            self.filter_bucket(start + (page << FILTER_PAGE_SHIFT))
                .fetch_add(PIN, Ordering::Relaxed);
        }
    }

    /// Make every free take free's route (`prof_exact`, which counts each).
    pub fn pin_all(&self) {
        for bucket in &self.filter {
            bucket.fetch_add(PIN, Ordering::Relaxed);
        }
    }

    /// What the exported `free` tests: false means the free of `address`
    /// needs nothing from the profiler (not sampled, not pinned).
    #[inline(always)]
    pub fn free_takes_route(&self, address: usize) -> bool {
        self.filter_bucket(address).load(Ordering::Relaxed) != 0
    }

    /// Cheap pre-check for `free`: false means `address` is certainly not a
    /// live sample. One load, no writes.
    #[inline(always)]
    pub fn may_contain(&self, address: usize) -> bool {
        self.filter_bucket(address).load(Ordering::Relaxed) & ENTRIES_MASK != 0
    }

    /// Record a live sample (where `place` says). If the address was
    /// already recorded (its free was never seen), the old entry is replaced
    /// and returned so its counts can be released.
    ///
    /// Looks for an old entry only where the filter says one may exist, and
    /// claims slots without reading them first (see [`Slot::claim`]).
    pub fn insert(
        &self,
        address: usize,
        sample: LiveSample,
        place: EntryPlace,
    ) -> Result<Option<LiveSample>, TableFull> {
        let Some(probe) = self.main_probe(address) else {
            return Err(TableFull);
        };
        let bucket = self.filter_bucket(address);
        let entries_before = bucket.fetch_add(1, Ordering::AcqRel) & ENTRIES_MASK;
        if entries_before != 0
            && let Some(slot) = self.find_with(address, &probe)
        {
            bucket.fetch_sub(1, Ordering::AcqRel);
            let old = slot.value.swap(sample.pack(), Ordering::AcqRel);
            return Ok(Some(LiveSample::unpack(old)));
        }
        let claimed = (place == EntryPlace::NurseryFirst && self.claim_in_nursery(address, sample))
            || (0..PROBE_LIMIT).any(|at| probe.slot(at).claim(address, sample));
        if claimed {
            self.live.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        bucket.fetch_sub(1, Ordering::AcqRel);
        Err(TableFull)
    }

    /// Put a new sample in the nursery, if it has room.
    #[cold]
    fn claim_in_nursery(&self, address: usize, sample: LiveSample) -> bool {
        let claimed = self
            .nursery
            .probes(address as u64)
            .any(|slot| slot.claim(address, sample));
        if claimed {
            self.nursery.mark_used();
        }
        claimed
    }

    /// The nursery's slot of `address`, if it has one.
    #[cold]
    fn find_in_nursery(&self, address: usize) -> Option<&Slot> {
        slot_holding(self.nursery.probes(address as u64), address)
    }

    #[inline(always)]
    fn find(&self, address: usize) -> Option<&Slot> {
        self.find_with(address, &self.main_probe(address)?)
    }

    #[inline(always)]
    fn find_with<'a>(&'a self, address: usize, probe: &MainProbe<'a>) -> Option<&'a Slot> {
        if self.nursery.in_use()
            && let Some(slot) = self.find_in_nursery(address)
        {
            return Some(slot);
        }
        slot_holding((0..PROBE_LIMIT).map(|at| probe.slot(at)), address)
    }

    /// True if `address` is recorded as a live sample now.
    pub fn contains(&self, address: usize) -> bool {
        self.may_contain(address) && self.find(address).is_some()
    }

    /// Remove `address` if it is a live sample, returning what was recorded.
    /// Call before the memory is released.
    pub fn remove(&self, address: usize) -> Option<LiveSample> {
        if !self.may_contain(address) {
            return None;
        }
        let slot = self.find(address)?;
        let value = slot.value.load(Ordering::Acquire);
        slot.address
            .compare_exchange(address, TOMBSTONE, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        self.filter_bucket(address).fetch_sub(1, Ordering::AcqRel);
        self.live.fetch_sub(1, Ordering::Relaxed);
        Some(LiveSample::unpack(value))
    }

    /// Forget every entry (for `heapsample_reset`). Concurrent frees of
    /// forgotten samples simply miss.
    pub fn clear(&self) {
        if self.slots.load(Ordering::Acquire).is_null() {
            return;
        }
        let slot_count = 1usize << self.slot_bits.load(Ordering::Relaxed);
        let main = (0..slot_count).map(|index| self.slot(index));
        for slot in self.nursery.slots().iter().chain(main) {
            let address = slot.address.load(Ordering::Acquire);
            if address > TOMBSTONE {
                let _ = self.remove(address);
            }
        }
    }

    /// Sampled objects currently live.
    pub fn live_count(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }
}

impl Default for LiveTable {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(10));
        let sample = LiveSample {
            record: 7,
            size: 100,
        };
        assert!(!table.may_contain(0x1000));
        assert_eq!(table.insert(0x1000, sample, EntryPlace::Main), Ok(None));
        assert!(table.may_contain(0x1000));
        assert_eq!(table.remove(0x2000), None);
        assert_eq!(table.remove(0x1000), Some(sample));
        assert_eq!(table.remove(0x1000), None);
        assert!(!table.may_contain(0x1000));
        assert_eq!(table.live_count(), 0);
    }

    #[test]
    fn pins_route_frees_but_hold_no_entries() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(10));
        table.pin_pages(0x10_0000, 0x2000);
        assert!(table.free_takes_route(0x10_0000) && table.free_takes_route(0x10_1fff));
        assert!(!table.free_takes_route(0x10_2000));
        assert!(!table.may_contain(0x10_0000));
        let sample = LiveSample {
            record: 3,
            size: 24,
        };
        table.insert(0x10_0040, sample, EntryPlace::Main).unwrap();
        assert!(table.may_contain(0x10_0040));
        assert_eq!(table.remove(0x10_0040), Some(sample));
        assert!(!table.may_contain(0x10_0040) && table.free_takes_route(0x10_0040));
        table.pin_all();
        assert!(table.free_takes_route(0x7000_0000) && !table.may_contain(0x7000_0000));
    }

    /// A forked child's samples go to the nursery while it has room, then to
    /// the main table; frees find them wherever they are.
    #[test]
    fn nursery_first_samples_are_found_and_removed_wherever_they_are() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(12));
        let sample = |i: usize| LiveSample {
            record: i as u32,
            size: 8,
        };
        let address = |i: usize| 0x5000_0000 + i * 0x1_0040;
        table
            .insert(address(0), sample(0), EntryPlace::Main)
            .unwrap();
        for i in 1..600 {
            assert_eq!(
                table.insert(address(i), sample(i), EntryPlace::NurseryFirst),
                Ok(None)
            );
        }
        let in_nursery = table
            .nursery
            .slots()
            .iter()
            .filter(|slot| slot.address.load(Ordering::Relaxed) > TOMBSTONE)
            .count();
        assert!(
            in_nursery > NURSERY_SLOTS / 2 && in_nursery <= NURSERY_SLOTS,
            "{in_nursery} samples in the nursery"
        );
        assert_eq!(table.live_count(), 600);
        for i in 0..600 {
            assert!(table.contains(address(i)));
            assert_eq!(table.remove(address(i)), Some(sample(i)), "sample {i}");
        }
        assert_eq!(table.live_count(), 0);
        assert!((0..600).all(|i| !table.may_contain(address(i))));
    }

    #[test]
    fn reinsert_returns_stale_entry() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(10));
        let first = LiveSample { record: 1, size: 8 };
        let second = LiveSample {
            record: 2,
            size: 16,
        };
        table.insert(0x40, first, EntryPlace::Main).unwrap();
        assert_eq!(
            table.insert(0x40, second, EntryPlace::Main),
            Ok(Some(first))
        );
        assert_eq!(table.remove(0x40), Some(second));
    }

    #[test]
    fn many_threads_insert_and_remove() {
        static TABLE: LiveTable = LiveTable::new();
        assert!(TABLE.init(16));
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..50 {
                        // Real addresses are never 0 (the empty marker) or 1 (a tombstone).
                        let base = (t as usize + 1) << 32 | round << 20;
                        for i in 0..1000usize {
                            let sample = LiveSample {
                                record: t,
                                size: i as u64,
                            };
                            TABLE
                                .insert(base + i * 16, sample, EntryPlace::Main)
                                .unwrap();
                        }
                        for i in 0..1000usize {
                            let got = TABLE.remove(base + i * 16).unwrap();
                            assert_eq!(
                                got,
                                LiveSample {
                                    record: t,
                                    size: i as u64
                                }
                            );
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(TABLE.live_count(), 0);
    }
}
