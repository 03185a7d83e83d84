//! The viewer's data model, built from a pipeline [`View`].
//!
//! Owns the viewer's JSON: per (thread, call stack) of the view the four
//! estimated metrics of the new side and, for a comparison, of the base
//! side, with the variance of each (the dumps' Horvitz–Thompson variance
//! sums), what its samples add up to and their weight scale (the largest of
//! the stacks merged into it), each side's sampling per metric, the pairing,
//! each metric's accumulation and variance rule, and where that rule is
//! the shared-samples one each stack's live samples only one side has
//! ([`crate::compare::Comparison`]), that [`crate::stats`]' rules for an
//! interval and a change need (the viewer applies the same rules,
//! `assets/stats.js`, to every frame and every row of its table), plus the
//! frame, module and thread tables and the live heap in words. Stacks are
//! the view's samples: a frame the view hid is gone, a thread or size-class
//! frame the view added is there.
//!
//! Frames are functions by their names with template arguments and their
//! module, so two instantiations of one template stay apart (and an
//! inlined frame of a function is that function); each carries a short
//! label that tells it from the others (`Pool<Blob>::take` where the short
//! name `Pool<…>::take` is shared) and its full name, and the page switches
//! between them. Threads are grouped by name, and by thread id where one
//! dump has several threads of that name (every CPython thread is
//! `python3`).

use super::ages::{AgesModel, ages_model};
use crate::compare::{Comparison, VarianceRule};
use crate::model::live_heap::LiveHeap;
use crate::model::{FrameRef, FunctionNames, Metric, Profile, distinct_labels, line_of};
use crate::pipeline::View;
use crate::render::live_heap::words;
use crate::stats::{Estimate, Sampling};
use crate::symbols::runtime::kind_name;
use crate::symbols::{LocationTable, NameStyle};
use ahash::AHashMap;
use heapsample_format::FrameKind;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// A download or navigation link shown in the viewer's header.
#[derive(Clone, Debug, Serialize)]
pub struct Link {
    pub label: String,
    pub href: String,
    /// `prev` or `next`: the keys `[` and `]` follow it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rel: Option<&'static str>,
}

/// What the viewer draws, serialized into the page.
#[derive(Debug, Serialize)]
pub struct Model {
    pub title: String,
    pub new_name: String,
    pub base_name: Option<String>,
    /// Metric names in the order of every 4-value group below.
    pub metrics: [&'static str; 4],
    /// Per metric, `in-use` or `cumulative` (see `stats::Accumulation`).
    pub accumulations: [&'static str; 4],
    pub period: u64,
    /// `short` or `full`: which of a frame's names the page shows first.
    pub names: &'static str,
    /// `[short label, module index or -1, "file:line" or "", full name]`;
    /// distinct frames never share a short label (see the module docs).
    pub frames: Vec<(String, i64, String, String)>,
    /// `[short name, kind]`, kind one of `program`, `runtime`, `library`.
    pub modules: Vec<(String, &'static str)>,
    /// Thread labels: the name, followed by ` tid N` where one dump has
    /// several threads of that name.
    pub threads: Vec<String>,
    /// Per stack: thread index.
    pub stack_threads: Vec<u32>,
    /// Per stack: how many frames (from the root) it shares with the stack
    /// before it. Stacks are sorted frame by frame, so most share a long
    /// prefix: the page stays small and the viewer's tree needs no sort.
    pub stack_shared: Vec<u32>,
    /// Per stack: its frame indices after the shared ones, root first.
    pub stack_frames: Vec<Vec<u32>>,
    /// Per stack, 4 values (see `metrics`): new side.
    pub new_values: Vec<f64>,
    /// With a base: `same-process` or `independent` (see
    /// `stats::Pairing`).
    pub pairing: Option<&'static str>,
    /// Per stack, 4 variances of the new side's estimates (single
    /// precision: the JSON stays compact, the intervals unchanged).
    pub new_variances: Vec<f32>,
    /// Per stack, what the new side's samples add up to (the least the
    /// truth can be), 4 values.
    pub new_sampled: Vec<f64>,
    /// Per stack, 4 weight scales of the new side's estimates
    /// (`Estimate::weight_scale`; a frame takes the largest of its stacks').
    pub new_scales: Vec<f32>,
    /// Per metric, how the new side was sampled.
    pub new_sampling: [Sampling; 4],
    /// Same for the base side (empty without a base).
    pub base_values: Vec<f64>,
    pub base_variances: Vec<f32>,
    pub base_sampled: Vec<f64>,
    pub base_scales: Vec<f32>,
    pub base_sampling: Option<[Sampling; 4]>,
    /// With a base, per metric the rule of its changes' variance
    /// (`compare::VarianceRule`: `shared-samples`, `samples-in-between` or
    /// `independent`).
    pub variance_rules: Option<[&'static str; 4]>,
    /// Where a metric's rule is `shared-samples`: per stack, 4 values (0
    /// for the other metrics), the live samples only the new side has
    /// (added) and only the base has (removed), as the sums above; empty
    /// otherwise. A frame's change is judged on its stacks' added and
    /// removed sums (`stats.js`' change with parts), as the reports do.
    pub added_values: Vec<f64>,
    pub added_variances: Vec<f32>,
    pub added_sampled: Vec<f64>,
    pub added_scales: Vec<f32>,
    pub removed_values: Vec<f64>,
    pub removed_variances: Vec<f32>,
    pub removed_sampled: Vec<f64>,
    pub removed_scales: Vec<f32>,
    /// Exact counters of the new side, then the base side.
    pub totals: Vec<heapsample_format::Totals>,
    /// The live heap of the new side, then the base side, in words: the
    /// estimate and how the exact counter (usable bytes) relates to it.
    pub live: Vec<String>,
    /// The age of the new side's live memory per function (`heapdiff
    /// ages`' slices), or why the dumps cannot tell it.
    pub ages: AgesModel,
    pub links: Vec<Link>,
    /// Per frame (index for index with `frames`), the kind of code it is in:
    /// `native`, `interpreter`, `python`, `javascript`, `java` or `jit`.
    pub frame_kinds: Vec<&'static str>,
}

/// Build the model of `view`: its title names both sides, it has no
/// links (a server adds its own).
pub fn model(view: &View<'_>) -> Model {
    let metrics = metrics_of(view.metric);
    let mut builder = ModelBuilder::new(view.table, metrics);
    let comparison = view
        .base
        .map(|base| Comparison::of(&base.profile, &view.new.profile));
    let parts = comparison.as_ref().and_then(|c| unshared_parts(c, metrics));
    builder.add_side(view.new, Side::New, parts.as_ref().map(|p| &p.added[..]));
    let mut totals = vec![view.new.profile.totals.clone()];
    if let Some(base) = view.base {
        builder.add_side(base, Side::Base, parts.as_ref().map(|p| &p.removed[..]));
        totals.push(base.profile.totals.clone());
    }
    let live = std::iter::once(view.new)
        .chain(view.base)
        .map(live_words)
        .collect();
    let pairing = comparison.as_ref().map(|c| c.pairing().name());
    let variance_rules = comparison
        .as_ref()
        .map(|c| metrics.map(|metric| c.rule(metric).name()));
    builder.executables = std::iter::once(view.new)
        .chain(view.base)
        .flat_map(|side| side.inputs())
        .map(|input| input.dump.executable.clone())
        .collect();
    let mut title = match view.base {
        Some(base) => format!("{} vs {}", view.new.name, base.name),
        None => view.new.name.clone(),
    };
    if let Some(note) = &view.new.profile.origin.attach_note {
        title = format!("{title} ({note})");
    }
    title = format!("{title} — {}", view.spec.summary());
    builder.finish(Model {
        title,
        new_name: view.new.name.clone(),
        base_name: view.base.map(|b| b.name.clone()),
        metrics: metrics.map(|metric| metric.name()),
        accumulations: metrics.map(|metric| metric.accumulation().name()),
        period: view.new.profile.period,
        names: match view.names {
            NameStyle::Short => "short",
            NameStyle::Full => "full",
        },
        pairing,
        frames: Vec::new(),
        modules: Vec::new(),
        threads: Vec::new(),
        stack_threads: Vec::new(),
        stack_shared: Vec::new(),
        stack_frames: Vec::new(),
        new_values: Vec::new(),
        new_variances: Vec::new(),
        new_sampled: Vec::new(),
        new_scales: Vec::new(),
        new_sampling: sampling(&view.new.profile, metrics),
        base_values: Vec::new(),
        base_variances: Vec::new(),
        base_sampled: Vec::new(),
        base_scales: Vec::new(),
        base_sampling: view.base.map(|base| sampling(&base.profile, metrics)),
        variance_rules,
        added_values: Vec::new(),
        added_variances: Vec::new(),
        added_sampled: Vec::new(),
        added_scales: Vec::new(),
        removed_values: Vec::new(),
        removed_variances: Vec::new(),
        removed_sampled: Vec::new(),
        removed_scales: Vec::new(),
        totals,
        live,
        ages: ages_model(view),
        links: Vec::new(),
        frame_kinds: Vec::new(),
    })
}

/// Per sample of each side, the estimates of its live samples the other
/// side does not have, in the order of [`Model::metrics`].
struct UnsharedParts {
    /// Per sample of the new profile.
    added: Vec<[Estimate; 4]>,
    /// Per sample of the base profile.
    removed: Vec<[Estimate; 4]>,
}

/// The parts of a comparison where some metric's changes get the
/// shared-samples rule (zero for the metrics that do not); `None` where
/// none does.
fn unshared_parts(comparison: &Comparison<'_>, metrics: [Metric; 4]) -> Option<UnsharedParts> {
    let shared = |metric| comparison.rule(metric) == VarianceRule::SharedSamples;
    if !metrics.into_iter().any(shared) {
        return None;
    }
    let bases = comparison.base().samples.len();
    let news = comparison.new_profile().samples.len();
    let zero = |metric: Metric| Estimate::zero(Sampling::exact(metric.counted()));
    let mut parts = UnsharedParts {
        added: vec![metrics.map(zero); news],
        removed: vec![metrics.map(zero); bases],
    };
    for (k, metric) in metrics.into_iter().enumerate() {
        if !shared(metric) {
            continue;
        }
        for (at, (_, sums)) in comparison.contributions(metric).into_iter().enumerate() {
            match at.checked_sub(bases) {
                None => parts.removed[at][k] = sums.removed(),
                Some(new) => parts.added[new][k] = sums.added(),
            }
        }
    }
    Some(parts)
}

/// How each metric of `profile` was sampled, in the order of
/// [`Model::metrics`].
fn sampling(profile: &Profile, metrics: [Metric; 4]) -> [Sampling; 4] {
    metrics.map(|metric| profile.sampling(metric))
}

/// The live heap of a side's dumps in words.
fn live_words(side: &crate::pipeline::Side) -> String {
    let dumps: Vec<_> = side.inputs().iter().map(|input| &input.dump).collect();
    words(&LiveHeap::of(&dumps), side.profile.period)
}

/// The page's four metrics for a view measuring `metric`: live and
/// allocated space and objects, or, for a temporary metric, temporary
/// space and objects in place of the live ones.
pub fn metrics_of(metric: Metric) -> [Metric; 4] {
    if Metric::TEMPORARY.contains(&metric) {
        [
            Metric::TempSpace,
            Metric::TempObjects,
            Metric::AllocSpace,
            Metric::AllocObjects,
        ]
    } else {
        Metric::ALL
    }
}

/// Interns frames, modules, threads and (thread, frames) stacks.
struct ModelBuilder<'a> {
    table: &'a LocationTable,
    /// The page's metrics ([`metrics_of`]).
    metrics: [Metric; 4],
    frames: Vec<(String, i64, String, String)>,
    /// Per frame, the kind of code it is in.
    kinds: Vec<&'static str>,
    frame_ids: HashMap<(String, i64), u32>,
    /// Per location of the table, the frame of each of its lines once
    /// seen (`u32::MAX` before): most frames repeat, and a lookup here
    /// costs no hashing.
    frame_refs: Vec<Vec<u32>>,
    /// Per frame: its function's names (the labels are made from them).
    names: Vec<FunctionNames>,
    module_ids: HashMap<usize, i64>,
    modules: Vec<(String, &'static str)>,
    threads: Vec<String>,
    thread_ids: HashMap<String, u32>,
    stack_ids: AHashMap<(u32, Vec<u32>), usize>,
    stacks: Vec<(u32, Vec<u32>)>,
    new: Columns,
    base: Columns,
    added: Columns,
    removed: Columns,
    /// Some side came with unshared parts.
    has_parts: bool,
    executables: Vec<String>,
}

/// Which side of a comparison samples come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    New,
    Base,
}

/// Per stack, the 4 metrics' sums of one side (or part): values,
/// variances, what the samples add up to, the largest weight scale.
#[derive(Default)]
struct Columns {
    values: Vec<[f64; 4]>,
    variances: Vec<[f64; 4]>,
    sampled: Vec<[f64; 4]>,
    scales: Vec<[f64; 4]>,
}

impl Columns {
    /// One more stack, nothing in it.
    fn push(&mut self) {
        for column in [
            &mut self.values,
            &mut self.variances,
            &mut self.sampled,
            &mut self.scales,
        ] {
            column.push([0.0; 4]);
        }
    }

    /// Add the 4 estimates to stack `id`: values, variances and floors of
    /// disjoint samples add; a sum's scale is the largest of its parts'.
    fn add(&mut self, id: usize, estimates: [Estimate; 4]) {
        for (k, e) in estimates.iter().enumerate() {
            self.values[id][k] += e.value;
            self.variances[id][k] += e.variance;
            self.sampled[id][k] += e.floor;
            self.scales[id][k] = self.scales[id][k].max(e.weight_scale());
        }
    }

    /// The columns in stack order `order`, flattened for the page:
    /// (values, variances, sampled, scales).
    fn flattened(&self, order: &[usize]) -> (Vec<f64>, Vec<f32>, Vec<f64>, Vec<f32>) {
        let sorted = |rows: &[[f64; 4]]| order.iter().map(|&id| rows[id]).collect::<Vec<_>>();
        (
            rounded(&sorted(&self.values)),
            single_precision(&sorted(&self.variances)),
            rounded(&sorted(&self.sampled)),
            single_precision(&sorted(&self.scales)),
        )
    }
}

impl<'a> ModelBuilder<'a> {
    fn new(table: &'a LocationTable, metrics: [Metric; 4]) -> Self {
        ModelBuilder {
            table,
            metrics,
            frames: Vec::new(),
            kinds: Vec::new(),
            frame_ids: HashMap::new(),
            frame_refs: Vec::new(),
            names: Vec::new(),
            module_ids: HashMap::new(),
            modules: Vec::new(),
            threads: Vec::new(),
            thread_ids: HashMap::new(),
            stack_ids: AHashMap::new(),
            stacks: Vec::new(),
            new: Columns::default(),
            base: Columns::default(),
            added: Columns::default(),
            removed: Columns::default(),
            has_parts: false,
            executables: Vec::new(),
        }
    }

    /// Add every sample of `side`'s profile, split by thread, and each
    /// sample's unshared part (`parts`, one per sample) if given.
    fn add_side(
        &mut self,
        side: &crate::pipeline::Side,
        which: Side,
        parts: Option<&[[Estimate; 4]]>,
    ) {
        let profile = &side.profile;
        let shared = shared_thread_names(side);
        self.has_parts |= parts.is_some();
        for (at, sample) in profile.samples.iter().enumerate() {
            let thread = self.thread(&thread_label(profile, sample.thread, &shared));
            let frames = self.frame_list(&sample.frames);
            let id = self.stack(thread, frames);
            let (columns, part_columns) = match which {
                Side::New => (&mut self.new, &mut self.added),
                Side::Base => (&mut self.base, &mut self.removed),
            };
            columns.add(id, self.metrics.map(|metric| sample.estimate(metric)));
            if let Some(part) = parts.and_then(|p| p.get(at)) {
                part_columns.add(id, *part);
            }
        }
    }

    fn thread(&mut self, label: &str) -> u32 {
        if let Some(&id) = self.thread_ids.get(label) {
            return id;
        }
        let id = self.threads.len() as u32;
        self.threads.push(label.to_string());
        self.thread_ids.insert(label.to_string(), id);
        id
    }

    /// Frame indices root first (the profile keeps them leaf first).
    fn frame_list(&mut self, frames: &[FrameRef]) -> Vec<u32> {
        frames.iter().rev().map(|&f| self.frame(f)).collect()
    }

    /// A frame per function (its name with template arguments) and
    /// module: the short labels are set once every frame is known
    /// ([`distinct_labels`]).
    fn frame(&mut self, frame: FrameRef) -> u32 {
        if let Some(&id) = self
            .frame_refs
            .get(frame.location())
            .and_then(|lines| lines.get(frame.line()))
            .filter(|&&id| id != u32::MAX)
        {
            return id;
        }
        let id = self.new_frame(frame);
        let locations = &self.table.locations;
        if self.frame_refs.len() < locations.len() {
            self.frame_refs.resize(locations.len(), Vec::new());
        }
        if let Some(lines) = self.frame_refs.get_mut(frame.location()) {
            let count = locations[frame.location()]
                .lines
                .len()
                .max(frame.line() + 1);
            lines.resize(count, u32::MAX);
            lines[frame.line()] = id;
        }
        id
    }

    fn new_frame(&mut self, frame: FrameRef) -> u32 {
        let location = self.table.locations.get(frame.location());
        let module = location
            .and_then(|l| l.module)
            .map_or(-1, |m| self.module(m));
        let line = line_of(self.table, frame);
        let names = line.map_or_else(|| FunctionNames::plain("??"), FunctionNames::of);
        if let Some(&id) = self.frame_ids.get(&(names.templates.clone(), module)) {
            return id;
        }
        let place = line.and_then(|l| l.source()).unwrap_or_default();
        let id = self.frames.len() as u32;
        self.frame_ids.insert((names.templates.clone(), module), id);
        self.frames
            .push((names.short.clone(), module, place, names.full.clone()));
        self.kinds
            .push(kind_name(line.map_or(FrameKind::Native, |l| l.kind)));
        self.names.push(names);
        id
    }

    fn module(&mut self, module: usize) -> i64 {
        if let Some(&id) = self.module_ids.get(&module) {
            return id;
        }
        let record = &self.table.modules[module];
        let id = self.modules.len() as i64;
        self.modules
            .push((record.short_name().to_string(), module_kind(&record.path)));
        self.module_ids.insert(module, id);
        id
    }

    fn stack(&mut self, thread: u32, frames: Vec<u32>) -> usize {
        let next = self.stacks.len();
        let id = *self.stack_ids.entry((thread, frames)).or_insert(next);
        if id == next {
            self.stacks.push((thread, Vec::new()));
            for columns in [
                &mut self.new,
                &mut self.base,
                &mut self.added,
                &mut self.removed,
            ] {
                columns.push();
            }
        }
        id
    }

    fn finish(mut self, mut model: Model) -> Model {
        // The executables are the "program" modules.
        for (index, (_, kind)) in self.modules.iter_mut().enumerate() {
            let path = self
                .module_ids
                .iter()
                .find(|&(_, &id)| id == index as i64)
                .map(|(&m, _)| self.table.modules[m].path.as_str());
            if path.is_some_and(|p| self.executables.iter().any(|e| e == p)) {
                *kind = "program";
            }
        }
        let has_base = model.base_name.is_some();
        for (frame, label) in self.frames.iter_mut().zip(distinct_labels(&self.names)) {
            frame.0 = label;
        }
        model.frames = self.frames;
        model.frame_kinds = self.kinds;
        model.modules = self.modules;
        model.threads = self.threads;
        // The frame lists live in the index until now (one copy, not two).
        let mut stacks = self.stacks;
        for ((thread, frames), id) in self.stack_ids {
            stacks[id] = (thread, frames);
        }
        let mut order: Vec<usize> = (0..stacks.len()).collect();
        order.sort_by(|&a, &b| {
            stacks[a]
                .1
                .cmp(&stacks[b].1)
                .then(stacks[a].0.cmp(&stacks[b].0))
        });
        let mut previous: &[u32] = &[];
        for &id in &order {
            let (thread, frames) = &stacks[id];
            let shared = frames
                .iter()
                .zip(previous)
                .take_while(|(a, b)| a == b)
                .count();
            model.stack_threads.push(*thread);
            model.stack_shared.push(shared as u32);
            model.stack_frames.push(frames[shared..].to_vec());
            previous = frames;
        }
        (
            model.new_values,
            model.new_variances,
            model.new_sampled,
            model.new_scales,
        ) = self.new.flattened(&order);
        if has_base {
            (
                model.base_values,
                model.base_variances,
                model.base_sampled,
                model.base_scales,
            ) = self.base.flattened(&order);
        }
        if self.has_parts {
            (
                model.added_values,
                model.added_variances,
                model.added_sampled,
                model.added_scales,
            ) = self.added.flattened(&order);
            (
                model.removed_values,
                model.removed_variances,
                model.removed_sampled,
                model.removed_scales,
            ) = self.removed.flattened(&order);
        }
        model
    }
}

/// Values rounded to what the text formats show (compact JSON).
fn rounded(rows: &[[f64; 4]]) -> Vec<f64> {
    rows.iter().flatten().map(|v| v.round()).collect()
}

/// Variances in single precision (7 digits, short JSON), never rounded to
/// zero when they are not: a tiny variance stays an uncertainty.
fn single_precision(rows: &[[f64; 4]]) -> Vec<f32> {
    rows.iter()
        .flatten()
        .map(|&v| {
            let single = v.clamp(0.0, f64::from(f32::MAX)) as f32;
            if single == 0.0 && v > 0.0 {
                f32::MIN_POSITIVE
            } else {
                single
            }
        })
        .collect()
}

/// The thread names a side must split by thread id: those that name
/// several threads of one dump (a pool of `python3` threads). Names shared
/// only across dumps (two processes' `main`) still group.
fn shared_thread_names(side: &crate::pipeline::Side) -> HashSet<String> {
    let mut shared = HashSet::new();
    for input in side.inputs() {
        let mut seen = HashSet::new();
        for thread in &input.dump.threads {
            if !thread.name.is_empty() && !seen.insert(thread.name.as_str()) {
                shared.insert(thread.name.clone());
            }
        }
    }
    shared
}

/// A thread's label: its name, followed by ` tid N` when the name is
/// `shared`; `tid N` without a name; `?` when the dump does not know.
fn thread_label(profile: &Profile, serial: u32, shared: &HashSet<String>) -> String {
    match profile.thread(serial) {
        Some(t) if t.name.is_empty() => format!("tid {}", t.tid),
        Some(t) if shared.contains(&t.name) => format!("{} tid {}", t.name, t.tid),
        Some(t) => t.name.clone(),
        None => "?".to_string(),
    }
}

/// `runtime` for the C/C++/Rust runtime and the loader, `library` otherwise
/// (the executables are marked `program` once known).
fn module_kind(path: &str) -> &'static str {
    const RUNTIME: &[&str] = &[
        "libc.so",
        "libc-",
        "libstdc++",
        "libc++",
        "libgcc_s",
        "ld-linux",
        "ld-musl",
        "libm.so",
        "libpthread",
        "libdl.so",
        "librt.so",
        "linux-vdso",
        "libstd-",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    if RUNTIME.iter().any(|prefix| name.starts_with(prefix)) {
        "runtime"
    } else {
        "library"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_kinds() {
        assert_eq!(module_kind("/lib/x86_64-linux-gnu/libc.so.6"), "runtime");
        assert_eq!(module_kind("/usr/lib/libstdc++.so.6"), "runtime");
        assert_eq!(module_kind("/opt/app/libplugin.so"), "library");
    }
}
