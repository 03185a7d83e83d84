//! Estimates, their 95 % intervals, and the intervals of a difference
//! between two dumps.
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
//! its variance is the sum of theirs.
//!
//! ## Intervals
//!
//! `estimate ± 1.96 · sqrt(variance)` (normal approximation, good once a
//! value rests on a few tens of samples), with the low end never below what
//! was actually sampled (those objects certainly exist). With
//! `lg_prof_sample:0` every variance is 0 and the interval is the exact value.
//!
//! ## Differences
//!
//! Two dumps of one process share samples. Cumulative (alloc) sums of a
//! later dump contain the earlier dump's samples exactly, so when the pair
//! is one process with no reset in between ([`Pairing::SameProcess`]) the
//! delta is the sum over the samples taken in between and its variance is
//! `var(new) − var(base)`. In-use sums share the samples still live in
//! both; the delta's variance is `var(new) + var(base) − 2·var(shared)`, and
//! since the shared part is not recorded, heapdiff uses
//! `var(new) + var(base)`, which is never smaller: in-use intervals of a
//! delta are conservative (a little too wide), never too narrow. Dumps of
//! different processes are independent: `var(new) + var(base)`, exactly.
//! A change is *significant* when its interval excludes 0.

use crate::profile::{FunctionValue, Metric, Profile, function_values};
use crate::symbolize::LocationTable;
use std::collections::{BTreeSet, HashMap};

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

/// How the samples of a base and a new dump relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairing {
    /// Different processes (or a reset in between): independent samples.
    Independent,
    /// The base is an earlier dump of the same process with no reset in
    /// between: the new cumulative sums contain the base's samples.
    SameProcess,
}

impl Pairing {
    /// Decide from the profiles' origins: same pid and executable, the base
    /// written first (sequence number, time), the same number of resets,
    /// and cumulative counters that did not go down.
    pub fn of(base: &Profile, new: &Profile) -> Pairing {
        let (b, n) = (&base.origin, &new.origin);
        let (bt, nt) = (&base.totals, &new.totals);
        let same = b.pid == n.pid
            && b.executable == n.executable
            && base.period == new.period
            && b.seq < n.seq
            && b.time_unix_ns <= n.time_unix_ns
            && bt.resets == nt.resets
            && bt.samples_taken <= nt.samples_taken
            && bt.bytes_allocated <= nt.bytes_allocated
            && bt.allocations <= nt.allocations;
        if same {
            Pairing::SameProcess
        } else {
            Pairing::Independent
        }
    }
}

/// The change of one value from a base to a new dump.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Delta {
    pub base: Estimate,
    pub new: Estimate,
    /// The variance of `new − base`.
    pub variance: f64,
}

impl Delta {
    /// The change of `metric` between `base` and `new`, see the module
    /// documentation for the variance.
    pub fn between(base: Estimate, new: Estimate, metric: Metric, pairing: Pairing) -> Delta {
        let nested = pairing == Pairing::SameProcess
            && matches!(metric, Metric::AllocSpace | Metric::AllocObjects)
            && new.variance >= base.variance
            && new.value >= base.value;
        let variance = if nested {
            new.variance - base.variance
        } else {
            new.variance + base.variance
        };
        Delta {
            base,
            new,
            variance,
        }
    }

    /// new − base.
    pub fn value(&self) -> f64 {
        self.new.value - self.base.value
    }

    /// The 95 % interval of the change.
    pub fn interval(&self) -> Interval {
        let half = Z95 * self.variance.max(0.0).sqrt();
        let value = self.value();
        Interval {
            estimate: value,
            low: value - half,
            high: value + half,
        }
    }

    /// True when the change is not explained by sampling noise.
    pub fn significant(&self) -> bool {
        self.interval().excludes_zero()
    }
}

/// How one function changed between two profiles.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionChange {
    pub name: String,
    /// Change of its self value (stacks whose leaf it is).
    pub self_change: Delta,
    /// Change of its total value (stacks that contain it).
    pub total_change: Delta,
}

/// Every function of either profile with its changes of `metric`, by name.
pub fn function_changes(
    base: &Profile,
    new: &Profile,
    table: &LocationTable,
    metric: Metric,
) -> Vec<FunctionChange> {
    let pairing = Pairing::of(base, new);
    let base_functions = function_values(base, table, metric);
    let new_functions = function_values(new, table, metric);
    let names: BTreeSet<&String> = base_functions.keys().chain(new_functions.keys()).collect();
    let side = |functions: &HashMap<String, FunctionValue>, name: &str| {
        functions.get(name).copied().unwrap_or_default()
    };
    names
        .into_iter()
        .map(|name| {
            let (b, n) = (side(&base_functions, name), side(&new_functions, name));
            FunctionChange {
                name: name.clone(),
                self_change: Delta::between(b.self_estimate, n.self_estimate, metric, pairing),
                total_change: Delta::between(b.total_estimate, n.total_estimate, metric, pairing),
            }
        })
        .collect()
}

/// The change of the whole profile's `metric`.
pub fn total_change(base: &Profile, new: &Profile, metric: Metric) -> Delta {
    Delta::between(
        base.estimate(metric),
        new.estimate(metric),
        metric,
        Pairing::of(base, new),
    )
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

    #[test]
    fn nested_alloc_deltas_subtract_variances() {
        let base = Estimate {
            value: 100.0,
            variance: 40.0,
            floor: 0.0,
        };
        let new = Estimate {
            value: 150.0,
            variance: 49.0,
            floor: 0.0,
        };
        let same = Delta::between(base, new, Metric::AllocSpace, Pairing::SameProcess);
        assert_eq!(same.variance, 9.0);
        let inuse = Delta::between(base, new, Metric::InuseSpace, Pairing::SameProcess);
        assert_eq!(inuse.variance, 89.0);
        let other = Delta::between(base, new, Metric::AllocSpace, Pairing::Independent);
        assert_eq!(other.variance, 89.0);
        assert!(same.significant());
        // 50 ± 1.96·sqrt(89) = 50 ± 18.5: significant too; 10 ± 18.5 is not.
        let small = Delta::between(
            base,
            Estimate {
                value: 110.0,
                ..new
            },
            Metric::InuseSpace,
            Pairing::SameProcess,
        );
        assert!(!small.significant());
    }
}
