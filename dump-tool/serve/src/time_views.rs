//! The time views of one dump a viewer page can show when its dumps carry
//! the data (dump format 4): its live memory allocated since an earlier
//! dump of its process (`&born_since=ID`: what a range of the timeline
//! left behind), and its temporary allocations (`&view=temporary`). What
//! they measure is the pipeline's (`--born-after`, `-m temp-space`); this
//! module only checks the request and sets the settings and the title.

use crate::AppState;
use crate::catalog::{Entry, Summary};
use crate::query::Pick;
use crate::work::{Failure, listed};
use axum::http::StatusCode;
use heapdiff::model::time::DEFAULT_TEMPORARY_NS;
use heapdiff::model::{BirthRange, Metric, TimePoint};
use heapdiff::pipeline::Settings;
use std::sync::Arc;

/// A time view of one dump.
#[derive(Clone)]
pub enum TimeView {
    /// Its live memory allocated since the dump `since` of its process.
    BornSince(Arc<Entry>),
    /// Its temporary allocations (freed within the default threshold).
    Temporary,
}

impl TimeView {
    /// The time view `pick` asks for on `entries` (the dump, then the
    /// base), checked: one dump, from a process whose dumps carry what it
    /// needs.
    pub fn of(
        state: &AppState,
        pick: &Pick,
        entries: &[Arc<Entry>],
    ) -> Result<Option<TimeView>, Failure> {
        let bad = |why: &str| Err((StatusCode::BAD_REQUEST, why.to_string()));
        let refused = |why: String| Err((StatusCode::UNPROCESSABLE_ENTITY, why));
        let view = match (pick.born_since.as_deref(), pick.view.as_deref()) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => return bad("one time view at a time"),
            (None, Some("temporary")) => TimeView::Temporary,
            (None, Some(_)) => return bad("unknown view: ?view=temporary"),
            (Some(since), None) => TimeView::BornSince(listed(state, since)?),
        };
        if entries.len() > 1 {
            return bad("a time view is of one dump, without a base");
        }
        let dump = &entries[0];
        let Ok(summary) = &dump.summary else {
            return refused(format!("{} is not a readable dump", dump.id));
        };
        match &view {
            TimeView::Temporary if !summary.lifetimes => refused(format!(
                "{}: temporary allocations are not available: the dump carries no lifetimes",
                dump.id
            )),
            TimeView::BornSince(since) => check_range(dump, summary, since).map(|()| Some(view)),
            _ => Ok(Some(view)),
        }
    }

    /// The settings of this view over `settings`.
    pub fn settings(&self, settings: &mut Settings) {
        match self {
            TimeView::BornSince(since) => {
                let since_ns = since.summary.as_ref().map_or(0, |s| s.since_start_ns);
                settings.build.born = BirthRange {
                    after: Some(TimePoint::SinceStart(since_ns)),
                    before: None,
                };
            }
            TimeView::Temporary => settings.metric = Metric::TempSpace,
        }
    }

    /// What the page's title adds after the dump's name.
    pub fn title(&self) -> String {
        match self {
            TimeView::BornSince(since) => {
                format!(": allocated since {} and still live", since.id)
            }
            TimeView::Temporary => format!(
                ": temporary allocations (freed within {} ms)",
                DEFAULT_TEMPORARY_NS / 1_000_000
            ),
        }
    }

    /// What tells this view apart in the cache's keys (with the entries
    /// of [`TimeView::entries`]).
    pub fn key(view: &Option<TimeView>) -> &'static str {
        match view {
            None => "",
            Some(TimeView::BornSince(_)) => " born-since",
            Some(TimeView::Temporary) => " temporary",
        }
    }

    /// The dumps a view reads besides its own: the start of a range.
    pub fn entries(view: &Option<TimeView>) -> Option<Arc<Entry>> {
        match view {
            Some(TimeView::BornSince(since)) => Some(since.clone()),
            _ => None,
        }
    }
}

/// `since` and `dump` are of one process whose dumps carry births, and
/// `since` is not later than `dump`.
fn check_range(dump: &Entry, summary: &Summary, since: &Entry) -> Result<(), Failure> {
    let refused = |why: String| Err((StatusCode::UNPROCESSABLE_ENTITY, why));
    let Ok(start) = &since.summary else {
        return refused(format!("{} is not a readable dump", since.id));
    };
    if !summary.births {
        return refused(format!(
            "{}: what a range allocated is not available: the dump carries no births",
            dump.id
        ));
    }
    if start.pid != summary.pid
        || start.start_unix_ns == 0
        || start.start_unix_ns != summary.start_unix_ns
    {
        return refused(format!(
            "{} and {} are not dumps of one process",
            since.id, dump.id
        ));
    }
    if start.since_start_ns > summary.since_start_ns {
        return refused(format!("{} was written after {}", since.id, dump.id));
    }
    Ok(())
}
