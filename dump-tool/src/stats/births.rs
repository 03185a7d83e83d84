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
//!
//! ## Caveats: when one dump's evidence is thin
//!
//! A class read from the halves is *weak* ([`caveats`]) when
//! - either half holds fewer than [`MIN_WINDOW_SAMPLES`] sampled live
//!   objects: the ratio of the halves is then mostly sampling noise (at 10
//!   samples a half, its relative standard error is already about 45 %);
//! - it is accumulating but the older half is uneven: its first quarter of
//!   the run after start-up holds less than [`EVEN_SHARE`] of what its
//!   second quarter holds. A steady leak is born evenly (a ratio of 1); a
//!   cache or working set whose memory lives longer than half the run, but
//!   not the whole of it, keeps only the late part of the older half, which
//!   is exactly this shape. Only a later dump can tell them apart.
//!
//! Every weak class comes with the advice to take a second dump later and
//! give both to `heapdiff leaks`.

use super::estimate::Estimate;

/// The share of the run counted as start-up.
pub const STARTUP_SHARE: f64 = 0.1;
/// The least ratio of older to newer live memory of an accumulating
/// function.
pub const ACCUMULATING_RATIO: f64 = 0.25;

/// Fewer sampled live objects than this in either half of the run make a
/// class weak.
pub const MIN_WINDOW_SAMPLES: u64 = 10;
/// An accumulating function whose older half's first quarter holds less
/// than this share of its second quarter was born unevenly.
pub const EVEN_SHARE: f64 = 0.5;

/// Why one dump's class of a function is weak evidence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Caveat {
    /// Too few sampled live objects in a half of the run to compare them.
    FewSamples { older: u64, newer: u64 },
    /// Accumulating, but its older half was born unevenly: `first` and
    /// `second` are its live bytes born in that half's first and second
    /// quarter of the run (after start-up).
    UnevenOlderHalf { first: f64, second: f64 },
}

impl Caveat {
    /// `few-samples` or `uneven-births`, as JSON names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Caveat::FewSamples { .. } => "few-samples",
            Caveat::UnevenOlderHalf { .. } => "uneven-births",
        }
    }

    /// The caveat in one sentence, with what to do about it.
    pub fn sentence(&self) -> String {
        let advice = "take a second dump later and give both to heapdiff leaks";
        match self {
            Caveat::FewSamples { older, newer } => format!(
                "rests on {older} sampled live objects born in the older half and {newer} in the newer (fewer than {MIN_WINDOW_SAMPLES} in one): too few to compare them; {advice}"
            ),
            Caveat::UnevenOlderHalf { first, second } => format!(
                "the older half was born unevenly ({:.0} % of its second quarter's bytes in its first): a cache or working set whose memory lives longer than half the run looks the same; {advice}",
                100.0 * first / second
            ),
        }
    }
}

/// What the samples behind a class say about its strength.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Evidence {
    /// Sampled live objects born in the older and the newer half.
    pub older_samples: u64,
    pub newer_samples: u64,
    /// Live bytes born in the first and the second quarter of the run after
    /// start-up (the older half's two halves).
    pub older_first: f64,
    pub older_second: f64,
}

/// The caveats of `class` on `evidence` (module documentation); none: the
/// class is as strong as one dump can make it.
pub fn caveats(class: Class, evidence: &Evidence) -> Vec<Caveat> {
    let mut out = Vec::new();
    if !matches!(class, Class::Accumulating | Class::RecentOnly) {
        return out;
    }
    if evidence.older_samples.min(evidence.newer_samples) < MIN_WINDOW_SAMPLES {
        out.push(Caveat::FewSamples {
            older: evidence.older_samples,
            newer: evidence.newer_samples,
        });
    }
    if class == Class::Accumulating && evidence.older_first < EVEN_SHARE * evidence.older_second {
        out.push(Caveat::UnevenOlderHalf {
            first: evidence.older_first,
            second: evidence.older_second,
        });
    }
    out
}

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
    fn thin_or_uneven_evidence_gets_its_caveat() {
        let evidence = |older_samples, newer_samples, older_first, older_second| Evidence {
            older_samples,
            newer_samples,
            older_first,
            older_second,
        };
        let kinds = |class, e: Evidence| -> Vec<&str> {
            caveats(class, &e).iter().map(|c| c.kind()).collect()
        };
        let even = evidence(50, 50, 100.0, 100.0);
        assert!(kinds(Class::Accumulating, even).is_empty());
        assert_eq!(
            kinds(Class::Accumulating, evidence(9, 50, 100.0, 100.0)),
            ["few-samples"]
        );
        assert_eq!(
            kinds(Class::Accumulating, evidence(50, 50, 49.0, 100.0)),
            ["uneven-births"]
        );
        assert!(kinds(Class::Accumulating, evidence(50, 50, 50.0, 100.0)).is_empty());
        // Uneven births are a cache's shape: no caveat on recent-only.
        assert!(kinds(Class::RecentOnly, evidence(50, 50, 0.0, 100.0)).is_empty());
        assert_eq!(
            kinds(Class::RecentOnly, evidence(0, 50, 0.0, 0.0)),
            ["few-samples"]
        );
        assert!(kinds(Class::Startup, evidence(0, 0, 0.0, 0.0)).is_empty());
        let sentence = caveats(Class::Accumulating, &evidence(50, 50, 25.0, 100.0))[0].sentence();
        assert!(
            sentence.contains("25 %") && sentence.contains("second dump"),
            "{sentence}"
        );
    }

    #[test]
    fn a_rate_scales_the_estimate_and_its_spread() {
        let rate = per_second(&bytes(100.0), 2.0);
        assert_eq!(rate.value, 50.0);
        assert_eq!(rate.variance, 25.0);
        assert_eq!(per_second(&bytes(100.0), 0.0).value, 0.0);
    }
}
