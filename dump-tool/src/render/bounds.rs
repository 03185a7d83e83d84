//! How intervals, the low-confidence mark, the detection limit and the
//! variance rule of in-use changes read in the text formats (the text
//! report, the CI gate's message, the SVG tooltips), from
//! [`crate::stats`]' and [`crate::compare`]'s numbers.

use super::round;
use crate::compare::VarianceRule;
use crate::stats::sampling::SMALL_OBJECT_BYTES;
use crate::stats::{Delta, Estimate, Interval, Sampling, Unit};

/// How the intervals of in-use changes between two dumps of one process
/// were made (`rule`, or the conservative rule and why: `fallback`); `None`
/// for dumps of different processes.
pub fn variance_sentence(rule: VarianceRule, fallback: Option<&str>) -> Option<String> {
    if rule == VarianceRule::SharedSamples {
        return Some(
            "same process: live samples both dumps hold cancel; intervals are those of the samples live in only one dump"
                .to_string(),
        );
    }
    fallback.map(|why| format!("same process, intervals conservative (as if independent): {why}"))
}

/// Written after the interval of a low-confidence value.
pub const LOW_CONFIDENCE_MARK: &str = "~";

/// `[low,high]`, rounded.
pub fn bracket(interval: &Interval) -> String {
    format!("[{},{}]", round(interval.low), round(interval.high))
}

/// The estimate's interval, marked when it is low-confidence.
pub fn estimate_bracket(estimate: &Estimate) -> String {
    bracket(&estimate.interval()) + mark(estimate.low_confidence())
}

/// The change's interval, marked when it is low-confidence.
pub fn change_bracket(delta: &Delta) -> String {
    bracket(&delta.interval()) + mark(delta.low_confidence())
}

fn mark(low_confidence: bool) -> &'static str {
    if low_confidence {
        LOW_CONFIDENCE_MARK
    } else {
        ""
    }
}

/// The detection limit of `sampling` in words: `49081 bytes`, or for
/// objects `6135 objects of 8 bytes (49081/s of s bytes)`.
pub fn limit(sampling: &Sampling) -> String {
    let bytes = round(sampling.detection_limit_bytes());
    match sampling.unit {
        Unit::Bytes => format!("{bytes} bytes"),
        Unit::Objects => format!(
            "{} objects of {SMALL_OBJECT_BYTES} bytes ({bytes}/s of s bytes)",
            round(sampling.detection_limit())
        ),
    }
}

/// One sentence on what the samples cannot show: the detection limit and,
/// for object counts, the low-confidence mark; `subject` says what stayed
/// under the limit (e.g. "a function absent from this report allocated").
pub fn limits_sentence(sampling: &Sampling, subject: &str) -> String {
    if sampling.samples_everything() {
        return "every allocation was sampled: the values are exact".to_string();
    }
    let mut sentence = format!(
        "detection limit: {subject} less than {} (95 %)",
        limit(sampling)
    );
    if sampling.unit == Unit::Objects {
        sentence.push_str(&format!(
            "; counts under {} are marked {LOW_CONFIDENCE_MARK} (low confidence: objects too small to be sampled may dominate them)",
            round(sampling.low_confidence_below)
        ));
    }
    sentence
}
