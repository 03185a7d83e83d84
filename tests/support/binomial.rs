//! The binomial law's lower tail, for the tests that count how often an
//! interval covers the truth over runs: the fewest covered runs a test may
//! accept, derived from the exact law rather than the normal approximation
//! (which is poor in the tail these bounds sit in).
//!
//! Pure arithmetic, in log space (no overflow for thousands of trials).

/// P(Bin(`n`, `p`) < `k`), summed exactly term by term.
pub fn binomial_below(n: usize, p: f64, k: usize) -> f64 {
    assert!((0.0..1.0).contains(&p), "p {p} must lie in [0, 1)");
    let (ln_p, ln_q) = (p.ln(), (1.0 - p).ln());
    // ln P(X = 0), then the ratio of successive terms.
    let mut ln_term = n as f64 * ln_q;
    let mut sum = 0.0;
    for j in 0..k.min(n + 1) {
        sum += ln_term.exp();
        ln_term += ((n - j) as f64).ln() - ((j + 1) as f64).ln() + ln_p - ln_q;
    }
    sum.min(1.0)
}

/// The most covered runs, out of `n`, that a test may demand of an
/// interval covering with probability `p` in each run while failing by
/// chance with probability at most `alpha`: the largest `k` with
/// P(Bin(n, p) < k) ≤ `alpha`.
pub fn least_count(n: usize, p: f64, alpha: f64) -> usize {
    let mut k = 0;
    while k < n && binomial_below(n, p, k + 1) <= alpha {
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_tails() {
        // P(Bin(200, 0.9475) < 176) = 5.721e-5 (scipy.stats.binom.cdf(175, ...)).
        let tail = binomial_below(200, 0.9475, 176);
        assert!((tail / 5.7214e-5 - 1.0).abs() < 1e-4, "{tail}");
        assert_eq!(binomial_below(10, 0.5, 0), 0.0);
        assert!((binomial_below(10, 0.5, 11) - 1.0).abs() < 1e-12);
        assert!((binomial_below(2, 0.5, 1) - 0.25).abs() < 1e-15);
        let k = least_count(200, 0.9475, 1e-5);
        assert!(binomial_below(200, 0.9475, k) <= 1e-5);
        assert!(binomial_below(200, 0.9475, k + 1) > 1e-5);
    }
}
