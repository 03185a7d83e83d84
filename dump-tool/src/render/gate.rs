//! The CI gate's verdict in words, for the terminal.

use super::bounds::{bracket, variance_sentence};
use crate::compare::gate::Verdict;
use std::fmt::Write;

/// The live-heap change with its interval, the threshold, pass (with the
/// most growth the interval leaves possible: "no growth detected" means
/// none above it) or FAIL, for two dumps of one process how the interval
/// was made, and (when failing) the top growing functions;
/// ends with a newline.
pub fn message(verdict: &Verdict) -> String {
    let change = &verdict.change;
    let interval = change.interval();
    let mut message = format!(
        "live heap changed by {:+.0} bytes, 95 % interval {} ({}), threshold {:.0} bytes: {}\n",
        change.value(),
        bracket(&interval),
        if change.significant() {
            "significant"
        } else {
            "within sampling noise"
        },
        verdict.limit,
        if verdict.failed {
            "FAIL (the growth's lower bound exceeds the threshold)".to_string()
        } else {
            format!("pass (no growth above {:.0} bytes)", interval.high.max(0.0))
        }
    );
    if let Some(rule) = variance_sentence(verdict.rule, verdict.fallback) {
        let _ = writeln!(message, "{rule}");
    }
    if verdict.failed {
        let _ = writeln!(message, "top growing functions (in-use bytes, total):");
        let _ = writeln!(
            message,
            "{:>14} {:>29} {:>4}  function",
            "delta", "95% interval", "sig"
        );
        for (name, delta) in &verdict.top_growing {
            let _ = writeln!(
                message,
                "{:>+14.0} {:>29} {:>4}  {name}",
                delta.value(),
                bracket(&delta.interval()),
                if delta.significant() { "yes" } else { "no" }
            );
        }
    }
    message
}
