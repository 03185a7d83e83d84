//! The age of live memory in the viewer's model: per allocating function of
//! the new side, its live bytes born in each slice of the run with the 95 %
//! interval, and its class (accumulating, recent only, start-up). The
//! numbers are `heapdiff ages`' ([`crate::pipeline::time::live_ages`], the
//! same slices, the same estimates); the page only draws them. A view whose
//! dumps carry no births gets the one line saying so instead.

use crate::compare::ages::{AgeRow, class_name};
use crate::model::TimeScope;
use crate::pipeline::View;
use crate::pipeline::time::{DEFAULT_AGE_SLICES, births_missing, live_ages};
use crate::stats::Estimate;
use serde::Serialize;

/// Functions drawn at most (those with the most live bytes).
pub const MAX_AGE_FUNCTIONS: usize = 40;

/// The ages of the new side's live memory, or why there are none.
#[derive(Debug, Default, Serialize)]
pub struct AgesModel {
    /// One line: why the view has no ages (its dumps carry no births).
    pub missing: Option<String>,
    /// ns from the profiler's start to the dump.
    pub run_ns: u64,
    /// The birth slices, `[low, high)` ns since the start (the last one
    /// also holds what was born at or after its end).
    pub slices_ns: Vec<(u64, u64)>,
    /// Most live bytes first, at most [`MAX_AGE_FUNCTIONS`].
    pub functions: Vec<AgeFunction>,
    /// Functions with live memory left out.
    pub more: usize,
}

/// One function's live bytes by birth.
#[derive(Debug, Serialize)]
pub struct AgeFunction {
    pub name: String,
    /// The program's own function that called into it (where most of its
    /// live bytes were allocated), `null` without one.
    pub program_frame: Option<String>,
    /// `accumulating`, `recent-only`, `start-up` (`early-after-attach` in
    /// a dump of an attached process) or `empty`.
    pub class: &'static str,
    /// All its live bytes: `[estimate, low, high]`.
    pub live: [f64; 3],
    /// Per slice, its live bytes born there: `[estimate, low, high]`.
    pub slices: Vec<[f64; 3]>,
}

/// The ages of `view`'s new side in [`DEFAULT_AGE_SLICES`] slices.
pub fn ages_model(view: &View<'_>) -> AgesModel {
    if let Some(line) = births_missing(view, "the age of live memory") {
        return AgesModel {
            missing: Some(line),
            ..AgesModel::default()
        };
    }
    let ages = live_ages(view, usize::from(DEFAULT_AGE_SLICES));
    let more = ages.rows.len().saturating_sub(MAX_AGE_FUNCTIONS);
    let scope = TimeScope::of(view.new.first_dump());
    AgesModel {
        missing: None,
        run_ns: ages.run_ns,
        slices_ns: ages.slices,
        functions: ages
            .rows
            .iter()
            .take(MAX_AGE_FUNCTIONS)
            .map(|row| AgeFunction::of(row, scope))
            .collect(),
        more,
    }
}

impl AgeFunction {
    fn of(row: &AgeRow, scope: TimeScope) -> AgeFunction {
        AgeFunction {
            name: row.name.clone(),
            program_frame: row.program_frame.clone(),
            class: class_name(row.class, scope),
            live: triple(&row.live.bytes),
            slices: slice_bounds(row),
        }
    }
}

/// Per slice of `row`, its live bytes born there: `[estimate, low, high]`
/// (the growing panel of `heapdiff serve` draws these too).
pub fn slice_bounds(row: &AgeRow) -> Vec<[f64; 3]> {
    row.slices.iter().map(|s| triple(&s.bytes)).collect()
}

/// `[estimate, low, high]` of the 95 % interval, as the JSON reports give.
fn triple(estimate: &Estimate) -> [f64; 3] {
    let interval = estimate.interval();
    [interval.estimate, interval.low, interval.high]
}
