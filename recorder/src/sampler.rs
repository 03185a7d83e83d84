//! One thread's sampling countdown: the only code that changes it.
//!
//! Owns the countdown's layout (the assembly fast path reads and writes
//! [`Sampler::countdown`] at [`COUNTDOWN_OFFSET`]), the crossing test,
//! re-arming with a fresh draw, the byte count the triggers read, and the
//! `prof_exact` swap: under `prof_exact` the fast path's countdown is kept
//! at 0 so that every allocation takes the exact path, and the real
//! countdown is *parked* beside it; the exact path consumes the parked one
//! and, at a crossing, swaps it in around the ordinary crossing logic
//! ([`Sampler::unpark`] / [`Sampler::park`]).
//!
//! Only the owning thread changes a sampler (plain relaxed loads and
//! stores, no read-modify-write); other threads only read
//! [`Sampler::bytes_allocated`] for the dump. Runs inside malloc: no
//! allocation, no lock, no call but the generator's arithmetic.

use core::mem::offset_of;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use crate::sampling;

/// The countdown of one thread: 32 bytes at the start of its hot TLS line.
#[repr(C)]
pub struct Sampler {
    /// Bytes left before the next sampled allocation; the allocation that
    /// brings it to zero or below is sampled. At rest it is positive, or 0
    /// for a thread not set up yet, past its exit flush, or under
    /// `prof_exact` (the assembly fast path compares it unsigned, so 0
    /// always takes the slow path).
    countdown: AtomicI64,
    /// Bytes allocated by the thread = `base - countdown` (wrapping), so the
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

    /// What the assembly fast path does: if `size` does not reach the
    /// countdown, consume it and return true; otherwise change nothing and
    /// return false (the allocation must take its route).
    #[inline(always)]
    pub fn take_without_crossing(&self, size: usize) -> bool {
        let countdown = self.countdown.load(Relaxed) as u64;
        if countdown > size as u64 {
            self.countdown
                .store((countdown - size as u64) as i64, Relaxed);
            return true;
        }
        false
    }

    /// Count an allocation of `size` bytes; true when it crossed the
    /// countdown (the sample event must run).
    #[inline(always)]
    pub fn count(&self, size: usize) -> bool {
        let remaining = self.countdown.load(Relaxed).wrapping_sub(size as i64);
        self.countdown.store(remaining, Relaxed);
        remaining <= 0
    }

    /// Bytes the thread has allocated since it was set up (or last folded).
    pub fn bytes_allocated(&self) -> u64 {
        self.base
            .load(Relaxed)
            .wrapping_sub(self.countdown.load(Relaxed) as u64)
    }

    /// Return [`Sampler::bytes_allocated`] and restart it from 0 (a thread's
    /// counts are folded into the process totals).
    pub fn take_bytes_allocated(&self) -> u64 {
        let allocated = self.bytes_allocated();
        self.base
            .store(self.countdown.load(Relaxed) as u64, Relaxed);
        allocated
    }

    /// Start a new countdown of `countdown` bytes, keeping
    /// [`Sampler::bytes_allocated`] unchanged.
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
    /// [`Sampler::bytes_allocated`] unchanged.
    #[inline(always)]
    pub fn restart_at_zero(&self) {
        self.set_countdown(0);
    }

    /// Draw the next interval with the thread's generator.
    fn draw(&self) -> i64 {
        let mut rng = self.rng.load(Relaxed);
        let interval = sampling::draw_interval(&mut rng);
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
            self.rng.store(sampling::seed(seed_source, 0), Relaxed);
        }
        let interval = self.draw().max(minimum);
        self.set_countdown(interval);
    }

    /// In a forked child, on the thread that forked: a generator of its own
    /// and fresh countdowns. Without this every child of one parent would
    /// draw the same intervals and sample the same allocations. The
    /// countdown in progress may be replaced by a fresh draw because it is
    /// memoryless; a countdown at 0 (a thread not set up, stopped, or under
    /// `prof_exact`) stays 0.
    #[inline]
    pub fn reseed_after_fork(&self, seed: u64) {
        if self.rng.load(Relaxed) == 0 {
            return;
        }
        self.rng.store(seed, Relaxed);
        if self.countdown.load(Relaxed) > 0 {
            let interval = self.draw();
            self.set_countdown(interval);
        }
        if self.parked.load(Relaxed) > 0 {
            let interval = self.draw();
            self.parked.store(interval, Relaxed);
        }
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
        let sampled = sampling::sample_independently(&mut rng, size);
        self.rng.store(rng, Relaxed);
        sampled
    }

    // ---- prof_exact ----

    /// `prof_exact`: if `size` does not reach the parked countdown, consume
    /// it and count the bytes (the fast path's countdown stays 0, so
    /// `bytes_allocated` is `base`); otherwise change nothing and return
    /// false (swap in with [`Sampler::unpark`]).
    #[inline(always)]
    pub fn exact_take_without_crossing(&self, size: usize) -> bool {
        let parked = self.parked.load(Relaxed);
        if parked > size as i64 {
            self.parked.store(parked - size as i64, Relaxed);
            self.base
                .store(self.base.load(Relaxed).wrapping_add(size as u64), Relaxed);
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
    fn take_without_crossing_mirrors_the_fast_path() {
        let sampler = Sampler::new();
        assert!(
            !sampler.take_without_crossing(0),
            "0 always takes the route"
        );
        sampler.set_countdown(100);
        assert!(sampler.take_without_crossing(99));
        assert!(
            !sampler.take_without_crossing(1),
            "reaching 0 is a crossing"
        );
        assert!(!sampler.take_without_crossing(usize::MAX), "no wrap");
        assert_eq!(sampler.bytes_allocated(), 99);
    }

    #[test]
    fn reseeding_after_fork_draws_anew_and_keeps_the_byte_count() {
        let sampler = Sampler::new();
        sampler.reseed_after_fork(12345);
        assert_eq!(
            sampler.countdown.load(Relaxed),
            0,
            "a thread not set up stays so"
        );
        assert!(!sampler.start(sampling::seed(1, 1)));
        assert!(sampler.take_without_crossing(100));
        let twin = Sampler::new();
        twin.countdown
            .store(sampler.countdown.load(Relaxed), Relaxed);
        twin.base.store(sampler.base.load(Relaxed), Relaxed);
        twin.rng.store(sampler.rng.load(Relaxed), Relaxed);
        let bytes = sampler.bytes_allocated();
        sampler.reseed_after_fork(sampling::seed(2, 2));
        twin.reseed_after_fork(sampling::seed(3, 3));
        assert_eq!(sampler.bytes_allocated(), bytes);
        assert_ne!(
            sampler.countdown.load(Relaxed),
            twin.countdown.load(Relaxed),
            "two children of one parent draw different countdowns"
        );
        assert!(sampler.countdown.load(Relaxed) > 0);
    }

    #[test]
    fn bytes_allocated_survive_rearming_and_folding() {
        let _period = sampling::tests::PERIOD_LOCK.lock();
        sampling::set_lg_period(12);
        let sampler = Sampler::new();
        sampler.start(12345);
        let mut total = 0u64;
        for size in [10usize, 5000, 70, 1 << 20, 3] {
            total += size as u64;
            if sampler.count(size) {
                sampler.rearm(0, 1);
                assert!(sampler.countdown.load(Relaxed) > 0);
            }
            assert_eq!(sampler.bytes_allocated(), total);
        }
        assert_eq!(sampler.take_bytes_allocated(), total);
        assert_eq!(sampler.bytes_allocated(), 0);
        sampling::set_lg_period(19);
    }

    #[test]
    fn the_exact_swap_keeps_the_fast_path_at_zero_and_counts_every_byte() {
        let _period = sampling::tests::PERIOD_LOCK.lock();
        sampling::set_lg_period(10);
        let sampler = Sampler::new();
        sampler.start(777);
        sampler.park();
        let mut total = 0u64;
        let mut crossings = 0;
        for _ in 0..10_000 {
            total += 100;
            if !sampler.exact_take_without_crossing(100) {
                sampler.unpark();
                if sampler.count(100) {
                    crossings += 1;
                    sampler.rearm(0, 1);
                }
                sampler.park();
            }
            assert_eq!(sampler.countdown.load(Relaxed), 0, "fast path stays off");
            assert_eq!(sampler.bytes_allocated(), total);
        }
        // 1,000,000 bytes at a mean period of 1024: about 977 crossings
        // (Poisson-like, sd ~31); allow 6 sd.
        assert!((977 - 190..=977 + 190).contains(&crossings), "{crossings}");
        sampler.stop();
        assert!(!sampler.exact_take_without_crossing(1));
        assert!(!sampler.take_without_crossing(1));
        sampling::set_lg_period(19);
    }
}
