//! The age of live memory per allocating function: its live bytes by birth
//! (slices of the run), the leak / cache / start-up class with its
//! evidence ([`crate::stats::births`]), and the ranking of leak candidates
//! over one dump or a series of dumps of one process.
//!
//! Births count from the profiler's start; each live sample weighs what the
//! shim gave it, so every slice is an unbiased estimate (exact at
//! `lg_prof_sample:0`). A function is the stack's leaf, as in
//! [`super::lifetimes`]. No I/O.

use super::growth::growing;
use super::lifetimes::Amount;
use crate::model::folding::folded_key;
use crate::model::{
    Birth, Metric, Profile, ProgramFrames, Sample, TimeOrigin, TimeScope, leaf_name,
};
use crate::stats::births::STARTUP_SHARE;
use crate::stats::{
    Caveat, Class, Delta, Estimate, Evidence, Interval, Windows, caveats, per_second,
};
use crate::symbols::LocationTable;
use std::collections::BTreeMap;

/// The live memory of one function by birth.
#[derive(Clone, Debug, PartialEq)]
pub struct AgeRow {
    pub name: String,
    /// All its live memory (in the birth range of the build).
    pub live: Amount,
    /// Its live memory born in each slice of [`Ages::slices`].
    pub slices: Vec<Amount>,
    /// Its live bytes born in the start-up window and the older and newer
    /// halves of the rest: the evidence of its class.
    pub windows: Windows,
    pub class: Class,
    /// Why its class is weak evidence (none: as strong as one dump makes
    /// it; [`crate::stats::births`]).
    pub caveats: Vec<Caveat>,
    /// Live bytes born in the older half per second of it: the rate at
    /// which memory born there was kept (a leak's rate; about 0 for a
    /// cache that turns over).
    pub kept_rate: Estimate,
    /// The program's own function that called into it, where most of its
    /// live bytes were allocated ([`crate::model::program_frame()`]); rows
    /// per function only.
    pub program_frame: Option<String>,
}

/// The ages of a profile's live memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Ages {
    /// The run: ns from the profiler's start to the dump.
    pub run_ns: u64,
    /// The birth slices, `[low, high)` ns since the start.
    pub slices: Vec<(u64, u64)>,
    /// The windows of the rule: start-up `[0, a)`, older `[a, b)`, newer
    /// `[b, run]`.
    pub windows_ns: (u64, u64),
    /// One row per function with live memory, most live bytes first.
    pub rows: Vec<AgeRow>,
    /// What the times count from: for an attached process the run, the
    /// slices and the windows start at the attach.
    pub origin: TimeOrigin,
}

/// The name reports give `class` in `scope`: [`Class::name`], except that
/// memory kept from the first window of an attached process's run is
/// `early-after-attach` (born in the first 10 % after the attach), not
/// `start-up`: the process started long before.
pub fn class_name(class: Class, scope: TimeScope) -> &'static str {
    match (class, scope) {
        (Class::Startup, TimeScope::SinceAttach { .. }) => "early-after-attach",
        (class, _) => class.name(),
    }
}

/// The ages of `profile`'s live memory in `slices` equal slices of the run
/// (at least 1), per allocating function.
pub fn ages(profile: &Profile, table: &LocationTable, slices: usize) -> Ages {
    let key = |sample: &Sample| leaf_name(sample, table).to_string();
    let program = ProgramFrames::of(profile, table, Metric::InuseSpace, key);
    let mut ages = ages_by(profile, slices, key);
    for row in &mut ages.rows {
        row.program_frame = program.get(&row.name).map(str::to_string);
    }
    ages
}

/// [`ages`] per stack (its functions root first, joined by `;`).
pub fn stack_ages(profile: &Profile, table: &LocationTable, slices: usize) -> Ages {
    ages_by(profile, slices, |sample| folded_key(sample, table))
}

fn ages_by(profile: &Profile, slices: usize, key: impl Fn(&Sample) -> String) -> Ages {
    let run_ns = profile
        .time
        .dump_ns
        .max(latest_birth(profile).saturating_add(1));
    let count = slices.max(1) as u64;
    let edges: Vec<(u64, u64)> = (0..count)
        .map(|i| (edge(run_ns, i, count), edge(run_ns, i + 1, count)))
        .collect();
    let startup_end = (run_ns as f64 * STARTUP_SHARE) as u64;
    let middle = startup_end + (run_ns - startup_end) / 2;
    let mut births: BTreeMap<String, Vec<Birth>> = BTreeMap::new();
    for sample in &profile.samples {
        births
            .entry(key(sample))
            .or_default()
            .extend_from_slice(&sample.births);
    }
    let older_seconds = (middle - startup_end) as f64 / 1e9;
    let mut rows: Vec<AgeRow> = births
        .into_iter()
        .filter(|(_, b)| !b.is_empty())
        .map(|(name, births)| {
            let within = |low: u64, high: u64| amount_born(&births, low, high, profile.period);
            let windows = Windows {
                startup: within(0, startup_end).bytes,
                older: within(startup_end, middle).bytes,
                newer: within(middle, u64::MAX).bytes,
            };
            let mut slices: Vec<Amount> = edges.iter().map(|&(l, h)| within(l, h)).collect();
            if let Some(last) = slices.last_mut() {
                *last = within(edges[edges.len() - 1].0, u64::MAX);
            }
            let quarter = startup_end + (middle - startup_end) / 2;
            let count = |low: u64, high: u64| {
                births
                    .iter()
                    .filter(|b| b.birth_ns >= low && b.birth_ns < high)
                    .count() as u64
            };
            let evidence = Evidence {
                older_samples: count(startup_end, middle),
                newer_samples: count(middle, u64::MAX),
                older_first: within(startup_end, quarter).bytes.value,
                older_second: within(quarter, middle).bytes.value,
            };
            let class = windows.class();
            AgeRow {
                name,
                live: within(0, u64::MAX),
                slices,
                class,
                caveats: caveats(class, &evidence),
                kept_rate: per_second(&windows.older, older_seconds),
                windows,
                program_frame: None,
            }
        })
        .collect();
    super::largest_first(&mut rows, |r| r.live.bytes.value, |r| &r.name);
    Ages {
        run_ns,
        slices: edges,
        windows_ns: (startup_end, middle),
        rows,
        origin: profile.time.origin(),
    }
}

fn edge(run_ns: u64, i: u64, count: u64) -> u64 {
    (u128::from(run_ns) * u128::from(i) / u128::from(count)) as u64
}

fn latest_birth(profile: &Profile) -> u64 {
    profile
        .samples
        .iter()
        .flat_map(|s| s.births.iter().map(|b| b.birth_ns))
        .max()
        .unwrap_or(0)
}

/// The live memory among `births` born in `[low, high)`.
pub fn amount_born(births: &[Birth], low: u64, high: u64, period: u64) -> Amount {
    let mut amount = Amount::zero(period);
    for birth in births
        .iter()
        .filter(|b| b.birth_ns >= low && b.birth_ns < high)
    {
        let w = &birth.weights;
        let one = Amount::of(w, 1, birth.size, period);
        amount = amount.plus(&one);
    }
    amount
}

/// The live memory of the whole profile born in `[low, high)` ns since the
/// start ("allocated in this range and still live").
pub fn live_born_between(profile: &Profile, low: u64, high: u64) -> Amount {
    profile
        .samples
        .iter()
        .map(|s| amount_born(&s.births, low, high, profile.period))
        .fold(Amount::zero(profile.period), |sum, a| sum.plus(&a))
}

/// What a series says of a function that grew from its first dump to its
/// last ([`super::growth`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    /// It grew from the middle dump to the last too.
    Growing,
    /// It did not: a cache that filled up, or start-up state.
    LevelledOff,
}

impl Trend {
    /// `growing`, `levelled-off`.
    pub fn name(self) -> &'static str {
        match self {
            Trend::Growing => "growing",
            Trend::LevelledOff => "levelled-off",
        }
    }
}

/// A leak candidate: a function whose live memory is accumulating, or grew
/// across the series.
#[derive(Clone, Debug, PartialEq)]
pub struct LeakRow {
    pub name: String,
    /// The program's own function that called into it
    /// ([`crate::model::program_frame()`]): what the report leads with.
    pub program_frame: Option<String>,
    /// The class and its evidence, from the births in the last dump.
    pub ages: Option<AgeRow>,
    /// The change of its live bytes from the first to the last dump of the
    /// series (None for one dump, or when it did not grow significantly).
    pub growth: Option<Delta>,
    /// Whether it still grows (None: one dump, or no significant growth).
    pub trend: Option<Trend>,
    /// Its growth rate in bytes per second with the 95 % interval: across
    /// the series when it grew, else the kept rate of its births.
    pub rate: Interval,
}

impl LeakRow {
    /// The evidence of a leak: still growing across the series, or (one
    /// dump) accumulating.
    pub fn leaking(&self) -> bool {
        match self.trend {
            Some(trend) => trend == Trend::Growing,
            None => self
                .ages
                .as_ref()
                .is_some_and(|a| a.class == Class::Accumulating),
        }
    }
}

/// Leak candidates of a series of profiles of one process, oldest first,
/// most likely first: those with the evidence of a leak
/// ([`LeakRow::leaking`]), then by the lower end of the rate's interval.
/// The candidates are the functions that grew significantly across the
/// series ([`super::growth::growing`], by self in-use space) and those the
/// births of the last profile call accumulating.
pub fn leak_candidates(series: &[&Profile], table: &LocationTable) -> Vec<LeakRow> {
    let Some(last) = series.last() else {
        return Vec::new();
    };
    let mut rows: BTreeMap<String, LeakRow> = BTreeMap::new();
    if last.time.births {
        for age in ages(last, table, 1).rows {
            if age.class == Class::Accumulating {
                let row = LeakRow {
                    name: age.name.clone(),
                    program_frame: age.program_frame.clone(),
                    rate: age.kept_rate.interval(),
                    ages: Some(age),
                    growth: None,
                    trend: None,
                };
                rows.insert(row.name.clone(), row);
            }
        }
    }
    if let Some(seconds) = growth_seconds(series) {
        let classes: BTreeMap<String, AgeRow> = if last.time.births {
            ages(last, table, 1)
                .rows
                .into_iter()
                .map(|r| (r.name.clone(), r))
                .collect()
        } else {
            BTreeMap::new()
        };
        for grown in growing(series, table, Metric::InuseSpace) {
            let trend = if grown.still_growing() {
                Trend::Growing
            } else {
                Trend::LevelledOff
            };
            let ages = classes.get(&grown.label).cloned();
            let row = LeakRow {
                program_frame: grown
                    .program_frame
                    .clone()
                    .or_else(|| ages.as_ref().and_then(|a| a.program_frame.clone())),
                ages,
                name: grown.label,
                growth: Some(grown.change),
                trend: Some(trend),
                rate: scaled(grown.change.interval(), seconds),
            };
            rows.insert(row.name.clone(), row);
        }
    }
    let mut rows: Vec<LeakRow> = rows.into_values().collect();
    rows.sort_by(|a, b| {
        b.leaking()
            .cmp(&a.leaking())
            .then_with(|| b.rate.low.total_cmp(&a.rate.low))
            .then_with(|| b.rate.estimate.total_cmp(&a.rate.estimate))
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}

/// Seconds from the first to the last profile of the series (None for one
/// profile or none).
pub fn growth_seconds(series: &[&Profile]) -> Option<f64> {
    let (first, last) = (series.first()?, series.last()?);
    if series.len() < 2 {
        return None;
    }
    let ns = match (first.time.dump_ns, last.time.dump_ns) {
        (a, b) if b > a && first.time.start_unix_ns == last.time.start_unix_ns => b - a,
        _ => last
            .origin
            .time_unix_ns
            .saturating_sub(first.origin.time_unix_ns),
    };
    (ns > 0).then_some(ns as f64 / 1e9)
}

/// The rows that fail a gate of `bytes_per_second`: the evidence of a leak
/// ([`LeakRow::leaking`]) and the lower end of the rate's interval above
/// the threshold.
pub fn failing(rows: &[LeakRow], bytes_per_second: f64) -> Vec<&LeakRow> {
    rows.iter()
        .filter(|row| row.leaking() && row.rate.low > bytes_per_second)
        .collect()
}

fn scaled(interval: Interval, seconds: f64) -> Interval {
    Interval {
        estimate: interval.estimate / seconds,
        low: interval.low / seconds,
        high: interval.high / seconds,
    }
}
