//! Rule caches: code address → encoded [`Rule`], in caller-owned fixed-size memory.
//!
//! Owns the two cache layouts, the process-wide invalidation generation, the
//! process's lineage (which entries of a cache shared with other processes it may
//! use) and the `RuleStore` adapters the stack walk uses.
//!
//! * [`RuleCache`]: one thread at a time (`&mut`); 4-way set-associative buckets of one
//!   cache line, FIFO replacement within a bucket.
//! * [`SharedRuleCache`]: any number of threads (`&self`), and any number of processes
//!   when it lives in memory `fork` shares (`MAP_SHARED`); 3-way buckets of one cache
//!   line, each guarded by a per-bucket sequence counter (a seqlock). Readers never
//!   wait: a bucket being written counts as a miss. A writer that finds the bucket busy
//!   skips the insertion instead of waiting.
//!
//! A rule is a function of the code address and the object mapped there. Processes
//! forked from one another map the same objects at the same addresses until one of
//! them loads or unloads an object, so a shared bucket is tagged with its writer's
//! lineage and generation: a process that is about to change its set of objects takes
//! a new lineage ([`SharedRuleCache::start_new_lineage`], numbered from a counter in
//! the shared memory itself, so no two processes ever draw the same one), and from
//! then on neither sees the other's entries. Forked children inherit their parent's
//! lineage and with it every rule any process of that lineage computed.
//!
//! Runs inside malloc: no allocation, no locks (nothing here ever waits), no system
//! calls. All-zero memory is a valid empty cache of either kind.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use crate::rule::Rule;

/// Bumped by [`invalidate_all_caches`]; caches drop rules computed under an older value.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Makes every cache, private or shared, forget all rules computed so far.
///
/// Call it when an object is unloaded (`dlclose`), before its address range can be
/// reused. Cheap (one atomic increment); private caches clear themselves at their
/// next capture, shared buckets when they are next read or written. A process that
/// shares a [`SharedRuleCache`] with others across `fork` must also take a new
/// lineage then ([`SharedRuleCache::start_new_lineage`]).
pub fn invalidate_all_caches() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

pub(crate) fn current_generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// This process's lineage: 0 until it first calls
/// [`SharedRuleCache::start_new_lineage`], inherited across `fork`.
static LINEAGE: AtomicU32 = AtomicU32::new(0);

/// The tag of the entries this process may read from and write to a shared cache:
/// its lineage and its generation.
fn shared_tag() -> u64 {
    (u64::from(LINEAGE.load(Ordering::Acquire)) << 32) | (current_generation() & 0xffff_ffff)
}

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

    /// Bytes of memory one cache of this size occupies.
    pub const fn size_in_bytes() -> usize {
        core::mem::size_of::<Self>()
    }

    fn get(&self, address: u64) -> Option<Rule> {
        let bucket = &self.buckets[bucket_index(address, BUCKETS)];
        let way = bucket.addresses.iter().position(|&a| a == address)?;
        Rule::decode(bucket.rules[way])
    }

    fn put(&mut self, address: u64, rule: Rule) {
        let bucket = &mut self.buckets[bucket_index(address, BUCKETS)];
        bucket.addresses.copy_within(0..LOCAL_WAYS - 1, 1);
        bucket.rules.copy_within(0..LOCAL_WAYS - 1, 1);
        bucket.addresses[0] = address;
        bucket.rules[0] = rule.encode();
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
        let generation = current_generation();
        if cache.generation != generation {
            cache.clear();
            cache.generation = generation;
        }
        LocalStore { cache }
    }
}

impl<const BUCKETS: usize> LocalStore<'_, BUCKETS> {
    pub(crate) fn count_fallback(&mut self) {
        self.cache.fallbacks += 1;
    }
}

impl<const BUCKETS: usize> RuleStore for LocalStore<'_, BUCKETS> {
    #[inline(always)]
    fn get(&mut self, address: u64) -> Option<Rule> {
        self.cache.get(address)
    }

    fn put(&mut self, address: u64, rule: Rule) {
        self.cache.misses += 1;
        self.cache.put(address, rule);
    }
}

const SHARED_WAYS: usize = 3;

#[repr(C, align(64))]
struct SharedBucket {
    /// Odd while a writer is updating the bucket.
    sequence: AtomicU32,
    /// The writer's [`shared_tag`]: its lineage, and the low 32 bits of the
    /// [`GENERATION`] the entries were computed under.
    tag: AtomicU64,
    addresses: [AtomicU64; SHARED_WAYS],
    rules: [AtomicU64; SHARED_WAYS],
}

impl SharedBucket {
    const fn new() -> Self {
        SharedBucket {
            sequence: AtomicU32::new(0),
            tag: AtomicU64::new(0),
            addresses: [const { AtomicU64::new(0) }; SHARED_WAYS],
            rules: [const { AtomicU64::new(0) }; SHARED_WAYS],
        }
    }
}

/// A rule cache shared by all threads: `BUCKETS` × 3 entries in 64-byte buckets
/// (256 KiB for the default 4096 buckets, plus one line of header). `BUCKETS` must
/// be a power of two.
///
/// Lock-free: readers never wait and writers never wait (a busy bucket is simply not
/// updated). Holds no pointers; all-zero memory is a valid empty cache, so a `static`
/// (`SharedRuleCache::new()` is `const`) costs only `.bss`, and so does a zeroed
/// `MAP_SHARED` mapping that forked children keep using (see the module docs for
/// lineages). A process killed while writing a bucket leaves it busy for good: that
/// bucket then always misses.
///
/// After 2³² calls to [`invalidate_all_caches`] in one lineage a bucket untouched for
/// that long could be taken as current again; no realistic program gets there.
#[repr(C)]
pub struct SharedRuleCache<const BUCKETS: usize = 4096> {
    /// The last lineage handed out (on a line of its own).
    lineages: LineageCounter,
    buckets: [SharedBucket; BUCKETS],
}

#[repr(C, align(64))]
struct LineageCounter(AtomicU32);

impl<const BUCKETS: usize> SharedRuleCache<BUCKETS> {
    const VALID_SIZE: () = assert!(BUCKETS.is_power_of_two() && BUCKETS >= 2);

    /// An empty cache (usable in a `static`).
    pub const fn new() -> Self {
        let () = Self::VALID_SIZE;
        SharedRuleCache {
            lineages: LineageCounter(AtomicU32::new(0)),
            buckets: [const { SharedBucket::new() }; BUCKETS],
        }
    }

    /// Gives the calling process a lineage no other process using this cache has or
    /// had: call it before the process loads or unloads an object (`dlopen`,
    /// `dlclose`), so that neither it nor the processes it shares the cache with use
    /// the other's rules from then on. Outside the stack walk; lock-free.
    pub fn start_new_lineage(&self) {
        let lineage = self
            .lineages
            .0
            .fetch_add(1, Ordering::AcqRel)
            .wrapping_add(1);
        LINEAGE.store(lineage, Ordering::Release);
    }

    /// Bytes of memory one cache of this size occupies.
    pub const fn size_in_bytes() -> usize {
        core::mem::size_of::<Self>()
    }

    fn get(&self, address: u64, tag: u64) -> Option<Rule> {
        let bucket = &self.buckets[bucket_index(address, BUCKETS)];
        let sequence_before = bucket.sequence.load(Ordering::Acquire);
        if sequence_before & 1 != 0 {
            return None;
        }
        let bucket_tag = bucket.tag.load(Ordering::Relaxed);
        let mut found = 0;
        for way in 0..SHARED_WAYS {
            if bucket.addresses[way].load(Ordering::Relaxed) == address {
                found = bucket.rules[way].load(Ordering::Relaxed);
                break;
            }
        }
        // Seqlock read side: the fence orders the loads above before the re-check.
        fence(Ordering::Acquire);
        if bucket.sequence.load(Ordering::Relaxed) != sequence_before || bucket_tag != tag {
            return None;
        }
        Rule::decode(found)
    }

    fn put(&self, address: u64, rule: Rule, tag: u64) {
        let bucket = &self.buckets[bucket_index(address, BUCKETS)];
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
        let stale = bucket.tag.load(Ordering::Relaxed) != tag;
        for way in (1..SHARED_WAYS).rev() {
            let (moved_address, moved_rule) = if stale {
                (0, 0)
            } else {
                (
                    bucket.addresses[way - 1].load(Ordering::Relaxed),
                    bucket.rules[way - 1].load(Ordering::Relaxed),
                )
            };
            bucket.addresses[way].store(moved_address, Ordering::Relaxed);
            bucket.rules[way].store(moved_rule, Ordering::Relaxed);
        }
        bucket.addresses[0].store(address, Ordering::Relaxed);
        bucket.rules[0].store(rule.encode(), Ordering::Relaxed);
        bucket.tag.store(tag, Ordering::Relaxed);
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

/// A [`SharedRuleCache`] used for one capture, with the tag read once.
pub(crate) struct SharedStore<'a, const BUCKETS: usize> {
    cache: &'a SharedRuleCache<BUCKETS>,
    tag: u64,
}

impl<'a, const BUCKETS: usize> SharedStore<'a, BUCKETS> {
    pub(crate) fn new(cache: &'a SharedRuleCache<BUCKETS>) -> Self {
        SharedStore {
            cache,
            tag: shared_tag(),
        }
    }
}

impl<const BUCKETS: usize> RuleStore for SharedStore<'_, BUCKETS> {
    #[inline(always)]
    fn get(&mut self, address: u64) -> Option<Rule> {
        self.cache.get(address, self.tag)
    }

    fn put(&mut self, address: u64, rule: Rule) {
        self.cache.put(address, rule, self.tag);
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
}

impl<const LOCAL: usize, const SHARED: usize> RuleStore for LayeredStore<'_, '_, LOCAL, SHARED> {
    #[inline(always)]
    fn get(&mut self, address: u64) -> Option<Rule> {
        if let Some(rule) = self.local.get(address) {
            return Some(rule);
        }
        let rule = self.shared.get(address)?;
        // Promote without counting a miss: nothing was computed.
        self.local.cache.put(address, rule);
        Some(rule)
    }

    fn put(&mut self, address: u64, rule: Rule) {
        self.local.put(address, rule);
        self.shared.put(address, rule);
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
    fn shared_cache_respects_generation() {
        let cache = SharedRuleCache::<4>::new();
        cache.put(100, step(16), 7);
        assert_eq!(cache.get(100, 7), Some(step(16)));
        assert_eq!(cache.get(100, 8), None);
        cache.put(200, step(24), 8);
        // The bucket of 200 was either reset to generation 8 or is another bucket.
        assert_eq!(cache.get(200, 8), Some(step(24)));
    }

    #[test]
    fn a_new_lineage_sees_none_of_the_old_entries() {
        let cache = SharedRuleCache::<4>::new();
        let before = shared_tag();
        cache.put(100, step(16), before);
        cache.start_new_lineage();
        let after = shared_tag();
        assert_ne!(before >> 32, after >> 32, "the lineage changed");
        assert_eq!(
            before & 0xffff_ffff,
            after & 0xffff_ffff,
            "the generation did not"
        );
        assert_eq!(cache.get(100, after), None);
        cache.put(100, step(24), after);
        assert_eq!(cache.get(100, after), Some(step(24)));
        assert_eq!(
            cache.get(100, before),
            None,
            "the old lineage sees the new entries as stale"
        );
        cache.start_new_lineage();
        assert_ne!(
            shared_tag() >> 32,
            after >> 32,
            "lineages are never handed out twice"
        );
    }

    #[test]
    fn sizes_are_as_documented() {
        assert_eq!(RuleCache::<1024>::size_in_bytes(), 64 * 1024 + 64);
        assert_eq!(RuleCache::<64>::size_in_bytes(), 4 * 1024 + 64);
        assert_eq!(SharedRuleCache::<4096>::size_in_bytes(), 256 * 1024 + 64);
    }
}
