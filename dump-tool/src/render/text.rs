//! The text report: top functions by self and total value with their 95 %
//! intervals, the top changes of a comparison with the interval of each
//! change and whether it is significant, and totals lines that put the
//! dump's exact counters beside the estimate from the samples. A function
//! in code a runtime generated has its kind after its name (`  [javascript]`).

use super::bounds::{
    change_bracket, estimate_bracket, limits_sentence, size_limits, size_limits_sentence,
    variance_sentence,
};
use super::round;
use crate::compare::{
    Comparison, FunctionChange, FunctionValue, function_changes, function_values,
    program_frame_values,
};
use crate::input::foreign::is_foreign;
use crate::model::{Metric, walk_ends};
use crate::pipeline::{Side, View};
use crate::stats::{Delta, Estimate, Unit};
use crate::symbols::LocationTable;
use heapsample_format::FrameKind;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write;

/// The whole report with `top` rows per table.
pub fn render(view: &View<'_>, top: usize) -> String {
    let mut out = String::new();
    match &view.base {
        None => single_report(&mut out, view, top),
        Some(base) => diff_report(&mut out, view, base, top),
    }
    out
}

fn single_report(out: &mut String, view: &View<'_>, top: usize) {
    let functions = function_values(&view.new.profile, view.table, view.metric);
    let marks = kind_marks(view.table);
    let whole = view.metric.of(&view.new.profile.estimated);
    let _ = writeln!(
        out,
        "heapdiff: {} of {} (sampling period {} bytes, values corrected for sampling, [low,high] = 95 % interval)",
        view.metric.name(),
        view.new.name,
        view.new.profile.period
    );
    let _ = writeln!(out, "heapdiff: {}", view.spec.summary());
    if let Some(note) = &view.new.profile.origin.attach_note {
        let _ = writeln!(out, "heapdiff: {note}");
    }
    if let Some((low, high)) = view.new.profile.time.born_ns {
        let high = if high == u64::MAX {
            "the dump".to_string()
        } else {
            super::duration(high)
        };
        let _ = writeln!(
            out,
            "heapdiff: in use counts only memory born in [{}, {high}) since {}",
            super::duration(low),
            view.new.profile.time.scope.origin()
        );
    }
    whole_profile_line(out, view);
    let _ = writeln!(
        out,
        "{}",
        limits_sentence(
            &view.new.profile.sampling(view.metric),
            "a function absent from this report allocated"
        )
    );
    if view.metric.counted() == Unit::Objects {
        let law = view.new.first_dump().sampling_law();
        if let Some(line) = size_limits_sentence(&size_limits(&view.new.profile, law)) {
            let _ = writeln!(out, "{line}");
        }
    }
    for (title, key) in [
        (
            "self",
            (|f: &FunctionValue| f.self_estimate) as fn(&FunctionValue) -> Estimate,
        ),
        ("total", |f: &FunctionValue| f.total_estimate),
    ] {
        let _ = writeln!(
            out,
            "\nTop {top} functions by {title} {} ({}):",
            view.metric.name(),
            view.metric.unit()
        );
        let _ = writeln!(
            out,
            "{:>14} {:>7} {:>14} {:>7} {:>27} {:>27}  function",
            "self", "self%", "total", "total%", "self 95% interval", "total 95% interval"
        );
        for (name, value) in top_by(&functions, top, |f| key(f).value) {
            let mark = marks.get(name.as_str()).copied().unwrap_or("");
            let _ = writeln!(
                out,
                "{:>14} {:>7} {:>14} {:>7} {:>27} {:>27}  {name}{mark}",
                round(value.self_value),
                percent(value.self_value, whole),
                round(value.total),
                percent(value.total, whole),
                estimate_bracket(&value.self_estimate),
                estimate_bracket(&value.total_estimate),
            );
        }
    }
    program_frames_table(out, view, top, whole);
    let _ = writeln!(out);
    totals_lines(out, "", view.new);
}

/// When the view's filters, transforms or birth range left out part of the
/// profile: one line with the view's total against the whole profile's, so
/// that percentages are read as the view's.
fn whole_profile_line(out: &mut String, view: &View<'_>) {
    let profile = &view.new.profile;
    let (shown, whole) = (
        profile.estimate(view.metric),
        profile.whole_estimate(view.metric),
    );
    if round(shown.value) == round(whole.value) {
        return;
    }
    let _ = writeln!(
        out,
        "heapdiff: this view holds {} {} {} of the whole profile's {} {} {} ({}); percentages are of the view",
        round(shown.value),
        view.metric.unit(),
        estimate_bracket(&shown),
        round(whole.value),
        view.metric.unit(),
        estimate_bracket(&whole),
        percent(shown.value, whole.value)
    );
}

/// The self values grouped by program frame (the program's own function
/// that called into the runtime or a system library), each with the
/// allocating function carrying most of it; left out when every stack's
/// leaf is its own program frame (the self table says it all).
fn program_frames_table(out: &mut String, view: &View<'_>, top: usize, whole: f64) {
    let rows = program_frame_values(&view.new.profile, view.table, view.metric);
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|row| round(row.estimate.value) != 0)
        .take(top)
        .collect();
    if rows.iter().all(|row| row.via.is_none()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nTop {top} program frames by self {} ({}):",
        view.metric.name(),
        view.metric.unit()
    );
    let _ = writeln!(
        out,
        "{:>14} {:>7} {:>27}  program frame ← via allocating function",
        "self", "self%", "self 95% interval"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "{:>14} {:>7} {:>27}  {}",
            round(row.estimate.value),
            percent(row.estimate.value, whole),
            estimate_bracket(&row.estimate),
            super::program_first(row.via.as_deref().unwrap_or(&row.name), Some(&row.name)),
        );
    }
}

fn diff_report(out: &mut String, view: &View<'_>, base_side: &Side, top: usize) {
    let (base, base_name) = (&base_side.profile, &base_side.name);
    let comparison = Comparison::of(base, &view.new.profile);
    let changes = function_changes(&comparison, view.table, view.metric);
    let _ = writeln!(
        out,
        "heapdiff: {} from {} (base) to {} (new); a change is significant (yes) when its 95 % interval excludes 0",
        view.metric.name(),
        base_name,
        view.new.name
    );
    let _ = writeln!(out, "heapdiff: {}", view.spec.summary());
    let _ = writeln!(
        out,
        "{}",
        limits_sentence(
            &view.new.profile.sampling(view.metric),
            "a function absent from the new dump grew by"
        )
    );
    if view.metric.is_in_use()
        && let Some(rule) =
            variance_sentence(comparison.rule(view.metric), comparison.in_use_fallback())
    {
        let _ = writeln!(out, "{rule}");
    }
    for (title, pick) in [
        (
            "self",
            (|c: &FunctionChange| c.self_change) as fn(&FunctionChange) -> Delta,
        ),
        ("total", |c: &FunctionChange| c.total_change),
    ] {
        let rows = largest_changes(&changes, pick);
        let _ = writeln!(
            out,
            "\nTop {top} changes by {title} {} ({}), largest |delta| first:",
            view.metric.name(),
            view.metric.unit()
        );
        let _ = writeln!(
            out,
            "{:>14} {:>14} {:>14} {:>29} {:>4}  function",
            "base", "new", "delta", "delta 95% interval", "sig"
        );
        let marks = kind_marks(view.table);
        for (name, delta) in rows.into_iter().take(top) {
            let mark = marks.get(name).copied().unwrap_or("");
            let _ = writeln!(
                out,
                "{:>14} {:>14} {:>+14} {:>29} {:>4}  {name}{mark}",
                round(delta.base.value),
                round(delta.new.value),
                round(delta.new.value) - round(delta.base.value),
                change_bracket(&delta),
                significance(&delta),
            );
        }
    }
    let whole = comparison.total(view.metric);
    let _ = writeln!(
        out,
        "\nDelta: {:+} {} ({} base → {} new), 95 % interval {}, {}",
        round(whole.new.value) - round(whole.base.value),
        view.metric.unit(),
        round(whole.base.value),
        round(whole.new.value),
        change_bracket(&whole),
        if whole.significant() {
            "significant"
        } else {
            "not significant (within sampling noise)"
        }
    );
    totals_lines(out, "base ", base_side);
    totals_lines(out, "new  ", view.new);
}

fn significance(delta: &Delta) -> &'static str {
    if delta.significant() { "yes" } else { "no" }
}

/// `(name, change)` of every function whose rounded value changed, largest
/// absolute change first, ties by name.
fn largest_changes(
    changes: &[FunctionChange],
    pick: fn(&FunctionChange) -> Delta,
) -> Vec<(&str, Delta)> {
    let mut rows: Vec<(&str, Delta)> = changes
        .iter()
        .map(|change| (change.name.as_str(), pick(change)))
        .filter(|(_, d)| round(d.new.value) != round(d.base.value))
        .collect();
    rows.sort_by(|a, b| {
        b.1.value()
            .abs()
            .partial_cmp(&a.1.value().abs())
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(b.0))
    });
    rows
}

/// Per name of a function in code a runtime generated, the mark the text
/// report puts after it (`  [javascript]`, `  [python]`, `  [java]`,
/// `  [interpreter]`, `  [jit]`); native functions have none.
fn kind_marks(table: &LocationTable) -> HashMap<&str, &'static str> {
    let lines = table.locations.iter().flat_map(|location| &location.lines);
    lines
        .filter_map(|line| {
            let mark = match line.kind {
                FrameKind::Native => return None,
                FrameKind::Interpreter => "  [interpreter]",
                FrameKind::Python => "  [python]",
                FrameKind::JavaScript => "  [javascript]",
                FrameKind::Java => "  [java]",
                FrameKind::Jit => "  [jit]",
            };
            Some((line.display.as_str(), mark))
        })
        .collect()
}

/// The `top` functions by `key`, largest first, ties by name; zeros left out.
fn top_by(
    functions: &HashMap<String, FunctionValue>,
    top: usize,
    key: impl Fn(&FunctionValue) -> f64,
) -> Vec<(&String, &FunctionValue)> {
    let mut rows: Vec<_> = functions
        .iter()
        .filter(|(_, v)| round(key(v)) != 0)
        .collect();
    rows.sort_by(|a, b| {
        key(b.1)
            .partial_cmp(&key(a.1))
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(b.0))
    });
    rows.truncate(top);
    rows
}

fn percent(part: f64, whole: f64) -> String {
    if whole.abs() < f64::EPSILON {
        return "-".to_string();
    }
    format!("{:.1}%", 100.0 * part / whole)
}

/// What the dump tells about time: the views it lacks, or its exact peak.
fn time_line(out: &mut String, label: &str, side: &Side) {
    let time = &side.profile.time;
    let input = side.first_input();
    if let Some(missing) = time.missing() {
        if !is_foreign(&input.dump) {
            let why = if input.version < heapsample_format::TIMED_VERSION {
                format!("dump format {} carries no", input.version)
            } else {
                "written without".to_string()
            };
            let _ = writeln!(out, "{label}time: {why} {missing}");
        }
    } else if let Some(peak) = time.peak {
        let _ = writeln!(
            out,
            "{label}time: exact peak {} usable bytes at {} after the start",
            peak.live_usable_bytes,
            super::duration(peak.at_ns)
        );
    }
}

/// The estimate from the samples beside the dump's exact counters.
fn totals_lines(out: &mut String, label: &str, side: &Side) {
    time_line(out, label, side);
    if let Some(process) = crate::input::trigger::where_it_ran(&side.first_input().dump) {
        let _ = writeln!(out, "{label}process: {process}");
    }
    let ends = walk_ends::sum(side.inputs().iter().map(|input| &input.dump));
    if let Some(sentence) = walk_ends::early_sentence(&ends) {
        let _ = writeln!(out, "{label}stacks: {sentence}");
    }
    let profile = &side.profile;
    let estimated = &profile.estimated;
    let exact = &profile.totals;
    let _ = writeln!(
        out,
        "{label}totals: sampled estimate: in use {} bytes in {} objects, allocated {} bytes in {} objects",
        round(estimated.inuse_space),
        round(estimated.inuse_objects),
        round(estimated.alloc_space),
        round(estimated.alloc_objects)
    );
    let interval = |metric: Metric| estimate_bracket(&profile.estimate(metric));
    let _ = writeln!(
        out,
        "{label}totals: 95 % intervals:   in use {} bytes in {} objects, allocated {} bytes in {} objects",
        interval(Metric::InuseSpace),
        interval(Metric::InuseObjects),
        interval(Metric::AllocSpace),
        interval(Metric::AllocObjects)
    );
    let foreign = side.inputs().iter().all(|input| is_foreign(&input.dump));
    if foreign && exact.allocations == 0 && exact.samples_taken == 0 {
        let _ = writeln!(
            out,
            "{label}totals: exact counters:   not recorded (a foreign heap profile)"
        );
        return;
    }
    let frees = exact
        .frees
        .map_or_else(|| "frees not counted".to_string(), |n| format!("{n} frees"));
    let live = exact.live_usable_bytes.map_or_else(
        || "not recorded".to_string(),
        |b| format!("{b} usable bytes"),
    );
    let _ = writeln!(
        out,
        "{label}totals: exact counters:   allocated {} bytes in {} allocations, {frees}, live heap {live}, {} samples taken, {} dropped",
        exact.bytes_allocated, exact.allocations, exact.samples_taken, exact.samples_dropped
    );
    cost_lines(out, label, side);
}

/// What the profiler cost and the dumps it removed, for a side of one dump
/// (a merged side's costs belong to many processes).
fn cost_lines(out: &mut String, label: &str, side: &Side) {
    let [input] = side.inputs() else {
        return;
    };
    let dump = &input.dump;
    for line in [
        super::cost::cost_line(dump),
        super::cost::removed_line(dump),
    ]
    .into_iter()
    .flatten()
    {
        let _ = writeln!(out, "{label}{line}");
    }
}

/// A short summary (printed after writing an SVG): the top `top` functions
/// by self value, or the top changes.
pub fn summary(view: &View<'_>, top: usize) -> String {
    let full = render(view, top);
    // The first table and the totals are enough for a terminal.
    let mut sections: Vec<&str> = full.split("\n\n").collect();
    if sections.len() > 3 {
        sections.remove(2);
    }
    sections.join("\n\n")
}
