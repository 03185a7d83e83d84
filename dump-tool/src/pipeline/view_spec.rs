//! What shaped a view, in one description every renderer prints: the
//! metric, the filters (`--focus`, `--ignore`, `--hide`, `--allocator-frames`),
//! the grouping (`--by-thread`, `--size-frames`), the names, the birth range,
//! the temporary threshold, the attach scope and each side's sampling.
//!
//! Owns [`ViewSpec`], built once per session from the [`Settings`] and the
//! sides; renderers only print it ([`ViewSpec::settings`] as words,
//! [`ViewSpec::summary`] as one line, the struct itself as JSON). Never
//! computes estimates and never does I/O.

use super::settings::Settings;
use crate::model::{Metric, Profile};
use crate::symbols::NameStyle;
use heapsample_format::Dump;
use serde::Serialize;

/// Everything that shaped a view, as the outputs state it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ViewSpec {
    /// The metric drawn (`inuse-space`, …).
    pub metric: &'static str,
    /// `short` or `full` function names.
    pub names: &'static str,
    /// Keep only stacks with a frame matching.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    /// Drop stacks with a frame matching.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore: Option<String>,
    /// Remove matching frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hide: Option<String>,
    /// Extra leaf frames treated as allocator frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocator_frames: Option<String>,
    /// Malloc and friends kept at the leaf.
    pub keep_allocator_frames: bool,
    /// A root frame per thread name.
    pub by_thread: bool,
    /// A leaf frame per size class.
    pub size_frames: bool,
    /// In use counts only memory born in `[low, high)` ns since the
    /// profiler's start (`high` absent: up to the dump).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub born_ns: Option<BornRange>,
    /// The temporary threshold in ns, for the temporary metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporary_ns: Option<u64>,
    /// For an attached process: seconds between the attach and the new
    /// dump; every value counts from the attach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attached_s_before_dump: Option<f64>,
    /// The new side's mean sampling period in bytes.
    pub sampling_period: u64,
    /// The base side's, for a comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_sampling_period: Option<u64>,
}

/// A birth range in ns since the profiler's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BornRange {
    pub low: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high: Option<u64>,
}

impl ViewSpec {
    /// The description of a view made with `settings` of the profile `new`
    /// (whose first dump is `dump`) and, for a comparison, `base`.
    pub fn of(settings: &Settings, new: &Profile, dump: &Dump, base: Option<&Profile>) -> ViewSpec {
        let t = &settings.transforms;
        let regex = |r: &Option<regex::Regex>| r.as_ref().map(|r| r.as_str().to_string());
        ViewSpec {
            metric: settings.metric.name(),
            names: match settings.names {
                NameStyle::Short => "short",
                NameStyle::Full => "full",
            },
            focus: regex(&t.focus),
            ignore: regex(&t.ignore),
            hide: regex(&t.hide),
            allocator_frames: regex(&t.allocator_frames),
            keep_allocator_frames: settings.build.keep_allocator_frames,
            by_thread: t.by_thread,
            size_frames: t.size_frames,
            born_ns: new.time.born_ns.map(|(low, high)| BornRange {
                low,
                high: (high != u64::MAX).then_some(high),
            }),
            temporary_ns: Metric::TEMPORARY
                .contains(&settings.metric)
                .then_some(settings.build.temporary_ns),
            attached_s_before_dump: dump
                .attached_unix_ns()
                .map(|at| dump.time_unix_ns.saturating_sub(at) as f64 / 1e9),
            sampling_period: new.period,
            base_sampling_period: base.map(|b| b.period),
        }
    }

    /// Each setting in words, in a fixed order: the metric and the
    /// sampling first, then only what differs from the defaults.
    pub fn settings(&self) -> Vec<String> {
        let mut out = vec![format!("metric {}", self.metric)];
        out.push(match self.base_sampling_period {
            Some(base) => format!(
                "sampling period {} bytes (base {base} bytes)",
                self.sampling_period
            ),
            None => format!("sampling period {} bytes", self.sampling_period),
        });
        for (flag, value) in [
            ("focus", &self.focus),
            ("ignore", &self.ignore),
            ("hide", &self.hide),
            ("allocator-frames", &self.allocator_frames),
        ] {
            if let Some(value) = value {
                out.push(format!("{flag} /{value}/"));
            }
        }
        if self.keep_allocator_frames {
            out.push("allocator frames kept".to_string());
        }
        if self.by_thread {
            out.push("by thread".to_string());
        }
        if self.size_frames {
            out.push("size frames".to_string());
        }
        if self.names == "full" {
            out.push("full names".to_string());
        }
        if let Some(born) = self.born_ns {
            let high = born.high.map_or("the dump".to_string(), seconds);
            out.push(format!(
                "born in [{}, {high}) since the profiler's start",
                seconds(born.low)
            ));
        }
        if let Some(ns) = self.temporary_ns {
            out.push(format!("temporary: freed within {}", seconds(ns)));
        }
        if let Some(s) = self.attached_s_before_dump {
            out.push(format!("since the attach ({s:.1} s before the dump)"));
        }
        out
    }

    /// The settings on one line: `view: metric inuse-space; …`.
    pub fn summary(&self) -> String {
        format!("view: {}", self.settings().join("; "))
    }
}

/// `ns` as seconds with up to six decimals (`1.5s`, `0.001s`,
/// `0.00025s`): a temporary threshold under a millisecond is not `0s`.
fn seconds(ns: u64) -> String {
    let s = format!("{:.6}", ns as f64 / 1e9);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_short() {
        assert_eq!(seconds(1_500_000_000), "1.5s");
        assert_eq!(seconds(1_000_000), "0.001s");
        assert_eq!(seconds(250_000), "0.00025s");
        assert_eq!(seconds(0), "0s");
    }
}
