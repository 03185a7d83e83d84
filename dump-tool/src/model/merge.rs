//! Many profiles (processes or hosts running the same program) pooled into
//! one, for `heapdiff merge`.
//!
//! Owns the merge rule: every dump is corrected with its own sampling
//! period first (so the profiles arrive built), then the samples are
//! pooled, estimates and variances (independent processes) add, thread
//! serials are renumbered so no two processes share one, and the exact
//! counters are summed. Never changes how a single dump is read or
//! corrected.

use super::metric::Values;
use super::profile::Profile;
use heapsample_format::{ThreadInfo, Totals};

/// The profiles pooled into one; the first one's origin and period stand
/// for the whole (an empty list gives an empty profile of period 1).
pub fn merged(mut profiles: Vec<Profile>) -> Profile {
    let (mut estimated, mut variance, mut sampled) =
        (Values::default(), Values::default(), Values::default());
    for profile in &profiles {
        estimated.add(&profile.estimated);
        variance.add(&profile.variance);
        sampled.add(&profile.sampled);
    }
    let threads = renumber_threads(&mut profiles);
    Profile {
        threads,
        period: profiles.first().map_or(1, |p| p.period),
        totals: sum_totals(profiles.iter().map(|p| &p.totals)),
        origin: profiles
            .first()
            .map(|p| p.origin.clone())
            .unwrap_or_default(),
        samples: profiles.into_iter().flat_map(|p| p.samples).collect(),
        estimated,
        variance,
        sampled,
    }
}

/// Thread serials are per process: shift each profile's past the previous
/// ones' (in its samples and its thread list); returns every thread.
fn renumber_threads(profiles: &mut [Profile]) -> Vec<ThreadInfo> {
    let mut threads = Vec::new();
    let mut offset = 0;
    for profile in profiles {
        for sample in &mut profile.samples {
            sample.thread += offset;
        }
        threads.extend(profile.threads.iter().map(|t| ThreadInfo {
            serial: t.serial + offset,
            ..t.clone()
        }));
        offset += profile.threads.iter().map(|t| t.serial).max().unwrap_or(0) + 1;
    }
    threads
}

/// Exact counters of several processes added up; a counter recorded by
/// some dumps only is the sum of those that recorded it.
pub fn sum_totals<'a>(all: impl IntoIterator<Item = &'a Totals>) -> Totals {
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    let mut sum = Totals::default();
    for t in all {
        sum.allocations += t.allocations;
        sum.frees = add(sum.frees, t.frees);
        sum.bytes_allocated += t.bytes_allocated;
        sum.live_usable_bytes = add(sum.live_usable_bytes, t.live_usable_bytes);
        sum.samples_taken += t.samples_taken;
        sum.samples_dropped += t.samples_dropped;
        sum.samples_live += t.samples_live;
        sum.threads_seen += t.threads_seen;
        sum.profiler_bytes += t.profiler_bytes;
        sum.resets += t.resets;
    }
    sum
}
