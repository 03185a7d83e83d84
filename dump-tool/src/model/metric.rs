//! What a report measures: the [`Metric`]s and the per-stack [`Values`]
//! they read.
//!
//! Owns the metric names and units and the mapping from a stack's recorded
//! weights to values. Plain data; no I/O.

use crate::stats::{Accumulation, Unit};
use heapsample_format::Weights;

/// What a flamegraph's widths and a report's numbers measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// Bytes of temporary allocations: freed within the threshold
    /// (`--temporary`), cumulative.
    TempSpace,
    /// Temporary allocations (objects freed within the threshold).
    TempObjects,
}

impl Metric {
    /// The metrics every dump has, in the order of the viewer's and the
    /// JSON report's.
    pub const ALL: [Metric; 4] = [
        Metric::InuseSpace,
        Metric::InuseObjects,
        Metric::AllocSpace,
        Metric::AllocObjects,
    ];

    /// The metrics of dumps that carry lifetimes (format 4).
    pub const TEMPORARY: [Metric; 2] = [Metric::TempSpace, Metric::TempObjects];

    /// Every metric: [`Metric::ALL`], then [`Metric::TEMPORARY`].
    pub const EVERY: [Metric; 6] = [
        Metric::InuseSpace,
        Metric::InuseObjects,
        Metric::AllocSpace,
        Metric::AllocObjects,
        Metric::TempSpace,
        Metric::TempObjects,
    ];

    /// The value of this metric in `values`.
    pub fn of(self, values: &Values) -> f64 {
        match self {
            Metric::InuseSpace => values.inuse_space,
            Metric::InuseObjects => values.inuse_objects,
            Metric::AllocSpace => values.alloc_space,
            Metric::AllocObjects => values.alloc_objects,
            Metric::TempSpace => values.temp_space,
            Metric::TempObjects => values.temp_objects,
        }
    }

    /// `bytes` or `objects`.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::InuseSpace | Metric::AllocSpace | Metric::TempSpace => "bytes",
            Metric::InuseObjects | Metric::AllocObjects | Metric::TempObjects => "objects",
        }
    }

    /// What it counts, for the estimator.
    pub fn counted(self) -> Unit {
        match self {
            Metric::InuseSpace | Metric::AllocSpace | Metric::TempSpace => Unit::Bytes,
            Metric::InuseObjects | Metric::AllocObjects | Metric::TempObjects => Unit::Objects,
        }
    }

    /// The command-line spelling, e.g. `inuse-space`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::InuseSpace => "inuse-space",
            Metric::InuseObjects => "inuse-objects",
            Metric::AllocSpace => "alloc-space",
            Metric::AllocObjects => "alloc-objects",
            Metric::TempSpace => "temp-space",
            Metric::TempObjects => "temp-objects",
        }
    }

    /// What it measures, in a few words (the command line's help).
    pub fn description(self) -> &'static str {
        match self {
            Metric::InuseSpace => "Bytes still live at the dump",
            Metric::InuseObjects => "Objects still live at the dump",
            Metric::AllocSpace => "Bytes ever allocated",
            Metric::AllocObjects => "Objects ever allocated",
            Metric::TempSpace => "Bytes of temporary allocations (freed within --temporary)",
            Metric::TempObjects => "Temporary allocations (freed within --temporary)",
        }
    }

    /// Whether its sums hold what is live or everything ever sampled.
    pub fn accumulation(self) -> Accumulation {
        match self {
            Metric::InuseSpace | Metric::InuseObjects => Accumulation::InUse,
            Metric::AllocSpace | Metric::AllocObjects | Metric::TempSpace | Metric::TempObjects => {
                Accumulation::Cumulative
            }
        }
    }

    /// True for the metrics of what is live at the dump.
    pub fn is_in_use(self) -> bool {
        self.accumulation() == Accumulation::InUse
    }
}

/// Estimated (corrected) counts of one stack or of a whole profile.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Values {
    pub inuse_objects: f64,
    pub inuse_space: f64,
    pub alloc_objects: f64,
    pub alloc_space: f64,
    pub temp_objects: f64,
    pub temp_space: f64,
}

impl Values {
    /// The estimates of a live, a cumulative and a temporary set of
    /// weights.
    pub fn estimates(live: &Weights, alloc: &Weights, temp: &Weights) -> Values {
        Values {
            inuse_objects: live.objects,
            inuse_space: live.bytes,
            alloc_objects: alloc.objects,
            alloc_space: alloc.bytes,
            temp_objects: temp.objects,
            temp_space: temp.bytes,
        }
    }

    /// The variances of [`Values::estimates`].
    pub fn variances(live: &Weights, alloc: &Weights, temp: &Weights) -> Values {
        Values {
            inuse_objects: live.objects_variance,
            inuse_space: live.bytes_variance,
            alloc_objects: alloc.objects_variance,
            alloc_space: alloc.bytes_variance,
            temp_objects: temp.objects_variance,
            temp_space: temp.bytes_variance,
        }
    }

    /// Raw sampled counts as values: what the samples themselves add up to.
    pub fn sampled(raw: &RawCounts) -> Values {
        Values {
            inuse_objects: raw.live_objects as f64,
            inuse_space: raw.live_bytes as f64,
            alloc_objects: raw.alloc_objects as f64,
            alloc_space: raw.alloc_bytes as f64,
            temp_objects: raw.temp_objects as f64,
            temp_space: raw.temp_bytes as f64,
        }
    }

    /// Add `other` field by field.
    pub fn add(&mut self, other: &Values) {
        self.inuse_objects += other.inuse_objects;
        self.inuse_space += other.inuse_space;
        self.alloc_objects += other.alloc_objects;
        self.alloc_space += other.alloc_space;
        self.temp_objects += other.temp_objects;
        self.temp_space += other.temp_space;
    }
}

/// Raw sampled counts of one call stack, summed over threads and epochs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawCounts {
    pub live_objects: u64,
    pub live_bytes: u64,
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
    pub temp_objects: u64,
    pub temp_bytes: u64,
}

impl RawCounts {
    pub fn add(&mut self, stack: &heapsample_format::Stack) {
        self.live_objects = self.live_objects.saturating_add(stack.live_objects);
        self.live_bytes = self.live_bytes.saturating_add(stack.live_bytes);
        self.alloc_objects = self.alloc_objects.saturating_add(stack.alloc_objects);
        self.alloc_bytes = self.alloc_bytes.saturating_add(stack.alloc_bytes);
    }
}
