//! When to sample: the exponential byte countdown.
//!
//! Each thread counts down a random number of bytes drawn from a geometric
//! distribution with mean R = 2^`lg_prof_sample` (jemalloc's scheme); an
//! allocation of `s` bytes uses up `s + 1` of them (so that `malloc(0)` is
//! sampled too), the allocation that brings the countdown to zero or below
//! is sampled and a new countdown is drawn. Because the distribution is
//! memoryless, an allocation of `s` bytes is sampled with probability
//! `1 - (1 - 1/R)^(s+1)` whatever came before it, which is what the
//! reader's correction assumes (`heapsample_format::SamplingLaw`).
//!
//! The generator is a per-thread SplitMix64 (8 bytes of state so it fits the
//! hot line of the TLS block; hand-written because the `rand` crate's small
//! generators need 16–32 bytes). Runs inside malloc: no allocation, no locks.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use heapsample_format::SamplingLaw;

/// log2 of the period; 0 samples every allocation.
static LG_PERIOD: AtomicU32 = AtomicU32::new(19);
/// The law of the current period, as [`SamplingLaw::to_bits`] (its
/// logarithm computed once, here, not at each sample event); the initial
/// bits are those of `SamplingLaw::new(1)`, replaced at start-up.
static LAW: AtomicU64 = AtomicU64::new(0);

/// Set the sampling period to 2^`lg` bytes.
pub fn set_lg_period(lg: u32) {
    LAW.store(SamplingLaw::new(1u64 << lg.min(62)).to_bits(), Relaxed);
    LG_PERIOD.store(lg, Relaxed);
}

/// The sampling law of the current period.
#[inline]
fn law() -> SamplingLaw {
    SamplingLaw::from_bits(LAW.load(Relaxed))
}

/// log2 of the current period.
pub fn lg_period() -> u32 {
    LG_PERIOD.load(Relaxed)
}

/// True when the period is 1 byte: every allocation is sampled, with
/// probability 1. Fixed for the process's life once the options are read.
#[inline]
pub fn samples_every_allocation() -> bool {
    lg_period() == 0
}

/// True at periods of at most 4 KiB, where a thread captures stacks often
/// enough that copying the shared unwind rules it uses into its private
/// cache pays (at longer periods a forked child would only pay the
/// copy-on-write faults of the private cache's pages).
pub fn samples_often() -> bool {
    lg_period() <= 12
}

/// The current period in bytes.
pub fn period() -> u64 {
    1u64 << lg_period().min(62)
}

/// Advance a SplitMix64 state and return the next 64 random bits.
#[inline]
pub fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in (0, 1].
fn uniform_open_closed(state: &mut u64) -> f64 {
    let bits = next_random(state) >> 11; // 53 bits
    (bits + 1) as f64 / (1u64 << 53) as f64
}

/// Draw the bytes until the next sample: geometric with mean R, at least 1;
/// 0 when every allocation is sampled.
pub fn draw_interval(state: &mut u64) -> i64 {
    let law = law();
    if law.samples_everything() {
        return 0;
    }
    law.bytes_until_sample(uniform_open_closed(state))
}

/// True with probability `1 - (1 - 1/R)^size`: an independent sampling
/// decision with the same law as the countdown, used where the countdown
/// cannot be kept (threads that are exiting).
pub fn sample_independently(state: &mut u64, size: usize) -> bool {
    let law = law();
    if law.samples_everything() {
        return true;
    }
    uniform_open_closed(state) > law.keep_probability(size as u64)
}

/// The probability that an allocation of `size` bytes is sampled at the
/// current period ([`SamplingLaw::inclusion_probability`]).
#[inline]
pub fn inclusion_probability(size: u64) -> f64 {
    law().inclusion_probability(size)
}

/// A seed for a new thread's generator, distinct per thread and per run,
/// made without allocating or calling the kernel.
pub fn seed(thread_address: usize, serial: u32) -> u64 {
    let ticks = crate::arch::counter_ticks();
    let mut state = ticks ^ (thread_address as u64).rotate_left(32) ^ u64::from(serial) << 7;
    next_random(&mut state) | 1
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Held by every test that changes the process-wide period.
    pub(crate) static PERIOD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn intervals_have_the_configured_mean() {
        let _period = PERIOD_LOCK.lock();
        set_lg_period(12);
        let mut state = 12345;
        let draws = 200_000;
        let sum: i64 = (0..draws).map(|_| draw_interval(&mut state)).sum();
        let mean = sum as f64 / draws as f64;
        // Geometric with mean R = 4096 has sd ≈ R; the mean of n draws has
        // sd R/sqrt(n) ≈ 9.2; allow 6 sd.
        assert!(
            (mean - 4096.0).abs() < 6.0 * 4096.0 / (draws as f64).sqrt(),
            "mean {mean}"
        );
        set_lg_period(0);
        assert_eq!(draw_interval(&mut state), 0);
        // The period is process-wide: the probability check runs here, in
        // the one test that changes it.
        for lg in [0, 1, 12, 19, 30] {
            set_lg_period(lg);
            for size in [0u64, 1, 100, 4096, 1 << 20, 1 << 40] {
                assert_eq!(
                    inclusion_probability(size),
                    heapsample_format::inclusion_probability(size, period()),
                    "lg {lg} size {size}"
                );
            }
        }
        set_lg_period(19);
    }
}
