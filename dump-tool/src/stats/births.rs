//! What the births of live memory say about it, as pure math: a rate from
//! an estimate over a time window, and the leak / cache / start-up rule.
//!
//! ## The rule
//!
//! A run of `T` seconds (profiler start to dump) is cut into the start-up
//! window, its first [`STARTUP_SHARE`], and the rest, halved into an
//! *older* and a *newer* half. The live bytes of a function born in each
//! window are Horvitz–Thompson estimates (sums over its live samples), so
//! each has its variance and interval. Then
//! - *accumulating* (a leak candidate): both halves hold live memory
//!   (sampled, so certainly there), the older at least
//!   [`ACCUMULATING_RATIO`] of the newer: memory born steadily and kept. A
//!   leak of constant rate gives a ratio of 1; a cache or working set that
//!   turns over keeps only what was born within its turnover time, 0 in the
//!   older half once the turnover is shorter than half the run;
//! - *start-up*: otherwise, when nothing of it was born in the newer half
//!   (born early, or once, and kept) or at least half of it in the
//!   start-up window;
//! - *recent only*: otherwise (born recently and turning over: a cache, a
//!   working set, requests in flight).
//!
//! The rule reads point estimates; the evidence (each window's estimate
//! and interval) goes with it into every report. It cannot tell a leak
//! that started late, or a cache whose turnover is longer than half the
//! run, from the other: the trend across several dumps can.

use super::estimate::Estimate;

/// The share of the run counted as start-up.
pub const STARTUP_SHARE: f64 = 0.1;
/// The least ratio of older to newer live memory of an accumulating
/// function.
pub const ACCUMULATING_RATIO: f64 = 0.25;

/// What the births of a function's live memory say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Born steadily across the run and kept: a leak candidate.
    Accumulating,
    /// Born early and kept: start-up state.
    Startup,
    /// Born recently: a cache or working set that turns over.
    RecentOnly,
    /// Nothing live.
    Empty,
}

impl Class {
    /// The name reports use: `accumulating`, `start-up`, `recent-only`, `empty`.
    pub fn name(self) -> &'static str {
        match self {
            Class::Accumulating => "accumulating",
            Class::Startup => "start-up",
            Class::RecentOnly => "recent-only",
            Class::Empty => "empty",
        }
    }
}

/// The live bytes of one function born in each window of the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Windows {
    pub startup: Estimate,
    pub older: Estimate,
    pub newer: Estimate,
}

impl Windows {
    /// The class the rule (module documentation) gives.
    pub fn class(&self) -> Class {
        let (startup, older, newer) = (self.startup.value, self.older.value, self.newer.value);
        let total = startup + older + newer;
        if total <= 0.0 {
            Class::Empty
        } else if self.older.floor > 0.0
            && self.newer.floor > 0.0
            && older >= ACCUMULATING_RATIO * newer
        {
            Class::Accumulating
        } else if self.newer.floor <= 0.0 || startup >= 0.5 * total {
            Class::Startup
        } else {
            Class::RecentOnly
        }
    }
}

/// `estimate` per `seconds` (a rate), with its variance and floor scaled
/// alike; 0 for an empty window.
pub fn per_second(estimate: &Estimate, seconds: f64) -> Estimate {
    let mut rate = *estimate;
    let scale = if seconds > 0.0 && seconds.is_finite() {
        1.0 / seconds
    } else {
        0.0
    };
    rate.value *= scale;
    rate.variance *= scale * scale;
    rate.floor *= scale;
    rate.scale *= scale;
    rate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(value: f64) -> Estimate {
        Estimate {
            value,
            variance: value,
            floor: value.min(1.0),
            scale: 0.0,
            sampling: crate::stats::Sampling::of(4096.0, crate::stats::Unit::Bytes),
        }
    }

    #[test]
    fn the_rule_tells_a_leak_a_cache_and_a_start_up_table_apart() {
        let class = |startup, older, newer| {
            Windows {
                startup: bytes(startup),
                older: bytes(older),
                newer: bytes(newer),
            }
            .class()
        };
        assert_eq!(class(0.0, 100.0, 110.0), Class::Accumulating);
        assert_eq!(class(500.0, 30.0, 100.0), Class::Accumulating);
        assert_eq!(class(0.0, 0.0, 100.0), Class::RecentOnly);
        assert_eq!(class(0.0, 10.0, 100.0), Class::RecentOnly);
        assert_eq!(class(100.0, 0.0, 10.0), Class::Startup);
        // Born once in the middle of the run and kept: no leak.
        assert_eq!(class(0.0, 100.0, 0.0), Class::Startup);
        assert_eq!(class(0.0, 0.0, 0.0), Class::Empty);
    }

    #[test]
    fn a_rate_scales_the_estimate_and_its_spread() {
        let rate = per_second(&bytes(100.0), 2.0);
        assert_eq!(rate.value, 50.0);
        assert_eq!(rate.variance, 25.0);
        assert_eq!(per_second(&bytes(100.0), 0.0).value, 0.0);
    }
}
