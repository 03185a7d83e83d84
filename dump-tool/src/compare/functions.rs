//! Per-function values of a profile and per-function changes between two
//! profiles, with their estimates.
//!
//! Owns the rule that a function's self value is that of the stacks whose
//! leaf it is and its total that of the stacks containing it (counted once
//! per stack); the intervals come from [`crate::stats`]. No I/O.

use super::pairing::pairing;
use crate::model::{Metric, Profile, function_name};
use crate::stats::{Delta, Estimate, Sampling};
use crate::symbols::LocationTable;
use std::collections::{BTreeSet, HashMap};

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

/// Self and total value per function name.
pub fn function_values(
    profile: &Profile,
    table: &LocationTable,
    metric: Metric,
) -> HashMap<String, FunctionValue> {
    let mut functions: HashMap<String, FunctionValue> = HashMap::new();
    for sample in &profile.samples {
        let estimate = sample.estimate(metric);
        let mut seen: Vec<&str> = Vec::new();
        for (depth, &frame) in sample.frames.iter().enumerate() {
            let name = function_name(table, frame);
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
    base: &Profile,
    new: &Profile,
    table: &LocationTable,
    metric: Metric,
) -> Vec<FunctionChange> {
    let pairing = pairing(base, new);
    let accumulation = metric.accumulation();
    let base_functions = function_values(base, table, metric);
    let new_functions = function_values(new, table, metric);
    let names: BTreeSet<&String> = base_functions.keys().chain(new_functions.keys()).collect();
    let side = |functions: &HashMap<String, FunctionValue>, profile: &Profile, name: &str| {
        functions
            .get(name)
            .copied()
            .unwrap_or_else(|| FunctionValue::zero(profile.sampling(metric)))
    };
    let change = |b: Estimate, n: Estimate| Delta::between(b, n, accumulation, pairing);
    names
        .into_iter()
        .map(|name| {
            let (b, n) = (
                side(&base_functions, base, name),
                side(&new_functions, new, name),
            );
            FunctionChange {
                name: name.clone(),
                self_change: change(b.self_estimate, n.self_estimate),
                total_change: change(b.total_estimate, n.total_estimate),
            }
        })
        .collect()
}

/// The change of the whole profile's `metric`.
pub fn total_change(base: &Profile, new: &Profile, metric: Metric) -> Delta {
    Delta::between(
        base.estimate(metric),
        new.estimate(metric),
        metric.accumulation(),
        pairing(base, new),
    )
}
