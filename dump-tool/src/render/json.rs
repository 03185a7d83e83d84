//! The machine-readable report (`--format json`), for scripts and CI.
//!
//! One JSON object, schema `heapdiff-report/2` (documented field by field
//! in dump-tool/README.md). Fields are only ever added within a schema
//! version; a change of meaning gets a new version. Every estimate is
//! `{"estimate", "low", "high", "sampled"}` with the 95 % interval (see
//! `estimate`); every change is `{"estimate", "low", "high", "significant"}`.
//! All four metrics are reported whatever `--metric` says.
//!
//! Stacks are written once, as lists of indices into one table of function
//! names (`names`), and each metric's stacks refer to them by index: a
//! report of a large dump is about 0.6 KB per stack instead of a copy of
//! every name per stack and metric. The report is serialized straight from
//! the view (no copy of its names per stack), in the layout of
//! [`super::json_rows`].

use super::bounds::size_limits;
use crate::compare::{
    Comparison, FunctionChange, function_changes, function_values, program_frame_values,
};
use crate::input::{Input, trigger_name};
use crate::model::{
    FrameLabels, FrameRef, Metric, Profile, ProgramFrames, Sample, TimeInfo, function_name, line_of,
};
use crate::pipeline::{View, ViewSpec};
use crate::stats::sampling::SMALL_OBJECT_BYTES;
use crate::stats::{Delta, Estimate, Sampling, Unit};
use crate::symbols::LocationTable;
use crate::symbols::runtime::kind_name;
use heapsample_format::{FrameKind, LEGACY_VERSION, Peak, ProcessContext, Totals, WalkEnds};
use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The schema name and version written in every report.
pub const SCHEMA: &str = "heapdiff-report/2";

/// The report as JSON, ending with a newline.
pub fn render(view: &View<'_>) -> String {
    let mut bytes = Vec::new();
    // Writing into memory fails only on a serialization error, which these
    // types do not have.
    let _ = write(view, &mut bytes);
    String::from_utf8(bytes).unwrap_or_default()
}

/// Write the report as JSON, ending with a newline, into `writer`.
pub fn write(view: &View<'_>, mut writer: impl std::io::Write) -> std::io::Result<()> {
    let comparison = view
        .base
        .map(|base| Comparison::of(&base.profile, &view.new.profile));
    let metrics: Vec<Metric> = Metric::ALL
        .iter()
        .chain(Metric::TEMPORARY.iter().filter(|_| has_lifetimes(view)))
        .copied()
        .collect();
    let stacks = StackTable::of(&view.new.profile, view.table, &metrics);
    let report = Report {
        schema: SCHEMA,
        confidence: 0.95,
        view: ViewJson {
            spec: view.spec,
            summary: view.spec.summary(),
        },
        new: DumpInfo::of(view.new.first_input()),
        base: view.base.map(|base| DumpInfo::of(base.first_input())),
        pairing: comparison.as_ref().map(|c| c.pairing().name()),
        in_use_variance_note: comparison.as_ref().and_then(|c| c.in_use_fallback()),
        names: &stacks.names,
        name_kinds: &stacks.kinds,
        stacks: &stacks,
        metrics: metrics
            .iter()
            .map(|&metric| {
                let report = MetricReport::of(view, comparison.as_ref(), metric, &stacks);
                (metric.name(), report)
            })
            .collect(),
    };
    super::json_rows::write_rows(&mut writer, &report)?;
    writer.write_all(b"\n")
}

/// Every side's dumps carry lifetimes: the temporary metrics are reported.
fn has_lifetimes(view: &View<'_>) -> bool {
    view.new.profile.time.lifetimes && view.base.is_none_or(|b| b.profile.time.lifetimes)
}

#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    confidence: f64,
    /// What shaped the view: every `total` below is the view's.
    view: ViewJson<'a>,
    new: DumpInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    base: Option<DumpInfo>,
    /// With a base: `same-process` (the base is an earlier dump of the same
    /// process, cumulative samples shared) or `independent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pairing: Option<&'static str>,
    /// With a same-process pairing whose in-use changes got the
    /// conservative rule (`variance_rule` `independent`), why.
    #[serde(skip_serializing_if = "Option::is_none")]
    in_use_variance_note: Option<&'static str>,
    /// The function names of the stacks, each once.
    names: &'a [&'a str],
    /// Per name, the kind of code its frames are in (`native`,
    /// `interpreter`, `python`, `javascript`, `java`, `jit`).
    name_kinds: &'a [&'static str],
    /// The new dump's stacks with a value in some metric: their frames,
    /// root first, as indices into `names`.
    stacks: &'a StackTable<'a>,
    /// Keyed by metric name (`inuse-space`, ...).
    metrics: BTreeMap<&'static str, MetricReport<'a>>,
}

/// The view's settings as fields and as the one line the other formats
/// print.
#[derive(Serialize)]
struct ViewJson<'a> {
    #[serde(flatten)]
    spec: &'a ViewSpec,
    summary: String,
}

#[derive(Serialize)]
struct DumpInfo {
    path: String,
    /// `heapsample`, `jemalloc heap_v2` or `gperftools heap profile`.
    source_format: &'static str,
    /// The heapsample dump format version (absent for a foreign profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    format_version: Option<u32>,
    /// `horvitz-thompson`, or `average-size` for format-2 dumps.
    estimator: &'static str,
    writer: String,
    pid: u32,
    executable: String,
    command_line: Vec<String>,
    time_unix_ns: u64,
    trigger: &'static str,
    seq: u64,
    trigger_seq: u64,
    sampling_period: u64,
    lg_sample_period: u32,
    /// When the profiler was attached (ns since the epoch): in-use values
    /// count only what was allocated since; `null` for a process profiled
    /// from its start.
    attached_unix_ns: Option<u64>,
    /// Where the process ran (format 5 on): architecture, host name,
    /// namespace ids, cgroup, and its pid in each PID namespace (outermost
    /// first); empty strings and zeros when the dump does not say.
    context: ProcessContext,
    /// How the walks of the sampled stacks ended (format 5 on; zeros when
    /// the dump does not say): `complete`, `depth_limit`, `no_unwind_info`,
    /// `unreadable_stack`.
    walk_ends: WalkEnds,
    /// The dump's exact counters, as the format names them (absent ones
    /// are `null`).
    exact: Totals,
    /// What the dump tells about time (format 4).
    time: TimeReport,
    /// What the profiler cost up to the dump (format 5 on; `recorded`
    /// false before).
    cost: super::cost::CostReport,
    /// Dumps of the process removed since its previous dump to keep its
    /// series within `prof_dump_limit` / `prof_dump_bytes`.
    removed_dumps: Vec<super::cost::RemovedReport>,
}

#[derive(Serialize)]
struct TimeReport {
    /// Live samples carry births; stacks carry lifetimes.
    births: bool,
    lifetimes: bool,
    /// The views the dump lacks, in words; `null` when it lacks none.
    lacks: Option<&'static str>,
    /// The profiler's start on the wall clock (ns since the epoch, 0:
    /// unknown) and the dump's time since then (ns).
    start_unix_ns: u64,
    dump_ns: u64,
    /// The exact peak of the live heap (usable bytes, ns since the start),
    /// under prof_exact.
    peak: Option<Peak>,
}

impl DumpInfo {
    fn of(input: &Input) -> DumpInfo {
        let dump = &input.dump;
        DumpInfo {
            path: input.path.display().to_string(),
            source_format: input.foreign.map_or("heapsample", |kind| kind.name()),
            format_version: input.foreign.is_none().then_some(input.version),
            estimator: if input.version == LEGACY_VERSION {
                "average-size"
            } else {
                "horvitz-thompson"
            },
            writer: dump.writer.clone(),
            pid: dump.pid,
            executable: dump.executable.clone(),
            command_line: dump.command_line.clone(),
            time_unix_ns: dump.time_unix_ns,
            trigger: trigger_name(dump.trigger),
            seq: dump.seq,
            trigger_seq: dump.trigger_seq,
            sampling_period: dump.sample_period(),
            lg_sample_period: dump.lg_sample_period,
            attached_unix_ns: dump.attached_unix_ns(),
            context: dump.context.clone(),
            walk_ends: dump.runtime.walk_ends,
            exact: dump.totals.clone(),
            time: {
                let time = TimeInfo::of(dump, 0);
                TimeReport {
                    births: time.births,
                    lifetimes: time.lifetimes,
                    lacks: time.missing(),
                    start_unix_ns: time.start_unix_ns,
                    dump_ns: time.dump_ns,
                    peak: time.peak,
                }
            },
            cost: super::cost::CostReport::of(dump),
            removed_dumps: super::cost::RemovedReport::all(&dump.removed_dumps),
        }
    }
}

#[derive(Serialize)]
pub(super) struct Bound {
    estimate: f64,
    low: f64,
    high: f64,
    /// What the samples themselves add up to (a certain lower bound).
    sampled: f64,
    /// The value may be dominated by objects too small to be sampled: the
    /// interval does not hold for it.
    low_confidence: bool,
}

impl Bound {
    pub(super) fn of(estimate: &Estimate) -> Bound {
        let interval = estimate.interval();
        Bound {
            estimate: interval.estimate,
            low: interval.low,
            high: interval.high,
            sampled: estimate.floor,
            low_confidence: estimate.low_confidence(),
        }
    }
}

/// How large a value can be and still be absent from the dump (with
/// probability 5 %).
#[derive(Serialize)]
struct DetectionLimit {
    /// In the metric's unit (objects: of `object_size` bytes).
    value: f64,
    /// In bytes (objects of `s` bytes: `bytes / s` of them).
    bytes: f64,
    /// For object counts: the object size `value` is stated for.
    #[serde(skip_serializing_if = "Option::is_none")]
    object_size: Option<f64>,
}

impl DetectionLimit {
    fn of(sampling: &Sampling) -> DetectionLimit {
        DetectionLimit {
            value: sampling.detection_limit(),
            bytes: sampling.detection_limit_bytes(),
            object_size: (sampling.unit == Unit::Objects).then_some(SMALL_OBJECT_BYTES),
        }
    }
}

/// The fewest objects of one size of which one is sampled with
/// probability >= 95 %.
#[derive(Serialize)]
struct SizeLimit {
    object_size: u64,
    objects: f64,
}

#[derive(Serialize)]
pub(super) struct DeltaBound {
    estimate: f64,
    low: f64,
    high: f64,
    /// The interval excludes 0: not explained by sampling noise.
    significant: bool,
    /// Either side is low-confidence (see `Bound`).
    low_confidence: bool,
}

impl DeltaBound {
    pub(super) fn of(delta: &Delta) -> DeltaBound {
        let interval = delta.interval();
        DeltaBound {
            estimate: interval.estimate,
            low: interval.low,
            high: interval.high,
            significant: delta.significant(),
            low_confidence: delta.low_confidence(),
        }
    }
}

#[derive(Serialize)]
struct FunctionReport {
    name: String,
    /// The program's own function that called into it where it allocated
    /// (the program frame carrying most of its self value); `null` when it
    /// allocated nothing itself or no frame of its stacks is the program's.
    program_frame: Option<String>,
    #[serde(rename = "self")]
    self_value: Bound,
    total: Bound,
}

/// The stacks a report lists (the samples of the new profile with a value
/// in some reported metric) and the names of their frames.
struct StackTable<'a> {
    profile: &'a Profile,
    /// Every name a listed stack shows, each once, in increasing order (so
    /// that stacks compare by their name indices as by their names).
    names: Vec<&'a str>,
    /// Per name, the kind of code its frames are in.
    kinds: Vec<&'static str>,
    /// Per location, where its lines' entries start in `name_of`.
    first_line: Vec<u32>,
    /// Per line of every location, its name's index in `names`.
    name_of: Vec<u32>,
    /// Per sample, its index among the listed stacks (`u32::MAX`: not
    /// listed).
    row_of: Vec<u32>,
}

impl<'a> StackTable<'a> {
    fn of(profile: &'a Profile, table: &'a LocationTable, metrics: &[Metric]) -> StackTable<'a> {
        let mut first_line = Vec::with_capacity(table.locations.len());
        let mut lines = 0u32;
        for location in &table.locations {
            first_line.push(lines);
            lines += location.lines.len() as u32;
        }
        let mut name_of = vec![u32::MAX; lines as usize];
        let mut row_of = Vec::with_capacity(profile.samples.len());
        let mut rows = 0;
        let mut used: Vec<(&str, FrameRef)> = Vec::new();
        for sample in &profile.samples {
            if !metrics.iter().any(|m| m.of(&sample.values) > 0.0) {
                row_of.push(u32::MAX);
                continue;
            }
            row_of.push(rows);
            rows += 1;
            for &frame in &sample.frames {
                let at = first_line[frame.location()] as usize + frame.line();
                if name_of[at] == u32::MAX {
                    name_of[at] = 0;
                    used.push((function_name(table, frame), frame));
                }
            }
        }
        used.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut names: Vec<&str> = Vec::new();
        let mut kinds: Vec<&'static str> = Vec::new();
        for (name, frame) in used {
            if names.last() != Some(&name) {
                names.push(name);
                kinds.push(kind_name(
                    line_of(table, frame).map_or(FrameKind::Native, |l| l.kind),
                ));
            }
            name_of[first_line[frame.location()] as usize + frame.line()] = names.len() as u32 - 1;
        }
        StackTable {
            profile,
            names,
            kinds,
            first_line,
            name_of,
            row_of,
        }
    }

    /// The index in `names` of a listed stack's frame.
    fn name_index(&self, frame: FrameRef) -> u32 {
        self.name_of[self.first_line[frame.location()] as usize + frame.line()]
    }

    /// The name indices of a sample's frames, root first.
    fn frame_names(&self, sample: usize) -> impl Iterator<Item = u32> + '_ {
        let frames = &self.profile.samples[sample].frames;
        frames.iter().rev().map(|&frame| self.name_index(frame))
    }
}

/// A listed stack: its frames' name indices, root first.
struct StackFrames<'a> {
    table: &'a StackTable<'a>,
    sample: usize,
}

impl Serialize for StackFrames<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.table.frame_names(self.sample))
    }
}

impl Serialize for StackTable<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let listed = self.row_of.iter().filter(|&&row| row != u32::MAX).count();
        let mut seq = serializer.serialize_seq(Some(listed))?;
        let listed = (0..self.row_of.len()).filter(|&sample| self.row_of[sample] != u32::MAX);
        for sample in listed {
            seq.serialize_element(&StackFrames {
                table: self,
                sample,
            })?;
        }
        seq.end()
    }
}

/// One program frame's self value.
#[derive(Serialize)]
struct ProgramFrameReport {
    /// The program frame (the leaf of a stack without one).
    name: String,
    /// The self value of the stacks whose program frame it is.
    #[serde(rename = "self")]
    self_value: Bound,
    /// The allocating function carrying most of it, `null` when that is
    /// the program frame itself.
    via: Option<String>,
}

/// One metric's value of a listed stack.
#[derive(Serialize)]
struct StackValue {
    /// Its index in the report's `stacks`.
    stack: u32,
    #[serde(flatten)]
    value: Bound,
}

/// One metric's listed stacks with a non-zero value, largest first.
struct MetricStacks<'a> {
    table: &'a StackTable<'a>,
    metric: Metric,
    /// Sample indices, in the order written.
    order: Vec<u32>,
}

impl Serialize for MetricStacks<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let samples = &self.table.profile.samples;
        serializer.collect_seq(self.order.iter().map(|&sample| StackValue {
            stack: self.table.row_of[sample as usize],
            value: Bound::of(&samples[sample as usize].estimate(self.metric)),
        }))
    }
}

#[derive(Serialize)]
struct SidePair {
    #[serde(rename = "self")]
    self_value: f64,
    total: f64,
}

#[derive(Serialize)]
struct DeltaPair {
    #[serde(rename = "self")]
    self_value: DeltaBound,
    total: DeltaBound,
}

#[derive(Serialize)]
struct ChangeReport {
    name: String,
    base: SidePair,
    new: SidePair,
    delta: DeltaPair,
}

impl ChangeReport {
    fn of(change: &FunctionChange) -> ChangeReport {
        let (s, t) = (&change.self_change, &change.total_change);
        ChangeReport {
            name: change.name.clone(),
            base: SidePair {
                self_value: s.base.value,
                total: t.base.value,
            },
            new: SidePair {
                self_value: s.new.value,
                total: t.new.value,
            },
            delta: DeltaPair {
                self_value: DeltaBound::of(s),
                total: DeltaBound::of(t),
            },
        }
    }
}

#[derive(Serialize)]
struct MetricReport<'a> {
    unit: &'static str,
    /// The new (or only) dump's detection limit.
    detection_limit: DetectionLimit,
    /// For object counts: the detection limit for the object sizes the
    /// dump allocates (its most allocated sizes and its smallest); empty
    /// for bytes and exact dumps.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    detection_limit_by_size: Vec<SizeLimit>,
    /// Object counts under this are low-confidence (0 for bytes and exact
    /// dumps).
    low_confidence_below: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_detection_limit: Option<DetectionLimit>,
    /// The view's total: the new (or only) side's estimate after the
    /// view's filters, transforms and birth range (`view`).
    total: Bound,
    /// The new side's whole profile, before any of them: `total` equals it
    /// for a view without filters.
    whole_total: Bound,
    /// Its functions, largest total first.
    functions: Vec<FunctionReport>,
    /// Its self values grouped by program frame, largest first.
    program_frames: Vec<ProgramFrameReport>,
    /// Its distinct stacks with a non-zero estimate, largest first: their
    /// indices in the report's `stacks` and their values.
    stacks: MetricStacks<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_total: Option<Bound>,
    /// With a base: how the changes' variances were made,
    /// `shared-samples` (in-use values of one process: the live samples
    /// only one dump has), `samples-in-between` (cumulative values of one
    /// process) or `independent` (var(new) + var(base)).
    #[serde(skip_serializing_if = "Option::is_none")]
    variance_rule: Option<&'static str>,
    /// new − base for the whole profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<DeltaBound>,
    /// Every function of either dump whose change is not known to be exactly
    /// 0, largest |total delta| first.
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<Vec<ChangeReport>>,
}

impl<'a> MetricReport<'a> {
    fn of(
        view: &View<'_>,
        comparison: Option<&Comparison<'_>>,
        metric: Metric,
        table: &'a StackTable<'a>,
    ) -> MetricReport<'a> {
        let base = view.base.map(|b| &b.profile);
        let sampling = view.new.profile.sampling(metric);
        MetricReport {
            unit: metric.unit(),
            detection_limit: DetectionLimit::of(&sampling),
            detection_limit_by_size: if metric.counted() == Unit::Objects {
                size_limits(&view.new.profile, view.new.first_dump().sampling_law())
                    .into_iter()
                    .map(|(object_size, objects)| SizeLimit {
                        object_size,
                        objects,
                    })
                    .collect()
            } else {
                Vec::new()
            },
            low_confidence_below: sampling.low_confidence_below,
            base_detection_limit: base.map(|b| DetectionLimit::of(&b.sampling(metric))),
            total: Bound::of(&view.new.profile.estimate(metric)),
            whole_total: Bound::of(&view.new.profile.whole_estimate(metric)),
            functions: functions(&view.new.profile, view.table, metric),
            program_frames: program_frame_values(&view.new.profile, view.table, metric)
                .into_iter()
                .map(|row| ProgramFrameReport {
                    name: row.name,
                    self_value: Bound::of(&row.estimate),
                    via: row.via,
                })
                .collect(),
            stacks: stacks(table, metric),
            base_total: base.map(|b| Bound::of(&b.estimate(metric))),
            variance_rule: comparison.map(|c| c.rule(metric).name()),
            delta: comparison.map(|c| DeltaBound::of(&c.total(metric))),
            changes: comparison.map(|c| changes(c, view.table, metric)),
        }
    }
}

fn by_size_then_name(a: (f64, &str), b: (f64, &str)) -> Ordering {
    b.0.partial_cmp(&a.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

fn functions(profile: &Profile, table: &LocationTable, metric: Metric) -> Vec<FunctionReport> {
    // Keyed by the label `function_values` gives each function.
    let labels = FrameLabels::of(table, profile.samples.iter().map(|s| &s.frames[..]));
    let leaf = |sample: &Sample| {
        sample
            .frames
            .first()
            .map_or("??", |&frame| labels.get(table, frame))
            .to_string()
    };
    let program = ProgramFrames::of(profile, table, metric, leaf);
    let mut rows: Vec<FunctionReport> = function_values(profile, table, metric)
        .into_iter()
        .map(|(name, value)| FunctionReport {
            program_frame: program.get(&name).map(str::to_string),
            name,
            self_value: Bound::of(&value.self_estimate),
            total: Bound::of(&value.total_estimate),
        })
        .collect();
    rows.sort_by(|a, b| {
        by_size_then_name((a.total.estimate, &a.name), (b.total.estimate, &b.name))
    });
    rows
}

fn stacks<'a>(table: &'a StackTable<'a>, metric: Metric) -> MetricStacks<'a> {
    let samples = &table.profile.samples;
    let value = |sample: u32| metric.of(&samples[sample as usize].values);
    let mut rows: Vec<(u32, f64)> = (0..samples.len() as u32)
        .filter(|&sample| value(sample) > 0.0)
        .map(|sample| {
            let estimate = samples[sample as usize]
                .estimate(metric)
                .interval()
                .estimate;
            (sample, estimate)
        })
        .collect();
    rows.sort_by(|&(a, estimate_a), &(b, estimate_b)| {
        estimate_b
            .partial_cmp(&estimate_a)
            .unwrap_or(Ordering::Equal)
            .then_with(|| {
                table
                    .frame_names(a as usize)
                    .cmp(table.frame_names(b as usize))
            })
    });
    MetricStacks {
        table,
        metric,
        order: rows.into_iter().map(|(sample, _)| sample).collect(),
    }
}

fn changes(
    comparison: &Comparison<'_>,
    table: &LocationTable,
    metric: Metric,
) -> Vec<ChangeReport> {
    let mut rows: Vec<&FunctionChange> = Vec::new();
    let all = function_changes(comparison, table, metric);
    // A function whose estimates are equal on both sides may still have
    // changed (within its interval): only a change known to be exactly 0 is
    // left out.
    let known_unchanged = |delta: &Delta| {
        let interval = delta.interval();
        interval.low == 0.0 && interval.high == 0.0
    };
    rows.extend(
        all.iter()
            .filter(|c| !known_unchanged(&c.total_change) || !known_unchanged(&c.self_change)),
    );
    rows.sort_by(|a, b| {
        by_size_then_name(
            (a.total_change.value().abs(), &a.name),
            (b.total_change.value().abs(), &b.name),
        )
    });
    rows.into_iter().map(ChangeReport::of).collect()
}
