//! One estimate, its variance and its 95 % interval.
//!
//! ## The estimator
//!
//! The shim samples an allocation of `s` bytes with probability
//! `p = 1 − (1 − 1/R)^s ≈ 1 − exp(−s/R)`, `R` the mean sampling period.
//! Each sampled object is weighted by `1/p` (Horvitz–Thompson): a stack's
//! objects are estimated by Σ 1/p and its bytes by Σ s/p over its samples,
//! unbiased whatever the mix of sizes. Sampling decisions are independent
//! per allocation (the countdown is memoryless), so the variance of an
//! estimate is the sum over all allocations of `(1 − p)/p · y²` (y = 1 or
//! s), which Σ over the *sampled* ones of `(1 − p)/p² · y²` estimates
//! without bias. The shim keeps these four sums per stack
//! (`heapsample_format::Weights`); every sum over stacks (a function's self
//! and total value, the whole profile) is a sum of independent parts, so
//! its variance is the sum of theirs ([`Estimate::plus`]).
//!
//! ## Intervals
//!
//! `estimate ± 1.96 · sqrt(variance)` (normal approximation, good once a
//! value rests on a few tens of samples), with the low end never below what
//! was actually sampled (those objects certainly exist). With
//! `lg_prof_sample:0` every variance is 0 and the interval is the exact value.

/// The two-sided 95 % quantile of the standard normal distribution.
pub const Z95: f64 = 1.959_963_984_540_054;

/// An estimate with its variance and the least the truth can be.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// The Horvitz–Thompson estimate.
    pub value: f64,
    /// Its estimated variance.
    pub variance: f64,
    /// What the samples themselves add up to: a certain lower bound.
    pub floor: f64,
}

impl Estimate {
    /// The sum of two estimates over disjoint, independent samples.
    pub fn plus(&self, other: &Estimate) -> Estimate {
        Estimate {
            value: self.value + other.value,
            variance: self.variance + other.variance,
            floor: self.floor + other.floor,
        }
    }

    /// The standard error.
    pub fn standard_error(&self) -> f64 {
        self.variance.max(0.0).sqrt()
    }

    /// The 95 % interval.
    pub fn interval(&self) -> Interval {
        let half = Z95 * self.standard_error();
        Interval {
            estimate: self.value,
            low: (self.value - half).max(self.floor),
            high: self.value + half,
        }
    }
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

    #[test]
    fn interval_is_symmetric_above_the_floor() {
        let e = Estimate {
            value: 100.0,
            variance: 25.0,
            floor: 0.0,
        };
        let i = e.interval();
        assert!((i.low - (100.0 - Z95 * 5.0)).abs() < 1e-9);
        assert!((i.high - (100.0 + Z95 * 5.0)).abs() < 1e-9);
        let floored = Estimate { floor: 95.0, ..e }.interval();
        assert_eq!(floored.low, 95.0);
    }

    #[test]
    fn exact_values_have_point_intervals() {
        let e = Estimate {
            value: 7.0,
            variance: 0.0,
            floor: 7.0,
        };
        assert_eq!(
            e.interval(),
            Interval {
                estimate: 7.0,
                low: 7.0,
                high: 7.0
            }
        );
    }
}
