//! The time views through the pipeline: lifetimes and temporary
//! allocations, the age of live memory, "allocated in a range and still
//! live", leak candidates over a series of dumps, and the peak. The command
//! line's `lifetimes`, `ages` and `leaks` and the viewer call these.
//!
//! A view's dumps are built as the [`super::Session`] builds them (the
//! same checks, symbols, transforms, birth range and temporary threshold);
//! a [`Series`] keeps one profile per dump instead of merging them. Reads
//! dump and symbol files; never writes.

use super::series::Series;
use super::session::{Loaded, Notice, lacks_time, time_requirements};
use super::settings::Settings;
use super::view::View;
use crate::compare::ages::{Ages, LeakRow, ages, leak_candidates, live_born_between, stack_ages};
use crate::compare::lifetimes::{Amount, LifetimeRow, function_lifetimes, stack_lifetimes};
use crate::error::{Error, Result};
use crate::input::Input;
use crate::model::{Profile, TimeInfo, TimeOrigin};
use crate::symbols::LocationTable;
use heapsample_format::Peak;

/// The lifetimes of a view's new side.
#[derive(Clone, Debug, PartialEq)]
pub struct Lifetimes {
    /// Freed within this many ns counts as temporary (the threshold
    /// rounded up to a bucket edge; `u64::MAX`: every lifetime).
    pub temporary_ns: u64,
    pub functions: Vec<LifetimeRow>,
    pub stacks: Vec<LifetimeRow>,
    /// What the lifetimes' dump counts from (the attach, for an attached
    /// process: only what was allocated since is in it).
    pub origin: TimeOrigin,
}

/// Lifetimes per allocating function and per stack.
pub fn lifetimes(view: &View<'_>) -> Lifetimes {
    let profile = &view.new.profile;
    Lifetimes {
        temporary_ns: profile.time.temporary_ns,
        functions: function_lifetimes(profile, view.table),
        stacks: stack_lifetimes(profile, view.table),
        origin: profile.time.origin(),
    }
}

/// Birth slices of the run the age reports and the viewer use unless told.
pub const DEFAULT_AGE_SLICES: u16 = 8;

/// The age of the new side's live memory in `slices` slices of the run,
/// per allocating function.
pub fn live_ages(view: &View<'_>, slices: usize) -> Ages {
    ages(&view.new.profile, view.table, slices)
}

/// [`live_ages`] per stack.
pub fn live_ages_by_stack(view: &View<'_>, slices: usize) -> Ages {
    stack_ages(&view.new.profile, view.table, slices)
}

/// The new side's memory allocated in `[low_ns, high_ns)` (since the
/// profiler's start) and still live at the dump.
pub fn allocated_between_and_live(view: &View<'_>, low_ns: u64, high_ns: u64) -> Amount {
    live_born_between(&view.new.profile, low_ns, high_ns)
}

/// An error naming the first input of `view`'s new side that lacks
/// births (`births`) or lifetimes, for the view called `what`.
pub fn require(view: &View<'_>, births: bool, lifetimes: bool, what: &str) -> Result<()> {
    require_inputs(view.new.inputs(), births, lifetimes, what)
}

/// [`require`] on dumps read but not yet symbolized (a view refused before
/// any work).
pub fn require_loaded(loaded: &Loaded, births: bool, lifetimes: bool, what: &str) -> Result<()> {
    require_inputs(&loaded.inputs, births, lifetimes, what)
}

/// One line saying why `view`'s new side cannot show `what` (a view of
/// births): the first of its dumps without births and its format; None
/// when every dump carries them.
pub fn births_missing(view: &View<'_>, what: &str) -> Option<String> {
    let (input, _) = first_lacking(view.new.inputs(), true, false, what)?;
    Some(if input.version < heapsample_format::TIMED_VERSION {
        format!(
            "{what} needs the births of live samples, which dump format {} does not carry",
            input.version
        )
    } else {
        format!("{what} needs the births of live samples: this dump was written without them")
    })
}

fn require_inputs(inputs: &[Input], births: bool, lifetimes: bool, what: &str) -> Result<()> {
    match first_lacking(inputs, births, lifetimes, what) {
        Some((input, line)) => Err(Error::file(&input.path, line)),
        None => Ok(()),
    }
}

/// The first of `inputs` lacking births (`births`) or lifetimes, with one
/// line saying so.
fn first_lacking<'a>(
    inputs: &'a [Input],
    births: bool,
    lifetimes: bool,
    what: &str,
) -> Option<(&'a Input, String)> {
    inputs.iter().find_map(|input| {
        let time = TimeInfo::of(&input.dump, 0);
        ((births && !time.births) || (lifetimes && !time.lifetimes))
            .then(|| (input, lacks_time(input, &time, what)))
    })
}

/// What a series' times count from (its first dump's profiler start) and
/// each dump's moment since then: the dump's own clock (`dump_ns`, as the
/// viewer's timeline counts) for a dump of that start, the wall clock for
/// another process's.
pub fn series_times(series: &Series) -> (TimeOrigin, Vec<u64>) {
    let origin = series
        .sides()
        .first()
        .map_or_else(TimeOrigin::default, |s| s.profile.time.origin());
    let times = series
        .sides()
        .iter()
        .map(|side| {
            let time = &side.profile.time;
            if time.start_unix_ns == origin.start_unix_ns {
                time.dump_ns
            } else {
                origin.since(side.profile.origin.time_unix_ns)
            }
        })
        .collect();
    (origin, times)
}

/// The exact peak of a series and the dump nearest to it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeakInfo {
    pub peak: Peak,
    /// Index in the series of the dump nearest to the peak in time.
    pub nearest: usize,
    /// That dump's distance from the peak, ns (signed: after is positive).
    pub distance_ns: i128,
}

/// The highest exact peak the dumps know (the latest dump of a process
/// knows the highest) and the dump nearest to it in time; None when no
/// dump counted it (`prof_exact` off, or formats 2 and 3).
pub fn peak(profiles: &[&Profile]) -> Option<PeakInfo> {
    let facts: Vec<DumpFacts> = profiles.iter().map(|p| DumpFacts::of(p, false)).collect();
    peak_of(&facts)
}

/// [`peak`] on the few facts of each dump it needs.
fn peak_of(dumps: &[DumpFacts]) -> Option<PeakInfo> {
    let (owner, peak) = dumps
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.peak.map(|peak| (i, peak)))
        .max_by_key(|(_, peak)| peak.live_usable_bytes)?;
    let start = dumps[owner].start_unix_ns;
    let (nearest, distance_ns) = dumps
        .iter()
        .enumerate()
        .filter(|(_, d)| d.start_unix_ns == start)
        .map(|(i, d)| (i, i128::from(d.dump_ns) - i128::from(peak.at_ns)))
        .min_by_key(|(_, d)| d.abs())?;
    Some(PeakInfo {
        peak,
        nearest,
        distance_ns,
    })
}

/// Several dumps of one process as a [`Series`], oldest first (by the
/// dump's moment), refused with one line when the settings need births or
/// lifetimes a dump lacks.
pub fn open_series(
    table: LocationTable,
    mut inputs: Vec<Input>,
    settings: &Settings,
    notice: &mut dyn FnMut(Notice),
) -> Result<Series> {
    for input in &inputs {
        time_requirements(input, settings)?;
    }
    inputs.sort_by_key(|i| {
        (
            i.dump.process.dump_monotonic_ns,
            i.dump.time_unix_ns,
            i.dump.seq,
        )
    });
    Ok(Series::open(table, inputs, settings, notice))
}

/// The profiles of a series, oldest first.
fn profiles(series: &Series) -> Vec<&Profile> {
    series.sides().iter().map(|side| &side.profile).collect()
}

/// Dumps a series' leaks are measured on at most.
pub const MAX_LEAK_SERIES: usize = 12;

/// Which dumps of a series (oldest first; `is_exit` tells the exit dumps)
/// the leak candidates are measured on, by their index: the exit dumps
/// left out when at least two others remain (programs often free
/// everything on the way out, which says nothing about what grew while
/// they ran), then at most [`MAX_LEAK_SERIES`] spread evenly, the first
/// and the last kept. The command line's `leaks` and the viewer's growing
/// panel both measure these, so they give one answer.
pub fn leak_series(is_exit: &[bool]) -> Vec<usize> {
    let running: Vec<usize> = (0..is_exit.len()).filter(|&i| !is_exit[i]).collect();
    let kept = if running.len() >= 2 {
        running
    } else {
        (0..is_exit.len()).collect()
    };
    let n = kept.len();
    if n <= MAX_LEAK_SERIES {
        return kept;
    }
    let mut picked: Vec<usize> = (0..MAX_LEAK_SERIES)
        .map(|i| kept[i * (n - 1) / (MAX_LEAK_SERIES - 1)])
        .collect();
    picked.dedup();
    picked
}

/// Which dumps of a series are exit dumps (trigger `final`).
pub fn exit_dumps(series: &Series) -> Vec<bool> {
    series
        .sides()
        .iter()
        .map(|side| side.first_dump().trigger == heapsample_format::Trigger::Final)
        .collect()
}

/// Leak candidates of a series, most likely first (the births of the last
/// measured dump, the growth from the first to the last), measured on the
/// dumps [`leak_series`] picks.
pub fn leaks(series: &Series) -> Vec<LeakRow> {
    let all = profiles(series);
    let measured: Vec<&Profile> = leak_series(&exit_dumps(series))
        .into_iter()
        .map(|i| all[i])
        .collect();
    leak_candidates(&measured, series.table())
}

/// What the exit dump [`leak_series`] left out freed: the live heap of the
/// last dump before it and its own, in bytes (the exact live heap where
/// both counted it, else the estimates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExitFreed {
    /// The exit dump's index in the series.
    pub exit: usize,
    /// The last dump before it.
    pub before: usize,
    pub live_before: f64,
    pub live_at_exit: f64,
    /// True when both are the exact live heap (usable bytes).
    pub exact: bool,
}

/// The exit dump [`leak_series`] leaves out of `series`, if any, and what
/// it freed.
pub fn exit_left_out(series: &Series) -> Option<ExitFreed> {
    let is_exit = exit_dumps(series);
    let measured = leak_series(&is_exit);
    let exit = (0..is_exit.len())
        .rev()
        .find(|&i| is_exit[i] && !measured.contains(&i))?;
    let before = (0..exit).rev().find(|&i| !is_exit[i])?;
    let profile = |i: usize| &series.sides()[i].profile;
    let exact = |i: usize| profile(i).totals.live_usable_bytes;
    let (live_before, live_at_exit, exact) = match (exact(before), exact(exit)) {
        (Some(a), Some(b)) => (a as f64, b as f64, true),
        _ => (
            profile(before).estimated.inuse_space,
            profile(exit).estimated.inuse_space,
            false,
        ),
    };
    Some(ExitFreed {
        exit,
        before,
        live_before,
        live_at_exit,
        exact,
    })
}

/// The peak a series knows and the dump nearest to it.
pub fn series_peak(series: &Series) -> Option<PeakInfo> {
    peak(&profiles(series))
}

/// The live heap of one dump of a series: its index, bytes, and whether
/// they are the exact live heap (usable bytes) or the estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveAt {
    pub dump: usize,
    pub bytes: f64,
    pub exact: bool,
}

/// One process's story in a few numbers: the exact peak and the dump
/// nearest to it (what it misses, and the high-water step that would have
/// caught it), the live heap at the last dump before exit and at exit, and
/// the top leak candidate with its program frame.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessSummary {
    pub peak: Option<PeakInfo>,
    /// The exact live heap of the dump nearest to the peak.
    pub nearest_live: Option<u64>,
    /// How much of the peak that dump misses, bytes.
    pub missed: Option<u64>,
    /// A `prof_gdump_step` (with `prof_gdump:true`) whose high-water dumps
    /// would have come within `missed / 2` of the peak: the largest power
    /// of two not above half of it.
    pub gdump_step: Option<u64>,
    pub before_exit: Option<LiveAt>,
    pub at_exit: Option<LiveAt>,
    /// The top leak candidate: its function and program frame.
    pub top_leak: Option<(String, Option<String>)>,
}

/// What a process summary needs of one dump: read from its profile
/// ([`DumpFacts::of`]) by the command line, from the list's summary of the
/// file by the viewer, so both summarize with [`summary_of`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DumpFacts {
    /// The exact peak this dump knows.
    pub peak: Option<Peak>,
    /// The profiler's start on the wall clock (0: not known).
    pub start_unix_ns: u64,
    /// The dump's moment, ns since the profiler's start.
    pub dump_ns: u64,
    /// The exact live heap (usable bytes), where counted.
    pub live_exact: Option<u64>,
    /// The estimated live heap (requested bytes).
    pub live_estimate: f64,
    /// An exit dump (trigger `final`).
    pub exit: bool,
}

impl DumpFacts {
    pub fn of(profile: &Profile, exit: bool) -> DumpFacts {
        DumpFacts {
            peak: profile.time.peak,
            start_unix_ns: profile.time.start_unix_ns,
            dump_ns: profile.time.dump_ns,
            live_exact: profile.totals.live_usable_bytes,
            live_estimate: profile.estimated.inuse_space,
            exit,
        }
    }

    fn live_at(&self, dump: usize) -> LiveAt {
        match self.live_exact {
            Some(bytes) => LiveAt {
                dump,
                bytes: bytes as f64,
                exact: true,
            },
            None => LiveAt {
                dump,
                bytes: self.live_estimate,
                exact: false,
            },
        }
    }
}

/// The summary of `series` with its leak candidates `rows`.
pub fn process_summary(series: &Series, rows: &[LeakRow]) -> ProcessSummary {
    let exits = exit_dumps(series);
    let facts: Vec<DumpFacts> = series
        .sides()
        .iter()
        .zip(exits)
        .map(|(side, exit)| DumpFacts::of(&side.profile, exit))
        .collect();
    let top_leak = rows
        .iter()
        .find(|r| r.leaking())
        .map(|r| (r.name.clone(), r.program_frame.clone()));
    summary_of(&facts, top_leak)
}

/// The summary of a process from its dumps' facts (oldest first) and its
/// top leak candidate (function, program frame): the one rule the command
/// line and the viewer share.
pub fn summary_of(
    dumps: &[DumpFacts],
    top_leak: Option<(String, Option<String>)>,
) -> ProcessSummary {
    let peak = peak_of(dumps);
    let nearest_live = peak.and_then(|p| dumps[p.nearest].live_exact);
    let missed = peak
        .zip(nearest_live)
        .map(|(p, live)| p.peak.live_usable_bytes.saturating_sub(live));
    let gdump_step = missed
        .filter(|&m| m >= 2)
        .map(|m| 1u64 << (63 - (m / 2).leading_zeros()));
    let exit = dumps.iter().rposition(|d| d.exit);
    let before = (0..exit.unwrap_or(dumps.len()))
        .rev()
        .find(|&i| !dumps[i].exit);
    ProcessSummary {
        peak,
        nearest_live,
        missed,
        gdump_step,
        before_exit: before.map(|i| dumps[i].live_at(i)),
        at_exit: exit.map(|i| dumps[i].live_at(i)),
        top_leak,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggested_step_is_a_power_of_two_within_half_the_miss() {
        for missed in [2u64, 3, 1000, 1 << 20, (1 << 20) + 1, 63 << 20] {
            let step = 1u64 << (63 - (missed / 2).leading_zeros());
            assert!(step.is_power_of_two() && step <= missed / 2 && 2 * step > missed / 2);
        }
    }

    fn facts(dump_ns: u64, live: u64, peak: Option<(u64, u64)>, exit: bool) -> DumpFacts {
        DumpFacts {
            peak: peak.map(|(live_usable_bytes, at_ns)| Peak {
                live_usable_bytes,
                at_ns,
                time_margin_bytes: 4096,
            }),
            start_unix_ns: 1,
            dump_ns,
            live_exact: Some(live),
            live_estimate: live as f64 * 0.9,
            exit,
        }
    }

    #[test]
    fn a_summary_names_the_dump_nearest_the_peak_and_the_exit() {
        // Dumps at 1, 2 and 3 s, the peak of 1,000,000 at 2.4 s (known from
        // the second dump on), an exit dump at 5 s.
        let dumps = [
            facts(1_000_000_000, 100_000, None, false),
            facts(
                2_000_000_000,
                600_000,
                Some((1_000_000, 2_400_000_000)),
                false,
            ),
            facts(
                3_000_000_000,
                500_000,
                Some((1_000_000, 2_400_000_000)),
                false,
            ),
            facts(
                5_000_000_000,
                20_000,
                Some((1_000_000, 2_400_000_000)),
                true,
            ),
        ];
        let summary = summary_of(&dumps, Some(("f".into(), Some("main".into()))));
        let peak = summary.peak.expect("a peak");
        assert_eq!((peak.nearest, peak.distance_ns), (1, -400_000_000));
        assert_eq!(summary.nearest_live, Some(600_000));
        assert_eq!(summary.missed, Some(400_000));
        // The largest power of two not above half of what it missed.
        assert_eq!(summary.gdump_step, Some(131_072));
        assert_eq!(
            summary.before_exit.map(|l| (l.dump, l.bytes)),
            Some((2, 500_000.0))
        );
        assert_eq!(summary.at_exit.map(|l| (l.dump, l.exact)), Some((3, true)));
        // Without exact counters the estimate stands in, and says so.
        let mut estimated = dumps;
        estimated[3].live_exact = None;
        let at_exit = summary_of(&estimated, None).at_exit.expect("the exit dump");
        assert_eq!((at_exit.bytes, at_exit.exact), (18_000.0, false));
    }

    #[test]
    fn the_exit_dump_is_left_out_when_two_others_remain() {
        assert_eq!(leak_series(&[false, false, false, true]), [0, 1, 2]);
        assert_eq!(leak_series(&[false, true]), [0, 1]);
        assert_eq!(leak_series(&[true]), [0]);
        assert_eq!(leak_series(&[]), Vec::<usize>::new());
    }

    #[test]
    fn a_long_series_is_spread_evenly_with_both_ends() {
        let mut exits = vec![false; 2000];
        exits.push(true);
        let picked = leak_series(&exits);
        assert_eq!(picked.len(), MAX_LEAK_SERIES);
        assert_eq!((picked[0], picked[MAX_LEAK_SERIES - 1]), (0, 1999));
        assert!(picked.windows(2).all(|w| w[0] < w[1]));
    }
}
