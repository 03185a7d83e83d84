//! The CI gate: `heapdiff --base A B --fail-if-grows SIZE|PCT`.
//!
//! Fails (exit status 1) when the live heap grew significantly between the
//! two dumps, that is when the 95 % interval of the in-use-space change
//! excludes 0, *and* the interval's lower end exceeds the threshold: a
//! size in bytes (`5MB`, `512KiB`, `1048576`) or a percentage of the base's
//! estimated live heap (`10%`). So sampling noise alone fails it in at most
//! 2.5 % of runs, and only if the threshold is 0. The change's variance is
//! [`super::comparison`]'s: for two dumps of one process that list their
//! live samples, that of the samples live in only one of them. Never
//! touches files;
//! the verdict is data (`render::gate` puts it in words).

use super::comparison::{Comparison, VarianceRule};
use super::functions::{FunctionChange, function_changes};
use crate::model::{Metric, Profile};
use crate::stats::Delta;
use crate::symbols::LocationTable;
use std::cmp::Ordering;

/// How much growth is tolerated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    Bytes(f64),
    /// Percent of the base's estimated live heap.
    Percent(f64),
}

impl std::str::FromStr for Threshold {
    type Err = String;

    /// `N`, `N%`, or `N` with a unit: `B`, `K`/`KiB`, `KB`, `M`/`MiB`, `MB`,
    /// `G`/`GiB`, `GB` (the `i` forms and the single letters are powers of
    /// 1024, `KB`/`MB`/`GB` powers of 1000); case-insensitive.
    fn from_str(text: &str) -> Result<Threshold, String> {
        let text = text.trim();
        let bad = || {
            format!("{text:?} is not a size (e.g. 5MB, 512KiB, 1048576) or a percentage (e.g. 10%)")
        };
        if let Some(number) = text.strip_suffix('%') {
            let percent: f64 = number.trim().parse().map_err(|_| bad())?;
            return (percent.is_finite() && percent >= 0.0)
                .then_some(Threshold::Percent(percent))
                .ok_or_else(bad);
        }
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let value: f64 = number.parse().map_err(|_| bad())?;
        let scale = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kib" => 1024.0,
            "kb" => 1e3,
            "m" | "mib" => 1024.0 * 1024.0,
            "mb" => 1e6,
            "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
            "gb" => 1e9,
            _ => return Err(bad()),
        };
        (value.is_finite() && value >= 0.0)
            .then_some(Threshold::Bytes(value * scale))
            .ok_or_else(bad)
    }
}

/// The verdict and what it rests on.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// True when the gate fails (exit status 1).
    pub failed: bool,
    /// The change of the whole live heap (in-use bytes).
    pub change: Delta,
    /// The rule that gave the change its variance.
    pub rule: VarianceRule,
    /// For two dumps of one process judged by the conservative rule, why.
    pub fallback: Option<&'static str>,
    /// The threshold in bytes.
    pub limit: f64,
    /// When failing, the functions whose total in-use bytes grew most,
    /// largest first; empty when passing.
    pub top_growing: Vec<(String, Delta)>,
}

/// Judge the in-use-space change from `base` to `new`; `top` growing
/// functions are listed when the gate fails.
pub fn judge(
    base: &Profile,
    new: &Profile,
    table: &LocationTable,
    threshold: Threshold,
    top: usize,
) -> Verdict {
    let comparison = Comparison::of(base, new);
    let change = comparison.total(Metric::InuseSpace);
    let limit = match threshold {
        Threshold::Bytes(bytes) => bytes,
        Threshold::Percent(percent) => change.base.value * percent / 100.0,
    };
    let failed = change.significant() && change.interval().low > limit;
    let top_growing = if failed {
        top_growing(&comparison, table, top)
    } else {
        Vec::new()
    };
    Verdict {
        failed,
        change,
        rule: comparison.rule(Metric::InuseSpace),
        fallback: comparison.in_use_fallback(),
        limit,
        top_growing,
    }
}

/// The functions whose total in-use bytes grew most, largest first.
fn top_growing(
    comparison: &Comparison<'_>,
    table: &LocationTable,
    top: usize,
) -> Vec<(String, Delta)> {
    let mut rows: Vec<(String, Delta)> = function_changes(comparison, table, Metric::InuseSpace)
        .into_iter()
        .map(
            |FunctionChange {
                 name, total_change, ..
             }| (name, total_change),
        )
        .filter(|(_, delta)| delta.value() > 0.0)
        .collect();
    rows.sort_by(|a, b| {
        b.1.value()
            .partial_cmp(&a.1.value())
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    rows.truncate(top);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse() {
        let parse = |s: &str| s.parse::<Threshold>();
        assert_eq!(parse("1048576"), Ok(Threshold::Bytes(1048576.0)));
        assert_eq!(parse("5MB"), Ok(Threshold::Bytes(5e6)));
        assert_eq!(parse("5MiB"), Ok(Threshold::Bytes(5.0 * 1048576.0)));
        assert_eq!(parse("512k"), Ok(Threshold::Bytes(512.0 * 1024.0)));
        assert_eq!(parse("1.5G"), Ok(Threshold::Bytes(1.5 * 1073741824.0)));
        assert_eq!(parse("10%"), Ok(Threshold::Percent(10.0)));
        assert_eq!(parse(" 2.5 %"), Ok(Threshold::Percent(2.5)));
        for bad in ["", "MB", "5XB", "-1", "ten%", "1e400", "%"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
