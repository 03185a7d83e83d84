//! Lifetimes of freed samples: the log-scale buckets a stack's lifetime
//! distribution is kept in, shared by the shim (which counts a freed sample
//! in its bucket) and the reader (which names the buckets' bounds).
//!
//! Bucket 0 holds lifetimes under 1 µs; bucket `k` (1 ≤ k ≤ 34) those in
//! [2^(k−1), 2^k) µs; bucket 35 those of 2^34 µs (4.8 hours) and more.
//! Powers of two of microseconds give a threshold such as "freed within
//! 1 ms" (1.024 ms) a bucket edge, from a microsecond to hours.
//!
//! Pure arithmetic: no allocation, no lock (the shim calls it inside free).

use crate::weights::Weights;
use serde::{Deserialize, Serialize};

/// Number of lifetime buckets.
pub const LIFETIME_BUCKETS: usize = 36;

/// The bucket of a lifetime of `nanoseconds`.
#[inline]
pub fn lifetime_bucket(nanoseconds: u64) -> usize {
    let microseconds = nanoseconds / 1000;
    let bits = (u64::BITS - microseconds.leading_zeros()) as usize;
    bits.min(LIFETIME_BUCKETS - 1)
}

/// The lifetimes bucket `bucket` holds, in nanoseconds: `[low, high)`,
/// `high` None for the last (open) bucket. None for a bucket that does not
/// exist.
pub fn bucket_bounds_ns(bucket: usize) -> Option<(u64, Option<u64>)> {
    match bucket {
        0 => Some((0, Some(1000))),
        b if b < LIFETIME_BUCKETS - 1 => Some((1000 << (b - 1), Some(1000 << b))),
        b if b == LIFETIME_BUCKETS - 1 => Some((1000 << (b - 1), None)),
        _ => None,
    }
}

/// The freed samples of one stack whose lifetimes fell in one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LifetimeBucket {
    /// The bucket ([`lifetime_bucket`]).
    pub bucket: u8,
    /// Sampled objects freed with such lifetimes.
    pub samples: u64,
    /// Their requested bytes.
    pub sampled_bytes: u64,
    /// Their Horvitz–Thompson sums: estimates of all the objects (and
    /// bytes) allocated at the stack and freed with such lifetimes, with
    /// their variances.
    pub weights: Weights,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_of_microseconds() {
        assert_eq!(lifetime_bucket(0), 0);
        assert_eq!(lifetime_bucket(999), 0);
        assert_eq!(lifetime_bucket(1000), 1);
        assert_eq!(lifetime_bucket(1999), 1);
        assert_eq!(lifetime_bucket(2000), 2);
        assert_eq!(lifetime_bucket(1_024_000), 11); // [1.024 ms, 2.048 ms)
        assert_eq!(lifetime_bucket(3_600_000_000_000), 32); // an hour
        assert_eq!(lifetime_bucket(u64::MAX), LIFETIME_BUCKETS - 1);
        for bucket in 0..LIFETIME_BUCKETS {
            let (low, high) = bucket_bounds_ns(bucket).unwrap();
            assert_eq!(lifetime_bucket(low), bucket);
            if let Some(high) = high {
                assert_eq!(lifetime_bucket(high - 1), bucket);
                assert_eq!(lifetime_bucket(high), bucket + 1);
            }
        }
        assert_eq!(bucket_bounds_ns(LIFETIME_BUCKETS), None);
    }
}
