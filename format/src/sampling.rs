//! The sampling law ([`SamplingLaw`]) and the Horvitz–Thompson weights of a
//! sample ([`sample_weights`]), used by the shim inside malloc and by the
//! reader.
//!
//! Pure arithmetic: no allocation, no lock, no I/O; `libm` rather than
//! `libm.so`, so the shim does not make every profiled program load it.

use crate::weights::Weights;

/// What the countdown counts for one call beside its requested bytes, from
/// format 4 on: an allocation of `s` bytes uses up `s + 1` bytes of the
/// countdown, so a zero-byte request (`malloc(0)`) is sampled like any
/// other, with probability `1 − (1 − 1/R)`, and weighed by its own `1/p`
/// (keeping 0 bytes requested). Dumps of formats 2 and 3 counted `s`
/// ([`SamplingLaw::with_bytes_per_call`] with 0), under which an empty
/// request was never sampled.
pub const BYTES_PER_CALL: u64 = 1;

/// The sampler's law for a mean period of `R` bytes, in one place for the
/// shim (which draws countdowns and weighs samples with it) and the reader
/// (which corrects with it): the bytes until the next sample are geometric
/// with mean `R`, an allocation of `s` bytes uses up `u = s +`
/// [`BYTES_PER_CALL`] of them, so it is sampled with probability
/// `1 − (1 − 1/R)^u` whatever came before it (the law is memoryless).
///
/// Holds `ln(1 − 1/R)`, computed once: the shim caches it (as
/// [`SamplingLaw::to_bits`] in an atomic) so that a sample event takes no
/// logarithm. Pure arithmetic: no allocation, no lock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingLaw {
    /// `ln(1 − 1/R)` (negative); 0 when every allocation is sampled (`R ≤ 1`).
    ln_keep: f64,
    /// Bytes of the countdown a call uses up beside its request.
    per_call: u64,
}

impl SamplingLaw {
    /// The law of a mean period of `period` bytes, as the shim samples now.
    pub fn new(period: u64) -> SamplingLaw {
        SamplingLaw::with_bytes_per_call(period, BYTES_PER_CALL)
    }

    /// The law of a mean period of `period` bytes under which a call uses up
    /// its request plus `per_call` bytes of the countdown (a dump's
    /// [`Dump::bytes_per_call`](crate::Dump::bytes_per_call)).
    pub fn with_bytes_per_call(period: u64, per_call: u64) -> SamplingLaw {
        let ln_keep = if period <= 1 {
            0.0
        } else {
            libm::log1p(-1.0 / period as f64)
        };
        SamplingLaw { ln_keep, per_call }
    }

    /// The law as 64 bits, to keep in an atomic ([`SamplingLaw::from_bits`]).
    pub fn to_bits(self) -> u64 {
        self.ln_keep.to_bits()
    }

    /// The law (of the shim's own [`BYTES_PER_CALL`]) that
    /// [`SamplingLaw::to_bits`] gave `bits` for.
    pub fn from_bits(bits: u64) -> SamplingLaw {
        SamplingLaw {
            ln_keep: f64::from_bits(bits),
            per_call: BYTES_PER_CALL,
        }
    }

    /// True when every allocation is sampled (`R ≤ 1`).
    #[inline]
    pub fn samples_everything(self) -> bool {
        self.ln_keep == 0.0
    }

    /// The countdown bytes an allocation of `size` bytes uses up.
    #[inline]
    pub fn units(self, size: u64) -> u64 {
        size.saturating_add(self.per_call)
    }

    /// The probability that an allocation of `size` bytes is sampled,
    /// `1 − (1 − 1/R)^u` with `u` its [`SamplingLaw::units`]
    /// (≈ `1 − exp(−u/R)`): 1 when every allocation is and, by convention,
    /// for a call that uses up nothing (an empty request before format 4,
    /// which the countdown never picked).
    #[inline]
    pub fn inclusion_probability(self, size: u64) -> f64 {
        let units = self.units(size);
        if self.samples_everything() || units == 0 {
            return 1.0;
        }
        (-libm::expm1(units as f64 * self.ln_keep)).clamp(f64::MIN_POSITIVE, 1.0)
    }

    /// The probability that an allocation of `size` bytes is not sampled,
    /// `(1 − 1/R)^u`.
    pub fn keep_probability(self, size: u64) -> f64 {
        libm::exp(self.ln_keep * self.units(size) as f64)
    }

    /// What one sampled object of `size` bytes adds to its stack's
    /// [`Weights`] under this law.
    pub fn weights(self, size: u64) -> Weights {
        weights_with_probability(size, self.inclusion_probability(size))
    }

    /// The countdown bytes until the next sample for `uniform` drawn in
    /// (0, 1]: geometric with mean `R`, at least 1 (0 when every
    /// allocation is sampled), capped at `i64::MAX / 4`. The countdown ends
    /// within `u` bytes exactly when `uniform > (1 − 1/R)^u`, with
    /// probability [`SamplingLaw::inclusion_probability`] of a request of
    /// `u −` [`BYTES_PER_CALL`] bytes.
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

/// What one sampled object of `size` bytes adds to a stack's [`Weights`]
/// ([`SamplingLaw::weights`]). Pure arithmetic (no allocation, no lock):
/// the shim calls it inside malloc at each sample event, and again with the
/// same size when the object is freed, so a free removes exactly what its
/// allocation added.
pub fn sample_weights(size: u64, period: u64) -> Weights {
    SamplingLaw::new(period).weights(size)
}

/// The grid the estimates of one sample lie on: objects in multiples of
/// 2^−20, bytes in multiples of 2^−10. Sums of values on a grid are exact in
/// `f64` (no rounding, so in any order) while they stay below 2^53 grid
/// steps: 2^33 objects, 2^43 bytes. So a stack's live sums, which samples
/// add to and frees take from in any order, return exactly to what the
/// samples still live add up to, and to a whole number where that is one
/// (jemalloc-style float sums kept residues such as 8.000000000000002
/// objects). The rounding moves one sample's estimate by at most 2^−21
/// objects and 2^−11 bytes.
pub const OBJECTS_GRID: f64 = 1.0 / (1u64 << 20) as f64;
/// See [`OBJECTS_GRID`].
pub const BYTES_GRID: f64 = 1.0 / (1u64 << 10) as f64;

/// `value` rounded to a multiple of `grid` (a power of two), unless it is
/// too large to lie on it exactly.
fn on_grid(value: f64, grid: f64) -> f64 {
    let steps = value / grid;
    if steps < (1u64 << 53) as f64 {
        libm::round(steps) * grid
    } else {
        value
    }
}

/// [`sample_weights`] for an object of `size` bytes sampled with
/// probability `p`: the estimates on their grids ([`OBJECTS_GRID`]), the
/// variances as computed.
pub fn weights_with_probability(size: u64, p: f64) -> Weights {
    let weight = 1.0 / p;
    let spread = (1.0 - p) / (p * p);
    let bytes = size as f64;
    Weights {
        objects: on_grid(weight, OBJECTS_GRID),
        bytes: on_grid(bytes * weight, BYTES_GRID),
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
        // p = 1 − (1 − 1/R)^(s + 1).
        let period = 1u64 << 19;
        let p = 1.0 - (1.0 - 1.0 / period as f64).powf(101.0);
        let w = sample_weights(100, period);
        assert!((w.objects - 1.0 / p).abs() < 1e-6 * w.objects);
        assert!((w.bytes - 100.0 / p).abs() < 1e-6 * w.bytes);
        assert!((w.objects_variance - (1.0 - p) / (p * p)).abs() < 1e-6 * w.objects_variance);
        assert!((w.bytes_variance - 1e4 * (1.0 - p) / (p * p)).abs() < 1e-6 * w.bytes_variance);
        // Huge objects are (almost) always sampled: weight 1, no variance.
        let huge = sample_weights(64 << 20, period);
        assert!((huge.objects - 1.0).abs() < 1e-12 && huge.objects_variance < 1e-12);
        // An empty request weighs like a call of one byte (1/p = R), with
        // no bytes.
        let empty = sample_weights(0, period);
        assert!((empty.objects - period as f64).abs() < 1.0, "{empty:?}");
        assert_eq!(empty.bytes, 0.0);
        // Before format 4 a call used up only its request.
        let legacy = SamplingLaw::with_bytes_per_call(period, 0);
        assert_eq!(legacy.inclusion_probability(0), 1.0);
        let p = 1.0 - (1.0 - 1.0 / period as f64).powf(100.0);
        assert!((legacy.inclusion_probability(100) - p).abs() < 1e-12);
    }

    #[test]
    fn estimates_lie_on_their_grid_so_sums_come_back_exactly() {
        let law = SamplingLaw::new(1 << 14);
        let sizes = [1u64, 7, 100, 333, 4096, 12_345, 100_000, 1 << 22];
        let weights: Vec<Weights> = sizes.iter().map(|&s| law.weights(s)).collect();
        let mut sum = Weights::default();
        for w in &weights {
            assert_eq!(w.objects % OBJECTS_GRID, 0.0);
            assert_eq!(w.bytes % BYTES_GRID, 0.0);
            sum = sum.plus(w);
        }
        // Take them out in another order: what is left is exactly the rest.
        for w in weights[1..].iter().rev() {
            sum.objects -= w.objects;
            sum.bytes -= w.bytes;
        }
        assert_eq!(sum.objects, weights[0].objects);
        assert_eq!(sum.bytes, weights[0].bytes);
        // Objects sampled with certainty weigh exactly 1.
        assert_eq!(law.weights(1 << 30).objects, 1.0);
    }

    #[test]
    fn the_countdown_ends_within_s_bytes_with_the_inclusion_probability() {
        // bytes_until_sample(x) <= u exactly when x > (1 - 1/R)^u (u the
        // units of a request): at the uniforms just above and below that
        // threshold the countdown falls on either side of u, so
        // P(countdown <= u) = inclusion_probability.
        for period in [2u64, 4096, 1 << 19] {
            let law = SamplingLaw::new(period);
            assert_eq!(SamplingLaw::from_bits(law.to_bits()), law);
            for size in [0u64, 1, 100, 4096, 1 << 20] {
                let keep = law.keep_probability(size);
                let p = law.inclusion_probability(size);
                assert!((p + keep - 1.0).abs() < 1e-12, "R {period} s {size}");
                let units = law.units(size) as i64;
                let above = (keep * (1.0 + 1e-9)).min(1.0);
                let below = keep * (1.0 - 1e-9);
                if above > keep {
                    assert!(law.bytes_until_sample(above) <= units);
                }
                assert!(law.bytes_until_sample(below) > units);
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
            // Unbiased up to the grid: a sample's estimate moves by at most
            // half a step.
            assert!((p * w.objects - 1.0).abs() <= p * OBJECTS_GRID / 2.0 + 1e-12);
            assert!((p * w.bytes - size as f64).abs() <= p * BYTES_GRID / 2.0 + 1e-9);
            let variance = p / (p * p) - 1.0;
            assert!((p * w.objects_variance - variance).abs() < 1e-6 * variance.max(1e-9));
        }
    }
}
