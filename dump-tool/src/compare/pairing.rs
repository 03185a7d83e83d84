//! Whether a base and a new profile are two moments of one process.
//!
//! Owns the decision [`pairing`] from the profiles' origins (their process
//! ids first) and exact counters; what a pairing means for a change's
//! interval is [`crate::stats::change`]'s.

use crate::model::Profile;
use crate::stats::Pairing;

/// The same process id (which dumps carry from format 4 on: a pid and an
/// executable are not enough, two containers' pid-1 processes share both),
/// the same pid and executable, the base written first (sequence number,
/// time), the same sampling period and number of resets, and cumulative
/// counters that did not go down: [`Pairing::SameProcess`]; anything else,
/// and every pair of dumps without a process id, is
/// [`Pairing::Independent`] (conservative for two dumps of one process).
pub fn pairing(base: &Profile, new: &Profile) -> Pairing {
    let (b, n) = (&base.origin, &new.origin);
    let (bt, nt) = (&base.totals, &new.totals);
    let same = b.process_id.is_some()
        && b.process_id == n.process_id
        && b.pid == n.pid
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::tests::unmapped_dump;
    use crate::model::{BuildOptions, Profile};
    use crate::symbols::LocationTable;

    fn profile(seq: u64, process_id: Option<u128>) -> Profile {
        let dump = heapsample_format::Dump {
            seq,
            pid: 1,
            ..unmapped_dump(vec![])
        };
        let mut profile = Profile::build(
            &dump,
            &crate::symbols::InternedStacks::default(),
            &LocationTable::default(),
            BuildOptions::default(),
        );
        profile.origin.process_id = process_id;
        profile
    }

    #[test]
    fn one_process_needs_one_process_id() {
        // Two pid-1 processes of one executable (two containers), no id.
        assert_eq!(
            pairing(&profile(1, None), &profile(2, None)),
            Pairing::Independent
        );
        assert_eq!(
            pairing(&profile(1, Some(7)), &profile(2, Some(8))),
            Pairing::Independent
        );
        assert_eq!(
            pairing(&profile(1, Some(7)), &profile(2, None)),
            Pairing::Independent
        );
        assert_eq!(
            pairing(&profile(1, Some(7)), &profile(2, Some(7))),
            Pairing::SameProcess
        );
        // The base must come first.
        assert_eq!(
            pairing(&profile(2, Some(7)), &profile(1, Some(7))),
            Pairing::Independent
        );
    }
}
