//! The change of one value between a base and a new dump: its variance,
//! 95 % interval and significance.
//!
//! Two dumps of one process share samples. Cumulative (alloc) sums of a
//! later dump contain the earlier dump's samples exactly, so when the pair
//! is one process with no reset in between ([`Pairing::SameProcess`]) the
//! delta is the sum over the samples taken in between and its variance is
//! `var(new) − var(base)` (when the sums did grow, as nested sums do).
//! In-use sums share the samples still live in both; the delta's variance
//! is `var(new) + var(base) − 2·var(shared)`, and since the shared part is
//! not recorded, the rule uses `var(new) + var(base)`, which is never
//! smaller: in-use intervals of a delta are conservative (a little too
//! wide), never too narrow. Dumps of different processes are independent:
//! `var(new) + var(base)`, exactly. A change is *significant* when its
//! interval excludes 0.
//!
//! This rule is also written in JavaScript for the browser viewer
//! (`assets/stats.js`); both are checked against the one table of test
//! vectors in `change_vectors.json`. Change either only with the other and
//! the table.

use super::estimate::{Estimate, Interval, Z95};

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
    /// The name reports use: `independent`, `same-process`.
    pub fn name(self) -> &'static str {
        match self {
            Pairing::Independent => "independent",
            Pairing::SameProcess => "same-process",
        }
    }
}

/// What kind of sum a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulation {
    /// Live at the dump: a later dump shares only the samples still live.
    InUse,
    /// Everything ever sampled: a later dump of the process contains it all.
    Cumulative,
}

impl Accumulation {
    /// The name the test vectors use: `in-use`, `cumulative`.
    pub fn name(self) -> &'static str {
        match self {
            Accumulation::InUse => "in-use",
            Accumulation::Cumulative => "cumulative",
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
    /// The change from `base` to `new`, see the module documentation for
    /// the variance.
    pub fn between(
        base: Estimate,
        new: Estimate,
        accumulation: Accumulation,
        pairing: Pairing,
    ) -> Delta {
        let nested = pairing == Pairing::SameProcess
            && accumulation == Accumulation::Cumulative
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn pairing_named(name: &str) -> Pairing {
        [Pairing::Independent, Pairing::SameProcess]
            .into_iter()
            .find(|p| p.name() == name)
            .unwrap_or_else(|| panic!("no pairing {name:?}"))
    }

    fn accumulation_named(name: &str) -> Accumulation {
        [Accumulation::InUse, Accumulation::Cumulative]
            .into_iter()
            .find(|a| a.name() == name)
            .unwrap_or_else(|| panic!("no accumulation {name:?}"))
    }

    /// Equal up to the last bits a decimal round trip may change.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    /// The table the browser test evaluates with the viewer's script too.
    #[test]
    fn the_rule_matches_the_shared_test_vectors() {
        let vectors: Vec<Value> =
            serde_json::from_str(include_str!("change_vectors.json")).expect("the vectors");
        assert!(vectors.len() >= 15, "only {} vectors", vectors.len());
        for vector in &vectors {
            let number = |key: &str| vector[key].as_f64().unwrap_or_else(|| panic!("{key}"));
            let estimate = |value: &str, variance: &str| Estimate {
                value: number(value),
                variance: number(variance),
                floor: 0.0,
            };
            let delta = Delta::between(
                estimate("base", "base_variance"),
                estimate("new", "new_variance"),
                accumulation_named(vector["accumulation"].as_str().unwrap()),
                pairing_named(vector["pairing"].as_str().unwrap()),
            );
            let interval = delta.interval();
            let note = &vector["note"];
            assert!(
                close(delta.variance, number("variance")),
                "{note}: {delta:?}"
            );
            assert!(close(interval.low, number("low")), "{note}: {interval:?}");
            assert!(close(interval.high, number("high")), "{note}: {interval:?}");
            assert_eq!(
                Value::Bool(delta.significant()),
                vector["significant"],
                "{note}"
            );
        }
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
        let cumulative = Accumulation::Cumulative;
        let same = Delta::between(base, new, cumulative, Pairing::SameProcess);
        assert_eq!(same.variance, 9.0);
        let inuse = Delta::between(base, new, Accumulation::InUse, Pairing::SameProcess);
        assert_eq!(inuse.variance, 89.0);
        let other = Delta::between(base, new, cumulative, Pairing::Independent);
        assert_eq!(other.variance, 89.0);
        assert!(same.significant());
        // 50 ± 1.96·sqrt(89) = 50 ± 18.5: significant too; 10 ± 18.5 is not.
        let small = Delta::between(
            base,
            Estimate {
                value: 110.0,
                ..new
            },
            Accumulation::InUse,
            Pairing::SameProcess,
        );
        assert!(!small.significant());
    }
}
