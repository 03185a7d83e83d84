//! The change of one value between a base and a new dump: its interval,
//! significance and confidence.
//!
//! A change is the difference of two independent sampled sums, what was
//! *added* and what was *removed*:
//! - dumps of different processes, or of one process without a way to
//!   tell which samples they share: added = the new value, removed = the
//!   base value. For two dumps of one process this is conservative (their
//!   sums share samples, so the true interval is narrower), never too
//!   narrow;
//! - two dumps of one process ([`Pairing::SameProcess`]), cumulative
//!   (alloc) sums that grew: the later sums contain every sample of the
//!   earlier ones, so added = the samples taken in between
//!   ([`Estimate::minus`]) and nothing was removed;
//! - two dumps of one process that say which live samples they share
//!   ([`Delta::of_shared`], [`super::shared`]): added = the live samples
//!   only the new dump has, removed = those only the base has (the
//!   symmetric difference; the shared ones cancel exactly).
//!
//! The interval of `added − removed` combines the two parts' intervals
//! (see [`super::estimate`]) by the method of variance estimates recovery
//! (Zou and Donner, Computational Statistics & Data Analysis 51, 2008):
//! `L = d − √((a − a_low)² + (r_high − r)²)`,
//! `U = d + √((a_high − a)² + (r − r_low)²)`; with many samples that is
//! `d ± 1.96·√(var(a) + var(r))`, with few it keeps the parts' skew.
//! A change is *significant* when its interval excludes 0. A change known
//! exactly (an interval of zero width: every allocation sampled) is
//! significant only when it is at least half a unit: exact counts are whole
//! numbers, and anything less is rounding left over by the float sums.
//! A change is low-confidence when either value is.
//!
//! This rule (with the shared-samples parts given: `parts` in the table)
//! is also written in JavaScript for the browser viewer
//! (`assets/stats.js`); both are checked against the one table of test
//! vectors in `change_vectors.json`. Change either only with the other and
//! the table.

use super::estimate::{Estimate, Interval};
use super::sampling::Sampling;

/// How the samples of a base and a new dump relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairing {
    /// Different processes, a reset in between, or dumps that cannot show
    /// they are one process: independent samples.
    Independent,
    /// The base is an earlier dump of the same process (the same process
    /// id) with no reset in between: the new cumulative sums contain the
    /// base's samples.
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
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delta {
    pub base: Estimate,
    pub new: Estimate,
    /// The samples counted in `new` and not in `base`.
    pub added: Estimate,
    /// The samples counted in `base` and not in `new` (independent of
    /// `added`).
    pub removed: Estimate,
}

impl Delta {
    /// The change from `base` to `new`, see the module documentation.
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
        let (added, removed) = if nested {
            // Cumulative sums lose nothing: exactly nothing was removed.
            let nothing = Sampling::exact(base.sampling.unit);
            (new.minus(&base), Estimate::zero(nothing))
        } else {
            (new, base)
        };
        Delta {
            base,
            new,
            added,
            removed,
        }
    }

    /// The in-use change between two dumps of one process whose shared
    /// live samples are known: `added` and `removed` are the sums
    /// ([`super::shared::sum`]) over the samples only the new dump and only
    /// the base dump list.
    pub fn of_shared(base: Estimate, new: Estimate, added: Estimate, removed: Estimate) -> Delta {
        Delta {
            base,
            new,
            added,
            removed,
        }
    }

    /// new − base.
    pub fn value(&self) -> f64 {
        self.new.value - self.base.value
    }

    /// The variance of the change.
    pub fn variance(&self) -> f64 {
        self.added.variance.max(0.0) + self.removed.variance.max(0.0)
    }

    /// The 95 % interval of the change.
    pub fn interval(&self) -> Interval {
        let (added, removed) = (self.added, self.removed);
        let a = added.interval_with(self.unseen_weight(&added));
        let r = removed.interval_with(self.unseen_weight(&removed));
        let value = self.value();
        Interval {
            estimate: value,
            low: value - (added.value - a.low).hypot(r.high - removed.value),
            high: value + (a.high - added.value).hypot(removed.value - r.low),
        }
    }

    /// True when the change is not explained by sampling noise.
    pub fn significant(&self) -> bool {
        let interval = self.interval();
        if interval.low == interval.high {
            return self.value().abs() >= 0.5;
        }
        interval.excludes_zero()
    }

    /// True when either value is low-confidence
    /// ([`Estimate::low_confidence`]).
    pub fn low_confidence(&self) -> bool {
        self.base.low_confidence() || self.new.low_confidence()
    }

    /// The unseen unit of `part`: its own, or for an object count with no
    /// samples that of the other estimates of the same thing.
    fn unseen_weight(&self, part: &Estimate) -> f64 {
        [part, &self.new, &self.base, &self.added, &self.removed]
            .iter()
            .find_map(|e| e.unseen_weight())
            .unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::sampling::Unit;
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

    /// Equal up to the last bits a decimal round trip or another
    /// implementation of the gamma point may change.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    fn estimate_of(vector: &Value) -> Estimate {
        let number = |key: &str| {
            vector[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key} in {vector}"))
        };
        Estimate {
            value: number("value"),
            variance: number("variance"),
            floor: number("floor"),
            // Given for sums of several stacks only.
            scale: vector["scale"].as_f64().unwrap_or(0.0),
            sampling: serde_json::from_value(vector["sampling"].clone()).expect("sampling"),
        }
    }

    /// The change a vector describes: with `parts` (the live samples only
    /// one dump has), the shared-samples change; else the pairing's.
    fn delta_of(vector: &Value) -> Delta {
        let (base, new) = (estimate_of(&vector["base"]), estimate_of(&vector["new"]));
        match vector.get("parts") {
            Some(parts) => Delta::of_shared(
                base,
                new,
                estimate_of(&parts["added"]),
                estimate_of(&parts["removed"]),
            ),
            None => Delta::between(
                base,
                new,
                accumulation_named(vector["accumulation"].as_str().unwrap()),
                pairing_named(vector["pairing"].as_str().unwrap()),
            ),
        }
    }

    fn vectors() -> Value {
        serde_json::from_str(include_str!("change_vectors.json")).expect("the vectors")
    }

    /// The table the browser test evaluates with the viewer's script too:
    /// single estimates.
    #[test]
    fn intervals_match_the_shared_test_vectors() {
        let vectors = vectors();
        let estimates = vectors["estimates"].as_array().expect("estimates");
        assert!(estimates.len() >= 10, "only {} vectors", estimates.len());
        for vector in estimates {
            let note = &vector["note"];
            let interval = estimate_of(&vector["estimate"]).interval();
            let low_confidence = estimate_of(&vector["estimate"]).low_confidence();
            let number = |key: &str| vector[key].as_f64().unwrap();
            assert!(close(interval.low, number("low")), "{note}: {interval:?}");
            assert!(close(interval.high, number("high")), "{note}: {interval:?}");
            assert_eq!(
                Value::Bool(low_confidence),
                vector["low_confidence"],
                "{note}"
            );
        }
    }

    /// The same for changes.
    #[test]
    fn the_rule_matches_the_shared_test_vectors() {
        let vectors = vectors();
        let changes = vectors["changes"].as_array().expect("changes");
        assert!(changes.len() >= 15, "only {} vectors", changes.len());
        assert!(changes.iter().filter(|v| v.get("parts").is_some()).count() >= 3);
        for vector in changes {
            let delta = delta_of(vector);
            let interval = delta.interval();
            let note = &vector["note"];
            let number = |key: &str| vector[key].as_f64().unwrap();
            assert!(close(delta.value(), number("value")), "{note}: {delta:?}");
            assert!(
                close(delta.variance(), number("variance")),
                "{note}: {delta:?}"
            );
            assert!(close(interval.low, number("low")), "{note}: {interval:?}");
            assert!(close(interval.high, number("high")), "{note}: {interval:?}");
            assert_eq!(
                Value::Bool(delta.significant()),
                vector["significant"],
                "{note}"
            );
            assert_eq!(
                Value::Bool(delta.low_confidence()),
                vector["low_confidence"],
                "{note}"
            );
        }
    }

    fn bytes(value: f64, variance: f64) -> Estimate {
        Estimate {
            value,
            variance,
            floor: 0.0,
            scale: 0.0,
            sampling: Sampling::of(16384.0, Unit::Bytes),
        }
    }

    #[test]
    fn nested_alloc_deltas_are_the_samples_in_between() {
        let base = bytes(1e6, 4e9);
        let new = bytes(1.5e6, 4.9e9);
        let cumulative = Accumulation::Cumulative;
        let same = Delta::between(base, new, cumulative, Pairing::SameProcess);
        assert_eq!(same.variance(), 0.9e9);
        assert_eq!(same.removed.value, 0.0);
        let in_use = Delta::between(base, new, Accumulation::InUse, Pairing::SameProcess);
        assert_eq!(in_use.variance(), 8.9e9);
        let other = Delta::between(base, new, cumulative, Pairing::Independent);
        assert_eq!(other.variance(), 8.9e9);
        assert!(same.significant() && other.significant());
        // Many samples: MOVER is the normal interval, widened by about one
        // unseen unit on each side.
        let i = other.interval();
        let half = super::super::estimate::Z95 * 8.9e9_f64.sqrt();
        assert!(
            i.low < 5e5 - half && i.low > 5e5 - half - 2.0 * 16384.0,
            "{i:?}"
        );
        assert!(
            i.high > 5e5 + half && i.high < 5e5 + half + 2.0 * 16384.0,
            "{i:?}"
        );
        // Nothing sampled in between: [0, 3.7·R], not significant.
        let none = Delta::between(base, base, cumulative, Pairing::SameProcess);
        let i = none.interval();
        assert_eq!(i.low, 0.0);
        assert!(
            (i.high / 16383.5 - 3.688_879_454_113_936).abs() < 1e-6,
            "{i:?}"
        );
        assert!(!none.significant());
    }

    #[test]
    fn exact_changes_under_half_a_unit_are_residue() {
        let exact = |value| Estimate {
            value,
            variance: 0.0,
            floor: value,
            scale: 0.0,
            sampling: Sampling::exact(Unit::Objects),
        };
        let residue = Delta::between(
            exact(8.0),
            exact(8.000_000_000_000_002),
            Accumulation::InUse,
            Pairing::Independent,
        );
        assert_eq!(residue.interval().low, residue.interval().high);
        assert!(!residue.significant());
        let one = Delta::between(
            exact(7.0),
            exact(8.0),
            Accumulation::InUse,
            Pairing::Independent,
        );
        assert!(one.significant());
        assert_eq!((one.interval().low, one.interval().high), (1.0, 1.0));
    }
}
