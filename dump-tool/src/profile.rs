//! Corrected per-stack values, metrics, allocator-frame dropping, folding
//! and diffing.
//!
//! ## The sampling correction
//!
//! Each stack's values are the Horvitz–Thompson sums the shim recorded
//! (every sampled object weighted by the inverse of its own sampling
//! probability), with their variances; [`crate::estimate`] explains the
//! estimator and turns them into intervals. Format-2 dumps carry raw counts
//! only and get the old average-size correction (see
//! `heapsample_format::legacy_weights`). With `lg_prof_sample:0` the numbers
//! are exact.

use crate::estimate::Estimate;
use crate::symbolize::{Line, LocationId, LocationTable};
use heapsample_format::{Dump, ThreadInfo, Totals, Weights};
use std::collections::{BTreeMap, HashMap};

/// What a flamegraph's widths and a report's numbers measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// Bytes still live at the dump.
    #[default]
    InuseSpace,
    /// Objects still live at the dump.
    InuseObjects,
    /// Bytes ever allocated.
    AllocSpace,
    /// Objects ever allocated.
    AllocObjects,
}

impl Metric {
    /// The value of this metric in `values`.
    pub fn of(self, values: &Values) -> f64 {
        match self {
            Metric::InuseSpace => values.inuse_space,
            Metric::InuseObjects => values.inuse_objects,
            Metric::AllocSpace => values.alloc_space,
            Metric::AllocObjects => values.alloc_objects,
        }
    }

    /// `bytes` or `objects`.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::InuseSpace | Metric::AllocSpace => "bytes",
            Metric::InuseObjects | Metric::AllocObjects => "objects",
        }
    }

    /// The command-line spelling, e.g. `inuse-space`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::InuseSpace => "inuse-space",
            Metric::InuseObjects => "inuse-objects",
            Metric::AllocSpace => "alloc-space",
            Metric::AllocObjects => "alloc-objects",
        }
    }
}

/// Estimated (corrected) counts of one stack or of a whole profile.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Values {
    pub inuse_objects: f64,
    pub inuse_space: f64,
    pub alloc_objects: f64,
    pub alloc_space: f64,
}

impl Values {
    /// The estimates of a live and a cumulative set of weights.
    pub fn estimates(live: &Weights, alloc: &Weights) -> Values {
        Values {
            inuse_objects: live.objects,
            inuse_space: live.bytes,
            alloc_objects: alloc.objects,
            alloc_space: alloc.bytes,
        }
    }

    /// The variances of [`Values::estimates`].
    pub fn variances(live: &Weights, alloc: &Weights) -> Values {
        Values {
            inuse_objects: live.objects_variance,
            inuse_space: live.bytes_variance,
            alloc_objects: alloc.objects_variance,
            alloc_space: alloc.bytes_variance,
        }
    }

    /// Raw sampled counts as values: what the samples themselves add up to.
    pub fn sampled(raw: &RawCounts) -> Values {
        Values {
            inuse_objects: raw.live_objects as f64,
            inuse_space: raw.live_bytes as f64,
            alloc_objects: raw.alloc_objects as f64,
            alloc_space: raw.alloc_bytes as f64,
        }
    }

    /// Add `other` field by field.
    pub fn add(&mut self, other: &Values) {
        self.inuse_objects += other.inuse_objects;
        self.inuse_space += other.inuse_space;
        self.alloc_objects += other.alloc_objects;
        self.alloc_space += other.alloc_space;
    }
}

/// Raw sampled counts of one call stack, summed over threads and epochs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawCounts {
    pub live_objects: u64,
    pub live_bytes: u64,
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
}

impl RawCounts {
    fn add(&mut self, stack: &heapsample_format::Stack) {
        self.live_objects = self.live_objects.saturating_add(stack.live_objects);
        self.live_bytes = self.live_bytes.saturating_add(stack.live_bytes);
        self.alloc_objects = self.alloc_objects.saturating_add(stack.alloc_objects);
        self.alloc_bytes = self.alloc_bytes.saturating_add(stack.alloc_bytes);
    }
}

/// Raw counts and weights of one call stack, summed over threads and epochs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StackSums {
    pub raw: RawCounts,
    pub live: Weights,
    pub alloc: Weights,
}

impl StackSums {
    fn add(&mut self, stack: &heapsample_format::Stack) {
        self.raw.add(stack);
        self.live = self.live.plus(&stack.live);
        self.alloc = self.alloc.plus(&stack.alloc);
    }
}

/// One function frame of a stack: line `line` of location `location`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameRef {
    pub location: LocationId,
    pub line: usize,
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
}

impl Sample {
    /// The estimate of `metric` with its variance.
    pub fn estimate(&self, metric: Metric) -> Estimate {
        Estimate {
            value: metric.of(&self.values),
            variance: metric.of(&self.variance),
            floor: metric.of(&self.sampled),
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
}

/// Where a profile comes from: enough to tell whether two dumps are of one
/// process, in order (see [`crate::estimate::Pairing`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub pid: u32,
    pub executable: String,
    pub seq: u64,
    pub time_unix_ns: u64,
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
        }
    }
}

/// How to turn stacks into frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct BuildOptions {
    /// Keep malloc, operator new, `__rust_alloc`… at the leaf.
    pub keep_allocator_frames: bool,
}

impl Profile {
    /// `stacks` are the interned locations of `dump.stacks`, in order.
    pub fn build(
        dump: &Dump,
        stacks: &[Vec<LocationId>],
        table: &LocationTable,
        options: BuildOptions,
    ) -> Profile {
        let mut samples = Vec::new();
        let (mut estimated, mut variance, mut sampled) = Default::default();
        for ((locations, thread), sums) in sum_by_stack(dump, stacks) {
            let sample = Sample {
                frames: frames_of(&locations, table, options.keep_allocator_frames),
                values: Values::estimates(&sums.live, &sums.alloc),
                variance: Values::variances(&sums.live, &sums.alloc),
                sampled: Values::sampled(&sums.raw),
                thread,
            };
            Values::add(&mut estimated, &sample.values);
            Values::add(&mut variance, &sample.variance);
            Values::add(&mut sampled, &sample.sampled);
            samples.push(sample);
        }
        Profile {
            samples,
            period: dump.sample_period(),
            estimated,
            variance,
            sampled,
            totals: dump.totals.clone(),
            origin: Origin {
                pid: dump.pid,
                executable: dump.executable.clone(),
                seq: dump.seq,
                time_unix_ns: dump.time_unix_ns,
            },
            threads: dump.threads.clone(),
        }
    }
}

/// Raw counts and weights per distinct location list and thread, in a
/// deterministic order (the sums are additive, so splitting by thread
/// changes no total).
fn sum_by_stack(
    dump: &Dump,
    stacks: &[Vec<LocationId>],
) -> BTreeMap<(Vec<LocationId>, u32), StackSums> {
    let mut sums: BTreeMap<(Vec<LocationId>, u32), StackSums> = BTreeMap::new();
    for (stack, locations) in dump.stacks.iter().zip(stacks) {
        sums.entry((locations.clone(), stack.thread))
            .or_default()
            .add(stack);
    }
    sums
}

/// Expand locations (leaf first) into function frames (leaf first,
/// inlined frames before their caller), dropping the allocator's own
/// frames at the leaf unless `keep_allocator`.
pub fn frames_of(
    locations: &[LocationId],
    table: &LocationTable,
    keep_allocator: bool,
) -> Vec<FrameRef> {
    let frames: Vec<FrameRef> = locations
        .iter()
        .flat_map(|&location| {
            let count = table.locations.get(location).map_or(0, |l| l.lines.len());
            (0..count).map(move |line| FrameRef { location, line })
        })
        .collect();
    if keep_allocator {
        return frames;
    }
    let allocator_frames = frames
        .iter()
        .take_while(|frame| is_allocator_frame(table, **frame))
        .count();
    // Never drop everything: a stack made only of allocator frames keeps its
    // outermost one.
    let keep_from = allocator_frames.min(frames.len().saturating_sub(1));
    frames[keep_from..].to_vec()
}

/// The symbolized line of a frame, `None` if the reference is stale.
pub fn line_of(table: &LocationTable, frame: FrameRef) -> Option<&Line> {
    table
        .locations
        .get(frame.location)
        .and_then(|location| location.lines.get(frame.line))
}

/// True if the frame is one of the allocator's own functions, by its full
/// name (whatever name style is shown).
pub fn is_allocator_frame(table: &LocationTable, frame: FrameRef) -> bool {
    line_of(table, frame).is_some_and(|line| is_allocator_function(&line.function))
}

/// The name a frame shows ("??" if the reference is stale): its display
/// name (see [`LocationTable::assign_display_names`]).
pub fn function_name(table: &LocationTable, frame: FrameRef) -> &str {
    line_of(table, frame).map_or("??", |line| line.display.as_str())
}

/// Exact names of allocator entry points (C, glibc, jemalloc).
const ALLOCATOR_NAMES: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "cfree",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "mallocx",
    "rallocx",
    "xallocx",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
    "__posix_memalign",
    "_int_malloc",
];

/// Prefixes of allocator functions and the allocation plumbing of Rust's and
/// C++'s standard libraries (like pprof's `drop_frames` for heap profiles).
const ALLOCATOR_PREFIXES: &[&str] = &[
    "operator new",
    "operator delete",
    "__rust_alloc",
    "__rust_realloc",
    "__rust_alloc_zeroed",
    "__rdl_",
    "__rg_",
    "alloc::alloc::",
    "alloc::raw_vec::",
    "<alloc::alloc::Global as core::alloc::",
    "<alloc::alloc::Global>::",
    "<alloc::raw_vec::",
    "alloc::boxed::box_new_uninit",
    "<std::alloc::System as core::alloc::",
    "std::alloc::",
    "std::sys::alloc::",
    "std::sys::pal::unix::alloc::",
    "__gnu_cxx::new_allocator<",
    "__gnu_cxx::__new_allocator<",
    "std::__new_allocator<",
    "std::allocator<",
    "std::allocator_traits<",
];

/// True for the allocator's own functions, dropped at the leaf by default.
pub fn is_allocator_function(name: &str) -> bool {
    ALLOCATOR_NAMES.contains(&name) || ALLOCATOR_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Make a function name safe as one folded-stack frame: `;` separates frames
/// and a line break ends the record.
pub fn folded_frame(name: &str) -> String {
    name.replace(';', ",").replace(['\n', '\r'], " ")
}

/// The folded key of a sample: frames root first, joined by `;`.
pub fn folded_key(sample: &Sample, table: &LocationTable) -> String {
    if sample.frames.is_empty() {
        return "[no frames]".to_string();
    }
    let names: Vec<String> = sample
        .frames
        .iter()
        .rev()
        .map(|&frame| folded_frame(function_name(table, frame)))
        .collect();
    names.join(";")
}

/// Metric value per folded stack (root first), summed over samples that
/// fold to the same names.
pub fn folded(profile: &Profile, table: &LocationTable, metric: Metric) -> BTreeMap<String, f64> {
    let mut stacks: BTreeMap<String, f64> = BTreeMap::new();
    for sample in &profile.samples {
        *stacks.entry(folded_key(sample, table)).or_default() += metric.of(&sample.values);
    }
    stacks
}

/// A stack's value in the base and in the new profile.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Change {
    pub base: f64,
    pub new: f64,
}

impl Change {
    /// new − base: positive means it grew.
    pub fn delta(&self) -> f64 {
        self.new - self.base
    }
}

/// Per folded stack, base and new values; stacks of either side appear, the
/// missing side is 0 (so a vanished stack has `new == 0`, a negative delta).
pub fn diff(base: &BTreeMap<String, f64>, new: &BTreeMap<String, f64>) -> BTreeMap<String, Change> {
    let mut changes: BTreeMap<String, Change> = BTreeMap::new();
    for (stack, &value) in base {
        changes.entry(stack.clone()).or_default().base = value;
    }
    for (stack, &value) in new {
        changes.entry(stack.clone()).or_default().new = value;
    }
    changes
}

/// Self and total value of one function.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FunctionValue {
    /// Value of stacks whose leaf is this function.
    pub self_value: f64,
    /// Value of stacks that contain this function (counted once per stack).
    pub total: f64,
    /// `self_value` with its variance and floor.
    pub self_estimate: Estimate,
    /// `total` with its variance and floor.
    pub total_estimate: Estimate,
}

/// Self and total value per function name.
pub fn function_values(
    profile: &Profile,
    table: &LocationTable,
    metric: Metric,
) -> HashMap<String, FunctionValue> {
    let mut functions: HashMap<String, FunctionValue> = HashMap::new();
    for sample in &profile.samples {
        let estimate = sample.estimate(metric);
        let mut seen: Vec<&str> = Vec::new();
        for (depth, &frame) in sample.frames.iter().enumerate() {
            let name = function_name(table, frame);
            let entry = functions.entry(name.to_string()).or_default();
            if depth == 0 {
                entry.self_estimate = entry.self_estimate.plus(&estimate);
                entry.self_value = entry.self_estimate.value;
            }
            if !seen.contains(&name) {
                seen.push(name);
                entry.total_estimate = entry.total_estimate.plus(&estimate);
                entry.total = entry.total_estimate.value;
            }
        }
    }
    functions
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn diff_signs_and_vanished_stacks() {
        let base = BTreeMap::from([("a;b".to_string(), 100.0), ("a;gone".to_string(), 40.0)]);
        let new = BTreeMap::from([("a;b".to_string(), 250.0), ("a;fresh".to_string(), 5.0)]);
        let changes = diff(&base, &new);
        assert_eq!(changes["a;b"].delta(), 150.0);
        assert_eq!(
            changes["a;gone"],
            Change {
                base: 40.0,
                new: 0.0
            }
        );
        assert_eq!(changes["a;gone"].delta(), -40.0);
        assert_eq!(changes["a;fresh"].delta(), 5.0);
    }

    #[test]
    fn allocator_functions() {
        for name in [
            "malloc",
            "calloc",
            "operator new(unsigned long)",
            "operator new[](unsigned long)",
            "__rust_alloc",
            "__rdl_alloc",
            "alloc::alloc::alloc",
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            "<alloc::alloc::Global>::alloc_impl_runtime",
            "<alloc::raw_vec::RawVecInner>::try_allocate_in",
            "std::sys::alloc::unix::<impl core::alloc::global::GlobalAlloc for std::alloc::System>::alloc",
        ] {
            assert!(is_allocator_function(name), "{name}");
        }
        for name in [
            "main",
            "malloc_wrapper",
            "strdup",
            "my::alloc::thing",
            "Vec::push",
        ] {
            assert!(!is_allocator_function(name), "{name}");
        }
    }

    #[test]
    fn folded_frames_are_sanitized() {
        assert_eq!(folded_frame("f<[u8; 4]>\nx"), "f<[u8, 4]> x");
    }

    /// A dump whose frames map to no module: names are raw addresses, which
    /// is enough to check stack merging, frame order and allocator dropping.
    fn unmapped_dump(stacks: Vec<Stack>) -> Dump {
        Dump {
            writer: "t".into(),
            pid: 1,
            executable: "/x".into(),
            command_line: vec![],
            time_unix_ns: 0,
            trigger: Trigger::Final,
            seq: 0,
            trigger_seq: 0,
            lg_sample_period: 0,
            config: String::new(),
            modules: Vec::<Module>::new(),
            threads: vec![],
            stacks,
            totals: Totals::default(),
        }
    }

    #[test]
    fn stacks_of_several_threads_stay_apart_and_fold_together_root_first() {
        let stack = |thread, objects| Stack {
            frames: vec![0x10, 0x20, 0x30],
            thread,
            live_objects: objects,
            live_bytes: objects * 8,
            alloc_objects: objects,
            alloc_bytes: objects * 8,
            live: heapsample_format::legacy_weights(objects, objects * 8, 1),
            alloc: heapsample_format::legacy_weights(objects, objects * 8, 1),
            ..Stack::default()
        };
        let dump = unmapped_dump(vec![stack(1, 2), stack(2, 3)]);
        let mut table = LocationTable::default();
        let stacks = table.intern_dump(&dump);
        table.symbolize(&Default::default(), &mut |w| panic!("{w}"));
        let profile = Profile::build(&dump, &stacks, &table, BuildOptions::default());
        assert_eq!(profile.samples.len(), 2, "one sample per thread");
        let threads: Vec<u32> = profile.samples.iter().map(|s| s.thread).collect();
        assert_eq!(threads, [1, 2]);
        let folded = folded(&profile, &table, Metric::InuseSpace);
        assert_eq!(folded.get("0x30;0x20;0x10"), Some(&40.0));
        assert_eq!(profile.estimated.inuse_objects, 5.0);
    }

    #[test]
    fn empty_stack_has_a_placeholder_frame() {
        let dump = unmapped_dump(vec![Stack {
            live_objects: 1,
            live_bytes: 8,
            live: heapsample_format::legacy_weights(1, 8, 1),
            ..Stack::default()
        }]);
        let mut table = LocationTable::default();
        let stacks = table.intern_dump(&dump);
        let profile = Profile::build(&dump, &stacks, &table, BuildOptions::default());
        assert_eq!(
            folded(&profile, &table, Metric::InuseSpace).get("[no frames]"),
            Some(&8.0)
        );
    }
}
