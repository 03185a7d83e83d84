//! Folded stacks: a sample's frames as one `root;…;leaf` key, values
//! summed per key, and two profiles' folded values side by side.
//!
//! Owns the folded key (what svg, folded output and the svg's interval
//! notes line up on). No I/O.

use super::frames::{function_name, line_of};
use super::metric::Metric;
use super::profile::{Profile, Sample};
use crate::symbols::LocationTable;
use crate::symbols::runtime::folded_suffix;
use std::collections::BTreeMap;

/// A frame's name as a folded line can hold it (`;` becomes `,`, a line
/// break a space): `;` separates frames and a line break ends the record.
pub fn folded_frame(name: &str) -> String {
    let mut folded = String::with_capacity(name.len());
    push_folded(&mut folded, name);
    folded
}

/// Append [`folded_frame`] of `name` to `into`.
fn push_folded(into: &mut String, name: &str) {
    into.extend(name.chars().map(|c| match c {
        ';' => ',',
        '\n' | '\r' => ' ',
        c => c,
    }));
}

/// The folded key of a sample: frames root first, joined by `;` (built in
/// one string: a large view folds millions of frames).
pub fn folded_key(sample: &Sample, table: &LocationTable) -> String {
    folded_key_with(sample, table, false)
}

/// [`folded_key`], each frame of runtime-generated code followed by its
/// kind's suffix when `kinds` (async-profiler's `_[j]`, `_[i]`: see
/// [`crate::symbols::runtime::folded_suffix`]).
fn folded_key_with(sample: &Sample, table: &LocationTable, kinds: bool) -> String {
    if sample.frames.is_empty() {
        return "[no frames]".to_string();
    }
    // Folding keeps every name's length: the key is allocated at its size.
    let names = sample.frames.iter().map(|&f| function_name(table, f).len());
    let mut key = String::with_capacity(names.sum::<usize>() + sample.frames.len() - 1);
    for (index, &frame) in sample.frames.iter().rev().enumerate() {
        if index > 0 {
            key.push(';');
        }
        push_folded(&mut key, function_name(table, frame));
        if kinds && let Some(line) = line_of(table, frame) {
            key.push_str(folded_suffix(line.kind));
        }
    }
    key
}

/// Metric value per folded stack (root first), summed over samples that
/// fold to the same names.
pub fn folded(profile: &Profile, table: &LocationTable, metric: Metric) -> BTreeMap<String, f64> {
    folded_by(profile, table, metric, false)
}

/// [`folded`] with each runtime frame's kind suffix (`--format folded`).
pub fn folded_with_kinds(
    profile: &Profile,
    table: &LocationTable,
    metric: Metric,
) -> BTreeMap<String, f64> {
    folded_by(profile, table, metric, true)
}

fn folded_by(
    profile: &Profile,
    table: &LocationTable,
    metric: Metric,
    kinds: bool,
) -> BTreeMap<String, f64> {
    let mut stacks: BTreeMap<String, f64> = BTreeMap::new();
    for sample in &profile.samples {
        let key = folded_key_with(sample, table, kinds);
        *stacks.entry(key).or_default() += metric.of(&sample.values);
    }
    stacks
}

/// A stack's value in the base and in the new profile.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Change {
    pub base: f64,
    pub new: f64,
}

impl Change {
    /// new − base: positive means it grew.
    pub fn delta(&self) -> f64 {
        self.new - self.base
    }
}

/// Per folded stack, base and new values; stacks of either side appear, the
/// missing side is 0 (so a vanished stack has `new == 0`, a negative delta).
pub fn diff(base: &BTreeMap<String, f64>, new: &BTreeMap<String, f64>) -> BTreeMap<String, Change> {
    let mut changes: BTreeMap<String, Change> = BTreeMap::new();
    for (stack, &value) in base {
        changes.entry(stack.clone()).or_default().base = value;
    }
    for (stack, &value) in new {
        changes.entry(stack.clone()).or_default().new = value;
    }
    changes
}

/// Self and total value of one function.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::{BuildOptions, tests::unmapped_dump};
    use heapsample_format::Stack;

    #[test]
    fn diff_signs_and_vanished_stacks() {
        let base = BTreeMap::from([("a;b".to_string(), 100.0), ("a;gone".to_string(), 40.0)]);
        let new = BTreeMap::from([("a;b".to_string(), 250.0), ("a;fresh".to_string(), 5.0)]);
        let changes = diff(&base, &new);
        assert_eq!(changes["a;b"].delta(), 150.0);
        assert_eq!(
            changes["a;gone"],
            Change {
                base: 40.0,
                new: 0.0
            }
        );
        assert_eq!(changes["a;gone"].delta(), -40.0);
        assert_eq!(changes["a;fresh"].delta(), 5.0);
    }

    #[test]
    fn folded_frames_are_sanitized() {
        assert_eq!(folded_frame("f<[u8; 4]>\nx"), "f<[u8, 4]> x");
    }

    #[test]
    fn stacks_of_several_threads_stay_apart_and_fold_together_root_first() {
        let stack = |thread, objects| Stack {
            frames: vec![0x10, 0x20, 0x30],
            thread,
            live_objects: objects,
            live_bytes: objects * 8,
            alloc_objects: objects,
            alloc_bytes: objects * 8,
            live: heapsample_format::legacy_weights(objects, objects * 8, 1),
            alloc: heapsample_format::legacy_weights(objects, objects * 8, 1),
            ..Stack::default()
        };
        let dump = unmapped_dump(vec![stack(1, 2), stack(2, 3)]);
        let mut table = LocationTable::default();
        let stacks = table.intern_dump(&dump);
        table.symbolize(&Default::default(), &mut |w| panic!("{w}"));
        let profile = Profile::build(&dump, &stacks, &table, BuildOptions::default());
        assert_eq!(profile.samples.len(), 2, "one sample per thread");
        let threads: Vec<u32> = profile.samples.iter().map(|s| s.thread).collect();
        assert_eq!(threads, [1, 2]);
        let folded = folded(&profile, &table, Metric::InuseSpace);
        assert_eq!(folded.get("0x30;0x20;0x10"), Some(&40.0));
        assert_eq!(profile.estimated.inuse_objects, 5.0);
    }

    #[test]
    fn empty_stack_has_a_placeholder_frame() {
        let dump = unmapped_dump(vec![Stack {
            live_objects: 1,
            live_bytes: 8,
            live: heapsample_format::legacy_weights(1, 8, 1),
            ..Stack::default()
        }]);
        let mut table = LocationTable::default();
        let stacks = table.intern_dump(&dump);
        let profile = Profile::build(&dump, &stacks, &table, BuildOptions::default());
        assert_eq!(
            folded(&profile, &table, Metric::InuseSpace).get("[no frames]"),
            Some(&8.0)
        );
    }
}
