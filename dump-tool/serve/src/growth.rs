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
//! The exit dump is left out when there are at least two others: many
//! programs free everything on the way out (CPython, Rust), which says
//! nothing about what grew while they ran. A long series is measured on at
//! most [`MAX_SERIES`] dumps spread evenly over it (the first and the last
//! always among them); the answer is kept for the next request while the
//! dumps stay the same (`built_cache`).

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
use heapdiff::compare::ages::{Ages, ages};
use heapdiff::compare::growth::{Growth, growing};
use heapdiff::model::Metric;
use heapdiff::pipeline::time::DEFAULT_AGE_SLICES;
use heapdiff::render::html::ages::slice_bounds;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Dumps a series is measured on at most.
pub const MAX_SERIES: usize = 12;
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
}

#[derive(Serialize)]
struct Row {
    label: String,
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
    let all = dumps.len();
    let running = while_running(dumps.into_iter().map(|(_, e)| e).collect());
    let without_exit = running.len() < all;
    let series = spread(running);
    let key = cache_key("growth", &series);
    let entries = series.clone();
    json_kept_or_built(
        &state,
        key,
        &entries,
        "the growth report failed",
        move |state, _| report(state, &series, without_exit),
    )
    .await
}

/// The dumps but the exit dump, when at least two others remain.
fn while_running(dumps: Vec<Arc<Entry>>) -> Vec<Arc<Entry>> {
    let is_exit = |e: &Arc<Entry>| matches!(&e.summary, Ok(s) if s.trigger == "final");
    if dumps.iter().filter(|e| !is_exit(e)).count() >= 2 {
        dumps.into_iter().filter(|e| !is_exit(e)).collect()
    } else {
        dumps
    }
}

/// At most [`MAX_SERIES`] of `dumps`, evenly spread, first and last kept.
fn spread<T>(dumps: Vec<T>) -> Vec<T> {
    let n = dumps.len();
    if n <= MAX_SERIES {
        return dumps;
    }
    let picked: Vec<usize> = (0..MAX_SERIES)
        .map(|i| i * (n - 1) / (MAX_SERIES - 1))
        .collect();
    dumps
        .into_iter()
        .enumerate()
        .filter(|(i, _)| picked.contains(i))
        .map(|(_, d)| d)
        .collect()
}

fn report(state: &AppState, series: &[Arc<Entry>], without_exit: bool) -> Result<String, Failure> {
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
    let (functions, ages) = state.symbols.with_series(inputs, &settings, |series| {
        let profiles: Vec<_> = series.sides().iter().map(|side| &side.profile).collect();
        let ages = births
            .then(|| {
                profiles
                    .last()
                    .map(|last| ages(last, series.table(), usize::from(DEFAULT_AGE_SLICES)))
            })
            .flatten();
        (growing(&profiles, series.table(), metric), ages)
    });
    let report = Report {
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
    };
    serde_json::to_string(&report).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_series_is_spread_evenly_with_both_ends() {
        let picked = spread((0..2000).collect::<Vec<_>>());
        assert_eq!(picked.len(), MAX_SERIES);
        assert_eq!(picked[0], 0);
        assert_eq!(*picked.last().unwrap(), 1999);
        assert_eq!(spread(vec![1, 2, 3]), [1, 2, 3]);
    }
}
