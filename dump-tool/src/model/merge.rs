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
use super::profile::{Profile, WholeValues};
use super::time::TimeInfo;
use heapsample_format::{ThreadInfo, Totals};

/// The profiles pooled into one; the first one's origin and period stand
/// for the whole (an empty list gives an empty profile of period 1), except
/// its process id: a pool of several is no one process, and is compared
/// with any dump as independent.
pub fn merged(mut profiles: Vec<Profile>) -> Profile {
    let (mut estimated, mut variance, mut sampled) =
        (Values::default(), Values::default(), Values::default());
    let mut whole = WholeValues::default();
    for profile in &profiles {
        whole.add(&profile.whole);
        estimated.add(&profile.estimated);
        variance.add(&profile.variance);
        sampled.add(&profile.sampled);
    }
    let threads = renumber_threads(&mut profiles);
    let time = merged_time(&profiles);
    let mut origin = profiles
        .first()
        .map(|p| p.origin.clone())
        .unwrap_or_default();
    if profiles.len() > 1 {
        origin.process_id = None;
    }
    Profile {
        whole,
        time,
        threads,
        period: profiles.first().map_or(1, |p| p.period),
        totals: sum_totals(profiles.iter().map(|p| &p.totals)),
        origin,
        samples: profiles.into_iter().flat_map(|p| p.samples).collect(),
        estimated,
        variance,
        sampled,
    }
}

/// The first profile's clocks; births and lifetimes only when every
/// profile has them; no peak (each process had its own).
fn merged_time(profiles: &[Profile]) -> TimeInfo {
    let mut time = profiles.first().map(|p| p.time.clone()).unwrap_or_default();
    time.births = profiles.iter().all(|p| p.time.births);
    time.lifetimes = profiles.iter().all(|p| p.time.lifetimes);
    if profiles.len() > 1 {
        time.peak = None;
    }
    time
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::BuildOptions;
    use crate::model::profile::tests::unmapped_dump;
    use crate::symbols::LocationTable;
    use heapsample_format::{Dump, Stack, sample_weights};

    /// A sampled stack (period 2^10) of `count` objects of `size` bytes on
    /// thread `thread`.
    fn stack(frames: &[u64], thread: u32, count: u64, size: u64) -> Stack {
        let mut weights = heapsample_format::Weights::default();
        for _ in 0..count {
            weights = weights.plus(&sample_weights(size, 1 << 10));
        }
        Stack {
            frames: frames.to_vec(),
            thread,
            live_objects: count,
            live_bytes: count * size,
            alloc_objects: count,
            alloc_bytes: count * size,
            live: weights,
            alloc: weights,
            ..Stack::default()
        }
    }

    fn thread(serial: u32, name: &str) -> ThreadInfo {
        ThreadInfo {
            serial,
            tid: 100 + serial,
            name: name.into(),
        }
    }

    fn profiles(dumps: &[Dump]) -> Vec<Profile> {
        let mut table = LocationTable::default();
        let stacks: Vec<_> = dumps.iter().map(|d| table.intern_dump(d)).collect();
        table.symbolize(&Default::default(), &mut |w| panic!("{w}"));
        dumps
            .iter()
            .zip(&stacks)
            .map(|(dump, stacks)| Profile::build(dump, stacks, &table, BuildOptions::default()))
            .collect()
    }

    /// Two sampled dumps of two processes (pids 1 and 2) of one program,
    /// with a `main` thread each and a stack they share.
    pub(crate) fn two_processes() -> Vec<Dump> {
        let one = Dump {
            lg_sample_period: 10,
            threads: vec![thread(1, "main"), thread(2, "worker")],
            ..unmapped_dump(vec![
                stack(&[0x10, 0x20], 1, 3, 100),
                stack(&[0x30], 2, 2, 5000),
            ])
        };
        let two = Dump {
            lg_sample_period: 10,
            pid: 2,
            threads: vec![thread(1, "main"), thread(3, "io")],
            ..unmapped_dump(vec![
                stack(&[0x10, 0x20], 1, 4, 100),
                stack(&[0x40], 3, 1, 64),
            ])
        };
        vec![one, two]
    }

    #[test]
    fn estimates_and_variances_of_independent_processes_add() {
        let mut parts = profiles(&two_processes());
        parts[0].origin.process_id = Some(7);
        let pooled = merged(parts.clone());
        let mut estimated = Values::default();
        let mut variance = Values::default();
        for part in &parts {
            estimated.add(&part.estimated);
            variance.add(&part.variance);
        }
        assert_eq!(pooled.estimated, estimated);
        assert_eq!(pooled.variance, variance);
        assert!(variance.inuse_space > 0.0, "sampled, not exact");
        assert_eq!(pooled.samples.len(), 4, "every sample kept");
        assert_eq!(pooled.origin.process_id, None, "no one process");
        let whole = pooled.estimate(crate::model::Metric::InuseSpace);
        let sum: f64 = pooled.samples.iter().map(|s| s.variance.inuse_space).sum();
        assert_eq!(whole.variance, sum);
    }

    #[test]
    fn threads_are_renumbered_so_processes_never_share_one() {
        let parts = profiles(&two_processes());
        let names = |profile: &Profile| -> Vec<String> {
            profile
                .samples
                .iter()
                .map(|s| {
                    profile
                        .thread(s.thread)
                        .map_or("?".into(), |t| t.name.clone())
                })
                .collect()
        };
        let expected: Vec<String> = parts.iter().flat_map(names).collect();
        let pooled = merged(parts);
        assert_eq!(names(&pooled), expected, "each sample keeps its thread");
        let serials: Vec<u32> = pooled.threads.iter().map(|t| t.serial).collect();
        assert_eq!(
            serials,
            [1, 2, 4, 6],
            "the second process's past the first's"
        );
        let mains: Vec<u32> = pooled
            .samples
            .iter()
            .filter(|s| pooled.thread(s.thread).is_some_and(|t| t.name == "main"))
            .map(|s| s.thread)
            .collect();
        assert_eq!(mains, [1, 4], "two threads named main stay two threads");
    }

    #[test]
    fn exact_counters_sum_those_that_recorded_them() {
        let recorded = Totals {
            allocations: 10,
            frees: Some(4),
            bytes_allocated: 1000,
            live_usable_bytes: Some(600),
            samples_taken: 10,
            samples_live: 6,
            threads_seen: 2,
            ..Totals::default()
        };
        let foreign = Totals {
            allocations: 5,
            frees: None,
            bytes_allocated: 50,
            live_usable_bytes: None,
            ..Totals::default()
        };
        let partly = Totals {
            frees: Some(1),
            live_usable_bytes: None,
            ..recorded.clone()
        };
        let sum = sum_totals([&recorded, &foreign, &partly]);
        assert_eq!(sum.allocations, 25);
        assert_eq!(sum.bytes_allocated, 2050);
        assert_eq!(sum.frees, Some(5), "the dumps that counted frees");
        assert_eq!(sum.live_usable_bytes, Some(600));
        assert_eq!(sum.samples_live, 12);
        assert_eq!(
            sum_totals([&foreign, &foreign]).frees,
            None,
            "nobody counted"
        );
    }
}
