//! Intervals in the flamegraph: each frame's tooltip gets its function's
//! 95 % interval (the function's total value; for a comparison, the
//! interval of its change and whether it is significant), and in a
//! differential flamegraph the frames of functions whose change is within
//! sampling noise are desaturated.
//!
//! Works on the SVG inferno wrote, after `svg` added its details: every
//! frame is `<g><title>NAME[\nDETAILS] (VALUE…)</title><rect …
//! fill="rgb(r,g,b)" …/>…</g>`. The note becomes one more line before the
//! value, which stays last (inferno's script strips that last parenthesised
//! group). Titles whose name is not a known function are left as they are.

use super::View;
use super::svg::{escape, unescape};
use super::text::bracket;
use crate::estimate::{Interval, function_changes};
use crate::profile::{folded_frame, function_values};
use std::collections::HashMap;

/// What to add to the frames of one function.
struct Note {
    text: String,
    muted: bool,
}

/// `svg` with interval notes in its tooltips (and muted noise frames).
pub fn annotate(svg: Vec<u8>, view: &View<'_>) -> Vec<u8> {
    let Ok(svg) = String::from_utf8(svg) else {
        return Vec::new();
    };
    let notes = notes(view);
    let mut out = String::with_capacity(svg.len() + svg.len() / 4);
    let mut rest = svg.as_str();
    while let Some(start) = rest.find("<g><title>") {
        let title_start = start + "<g><title>".len();
        let Some(title_len) = rest[title_start..].find("</title>") else {
            break;
        };
        let title = &rest[title_start..title_start + title_len];
        let after_title = title_start + title_len + "</title>".len();
        out.push_str(&rest[..start]);
        match note_for(title, &notes) {
            Some((note, counts_at)) => {
                out.push_str(if note.muted {
                    "<g class=\"noise\"><title>"
                } else {
                    "<g><title>"
                });
                out.push_str(&title[..counts_at]);
                out.push('\n');
                out.push_str(&escape(&note.text));
                out.push_str(&title[counts_at..]);
                out.push_str("</title>");
                rest = &rest[after_title..];
                if note.muted {
                    rest = desaturate_next_fill(rest, &mut out);
                }
            }
            None => {
                out.push_str(&rest[start..after_title]);
                rest = &rest[after_title..];
            }
        }
    }
    out.push_str(rest);
    out.into_bytes()
}

/// The note of the function a title names, and where the title's value
/// starts: the title is `NAME[\nDETAILS] (…)`.
fn note_for<'a>(title: &str, notes: &'a HashMap<String, Note>) -> Option<(&'a Note, usize)> {
    let counts_at = title.rfind(" (")?;
    let name = title[..counts_at].split('\n').next()?;
    notes.get(&unescape(name)).map(|note| (note, counts_at))
}

fn notes(view: &View<'_>) -> HashMap<String, Note> {
    let unit = view.metric.unit();
    match &view.base {
        None => function_values(view.new, view.table, view.metric)
            .into_iter()
            .map(|(name, value)| {
                let note = Note {
                    text: format!(
                        "function total, 95 %: {} {unit}",
                        bracket(&value.total_estimate.interval())
                    ),
                    muted: false,
                };
                (folded_frame(&name), note)
            })
            .collect(),
        Some(base) => function_changes(base.profile, view.new, view.table, view.metric)
            .into_iter()
            .map(|change| {
                let delta = change.total_change;
                let note = Note {
                    text: format!(
                        "function total changed {:+.0} {unit}, 95 %: {}, {}",
                        delta.value(),
                        bracket(&delta.interval()),
                        verdict(&delta.interval())
                    ),
                    muted: !delta.significant(),
                };
                (folded_frame(&change.name), note)
            })
            .collect(),
    }
}

fn verdict(interval: &Interval) -> &'static str {
    if interval.excludes_zero() {
        "significant"
    } else {
        "within sampling noise"
    }
}

/// Copy `rest` up to and including the frame's `fill="rgb(r,g,b)"`, with the
/// colour moved three quarters of the way to its grey; return what follows.
fn desaturate_next_fill<'a>(rest: &'a str, out: &mut String) -> &'a str {
    const FILL: &str = "fill=\"rgb(";
    let end_of_frame = rest.find("</g>").unwrap_or(rest.len());
    let Some(at) = rest[..end_of_frame].find(FILL) else {
        return rest;
    };
    let values_start = at + FILL.len();
    let Some(values_len) = rest[values_start..].find(")\"") else {
        return rest;
    };
    let channels: Vec<f64> = rest[values_start..values_start + values_len]
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    if channels.len() != 3 {
        return rest;
    }
    let grey = channels.iter().sum::<f64>() / 3.0;
    let muted: Vec<String> = channels
        .iter()
        .map(|c| format!("{:.0}", grey + (c - grey) * 0.25))
        .collect();
    out.push_str(&rest[..values_start]);
    out.push_str(&muted.join(","));
    &rest[values_start + values_len..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desaturates_only_the_frames_fill() {
        let mut out = String::new();
        let rest = desaturate_next_fill(
            "<rect x=\"0\" fill=\"rgb(255,100,100)\" fg:w=\"3\"/></g><g>",
            &mut out,
        );
        out.push_str(rest);
        assert_eq!(
            out,
            "<rect x=\"0\" fill=\"rgb(178,139,139)\" fg:w=\"3\"/></g><g>"
        );
    }

    #[test]
    fn names_are_found_before_the_last_parenthesis() {
        let notes = HashMap::from([(
            "f<a>(int)".to_string(),
            Note {
                text: "x".into(),
                muted: false,
            },
        )]);
        assert!(note_for("f&lt;a&gt;(int) (12 bytes, 1.00%)", &notes).is_some());
        let with_details = "f&lt;a&gt;(int)\nf&lt;a&gt;(int, long)\nx.c:3 (12 bytes, 1.00%)";
        assert_eq!(note_for(with_details, &notes).map(|n| n.1), Some(43));
        assert!(note_for("g (12 bytes, 1.00%)", &notes).is_none());
        assert!(note_for("no value", &notes).is_none());
    }
}
