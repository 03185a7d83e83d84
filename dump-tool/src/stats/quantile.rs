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

/// The 97.5 % quantile of the gamma distribution of `shape` (> 0) and
/// scale 1.
pub fn upper_point(shape: f64) -> f64 {
    const LEVEL: f64 = 0.975;
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
}
