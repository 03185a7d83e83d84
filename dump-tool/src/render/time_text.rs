//! The time reports as text (`heapdiff lifetimes|ages|leaks`): rows of
//! estimates with their 95 % intervals as `[low,high]`, rounded like the
//! main text report.

use super::bounds::bracket;
use super::{duration, program_first, round};
use crate::compare::ages::{Ages, LeakRow, class_name};
use crate::compare::lifetimes::Amount;
use crate::model::TimeScope;
use crate::pipeline::time::{ExitFreed, Lifetimes, PeakInfo, ProcessSummary};
use crate::stats::Estimate;
use std::fmt::Write;

/// ` since the attach (…)` for an attached process's dumps, else nothing:
/// what a report's header adds so that nobody reads it as the whole run.
fn scope_words(scope: TimeScope) -> &'static str {
    match scope {
        TimeScope::SinceStart => "",
        TimeScope::SinceAttach { .. } => {
            " since the attach (only memory allocated since the attach; times count from it)"
        }
    }
}

/// The first window of the run the classes read: `start-up`, or for an
/// attached process the first 10 % after the attach.
fn first_window(scope: TimeScope) -> &'static str {
    match scope {
        TimeScope::SinceStart => "start-up",
        TimeScope::SinceAttach { .. } => "the first 10 % after the attach",
    }
}

fn value(estimate: &Estimate) -> String {
    format!(
        "{} {}",
        round(estimate.value),
        bracket(&estimate.interval())
    )
}

fn amount(amount: &Amount) -> String {
    format!(
        "{} objects {}, {} bytes {}",
        round(amount.objects.value),
        bracket(&amount.objects.interval()),
        round(amount.bytes.value),
        bracket(&amount.bytes.interval())
    )
}

/// One line on the peak: `peak: N usable bytes at T (exact); nearest dump D, T after it`.
pub fn peak_line(peak: Option<(PeakInfo, &str)>) -> String {
    let Some((info, name)) = peak else {
        return "peak: not counted (needs prof_exact:true and dump format 4)\n".to_string();
    };
    let distance = info.distance_ns.unsigned_abs().min(u128::from(u64::MAX)) as u64;
    let side = if info.distance_ns >= 0 {
        "after"
    } else {
        "before"
    };
    format!(
        "peak: {} usable bytes at {} (exact, within {} bytes); nearest dump {name}, {} {side} it\n",
        info.peak.live_usable_bytes,
        duration(info.peak.at_ns),
        info.peak.time_margin_bytes,
        duration(distance)
    )
}

/// `heapdiff lifetimes`: the top `top` functions by objects freed, each
/// with its temporary allocations and its non-empty lifetime buckets.
pub fn lifetimes(dump: &str, lifetimes: &Lifetimes, top: usize) -> String {
    let mut out = String::new();
    let threshold = match lifetimes.temporary_ns {
        u64::MAX => "any lifetime".to_string(),
        ns => format!("freed within {}", duration(ns)),
    };
    let _ = writeln!(
        out,
        "heapdiff: lifetimes of freed memory in {dump} per allocating function{} (values corrected for sampling, [low,high] = 95 % interval; temporary = {threshold})",
        scope_words(lifetimes.origin.scope)
    );
    for row in lifetimes.functions.iter().take(top) {
        let name = program_first(&row.name, row.program_frame.as_deref());
        let _ = writeln!(out, "\n{name}");
        let _ = writeln!(out, "  freed     {}", amount(&row.freed));
        let _ = writeln!(out, "  temporary {}", amount(&row.temporary));
        for bucket in &row.buckets {
            let range = match bucket.high_ns {
                Some(high) => format!("[{}, {})", duration(bucket.low_ns), duration(high)),
                None => format!(">= {}", duration(bucket.low_ns)),
            };
            let _ = writeln!(out, "  {range:>24}  {}", amount(&bucket.freed));
        }
    }
    if lifetimes.functions.is_empty() {
        let _ = writeln!(out, "\nnothing sampled was freed");
    }
    out
}

/// `heapdiff ages`: per function its live bytes by birth slice, class and
/// evidence.
pub fn ages(dump: &str, ages: &Ages, peak: Option<(PeakInfo, &str)>, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "heapdiff: age of live memory in {dump} per allocating function{}, a run of {} (births since {}; [low,high] = 95 % interval)",
        scope_words(ages.origin.scope),
        duration(ages.run_ns),
        ages.origin.scope.origin()
    );
    out.push_str(&peak_line(peak));
    let (startup, middle) = ages.windows_ns;
    let _ = writeln!(
        out,
        "classes from live bytes born in {} [0, {}), older [{}, {}), newer [{}, end]",
        first_window(ages.origin.scope),
        duration(startup),
        duration(startup),
        duration(middle),
        duration(middle)
    );
    for row in ages.rows.iter().take(top) {
        let _ = writeln!(
            out,
            "\n{}: {} ({} live bytes {})",
            program_first(&row.name, row.program_frame.as_deref()),
            class_name(row.class, ages.origin.scope),
            round(row.live.bytes.value),
            bracket(&row.live.bytes.interval())
        );
        let _ = writeln!(
            out,
            "  evidence: {} {}, older {}, newer {}; kept {} bytes/s",
            first_window(ages.origin.scope),
            value(&row.windows.startup),
            value(&row.windows.older),
            value(&row.windows.newer),
            value(&row.kept_rate)
        );
        for caveat in &row.caveats {
            let _ = writeln!(out, "  caveat (weak evidence): {}", caveat.sentence());
        }
        for (slice, (low, high)) in row.slices.iter().zip(&ages.slices) {
            let _ = writeln!(
                out,
                "  born [{}, {})  {} bytes {}",
                duration(*low),
                duration(*high),
                round(slice.bytes.value),
                bracket(&slice.bytes.interval())
            );
        }
    }
    out
}

/// One line on the exit dump left out of a series' trend and what it
/// freed; `names` are the series' dumps.
pub fn exit_line(exit: &ExitFreed, names: &[String]) -> String {
    let what = if exit.exact {
        "exact live heap, usable bytes"
    } else {
        "estimated live heap"
    };
    format!(
        "exit dump {} left out of the trend: it freed {} bytes ({what}: {} at {} before exit, {} at exit)\n",
        names[exit.exit],
        round((exit.live_before - exit.live_at_exit).max(0.0)),
        round(exit.live_before),
        names[exit.before],
        round(exit.live_at_exit)
    )
}

/// The process in a few lines (a series of its dumps, `names`): the exact
/// peak and what the dump nearest to it misses, with the high-water step
/// that would have caught it, the live heap before exit and at exit, and
/// the top leak candidate by its program frame.
pub fn summary_lines(summary: &ProcessSummary, names: &[String]) -> String {
    let mut out = String::new();
    let live = |at: &crate::pipeline::time::LiveAt| {
        let kind = if at.exact { "exact" } else { "estimated" };
        format!("{} bytes ({kind}, {})", round(at.bytes), names[at.dump])
    };
    if let (Some(peak), Some(nearest), Some(missed)) =
        (summary.peak, summary.nearest_live, summary.missed)
    {
        let step = summary.gdump_step.map_or_else(String::new, |step| {
            format!("; prof_gdump:true,prof_gdump_step:{step} would have caught it")
        });
        let _ = writeln!(
            out,
            "process: exact peak {} usable bytes at {}; the nearest dump {} holds {nearest}, {missed} bytes short of it{step}",
            peak.peak.live_usable_bytes,
            duration(peak.peak.at_ns),
            names[peak.nearest],
        );
    }
    if let Some(before) = &summary.before_exit {
        let _ = writeln!(
            out,
            "process: live at the last dump before exit {}",
            live(before)
        );
    }
    if let Some(exit) = &summary.at_exit {
        let _ = writeln!(out, "process: still live (leaked) at exit {}", live(exit));
    }
    match &summary.top_leak {
        Some((name, program)) => {
            let _ = writeln!(
                out,
                "process: top leak candidate {}",
                program_first(name, program.as_deref())
            );
        }
        None => {
            let _ = writeln!(out, "process: no leak candidate");
        }
    }
    out
}

/// `heapdiff leaks`: the candidates of dumps whose times count as `scope`
/// says, most likely first, with the gate's verdict per row; `exit`: the
/// exit dump line ([`exit_line`]).
pub fn leaks(
    scope: TimeScope,
    dumps: usize,
    rows: &[LeakRow],
    failing: &[&LeakRow],
    peak: Option<(PeakInfo, &str)>,
    exit: Option<String>,
    top: usize,
) -> String {
    let mut out = String::new();
    let source = if dumps > 1 {
        format!("growth across {dumps} dumps")
    } else {
        "births of live memory in one dump".to_string()
    };
    let _ = writeln!(
        out,
        "heapdiff: leak candidates from the {source}{}, most likely first (bytes per second, [low,high] = 95 % interval)",
        scope_words(scope)
    );
    out.push_str(&peak_line(peak));
    out.push_str(exit.as_deref().unwrap_or_default());
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "\nno leak candidate: no function's live memory grows or accumulates"
        );
    }
    let _ = writeln!(
        out,
        "\n{:>14} {:>27}  {:<13} {:<10} program frame ← via allocating function",
        "bytes/s", "95% interval", "class", "trend"
    );
    for row in rows.iter().take(top) {
        let class = row
            .ages
            .as_ref()
            .map_or("-", |a| class_name(a.class, scope));
        let trend = row.trend.map_or("-", |t| t.name());
        let mark = if failing.iter().any(|f| std::ptr::eq(*f, row)) {
            "  FAILS"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:>14} {:>27}  {:<13} {:<10} {}{mark}",
            round(row.rate.estimate),
            bracket(&row.rate),
            class,
            trend,
            program_first(&row.name, row.program_frame.as_deref())
        );
        if row.trend.is_none() {
            for caveat in row.ages.iter().flat_map(|a| &a.caveats) {
                let _ = writeln!(
                    out,
                    "{:>14} caveat (weak evidence): {}",
                    "",
                    caveat.sentence()
                );
            }
        }
    }
    out
}
