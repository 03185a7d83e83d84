//! One thread's sampling countdown: the only code that changes it.
//!
//! The countdown runs over *units*: an allocation of `s` bytes uses up
//! `s + 1` ([`units`]: the request plus
//! [`BYTES_PER_CALL`](heapsample_format::BYTES_PER_CALL)), so a zero-byte
//! request is sampled like any other, with its own probability.
//!
//! Owns the countdown's layout (the assembly fast path reads and writes
//! [`Sampler::countdown`] at [`COUNTDOWN_OFFSET`]: it takes an allocation's
//! units with one subtract-with-borrow on memory and, at a crossing, leaves
//! them taken for the route to give back, [`Sampler::give_back`]), the
//! crossing test, re-arming with a fresh draw, the units the triggers and
//! exact counters read (bytes plus calls), and the
//! `prof_exact` swap: under `prof_exact` the fast path's countdown is kept
//! at 0 so that every allocation takes the exact path, and the real
//! countdown is *parked* beside it; the exact path consumes the parked one
//! and, at a crossing, swaps it in around the ordinary crossing logic
//! ([`Sampler::unpark`] / [`Sampler::park`]).
//!
//! Only the owning thread changes a sampler (plain relaxed loads and
//! stores here; the fast path's one subtract on memory has no lock prefix);
//! other threads only read [`Sampler::units_used`] for the dump. Runs inside malloc: no
//! allocation, no lock, no call but the generator's arithmetic.

use core::mem::offset_of;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use crate::sampling_law;

/// The countdown units of an allocation of `size` bytes: `size + 1`
/// (wrapping: a request of `usize::MAX` bytes, which never succeeds, uses
/// up 0).
#[inline(always)]
pub fn units(size: usize) -> u64 {
    (size as u64).wrapping_add(heapsample_format::BYTES_PER_CALL)
}

const _: () = assert!(
    heapsample_format::BYTES_PER_CALL == 1,
    "the fast path's `stc; sbb` takes exactly one unit beside the request"
);

/// The countdown of one thread: 32 bytes at the start of its hot TLS line.
#[repr(C)]
pub struct Sampler {
    /// Units left before the next sampled allocation; the allocation that
    /// brings it to zero or below is sampled. At rest it is positive, or 0
    /// for a thread not set up yet, past its exit flush, or under
    /// `prof_exact` (the assembly fast path compares it unsigned, so 0
    /// always takes the slow path).
    countdown: AtomicI64,
    /// Units used up by the thread = `base - countdown` (wrapping), so the
    /// fast path needs to update only the countdown.
    base: AtomicU64,
    /// State of the thread's random generator (0 until the thread is set up).
    rng: AtomicU64,
    /// `prof_exact` only: the real countdown, while `countdown` stays 0.
    parked: AtomicI64,
}

/// Offset of the countdown in a [`Sampler`] (for the assembly fast path).
pub const COUNTDOWN_OFFSET: usize = offset_of!(Sampler, countdown);

/// The countdown given to an exiting thread: zero, so every allocation takes
/// the slow path, which counts it in the process totals.
const STOPPED: i64 = 0;

impl Sampler {
    /// A sampler of a thread not set up yet (all zero, as the loader leaves
    /// a new thread's TLS block).
    pub const fn new() -> Sampler {
        Sampler {
            countdown: AtomicI64::new(0),
            base: AtomicU64::new(0),
            rng: AtomicU64::new(0),
            parked: AtomicI64::new(0),
        }
    }

    /// What the assembly fast path does: take the units of `size` bytes
    /// from the countdown and return true if it stays positive (no
    /// crossing). At a crossing (false) the units stay taken: the route the
    /// caller then calls gives them back first ([`Sampler::give_back`]).
    #[inline(always)]
    pub fn take(&self, size: usize) -> bool {
        let countdown = self.countdown.load(Relaxed) as u64;
        self.countdown
            .store(countdown.wrapping_sub(units(size)) as i64, Relaxed);
        countdown
            .checked_sub(size as u64)
            .is_some_and(|left| left > 1)
    }

    /// Give back the units [`Sampler::take`] (or the assembly fast path)
    /// took for an allocation of `size` bytes that went to its route.
    #[inline(always)]
    pub fn give_back(&self, size: usize) {
        let countdown = self.countdown.load(Relaxed) as u64;
        self.countdown
            .store(countdown.wrapping_add(units(size)) as i64, Relaxed);
    }

    /// Count an allocation of `size` bytes; true when it crossed the
    /// countdown (the sample event must run).
    #[inline(always)]
    pub fn count(&self, size: usize) -> bool {
        let remaining = self
            .countdown
            .load(Relaxed)
            .wrapping_sub(units(size) as i64);
        self.countdown.store(remaining, Relaxed);
        remaining <= 0
    }

    /// Units the thread has used up since it was set up (or last folded):
    /// its bytes allocated plus its counted calls.
    pub fn units_used(&self) -> u64 {
        self.base
            .load(Relaxed)
            .wrapping_sub(self.countdown.load(Relaxed) as u64)
    }

    /// Return [`Sampler::units_used`] and restart it from 0 (a thread's
    /// counts are folded into the process totals).
    pub fn take_units_used(&self) -> u64 {
        let used = self.units_used();
        self.base
            .store(self.countdown.load(Relaxed) as u64, Relaxed);
        used
    }

    /// Start a new countdown of `countdown` units, keeping
    /// [`Sampler::units_used`] unchanged.
    #[inline(always)]
    fn set_countdown(&self, countdown: i64) {
        let remaining = self.countdown.load(Relaxed);
        let base = self.base.load(Relaxed);
        self.base.store(
            base.wrapping_sub(remaining as u64)
                .wrapping_add(countdown as u64),
            Relaxed,
        );
        self.countdown.store(countdown, Relaxed);
    }

    /// When every allocation is sampled: leave the countdown at 0 after a
    /// crossing (what re-arming with an interval of 0 does), keeping
    /// [`Sampler::units_used`] unchanged.
    #[inline(always)]
    pub fn restart_at_zero(&self) {
        self.set_countdown(0);
    }

    /// Draw the next interval with the thread's generator.
    fn draw(&self) -> i64 {
        let mut rng = self.rng.load(Relaxed);
        let interval = sampling_law::draw_interval(&mut rng);
        self.rng.store(rng, Relaxed);
        interval
    }

    /// A new thread's first crossing: seed the generator and start the first
    /// countdown with what the thread allocated so far already counted.
    /// Returns true if that already crosses it.
    pub fn start(&self, seed: u64) -> bool {
        self.rng.store(seed, Relaxed);
        let remaining = self.countdown.load(Relaxed) + self.draw();
        self.set_countdown(remaining);
        remaining <= 0
    }

    /// Draw a new countdown of at least `minimum` bytes (seeding the
    /// generator from `seed_source` if the thread has none yet).
    pub fn rearm(&self, minimum: i64, seed_source: usize) {
        if self.rng.load(Relaxed) == 0 {
            self.rng.store(sampling_law::seed(seed_source, 0), Relaxed);
        }
        let interval = self.draw().max(minimum);
        self.set_countdown(interval);
    }

    /// In a forked child, on the thread that forked: a generator of its own
    /// and fresh countdowns. Without this every child of one parent would
    /// draw the same intervals and sample the same allocations. The
    /// countdown in progress may be replaced by a fresh draw because it is
    /// memoryless, and that draw is left to the child's first allocation (a
    /// child that never allocates, one that calls `exec` at once, draws
    /// nothing: the generator's code and constants would cost it two page
    /// faults): the countdown becomes one unit, which that allocation
    /// crosses, and [`Sampler::redraw_after_fork`] then draws the real one
    /// with that allocation counted, which has the law of a draw made at the
    /// fork. Returns true when that redraw is due. A countdown at 0 (a
    /// thread not set up, stopped, or under `prof_exact`) stays 0; a parked
    /// countdown (`prof_exact`) is drawn at once.
    #[inline]
    pub fn reseed_after_fork(&self, seed: u64) -> bool {
        if self.rng.load(Relaxed) == 0 {
            return false;
        }
        self.rng.store(seed, Relaxed);
        if self.parked.load(Relaxed) > 0 {
            let interval = self.draw();
            self.parked.store(interval, Relaxed);
        }
        if self.countdown.load(Relaxed) > 0 {
            self.set_countdown(1);
            return true;
        }
        false
    }

    /// The draw [`Sampler::reseed_after_fork`] left to the first allocation
    /// since the fork, which has just crossed the one-unit countdown: start
    /// a fresh countdown with that allocation counted. True if it crosses
    /// that one too (the allocation is a sample).
    pub fn redraw_after_fork(&self) -> bool {
        let remaining = self.countdown.load(Relaxed) - 1 + self.draw();
        self.set_countdown(remaining);
        remaining <= 0
    }

    /// The thread is past its last exit flush: from now on every allocation
    /// takes the slow path (in every mode), which folds it at once.
    pub fn stop(&self) {
        self.set_countdown(STOPPED);
        self.parked.store(STOPPED, Relaxed);
    }

    /// An independent sampling decision with the countdown's law (for
    /// threads that are exiting, where no countdown is kept).
    pub fn sample_independently(&self, size: usize) -> bool {
        let mut rng = self.rng.load(Relaxed);
        let sampled = sampling_law::sample_independently(&mut rng, size);
        self.rng.store(rng, Relaxed);
        sampled
    }

    // ---- prof_exact ----

    /// `prof_exact`: if the units of `size` bytes do not reach the parked
    /// countdown, take them and count them (the fast path's countdown stays
    /// 0, so `units_used` is `base`); otherwise change nothing and return
    /// false (swap in with [`Sampler::unpark`]).
    #[inline(always)]
    pub fn exact_take_without_crossing(&self, size: usize) -> bool {
        // Signed: a parked countdown at or below 0 (not set up, stopped, or
        // a crossing not yet re-armed) never passes. The caller's size is
        // that of an allocation that succeeded, far below 2^63.
        let parked = self.parked.load(Relaxed);
        let units = units(size) as i64;
        if parked > units {
            self.parked.store(parked - units, Relaxed);
            self.base
                .store(self.base.load(Relaxed).wrapping_add(units as u64), Relaxed);
            return true;
        }
        false
    }

    /// `prof_exact`: make the parked countdown the live one, for the
    /// ordinary crossing logic. A nested call from inside the profiler
    /// finds 0 parked and draws afresh, which the memoryless countdown
    /// allows.
    pub fn unpark(&self) {
        self.set_countdown(self.parked.swap(0, Relaxed));
    }

    /// `prof_exact`: park the live countdown again and leave 0 for the fast
    /// path.
    pub fn park(&self) {
        let remaining = self.countdown.load(Relaxed);
        self.set_countdown(0);
        self.parked.store(remaining, Relaxed);
    }
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_mirrors_the_fast_path() {
        let sampler = Sampler::new();
        assert!(!sampler.take(0), "a countdown of 0 always takes the route");
        sampler.give_back(0);
        assert_eq!(sampler.countdown.load(Relaxed), 0, "given back whole");
        sampler.set_countdown(100);
        assert!(sampler.take(98), "99 units of 100");
        assert_eq!(sampler.countdown.load(Relaxed), 1);
        assert!(!sampler.take(0), "an empty request uses up the last unit");
        sampler.give_back(0);
        assert!(!sampler.take(usize::MAX), "no wrap");
        sampler.give_back(usize::MAX);
        assert_eq!(sampler.countdown.load(Relaxed), 1);
        assert_eq!(sampler.units_used(), 99);
    }

    #[test]
    fn empty_requests_cross_the_countdown_in_its_own_time() {
        let sampler = Sampler::new();
        sampler.set_countdown(3);
        assert!(sampler.take(0) && sampler.take(0));
        assert!(!sampler.take(0), "the third empty request is the crossing");
        sampler.give_back(0);
        assert!(sampler.count(0), "counted on the route, it crosses");
        assert_eq!(sampler.units_used(), 3);
    }

    #[test]
    fn reseeding_after_fork_draws_anew_and_keeps_the_byte_count() {
        let _period = sampling_law::tests::PERIOD_LOCK.lock();
        sampling_law::set_lg_period(19);
        let sampler = Sampler::new();
        sampler.reseed_after_fork(12345);
        assert_eq!(
            sampler.countdown.load(Relaxed),
            0,
            "a thread not set up stays so"
        );
        // Fixed seeds, not `sampling_law::seed` (which mixes in the clock's
        // ticks): with drawn ones, one of the two first allocations of 11
        // units after the fork would be sampled in 4·10⁻⁵ of the runs at
        // R = 2^19, failing `!redraw_after_fork()` by chance.
        assert!(!sampler.start(0x2545_f491_4f6c_dd1d));
        assert!(sampler.take(100));
        let twin = Sampler::new();
        twin.countdown
            .store(sampler.countdown.load(Relaxed), Relaxed);
        twin.base.store(sampler.base.load(Relaxed), Relaxed);
        twin.rng.store(sampler.rng.load(Relaxed), Relaxed);
        let used = sampler.units_used();
        assert!(sampler.reseed_after_fork(0x9e37_79b9_7f4a_7c15));
        assert!(twin.reseed_after_fork(0xbf58_476d_1ce4_e5b9));
        assert_eq!(sampler.units_used(), used);
        // The first allocation after the fork crosses the placeholder and
        // draws the countdown, counted in it.
        assert!(sampler.count(10) && twin.count(10));
        assert!(!sampler.redraw_after_fork() && !twin.redraw_after_fork());
        assert_eq!(sampler.units_used(), used + 11);
        assert_ne!(
            sampler.countdown.load(Relaxed),
            twin.countdown.load(Relaxed),
            "two children of one parent draw different countdowns"
        );
        assert!(sampler.countdown.load(Relaxed) > 0);
    }

    /// The countdown drawn at a child's first allocation has the law of one
    /// drawn at the fork: the first allocation of `size` bytes is sampled
    /// with probability 1 - (1 - 1/R)^(size + 1), and the countdown left
    /// after an unsampled one has mean R again (memoryless). 20,000 draws at R = 4,096
    /// and size 2,047: the sampled fraction (p ≈ 0.394) has a standard
    /// error of 0.0035 and is checked within 0.02 (5.8 standard errors), the
    /// mean of the unsampled countdowns (sd ≈ 4,096) within 250 (≈ 7
    /// standard errors of the mean): false failures below 1e-8.
    #[test]
    fn a_deferred_redraw_has_the_law_of_a_draw_at_the_fork() {
        let _period = sampling_law::tests::PERIOD_LOCK.lock();
        sampling_law::set_lg_period(12);
        let (mut sampled, mut left, mut unsampled) = (0u64, 0f64, 0u64);
        for child in 0..20_000u64 {
            let sampler = Sampler::new();
            sampler.start(sampling_law::seed(7, 1));
            assert!(
                sampler.reseed_after_fork(sampling_law::seed(child as usize, child as u32 + 2))
            );
            assert!(sampler.count(2047), "the placeholder is crossed");
            if sampler.redraw_after_fork() {
                sampled += 1;
            } else {
                unsampled += 1;
                left += sampler.countdown.load(Relaxed) as f64;
            }
        }
        let p = 1.0 - (1.0 - 1.0 / 4096f64).powi(2048);
        let fraction = sampled as f64 / 20_000.0;
        assert!(
            (fraction - p).abs() < 0.02,
            "sampled {fraction}, expected {p}"
        );
        let mean_left = left / unsampled as f64;
        assert!(
            (mean_left - 4096.0).abs() < 250.0,
            "mean countdown left {mean_left}"
        );
    }

    #[test]
    fn units_used_survive_rearming_and_folding() {
        let _period = sampling_law::tests::PERIOD_LOCK.lock();
        sampling_law::set_lg_period(12);
        let sampler = Sampler::new();
        sampler.start(12345);
        let mut total = 0u64;
        for size in [10usize, 5000, 0, 70, 1 << 20, 3] {
            total += size as u64 + 1;
            if sampler.count(size) {
                sampler.rearm(0, 1);
                assert!(sampler.countdown.load(Relaxed) > 0);
            }
            assert_eq!(sampler.units_used(), total);
        }
        assert_eq!(sampler.take_units_used(), total);
        assert_eq!(sampler.units_used(), 0);
        sampling_law::set_lg_period(19);
    }

    #[test]
    fn the_exact_swap_keeps_the_fast_path_at_zero_and_counts_every_byte() {
        let _period = sampling_law::tests::PERIOD_LOCK.lock();
        sampling_law::set_lg_period(10);
        let sampler = Sampler::new();
        sampler.start(777);
        sampler.park();
        let mut total = 0u64;
        let mut crossings = 0;
        for _ in 0..10_000 {
            total += 101;
            if !sampler.exact_take_without_crossing(100) {
                sampler.unpark();
                if sampler.count(100) {
                    crossings += 1;
                    sampler.rearm(0, 1);
                }
                sampler.park();
            }
            assert_eq!(sampler.countdown.load(Relaxed), 0, "fast path stays off");
            assert_eq!(sampler.units_used(), total);
        }
        // 1,010,000 units at a mean period of 1024: about 986 crossings
        // (Poisson-like, sd ~31); allow 6 sd.
        assert!((986 - 190..=986 + 190).contains(&crossings), "{crossings}");
        sampler.stop();
        assert!(!sampler.exact_take_without_crossing(1));
        assert!(!sampler.take(1));
        sampling_law::set_lg_period(19);
    }
}
