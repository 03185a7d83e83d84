//! Sums that return to a whole number read as whole.
//!
//! A live sum is kept by adding each sample's weight at its allocation and
//! subtracting it at its free, in floating point: after the subtractions a
//! stack whose live objects are 8 may hold 8.000000000000002. Each addition
//! or subtraction rounds by at most half an ulp of the running total, and
//! no running total exceeds the sum of every weight ever added (the
//! cumulative sum), so after `n` operations the residue is at most
//! `n · ε · cumulative`. A value within that of a whole number is that
//! whole number. Pure arithmetic.

/// `sum`, kept by `operations` additions and subtractions of terms that
/// never added up to more than `largest`, with its rounding residue
/// removed when it is within that residue of a whole number.
pub fn whole_if_residue(sum: f64, largest: f64, operations: f64) -> f64 {
    let tolerance = f64::EPSILON * largest.abs() * operations.max(1.0);
    let whole = sum.round();
    if (sum - whole).abs() <= tolerance {
        whole
    } else {
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residue_returns_to_whole_numbers() {
        // 8 objects of weight 1, and four more added and freed again.
        let others = [0.1, 0.7, 2.3, 1.9];
        let mut live = 8.0;
        for weight in others {
            live += weight;
        }
        for weight in others {
            live -= weight;
        }
        let cumulative = 8.0 + others.iter().sum::<f64>();
        assert_ne!(live, 8.0, "the float sum leaves a residue");
        assert_eq!(whole_if_residue(live, cumulative, 16.0), 8.0);
        // Estimates that are not whole stay as they are.
        assert_eq!(whole_if_residue(2666.37, 5000.0, 1e4), 2666.37);
        assert_eq!(whole_if_residue(-1e-13, 1e3, 10.0), 0.0);
    }
}
