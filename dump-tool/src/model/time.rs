//! Time in a profile: the lifetimes of freed samples per stack, the births
//! of live samples, the temporary-allocation threshold, the birth range of
//! `--born-after`/`--born-before`, and what a dump can tell about time
//! ([`TimeInfo`]).
//!
//! Births and lifetimes count from the profiler's start on the monotonic
//! clock (dump format 4). A live sample's weights are those the shim gave it
//! ([`heapsample_format::SamplingLaw::weights`] of its size under the dump's
//! law), so the live samples of a stack add up to its live sums exactly and
//! any subset of them (a birth range, an age slice) is a Horvitz–Thompson
//! estimate of the same kind. Plain data and arithmetic; no I/O.

use heapsample_format::{Dump, LIFETIME_BUCKETS, LifetimeBucket, Peak, Weights, bucket_bounds_ns};

/// The default threshold of a temporary allocation: freed within 1 ms
/// (counted to the bucket edge at or above it, 1.024 ms).
pub const DEFAULT_TEMPORARY_NS: u64 = 1_000_000;

/// A moment given on the command line: since the profiler's start, or on
/// the wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimePoint {
    /// Nanoseconds since the profiler's start.
    SinceStart(u64),
    /// Nanoseconds since the Unix epoch.
    Unix(u64),
}

impl TimePoint {
    /// Nanoseconds since the start of the process whose start on the wall
    /// clock is `start_unix_ns` (a moment before it is 0).
    pub fn since_start(self, start_unix_ns: u64) -> u64 {
        match self {
            TimePoint::SinceStart(ns) => ns,
            TimePoint::Unix(ns) => ns.saturating_sub(start_unix_ns),
        }
    }
}

/// Which live samples count: born at or after `after` and before `before`.
/// The default counts all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BirthRange {
    pub after: Option<TimePoint>,
    pub before: Option<TimePoint>,
}

impl BirthRange {
    /// True when it keeps every sample.
    pub fn is_all(&self) -> bool {
        self.after.is_none() && self.before.is_none()
    }

    /// `[low, high)` in nanoseconds since the start of a process started at
    /// `start_unix_ns` on the wall clock.
    pub fn bounds_ns(&self, start_unix_ns: u64) -> (u64, u64) {
        (
            self.after.map_or(0, |t| t.since_start(start_unix_ns)),
            self.before
                .map_or(u64::MAX, |t| t.since_start(start_unix_ns)),
        )
    }
}

/// How many of the lifetime buckets, from the first, hold lifetimes under
/// `threshold_ns` rounded up to a bucket edge: a temporary allocation is
/// one freed in those.
pub fn temporary_buckets(threshold_ns: u64) -> usize {
    (0..LIFETIME_BUCKETS)
        .find(|&b| bucket_bounds_ns(b).is_some_and(|(low, _)| low >= threshold_ns))
        .unwrap_or(LIFETIME_BUCKETS)
        .max(1)
}

/// The lifetime a temporary allocation stays under at `threshold_ns`: the
/// upper edge of the last temporary bucket (None: every lifetime).
pub fn temporary_edge_ns(threshold_ns: u64) -> Option<u64> {
    bucket_bounds_ns(temporary_buckets(threshold_ns) - 1).and_then(|(_, high)| high)
}

/// The weights of the freed samples in the first `buckets` buckets.
pub fn temporary_weights(lifetimes: &[LifetimeBucket], buckets: usize) -> Weights {
    lifetimes
        .iter()
        .filter(|b| usize::from(b.bucket) < buckets)
        .fold(Weights::default(), |sum, b| sum.plus(&b.weights))
}

/// `into` plus `more`, bucket by bucket (both sparse and in bucket order).
pub fn add_lifetimes(into: &mut Vec<LifetimeBucket>, more: &[LifetimeBucket]) {
    for bucket in more {
        match into.binary_search_by_key(&bucket.bucket, |b| b.bucket) {
            Ok(at) => {
                let sum = &mut into[at];
                sum.samples = sum.samples.saturating_add(bucket.samples);
                sum.sampled_bytes = sum.sampled_bytes.saturating_add(bucket.sampled_bytes);
                sum.weights = sum.weights.plus(&bucket.weights);
            }
            Err(at) => into.insert(at, *bucket),
        }
    }
}

/// One live sample as the time views and the exact in-use change use it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Birth {
    /// The serial of the thread that allocated it: with its birth, its
    /// identity within the process
    /// ([`heapsample_format::LiveSample::identity`]).
    pub thread: u32,
    /// Nanoseconds since the profiler's start.
    pub birth_ns: u64,
    /// Requested bytes.
    pub size: u64,
    /// What it adds to its stack's live sums.
    pub weights: Weights,
}

/// What a profile's times (births, lifetimes, the peak, the run) count
/// from: the profiler's start, which is the process's start, or the attach
/// of `heapsample attach`, after which the profiler saw everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeScope {
    /// Profiled from the process's start.
    #[default]
    SinceStart,
    /// Attached at this moment (ns since the Unix epoch): nothing born
    /// before it is in the profile.
    SinceAttach { attached_unix_ns: u64 },
}

impl TimeScope {
    /// The scope of `dump`'s times.
    pub fn of(dump: &Dump) -> TimeScope {
        match dump.attached_unix_ns() {
            Some(attached_unix_ns) => TimeScope::SinceAttach { attached_unix_ns },
            None => TimeScope::SinceStart,
        }
    }

    /// `since_start` or `since_attach`, as JSON names it.
    pub fn name(self) -> &'static str {
        match self {
            TimeScope::SinceStart => "since_start",
            TimeScope::SinceAttach { .. } => "since_attach",
        }
    }

    /// The moment times count from, in words: `the profiler's start` or
    /// `the attach`.
    pub fn origin(self) -> &'static str {
        match self {
            TimeScope::SinceStart => "the profiler's start",
            TimeScope::SinceAttach { .. } => "the attach",
        }
    }

    /// The attach time, ns since the Unix epoch, for an attached process.
    pub fn attached_unix_ns(self) -> Option<u64> {
        match self {
            TimeScope::SinceStart => None,
            TimeScope::SinceAttach { attached_unix_ns } => Some(attached_unix_ns),
        }
    }
}

/// What every time of a report counts from: the profiler's start on the
/// wall clock (0: not known), which is the process's start or its attach.
/// The viewer counts from the same moment, the first dump marked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeOrigin {
    pub start_unix_ns: u64,
    pub scope: TimeScope,
}

impl TimeOrigin {
    /// ns from the origin to `unix_ns` (0 when before it or not known).
    pub fn since(self, unix_ns: u64) -> u64 {
        if self.start_unix_ns == 0 {
            return 0;
        }
        unix_ns.saturating_sub(self.start_unix_ns)
    }
}

/// What a profile can tell about time, from its dump.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeInfo {
    /// The live samples carry their births (format 4, written by a
    /// recorder that records them).
    pub births: bool,
    /// The stacks carry the lifetimes of their freed samples.
    pub lifetimes: bool,
    /// The profiler's start on the wall clock, ns since the Unix epoch (0:
    /// not known).
    pub start_unix_ns: u64,
    /// The dump's moment, ns since the profiler's start (0: not known).
    pub dump_ns: u64,
    /// The exact peak of the live heap, where counted.
    pub peak: Option<Peak>,
    /// The temporary-allocation threshold the profile was built with, in
    /// ns (the edge it was rounded to: [`temporary_edge_ns`]).
    pub temporary_ns: u64,
    /// The birth range the in-use values were built with, `[low, high)` ns
    /// since the start; None: every live sample.
    pub born_ns: Option<(u64, u64)>,
    /// What the times count from (the first profile's, when merged).
    pub scope: TimeScope,
}

/// True if `dump` lists, for every stack, as many live samples as the stack
/// counts live objects.
fn births_agree_with_counts(dump: &Dump) -> bool {
    let mut listed = vec![0u64; dump.stacks.len()];
    for sample in &dump.live_samples {
        match listed.get_mut(sample.stack as usize) {
            Some(count) => *count += 1,
            None => return false,
        }
    }
    dump.stacks
        .iter()
        .zip(&listed)
        .all(|(stack, &count)| stack.live_objects == count)
}

impl TimeInfo {
    /// What its times count from.
    pub fn origin(&self) -> TimeOrigin {
        TimeOrigin {
            start_unix_ns: self.start_unix_ns,
            scope: self.scope,
        }
    }

    /// What `dump` carries. Births are there when the live samples listed
    /// are, stack by stack, as many as the stacks count (the shim lists and
    /// counts them from one walk of its live table, so a dump where they
    /// disagree was written wrong: its births are not used); lifetimes when
    /// some stack has them or no sample was freed yet (formats 2 and 3 carry
    /// neither: no clocks).
    pub fn of(dump: &Dump, temporary_ns: u64) -> TimeInfo {
        let clocks = dump.process.start_monotonic_ns != 0 || dump.process.dump_monotonic_ns != 0;
        let live: u64 = dump.stacks.iter().map(|s| s.live_objects).sum();
        let allocated: u64 = dump.stacks.iter().map(|s| s.alloc_objects).sum();
        let any_lifetimes = dump.stacks.iter().any(|s| !s.lifetimes.is_empty());
        TimeInfo {
            births: clocks && births_agree_with_counts(dump),
            lifetimes: clocks && (any_lifetimes || allocated <= live),
            start_unix_ns: dump.process.start_unix_ns,
            dump_ns: dump.process.dump_time_ns(),
            peak: dump.peak,
            temporary_ns,
            born_ns: None,
            scope: TimeScope::of(dump),
        }
    }

    /// The views a dump without births or lifetimes lacks, in words (None
    /// when it has both).
    pub fn missing(&self) -> Option<&'static str> {
        match (self.births, self.lifetimes) {
            (true, true) => None,
            (false, true) => Some(
                "births of live memory (ages, --born-after/--born-before, leak classification)",
            ),
            (true, false) => Some("lifetimes (temporary allocations, lifetime distributions)"),
            (false, false) => Some(
                "lifetimes, temporary allocations, births of live memory (ages, --born-after/--born-before, leak classification)",
            ),
        }
    }
}

/// The live samples of a dump per stack, with their weights, all in one
/// table (a stack's are a range of it, in the dump's order): one
/// allocation for all samples, not one per stack.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BirthsByStack {
    births: Vec<Birth>,
    /// Where each stack's births end in `births`.
    ends: Vec<u32>,
}

impl BirthsByStack {
    /// The births of stack `index` (none past the last stack).
    pub fn of(&self, index: usize) -> &[Birth] {
        let Some(&end) = self.ends.get(index) else {
            return &[];
        };
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.births[start as usize..end as usize]
    }
}

/// The live samples of `dump` per stack index, with their weights, born in
/// `[low, high)`. (A dump is at most 1 GiB and a sample takes at least a
/// byte of it: counts fit in 32 bits.)
pub fn births_by_stack(dump: &Dump, low: u64, high: u64) -> BirthsByStack {
    let law = dump.sampling_law();
    let kept = |sample: &&heapsample_format::LiveSample| {
        (sample.stack as usize) < dump.stacks.len()
            && sample.birth_ns >= low
            && sample.birth_ns < high
    };
    let mut ends = vec![0u32; dump.stacks.len()];
    for sample in dump.live_samples.iter().filter(kept) {
        ends[sample.stack as usize] += 1;
    }
    let mut total = 0;
    for end in &mut ends {
        total += *end;
        *end = total;
    }
    // Each stack's samples placed from its end backwards, the samples taken
    // in reverse: the dump's order is kept within a stack.
    let mut births = vec![Birth::default(); total as usize];
    let mut next = ends.clone();
    for sample in dump.live_samples.iter().rev().filter(kept) {
        let at = &mut next[sample.stack as usize];
        *at -= 1;
        births[*at as usize] = Birth {
            thread: sample.thread,
            birth_ns: sample.birth_ns,
            size: sample.size,
            weights: law.weights(sample.size),
        };
    }
    BirthsByStack { births, ends }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heapsample_format::{LiveSample, Stack};

    #[test]
    fn the_threshold_is_rounded_up_to_a_bucket_edge() {
        // 1 ms: buckets 0..=10 ([0, 1.024 ms)).
        assert_eq!(temporary_buckets(1_000_000), 11);
        assert_eq!(temporary_edge_ns(1_000_000), Some(1_024_000));
        assert_eq!(temporary_buckets(1_024_000), 11);
        assert_eq!(temporary_buckets(1_024_001), 12);
        assert_eq!(temporary_buckets(0), 1);
        assert_eq!(temporary_buckets(u64::MAX), LIFETIME_BUCKETS);
        assert_eq!(temporary_edge_ns(u64::MAX), None);
    }

    /// Births are read only from a dump that lists, stack by stack, the
    /// live samples its stacks count.
    #[test]
    fn births_only_where_the_list_agrees_with_the_counts() {
        let stack = |live_objects| Stack {
            live_objects,
            ..Stack::default()
        };
        let sample = |stack| LiveSample {
            stack,
            ..LiveSample::default()
        };
        let mut dump = crate::model::profile::tests::unmapped_dump(vec![stack(2), stack(1)]);
        dump.process.start_monotonic_ns = 1;
        dump.live_samples = vec![sample(0), sample(1), sample(0)];
        assert!(TimeInfo::of(&dump, DEFAULT_TEMPORARY_NS).births);
        for wrong in [
            vec![sample(0), sample(1)],
            vec![sample(0), sample(1), sample(0), sample(1)],
            vec![sample(0), sample(1), sample(1)],
            vec![sample(0), sample(1), sample(2)],
        ] {
            dump.live_samples = wrong;
            assert!(!TimeInfo::of(&dump, DEFAULT_TEMPORARY_NS).births);
        }
    }

    #[test]
    fn lifetimes_add_bucket_by_bucket() {
        let bucket = |b: u8, n: f64| LifetimeBucket {
            bucket: b,
            samples: 1,
            sampled_bytes: 8,
            weights: Weights {
                objects: n,
                ..Weights::default()
            },
        };
        let mut sum = vec![bucket(1, 1.0), bucket(5, 2.0)];
        add_lifetimes(&mut sum, &[bucket(0, 4.0), bucket(5, 3.0), bucket(9, 1.0)]);
        let got: Vec<(u8, f64)> = sum.iter().map(|b| (b.bucket, b.weights.objects)).collect();
        assert_eq!(got, vec![(0, 4.0), (1, 1.0), (5, 5.0), (9, 1.0)]);
        assert_eq!(temporary_weights(&sum, 2).objects, 5.0);
    }
}
