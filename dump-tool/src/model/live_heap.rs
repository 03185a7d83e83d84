//! The live heap of a dump, three ways, and whether they agree: the
//! estimate from the samples (requested bytes, with its 95 % interval), the
//! same estimate in usable bytes (scaled by the sampled live objects' own
//! usable-per-requested ratio), and the exact counter (usable bytes, under
//! `prof_exact`).
//!
//! The exact counter measures what the allocator reserved, rounded up to
//! its size classes; the samples measure what the program asked for. The
//! two differ by that rounding (which the samples themselves measure) and
//! by live memory no sample accounts for. Owns that reconciliation as data;
//! its words are `render::live_heap`'s. Reads dumps; no I/O.

use crate::stats::{Estimate, Interval, Sampling, Unit};
use heapsample_format::Dump;

/// The live heap of one dump or of several summed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveHeap {
    /// Requested bytes of live objects, estimated from the samples.
    pub requested: Interval,
    /// Sampled objects live at the dump.
    pub sampled_objects: u64,
    /// Every allocation was sampled (`lg_prof_sample:0`): the estimates are
    /// exact.
    pub every_allocation_sampled: bool,
    /// Usable bytes per requested byte of the sampled live objects.
    pub usable_per_requested: Option<f64>,
    /// `requested` in usable bytes (scaled by `usable_per_requested`).
    pub usable: Option<Interval>,
    /// The exact live heap in usable bytes, when counted.
    pub exact_usable: Option<u64>,
}

/// How the exact counter relates to the estimate in usable bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Agreement {
    /// The dump has no exact counter (`prof_exact:false`, foreign dumps).
    NotCounted,
    /// No sampled object is live, so there is no ratio to scale by.
    NoLiveSample,
    /// The exact counter lies within the estimate's interval.
    Within,
    /// The exact counter lies above the interval, by this many bytes.
    ExactAbove(f64),
    /// The exact counter lies below the interval, by this many bytes.
    ExactBelow(f64),
}

impl LiveHeap {
    /// The live heap of `dumps` (summed: merged sides).
    pub fn of(dumps: &[&Dump]) -> LiveHeap {
        let period = dumps.iter().map(|d| d.sample_period()).max().unwrap_or(1);
        let mut estimate = Estimate::zero(Sampling::of(period as f64, Unit::Bytes));
        let (mut requested, mut usable, mut objects) = (0u64, 0u64, 0u64);
        let mut exact = Some(0u64);
        for dump in dumps {
            for stack in &dump.stacks {
                estimate = estimate.plus(&Estimate {
                    value: stack.live.bytes,
                    variance: stack.live.bytes_variance,
                    floor: stack.live_bytes as f64,
                    scale: 0.0,
                    sampling: Sampling::of(dump.sample_period() as f64, Unit::Bytes),
                });
                requested = requested.saturating_add(stack.live_bytes);
                usable = usable.saturating_add(stack.live_usable_bytes);
                objects = objects.saturating_add(stack.live_objects);
            }
            exact = exact
                .zip(dump.totals.live_usable_bytes)
                .map(|(sum, bytes)| sum.saturating_add(bytes));
        }
        let requested_interval = estimate.interval();
        let ratio = (requested > 0 && usable > 0).then(|| usable as f64 / requested as f64);
        LiveHeap {
            requested: requested_interval,
            sampled_objects: objects,
            every_allocation_sampled: !dumps.is_empty()
                && dumps.iter().all(|d| d.lg_sample_period == 0),
            usable_per_requested: ratio,
            usable: ratio.map(|r| Interval {
                estimate: requested_interval.estimate * r,
                low: requested_interval.low * r,
                high: requested_interval.high * r,
            }),
            exact_usable: exact.filter(|_| !dumps.is_empty()),
        }
    }

    /// Whether the exact counter agrees with the estimate in usable bytes
    /// (within half a byte of its interval: the sums are floating point).
    pub fn agreement(&self) -> Agreement {
        let Some(exact) = self.exact_usable else {
            return Agreement::NotCounted;
        };
        let Some(usable) = self.usable else {
            return Agreement::NoLiveSample;
        };
        let exact = exact as f64;
        if exact > usable.high + 0.5 {
            Agreement::ExactAbove(exact - usable.high)
        } else if exact < usable.low - 0.5 {
            Agreement::ExactBelow(usable.low - exact)
        } else {
            Agreement::Within
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::tests::unmapped_dump;
    use heapsample_format::{Stack, Totals, sample_weights};

    fn dump(lg: u32, stacks: &[(u64, u64, u64)], exact: Option<u64>) -> Dump {
        let period = 1u64 << lg;
        let stacks = stacks
            .iter()
            .map(|&(objects, size, usable_size)| {
                let mut weights = heapsample_format::Weights::default();
                for _ in 0..objects {
                    weights = weights.plus(&sample_weights(size, period));
                }
                Stack {
                    frames: vec![0x10],
                    live_objects: objects,
                    live_bytes: objects * size,
                    live_usable_bytes: objects * usable_size,
                    live: weights,
                    ..Stack::default()
                }
            })
            .collect();
        Dump {
            lg_sample_period: lg,
            totals: Totals {
                live_usable_bytes: exact,
                ..Totals::default()
            },
            ..unmapped_dump(stacks)
        }
    }

    #[test]
    fn exact_sampling_reconciles_by_the_usable_ratio() {
        // 10 objects of 100 B, 104 usable each, plus 50 B the samples miss.
        let live = LiveHeap::of(&[&dump(0, &[(10, 100, 104)], Some(1090))]);
        assert!(live.every_allocation_sampled);
        assert_eq!(live.requested.estimate, 1000.0);
        assert_eq!(live.usable.unwrap().estimate, 1040.0);
        assert_eq!(live.agreement(), Agreement::ExactAbove(50.0));
        let live = LiveHeap::of(&[&dump(0, &[(10, 100, 104)], Some(1040))]);
        assert_eq!(live.agreement(), Agreement::Within);
    }

    #[test]
    fn no_live_sample_and_no_counter_are_said_as_such() {
        let live = LiveHeap::of(&[&dump(19, &[], Some(4096))]);
        assert!(!live.every_allocation_sampled);
        assert_eq!(live.requested.estimate, 0.0);
        assert_eq!(live.agreement(), Agreement::NoLiveSample);
        let live = LiveHeap::of(&[&dump(19, &[(3, 1000, 1008)], None)]);
        assert_eq!(live.agreement(), Agreement::NotCounted);
    }

    #[test]
    fn sampled_estimates_compare_with_their_interval() {
        // At R = 2^12, 40 sampled objects of 64 KiB are all but certain.
        let live = LiveHeap::of(&[&dump(12, &[(40, 65536, 65552)], Some(40 * 65552))]);
        assert_eq!(live.agreement(), Agreement::Within);
        let usable = live.usable.unwrap();
        assert!(usable.low <= usable.estimate && usable.estimate <= usable.high);
    }
}
