//! Which functions' memory grows across a series of dumps of one process:
//! the leak candidates a user would otherwise find by picking two dumps.
//!
//! A function is measured by its self value (the stacks whose leaf it is:
//! where the memory was allocated). It *grows* when its change from the
//! first dump of the series to the last is significant and positive by
//! [`super::comparison`]'s rule (for two dumps of one process that list
//! their live samples, the in-use change's variance is that of the samples
//! live in only one of them); it *still grows* when its change from the middle
//! dump to the last is significant and positive too, and *levelled off*
//! otherwise (a cache that filled, or start-up state). Functions are told
//! apart and labelled as the viewer does ([`crate::model::FunctionNames`],
//! [`crate::model::distinct_labels`]). No I/O.

use super::comparison::{ChangeSums, Comparison};
use crate::model::{
    FunctionNames, Metric, Profile, ProgramFrames, Sample, distinct_labels, line_of,
};
use crate::stats::{Delta, Estimate};
use crate::symbols::LocationTable;
use std::collections::HashMap;

/// One function's value across the series and its changes.
#[derive(Clone, Debug, PartialEq)]
pub struct Growth {
    /// The label the viewer shows.
    pub label: String,
    /// The whole signature.
    pub full: String,
    /// Its self value in each profile of the series.
    pub values: Vec<Estimate>,
    /// From the first profile to the last.
    pub change: Delta,
    /// From the middle profile to the last.
    pub late_change: Delta,
    /// The program's own function that called into it, where most of its
    /// live memory in the last profile was allocated
    /// ([`crate::model::program_frame()`]).
    pub program_frame: Option<String>,
}

impl Growth {
    /// Its change from the middle to the last dump is significant growth.
    pub fn still_growing(&self) -> bool {
        self.late_change.significant() && self.late_change.value() > 0.0
    }
}

/// The functions of `series` (profiles of one process, oldest first) whose
/// `metric` grows significantly from the first to the last, largest growth
/// first. Empty with fewer than two profiles.
pub fn growing(series: &[&Profile], table: &LocationTable, metric: Metric) -> Vec<Growth> {
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return Vec::new();
    };
    if series.len() < 2 {
        return Vec::new();
    }
    let middle = series[series.len() / 2];
    let (names, values) = self_values(series, table, metric);
    let labels = distinct_labels(&names);
    let templates_of = |sample: &Sample| {
        leaf_function(table, sample).map_or_else(String::new, |names| names.templates)
    };
    let program = ProgramFrames::of(last, table, metric, templates_of);
    let (whole, late) = (Comparison::of(first, last), Comparison::of(middle, last));
    let (whole, late) = (
        leaf_changes(&whole, table, metric),
        leaf_changes(&late, table, metric),
    );
    let mut grown: Vec<Growth> = names
        .into_iter()
        .zip(labels)
        .zip(values)
        .map(|((names, label), values)| Growth {
            program_frame: program.get(&names.templates).map(str::to_string),
            change: whole(&names.templates),
            late_change: late(&names.templates),
            label,
            full: names.full,
            values,
        })
        .filter(|g| g.change.significant() && g.change.value() > 0.0)
        .collect();
    grown.sort_by(|a, b| {
        b.change
            .value()
            .total_cmp(&a.change.value())
            .then_with(|| a.label.cmp(&b.label))
    });
    grown
}

/// The change of each leaf function's self value (by its name with
/// template arguments) from the comparison's base to its new profile.
fn leaf_changes<'a>(
    comparison: &'a Comparison<'_>,
    table: &LocationTable,
    metric: Metric,
) -> impl Fn(&str) -> Delta + 'a {
    let zero = comparison.zero(metric);
    let mut sums: HashMap<String, ChangeSums> = HashMap::new();
    for (sample, contribution) in comparison.contributions(metric) {
        if let Some(leaf) = leaf_function(table, sample) {
            let sum = sums.entry(leaf.templates).or_insert(zero);
            *sum = sum.plus(&contribution);
        }
    }
    move |name| comparison.delta(sums.get(name).unwrap_or(&zero), metric)
}

/// The function of a sample's leaf frame; `None` without frames.
fn leaf_function(table: &LocationTable, sample: &Sample) -> Option<FunctionNames> {
    let &leaf = sample.frames.first()?;
    Some(line_of(table, leaf).map_or_else(|| FunctionNames::plain("??"), FunctionNames::of))
}

/// Every leaf function of the series with its self value per profile.
fn self_values(
    series: &[&Profile],
    table: &LocationTable,
    metric: Metric,
) -> (Vec<FunctionNames>, Vec<Vec<Estimate>>) {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut names = Vec::new();
    let mut values: Vec<Vec<Estimate>> = Vec::new();
    for (at, profile) in series.iter().enumerate() {
        for sample in &profile.samples {
            let Some(function) = leaf_function(table, sample) else {
                continue;
            };
            let id = *index.entry(function.templates.clone()).or_insert_with(|| {
                names.push(function);
                values.push(
                    series
                        .iter()
                        .map(|p| Estimate::zero(p.sampling(metric)))
                        .collect(),
                );
                values.len() - 1
            });
            values[id][at] = values[id][at].plus(&sample.estimate(metric));
        }
    }
    (names, values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BuildOptions;
    use crate::model::profile::tests::unmapped_dump;
    use heapsample_format::{Dump, Stack, sample_weights};

    /// A dump (seq `seq`) with `leak` live objects of 1 KiB at 0x10 and
    /// `steady` at 0x20, every allocation sampled at `lg`.
    fn dump(seq: u64, lg: u32, leak: u64, steady: u64) -> Dump {
        let stack = |frame: u64, objects: u64| {
            let mut weights = heapsample_format::Weights::default();
            for _ in 0..objects {
                weights = weights.plus(&sample_weights(1024, 1 << lg));
            }
            Stack {
                frames: vec![frame],
                live_objects: objects,
                live_bytes: objects * 1024,
                live: weights,
                alloc_objects: objects,
                alloc_bytes: objects * 1024,
                alloc: weights,
                ..Stack::default()
            }
        };
        Dump {
            seq,
            time_unix_ns: seq,
            lg_sample_period: lg,
            ..unmapped_dump(vec![stack(0x10, leak), stack(0x20, steady)])
        }
    }

    fn profiles(dumps: &[Dump]) -> (LocationTable, Vec<Profile>) {
        let mut table = LocationTable::default();
        let stacks: Vec<_> = dumps.iter().map(|d| table.intern_dump(d)).collect();
        table.symbolize(&Default::default(), &mut |_| ());
        let profiles = dumps
            .iter()
            .zip(&stacks)
            .map(|(d, s)| Profile::build(d, s, &table, BuildOptions::default()))
            .collect();
        (table, profiles)
    }

    #[test]
    fn a_leak_grows_and_keeps_growing_a_steady_table_does_not() {
        let dumps: Vec<Dump> = (0..5).map(|i| dump(i, 0, 10 * (i + 1), 50)).collect();
        let (table, profiles) = profiles(&dumps);
        let series: Vec<&Profile> = profiles.iter().collect();
        let grown = growing(&series, &table, Metric::InuseSpace);
        assert_eq!(grown.len(), 1, "{grown:?}");
        assert_eq!(grown[0].label, "0x10");
        assert_eq!(grown[0].change.value(), 40.0 * 1024.0);
        assert!(grown[0].still_growing());
        let values: Vec<f64> = grown[0].values.iter().map(|e| e.value).collect();
        assert_eq!(values, [10240.0, 20480.0, 30720.0, 40960.0, 51200.0]);
    }

    #[test]
    fn growth_that_levelled_off_is_not_still_growing() {
        let leaks = [10, 40, 80, 80, 80];
        let dumps: Vec<Dump> = (0..5).map(|i| dump(i, 0, leaks[i as usize], 50)).collect();
        let (table, profiles) = profiles(&dumps);
        let series: Vec<&Profile> = profiles.iter().collect();
        let grown = growing(&series, &table, Metric::InuseSpace);
        assert_eq!(grown.len(), 1);
        assert!(!grown[0].still_growing());
    }

    #[test]
    fn noise_at_a_sparse_period_is_not_growth() {
        // At R = 2^20 a few 1 KiB objects more are far within the noise.
        let dumps: Vec<Dump> = (0..3).map(|i| dump(i, 20, 20 + i, 20)).collect();
        let (table, profiles) = profiles(&dumps);
        let series: Vec<&Profile> = profiles.iter().collect();
        assert!(growing(&series, &table, Metric::InuseSpace).is_empty());
        assert!(growing(&series[..1], &table, Metric::InuseSpace).is_empty());
    }
}
