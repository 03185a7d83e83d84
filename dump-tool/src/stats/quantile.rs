//! The quantiles the intervals of [`super::estimate`] use: the normal
//! law's 97.5 % point ([`Z95`]) and the gamma law's ([`upper_point`]).
//!
//! Newton's method on the regularized incomplete gamma function (statrs'
//! `gamma_lr`), started from the Wilson–Hilferty approximation and kept
//! inside a bracket; shapes of 1000 and more take Wilson–Hilferty itself
//! (relative error under 5·10⁻⁷ there, and falling). statrs' own
//! `inverse_cdf` bisects from [1, 2] and takes milliseconds on the shapes
//! a large profile has. The viewer's script (`assets/stats.js`) computes
//! the same point the same way; the shared test vectors check that both
//! agree.

use statrs::function::gamma::{gamma_lr, ln_gamma};

/// The two-sided 95 % quantile of the standard normal distribution.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Shapes from which Wilson–Hilferty is used as it is.
const LARGE_SHAPE: f64 = 1000.0;

/// Shapes under which the point is `(0.975·Γ(1 + k))^(1/k)`, where the
/// law's distribution function is `x^k/Γ(1 + k)` to within `x`.
const TINY_SHAPE: f64 = 1e-3;

/// The 97.5 % quantile of the gamma distribution of `shape` and scale 1;
/// 0 for a shape that is not positive (the limit as it goes to 0, what a
/// degenerate or subnormal weight gives), never a panic (statrs'
/// `gamma_lr` panics outside its domain).
pub fn upper_point(shape: f64) -> f64 {
    const LEVEL: f64 = 0.975;
    if shape.is_nan() || shape <= 0.0 {
        return 0.0;
    }
    if shape < TINY_SHAPE {
        return ((LEVEL.ln() + ln_gamma(1.0 + shape)) / shape).exp();
    }
    if shape.is_infinite() {
        return shape;
    }
    let start = wilson_hilferty(shape);
    if shape >= LARGE_SHAPE {
        return start;
    }
    let density = |x: f64| ((shape - 1.0) * x.ln() - x - ln_gamma(shape)).exp();
    let (mut low, mut high) = (0.0_f64, f64::INFINITY);
    let mut x = if start > 0.0 { start } else { shape };
    for _ in 0..100 {
        let error = gamma_lr(shape, x) - LEVEL;
        if error < 0.0 {
            low = x;
        } else {
            high = x;
        }
        let mut next = x - error / density(x);
        if !(next > low && next < high) {
            next = if high.is_finite() {
                (low + high) / 2.0
            } else {
                2.0 * x
            };
        }
        if (next - x).abs() <= 1e-14 * x {
            return next;
        }
        x = next;
    }
    x
}

/// `k·(1 − 1/(9k) + z·√(1/(9k)))³`, z the 97.5 % normal point.
fn wilson_hilferty(shape: f64) -> f64 {
    let c = 1.0 / (9.0 * shape);
    shape * (1.0 - c + Z95 * c.sqrt()).powi(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_points() {
        // Shape 1 is the exponential law: −ln(0.025).
        assert!((upper_point(1.0) - 3.688_879_454_113_936).abs() < 1e-12);
        // χ² with 2k degrees of freedom is 2·Gamma(k): χ²(0.975; 4) =
        // 11.143286781877793, χ²(0.975; 20) = 34.169606902838.
        assert!((2.0 * upper_point(2.0) - 11.143_286_781_877_793).abs() < 1e-10);
        assert!((2.0 * upper_point(10.0) - 34.169_606_902_838).abs() < 1e-9);
        // Small shapes, where Wilson–Hilferty is far off, and the handover.
        for shape in [0.05, 0.3, 1.5, 37.0, 999.0] {
            let x = upper_point(shape);
            assert!((gamma_lr(shape, x) - 0.975).abs() < 1e-12, "{shape}: {x}");
        }
        for shape in [1000.0, 1e4, 1e8] {
            let x = upper_point(shape);
            assert!((gamma_lr(shape, x) - 0.975).abs() < 1e-6, "{shape}: {x}");
        }
    }

    #[test]
    fn subnormal_and_degenerate_shapes() {
        // A weight of 5e-324 (subnormal) makes shapes of that order or 0.
        for shape in [5e-324, 0.0, -1.0, f64::NAN, 1e-300] {
            let x = upper_point(shape);
            assert!(x.is_finite() && x >= 0.0, "{shape}: {x}");
        }
        assert_eq!(upper_point(f64::INFINITY), f64::INFINITY);
        // Just under the handover the closed form agrees with the exact
        // point just over it (the point is ~10⁻¹¹ there).
        let (below, above) = (upper_point(0.999e-3), upper_point(1.001e-3));
        assert!(below > 0.0 && below < above, "{below} {above}");
        assert!((gamma_lr(0.999e-3, below) - 0.975).abs() < 1e-4);
    }

    #[test]
    fn tiny_shapes_meet_the_exact_point() {
        for shape in [2e-3, 1e-2] {
            let x = upper_point(shape);
            assert!((gamma_lr(shape, x) - 0.975).abs() < 1e-6, "{shape}: {x}");
        }
    }
}
