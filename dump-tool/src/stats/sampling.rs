//! What the sampling period lets a report know: the weight an unseen
//! allocation would have had, the detection limit, and below which count
//! an object count cannot be known from the samples.
//!
//! ## Detection limit
//!
//! The sampler draws the bytes until the next sample from a geometric law
//! of mean `R`, so `B` bytes go by without a sample with probability
//! `(1 − 1/R)^B`, however they are split into allocations. Allocations
//! totalling `B₅ = ln 20 / −ln(1 − 1/R) ≈ R·ln 20` bytes (3·R) are missed
//! with probability 5 %: a function absent from a report allocated less
//! than `B₅` with 95 % confidence, and no estimate can say more about
//! allocations smaller than that. For objects the limit depends on their
//! size: `B₅/s` objects of `s` bytes go unseen with probability 5 %.
//!
//! ## Low confidence (object counts)
//!
//! An object count below `B₅/8` (the 8-byte objects that can go unseen,
//! 8 bytes being the smallest block of jemalloc and tcmalloc and the
//! alignment of every allocator) could be dominated by objects too small
//! to be sampled even once per run: no interval computed from the samples
//! holds for it (a run that samples none of them cannot know they exist),
//! so it is marked low-confidence instead. Byte counts need no mark: their
//! intervals include what small unseen allocations can add
//! ([`Sampling::unseen_bytes`], see [`super::estimate`]).
//!
//! Pure arithmetic.

use serde::{Deserialize, Serialize};

/// `ln 20`: `−ln` of the 5 % chance of missing everything.
const LN_20: f64 = 2.995_732_273_553_991;

/// The size of the objects an object count's detection limit and
/// low-confidence mark are stated for.
pub const SMALL_OBJECT_BYTES: f64 = 8.0;

/// What an estimate counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Bytes,
    Objects,
}

/// How the samples behind an estimate were drawn, as the numbers the
/// intervals and the mark need (the viewer gets them precomputed, in this
/// form).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub unit: Unit,
    /// The bytes one unseen small allocation stands for,
    /// `1 / −ln(1 − 1/R)` (≈ R − ½): the weight of an extra unseen unit in
    /// a byte count's upper limit. 0 when every allocation is sampled.
    pub unseen_bytes: f64,
    /// Object counts below this are low-confidence (`B₅/8`); 0 for bytes
    /// and when every allocation is sampled.
    pub low_confidence_below: f64,
}

impl Sampling {
    /// Sampling with a mean period of `period` bytes (1 or less: every
    /// allocation sampled, exact).
    pub fn of(period: f64, unit: Unit) -> Sampling {
        let unseen_bytes = smallest_byte_weight(period);
        let low_confidence_below = match unit {
            Unit::Objects => LN_20 * unseen_bytes / SMALL_OBJECT_BYTES,
            Unit::Bytes => 0.0,
        };
        Sampling {
            unit,
            unseen_bytes,
            low_confidence_below,
        }
    }

    /// Every allocation was sampled.
    pub fn exact(unit: Unit) -> Sampling {
        Sampling::of(1.0, unit)
    }

    /// The sampling of a sum of estimates drawn with `self` and `other`:
    /// the weaker of the two.
    pub fn widest(self, other: Sampling) -> Sampling {
        Sampling {
            unit: self.unit,
            unseen_bytes: self.unseen_bytes.max(other.unseen_bytes),
            low_confidence_below: self.low_confidence_below.max(other.low_confidence_below),
        }
    }

    /// True when every allocation is sampled (the values are exact).
    pub fn samples_everything(&self) -> bool {
        self.unseen_bytes == 0.0
    }

    /// The detection limit in bytes, `B₅` (see the module documentation).
    pub fn detection_limit_bytes(&self) -> f64 {
        LN_20 * self.unseen_bytes
    }

    /// The detection limit in this estimate's unit: `B₅` bytes, or `B₅/8`
    /// objects of 8 bytes (`B₅/s` of `s` bytes).
    pub fn detection_limit(&self) -> f64 {
        match self.unit {
            Unit::Bytes => self.detection_limit_bytes(),
            Unit::Objects => self.detection_limit_bytes() / SMALL_OBJECT_BYTES,
        }
    }
}

/// The detection limit of objects of `size` bytes under `law`: the fewest
/// such objects of which at least one is sampled with probability ≥ 95 %,
/// `⌈ln 20 / −ln q(s)⌉` with `q(s) = (1 − 1/R)^u(s)` the chance that one is
/// not ([`heapsample_format::SamplingLaw::keep_probability`]; `u(s)` is the
/// size plus the countdown's bytes per call, so even `malloc(0)` counts).
/// A function that allocated fewer may be absent from a report; 1 when
/// every allocation is sampled.
pub fn objects_seen_95(law: heapsample_format::SamplingLaw, size: u64) -> f64 {
    let keep = law.keep_probability(size);
    if law.samples_everything() || keep <= 0.0 || keep >= 1.0 {
        return 1.0;
    }
    (LN_20 / -keep.ln()).ceil()
}

/// `1 / −ln(1 − 1/R)`: the limit of `s/p(s)` for small `s`, 0 for `R ≤ 1`.
fn smallest_byte_weight(period: f64) -> f64 {
    if period.is_nan() || period <= 1.0 {
        return 0.0;
    }
    -1.0 / (-1.0 / period).ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detection_limit_is_missed_with_five_percent() {
        for lg in [10, 14, 19] {
            let period = (1u64 << lg) as f64;
            let sampling = Sampling::of(period, Unit::Bytes);
            let limit = sampling.detection_limit_bytes();
            // (1 − 1/R)^B = 0.05.
            let missed = (1.0 - 1.0 / period).powf(limit);
            assert!((missed - 0.05).abs() < 1e-9, "lg {lg}: {missed}");
            assert!((limit / period / LN_20 - 1.0).abs() < 1e-3);
            let objects = Sampling::of(period, Unit::Objects);
            assert_eq!(objects.detection_limit(), limit / 8.0);
            assert_eq!(objects.low_confidence_below, limit / 8.0);
            assert_eq!(sampling.low_confidence_below, 0.0);
        }
        // lg 14: 49,081 bytes, 6,135 objects of 8 bytes.
        let lg14 = Sampling::of(16384.0, Unit::Objects);
        assert_eq!(lg14.detection_limit_bytes().round(), 49081.0);
        assert_eq!(lg14.detection_limit().round(), 6135.0);
    }

    #[test]
    fn the_limit_per_object_size_follows_the_law() {
        let law = heapsample_format::SamplingLaw::with_bytes_per_call(16384, 1);
        for size in [0u64, 8, 100, 4096, 1 << 20] {
            let n = objects_seen_95(law, size);
            let missed = |n: f64| law.keep_probability(size).powf(n);
            assert!(missed(n) <= 0.05, "{size}: {n}");
            assert!(
                n == 1.0 || missed(n - 1.0) > 0.05,
                "{size}: {n} is the fewest"
            );
        }
        // malloc(0) counts one unit: 9 times the 8-byte objects' limit.
        assert_eq!(objects_seen_95(law, 0), 49081.0);
        assert_eq!(objects_seen_95(law, 8), 5454.0);
        let every = heapsample_format::SamplingLaw::with_bytes_per_call(1, 1);
        assert_eq!(objects_seen_95(every, 0), 1.0);
    }

    #[test]
    fn every_allocation_sampled_is_exact() {
        for period in [1.0, 0.0, f64::NAN] {
            let sampling = Sampling::of(period, Unit::Objects);
            assert!(sampling.samples_everything());
            assert_eq!(sampling.detection_limit(), 0.0);
            assert_eq!(sampling.low_confidence_below, 0.0);
        }
        let exact = Sampling::exact(Unit::Bytes);
        let sparse = Sampling::of(1024.0, Unit::Bytes);
        assert_eq!(exact.widest(sparse), sparse);
    }
}
