//! The time reports as JSON (`heapdiff lifetimes|ages|leaks --format json`),
//! schema `heapdiff-time/1` (documented in dump-tool/README.md): every
//! estimate `{"estimate", "low", "high", "sampled"}` with its 95 %
//! interval, as in the main report.

use super::json::{Bound, DeltaBound};
use crate::compare::ages::{AgeRow, Ages, LeakRow, class_name};
use crate::compare::lifetimes::{Amount, LifetimeRow};
use crate::model::{TimeOrigin, TimeScope};
use crate::pipeline::time::{ExitFreed, Lifetimes, LiveAt, PeakInfo, ProcessSummary};
use crate::stats::{Caveat, Interval};
use serde::Serialize;

/// The schema name and version written in every time report.
pub const SCHEMA: &str = "heapdiff-time/1";

/// The fields every time report starts with.
#[derive(Serialize)]
struct Header {
    schema: &'static str,
    report: &'static str,
    confidence: f64,
    /// What every time and value counts from: `since_start` (the process's
    /// start) or `since_attach` (an attached process: only what was
    /// allocated since the attach, times counted from it).
    scope: &'static str,
    /// The attach, ns since the Unix epoch (`since_attach` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    attached_unix_ns: Option<u64>,
    /// What every `_ns` time of the report counts from: the profiler's
    /// start (the process's, or the attach) on the wall clock, ns since
    /// the epoch (0: not known), as the viewer counts.
    start_unix_ns: u64,
}

impl Header {
    /// The header of the report named `report` (95 % intervals) of dumps
    /// whose times count from `origin`.
    fn of(report: &'static str, origin: TimeOrigin) -> Header {
        Header {
            schema: SCHEMA,
            report,
            confidence: 0.95,
            scope: origin.scope.name(),
            attached_unix_ns: origin.scope.attached_unix_ns(),
            start_unix_ns: origin.start_unix_ns,
        }
    }
}

#[derive(Serialize)]
struct AmountReport {
    objects: Bound,
    bytes: Bound,
}

impl AmountReport {
    fn of(amount: &Amount) -> AmountReport {
        AmountReport {
            objects: Bound::of(&amount.objects),
            bytes: Bound::of(&amount.bytes),
        }
    }
}

#[derive(Serialize)]
struct BucketReport {
    bucket: u8,
    low_ns: u64,
    /// `null` for the last, open bucket.
    high_ns: Option<u64>,
    freed: AmountReport,
}

#[derive(Serialize)]
struct LifetimeReport {
    name: String,
    /// The program's own function that called into it (`null`: none, or
    /// a stack row).
    program_frame: Option<String>,
    freed: AmountReport,
    temporary: AmountReport,
    buckets: Vec<BucketReport>,
}

impl LifetimeReport {
    fn of(row: &LifetimeRow) -> LifetimeReport {
        LifetimeReport {
            name: row.name.clone(),
            program_frame: row.program_frame.clone(),
            freed: AmountReport::of(&row.freed),
            temporary: AmountReport::of(&row.temporary),
            buckets: row
                .buckets
                .iter()
                .map(|b| BucketReport {
                    bucket: b.bucket,
                    low_ns: b.low_ns,
                    high_ns: b.high_ns,
                    freed: AmountReport::of(&b.freed),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct PeakReport {
    live_usable_bytes: u64,
    at_ns: u64,
    time_margin_bytes: u64,
    /// The dump nearest to the peak and how far from it (ns, after > 0).
    nearest_dump: String,
    nearest_distance_ns: i128,
}

fn peak_report(peak: Option<(PeakInfo, &str)>) -> Option<PeakReport> {
    peak.map(|(info, name)| PeakReport {
        live_usable_bytes: info.peak.live_usable_bytes,
        at_ns: info.peak.at_ns,
        time_margin_bytes: info.peak.time_margin_bytes,
        nearest_dump: name.to_string(),
        nearest_distance_ns: info.distance_ns,
    })
}

/// `heapdiff lifetimes --format json`.
pub fn lifetimes(dump: &str, lifetimes: &Lifetimes) -> String {
    #[derive(Serialize)]
    struct Report {
        #[serde(flatten)]
        header: Header,
        dump: String,
        /// Freed within this many ns is temporary; `null`: any lifetime.
        temporary_ns: Option<u64>,
        functions: Vec<LifetimeReport>,
        stacks: Vec<LifetimeReport>,
    }
    to_json(&Report {
        header: Header::of("lifetimes", lifetimes.origin),
        dump: dump.to_string(),
        temporary_ns: (lifetimes.temporary_ns != u64::MAX).then_some(lifetimes.temporary_ns),
        functions: lifetimes.functions.iter().map(LifetimeReport::of).collect(),
        stacks: lifetimes.stacks.iter().map(LifetimeReport::of).collect(),
    })
}

#[derive(Serialize)]
struct WindowsReport {
    startup_bytes: Bound,
    older_bytes: Bound,
    newer_bytes: Bound,
}

#[derive(Serialize)]
struct AgeReport {
    name: String,
    /// The program's own function that called into it (`null`: none, or
    /// a stack row).
    program_frame: Option<String>,
    class: &'static str,
    live: AmountReport,
    /// Live memory born in each slice of `slices_ns`.
    slices: Vec<AmountReport>,
    /// The evidence of the class: live bytes born in the first window of
    /// the run (start-up; the first 10 % after the attach when attached)
    /// and the older and newer halves of the rest (`windows_ns`).
    evidence: WindowsReport,
    /// Live bytes born in the older half per second of it.
    kept_bytes_per_second: Bound,
    /// `strong`, or `weak` with `caveats` saying why.
    evidence_strength: &'static str,
    caveats: Vec<CaveatReport>,
}

#[derive(Serialize)]
struct CaveatReport {
    /// `few-samples` or `uneven-births`.
    kind: &'static str,
    /// The caveat in words, with what to do about it.
    text: String,
}

/// `strong` without caveats, `weak` with.
fn strength(caveats: &[Caveat]) -> &'static str {
    if caveats.is_empty() { "strong" } else { "weak" }
}

impl AgeReport {
    fn of(row: &AgeRow, scope: TimeScope) -> AgeReport {
        AgeReport {
            name: row.name.clone(),
            program_frame: row.program_frame.clone(),
            class: class_name(row.class, scope),
            live: AmountReport::of(&row.live),
            slices: row.slices.iter().map(AmountReport::of).collect(),
            evidence: WindowsReport {
                startup_bytes: Bound::of(&row.windows.startup),
                older_bytes: Bound::of(&row.windows.older),
                newer_bytes: Bound::of(&row.windows.newer),
            },
            kept_bytes_per_second: Bound::of(&row.kept_rate),
            evidence_strength: strength(&row.caveats),
            caveats: row
                .caveats
                .iter()
                .map(|c| CaveatReport {
                    kind: c.kind(),
                    text: c.sentence(),
                })
                .collect(),
        }
    }
}

/// `heapdiff ages --format json`: per function (`ages`) and per stack
/// (`stacks`, the same slices).
pub fn ages(dump: &str, ages: &Ages, stacks: &Ages, peak: Option<(PeakInfo, &str)>) -> String {
    #[derive(Serialize)]
    struct Report {
        #[serde(flatten)]
        header: Header,
        dump: String,
        run_ns: u64,
        slices_ns: Vec<(u64, u64)>,
        /// Start-up ends and the older half of the rest ends here.
        windows_ns: (u64, u64),
        #[serde(skip_serializing_if = "Option::is_none")]
        peak: Option<PeakReport>,
        functions: Vec<AgeReport>,
        stacks: Vec<AgeReport>,
    }
    to_json(&Report {
        header: Header::of("ages", ages.origin),
        dump: dump.to_string(),
        run_ns: ages.run_ns,
        slices_ns: ages.slices.clone(),
        windows_ns: ages.windows_ns,
        peak: peak_report(peak),
        functions: ages
            .rows
            .iter()
            .map(|r| AgeReport::of(r, ages.origin.scope))
            .collect(),
        stacks: stacks
            .rows
            .iter()
            .map(|r| AgeReport::of(r, ages.origin.scope))
            .collect(),
    })
}

#[derive(Serialize)]
struct RateReport {
    estimate: f64,
    low: f64,
    high: f64,
}

impl RateReport {
    fn of(interval: &Interval) -> RateReport {
        RateReport {
            estimate: interval.estimate,
            low: interval.low,
            high: interval.high,
        }
    }
}

#[derive(Serialize)]
struct LeakReport {
    name: String,
    /// The program's own function that called into it: what the text
    /// report and the viewer lead with (`null` when every frame of its
    /// stacks is the runtime's).
    program_frame: Option<String>,
    /// From the births in the last dump; `null` without births.
    class: Option<&'static str>,
    /// From the series: `growing`, `plateau`, `shrinking`, `flat`; `null`
    /// for one dump.
    trend: Option<&'static str>,
    /// The evidence of a leak: growing across the series, or (one dump)
    /// accumulating.
    leaking: bool,
    /// One dump: the strength of its class (`strong`, or `weak` with the
    /// caveats in `ages`); `null` for a series, judged by its trend.
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence_strength: Option<&'static str>,
    /// Growth rate in bytes per second: across the dumps when several are
    /// given, else the kept rate of the births.
    bytes_per_second: RateReport,
    /// The change of its live bytes from the first dump to the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    growth_bytes: Option<DeltaBound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ages: Option<AgeReport>,
    /// True when it fails `--fail-if-grows`.
    fails: bool,
}

#[derive(Serialize)]
struct ExitReport {
    /// The exit dump left out of the trend.
    dump: String,
    /// The last dump before it.
    before_dump: String,
    live_before_bytes: f64,
    live_at_exit_bytes: f64,
    /// What it freed on the way out.
    freed_bytes: f64,
    /// True: the exact live heap (usable bytes); false: estimates.
    exact: bool,
}

#[derive(Serialize)]
struct LiveReport {
    dump: String,
    bytes: f64,
    /// The exact live heap (usable bytes), or the estimate.
    exact: bool,
}

/// The process summary as json (`leaks --format json`'s
/// `process_summary`, the viewer's front page).
#[derive(Serialize)]
pub struct SummaryReport {
    /// The exact live heap of the dump nearest to the peak (`peak`), and
    /// how much of the peak it misses.
    nearest_live_bytes: Option<u64>,
    missed_bytes: Option<u64>,
    /// `prof_gdump_step` (with `prof_gdump:true`) that would have caught
    /// the peak within half of what the nearest dump misses.
    gdump_step_bytes: Option<u64>,
    live_before_exit: Option<LiveReport>,
    live_at_exit: Option<LiveReport>,
    top_leak: Option<String>,
    top_leak_program_frame: Option<String>,
}

impl SummaryReport {
    pub fn of(summary: &ProcessSummary, dumps: &[String]) -> SummaryReport {
        let live = |at: &LiveAt| LiveReport {
            dump: dumps[at.dump].clone(),
            bytes: at.bytes.round(),
            exact: at.exact,
        };
        SummaryReport {
            nearest_live_bytes: summary.nearest_live,
            missed_bytes: summary.missed,
            gdump_step_bytes: summary.gdump_step,
            live_before_exit: summary.before_exit.as_ref().map(live),
            live_at_exit: summary.at_exit.as_ref().map(live),
            top_leak: summary.top_leak.as_ref().map(|t| t.0.clone()),
            top_leak_program_frame: summary.top_leak.as_ref().and_then(|t| t.1.clone()),
        }
    }
}

/// `heapdiff leaks --format json` of dumps whose times count from
/// `origin`, taken at `dumps_at_ns` since it
/// ([`crate::pipeline::time::series_times`]); `exit`: the exit dump left
/// out of the trend, named by `dumps`.
pub fn leaks(
    (origin, dumps_at_ns): (TimeOrigin, &[u64]),
    dumps: &[String],
    rows: &[LeakRow],
    failing: &[&LeakRow],
    peak: Option<(PeakInfo, &str)>,
    exit: Option<&ExitFreed>,
    summary: Option<&ProcessSummary>,
) -> String {
    #[derive(Serialize)]
    struct Report {
        #[serde(flatten)]
        header: Header,
        dumps: Vec<String>,
        /// Each dump's moment, ns since `start_unix_ns`.
        dumps_at_ns: Vec<u64>,
        /// The first dump's: where a timeline from the first dump starts.
        first_dump_at_ns: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        peak: Option<PeakReport>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_dump_left_out: Option<ExitReport>,
        #[serde(skip_serializing_if = "Option::is_none")]
        process_summary: Option<SummaryReport>,
        candidates: Vec<LeakReport>,
    }
    to_json(&Report {
        header: Header::of("leaks", origin),
        dumps: dumps.to_vec(),
        dumps_at_ns: dumps_at_ns.to_vec(),
        first_dump_at_ns: dumps_at_ns.iter().copied().min(),
        peak: peak_report(peak),
        exit_dump_left_out: exit.map(|e| ExitReport {
            dump: dumps[e.exit].clone(),
            before_dump: dumps[e.before].clone(),
            live_before_bytes: e.live_before.round(),
            live_at_exit_bytes: e.live_at_exit.round(),
            freed_bytes: (e.live_before - e.live_at_exit).max(0.0).round(),
            exact: e.exact,
        }),
        process_summary: summary.map(|s| SummaryReport::of(s, dumps)),
        candidates: rows
            .iter()
            .map(|row| LeakReport {
                name: row.name.clone(),
                program_frame: row.program_frame.clone(),
                class: row.ages.as_ref().map(|a| class_name(a.class, origin.scope)),
                trend: row.trend.map(|t| t.name()),
                leaking: row.leaking(),
                evidence_strength: match (row.trend, &row.ages) {
                    (None, Some(ages)) => Some(strength(&ages.caveats)),
                    _ => None,
                },
                bytes_per_second: RateReport::of(&row.rate),
                growth_bytes: row.growth.as_ref().map(DeltaBound::of),
                ages: row.ages.as_ref().map(|a| AgeReport::of(a, origin.scope)),
                fails: failing.iter().any(|f| std::ptr::eq(*f, row)),
            })
            .collect(),
    })
}

fn to_json(report: &impl Serialize) -> String {
    let mut text = serde_json::to_string_pretty(report).unwrap_or_default();
    text.push('\n');
    text
}
