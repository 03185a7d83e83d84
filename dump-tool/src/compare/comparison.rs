//! A base and a new profile side by side: how they pair, which live samples
//! they share, and the one way every change between them is made.
//!
//! Owns [`Comparison`]: built once per pair of profiles, it hands every
//! sample of both sides with what it adds to a change ([`ChangeSums`]:
//! base and new value, and the parts only one side has), so a function, a
//! stack prefix or the whole profile sums its stacks the same way, and
//! turns sums into a [`Delta`] by the rule that applies
//! ([`VarianceRule`]):
//! - in-use values of two dumps of one process
//!   ([`Pairing::SameProcess`]) that list every live sample with its
//!   birth: the samples live in both cancel, the variance is that of the
//!   symmetric difference ([`crate::stats::shared`]);
//! - otherwise [`Delta::between`]: cumulative values of one process by the
//!   samples taken in between, everything else as independent samples
//!   (for in-use values of one process without the lists: conservative).
//!
//! The shared-samples rule needs both dumps to list, stack by stack, every
//! live sample they count (a dump that lists fewer reads no births:
//! [`crate::model::TimeInfo::of`]), and each sample live in both to be
//! counted in the same stack of the view in both (a view that moves a
//! sample, e.g. size-class frames of a stack whose mean size changed,
//! gets the conservative rule). [`Comparison::in_use_fallback`] says why
//! two dumps of one process did not get it. No I/O.

use super::pairing::pairing;
use crate::model::{Birth, Metric, Profile, Sample};
use crate::stats::shared::{self, Identity, LiveSample, SampleWeights};
use crate::stats::{Accumulation, Delta, Estimate, Pairing};
use ahash::{AHashMap, AHashSet};

/// Which rule gives a change its variance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarianceRule {
    /// var(new) + var(base): independent samples, or conservative for
    /// in-use values of one process whose shared samples are not known.
    Independent,
    /// Cumulative values of one process: the samples taken in between.
    InBetween,
    /// In-use values of one process: the samples live in only one dump.
    SharedSamples,
}

impl VarianceRule {
    /// The name reports use: `independent`, `samples-in-between`,
    /// `shared-samples`.
    pub fn name(self) -> &'static str {
        match self {
            VarianceRule::Independent => "independent",
            VarianceRule::InBetween => "samples-in-between",
            VarianceRule::SharedSamples => "shared-samples",
        }
    }
}

/// What a set of stacks adds up to on both sides of a change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChangeSums {
    pub base: Estimate,
    pub new: Estimate,
    /// Live samples only the new side has (shared-samples rule only).
    added: Estimate,
    /// Live samples only the base side has (shared-samples rule only).
    removed: Estimate,
}

impl ChangeSums {
    /// The live samples only the new side has (zero unless the
    /// shared-samples rule applies).
    pub fn added(&self) -> Estimate {
        self.added
    }

    /// The live samples only the base side has (zero unless the
    /// shared-samples rule applies).
    pub fn removed(&self) -> Estimate {
        self.removed
    }

    /// The sums of two disjoint sets of stacks.
    pub fn plus(&self, other: &ChangeSums) -> ChangeSums {
        ChangeSums {
            base: self.base.plus(&other.base),
            new: self.new.plus(&other.new),
            added: self.added.plus(&other.added),
            removed: self.removed.plus(&other.removed),
        }
    }
}

/// Each side's live samples that the other side does not have, per sample
/// (stack) of the profile.
struct Unshared {
    /// Per sample of the new profile.
    added: Vec<Vec<LiveSample>>,
    /// Per sample of the base profile.
    removed: Vec<Vec<LiveSample>>,
}

/// A base and a new profile compared.
pub struct Comparison<'a> {
    base: &'a Profile,
    new: &'a Profile,
    pairing: Pairing,
    /// The unshared samples, or why they are not known.
    unshared: Result<Unshared, &'static str>,
}

impl<'a> Comparison<'a> {
    /// Pair `base` with `new` and, for one process, find the live samples
    /// they share.
    pub fn of(base: &'a Profile, new: &'a Profile) -> Comparison<'a> {
        let pairing = pairing(base, new);
        let unshared = match pairing {
            Pairing::SameProcess => unshared(base, new),
            Pairing::Independent => Err("the dumps are not of one process"),
        };
        Comparison {
            base,
            new,
            pairing,
            unshared,
        }
    }

    pub fn base(&self) -> &'a Profile {
        self.base
    }

    pub fn new_profile(&self) -> &'a Profile {
        self.new
    }

    pub fn pairing(&self) -> Pairing {
        self.pairing
    }

    /// The rule the changes of `metric` get (for a cumulative metric of one
    /// process, a function whose later sums do not contain the earlier ones
    /// gets the independent rule: [`Delta::between`]).
    pub fn rule(&self, metric: Metric) -> VarianceRule {
        match (metric.accumulation(), self.pairing) {
            (Accumulation::InUse, Pairing::SameProcess) if self.unshared.is_ok() => {
                VarianceRule::SharedSamples
            }
            (Accumulation::Cumulative, Pairing::SameProcess) => VarianceRule::InBetween,
            _ => VarianceRule::Independent,
        }
    }

    /// Why in-use changes between two dumps of one process get the
    /// conservative rule; `None` when they do not, or the dumps are not of
    /// one process.
    pub fn in_use_fallback(&self) -> Option<&'static str> {
        match (&self.unshared, self.pairing) {
            (Err(why), Pairing::SameProcess) => Some(why),
            _ => None,
        }
    }

    /// Nothing on either side.
    pub fn zero(&self, metric: Metric) -> ChangeSums {
        let (base, new) = (
            Estimate::zero(self.base.sampling(metric)),
            Estimate::zero(self.new.sampling(metric)),
        );
        ChangeSums {
            base,
            new,
            added: new,
            removed: base,
        }
    }

    /// Every sample of the base, then of the new profile, with what it adds
    /// to the sums of `metric` of a set of stacks it is in.
    pub fn contributions(&self, metric: Metric) -> Vec<(&'a Sample, ChangeSums)> {
        let zero = self.zero(metric);
        let exact = self.rule(metric) == VarianceRule::SharedSamples;
        let part = |parts: Option<&Vec<Vec<LiveSample>>>, index: usize, sampling| match parts
            .filter(|_| exact)
            .and_then(|p| p.get(index))
        {
            Some(samples) => shared::sum(samples, sampling),
            None => Estimate::zero(sampling),
        };
        let unshared = self.unshared.as_ref().ok();
        let base = self.base.samples.iter().enumerate().map(|(i, sample)| {
            let sums = ChangeSums {
                base: sample.estimate(metric),
                removed: part(unshared.map(|u| &u.removed), i, zero.removed.sampling),
                ..zero
            };
            (sample, sums)
        });
        let new = self.new.samples.iter().enumerate().map(|(i, sample)| {
            let sums = ChangeSums {
                new: sample.estimate(metric),
                added: part(unshared.map(|u| &u.added), i, zero.added.sampling),
                ..zero
            };
            (sample, sums)
        });
        base.chain(new).collect()
    }

    /// The change of a set of stacks whose sums are `sums`.
    pub fn delta(&self, sums: &ChangeSums, metric: Metric) -> Delta {
        match self.rule(metric) {
            VarianceRule::SharedSamples => {
                Delta::of_shared(sums.base, sums.new, sums.added, sums.removed)
            }
            _ => Delta::between(sums.base, sums.new, metric.accumulation(), self.pairing),
        }
    }

    /// The change of the whole profile's `metric`.
    pub fn total(&self, metric: Metric) -> Delta {
        let parts = self
            .contributions(metric)
            .into_iter()
            .fold(self.zero(metric), |sum, (_, c)| sum.plus(&c));
        let sums = ChangeSums {
            base: self.base.estimate(metric),
            new: self.new.estimate(metric),
            ..parts
        };
        self.delta(&sums, metric)
    }
}

fn identity(birth: &Birth) -> Identity {
    (birth.thread, birth.birth_ns)
}

fn live_sample(birth: &Birth) -> LiveSample {
    let w = &birth.weights;
    LiveSample {
        id: identity(birth),
        size: birth.size,
        weights: SampleWeights {
            objects: w.objects,
            bytes: w.bytes,
            objects_variance: w.objects_variance,
            bytes_variance: w.bytes_variance,
        },
    }
}

/// The live samples only one of two dumps of one process has, or why they
/// cannot be told (see the module documentation).
fn unshared(base: &Profile, new: &Profile) -> Result<Unshared, &'static str> {
    if !(base.time.births && new.time.births) {
        return Err(
            "a dump does not list every live sample with its birth (format before 4, or a list shorter than its stacks' counts)",
        );
    }
    const TWICE: &str = "a dump lists a live sample twice";
    let births = base.samples.iter().map(|s| s.births.len()).sum();
    let mut in_base: AHashMap<Identity, (usize, u64)> = AHashMap::with_capacity(births);
    for (at, sample) in base.samples.iter().enumerate() {
        for birth in &sample.births {
            if in_base.insert(identity(birth), (at, birth.size)).is_some() {
                return Err(TWICE);
            }
        }
    }
    let births = new.samples.iter().map(|s| s.births.len()).sum();
    let mut in_new: AHashSet<Identity> = AHashSet::with_capacity(births);
    let mut added = Vec::with_capacity(new.samples.len());
    for sample in &new.samples {
        let mut only = Vec::new();
        for birth in &sample.births {
            if !in_new.insert(identity(birth)) {
                return Err(TWICE);
            }
            match in_base.get(&identity(birth)) {
                None => only.push(live_sample(birth)),
                Some(&(at, size)) => {
                    let there = &base.samples[at];
                    if size != birth.size
                        || there.thread != sample.thread
                        || there.frames != sample.frames
                    {
                        return Err(
                            "a live sample of both dumps is counted in different stacks of the view",
                        );
                    }
                }
            }
        }
        added.push(only);
    }
    let removed = base
        .samples
        .iter()
        .map(|sample| {
            sample
                .births
                .iter()
                .filter(|b| !in_new.contains(&identity(b)))
                .map(live_sample)
                .collect()
        })
        .collect();
    Ok(Unshared { added, removed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BuildOptions;
    use crate::model::profile::tests::unmapped_dump;
    use crate::symbols::LocationTable;
    use heapsample_format::{Dump, LiveSample as Listed, Stack, Weights};

    const LG: u32 = 14;

    /// A dump of process 7 (seq `seq`) whose stack at `frame` holds the
    /// live samples `(frame, thread, birth, size)`.
    fn dump(seq: u64, samples: &[(u64, u32, u64, u64)]) -> Dump {
        let law = heapsample_format::SamplingLaw::with_bytes_per_call(1 << LG, 0);
        let mut frames: Vec<u64> = samples.iter().map(|s| s.0).collect();
        frames.sort();
        frames.dedup();
        let stacks = frames
            .iter()
            .map(|&frame| {
                let mine = samples.iter().filter(|s| s.0 == frame);
                let weights = mine
                    .clone()
                    .fold(Weights::default(), |w, s| w.plus(&law.weights(s.3)));
                Stack {
                    frames: vec![frame],
                    live_objects: mine.clone().count() as u64,
                    live_bytes: mine.map(|s| s.3).sum(),
                    live: weights,
                    ..Stack::default()
                }
            })
            .collect();
        let mut dump = Dump {
            seq,
            time_unix_ns: seq,
            lg_sample_period: LG,
            ..unmapped_dump(stacks)
        };
        dump.process.id = 7;
        dump.process.start_monotonic_ns = 1;
        dump.live_samples = samples
            .iter()
            .map(|&(frame, thread, birth_ns, size)| Listed {
                stack: frames.iter().position(|&f| f == frame).unwrap() as u32,
                thread,
                birth_ns,
                size,
                usable: 0,
            })
            .collect();
        dump
    }

    fn profiles(dumps: &[Dump]) -> Vec<Profile> {
        let mut table = LocationTable::default();
        let stacks: Vec<_> = dumps.iter().map(|d| table.intern_dump(d)).collect();
        table.symbolize(&Default::default(), &mut |_| ());
        dumps
            .iter()
            .zip(&stacks)
            .map(|(d, s)| Profile::build(d, s, &table, BuildOptions::default()))
            .collect()
    }

    /// 40 samples of 4 KiB at 0x10 live in both dumps, one freed in between,
    /// two born in between.
    fn pair() -> (Dump, Dump) {
        let kept: Vec<_> = (0..40).map(|i| (0x10, 1, 100 + i, 4096)).collect();
        let base: Vec<_> = kept.iter().copied().chain([(0x20, 2, 50, 512)]).collect();
        let new: Vec<_> = kept
            .iter()
            .copied()
            .chain([(0x20, 2, 500, 1024), (0x20, 1, 500, 1024)])
            .collect();
        (dump(1, &base), dump(2, &new))
    }

    #[test]
    fn in_use_changes_of_one_process_vary_by_the_unshared_samples_only() {
        let (base, new) = pair();
        let p = profiles(&[base, new]);
        let comparison = Comparison::of(&p[0], &p[1]);
        assert_eq!(
            comparison.rule(Metric::InuseSpace),
            VarianceRule::SharedSamples
        );
        assert_eq!(comparison.rule(Metric::AllocSpace), VarianceRule::InBetween);
        assert_eq!(comparison.in_use_fallback(), None);
        let law = heapsample_format::SamplingLaw::with_bytes_per_call(1 << LG, 0);
        let unshared = 2.0 * law.weights(1024).bytes_variance + law.weights(512).bytes_variance;
        let total = comparison.total(Metric::InuseSpace);
        assert!(
            (total.variance() - unshared).abs() < 1e-6 * unshared,
            "{total:?}"
        );
        let conservative = Delta::between(
            total.base,
            total.new,
            Accumulation::InUse,
            Pairing::SameProcess,
        );
        assert!(conservative.variance() > 10.0 * total.variance());
        // The stack holding only kept samples did not change, exactly.
        let kept = comparison
            .contributions(Metric::InuseSpace)
            .into_iter()
            .filter(|(s, _)| s.frames == p[1].samples[0].frames)
            .fold(comparison.zero(Metric::InuseSpace), |sum, (_, c)| {
                sum.plus(&c)
            });
        let kept = comparison.delta(&kept, Metric::InuseSpace);
        assert_eq!((kept.value(), kept.variance()), (0.0, 0.0));
        assert!(!kept.significant());
    }

    #[test]
    fn without_complete_lists_or_one_process_the_rule_is_conservative() {
        let (base, new) = pair();
        // The later dump lists fewer live samples than its stacks count.
        let mut short = new.clone();
        short.live_samples.pop();
        let p = profiles(&[base.clone(), short]);
        let comparison = Comparison::of(&p[0], &p[1]);
        assert_eq!(
            comparison.rule(Metric::InuseSpace),
            VarianceRule::Independent
        );
        assert!(comparison.in_use_fallback().unwrap().contains("list"));
        let total = comparison.total(Metric::InuseSpace);
        assert_eq!(total.variance(), total.base.variance + total.new.variance);
        // Another process: independent, and nothing to explain.
        let mut other = new.clone();
        other.process.id = 8;
        let p = profiles(&[base.clone(), other]);
        let comparison = Comparison::of(&p[0], &p[1]);
        assert_eq!(
            comparison.rule(Metric::InuseSpace),
            VarianceRule::Independent
        );
        assert_eq!(comparison.in_use_fallback(), None);
        // A sample of both dumps counted in another stack: conservative.
        let mut moved = new;
        moved.live_samples[0].stack = 1;
        moved.stacks[0].live_objects -= 1;
        moved.stacks[1].live_objects += 1;
        let p = profiles(&[base, moved]);
        let comparison = Comparison::of(&p[0], &p[1]);
        assert_eq!(
            comparison.rule(Metric::InuseSpace),
            VarianceRule::Independent
        );
        assert!(
            comparison
                .in_use_fallback()
                .unwrap()
                .contains("different stacks")
        );
    }
}
