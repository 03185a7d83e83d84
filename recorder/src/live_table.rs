//! The live-sample table: which addresses are sampled objects still alive.
//!
//! Owns a lock-free open-addressing map from address to (stack-table
//! record, thread, size, usable size, birth), plus a counting filter
//! indexed by the address's page number modulo 2^20 (the address's low 32
//! bits shifted right by 12: pages 4 GiB apart share a counter, and the
//! assembly in `fast_path`, which reads it directly for `free` and
//! `realloc`, needs no mask), so that a free of an unsampled pointer costs
//! one load of a 4 MiB `.bss` array and one well-predicted branch. Untouched
//! filter pages read as the shared zero page, and a page of counters covers
//! 4 MiB of heap, so the pages a program touches follow its heap's span.
//! Counters can also be pinned (the bootstrap arena's pages), so that
//! those frees take the slow path too; `prof_exact`, which counts every
//! free, sends the frees the filter passes to its route instead
//! (`routes::FREE_PASS`). An entry is removed *before* the
//! real free, so when the allocator hands the same address out again it can
//! never be taken for the old sample.
//!
//! Forked children write as few of the pages they share copy-on-write with
//! their parent as they can: the thread that survived the fork puts its
//! samples in a one-page nursery first, and slots are claimed without a read
//! before the write. A child's free of an unsampled object whose filter
//! counter a sample in the same heap page keeps nonzero probes that
//! sample's table page (homes keep the heap's order), which the parent
//! wrote: no fault. (Mapping all of the slots' pages before a first fork, as
//! an earlier table hashed over its whole size needed, made every fork copy
//! their page-table entries: +20 µs per fork at the default period.)
//!
//! Where an entry goes follows the heap: its home slot keeps the address's
//! place within its 64 KiB region (one slot per 32 bytes of address, the
//! smallest block glibc hands out), and only the region is hashed. Objects
//! allocated together sit in neighbouring slots, so the table's accesses
//! have the heap's own locality, and the table's touched memory grows with
//! the address space the live samples occupy, not with the table's reserved
//! size; an address freed and handed out again finds its own home free. An
//! entry whose home is taken (an allocator with smaller blocks, regions that
//! hash alike) goes to the open-addressing sequence of a second home hashed
//! over the whole table.
//!
//! Runs inside malloc and free: no allocation, no locks. Insert and remove
//! are compare-and-swap on the slot (an insert marks it as being written
//! until its fields are stored, so a dump never reads a sample half
//! written); the table is reserved once, at the first sample (see
//! `table_setup`; its pages are touched as used), and a sample that finds
//! no slot within the probe limit is dropped (counted).
//!
//! Each page of main slots counts its entries, so a dump reads only the
//! pages that hold live samples, not every page the run ever used: the
//! count is the table's only count of live entries (no process-wide
//! counter is written), kept in a `.bss` array whose cache line covers one
//! hashed region's 16 pages, the slots' own neighbours.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::nursery::Nursery;
use crate::sys;
use crate::tls::EntryPlace;

const EMPTY: usize = 0;
const TOMBSTONE: usize = 1;
/// A slot being written: taken, its fields not all stored yet. Neither free
/// nor an entry; its address is published when the fields are complete.
const WRITING: usize = 2;

/// Does a slot holding `address` hold an entry (not empty, a tombstone or
/// being written)?
#[inline(always)]
fn is_entry(address: usize) -> bool {
    address > WRITING
}
/// Slots probed from an address's second, hashed home.
const PROBE_LIMIT: usize = 64;
const FILTER_BITS: u32 = 32 - FILTER_PAGE_SHIFT;
/// Bytes of address space per home slot (log2): no two of glibc's blocks
/// share one.
const HOME_SHIFT: u32 = 5;
/// Address-space regions whose homes keep their order (log2 of bytes).
const REGION_SHIFT: u32 = 16;
const REGION_SLOTS_BITS: u32 = REGION_SHIFT - HOME_SHIFT;
/// The distance between the slots of a hashed sequence (odd, so that a
/// sequence could visit every slot of the power-of-two table).
const HASHED_STRIDE: usize = (1 << REGION_SLOTS_BITS) + 1;
/// The slack (usable bytes beyond the request) of an entry whose usable
/// size exceeds its request too far to keep: its usable size is asked of
/// the allocator at its free.
const SLACK_UNKNOWN: u64 = 0xffff;
/// Bits of a slot's `size_slack` that hold the request (2^48 bytes is more
/// than x86-64 user space can hold, so no successful request is larger).
const SIZE_BITS: u32 = 48;
const SIZE_MASK: u64 = (1 << SIZE_BITS) - 1;

/// One entry: 32 bytes, two to a cache line.
#[repr(C, align(32))]
struct Slot {
    address: AtomicUsize,
    /// The stack-table record the sample is counted in.
    record: AtomicU32,
    /// The serial of the thread that allocated it.
    thread: AtomicU32,
    /// Requested bytes (low 48 bits) and usable bytes beyond them (high 16
    /// bits, [`SLACK_UNKNOWN`] if too many).
    size_slack: AtomicU64,
    /// When it was allocated (`CLOCK_MONOTONIC`, nanoseconds).
    birth: AtomicU64,
}

impl Slot {
    /// log2 of a slot's size in bytes.
    const SIZE_BITS: u32 = 5;
    const fn empty() -> Slot {
        Slot {
            address: AtomicUsize::new(EMPTY),
            record: AtomicU32::new(0),
            thread: AtomicU32::new(0),
            size_slack: AtomicU64::new(0),
            birth: AtomicU64::new(0),
        }
    }

    /// Take this slot for `address` if it is free (empty or a tombstone):
    /// a compare-and-swap without a read before it (the read would cost a
    /// second page fault on a page no sample used yet).
    #[inline(always)]
    fn claim(&self, address: usize, sample: LiveSample) -> bool {
        self.claim_or_holder(address, sample).is_none()
    }

    /// [`Slot::claim`] that says what stopped it: None if the slot was
    /// claimed (and the sample published), else the address it holds (an
    /// entry's, or [`WRITING`]).
    #[inline(always)]
    fn claim_or_holder(&self, address: usize, sample: LiveSample) -> Option<usize> {
        let holder =
            match self
                .address
                .compare_exchange(EMPTY, WRITING, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => None,
                Err(TOMBSTONE) => self
                    .address
                    .compare_exchange(TOMBSTONE, WRITING, Ordering::AcqRel, Ordering::Acquire)
                    .err(),
                Err(holder) => Some(holder),
            };
        if holder.is_none() {
            self.publish(address, sample);
        }
        holder
    }

    /// Take the entry of `address` to rewrite it in place (see
    /// [`LiveTable::insert`]); false if it is no longer there.
    #[inline(always)]
    fn take_entry(&self, address: usize) -> bool {
        self.address
            .compare_exchange(address, WRITING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Write the fields of a slot this thread marked [`WRITING`], the birth
    /// last, then its address. A reader that sees the address sees the
    /// whole sample; one that read some fields before and some after a
    /// rewrite sees the address taken or the birth changed (see
    /// [`LiveTable::for_each`]).
    #[inline(always)]
    fn publish(&self, address: usize, sample: LiveSample) {
        // The mark [`WRITING`] is seen before any field changes.
        core::sync::atomic::fence(Ordering::Release);
        let slack = sample.usable.wrapping_sub(sample.size).min(SLACK_UNKNOWN);
        self.record.store(sample.record, Ordering::Relaxed);
        self.thread.store(sample.thread, Ordering::Relaxed);
        self.size_slack.store(
            (sample.size & SIZE_MASK) | slack << SIZE_BITS,
            Ordering::Relaxed,
        );
        self.birth.store(sample.birth, Ordering::Release);
        self.address.store(address, Ordering::Release);
    }

    /// What the slot holds, its birth read first: the fields stored before
    /// it are seen (the caller read the address before).
    #[inline(always)]
    fn load(&self) -> LiveSample {
        let birth = self.birth.load(Ordering::Acquire);
        let size_slack = self.size_slack.load(Ordering::Relaxed);
        let size = size_slack & SIZE_MASK;
        let usable = match size_slack >> SIZE_BITS {
            SLACK_UNKNOWN => USABLE_UNKNOWN,
            slack => size + slack,
        };
        LiveSample {
            record: self.record.load(Ordering::Relaxed),
            thread: self.thread.load(Ordering::Relaxed),
            size,
            usable,
            birth,
        }
    }
}

/// The main slots one address may occupy: its local home, then the
/// sequence from its hashed home.
struct MainProbe<'a> {
    slots: &'a Slot,
    /// The local home's slot (`local`), found once.
    home: &'a Slot,
    local: usize,
    /// log2 of the slot count.
    bits: u32,
    address: usize,
}

impl<'a> MainProbe<'a> {
    /// The `at`-th slot from `home`.
    #[inline(always)]
    fn slot(&self, home: usize, at: usize) -> &'a Slot {
        // SAFETY: `slots` starts the mapping of 2^bits slots and the index
        // is masked.
        unsafe { &*(self.slots as *const Slot).add((home + at) & ((1 << self.bits) - 1)) }
    }

    /// The local home.
    #[inline(always)]
    fn home(&self) -> &'a Slot {
        self.home
    }

    /// The slots from the hashed home, one region's slots and one apart:
    /// a sequence that stayed in the slots of one region would have to pass
    /// all of its live homes, which lie side by side.
    #[inline(always)]
    fn hashed(&self) -> impl Iterator<Item = &'a Slot> + '_ {
        let home = sys::hash_word(self.address as u64, self.bits);
        (0..PROBE_LIMIT).map(move |at| self.slot(home, at * HASHED_STRIDE))
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveSample {
    pub record: u32,
    /// The serial of the thread that allocated it.
    pub thread: u32,
    /// Requested bytes.
    pub size: u64,
    /// Usable bytes (as the allocator reported them at the allocation), or
    /// [`USABLE_UNKNOWN`] from a removal when they were too many to keep:
    /// then ask the allocator before the free.
    pub usable: u64,
    /// When it was allocated (`CLOCK_MONOTONIC`, nanoseconds).
    pub birth: u64,
}

/// [`LiveSample::usable`] of an entry that did not keep it.
pub const USABLE_UNKNOWN: u64 = u64::MAX;

/// Why an insert failed.
#[derive(Debug, PartialEq, Eq)]
pub struct TableFull;

/// The table. One per process, set up by [`LiveTable::init`].
#[repr(C)]
pub struct LiveTable {
    slots: AtomicPtr<Slot>,
    slot_bits: AtomicU32,
    filter: [AtomicU32; FILTER_LEN],
    /// Entries in each page of main slots (the nursery's are not counted
    /// here): a dump reads a touched page only while it holds some.
    page_entries: [AtomicU32; PAGES],
    /// Entries in hashed sequences (their local home was taken): while there
    /// are none, an address not at its home is not in the table.
    displaced: AtomicU64,
    /// Where a forked child puts its samples first
    /// ([`EntryPlace::NurseryFirst`]).
    nursery: Nursery<Slot, NURSERY_SLOTS>,
    /// One bit per page of main slots that ever held an entry: a dump (and
    /// a reset) reads only those pages, instead of faulting in the zero
    /// page for every untouched one of the table (128 MiB at
    /// `lg_prof_sample:0`). Set at a slot's claim (a read, and a write the
    /// first time only).
    touched: [AtomicU64; TOUCHED_WORDS],
}

const _: () = assert!(core::mem::size_of::<Slot>() == 1 << Slot::SIZE_BITS);

/// The most slots a table has (log2): 128 MiB of them.
const MAX_SLOT_BITS: u32 = 22;
/// Slots per page of the table (log2).
const SLOTS_PER_PAGE_BITS: u32 = 12 - Slot::SIZE_BITS;
/// Pages of main slots at most.
const PAGES: usize = 1 << (MAX_SLOT_BITS - SLOTS_PER_PAGE_BITS);
/// Words of the touched-page bitmap.
const TOUCHED_WORDS: usize = PAGES >> 6;

/// Slots of the nursery (one page with its flag).
const NURSERY_SLOTS: usize = 127;

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
            filter: [const { AtomicU32::new(0) }; FILTER_LEN],
            page_entries: [const { AtomicU32::new(0) }; PAGES],
            displaced: AtomicU64::new(0),
            nursery: Nursery::new([const { Slot::empty() }; NURSERY_SLOTS]),
            touched: [const { AtomicU64::new(0) }; TOUCHED_WORDS],
        }
    }

    /// Map a table of 2^`slot_bits` slots (at least one region's). Returns
    /// false if memory could not be mapped (sampling then stays off).
    pub fn init(&self, slot_bits: u32) -> bool {
        let slot_bits = slot_bits.clamp(REGION_SLOTS_BITS + 1, MAX_SLOT_BITS);
        let slots = sys::map_zeroed_for(
            core::mem::size_of::<Slot>() << slot_bits,
            sys::OwnUse::LiveTable,
        );
        if slots.is_null() {
            return false;
        }
        self.slot_bits.store(slot_bits, Ordering::Relaxed);
        self.slots.store(slots.cast(), Ordering::Release);
        // The filter and the pages' counts (4.3 MiB of `.bss`) are the
        // table's too.
        sys::count_static_for(core::mem::size_of::<Self>(), sys::OwnUse::LiveTable);
        true
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
        let region = sys::hash_word((address >> REGION_SHIFT) as u64, bits - REGION_SLOTS_BITS);
        let within = (address >> HOME_SHIFT) & ((1 << REGION_SLOTS_BITS) - 1);
        let local = region << REGION_SLOTS_BITS | within;
        // SAFETY: `slots` starts the mapping of 2^bits slots, and `local` is
        // below 2^bits (`region` has bits - REGION_SLOTS_BITS bits).
        let home = unsafe { &*(slots as *const Slot).add(local) };
        Some(MainProbe {
            slots,
            home,
            local,
            bits,
            address,
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
    /// One probe in the common case: the local home's compare-and-swap
    /// claims it, or says which address holds it (this one's old entry is
    /// then replaced in place). Looks for an old entry elsewhere only where
    /// the filter says one may exist and an entry can be away from its home
    /// (the nursery in use, displaced entries), and claims slots without
    /// reading them first (see [`Slot::claim`]).
    #[inline(always)]
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
        if place == EntryPlace::Main {
            // One probe: the local home's claim says what it holds.
            let home = probe.home();
            match home.claim_or_holder(address, sample) {
                None => {
                    self.count_in_page(probe.local >> SLOTS_PER_PAGE_BITS);
                    // An entry of this address elsewhere (its free never
                    // seen) can only be where a lookup reaches past a home.
                    if entries_before != 0 && self.may_hold_away_from_home() {
                        return Ok(self.remove_away_from_home(address));
                    }
                    return Ok(None);
                }
                Some(holder) if holder == address => {
                    if home.take_entry(address) {
                        return Ok(Some(self.replace(bucket, home, address, sample)));
                    }
                }
                Some(_) => {}
            }
        }
        let LiveSample {
            record,
            thread,
            size,
            usable,
            birth,
        } = sample;
        self.insert_away_from_home(
            address,
            place,
            entries_before,
            record,
            thread,
            size,
            usable,
            birth,
        )
    }

    /// [`LiveTable::insert`] past its local home's claim (taken by another
    /// address, or not tried: the nursery first), `entries_before` being
    /// the filter's count before this address was counted. Out of line,
    /// the probe found again: the home's path keeps its probe in registers.
    /// The sample comes in its fields, not as one value passed in memory,
    /// which the home's path would have to store for it.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn insert_away_from_home(
        &self,
        address: usize,
        place: EntryPlace,
        entries_before: u32,
        record: u32,
        thread: u32,
        size: u64,
        usable: u64,
        birth: u64,
    ) -> Result<Option<LiveSample>, TableFull> {
        let sample = LiveSample {
            record,
            thread,
            size,
            usable,
            birth,
        };
        let bucket = self.filter_bucket(address);
        let Some(probe) = self.main_probe(address) else {
            bucket.fetch_sub(1, Ordering::AcqRel);
            return Err(TableFull);
        };
        // The entry of an address whose free was never seen is replaced in
        // place, marked as being written meanwhile (if a reset removed it
        // first, the address is inserted anew).
        if entries_before != 0
            && let Some(slot) = self.find_with(address, &probe)
            && slot.take_entry(address)
        {
            return Ok(Some(self.replace(bucket, slot, address, sample)));
        }
        let claimed = (place == EntryPlace::NurseryFirst && self.claim_in_nursery(address, sample))
            || self.claim_main(
                probe.home(),
                probe.local >> SLOTS_PER_PAGE_BITS,
                address,
                sample,
            )
            || self.claim_hashed(address, sample, &probe);
        if claimed {
            return Ok(None);
        }
        bucket.fetch_sub(1, Ordering::AcqRel);
        Err(TableFull)
    }

    /// Rewrite `slot`, the entry of `address` this thread took (marked
    /// [`WRITING`]), with `sample`; returns what it held. `bucket` counted
    /// the address twice.
    #[inline(always)]
    fn replace(
        &self,
        bucket: &AtomicU32,
        slot: &Slot,
        address: usize,
        sample: LiveSample,
    ) -> LiveSample {
        bucket.fetch_sub(1, Ordering::AcqRel);
        let old = slot.load();
        slot.publish(address, sample);
        old
    }

    /// May an entry sit anywhere but its local home now (the nursery in
    /// use, or entries in hashed sequences)?
    #[inline(always)]
    fn may_hold_away_from_home(&self) -> bool {
        self.nursery.in_use() || self.displaced.load(Ordering::Acquire) != 0
    }

    /// An entry of `address` just inserted at its local home may have a
    /// twin in the nursery or its hashed sequence (an earlier sample whose
    /// free was never seen): take the twin out and return it.
    #[cold]
    #[inline(never)]
    fn remove_away_from_home(&self, address: usize) -> Option<LiveSample> {
        let probe = self.main_probe(address)?;
        let home = probe.home();
        let slot = if self.nursery.in_use()
            && let Some(slot) = self.find_in_nursery(address)
        {
            slot
        } else if self.displaced.load(Ordering::Acquire) != 0 {
            // The sequence may pass the home, which holds the new entry.
            slot_holding(
                probe.hashed().filter(|slot| !core::ptr::eq(*slot, home)),
                address,
            )?
        } else {
            return None;
        };
        let sample = slot.load();
        slot.address
            .compare_exchange(address, TOMBSTONE, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        if !self.nursery.holds(slot) {
            self.page_entries[self.page_of(slot)].fetch_sub(1, Ordering::Release);
            self.displaced.fetch_sub(1, Ordering::AcqRel);
        }
        self.filter_bucket(address).fetch_sub(1, Ordering::AcqRel);
        Some(sample)
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
        // The home first: where nearly every entry is (an address is in one
        // place; a twin left by a free never seen is taken out by the insert
        // that finds it, on the thread that holds the new allocation).
        let home = probe.home();
        if home.address.load(Ordering::Acquire) == address {
            return Some(home);
        }
        if self.nursery.in_use()
            && let Some(slot) = self.find_in_nursery(address)
        {
            return Some(slot);
        }
        self.find_hashed(address)
    }

    /// An entry whose local home was taken when it was inserted.
    #[inline(always)]
    fn find_hashed(&self, address: usize) -> Option<&Slot> {
        if self.displaced.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.search_hashed(address)
    }

    /// The slot holding `address` in its hashed sequence. Out of line, the
    /// probe found again: its callers keep theirs in registers.
    #[cold]
    #[inline(never)]
    fn search_hashed(&self, address: usize) -> Option<&Slot> {
        slot_holding(self.main_probe(address)?.hashed(), address)
    }

    /// Put an entry whose local home is taken in its hashed sequence.
    #[cold]
    #[inline(never)]
    fn claim_hashed(&self, address: usize, sample: LiveSample, probe: &MainProbe<'_>) -> bool {
        // Counted first: a lookup that finds the count 0 must not miss it.
        self.displaced.fetch_add(1, Ordering::AcqRel);
        let claimed = probe
            .hashed()
            .any(|slot| self.claim_main(slot, self.page_of(slot), address, sample));
        if !claimed {
            self.displaced.fetch_sub(1, Ordering::AcqRel);
        }
        claimed
    }

    /// The page of main slots `slot` lies in.
    #[inline(always)]
    fn page_of(&self, slot: &Slot) -> usize {
        let base = self.slots.load(Ordering::Relaxed) as usize;
        ((slot as *const Slot as usize - base) >> 12) % PAGES
    }

    /// Claim a main slot for `address`, counting it in its `page` (and
    /// noting the page as touched the first time).
    #[inline(always)]
    fn claim_main(&self, slot: &Slot, page: usize, address: usize, sample: LiveSample) -> bool {
        if !slot.claim(address, sample) {
            return false;
        }
        self.count_in_page(page);
        true
    }

    /// A main slot of `page` was claimed: count it there (and note the
    /// page as touched the first time).
    #[inline(always)]
    fn count_in_page(&self, page: usize) {
        let page = page % PAGES;
        // Counted after the entry is published: a dump that finds the
        // count 0 meanwhile misses a sample inserted during it, which it
        // may. (A free on another thread may take it away and count it
        // out first: the count wraps below 0 for that moment, and a dump
        // then reads the page.)
        if self.page_entries[page].fetch_add(1, Ordering::Release) == 0 {
            let cell = &self.touched[page >> 6];
            let bit = 1u64 << (page & 63);
            if cell.load(Ordering::Relaxed) & bit == 0 {
                cell.fetch_or(bit, Ordering::Release);
            }
        }
    }

    /// The pages of main slots that hold entries now (and, for a moment
    /// around an insert or a removal, may just have held one).
    fn pages_in_use(&self) -> impl Iterator<Item = usize> + '_ {
        let pages = if self.slots.load(Ordering::Acquire).is_null() {
            0
        } else {
            1usize << (self.slot_bits.load(Ordering::Relaxed) - SLOTS_PER_PAGE_BITS)
        };
        (0..pages.div_ceil(64)).flat_map(move |word| {
            let mut bits = self.touched[word].load(Ordering::Acquire);
            core::iter::from_fn(move || {
                while bits != 0 {
                    let page = word << 6 | bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if self.page_entries[page].load(Ordering::Acquire) != 0 {
                        return Some(page);
                    }
                }
                None
            })
        })
    }

    /// The nursery's slots, then the main slots of every page holding
    /// entries.
    fn slots_in_use(&self) -> impl Iterator<Item = &Slot> {
        let slots = self.slots.load(Ordering::Acquire);
        let main = self.pages_in_use().flat_map(move |page| {
            let first = page << SLOTS_PER_PAGE_BITS;
            // SAFETY: a page in use lies within the 2^slot_bits slots that
            // `slots` maps (init), for good.
            let page: &[Slot] =
                unsafe { core::slice::from_raw_parts(slots.add(first), 1 << SLOTS_PER_PAGE_BITS) };
            page.iter()
        });
        let nursery: &[Slot] = if slots.is_null() {
            &[]
        } else {
            self.nursery.slots()
        };
        nursery.iter().chain(main)
    }

    /// True if `address` is recorded as a live sample now.
    pub fn contains(&self, address: usize) -> bool {
        self.may_contain(address) && self.find(address).is_some()
    }

    /// Remove `address` if it is a live sample, returning what was recorded.
    /// Call before the memory is released.
    #[inline(always)]
    pub fn remove(&self, address: usize) -> Option<LiveSample> {
        if !self.may_contain(address) {
            return None;
        }
        self.remove_past_filter(address)
    }

    /// [`LiveTable::remove`] for a caller that tested the filter already
    /// (free's route is taken only when the address's counter is not 0):
    /// the same answer without the second test.
    #[inline(always)]
    pub fn remove_past_filter(&self, address: usize) -> Option<LiveSample> {
        let probe = self.main_probe(address)?;
        let slot = self.find_with(address, &probe)?;
        let sample = slot.load();
        slot.address
            .compare_exchange(address, TOMBSTONE, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        if core::ptr::eq(slot, probe.home()) {
            self.page_entries[(probe.local >> SLOTS_PER_PAGE_BITS) % PAGES]
                .fetch_sub(1, Ordering::Release);
        } else if !self.nursery.holds(slot) {
            self.page_entries[self.page_of(slot)].fetch_sub(1, Ordering::Release);
            self.displaced.fetch_sub(1, Ordering::AcqRel);
        }
        self.filter_bucket(address).fetch_sub(1, Ordering::AcqRel);
        Some(sample)
    }

    /// Forget every entry (for `heapsample_reset`). Concurrent frees of
    /// forgotten samples simply miss.
    pub fn clear(&self) {
        for slot in self.slots_in_use() {
            let address = slot.address.load(Ordering::Acquire);
            if is_entry(address) {
                let _ = self.remove(address);
            }
        }
    }

    /// Every entry now, as `visit` sees it (for a dump: entries inserted or
    /// removed meanwhile may or may not be seen; slots being written are
    /// skipped, and so is an entry removed or rewritten while it was read).
    /// Reads the nursery and the pages of main slots that hold entries
    /// (their count is not 0): its cost follows the live samples, not the
    /// pages the run ever used.
    ///
    /// A sample is read whole, however long the reader is held up between
    /// its loads: a slot's address is published after its fields, taken
    /// away (tombstone, or [`WRITING`] while an entry is replaced in place)
    /// before they change, and its birth, stored last, is read first and
    /// again at the end. A rewrite that overlapped the read leaves the
    /// address taken or the birth changed (a sample's (thread, birth) is
    /// unique, and two samples of one address are born apart).
    pub fn for_each(&self, visit: &mut dyn FnMut(LiveSample)) {
        for slot in self.slots_in_use() {
            let address = slot.address.load(Ordering::Acquire);
            if !is_entry(address) {
                continue;
            }
            let sample = slot.load();
            // The fields' loads complete before the address and birth are
            // read again.
            core::sync::atomic::fence(Ordering::Acquire);
            if slot.address.load(Ordering::Acquire) == address
                && slot.birth.load(Ordering::Relaxed) == sample.birth
            {
                visit(sample);
            }
        }
    }

    /// Sampled objects currently live (the pages' counts and the
    /// nursery's entries; a dump's estimate: inserts and removals meanwhile
    /// may or may not be counted).
    pub fn live_count(&self) -> u64 {
        // A count below 0 for a moment (see `claim_main`) counts none.
        let main: u64 = self
            .pages_in_use()
            .map(|page| (self.page_entries[page].load(Ordering::Relaxed) as i32).max(0) as u64)
            .sum();
        let nursery = match self.slots.load(Ordering::Acquire).is_null() {
            true => 0,
            false => self
                .nursery
                .slots()
                .iter()
                .filter(|slot| is_entry(slot.address.load(Ordering::Relaxed)))
                .count(),
        };
        main + nursery as u64
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

    /// Pages of `table`'s slots resident in memory (mincore).
    fn resident_slot_pages(table: &LiveTable) -> usize {
        let bytes = core::mem::size_of::<Slot>() << table.slot_bits.load(Ordering::Relaxed);
        let mut pages = vec![0u8; bytes / 4096];
        // SAFETY: the slots mapping is page-aligned and `bytes` long; one byte
        // per page written to `pages`.
        let rc = unsafe {
            libc::mincore(
                table.slots.load(Ordering::Acquire).cast(),
                bytes,
                pages.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0);
        pages.iter().filter(|&&page| page & 1 != 0).count()
    }

    /// Samples of a heap's neighbouring blocks take neighbouring slots, so the
    /// table's resident memory follows the heap's span (here 2 MiB of 32-byte
    /// blocks: 2 MiB of slots), not the table's size (128 MiB reserved).
    #[test]
    fn the_slots_used_follow_the_heap() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(22));
        let heap = 0x5555_0000_0000usize;
        let blocks = (2 << 20) / 32;
        for i in 0..blocks {
            let sample = LiveSample {
                record: 1,
                size: 24,
                usable: 24,
                ..LiveSample::default()
            };
            assert_eq!(
                table.insert(heap + i * 32, sample, EntryPlace::Main),
                Ok(None)
            );
        }
        assert_eq!(
            table.displaced.load(Ordering::Relaxed),
            0,
            "every home was free"
        );
        let resident = resident_slot_pages(&table);
        // 2 MiB of slots is 512 pages; region hashing may split the span.
        assert!((512..=520).contains(&resident), "{resident} pages resident");
        for i in 0..blocks {
            assert!(table.remove(heap + i * 32).is_some());
        }
        assert_eq!(table.live_count(), 0);
    }

    /// Blocks closer than a home's 32 bytes (another allocator's 16-byte
    /// ones) share a home: the second goes to its hashed sequence, and both
    /// are found, replaced and removed.
    #[test]
    fn entries_displaced_from_their_home_are_found() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(16));
        let sample = |i: u64| LiveSample {
            record: i as u32,
            size: i,
            usable: i + 8,
            ..LiveSample::default()
        };
        let address = |i: u64| 0x7000_0000 + 16 * i as usize;
        for i in 0..4000 {
            assert_eq!(
                table.insert(address(i), sample(i), EntryPlace::Main),
                Ok(None)
            );
        }
        // Half of them at least: two blocks per home (and regions that hash
        // alike add a few).
        assert!(table.displaced.load(Ordering::Relaxed) >= 2000);
        assert_eq!(
            table.insert(address(7), sample(70), EntryPlace::Main),
            Ok(Some(sample(7))),
            "a displaced entry whose free was never seen is replaced"
        );
        // A dump reads only the touched pages, and finds every entry there,
        // home or displaced.
        let mut records = Vec::new();
        table.for_each(&mut |live| records.push(live.record));
        records.sort();
        let mut expected: Vec<u32> = (0..4000).map(|i| if i == 7 { 70 } else { i }).collect();
        expected.sort();
        assert_eq!(records, expected);
        for i in (0..4000).rev() {
            let expected = if i == 7 { sample(70) } else { sample(i) };
            assert_eq!(table.remove(address(i)), Some(expected), "entry {i}");
        }
        assert_eq!(table.displaced.load(Ordering::Relaxed), 0);
        assert_eq!(table.live_count(), 0);
    }

    /// A dump reading the table while a thread inserts, replaces and
    /// removes entries sees each sample whole: here every field of the
    /// n-th sample is n, and the addresses alternate between two that share
    /// a home, so a slot is taken again and again, by new samples and in
    /// place.
    #[test]
    fn a_dump_never_reads_a_half_written_sample() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(16));
        let writing = AtomicU64::new(1);
        let sample = |n: u64| LiveSample {
            record: n as u32,
            thread: n as u32,
            size: n,
            usable: n,
            birth: n,
        };
        let (mut reads, mut torn) = (0u64, 0u64);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let base = 0x6000_0000usize;
                for n in 1..=8_000_000u64 {
                    let address = base + 16 * (n as usize & 1);
                    assert!(table.insert(address, sample(n), EntryPlace::Main).is_ok());
                    if n % 3 == 0 {
                        // A free never seen: the next sample replaces it.
                        continue;
                    }
                    table.remove(address);
                }
                writing.store(0, Ordering::Relaxed);
            });
            while writing.load(Ordering::Relaxed) != 0 {
                table.for_each(&mut |live| {
                    reads += 1;
                    let n = live.birth;
                    if live != sample(n) {
                        torn += 1;
                    }
                });
            }
        });
        assert_eq!(torn, 0, "{torn} of {reads} samples read half-written");
        assert!(reads > 1000, "only {reads} samples read while writing");
    }

    /// Entries at their homes mark only their own pages: a dump of a table
    /// whose samples lie in one heap region reads one page of slots.
    #[test]
    fn a_dump_reads_only_the_pages_entries_touched() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(22));
        for i in 0..100 {
            let sample = LiveSample {
                record: i,
                size: 24,
                ..LiveSample::default()
            };
            let address = 0x5555_0000_0000 + 32 * i as usize;
            assert_eq!(table.insert(address, sample, EntryPlace::Main), Ok(None));
        }
        let touched: u32 = table
            .touched
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones())
            .sum();
        assert_eq!(touched, 1, "100 neighbours' homes lie in one page");
        let mut seen = 0;
        table.for_each(&mut |_| seen += 1);
        assert_eq!(seen, 100);
    }

    /// A dump reads the pages that hold live entries now, not every page
    /// the run used: here 64 pages of neighbouring samples, all but three of
    /// them freed again (one in a page, two in another), leave two pages to
    /// read; an entry displaced from its home counts in its own page.
    #[test]
    fn a_dump_reads_only_the_pages_holding_entries() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(22));
        let heap = 0x5555_0000_0000usize;
        let blocks = 64 << SLOTS_PER_PAGE_BITS;
        let sample = |i: usize| LiveSample {
            record: i as u32,
            size: 24,
            ..LiveSample::default()
        };
        for i in 0..blocks {
            assert_eq!(
                table.insert(heap + 32 * i, sample(i), EntryPlace::Main),
                Ok(None)
            );
        }
        assert_eq!(table.pages_in_use().count(), 64);
        let kept = [5, 700, 701];
        for i in (0..blocks).filter(|i| !kept.contains(i)) {
            assert!(table.remove(heap + 32 * i).is_some());
        }
        assert_eq!(table.pages_in_use().count(), 2);
        assert_eq!(table.live_count(), 3);
        let mut seen = Vec::new();
        table.for_each(&mut |live| seen.push(live.record));
        seen.sort();
        assert_eq!(seen, [5, 700, 701]);
        // A block 16 bytes past a kept one shares its home: displaced, it is
        // counted where its hashed sequence put it, and found by a dump.
        assert_eq!(
            table.insert(heap + 32 * 5 + 16, sample(9), EntryPlace::Main),
            Ok(None)
        );
        assert_eq!(table.displaced.load(Ordering::Relaxed), 1);
        assert_eq!(table.live_count(), 4);
        let mut seen = Vec::new();
        table.for_each(&mut |live| seen.push(live.record));
        seen.sort();
        assert_eq!(seen, [5, 9, 700, 701]);
        for address in [
            heap + 32 * 5 + 16,
            heap + 32 * 5,
            heap + 32 * 700,
            heap + 32 * 701,
        ] {
            assert!(table.remove(address).is_some());
        }
        assert_eq!(table.pages_in_use().count(), 0);
        assert_eq!(table.live_count(), 0);
    }

    /// A usable size too far above the request to keep is reported unknown
    /// (the caller asks the allocator).
    #[test]
    fn a_huge_slack_is_reported_unknown() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(16));
        let sample = LiveSample {
            record: 3,
            size: 10,
            usable: 10 + (1 << 33),
            ..LiveSample::default()
        };
        table.insert(0x9000, sample, EntryPlace::Main).unwrap();
        let removed = table.remove(0x9000).unwrap();
        assert_eq!((removed.size, removed.usable), (10, USABLE_UNKNOWN));
    }

    #[test]
    fn insert_find_remove() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(10));
        let sample = LiveSample {
            record: 7,
            thread: 3,
            size: 100,
            usable: 108,
            birth: 123_456_789_012,
        };
        assert!(!table.may_contain(0x1000));
        assert_eq!(table.insert(0x1000, sample, EntryPlace::Main), Ok(None));
        assert!(table.may_contain(0x1000));
        let mut seen = Vec::new();
        table.for_each(&mut |live| seen.push(live));
        assert_eq!(seen, [sample], "a dump sees the entry whole");
        assert_eq!(table.remove(0x2000), None);
        assert_eq!(table.remove(0x1000), Some(sample));
        assert_eq!(table.remove(0x1000), None);
        assert!(!table.may_contain(0x1000));
        assert_eq!(table.live_count(), 0);
        let mut seen = 0;
        table.for_each(&mut |_| seen += 1);
        assert_eq!(seen, 0);
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
            usable: 32,
            ..LiveSample::default()
        };
        table.insert(0x10_0040, sample, EntryPlace::Main).unwrap();
        assert!(table.may_contain(0x10_0040));
        assert_eq!(table.remove(0x10_0040), Some(sample));
        assert!(!table.may_contain(0x10_0040) && table.free_takes_route(0x10_0040));
        // Pages 4 GiB apart share a counter; the next page does not.
        assert!(table.free_takes_route(0x1_0010_0000) && !table.free_takes_route(0x10_2000));
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
            usable: 16,
            ..LiveSample::default()
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
            .filter(|slot| is_entry(slot.address.load(Ordering::Relaxed)))
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

    /// A sample whose free was never seen, displaced from its home (taken
    /// then by a neighbour that is gone since): a new sample of its address
    /// takes the now free home, and the old entry is taken out and
    /// returned, never left behind as a second entry of one address.
    #[test]
    fn reinsert_at_a_freed_home_takes_out_the_displaced_twin() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(16));
        let sample = |record: u32| LiveSample {
            record,
            size: 8,
            usable: 16,
            ..LiveSample::default()
        };
        // 16 bytes apart: one home for both.
        let (neighbour, address) = (0x7100_0000usize, 0x7100_0010usize);
        assert_eq!(
            table.insert(neighbour, sample(1), EntryPlace::Main),
            Ok(None)
        );
        assert_eq!(table.insert(address, sample(2), EntryPlace::Main), Ok(None));
        assert_eq!(table.displaced.load(Ordering::Relaxed), 1);
        assert_eq!(table.remove(neighbour), Some(sample(1)));
        assert_eq!(
            table.insert(address, sample(3), EntryPlace::Main),
            Ok(Some(sample(2)))
        );
        assert_eq!(table.displaced.load(Ordering::Relaxed), 0);
        assert_eq!(table.live_count(), 1);
        let mut seen = Vec::new();
        table.for_each(&mut |live| seen.push(live.record));
        assert_eq!(seen, [3]);
        assert_eq!(table.remove(address), Some(sample(3)));
        assert_eq!(table.remove(address), None);
        assert_eq!(table.live_count(), 0);
        assert!(!table.may_contain(address));
    }

    #[test]
    fn reinsert_returns_stale_entry() {
        let table = Box::new(LiveTable::new());
        assert!(table.init(10));
        let first = LiveSample {
            record: 1,
            size: 8,
            usable: 16,
            ..LiveSample::default()
        };
        let second = LiveSample {
            record: 2,
            size: 16,
            usable: 24,
            ..LiveSample::default()
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
                                usable: i as u64 + 8,
                                ..LiveSample::default()
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
                                    size: i as u64,
                                    usable: i as u64 + 8,
                                    ..LiveSample::default()
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
