//! `/api/growth?process=KEY`: the functions whose live memory grows across
//! the dumps of one process (KEY: its first dump's id), for the "growing"
//! panel of the process's timeline: each with its value in every dump of
//! the series (the sparkline), its change from the first dump to the last
//! with the 95 % interval, and whether it still grows in the second half
//! (`heapdiff::compare::growth`, the reports' rule for a change); where
//! the dumps carry births, its class from the births of its live memory in
//! the last dump (leak, cache or start-up: `heapdiff::compare::ages`) and
//! its live bytes per birth slice of that dump (`heapdiff ages`' slices).
//!
//! The dumps measured are those `heapdiff leaks` measures
//! (`heapdiff::pipeline::time::leak_series`: the exit dump left out when
//! at least two others remain, at most 12 spread evenly over a long
//! series), and the rows come in the order of its leak candidates
//! (`candidates`, the same list `heapdiff leaks` prints), each named with
//! its program frame: one answer from every door. The report also carries
//! the process summary of all the process's dumps (`summary_of`, from the
//! list's facts of each file, with the top leak candidate), as json and as
//! the lines `heapdiff leaks` prints (`summary_lines`): the front page
//! shows those lines, never a summary of its own. The answer is kept for
//! the next request while the dumps stay the same (`built_cache`).

use crate::AppState;
use crate::catalog::Entry;
use crate::listing::process_of;
use crate::query::checked;
use crate::responses::refuse;
use crate::work::{Failure, cache_key, json_kept_or_built, read_entry};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use heapdiff::compare::ages::{Ages, ages, leak_candidates};
use heapdiff::compare::growth::{Growth, growing};
use heapdiff::model::Metric;
use heapdiff::pipeline::time::{DEFAULT_AGE_SLICES, DumpFacts, leak_series, summary_of};
use heapdiff::render::html::ages::slice_bounds;
use heapdiff::render::time_json::SummaryReport;
use heapdiff::render::time_text::summary_lines;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Functions listed at most.
const MAX_FUNCTIONS: usize = 20;

#[derive(Deserialize)]
pub struct Wanted {
    process: Option<String>,
}

#[derive(Serialize)]
struct Report {
    metric: &'static str,
    /// The exit dump was left out.
    without_exit_dump: bool,
    /// The dumps measured, oldest first.
    dumps: Vec<String>,
    times_unix_ns: Vec<u64>,
    /// Where the dumps carry births: the last dump's birth slices, `[low,
    /// high)` ns since the start (`heapdiff ages`' slices of that dump).
    slices_ns: Option<Vec<(u64, u64)>>,
    functions: Vec<Row>,
    /// The leak candidates of `heapdiff leaks` on the same dumps, most
    /// likely first: the order of `functions`.
    candidates: Vec<Candidate>,
    /// The process summary over all its dumps (named by id), as
    /// `heapdiff leaks` gives it in json and in text.
    process_summary: Option<SummaryReport>,
    summary_lines: Vec<String>,
}

#[derive(Serialize)]
struct Candidate {
    name: String,
    /// The program's own function that called into it.
    program_frame: Option<String>,
    leaking: bool,
}

#[derive(Serialize)]
struct Row {
    label: String,
    /// The program's own function that called into it (where most of its
    /// live memory was allocated): what the panel leads with.
    program_frame: Option<String>,
    full: String,
    values: Vec<f64>,
    lows: Vec<f64>,
    highs: Vec<f64>,
    change: f64,
    change_low: f64,
    change_high: f64,
    still_growing: bool,
    /// From the births of its live memory in the last dump (where the
    /// dumps carry them): `accumulating`, `start-up` or `recent-only`.
    class: Option<&'static str>,
    /// The class's evidence: its live bytes in the last dump born in the
    /// start-up window, the older and the newer half of the rest.
    born: Option<[f64; 3]>,
    /// Its live bytes in the last dump born in each of `slices_ns`:
    /// `[estimate, low, high]`.
    born_slices: Option<Vec<[f64; 3]>>,
}

impl Row {
    fn of(growth: Growth) -> Row {
        let intervals: Vec<_> = growth.values.iter().map(|e| e.interval()).collect();
        let change = growth.change.interval();
        Row {
            still_growing: growth.still_growing(),
            program_frame: growth.program_frame,
            label: growth.label,
            full: growth.full,
            values: intervals.iter().map(|i| i.estimate.round()).collect(),
            lows: intervals.iter().map(|i| i.low.round()).collect(),
            highs: intervals.iter().map(|i| i.high.round()).collect(),
            change: change.estimate.round(),
            change_low: change.low.round(),
            change_high: change.high.round(),
            class: None,
            born: None,
            born_slices: None,
        }
    }

    /// This row with the class `ages` gives its function, if any.
    fn classified(mut self, ages: Option<&Ages>) -> Row {
        if let Some(row) = ages.and_then(|a| a.rows.iter().find(|r| r.name == self.label)) {
            let w = &row.windows;
            self.class = Some(row.class.name());
            self.born = Some([w.startup.value, w.older.value, w.newer.value].map(f64::round));
            self.born_slices = Some(slice_bounds(row));
        }
        self
    }
}

pub async fn growth(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    query: Result<Query<Wanted>, QueryRejection>,
) -> Response {
    let named = "name a process: ?process=FIRST-DUMP-ID";
    let key = match checked(&uri, query, named) {
        Ok(Wanted { process: Some(key) }) => key,
        Ok(_) => return refuse(StatusCode::BAD_REQUEST, named),
        Err((status, why)) => return refuse(status, why),
    };
    let dumps = process_of(&state.catalog.snapshot(), &key);
    if dumps.first().is_none_or(|(first, _)| *first != key) {
        return refuse(StatusCode::NOT_FOUND, &format!("no process {key:?} here"));
    }
    let is_exit: Vec<bool> = dumps
        .iter()
        .map(|(_, e)| matches!(&e.summary, Ok(s) if s.trigger == "final"))
        .collect();
    let measured = leak_series(&is_exit);
    let without_exit = measured.iter().all(|&i| !is_exit[i]) && is_exit.contains(&true);
    let series: Vec<Arc<Entry>> = measured.into_iter().map(|i| dumps[i].1.clone()).collect();
    let all: Vec<Arc<Entry>> = dumps.into_iter().map(|(_, entry)| entry).collect();
    // The summary reads every dump's facts: the key names them all.
    let key = cache_key("growth", &all);
    let entries = series.clone();
    json_kept_or_built(
        &state,
        key,
        &entries,
        "the growth report failed",
        move |state, _| report(state, &series, &all, without_exit),
    )
    .await
}

/// What the process summary needs of each readable one of `dumps` (oldest
/// first), from the list's summary of the file, with its id.
fn facts(dumps: &[Arc<Entry>]) -> (Vec<String>, Vec<DumpFacts>) {
    dumps
        .iter()
        .filter_map(|entry| Some((entry.id.clone(), entry.summary.as_ref().ok()?)))
        .map(|(id, s)| {
            (
                id,
                DumpFacts {
                    peak: s
                        .exact_peak
                        .map(|live_usable_bytes| heapsample_format::Peak {
                            live_usable_bytes,
                            at_ns: s.exact_peak_at_ns,
                            time_margin_bytes: s.exact_peak_margin,
                        }),
                    start_unix_ns: s.start_unix_ns,
                    dump_ns: s.since_start_ns,
                    live_exact: s.live_exact,
                    live_estimate: s.live_estimate,
                    exit: s.trigger == "final",
                },
            )
        })
        .unzip()
}

fn report(
    state: &AppState,
    series: &[Arc<Entry>],
    all: &[Arc<Entry>],
    without_exit: bool,
) -> Result<String, Failure> {
    let inputs = series
        .iter()
        .map(|entry| read_entry(state, entry))
        .collect::<Result<Vec<_>, _>>()?;
    let times_unix_ns = inputs.iter().map(|i| i.dump.time_unix_ns).collect();
    let metric = Metric::InuseSpace;
    let mut settings = state.settings.clone();
    settings.metric = metric;
    let births = series
        .last()
        .is_some_and(|e| matches!(&e.summary, Ok(s) if s.births));
    let (functions, ages, candidates) = state.symbols.with_series(inputs, &settings, |series| {
        let profiles: Vec<_> = series.sides().iter().map(|side| &side.profile).collect();
        let ages = births
            .then(|| {
                profiles
                    .last()
                    .map(|last| ages(last, series.table(), usize::from(DEFAULT_AGE_SLICES)))
            })
            .flatten();
        let candidates = leak_candidates(&profiles, series.table());
        (growing(&profiles, series.table(), metric), ages, candidates)
    });
    let rank = |label: &str| {
        candidates
            .iter()
            .position(|c| c.name == label)
            .unwrap_or(usize::MAX)
    };
    let mut functions = functions;
    functions.sort_by_key(|growth| rank(&growth.label));
    let top_leak = candidates
        .iter()
        .find(|c| c.leaking())
        .map(|c| (c.name.clone(), c.program_frame.clone()));
    let (names, facts) = facts(all);
    let summary = (facts.len() > 1).then(|| summary_of(&facts, top_leak));
    let report = Report {
        process_summary: summary.as_ref().map(|s| SummaryReport::of(s, &names)),
        summary_lines: summary
            .as_ref()
            .map(|s| {
                summary_lines(s, &names)
                    .lines()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        metric: metric.name(),
        without_exit_dump: without_exit,
        dumps: series.iter().map(|e| e.id.clone()).collect(),
        times_unix_ns,
        slices_ns: ages.as_ref().map(|a| a.slices.clone()),
        functions: functions
            .into_iter()
            .take(MAX_FUNCTIONS)
            .map(|growth| Row::of(growth).classified(ages.as_ref()))
            .collect(),
        candidates: candidates
            .iter()
            .map(|c| Candidate {
                name: c.name.clone(),
                program_frame: c.program_frame.clone(),
                leaking: c.leaking(),
            })
            .collect(),
    };
    serde_json::to_string(&report).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
