//! Whether a base and a new profile are two moments of one process.
//!
//! Owns the decision [`pairing`] from the profiles' origins and exact
//! counters; what a pairing means for a change's variance is
//! [`crate::stats::change`]'s.

use crate::model::Profile;
use crate::stats::Pairing;

/// Same pid and executable, the base written first (sequence number,
/// time), the same sampling period and number of resets, and cumulative
/// counters that did not go down: [`Pairing::SameProcess`]; anything else
/// is [`Pairing::Independent`].
pub fn pairing(base: &Profile, new: &Profile) -> Pairing {
    let (b, n) = (&base.origin, &new.origin);
    let (bt, nt) = (&base.totals, &new.totals);
    let same = b.pid == n.pid
        && b.executable == n.executable
        && base.period == new.period
        && b.seq < n.seq
        && b.time_unix_ns <= n.time_unix_ns
        && bt.resets == nt.resets
        && bt.samples_taken <= nt.samples_taken
        && bt.bytes_allocated <= nt.bytes_allocated
        && bt.allocations <= nt.allocations;
    if same {
        Pairing::SameProcess
    } else {
        Pairing::Independent
    }
}
