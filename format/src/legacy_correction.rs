//! The average-size correction that jeprof and pprof apply, and that
//! heapsample applied before its dumps carried per-sample weights: every
//! sampled object of a stack is taken to have the stack's average size.
//! Biased when a stack mixes sizes (it over-weights large objects); it
//! remains for format-2 dumps and for foreign profiles, which keep raw
//! counts only, so they read as they always did.

use crate::sampling::SamplingLaw;
use crate::weights::Weights;

/// Weights for a format-2 stack, which kept raw counts only: the old
/// correction, every sampled object taken to have the average size.
/// Biased when a stack mixes sizes (it over-weights large objects); kept
/// so that old dumps still read as they did.
pub fn legacy_weights(objects: u64, bytes: u64, period: u64) -> Weights {
    if objects == 0 {
        return Weights::default();
    }
    let average = (bytes as f64 / objects as f64).round() as u64;
    let one = SamplingLaw::with_bytes_per_call(period, 0).weights(average.max(1));
    let scale = unsample_scale(objects, bytes, period);
    let n = objects as f64;
    Weights {
        objects: n * scale,
        bytes: bytes as f64 * scale,
        objects_variance: n * one.objects_variance,
        bytes_variance: n * one.bytes_variance,
    }
}

/// Scale factor that turns sampled counts into estimates of the true counts.
///
/// An allocation of `s` bytes is sampled with probability `1 - exp(-s/R)`
/// where `R` is the mean sampling period (the countdown is exponential). For
/// a stack with `n` sampled objects totalling `b` bytes, the average object
/// size is `b/n` and both counts scale by `1 / (1 - exp(-(b/n)/R))`, the
/// correction jeprof and pprof apply. With `R == 1` (every allocation
/// sampled) the factor is exactly 1.
pub fn unsample_scale(objects: u64, bytes: u64, period: u64) -> f64 {
    if objects == 0 || period <= 1 {
        return 1.0;
    }
    let mean_size = bytes as f64 / objects as f64;
    let probability = -libm::expm1(-mean_size / period as f64);
    if probability <= 0.0 {
        return 1.0;
    }
    1.0 / probability
}

/// Estimated `(objects, bytes)` for sampled counts, see [`unsample_scale`].
pub fn unsample(objects: u64, bytes: u64, period: u64) -> (f64, f64) {
    let scale = unsample_scale(objects, bytes, period);
    (objects as f64 * scale, bytes as f64 * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsample_matches_formula() {
        assert_eq!(unsample(10, 1000, 1), (10.0, 1000.0));
        let (n, b) = unsample(1, 524288, 524288);
        let scale = 1.0 / (1.0 - (-1.0f64).exp());
        assert!((n - scale).abs() < 1e-9 && (b - 524288.0 * scale).abs() < 1e-6);
    }
}
