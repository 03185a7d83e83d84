//! Per-function values of a profile and per-function changes between two
//! profiles, with their estimates.
//!
//! Owns the rule that a function's self value is that of the stacks whose
//! leaf it is and its total that of the stacks containing it (counted once
//! per stack); the changes are [`super::comparison`]'s, the intervals
//! [`crate::stats`]'. No I/O.

use super::comparison::{ChangeSums, Comparison};
use crate::model::{FrameLabels, Metric, Profile, leaf_name, program_frame_name};
use crate::stats::{Delta, Estimate, Sampling};
use crate::symbols::LocationTable;
use std::collections::{BTreeMap, HashMap};

/// Self and total value of one function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FunctionValue {
    /// Value of stacks whose leaf is this function.
    pub self_value: f64,
    /// Value of stacks that contain this function (counted once per stack).
    pub total: f64,
    /// `self_value` with its variance and floor.
    pub self_estimate: Estimate,
    /// `total` with its variance and floor.
    pub total_estimate: Estimate,
}

impl FunctionValue {
    /// Nothing sampled.
    pub fn zero(sampling: Sampling) -> FunctionValue {
        FunctionValue {
            self_value: 0.0,
            total: 0.0,
            self_estimate: Estimate::zero(sampling),
            total_estimate: Estimate::zero(sampling),
        }
    }
}

/// Self and total value per function, labelled as the viewer labels them
/// ([`FrameLabels`]: two instantiations of a template stay apart).
pub fn function_values(
    profile: &Profile,
    table: &LocationTable,
    metric: Metric,
) -> HashMap<String, FunctionValue> {
    let labels = FrameLabels::of(table, profile.samples.iter().map(|s| &s.frames[..]));
    let mut functions: HashMap<String, FunctionValue> = HashMap::new();
    for sample in &profile.samples {
        let estimate = sample.estimate(metric);
        let mut seen: Vec<&str> = Vec::new();
        for (depth, &frame) in sample.frames.iter().enumerate() {
            let name = labels.get(table, frame);
            let entry = functions
                .entry(name.to_string())
                .or_insert_with(|| FunctionValue::zero(estimate.sampling));
            if depth == 0 {
                entry.self_estimate = entry.self_estimate.plus(&estimate);
                entry.self_value = entry.self_estimate.value;
            }
            if !seen.contains(&name) {
                seen.push(name);
                entry.total_estimate = entry.total_estimate.plus(&estimate);
                entry.total = entry.total_estimate.value;
            }
        }
    }
    functions
}

/// How one function changed between two profiles.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionChange {
    pub name: String,
    /// Change of its self value (stacks whose leaf it is).
    pub self_change: Delta,
    /// Change of its total value (stacks that contain it).
    pub total_change: Delta,
}

/// Every function of either profile with its changes of `metric`, by name.
pub fn function_changes(
    comparison: &Comparison<'_>,
    table: &LocationTable,
    metric: Metric,
) -> Vec<FunctionChange> {
    let zero = comparison.zero(metric);
    let stacks = [comparison.base(), comparison.new_profile()]
        .into_iter()
        .flat_map(|p| p.samples.iter().map(|s| &s.frames[..]));
    let labels = FrameLabels::of(table, stacks);
    let mut sums: BTreeMap<&str, (ChangeSums, ChangeSums)> = BTreeMap::new();
    for (sample, contribution) in comparison.contributions(metric) {
        let mut seen: Vec<&str> = Vec::new();
        for (depth, &frame) in sample.frames.iter().enumerate() {
            let name = labels.get(table, frame);
            let (self_sums, total) = sums.entry(name).or_insert((zero, zero));
            if depth == 0 {
                *self_sums = self_sums.plus(&contribution);
            }
            if !seen.contains(&name) {
                seen.push(name);
                *total = total.plus(&contribution);
            }
        }
    }
    sums.into_iter()
        .map(|(name, (self_sums, total))| FunctionChange {
            name: name.to_string(),
            self_change: comparison.delta(&self_sums, metric),
            total_change: comparison.delta(&total, metric),
        })
        .collect()
}

/// The self value of one program frame: the stacks whose program frame
/// ([`crate::model::program_frame()`]) it is.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramFrameValue {
    /// The program frame, or the leaf of a stack that has none.
    pub name: String,
    pub estimate: Estimate,
    /// The allocating function (leaf) carrying most of it, when that is
    /// not the program frame itself.
    pub via: Option<String>,
}

/// The values of a profile grouped by program frame, largest first (ties
/// by name).
pub fn program_frame_values(
    profile: &Profile,
    table: &LocationTable,
    metric: Metric,
) -> Vec<ProgramFrameValue> {
    let mut groups: BTreeMap<&str, (Option<Estimate>, HashMap<&str, f64>)> = BTreeMap::new();
    for sample in &profile.samples {
        let estimate = sample.estimate(metric);
        let leaf = leaf_name(sample, table);
        let name = program_frame_name(sample, table).unwrap_or(leaf);
        let (sum, leaves) = groups.entry(name).or_default();
        *sum = Some(sum.map_or(estimate, |s| s.plus(&estimate)));
        *leaves.entry(leaf).or_default() += estimate.value.abs();
    }
    let mut rows: Vec<ProgramFrameValue> = groups
        .into_iter()
        .filter_map(|(name, (estimate, leaves))| {
            let via = leaves
                .into_iter()
                .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(leaf, _)| leaf)
                .filter(|&leaf| leaf != name)
                .map(str::to_string);
            Some(ProgramFrameValue {
                name: name.to_string(),
                estimate: estimate?,
                via,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        b.estimate
            .value
            .total_cmp(&a.estimate.value)
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}
