//! The sampling law ([`SamplingLaw`]) and the Horvitz–Thompson weights of a
//! sample ([`sample_weights`]), used by the shim inside malloc and by the
//! reader.
//!
//! Pure arithmetic: no allocation, no lock, no I/O; `libm` rather than
//! `libm.so`, so the shim does not make every profiled program load it.

use crate::model::Weights;

/// The sampler's law for a mean period of `R` bytes, in one place for the
/// shim (which draws countdowns and weighs samples with it) and the reader
/// (which corrects with it): the bytes until the next sample are geometric
/// with mean `R`, so an allocation of `s` bytes is sampled with probability
/// `1 − (1 − 1/R)^s` whatever came before it (the law is memoryless).
///
/// Holds `ln(1 − 1/R)`, computed once: the shim caches it (as
/// [`SamplingLaw::to_bits`] in an atomic) so that a sample event takes no
/// logarithm. Pure arithmetic: no allocation, no lock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingLaw {
    /// `ln(1 − 1/R)` (negative); 0 when every allocation is sampled (`R ≤ 1`).
    ln_keep: f64,
}

impl SamplingLaw {
    /// The law of a mean period of `period` bytes.
    pub fn new(period: u64) -> SamplingLaw {
        let ln_keep = if period <= 1 {
            0.0
        } else {
            libm::log1p(-1.0 / period as f64)
        };
        SamplingLaw { ln_keep }
    }

    /// The law as 64 bits, to keep in an atomic ([`SamplingLaw::from_bits`]).
    pub fn to_bits(self) -> u64 {
        self.ln_keep.to_bits()
    }

    /// The law [`SamplingLaw::to_bits`] gave `bits` for.
    pub fn from_bits(bits: u64) -> SamplingLaw {
        SamplingLaw {
            ln_keep: f64::from_bits(bits),
        }
    }

    /// True when every allocation is sampled (`R ≤ 1`).
    #[inline]
    pub fn samples_everything(self) -> bool {
        self.ln_keep == 0.0
    }

    /// The probability that an allocation of `size` bytes is sampled,
    /// `1 − (1 − 1/R)^s` (≈ `1 − exp(−s/R)`): 1 when every allocation is
    /// and, by convention, for empty ones (which the countdown never picks).
    #[inline]
    pub fn inclusion_probability(self, size: u64) -> f64 {
        if self.samples_everything() || size == 0 {
            return 1.0;
        }
        (-libm::expm1(size as f64 * self.ln_keep)).clamp(f64::MIN_POSITIVE, 1.0)
    }

    /// The probability that an allocation of `size` bytes is not sampled,
    /// `(1 − 1/R)^s`.
    pub fn keep_probability(self, size: u64) -> f64 {
        libm::exp(self.ln_keep * size as f64)
    }

    /// The bytes until the next sample for `uniform` drawn in (0, 1]: the
    /// geometric countdown with mean `R`, at least 1 (0 when every
    /// allocation is sampled), capped at `i64::MAX / 4`. The countdown ends
    /// within `s` bytes exactly when `uniform > (1 − 1/R)^s`, with
    /// probability [`SamplingLaw::inclusion_probability`].
    #[inline]
    pub fn bytes_until_sample(self, uniform: f64) -> i64 {
        if self.samples_everything() {
            return 0;
        }
        // ln(u) and ln(1 − 1/R) are both ≤ 0, so the quotient is ≥ 0 and
        // truncating it is its floor (without a call to `floor`).
        let before = libm::log(uniform) / self.ln_keep;
        if before >= (i64::MAX / 4 - 1) as f64 {
            i64::MAX / 4
        } else {
            before as i64 + 1
        }
    }
}

/// Probability that the sampler picks an allocation of `size` bytes when
/// its mean period is `period` bytes ([`SamplingLaw::inclusion_probability`]).
pub fn inclusion_probability(size: u64, period: u64) -> f64 {
    SamplingLaw::new(period).inclusion_probability(size)
}

/// What one sampled object of `size` bytes adds to a stack's [`Weights`].
/// Pure arithmetic (no allocation, no lock): the shim calls it inside
/// malloc at each sample event, and again with the same size when the object
/// is freed, so a free removes exactly what its allocation added.
pub fn sample_weights(size: u64, period: u64) -> Weights {
    weights_with_probability(size, inclusion_probability(size, period))
}

/// [`sample_weights`] for an object of `size` bytes sampled with
/// probability `p` (computed by the caller, e.g. with a cached logarithm).
pub fn weights_with_probability(size: u64, p: f64) -> Weights {
    let weight = 1.0 / p;
    let spread = (1.0 - p) / (p * p);
    let bytes = size as f64;
    Weights {
        objects: weight,
        bytes: bytes * weight,
        objects_variance: spread,
        bytes_variance: bytes * bytes * spread,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_of_one_sample() {
        // Every allocation sampled: weights are the counts, no variance.
        let exact = sample_weights(100, 1);
        assert_eq!(exact.as_array(), [1.0, 100.0, 0.0, 0.0]);
        // p = 1 − (1 − 1/R)^s.
        let period = 1u64 << 19;
        let p = 1.0 - (1.0 - 1.0 / period as f64).powf(100.0);
        let w = sample_weights(100, period);
        assert!((w.objects - 1.0 / p).abs() < 1e-6 * w.objects);
        assert!((w.bytes - 100.0 / p).abs() < 1e-6 * w.bytes);
        assert!((w.objects_variance - (1.0 - p) / (p * p)).abs() < 1e-6 * w.objects_variance);
        assert!((w.bytes_variance - 1e4 * (1.0 - p) / (p * p)).abs() < 1e-6 * w.bytes_variance);
        // Huge objects are (almost) always sampled: weight 1, no variance.
        let huge = sample_weights(64 << 20, period);
        assert!((huge.objects - 1.0).abs() < 1e-12 && huge.objects_variance < 1e-12);
        assert_eq!(sample_weights(0, period).objects, 1.0);
    }

    #[test]
    fn the_countdown_ends_within_s_bytes_with_the_inclusion_probability() {
        // bytes_until_sample(u) <= s exactly when u > (1 - 1/R)^s: at the
        // uniforms just above and below that threshold the countdown falls
        // on either side of s, so P(countdown <= s) = inclusion_probability.
        for period in [2u64, 4096, 1 << 19] {
            let law = SamplingLaw::new(period);
            assert_eq!(SamplingLaw::from_bits(law.to_bits()), law);
            for size in [1u64, 100, 4096, 1 << 20] {
                let keep = law.keep_probability(size);
                let p = law.inclusion_probability(size);
                assert!((p + keep - 1.0).abs() < 1e-12, "R {period} s {size}");
                let above = (keep * (1.0 + 1e-9)).min(1.0);
                let below = keep * (1.0 - 1e-9);
                if above > keep {
                    assert!(law.bytes_until_sample(above) <= size as i64);
                }
                assert!(law.bytes_until_sample(below) > size as i64);
            }
            assert_eq!(
                law.bytes_until_sample(1.0),
                1,
                "the countdown is at least 1"
            );
        }
        let every = SamplingLaw::new(1);
        assert!(every.samples_everything());
        assert_eq!(every.bytes_until_sample(0.5), 0);
        assert_eq!(every.inclusion_probability(12345), 1.0);
    }

    #[test]
    fn weights_are_unbiased_over_the_sampling_law() {
        // E[Σ 1{sampled}·w] over the exact Bernoulli law, for a mix of sizes:
        // the expectation of the estimate is the truth, and the expectation
        // of the variance sum is the variance of the estimate.
        let period = 1u64 << 16;
        for size in [1u64, 100, 4096, 65536, 1 << 20] {
            let p = inclusion_probability(size, period);
            let w = sample_weights(size, period);
            assert!((p * w.objects - 1.0).abs() < 1e-9);
            assert!((p * w.bytes - size as f64).abs() < 1e-6 * size as f64);
            let variance = p * w.objects * w.objects - 1.0;
            assert!((p * w.objects_variance - variance).abs() < 1e-6 * variance.max(1e-9));
        }
    }
}
