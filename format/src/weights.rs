//! Horvitz–Thompson [`Weights`]: the estimates a set of samples stands for,
//! with their variances. A leaf: the sampling law computes them, the model
//! and the lifetimes hold them.
//!
//! Plain data: no I/O, no allocation.

use serde::{Deserialize, Serialize};

/// Horvitz–Thompson sums over a set of sampled objects.
///
/// An object of `s` bytes is sampled with probability `p`
/// ([`inclusion_probability`](crate::inclusion_probability));
/// weighting each sampled object by `1/p` makes the sums unbiased estimates of
/// the true object count and bytes, whatever the mix of sizes, and the
/// variance sums are unbiased estimates of those estimates' variances
/// (each sampled object contributes `(1 − p)/p²` times its value squared).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// Σ 1/p: the estimated number of objects.
    pub objects: f64,
    /// Σ s/p: the estimated bytes.
    pub bytes: f64,
    /// Σ (1 − p)/p²: the variance of `objects`.
    pub objects_variance: f64,
    /// Σ s²(1 − p)/p²: the variance of `bytes`.
    pub bytes_variance: f64,
}

impl Weights {
    /// The sums of `self` and `other` (disjoint sets of samples).
    pub fn plus(&self, other: &Weights) -> Weights {
        Weights {
            objects: self.objects + other.objects,
            bytes: self.bytes + other.bytes,
            objects_variance: self.objects_variance + other.objects_variance,
            bytes_variance: self.bytes_variance + other.bytes_variance,
        }
    }

    /// The four sums as an array (objects, bytes, their variances).
    pub fn as_array(&self) -> [f64; 4] {
        [
            self.objects,
            self.bytes,
            self.objects_variance,
            self.bytes_variance,
        ]
    }
}
