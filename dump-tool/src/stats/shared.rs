//! The exact in-use change between two dumps of one process that name
//! their live samples.
//!
//! A live sample still live at the later dump is in both sums and cancels
//! in the change; what remains is the sum over the samples only the new
//! dump has (allocated in between and still live) minus the sum over those
//! only the base has (freed in between). The two parts are disjoint sets
//! of independent sampling decisions, so the change's variance is the sum
//! of their variance terms: the symmetric difference's, not
//! `var(new) + var(base)`. [`sum`] estimates one part (the comparison
//! splits the samples: `compare::comparison`);
//! [`super::change::Delta::of_shared`] makes the change.

use super::estimate::Estimate;
use super::sampling::{Sampling, Unit};

/// A live sample's identity within its process: (thread, birth).
pub type Identity = (u32, u64);

/// One live sample as a dump records it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveSample {
    /// Unique within the process: the serial of the allocating thread and
    /// the sample's birth (the shim gives a thread's samples distinct
    /// births).
    pub id: Identity,
    /// Requested bytes.
    pub size: u64,
    /// Its Horvitz–Thompson weights (`1/p`, `s/p` and the variance terms).
    pub weights: SampleWeights,
}

/// What one sample adds to an estimate of objects and of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampleWeights {
    pub objects: f64,
    pub bytes: f64,
    pub objects_variance: f64,
    pub bytes_variance: f64,
}

/// The samples (one part of a change: disjoint from the other part) as an
/// estimate of `sampling`'s unit.
pub fn sum<'a>(samples: impl IntoIterator<Item = &'a LiveSample>, sampling: Sampling) -> Estimate {
    samples
        .into_iter()
        .fold(Estimate::zero(sampling), |sum, s| {
            sum.plus(&one(s, sampling))
        })
}

/// One sample as an estimate of `sampling`'s unit.
fn one(sample: &LiveSample, sampling: Sampling) -> Estimate {
    let w = &sample.weights;
    let (value, variance, floor) = match sampling.unit {
        Unit::Objects => (w.objects, w.objects_variance, 1.0),
        Unit::Bytes => (w.bytes, w.bytes_variance, sample.size as f64),
    };
    Estimate::of_part(value, variance, floor, sampling)
}

#[cfg(test)]
mod tests {
    use super::super::change::{Accumulation, Delta, Pairing};
    use super::*;

    fn sample(id: u64, size: u64, p: f64) -> LiveSample {
        let s = size as f64;
        LiveSample {
            id: (1, id),
            size,
            weights: SampleWeights {
                objects: 1.0 / p,
                bytes: s / p,
                objects_variance: (1.0 - p) / (p * p),
                bytes_variance: s * s * (1.0 - p) / (p * p),
            },
        }
    }

    #[test]
    fn shared_samples_cancel_and_only_the_difference_varies() {
        let sampling = Sampling::of(16384.0, Unit::Bytes);
        let kept: Vec<LiveSample> = (0..50).map(|i| sample(i, 4096, 0.22)).collect();
        let freed = [sample(100, 512, 0.03)];
        let born = [sample(200, 1024, 0.06), sample(201, 1024, 0.06)];
        let base: Vec<LiveSample> = kept.iter().chain(&freed).copied().collect();
        let new: Vec<LiveSample> = kept.iter().chain(&born).copied().collect();
        let (added, removed) = (sum(&born, sampling), sum(&freed, sampling));
        let (b, n) = (sum(&base, sampling), sum(&new, sampling));
        let exact = Delta::of_shared(b, n, added, removed);
        let conservative = Delta::between(b, n, Accumulation::InUse, Pairing::SameProcess);
        assert!((exact.value() - conservative.value()).abs() < 1e-6);
        assert!(exact.variance() < conservative.variance() / 10.0);
        let (e, c) = (exact.interval(), conservative.interval());
        assert!(e.high - e.low < c.high - c.low);
        // Nothing changed: exactly no change, within the unseen units.
        let none = sum(&[], sampling);
        assert_eq!(none.value, 0.0);
        assert!(!Delta::of_shared(b, b, none, none).significant());
    }
}
