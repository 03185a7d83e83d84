//! A dump as corrected per-stack samples: the [`Profile`] every view,
//! comparison and renderer reads.
//!
//! ## The sampling correction
//!
//! Each stack's values are the Horvitz–Thompson sums the shim recorded
//! (every sampled object weighted by the inverse of its own sampling
//! probability), with their variances; [`crate::stats::estimate`] explains
//! the estimator and turns them into intervals. Format-2 dumps carry raw
//! counts only and get the old average-size correction (see
//! `heapsample_format::legacy_weights`). With `lg_prof_sample:0` the numbers
//! are exact.
//!
//! Owns [`Profile::build`]: one sample per distinct (location list,
//! thread), frames expanded and allocator frames dropped, every vector at
//! its exact size (a profile of a large dump holds hundreds of thousands
//! of them). Never reads files.

use super::frames::{FrameRef, frames_of};
use super::metric::{Metric, RawCounts, Values};
use super::time::{
    BirthRange, DEFAULT_TEMPORARY_NS, TimeInfo, add_lifetimes, births_by_stack, temporary_buckets,
    temporary_edge_ns, temporary_weights,
};
use crate::stats::residue::whole_if_residue;
use crate::stats::{Estimate, Sampling};
use crate::symbols::{InternedStacks, LocationTable};
use heapsample_format::{Dump, LifetimeBucket, ThreadInfo, Totals, Weights};

pub use super::time::Birth;

/// Raw counts and weights of one call stack, summed over threads and epochs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StackSums {
    pub raw: RawCounts,
    pub live: Weights,
    pub alloc: Weights,
    /// Freed within the temporary threshold.
    pub temp: Weights,
    pub lifetimes: Vec<LifetimeBucket>,
    pub births: Vec<Birth>,
}

impl StackSums {
    /// Add `stack` with `births` (its live samples in the birth range, if
    /// the dump has them); with `ranged`, the live values are those births'
    /// (else the recorder's own live sums).
    fn add(
        &mut self,
        stack: &heapsample_format::Stack,
        births: Option<&[Birth]>,
        ranged: bool,
        temporary: usize,
    ) {
        self.raw.add(stack);
        self.alloc = self.alloc.plus(&stack.alloc);
        add_lifetimes(&mut self.lifetimes, &stack.lifetimes);
        let temp = temporary_weights(&stack.lifetimes, temporary);
        self.temp = self.temp.plus(&temp);
        for bucket in stack
            .lifetimes
            .iter()
            .filter(|b| usize::from(b.bucket) < temporary)
        {
            self.raw.temp_objects = self.raw.temp_objects.saturating_add(bucket.samples);
            self.raw.temp_bytes = self.raw.temp_bytes.saturating_add(bucket.sampled_bytes);
        }
        if let Some(births) = births {
            // Exactly: most samples have one stack's births.
            self.births.reserve_exact(births.len());
            self.births.extend_from_slice(births);
        }
        match births.filter(|_| ranged) {
            Some(births) => {
                self.raw.live_objects = self.raw.live_objects.saturating_sub(stack.live_objects);
                self.raw.live_bytes = self.raw.live_bytes.saturating_sub(stack.live_bytes);
                for birth in births {
                    self.live = self.live.plus(&birth.weights);
                    self.raw.live_objects += 1;
                    self.raw.live_bytes += birth.size;
                }
            }
            None => self.live = self.live.plus(&live_without_residue(stack)),
        }
    }
}

/// The stack's live sums with the rounding residue of their additions and
/// subtractions removed ([`whole_if_residue`]): each sample was added once
/// and subtracted at most once, and no running total exceeded the
/// cumulative sum.
fn live_without_residue(stack: &heapsample_format::Stack) -> Weights {
    let operations = 2.0 * stack.alloc_objects as f64;
    let (live, alloc) = (&stack.live, &stack.alloc);
    let whole = |sum: f64, largest: f64| whole_if_residue(sum, largest, operations);
    Weights {
        objects: whole(live.objects, alloc.objects),
        bytes: whole(live.bytes, alloc.bytes),
        objects_variance: whole(live.objects_variance, alloc.objects_variance).max(0.0),
        bytes_variance: whole(live.bytes_variance, alloc.bytes_variance).max(0.0),
    }
}

/// One distinct call stack of one thread with its corrected values.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Function frames, leaf (innermost) first, allocator frames dropped.
    pub frames: Vec<FrameRef>,
    /// The estimates.
    pub values: Values,
    /// Their variances.
    pub variance: Values,
    /// The raw sampled counts (lower bounds of the truth).
    pub sampled: Values,
    /// The [`heapsample_format::ThreadInfo::serial`] of the thread that
    /// allocated (0: unknown).
    pub thread: u32,
    /// How long its freed samples lived (empty without lifetimes).
    pub lifetimes: Vec<LifetimeBucket>,
    /// Its live samples' births (empty without births), in the birth range
    /// of the build.
    pub births: Vec<Birth>,
    /// The mean sampling period of its dump, in bytes.
    pub period: u64,
}

impl Sample {
    /// The estimate of `metric` with its variance.
    pub fn estimate(&self, metric: Metric) -> Estimate {
        Estimate {
            value: metric.of(&self.values),
            variance: metric.of(&self.variance),
            floor: metric.of(&self.sampled),
            scale: 0.0,
            sampling: Sampling::of(self.period as f64, metric.counted()),
        }
    }
}

/// A dump turned into corrected samples.
#[derive(Clone, Debug)]
pub struct Profile {
    pub samples: Vec<Sample>,
    /// The mean sampling period R in bytes.
    pub period: u64,
    /// Sum of the corrected values of all samples.
    pub estimated: Values,
    /// Sum of their variances.
    pub variance: Values,
    /// Sum of their raw sampled counts.
    pub sampled: Values,
    /// The dump's exact counters.
    pub totals: Totals,
    /// Which process and moment the dump describes.
    pub origin: Origin,
    /// The threads the samples name.
    pub threads: Vec<ThreadInfo>,
    /// What the dump tells about time: births, lifetimes, clocks, peak.
    pub time: TimeInfo,
    /// The dumps' whole profile, before the birth range and the view's
    /// transforms: what `estimated` is a part of.
    pub whole: WholeValues,
}

/// The sums of a dump's whole profile: every stack, every live sample
/// whatever its birth. Transforms keep it; a merge adds it up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WholeValues {
    pub estimated: Values,
    pub variance: Values,
    pub sampled: Values,
}

impl WholeValues {
    /// `more` added to these, field by field.
    pub fn add(&mut self, more: &WholeValues) {
        self.estimated.add(&more.estimated);
        self.variance.add(&more.variance);
        self.sampled.add(&more.sampled);
    }

    /// Every stack of `dump` with all its live samples, temporary within
    /// the first `temporary` lifetime buckets.
    fn of(dump: &Dump, temporary: usize) -> WholeValues {
        let mut sums = StackSums::default();
        for stack in &dump.stacks {
            sums.add(stack, None, false, temporary);
        }
        WholeValues {
            estimated: Values::estimates(&sums.live, &sums.alloc, &sums.temp),
            variance: Values::variances(&sums.live, &sums.alloc, &sums.temp),
            sampled: Values::sampled(&sums.raw),
        }
    }
}

/// Where a profile comes from: enough to tell whether two dumps are of one
/// process, in order (see `crate::compare::pairing`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The random id the process drew at start-up, unique to it (a forked
    /// child draws its own); `None` in dumps whose format does not carry
    /// one (versions 2 and 3, foreign profiles).
    pub process_id: Option<u128>,
    pub pid: u32,
    pub executable: String,
    pub seq: u64,
    pub time_unix_ns: u64,
    /// For a dump of an attached process, what its in-use values mean
    /// (`Dump::attach_note`).
    pub attach_note: Option<String>,
}

impl Profile {
    /// The name and tid of the thread with this serial, if the dump has it.
    pub fn thread(&self, serial: u32) -> Option<&ThreadInfo> {
        self.threads.iter().find(|t| t.serial == serial)
    }

    /// The whole profile's estimate of `metric`.
    pub fn estimate(&self, metric: Metric) -> Estimate {
        Estimate {
            value: metric.of(&self.estimated),
            variance: metric.of(&self.variance),
            floor: metric.of(&self.sampled),
            scale: self
                .samples
                .iter()
                .map(|s| s.estimate(metric).weight_scale())
                .fold(0.0, f64::max),
            sampling: self.sampling(metric),
        }
    }

    /// The estimate of `metric` over the dumps' whole profile, before the
    /// birth range and the view's transforms (the view's own is
    /// [`Profile::estimate`]).
    pub fn whole_estimate(&self, metric: Metric) -> Estimate {
        Estimate {
            value: metric.of(&self.whole.estimated),
            variance: metric.of(&self.whole.variance),
            floor: metric.of(&self.whole.sampled),
            ..self.estimate(metric)
        }
    }

    /// The object sizes its stacks allocate (each stack's mean requested
    /// size, rounded), with the estimated objects allocated at each, most
    /// objects first (then smallest size).
    pub fn object_sizes(&self) -> Vec<(u64, f64)> {
        let mut sizes: std::collections::BTreeMap<u64, f64> = Default::default();
        for sample in &self.samples {
            let objects = sample.values.alloc_objects;
            if objects > 0.0 {
                let size = (sample.values.alloc_space / objects).round().max(0.0) as u64;
                *sizes.entry(size).or_default() += objects;
            }
        }
        let mut sizes: Vec<(u64, f64)> = sizes.into_iter().collect();
        sizes.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        sizes
    }

    /// How `metric` was sampled: by the longest period of the dumps behind
    /// the profile (a merge may pool several).
    pub fn sampling(&self, metric: Metric) -> Sampling {
        let period = self
            .samples
            .iter()
            .map(|s| s.period)
            .fold(self.period, u64::max);
        Sampling::of(period as f64, metric.counted())
    }
}

/// How to turn stacks into frames and samples into values.
#[derive(Clone, Copy, Debug)]
pub struct BuildOptions {
    /// Keep malloc, operator new, `__rust_alloc`… at the leaf.
    pub keep_allocator_frames: bool,
    /// A temporary allocation is one freed within this many nanoseconds
    /// (rounded up to a lifetime bucket's edge).
    pub temporary_ns: u64,
    /// In-use values count the live samples born in this range (all by
    /// default; a dump without births is refused by the pipeline).
    pub born: BirthRange,
}

impl Default for BuildOptions {
    fn default() -> BuildOptions {
        BuildOptions {
            keep_allocator_frames: false,
            temporary_ns: DEFAULT_TEMPORARY_NS,
            born: BirthRange::default(),
        }
    }
}

impl Profile {
    /// `stacks` are the interned locations of `dump.stacks`, in order.
    pub fn build(
        dump: &Dump,
        stacks: &InternedStacks,
        table: &LocationTable,
        options: BuildOptions,
    ) -> Profile {
        let (mut estimated, mut variance, mut sampled) = Default::default();
        let mut time = TimeInfo::of(
            dump,
            temporary_edge_ns(options.temporary_ns).unwrap_or(u64::MAX),
        );
        let births = time.births.then(|| {
            let (low, high) = options.born.bounds_ns(time.start_unix_ns);
            births_by_stack(dump, low, high)
        });
        if time.births && !options.born.is_all() {
            time.born_ns = Some(options.born.bounds_ns(time.start_unix_ns));
        }
        let temporary = if time.lifetimes {
            temporary_buckets(options.temporary_ns)
        } else {
            0
        };
        time.births &= births.is_some();
        let ranged = !options.born.is_all();
        let groups = StackGroups::of(dump, stacks);
        let mut samples = Vec::with_capacity(groups.count());
        for group in groups.iter() {
            let first = group[0] as usize;
            let mut sums = StackSums::default();
            for &index in group {
                let index = index as usize;
                let stack_births = births.as_ref().map(|b| b.of(index));
                sums.add(&dump.stacks[index], stack_births, ranged, temporary);
            }
            sums.lifetimes.shrink_to_fit();
            let sample = Sample {
                frames: frames_of(stacks.get(first), table, options.keep_allocator_frames),
                values: Values::estimates(&sums.live, &sums.alloc, &sums.temp),
                variance: Values::variances(&sums.live, &sums.alloc, &sums.temp),
                sampled: Values::sampled(&sums.raw),
                thread: dump.stacks[first].thread,
                lifetimes: sums.lifetimes,
                births: sums.births,
                period: dump.sample_period(),
            };
            Values::add(&mut estimated, &sample.values);
            Values::add(&mut variance, &sample.variance);
            Values::add(&mut sampled, &sample.sampled);
            samples.push(sample);
        }
        let whole = if ranged {
            WholeValues::of(dump, temporary)
        } else {
            WholeValues {
                estimated,
                variance,
                sampled,
            }
        };
        Profile {
            whole,
            samples,
            period: dump.sample_period(),
            estimated,
            variance,
            sampled,
            totals: dump.totals.clone(),
            origin: Origin {
                process_id: (dump.process.id != 0).then_some(dump.process.id),
                pid: dump.pid,
                executable: dump.executable.clone(),
                seq: dump.seq,
                time_unix_ns: dump.time_unix_ns,
                attach_note: dump.attach_note(),
            },
            threads: dump.threads.clone(),
            time,
        }
    }
}

/// The stacks of a dump grouped by distinct (location list, thread), the
/// groups in the order of that key and each group's stacks in the dump's
/// order: deterministic, and the sums are additive, so splitting by thread
/// changes no total.
struct StackGroups {
    /// Stack indices, sorted by key then index.
    order: Vec<u32>,
    /// Where each group ends in `order`.
    ends: Vec<u32>,
}

impl StackGroups {
    fn of(dump: &Dump, stacks: &InternedStacks) -> StackGroups {
        let count = dump.stacks.len().min(stacks.len());
        let thread = |index: u32| dump.stacks[index as usize].thread;
        let same = |a: u32, b: u32| {
            stacks.identity(a as usize) == stacks.identity(b as usize) && thread(a) == thread(b)
        };
        let mut order: Vec<u32> = (0..count as u32).collect();
        order.sort_by(|&a, &b| {
            if same(a, b) {
                return a.cmp(&b);
            }
            let (first, second) = (stacks.get(a as usize), stacks.get(b as usize));
            first.cmp(second).then_with(|| thread(a).cmp(&thread(b)))
        });
        let mut ends: Vec<u32> = (1..order.len())
            .filter(|&at| !same(order[at - 1], order[at]))
            .map(|at| at as u32)
            .collect();
        if !order.is_empty() {
            ends.push(order.len() as u32);
        }
        StackGroups { order, ends }
    }

    fn count(&self) -> usize {
        self.ends.len()
    }

    /// Each group's stack indices, in order.
    fn iter(&self) -> impl Iterator<Item = &[u32]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.order[start as usize..end as usize])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use heapsample_format::{Module, Stack, Trigger};

    #[test]
    fn values_are_the_recorded_weights_of_mixed_sizes() {
        // One stack with a small and a huge sampled object at R = 2^19: the
        // estimate is the sum of each sample's own weight, not the average
        // size's.
        let period = 1u64 << 19;
        let small = heapsample_format::sample_weights(100, period);
        let huge = heapsample_format::sample_weights(1 << 20, period);
        let both = small.plus(&huge);
        let dump = Dump {
            lg_sample_period: 19,
            ..unmapped_dump(vec![Stack {
                frames: vec![0x10],
                live_objects: 2,
                live_bytes: 100 + (1 << 20),
                alloc_objects: 2,
                alloc_bytes: 100 + (1 << 20),
                live: both,
                alloc: both,
                ..Stack::default()
            }])
        };
        let mut table = LocationTable::default();
        let stacks = table.intern_dump(&dump);
        let profile = Profile::build(&dump, &stacks, &table, BuildOptions::default());
        let estimate = profile.estimate(Metric::InuseObjects);
        assert_eq!(estimate.value, both.objects);
        assert_eq!(estimate.variance, both.objects_variance);
        assert_eq!(estimate.floor, 2.0);
        // ≈ 5243 small objects + 1 huge, where the average-size correction
        // (524,388 bytes average) would have said ≈ 3.
        assert!(estimate.value > 5000.0);
        let sample = &profile.samples[0];
        assert_eq!(sample.estimate(Metric::AllocSpace).value, both.bytes);
    }

    /// A dump whose frames map to no module: names are raw addresses, which
    /// is enough to check stack merging, frame order and allocator dropping.
    pub(crate) fn unmapped_dump(stacks: Vec<Stack>) -> Dump {
        Dump {
            writer: "t".into(),
            pid: 1,
            executable: "/x".into(),
            time_unix_ns: 0,
            trigger: Trigger::Final,
            lg_sample_period: 0,
            modules: Vec::<Module>::new(),
            stacks,
            ..heapsample_format::testing::dump()
        }
    }
}
