//! Rule caches: code address → encoded [`Rule`], in caller-owned fixed-size memory.
//!
//! Owns the two cache layouts, the process-wide invalidation generation and the
//! `RuleStore` adapters the stack walk uses.
//!
//! * [`RuleCache`]: one thread at a time (`&mut`); 4-way set-associative buckets of one
//!   cache line, FIFO replacement within a bucket.
//! * [`SharedRuleCache`]: any number of threads (`&self`), and any number of processes
//!   when it lives in memory `fork` shares (`MAP_SHARED`); 2-way buckets of one cache
//!   line, each guarded by a per-bucket sequence counter (a seqlock). Readers never
//!   wait: a bucket being written counts as a miss. A writer that finds the bucket busy
//!   skips the insertion instead of waiting.
//!
//! A rule is a function of the code address and the object mapped there. Processes
//! forked from one another map the same objects at the same addresses until one of
//! them loads or unloads one, by `dlopen` or by glibc itself (NSS, iconv), so each
//! shared entry carries the key of the object its rule was computed from
//! ([`crate::cfi::object_key`]: mapping, `.eh_frame_hdr` and name) and is used only
//! where the object at that address has the same key. Forked children thus start with
//! every rule their relatives computed for the objects they share.
//!
//! Runs inside malloc: no allocation, no locks (nothing here ever waits), no system
//! calls. All-zero memory is a valid empty cache of either kind.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};

use crate::cfi::{self, ObjectKey};
use crate::rule::{OWN_CODE, Rule};

/// Bumped by [`invalidate_all_caches`]; caches drop rules computed under an older value.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Makes every cache, private or shared, forget all rules computed so far.
///
/// Call it when an object is unloaded (`dlclose`), before its address range can be
/// reused, and when one may be loaded (`dlopen`) or frames are registered with
/// libgcc (`registered`), where code had no unwind information before. Cheap (one atomic increment); private caches clear themselves at their
/// next capture, shared buckets when they are next read or written.
pub fn invalidate_all_caches() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Set when a [`Rule::NoUnwindInfo`] is cached; cleared by
/// [`forget_code_without_unwind_info`].
static NO_UNWIND_INFO_CACHED: AtomicBool = AtomicBool::new(false);

/// Call before an object may be loaded (`dlopen`): where code without unwind
/// information was (generated code since unmapped), the object's code may
/// appear. Makes every cache forget its rules if one of them said "no unwind
/// information" (a walk during the load can only meet the object's
/// addresses as stale stack values: its code runs once the load returned).
pub fn forget_code_without_unwind_info() {
    if NO_UNWIND_INFO_CACHED.swap(false, Ordering::AcqRel) {
        invalidate_all_caches();
    }
}

/// The caches' generation now (one load; inlined into the captures, which
/// read it once and hand it to their stores).
#[inline(always)]
pub(crate) fn current_generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// The profiler's own code, `[OWN_START, OWN_END)`: rules for return addresses
/// in it are cached with [`OWN_CODE`] (x86_64), so that a walk notes when it
/// steps through such a frame ([`RuleStore::note_own_code`]) at no cost to the
/// other frames. Empty until [`set_own_code`].
static OWN_START: AtomicU64 = AtomicU64::new(0);
static OWN_END: AtomicU64 = AtomicU64::new(0);

/// Names the address range of the profiler's own code (the object a caller
/// of this crate lives in), so that captures say whether they stepped through
/// it (`PrivateUnwinder::may_hold_own_frames`). Rules cached before are
/// forgotten ([`invalidate_all_caches`]), so every cached rule is marked.
pub fn set_own_code(start: u64, end: u64) {
    OWN_START.store(start, Ordering::Relaxed);
    OWN_END.store(end, Ordering::Relaxed);
    invalidate_all_caches();
}

/// `rule`'s encoding as the caches keep it for the frame looked up at
/// `address`: with [`OWN_CODE`] where the return address (`address + 1`, as
/// callers' frames are looked up one byte into their call) lies in the
/// profiler's own code. x86_64 only: aarch64's walk does not take marked
/// rules, and its captures always count as possibly holding own frames.
#[inline]
fn encode_for(rule: Rule, address: u64) -> u64 {
    let bits = rule.encode();
    if cfg!(target_arch = "x86_64") {
        let (start, end) = (
            OWN_START.load(Ordering::Relaxed),
            OWN_END.load(Ordering::Relaxed),
        );
        if address.wrapping_add(1).wrapping_sub(start) < end.wrapping_sub(start) {
            return bits | OWN_CODE;
        }
    }
    bits
}

/// The one shared cache whose writes go through another view
/// ([`SharedRuleCache::set_write_view`]), and the distance to that view.
static WRITE_VIEW_OF: AtomicUsize = AtomicUsize::new(0);
static WRITE_VIEW_DISTANCE: AtomicUsize = AtomicUsize::new(0);

/// Picks a bucket for a code address: multiplicative hashing, top bits.
#[inline(always)]
fn bucket_index(address: u64, buckets: usize) -> usize {
    let hash = address.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (hash >> (64 - buckets.trailing_zeros())) as usize
}

/// Where the walk gets and puts rules.
pub(crate) trait RuleStore {
    fn get(&mut self, address: u64) -> Option<Rule>;
    fn put(&mut self, address: u64, rule: Rule);

    /// A walk took a rule marked [`OWN_CODE`]: it stepped through a frame of the
    /// profiler's own code. Stores that do not tell ignore it. (x86_64: see
    /// `encode_for`.)
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn note_own_code(&mut self) {}

    /// The rule for `address` as [`Rule::encode`] bits, computed (and put
    /// here unless there is no unwind information) when none is stored.
    #[inline(always)]
    fn rule_bits(&mut self, address: u64) -> u64 {
        match self.get(address) {
            Some(rule) => encode_for(rule, address),
            None => self.compute(address),
        }
    }

    /// Computes and stores the rule for `address`: the miss path of
    /// [`RuleStore::rule_bits`].
    ///
    /// [`Rule::NoUnwindInfo`] (no loaded object and no registered section has
    /// an FDE there: generated code) is stored like any rule where the
    /// registered sections are known to be all libgcc knows
    /// (`registered::complete`): unwind information can then only appear
    /// there with an object loaded or a section registered, and both bump
    /// the generation (`dlopen` through [`forget_code_without_unwind_info`],
    /// the interposed `__register_frame*`), which drops it. Code generated at the address later still has none.
    /// Otherwise libgcc may know frames registered behind the profiler's
    /// back, and the rule is computed again at every visit.
    #[cold]
    #[inline(never)]
    fn compute(&mut self, address: u64) -> u64 {
        let rule = cfi::rule_for_address(address);
        if rule != Rule::NoUnwindInfo {
            self.put(address, rule);
        } else if crate::registered::complete() {
            if !NO_UNWIND_INFO_CACHED.load(Ordering::Relaxed) {
                NO_UNWIND_INFO_CACHED.store(true, Ordering::Release);
            }
            self.put(address, rule);
        }
        encode_for(rule, address)
    }
}

const LOCAL_WAYS: usize = 4;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct LocalBucket {
    addresses: [u64; LOCAL_WAYS],
    rules: [u64; LOCAL_WAYS],
}

impl LocalBucket {
    const EMPTY: LocalBucket = LocalBucket {
        addresses: [0; LOCAL_WAYS],
        rules: [0; LOCAL_WAYS],
    };
}

/// A thread-private rule cache: `BUCKETS` × 4 entries of 16 bytes (64 KiB for the
/// default 1024 buckets). `BUCKETS` must be a power of two.
///
/// Holds no pointers; all-zero memory is a valid empty cache, so it can live in
/// `mmap`'d memory (see [`RuleCache::init_in_place`]). Do not build the default size on
/// a small stack: use [`RuleCache::new_boxed`] or [`RuleCache::init_in_place`].
///
/// A capture borrows the cache mutably: a signal handler that interrupts a capture on
/// the same thread must not capture with the same cache (use a reentrancy guard, or
/// the [`SharedRuleCache`], which handlers may share).
#[repr(C)]
pub struct RuleCache<const BUCKETS: usize = 1024> {
    /// The [`GENERATION`] the entries were computed under.
    generation: u64,
    /// Rules computed by this cache's owner (cache misses), for tests and benchmarks.
    misses: u64,
    /// Captures through this cache that had to be redone with libgcc.
    fallbacks: u64,
    /// Holds only the rules its owner computed: rules found in a shared cache
    /// behind it are read there and not copied in (see
    /// [`RuleCache::set_computed_only`]). False in a zeroed cache.
    computed_only: bool,
    /// The last capture through this cache stepped through the profiler's own
    /// code, or was redone by libgcc: its frames may hold the profiler's own
    /// (see [`RuleCache::may_hold_own_frames`]). False in a zeroed cache.
    own_frames: bool,
    buckets: [LocalBucket; BUCKETS],
}

impl<const BUCKETS: usize> RuleCache<BUCKETS> {
    const VALID_SIZE: () = assert!(BUCKETS.is_power_of_two() && BUCKETS >= 2);

    /// An empty cache (usable in a `static`).
    pub const fn new() -> Self {
        let () = Self::VALID_SIZE;
        RuleCache {
            generation: 0,
            misses: 0,
            fallbacks: 0,
            computed_only: false,
            own_frames: false,
            buckets: [LocalBucket::EMPTY; BUCKETS],
        }
    }

    /// An empty cache in a zeroed heap block, without building it on the stack.
    /// Allocates: call it outside `malloc` (or through the real allocator).
    pub fn new_boxed() -> Box<Self> {
        let () = Self::VALID_SIZE;
        let layout = std::alloc::Layout::new::<Self>();
        // SAFETY: the layout has a non-zero size.
        let memory = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Self>();
        if memory.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: all-zero bytes are a valid `RuleCache` (integers only), and the block
        // was allocated by the global allocator with `Self`'s layout.
        unsafe { Box::from_raw(memory) }
    }

    /// Makes the memory at `cache` an empty cache by zeroing it.
    ///
    /// # Safety
    /// `cache` must be valid for writes of `size_of::<RuleCache<BUCKETS>>()` bytes and
    /// aligned to `align_of::<RuleCache<BUCKETS>>()` (64).
    pub unsafe fn init_in_place(cache: *mut Self) {
        let () = Self::VALID_SIZE;
        // SAFETY: guaranteed by the caller; all-zero bytes are a valid `RuleCache`.
        unsafe { core::ptr::write_bytes(cache, 0, 1) };
    }

    /// Forgets every rule (for cold-cache measurements; not needed for correctness).
    pub fn clear(&mut self) {
        self.buckets.fill(LocalBucket::EMPTY);
    }

    /// How many rules this cache has had to compute (misses) since it was created.
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// How many captures through this cache the fast path could not finish, so they
    /// were redone with libgcc.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks
    }

    /// Whether this cache, in front of a shared one, keeps only the rules its
    /// owner computed (`true`) or also copies in those found in the shared
    /// cache (`false`, the default). Copying pays when the owner captures
    /// often; an owner that captures rarely loses little reading the shared
    /// cache, and in a forked child every private page written costs a
    /// copy-on-write fault.
    pub fn set_computed_only(&mut self, on: bool) {
        self.computed_only = on;
    }

    /// False if the last capture through this cache (on x86_64) stepped every
    /// frame it did not replay from its memo by a rule
    /// looked up here, and none of them was in the code named by
    /// [`set_own_code`], so that only the frames it never looked up (the last
    /// one, where the buffer filled, and those it replayed) can be the
    /// profiler's own. True after any other capture, on aarch64 and after a
    /// libgcc fallback.
    pub fn may_hold_own_frames(&self) -> bool {
        cfg!(not(target_arch = "x86_64")) || self.own_frames
    }

    /// A capture through this cache starts (see [`RuleCache::may_hold_own_frames`]):
    /// `looked_up`, its frames are looked up here (else libgcc takes them).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(crate) fn start_capture(&mut self, looked_up: bool) {
        self.own_frames = !looked_up;
    }

    /// Bytes of memory one cache of this size occupies.
    pub const fn size_in_bytes() -> usize {
        core::mem::size_of::<Self>()
    }

    fn get(&self, address: u64) -> Option<Rule> {
        Rule::decode(self.get_bits(address))
    }

    /// The encoded rule for `address`, or 0 (never an encoding) when none
    /// is cached: a hash and up to four compares, no decoding.
    #[inline(always)]
    fn get_bits(&self, address: u64) -> u64 {
        let bucket = &self.buckets[bucket_index(address, BUCKETS)];
        // The newest way first, on its own: a walk's rules are mostly found there,
        // and the load then needs no way index.
        if bucket.addresses[0] == address {
            return bucket.rules[0];
        }
        for way in 1..LOCAL_WAYS {
            if bucket.addresses[way] == address {
                return bucket.rules[way];
            }
        }
        0
    }

    fn put(&mut self, address: u64, rule: Rule) {
        let bucket = &mut self.buckets[bucket_index(address, BUCKETS)];
        bucket.addresses.copy_within(0..LOCAL_WAYS - 1, 1);
        bucket.rules.copy_within(0..LOCAL_WAYS - 1, 1);
        bucket.addresses[0] = address;
        bucket.rules[0] = encode_for(rule, address);
    }
}

impl<const BUCKETS: usize> Default for RuleCache<BUCKETS> {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`RuleCache`] borrowed for one capture, after a generation check.
pub(crate) struct LocalStore<'a, const BUCKETS: usize> {
    cache: &'a mut RuleCache<BUCKETS>,
}

impl<'a, const BUCKETS: usize> LocalStore<'a, BUCKETS> {
    pub(crate) fn new(cache: &'a mut RuleCache<BUCKETS>) -> Self {
        Self::at_generation(cache, current_generation())
    }

    /// [`LocalStore::new`] with the caches' generation the capture already read.
    #[inline(always)]
    pub(crate) fn at_generation(cache: &'a mut RuleCache<BUCKETS>, generation: u64) -> Self {
        if cache.generation != generation {
            cache.clear();
            cache.generation = generation;
        }
        LocalStore { cache }
    }
}

impl<const BUCKETS: usize> LocalStore<'_, BUCKETS> {
    /// The capture is redone by libgcc, whose frames were not looked up here.
    pub(crate) fn count_fallback(&mut self) {
        self.cache.fallbacks += 1;
        self.cache.own_frames = true;
    }
}

impl<const BUCKETS: usize> RuleStore for LocalStore<'_, BUCKETS> {
    #[inline(always)]
    fn get(&mut self, address: u64) -> Option<Rule> {
        self.cache.get(address)
    }

    #[cfg(target_arch = "x86_64")]
    fn note_own_code(&mut self) {
        self.cache.own_frames = true;
    }

    fn put(&mut self, address: u64, rule: Rule) {
        self.cache.misses += 1;
        self.cache.put(address, rule);
    }
}

const SHARED_WAYS: usize = 2;

#[repr(C, align(64))]
struct SharedBucket {
    /// Odd while a writer is updating the bucket.
    sequence: AtomicU32,
    /// Low 32 bits of the writer's [`GENERATION`] when the entries were computed.
    generation: AtomicU32,
    addresses: [AtomicU64; SHARED_WAYS],
    rules: [AtomicU64; SHARED_WAYS],
    /// [`ObjectKey::key`] of the object each rule was computed from.
    objects: [AtomicU64; SHARED_WAYS],
}

impl SharedBucket {
    const fn new() -> Self {
        SharedBucket {
            sequence: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            addresses: [const { AtomicU64::new(0) }; SHARED_WAYS],
            rules: [const { AtomicU64::new(0) }; SHARED_WAYS],
            objects: [const { AtomicU64::new(0) }; SHARED_WAYS],
        }
    }
}

/// A rule cache shared by all threads: `BUCKETS` × 2 entries in 64-byte buckets
/// (256 KiB for the default 4096 buckets). `BUCKETS` must be a power of two.
///
/// Lock-free: readers never wait and writers never wait (a busy bucket is simply not
/// updated). Holds no pointers; all-zero memory is a valid empty cache, so a `static`
/// (`SharedRuleCache::new()` is `const`) costs only `.bss`, and so does a zeroed
/// `MAP_SHARED` mapping that forked children keep using (each entry names its
/// object: see the module docs). A process killed while writing a bucket leaves it
/// busy for good: that bucket then always misses.
///
/// After 2³² calls to [`invalidate_all_caches`] a bucket untouched for that long could
/// be taken as current again; its entries still apply only to their own objects.
#[repr(C)]
pub struct SharedRuleCache<const BUCKETS: usize = 4096> {
    buckets: [SharedBucket; BUCKETS],
}

impl<const BUCKETS: usize> SharedRuleCache<BUCKETS> {
    const VALID_SIZE: () = assert!(BUCKETS.is_power_of_two() && BUCKETS >= 2);

    /// An empty cache (usable in a `static`).
    pub const fn new() -> Self {
        let () = Self::VALID_SIZE;
        SharedRuleCache {
            buckets: [const { SharedBucket::new() }; BUCKETS],
        }
    }

    /// Bytes of memory one cache of this size occupies.
    pub const fn size_in_bytes() -> usize {
        core::mem::size_of::<Self>()
    }

    fn get(&self, address: u64, generation: u32, object: u64) -> Option<Rule> {
        let bucket = &self.buckets[bucket_index(address, BUCKETS)];
        let sequence_before = bucket.sequence.load(Ordering::Acquire);
        if sequence_before & 1 != 0 {
            return None;
        }
        let bucket_generation = bucket.generation.load(Ordering::Relaxed);
        let mut found = 0;
        for way in 0..SHARED_WAYS {
            if bucket.addresses[way].load(Ordering::Relaxed) == address
                && bucket.objects[way].load(Ordering::Relaxed) == object
            {
                found = bucket.rules[way].load(Ordering::Relaxed);
                break;
            }
        }
        // Seqlock read side: the fence orders the loads above before the re-check.
        fence(Ordering::Acquire);
        if bucket.sequence.load(Ordering::Relaxed) != sequence_before
            || bucket_generation != generation
        {
            return None;
        }
        Rule::decode(found)
    }

    /// Let writes go through `write`, another mapping of this cache's memory:
    /// for a cache read through a private mapping of a shared memory file,
    /// whose page-table entries forked children inherit but which must never
    /// be written (a written page would stop seeing the other processes'
    /// writes). Process-wide, for one cache; kept in this process's own
    /// memory, so nothing in the shared memory can redirect a write.
    ///
    /// # Safety
    /// `write` maps the same memory as `self` for as long as either is used.
    pub unsafe fn set_write_view(&self, write: &Self) {
        let (read, write) = (self as *const Self as usize, write as *const Self as usize);
        WRITE_VIEW_DISTANCE.store(write.wrapping_sub(read), Ordering::Relaxed);
        WRITE_VIEW_OF.store(read, Ordering::Release);
    }

    /// The memory writes to this cache go to.
    fn write_view(&self) -> &Self {
        let read = self as *const Self as usize;
        if WRITE_VIEW_OF.load(Ordering::Acquire) != read {
            return self;
        }
        let write = read.wrapping_add(WRITE_VIEW_DISTANCE.load(Ordering::Relaxed));
        // SAFETY: `set_write_view`'s contract: a live mapping of this memory.
        unsafe { &*(write as *const Self) }
    }

    fn put(&self, address: u64, rule: Rule, generation: u32, object: u64) {
        let bucket = &self.write_view().buckets[bucket_index(address, BUCKETS)];
        let sequence = bucket.sequence.load(Ordering::Relaxed);
        if sequence & 1 != 0
            || bucket
                .sequence
                .compare_exchange(sequence, sequence + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            // Another thread is writing this bucket: skip rather than wait.
            return;
        }
        // Seqlock write side: the odd sequence becomes visible before the entry stores.
        fence(Ordering::Release);
        let stale = bucket.generation.load(Ordering::Relaxed) != generation;
        for way in (1..SHARED_WAYS).rev() {
            let moved = if stale {
                (0, 0, 0)
            } else {
                (
                    bucket.addresses[way - 1].load(Ordering::Relaxed),
                    bucket.rules[way - 1].load(Ordering::Relaxed),
                    bucket.objects[way - 1].load(Ordering::Relaxed),
                )
            };
            bucket.addresses[way].store(moved.0, Ordering::Relaxed);
            bucket.rules[way].store(moved.1, Ordering::Relaxed);
            bucket.objects[way].store(moved.2, Ordering::Relaxed);
        }
        bucket.addresses[0].store(address, Ordering::Relaxed);
        bucket.rules[0].store(encode_for(rule, address), Ordering::Relaxed);
        bucket.objects[0].store(object, Ordering::Relaxed);
        bucket.generation.store(generation, Ordering::Relaxed);
        bucket
            .sequence
            .store(sequence.wrapping_add(2), Ordering::Release);
    }
}

impl<const BUCKETS: usize> Default for SharedRuleCache<BUCKETS> {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`SharedRuleCache`] used for one capture, with the generation read once and
/// the key of the object last looked up kept (consecutive frames are mostly in one
/// object).
pub(crate) struct SharedStore<'a, const BUCKETS: usize> {
    cache: &'a SharedRuleCache<BUCKETS>,
    generation: u32,
    last_object: Option<ObjectKey>,
}

impl<'a, const BUCKETS: usize> SharedStore<'a, BUCKETS> {
    pub(crate) fn new(cache: &'a SharedRuleCache<BUCKETS>) -> Self {
        Self::at_generation(cache, current_generation())
    }

    /// [`SharedStore::new`] with the caches' generation the capture already read.
    #[inline(always)]
    pub(crate) fn at_generation(cache: &'a SharedRuleCache<BUCKETS>, generation: u64) -> Self {
        SharedStore {
            cache,
            generation: generation as u32,
            last_object: None,
        }
    }

    /// The key of the object at `address`; `None` where no object maps it (such
    /// rules stay out of the shared cache).
    fn object_at(&mut self, address: u64) -> Option<u64> {
        match self.last_object {
            Some(object) if (object.start..object.end).contains(&address) => Some(object.key),
            _ => {
                self.last_object = cfi::object_key(address);
                self.last_object.map(|object| object.key)
            }
        }
    }
}

impl<const BUCKETS: usize> RuleStore for SharedStore<'_, BUCKETS> {
    #[inline(always)]
    fn get(&mut self, address: u64) -> Option<Rule> {
        let object = self.object_at(address)?;
        self.cache.get(address, self.generation, object)
    }

    fn put(&mut self, address: u64, rule: Rule) {
        // See `LayeredStore::put`.
        if rule == Rule::NoUnwindInfo {
            return;
        }
        if let Some(object) = self.object_at(address) {
            self.cache.put(address, rule, self.generation, object);
        }
    }
}

/// A private cache in front of a shared one.
pub(crate) struct LayeredStore<'a, 'b, const LOCAL: usize, const SHARED: usize> {
    local: LocalStore<'a, LOCAL>,
    shared: SharedStore<'b, SHARED>,
}

impl<'a, 'b, const LOCAL: usize, const SHARED: usize> LayeredStore<'a, 'b, LOCAL, SHARED> {
    pub(crate) fn new(local: LocalStore<'a, LOCAL>, shared: SharedStore<'b, SHARED>) -> Self {
        LayeredStore { local, shared }
    }
}

impl<const LOCAL: usize, const SHARED: usize> LayeredStore<'_, '_, LOCAL, SHARED> {
    pub(crate) fn count_fallback(&mut self) {
        self.local.count_fallback();
    }

    /// [`RuleStore::rule_bits`] after a miss in the private cache: the
    /// shared cache, else the rule computed.
    #[cold]
    #[inline(never)]
    fn rule_bits_beyond_local(&mut self, address: u64) -> u64 {
        match self.get(address) {
            Some(rule) => encode_for(rule, address),
            None => self.compute(address),
        }
    }
}

impl<const LOCAL: usize, const SHARED: usize> RuleStore for LayeredStore<'_, '_, LOCAL, SHARED> {
    #[inline(always)]
    fn rule_bits(&mut self, address: u64) -> u64 {
        match self.local.cache.get_bits(address) {
            0 => self.rule_bits_beyond_local(address),
            bits => bits,
        }
    }

    #[inline(always)]
    fn get(&mut self, address: u64) -> Option<Rule> {
        if let Some(rule) = self.local.get(address) {
            return Some(rule);
        }
        let rule = self.shared.get(address)?;
        if !self.local.cache.computed_only {
            // Promote without counting a miss: nothing was computed.
            self.local.cache.put(address, rule);
        }
        Some(rule)
    }

    /// [`Rule::NoUnwindInfo`] stays private: it also says that this
    /// process registered no section covering the address, which its
    /// relatives sharing the cache may have.
    fn put(&mut self, address: u64, rule: Rule) {
        self.local.put(address, rule);
        if rule != Rule::NoUnwindInfo {
            self.shared.put(address, rule);
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn note_own_code(&mut self) {
        self.local.note_own_code();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::CfaBase;

    fn step(offset: i32) -> Rule {
        Rule::Step {
            cfa_base: CfaBase::Rsp,
            cfa_offset: offset,
            saved_rbp_offset: None,
            #[cfg(target_arch = "aarch64")]
            return_address: crate::rule::ReturnAddress {
                saved_at: Some(-8),
                signed: false,
            },
        }
    }

    #[test]
    fn local_cache_keeps_four_colliding_addresses() {
        let mut cache = RuleCache::<2>::new();
        // With 2 buckets, 8 addresses must share; the most recent 4 per bucket stay.
        for address in 1..=8u64 {
            cache.put(address, step(address as i32 * 8));
        }
        for address in 1..=8u64 {
            assert_eq!(cache.get(address), Some(step(address as i32 * 8)));
        }
        cache.put(9, step(72));
        assert_eq!(cache.get(9), Some(step(72)));
        assert_eq!((1..=8).filter(|&a| cache.get(a).is_some()).count(), 7);
    }

    #[test]
    fn shared_cache_respects_generation_and_object() {
        let cache = SharedRuleCache::<4>::new();
        cache.put(100, step(16), 7, 1);
        assert_eq!(cache.get(100, 7, 1), Some(step(16)));
        assert_eq!(cache.get(100, 8, 1), None);
        assert_eq!(
            cache.get(100, 7, 3),
            None,
            "another object at the same address"
        );
        cache.put(200, step(24), 8, 1);
        // The bucket of 200 was either reset to generation 8 or is another bucket.
        assert_eq!(cache.get(200, 8, 1), Some(step(24)));
    }

    #[test]
    fn two_objects_at_one_address_keep_their_own_rules() {
        let cache = SharedRuleCache::<2>::new();
        cache.put(100, step(16), 0, 5);
        cache.put(100, step(4000), 0, 9);
        assert_eq!(cache.get(100, 0, 5), Some(step(16)));
        assert_eq!(cache.get(100, 0, 9), Some(step(4000)));
    }

    #[test]
    fn sizes_are_as_documented() {
        assert_eq!(RuleCache::<1024>::size_in_bytes(), 64 * 1024 + 64);
        assert_eq!(RuleCache::<64>::size_in_bytes(), 4 * 1024 + 64);
        assert_eq!(SharedRuleCache::<4096>::size_in_bytes(), 256 * 1024);
    }
}
