//! Lifetimes per allocating function and per stack: the freed objects and
//! bytes per lifetime bucket, and the temporary allocations among them,
//! each an estimate with its 95 % interval.
//!
//! Owns the rows of the lifetime report; a function is the stack's leaf
//! (the function that allocated, allocator frames dropped), so each freed
//! sample counts in one row. The freed samples' weights are cumulative sums
//! like the allocation sums, so every estimate is unbiased and exact at
//! `lg_prof_sample:0`. No I/O.

use crate::model::folding::folded_key;
use crate::model::time::temporary_buckets;
use crate::model::{Metric, Profile, ProgramFrames, Sample, leaf_name};
use crate::stats::{Estimate, Sampling, Unit};
use crate::symbols::LocationTable;
use heapsample_format::{LifetimeBucket, Weights, bucket_bounds_ns};
use std::collections::BTreeMap;

/// An objects and a bytes estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Amount {
    pub objects: Estimate,
    pub bytes: Estimate,
}

impl Amount {
    /// Nothing, sampled with a mean period of `period` bytes.
    pub fn zero(period: u64) -> Amount {
        Amount {
            objects: Estimate::zero(sampling(period, Unit::Objects)),
            bytes: Estimate::zero(sampling(period, Unit::Bytes)),
        }
    }

    /// The estimates of `weights` over `samples` sampled objects of
    /// `sampled_bytes` bytes (their floors), sampled with a mean period of
    /// `period` bytes.
    pub fn of(weights: &Weights, samples: u64, sampled_bytes: u64, period: u64) -> Amount {
        Amount {
            objects: Estimate::of_part(
                weights.objects,
                weights.objects_variance,
                samples as f64,
                sampling(period, Unit::Objects),
            ),
            bytes: Estimate::of_part(
                weights.bytes,
                weights.bytes_variance,
                sampled_bytes as f64,
                sampling(period, Unit::Bytes),
            ),
        }
    }

    /// The sum of two amounts over disjoint samples.
    pub fn plus(&self, other: &Amount) -> Amount {
        Amount {
            objects: self.objects.plus(&other.objects),
            bytes: self.bytes.plus(&other.bytes),
        }
    }
}

fn sampling(period: u64, unit: Unit) -> Sampling {
    Sampling::of(period as f64, unit)
}

/// The freed objects of one lifetime bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketAmount {
    /// The bucket (`heapsample_format::lifetime_bucket`).
    pub bucket: u8,
    /// Its lifetimes, `[low, high)` ns; `high` None for the last bucket.
    pub low_ns: u64,
    pub high_ns: Option<u64>,
    pub freed: Amount,
}

/// The lifetimes of one function (or stack).
#[derive(Clone, Debug, PartialEq)]
pub struct LifetimeRow {
    /// The function, or the stack's functions root first joined by `;`.
    pub name: String,
    /// Everything freed.
    pub freed: Amount,
    /// Freed within the temporary threshold.
    pub temporary: Amount,
    /// The non-empty buckets, shortest lifetimes first.
    pub buckets: Vec<BucketAmount>,
    /// The program's own function that called into it, where most of its
    /// allocations were made ([`crate::model::program_frame()`]); rows per
    /// function only.
    pub program_frame: Option<String>,
}

/// One row per allocating function, most objects freed first.
pub fn function_lifetimes(profile: &Profile, table: &LocationTable) -> Vec<LifetimeRow> {
    let key = |sample: &Sample| leaf_name(sample, table).to_string();
    let program = ProgramFrames::of(profile, table, Metric::AllocObjects, key);
    let mut rows = rows(profile, key);
    for row in &mut rows {
        row.program_frame = program.get(&row.name).map(str::to_string);
    }
    rows
}

/// One row per stack (root first), most objects freed first.
pub fn stack_lifetimes(profile: &Profile, table: &LocationTable) -> Vec<LifetimeRow> {
    rows(profile, |sample| folded_key(sample, table))
}

fn rows(profile: &Profile, key: impl Fn(&Sample) -> String) -> Vec<LifetimeRow> {
    let mut sums: BTreeMap<String, Vec<LifetimeBucket>> = BTreeMap::new();
    for sample in profile.samples.iter().filter(|s| !s.lifetimes.is_empty()) {
        let entry = sums.entry(key(sample)).or_default();
        crate::model::time::add_lifetimes(entry, &sample.lifetimes);
    }
    let temporary = temporary_buckets(profile.time.temporary_ns);
    let mut rows: Vec<LifetimeRow> = sums
        .into_iter()
        .map(|(name, buckets)| row(name, &buckets, temporary, profile.period))
        .collect();
    super::largest_first(&mut rows, |r| r.freed.objects.value, |r| &r.name);
    rows
}

fn row(name: String, buckets: &[LifetimeBucket], temporary: usize, period: u64) -> LifetimeRow {
    let amount = |b: &LifetimeBucket| Amount::of(&b.weights, b.samples, b.sampled_bytes, period);
    let mut freed = Amount::zero(period);
    let mut temp = Amount::zero(period);
    let mut amounts = Vec::with_capacity(buckets.len());
    for bucket in buckets {
        let (low_ns, high_ns) = bucket_bounds_ns(usize::from(bucket.bucket)).unwrap_or((0, None));
        freed = freed.plus(&amount(bucket));
        if usize::from(bucket.bucket) < temporary {
            temp = temp.plus(&amount(bucket));
        }
        amounts.push(BucketAmount {
            bucket: bucket.bucket,
            low_ns,
            high_ns,
            freed: amount(bucket),
        });
    }
    LifetimeRow {
        name,
        freed,
        temporary: temp,
        buckets: amounts,
        program_frame: None,
    }
}
