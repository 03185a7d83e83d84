//! One estimate, its variance and its 95 % interval.
//!
//! ## The estimator
//!
//! The shim samples an allocation of `s` bytes with probability
//! `p = 1 − (1 − 1/R)^s ≈ 1 − exp(−s/R)`, `R` the mean sampling period.
//! Each sampled object is weighted by `1/p` (Horvitz–Thompson): a stack's
//! objects are estimated by Ŷ = Σ 1/p and its bytes by Σ s/p over its
//! samples, unbiased whatever the mix of sizes. Sampling decisions are
//! independent per allocation (the countdown is memoryless), so the
//! variance of an estimate is the sum over all allocations of
//! `(1 − p)/p · y²` (y = 1 or s), which V̂ = Σ over the *sampled* ones of
//! `(1 − p)/p² · y²` estimates without bias. The shim keeps these four
//! sums per stack (`heapsample_format::Weights`); every sum over stacks (a
//! function's self and total value, the whole profile) is a sum of
//! independent parts, so its variance is the sum of theirs
//! ([`Estimate::plus`]).
//!
//! ## Intervals
//!
//! The low end is `Ŷ − 1.96·√V̂`, never below what was actually sampled
//! (those objects certainly exist). The high end is the larger of
//! `Ŷ + 1.96·√V̂` and Fay and Feuer's gamma limit (Statistics in Medicine
//! 16, 1997, for weighted sums of Poisson counts, which sampled sums are
//! when `p` is small): the 97.5 % point of the gamma law with the mean
//! `Ŷ + w` and variance `V̂ + w²` of the estimate with one more unseen
//! unit of weight `w`, i.e. shape `(Ŷ + w)²/(V̂ + w²)` (an effective
//! number of samples) and scale `(V̂ + w²)/(Ŷ + w)` (the weight scale).
//! On many samples both high ends agree; on few, the sum is skewed to the
//! right and the gamma limit is the honest one (one sample of weight `w`
//! gives `[floor, 5.6·w]`, no sample `[0, 3.7·w]`, the exact Poisson limits).
//! The unseen unit is the weight scale of the samples themselves,
//! `w = V̂ / (Ŷ − floor)` = Σ y²(1 − p)/p² / Σ y(1 − p)/p, the mean weight
//! of the samples, each counted by how much of it stands for unsampled
//! objects (a sample taken with p ≈ 1 stands for nothing unseen, and adds
//! nothing) — one more unseen object like those sampled. A sum over stacks
//! takes the largest of its stacks' scales ([`Estimate::scale`]), as Fay and
//! Feuer take the largest weight: a few heavy samples (50,000 `malloc(0)`
//! at one sample in 16,384) among many light ones leave the pooled mean
//! weight far below what one more unseen heavy object would add. For bytes it is
//! at least [`Sampling::unseen_bytes`] (≈ R): any value may miss small
//! allocations sampled less than once, whose bytes come in units of R (an
//! allocation of `s` bytes weighs `s/p(s)` ≥ R; the HT byte sum is less
//! dispersed than R times a Poisson count of the bytes). Object counts
//! that objects never sampled could dominate are marked instead
//! ([`Estimate::low_confidence`], see [`super::sampling`]).
//!
//! The gamma law's lower 2.5 % point is never below the normal low end
//! (its lower tail is the shorter one), so the low end stays the normal
//! one. With `lg_prof_sample:0` every variance and every unseen unit is 0
//! and the interval is the exact value.

pub use super::quantile::Z95;
use super::quantile::upper_point;
use super::sampling::{Sampling, Unit};

/// An estimate with its variance, the least the truth can be, and how its
/// samples were drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The Horvitz–Thompson estimate.
    pub value: f64,
    /// Its estimated variance.
    pub variance: f64,
    /// What the samples themselves add up to: a certain lower bound.
    pub floor: f64,
    /// The largest weight scale of the parts this is a sum of (0 for one
    /// part: its own scale, [`Estimate::weight_scale`], is used).
    pub scale: f64,
    pub sampling: Sampling,
}

impl Estimate {
    /// The estimate of one part (its weight scale its own): `value` with
    /// `variance`, of which `floor` was sampled.
    pub fn of_part(value: f64, variance: f64, floor: f64, sampling: Sampling) -> Estimate {
        Estimate {
            value,
            variance,
            floor,
            scale: 0.0,
            sampling,
        }
    }

    /// Nothing sampled.
    pub fn zero(sampling: Sampling) -> Estimate {
        Estimate {
            value: 0.0,
            variance: 0.0,
            floor: 0.0,
            scale: 0.0,
            sampling,
        }
    }

    /// The sum of two estimates over disjoint, independent samples.
    pub fn plus(&self, other: &Estimate) -> Estimate {
        Estimate {
            value: self.value + other.value,
            variance: self.variance + other.variance,
            floor: self.floor + other.floor,
            scale: self.weight_scale().max(other.weight_scale()),
            sampling: self.sampling.widest(other.sampling),
        }
    }

    /// The estimate over the samples of `self` that are not in `other`,
    /// when `other`'s samples are a subset of `self`'s (a cumulative sum
    /// of an earlier dump of the same process).
    pub fn minus(&self, other: &Estimate) -> Estimate {
        Estimate {
            value: self.value - other.value,
            variance: (self.variance - other.variance).max(0.0),
            floor: (self.floor - other.floor).max(0.0),
            // The stacks' scales, if sums; else the difference's own.
            scale: self.scale.max(other.scale),
            sampling: self.sampling.widest(other.sampling),
        }
    }

    /// The standard error.
    pub fn standard_error(&self) -> f64 {
        self.variance.max(0.0).sqrt()
    }

    /// The weight of the unseen unit of the upper limit (see the module
    /// documentation); `None` for an object count with no samples, whose
    /// scale only other estimates of the same thing can tell.
    pub fn unseen_weight(&self) -> Option<f64> {
        if self.sampling.samples_everything() {
            return Some(0.0);
        }
        let scale = self.weight_scale();
        match self.sampling.unit {
            Unit::Bytes => Some(scale.max(self.sampling.unseen_bytes)),
            Unit::Objects if self.value > 0.0 => Some(scale),
            Unit::Objects => None,
        }
    }

    /// Σ y²(1 − p)/p² over Σ y(1 − p)/p: the mean weight of the samples,
    /// each counted by how much of it stands for objects not sampled; for a
    /// sum, the largest of its parts' ([`Estimate::scale`]).
    pub fn weight_scale(&self) -> f64 {
        let unsampled = self.value - self.floor;
        let own = if unsampled > 0.0 {
            self.variance.max(0.0) / unsampled
        } else {
            0.0
        };
        own.max(self.scale)
    }

    /// The 95 % interval.
    pub fn interval(&self) -> Interval {
        self.interval_with(self.unseen_weight().unwrap_or(0.0))
    }

    /// The 95 % interval with `unseen` as the weight of the unseen unit.
    pub fn interval_with(&self, unseen: f64) -> Interval {
        let half = Z95 * self.standard_error();
        let value = self.value;
        Interval {
            estimate: value,
            low: (value - half).max(self.floor),
            high: (value + half).max(gamma_high(value, self.variance, unseen)),
        }
    }

    /// True when the value may be dominated by objects too small to be
    /// sampled (see [`super::sampling`]): its interval does not hold.
    pub fn low_confidence(&self) -> bool {
        self.value < self.sampling.low_confidence_below
    }
}

/// Fay and Feuer's upper limit for `value` with `variance`, one more unit
/// of weight `unseen` added.
fn gamma_high(value: f64, variance: f64, unseen: f64) -> f64 {
    let mean = value.max(0.0) + unseen.max(0.0);
    let spread = variance.max(0.0) + unseen * unseen;
    if !(mean > 0.0 && spread > 0.0 && mean.is_finite() && spread.is_finite()) {
        return value;
    }
    let scale = spread / mean;
    upper_point(mean / scale) * scale
}

/// An estimate and its 95 % interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// True when the interval excludes 0 (for a change: it is not noise).
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{ContinuousCDF, Gamma};

    fn bytes(value: f64, variance: f64, floor: f64, period: f64) -> Estimate {
        Estimate {
            value,
            variance,
            floor,
            scale: 0.0,
            sampling: Sampling::of(period, Unit::Bytes),
        }
    }

    #[test]
    fn many_samples_give_the_normal_interval() {
        // 10,000 samples of small objects at R = 2^10: Ŷ = 10⁴·R, V̂ = 10⁴·R².
        let r = 1024.0;
        let e = bytes(1e4 * r, 1e4 * r * r, 1e4, r);
        let i = e.interval();
        assert!((i.low / (1e4 * r - Z95 * 100.0 * r) - 1.0).abs() < 1e-12);
        // The high end: normal, plus the unseen unit and the Poisson skew
        // ((z² − 1)/3 units): about two units.
        let normal_high = 1e4 * r + Z95 * 100.0 * r;
        assert!(
            i.high > normal_high + 1.5 * r && i.high < normal_high + 2.5 * r,
            "{i:?}"
        );
    }

    #[test]
    fn few_samples_give_the_poisson_limits() {
        let r = 1u64 << 19;
        let sampling = Sampling::of(r as f64, Unit::Bytes);
        let w = sampling.unseen_bytes;
        // Nothing sampled: [0, −ln(0.025)·w], the Poisson limit of 0 events.
        let none = Estimate::zero(sampling).interval();
        assert_eq!(none.low, 0.0);
        assert!(
            (none.high / w - 3.688_879_454_113_936).abs() < 1e-9,
            "{none:?}"
        );
        // One small sample of weight w (p ≈ 0): the limit of one event with
        // an unseen unit of about w, Gamma(2)'s 97.5 % point 5.57·w.
        let one = bytes(w, w * w, 64.0, r as f64).interval();
        assert_eq!(one.low, 64.0);
        let ratio = one.high / w / 5.571_643_390_938_897;
        assert!((ratio - 1.0).abs() < 1e-3, "{one:?}");
    }

    #[test]
    fn object_counts_scale_with_their_own_weights() {
        // Three objects sampled with p = 1/256: weight 256 each.
        let p = 1.0 / 256.0;
        let e = Estimate {
            value: 3.0 / p,
            variance: 3.0 * (1.0 - p) / (p * p),
            floor: 3.0,
            scale: 0.0,
            sampling: Sampling::of(16384.0, Unit::Objects),
        };
        // Σ w²(1 − p) / Σ w(1 − p) = w = 256.
        let w = e.unseen_weight().unwrap();
        assert!((w - 256.0).abs() < 1e-9, "{w}");
        let i = e.interval();
        assert!(i.high > 768.0 + Z95 * e.standard_error());
        assert!(e.low_confidence(), "768 objects at lg 14 are below 6,135");
        // Exactly known huge objects: a point interval, marked all the same.
        let exact = Estimate {
            value: 3.0,
            variance: 0.0,
            floor: 3.0,
            ..e
        };
        assert_eq!(exact.interval().high, 3.0);
        assert!(exact.low_confidence());
        assert_eq!(Estimate::zero(e.sampling).unseen_weight(), None);
    }

    #[test]
    fn exact_values_have_point_intervals() {
        let e = Estimate {
            value: 7.0,
            variance: 0.0,
            floor: 7.0,
            scale: 0.0,
            sampling: Sampling::exact(Unit::Objects),
        };
        assert_eq!(
            e.interval(),
            Interval {
                estimate: 7.0,
                low: 7.0,
                high: 7.0
            }
        );
        assert!(!e.low_confidence());
    }

    /// The module documentation's claim: the gamma law's lower 2.5 % point
    /// is above mean − 1.96·sd, so the normal low end is the lower one.
    #[test]
    fn the_gamma_lower_point_is_above_the_normal_low_end() {
        for shape in [1.0, 1.5, 3.0, 10.0, 100.0, 1e3, 1e5] {
            let lower = Gamma::new(shape, 1.0).unwrap().inverse_cdf(0.025);
            assert!(lower > shape - Z95 * shape.sqrt(), "{shape}: {lower}");
        }
    }

    /// Coverage of the intervals, simulated: Bernoulli sampling of
    /// mixtures of sizes, each interval checked against the truth.
    #[test]
    fn simulated_coverage() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let r = 16384.0;
        // (size, count): few small samples, a spread, a mix with huge ones.
        let cells: [&[(f64, f64)]; 4] = [
            &[(1024.0, 48.0)],
            &[(64.0, 2000.0)],
            &[(512.0, 300.0), (65536.0, 300.0), (4096.0, 300.0)],
            &[(100.0, 2000.0), (1048576.0, 10.0)],
        ];
        for cell in cells {
            let truth: f64 = cell.iter().map(|(s, n)| s * n).sum();
            let (mut runs, mut covered) = (0, 0);
            for _ in 0..4000 {
                let mut e = Estimate::zero(Sampling::of(r, Unit::Bytes));
                for &(size, count) in cell {
                    let p = 1.0 - (1.0 - 1.0 / r).powf(size);
                    for _ in 0..count as usize {
                        if uniform() < p {
                            e = e.plus(&bytes(
                                size / p,
                                size * size * (1.0 - p) / (p * p),
                                size,
                                r,
                            ));
                        }
                    }
                }
                runs += 1;
                let i = e.interval();
                covered += usize::from(i.low <= truth && truth <= i.high);
            }
            // A calibrated interval covers 95 %; 4000 runs put its count
            // within ±1.4 points (4 standard errors) of the truth.
            let rate = covered as f64 / runs as f64;
            assert!(rate >= 0.935, "{cell:?}: {rate}");
        }
    }
}
