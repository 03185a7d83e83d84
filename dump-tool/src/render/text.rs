//! The text report: top functions by self and total value, the top changes
//! of a comparison, and a totals line that puts the dump's exact counters
//! beside the estimate from the samples.

use super::{View, round};
use crate::profile::{FunctionValue, Profile, function_values};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write;

/// The whole report with `top` rows per table.
pub fn render(view: &View<'_>, top: usize) -> String {
    let mut out = String::new();
    match &view.base {
        None => single_report(&mut out, view, top),
        Some(base) => diff_report(&mut out, view, base.profile, base.name, top),
    }
    out
}

fn single_report(out: &mut String, view: &View<'_>, top: usize) {
    let functions = function_values(view.new, view.table, view.metric);
    let whole = view.metric.of(&view.new.estimated);
    let _ = writeln!(
        out,
        "heapdiff: {} of {} (sampling period {} bytes, values corrected for sampling)",
        view.metric.name(),
        view.new_name,
        view.new.period
    );
    for (title, key) in [
        (
            "self",
            (|f: &FunctionValue| f.self_value) as fn(&FunctionValue) -> f64,
        ),
        ("total", |f: &FunctionValue| f.total),
    ] {
        let _ = writeln!(
            out,
            "\nTop {top} functions by {title} {} ({}):",
            view.metric.name(),
            view.metric.unit()
        );
        let _ = writeln!(
            out,
            "{:>14} {:>7} {:>14} {:>7}  function",
            "self", "self%", "total", "total%"
        );
        for (name, value) in top_by(&functions, top, key) {
            let _ = writeln!(
                out,
                "{:>14} {:>7} {:>14} {:>7}  {name}",
                round(value.self_value),
                percent(value.self_value, whole),
                round(value.total),
                percent(value.total, whole)
            );
        }
    }
    let _ = writeln!(out);
    totals_lines(out, "", view.new);
}

fn diff_report(out: &mut String, view: &View<'_>, base: &Profile, base_name: &str, top: usize) {
    let new_functions = function_values(view.new, view.table, view.metric);
    let base_functions = function_values(base, view.table, view.metric);
    let _ = writeln!(
        out,
        "heapdiff: {} from {} (base) to {} (new)",
        view.metric.name(),
        base_name,
        view.new_name
    );
    for (title, pick) in [
        (
            "self",
            (|f: &FunctionValue| f.self_value) as fn(&FunctionValue) -> f64,
        ),
        ("total", |f: &FunctionValue| f.total),
    ] {
        let rows = changes(&base_functions, &new_functions, pick);
        let _ = writeln!(
            out,
            "\nTop {top} changes by {title} {} ({}), largest |delta| first:",
            view.metric.name(),
            view.metric.unit()
        );
        let _ = writeln!(
            out,
            "{:>14} {:>14} {:>14}  function",
            "base", "new", "delta"
        );
        for (name, base, new) in rows.into_iter().take(top) {
            let delta = round(new) - round(base);
            let _ = writeln!(
                out,
                "{:>14} {:>14} {:>+14}  {name}",
                round(base),
                round(new),
                delta
            );
        }
    }
    let whole_base = view.metric.of(&base.estimated);
    let whole_new = view.metric.of(&view.new.estimated);
    let _ = writeln!(
        out,
        "\nDelta: {:+} {} ({} base → {} new)",
        round(whole_new) - round(whole_base),
        view.metric.unit(),
        round(whole_base),
        round(whole_new)
    );
    totals_lines(out, "base ", base);
    totals_lines(out, "new  ", view.new);
}

/// `(name, base, new)` for every function on either side, largest absolute
/// change first, ties by name.
fn changes(
    base: &HashMap<String, FunctionValue>,
    new: &HashMap<String, FunctionValue>,
    pick: fn(&FunctionValue) -> f64,
) -> Vec<(String, f64, f64)> {
    let mut names: Vec<&String> = base.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    let mut rows: Vec<(String, f64, f64)> = names
        .into_iter()
        .map(|name| {
            let value = |side: &HashMap<String, FunctionValue>| side.get(name).map_or(0.0, pick);
            (name.clone(), value(base), value(new))
        })
        .filter(|(_, base, new)| round(*new) != round(*base))
        .collect();
    rows.sort_by(|a, b| {
        let magnitude = |row: &(String, f64, f64)| (row.2 - row.1).abs();
        magnitude(b)
            .partial_cmp(&magnitude(a))
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    rows
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

/// The estimate from the samples beside the dump's exact counters.
fn totals_lines(out: &mut String, label: &str, profile: &Profile) {
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
    if exact.allocations == 0 && exact.samples_taken == 0 {
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
