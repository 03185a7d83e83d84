//! Flamegraphs through inferno.
//!
//! One profile: frame widths are the metric. With a base: inferno's
//! differential flamegraph, widths from the new profile, red where a stack
//! grew and blue where it shrank. A stack that vanished has width 0 there,
//! so `--negate` draws the same comparison with widths from the base (the
//! inputs swapped plus `negate_differentials`, inferno's advice), which keeps
//! vanished stacks visible while red still means growth.

use super::round;
use super::xml::{escape, unescape};
use crate::model::Profile;
use crate::model::folding::{diff, folded, folded_frame};
use crate::model::line_of;
use crate::pipeline::View;
use inferno::flamegraph::color::{BasicPalette, Palette};
use inferno::flamegraph::{self, Direction, Options, TextTruncateDirection};
use std::collections::{BTreeMap, HashSet};

/// The flamegraph knobs of the command line.
#[derive(Clone, Debug, Default)]
pub struct SvgOptions {
    pub title: Option<String>,
    pub inverted: bool,
    /// Omit frames narrower than this many pixels (inferno's `min_width`).
    pub min_width: Option<f64>,
    /// Differential only: widths from the base instead of the new profile.
    pub negate: bool,
}

/// The SVG document, or why inferno could not draw it.
pub fn render(view: &View<'_>, options: &SvgOptions) -> Result<Vec<u8>, String> {
    let counts = match &view.base {
        None => single_counts(view),
        Some(_) => differential_counts(view, options.negate),
    };
    let divisor = divisor_for(&counts);
    let lines = format_lines(&counts, divisor);
    if lines.is_empty() {
        return Err(format!(
            "nothing to draw: no stack has a non-zero {} value",
            view.metric.name()
        ));
    }
    let mut inferno_options = inferno_options(view, options);
    inferno_options.factor = divisor as f64;
    let mut svg = Vec::new();
    flamegraph::from_lines(
        &mut inferno_options,
        lines.iter().map(String::as_str),
        &mut svg,
    )
    .map_err(|e| format!("flamegraph rendering failed: {e}"))?;
    let svg = with_tooltip_details(&svg, &tooltip_details(view));
    Ok(super::svg_intervals::annotate(svg, view))
}

/// Per shown name, the lines a tooltip adds: the full name(s) and the
/// `file:line` of the frames drawn under that name.
fn tooltip_details(view: &View<'_>) -> BTreeMap<String, String> {
    let mut found: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    let profiles: Vec<&Profile> = std::iter::once(&view.new.profile)
        .chain(view.base.map(|b| &b.profile))
        .collect();
    // Every frame gives the same details wherever it is: each is looked at
    // once, in order of first appearance.
    let mut seen = HashSet::new();
    for profile in profiles {
        for frame in profile.samples.iter().flat_map(|s| &s.frames) {
            if !seen.insert(*frame) {
                continue;
            }
            let Some(line) = line_of(view.table, *frame) else {
                continue;
            };
            let (full, sources) = found.entry(folded_frame(&line.display)).or_default();
            if line.function != line.display && !full.contains(&line.function) {
                full.push(line.function.clone());
            }
            if let Some(source) = line.source()
                && !sources.contains(&source)
            {
                sources.push(source);
            }
        }
    }
    found
        .into_iter()
        .filter(|(_, (full, sources))| !full.is_empty() || !sources.is_empty())
        .map(|(name, (full, sources))| (name, detail_text(&full, &sources)))
        .collect()
}

/// At most three of each, then how many more.
fn detail_text(full: &[String], sources: &[String]) -> String {
    let list = |items: &[String]| {
        let mut text = items.iter().take(3).cloned().collect::<Vec<_>>().join("\n");
        if items.len() > 3 {
            text.push_str(&format!("\n(+{} more)", items.len() - 3));
        }
        text
    };
    [list(full), list(sources)]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Insert the details into each frame's `<title>`: `NAME\nDETAILS (counts)`.
/// The counts stay last, so inferno's script (which strips the last
/// parenthesised group to label a zoomed frame) still finds the name first.
fn with_tooltip_details(svg: &[u8], details: &BTreeMap<String, String>) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(svg) else {
        return svg.to_vec();
    };
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut rest = text;
    while let Some(start) = rest.find("<title>") {
        let body_start = start + "<title>".len();
        let Some(length) = rest[body_start..].find("</title>") else {
            break;
        };
        let body = &rest[body_start..body_start + length];
        out.push_str(&rest[..body_start]);
        out.push_str(&title_with_details(body, details));
        rest = &rest[body_start + length..];
    }
    out.push_str(rest);
    out.into_bytes()
}

/// `NAME (counts)` → `NAME\nDETAILS (counts)`, in escaped XML text.
fn title_with_details(body: &str, details: &BTreeMap<String, String>) -> String {
    let Some(counts_at) = body.rfind(" (") else {
        return body.to_string();
    };
    let name = unescape(&body[..counts_at]);
    match details.get(&name) {
        Some(extra) => format!(
            "{}\n{}{}",
            &body[..counts_at],
            escape(extra),
            &body[counts_at..]
        ),
        None => body.to_string(),
    }
}

fn inferno_options<'a>(view: &View<'_>, options: &SvgOptions) -> Options<'a> {
    let mut inferno = Options::default();
    inferno.title = options
        .title
        .clone()
        .unwrap_or_else(|| default_title(view, options));
    inferno.subtitle = Some(format!(
        "{} {}, corrected for sampling (mean period {} bytes); tooltips give 95 % intervals{} | {}",
        view.metric.name(),
        view.metric.unit(),
        view.new.profile.period,
        if view.base.is_some() {
            ", faded frames changed within sampling noise"
        } else {
            ""
        },
        view.spec.summary()
    ));
    inferno.count_name = view.metric.unit().to_string();
    inferno.colors = Palette::Basic(BasicPalette::Mem);
    // Names are recognised by their start (`std::vector<…>::push_back`).
    inferno.text_truncate_direction = TextTruncateDirection::Right;
    if options.inverted {
        inferno.direction = Direction::Inverted;
    }
    if let Some(min_width) = options.min_width {
        inferno.min_width = min_width;
    }
    inferno.negate_differentials = view.base.is_some() && options.negate;
    inferno
}

fn default_title(view: &View<'_>, options: &SvgOptions) -> String {
    let title = profiles_title(view, options);
    match view.spec.attached_s_before_dump {
        Some(s) => format!("{title}, since the attach ({s:.1} s before the dump)"),
        None => title,
    }
}

fn profiles_title(view: &View<'_>, options: &SvgOptions) -> String {
    match &view.base {
        None => format!("heapdiff: {} of {}", view.metric.name(), view.new.name),
        Some(base) if options.negate => format!(
            "heapdiff: {} from {} to {} (widths: base)",
            view.metric.name(),
            base.name,
            view.new.name
        ),
        Some(base) => format!(
            "heapdiff: {} from {} to {}",
            view.metric.name(),
            base.name,
            view.new.name
        ),
    }
}

/// Per folded stack, `[width]` for one profile or `[before, after]` for a
/// comparison, as non-negative integers.
type Counts = Vec<(String, Vec<u64>)>;

/// Inferno sums counts in `usize` and multiplies deltas by 150 in `isize`:
/// keep the total below this, dividing every count (and showing the divisor
/// as inferno's `factor`) when a dump's estimates are astronomically large.
const MAX_TOTAL: u64 = 1 << 50;

fn divisor_for(counts: &Counts) -> u64 {
    let total: f64 = counts
        .iter()
        .map(|(_, values)| values.iter().copied().max().unwrap_or(0) as f64)
        .sum();
    if total <= MAX_TOTAL as f64 {
        1
    } else {
        (total / MAX_TOTAL as f64).ceil() as u64
    }
}

fn format_lines(counts: &Counts, divisor: u64) -> Vec<String> {
    counts
        .iter()
        .filter_map(|(stack, values)| {
            let scaled: Vec<String> = values
                .iter()
                .map(|v| (v / divisor.max(1)).to_string())
                .collect();
            let visible = values.iter().any(|v| v / divisor.max(1) > 0);
            visible.then(|| format!("{stack} {}", scaled.join(" ")))
        })
        .collect()
}

fn non_negative(value: f64) -> u64 {
    round(value).max(0) as u64
}

fn single_counts(view: &View<'_>) -> Counts {
    folded(&view.new.profile, view.table, view.metric)
        .into_iter()
        .map(|(stack, value)| (stack, vec![non_negative(value)]))
        .collect()
}

/// `[BEFORE, AFTER]` per stack; inferno computes AFTER − BEFORE and sizes by
/// AFTER. With `negate` the columns are swapped (and inferno negates the
/// delta back), so widths come from the base.
fn differential_counts(view: &View<'_>, negate: bool) -> Counts {
    let Some(base) = &view.base else {
        return Vec::new();
    };
    let base = folded(&base.profile, view.table, view.metric);
    let new = folded(&view.new.profile, view.table, view.metric);
    diff(&base, &new)
        .into_iter()
        .map(|(stack, change)| {
            let (base, new) = (non_negative(change.base), non_negative(change.new));
            let columns = if negate {
                vec![new, base]
            } else {
                vec![base, new]
            };
            (stack, columns)
        })
        .collect()
}
