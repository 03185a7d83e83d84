//! How intervals, the low-confidence mark, the detection limit and the
//! variance rule of in-use changes read in the text formats (the text
//! report, the CI gate's message, the SVG tooltips), from
//! [`crate::stats`]' and [`crate::compare`]'s numbers.

use super::round;
use crate::compare::VarianceRule;
use crate::model::Profile;
use crate::stats::sampling::SMALL_OBJECT_BYTES;
use crate::stats::sampling::objects_seen_95;
use crate::stats::{Delta, Estimate, Interval, Sampling, Unit};
use heapsample_format::SamplingLaw;

/// How many of the most allocated object sizes the per-size detection
/// limits name (the smallest size present is named too).
const SIZES_NAMED: usize = 4;

/// The detection limit for the object sizes `profile` actually allocates
/// under `law`: `(size, objects)` for its most allocated sizes and its
/// smallest, smallest size first; objects per [`objects_seen_95`]. Empty
/// when every allocation is sampled.
pub fn size_limits(profile: &Profile, law: SamplingLaw) -> Vec<(u64, f64)> {
    if law.samples_everything() {
        return Vec::new();
    }
    let sizes = profile.object_sizes();
    let mut named: Vec<u64> = sizes.iter().take(SIZES_NAMED).map(|s| s.0).collect();
    if let Some(smallest) = sizes.iter().map(|s| s.0).min()
        && !named.contains(&smallest)
    {
        named.push(smallest);
    }
    named.sort_unstable();
    named
        .into_iter()
        .map(|size| (size, objects_seen_95(law, size)))
        .collect()
}

/// [`size_limits`] in words: `detection limit for the object sizes
/// present: 5454 objects of 8 bytes, 13 of 4096 bytes (…)`; None when
/// there are none.
pub fn size_limits_sentence(limits: &[(u64, f64)]) -> Option<String> {
    let (first, rest) = limits.split_first()?;
    let mut parts = vec![format!("{} objects of {} bytes", round(first.1), first.0)];
    parts.extend(
        rest.iter()
            .map(|(size, n)| format!("{} of {size} bytes", round(*n))),
    );
    Some(format!(
        "detection limit for the object sizes present: {} (a function allocating at least that many objects of one size is seen with probability >= 95 %; fewer may be absent)",
        parts.join(", ")
    ))
}

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
