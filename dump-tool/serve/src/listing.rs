//! The dump list (`/api/dumps`): processes with their dumps, and the files
//! that are not readable dumps, from a scan that started after the request
//! arrived (`Catalog::refresh`), built once per scan (and kept while a
//! scan finds the same files), with an entity tag: a poller that sends it
//! back in `If-None-Match` is answered 304 without the body.

use crate::AppState;
use crate::catalog::{Entry, Snapshot, Summary};
use crate::responses::refuse;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The dump list as JSON: processes with their dumps, and unreadable files.
#[derive(Serialize)]
struct Listing<'a> {
    processes: Vec<Process<'a>>,
    errors: Vec<ErrorRow<'a>>,
}

#[derive(Serialize)]
struct Process<'a> {
    /// Names the process in `/api/growth?process=KEY`: its first dump.
    key: &'a str,
    pid: u32,
    executable: &'a str,
    command_line: &'a str,
    first_time_unix_ns: u64,
    /// The dump with the largest live heap: by the exact counter where
    /// every dump has one, else by the estimate.
    peak: Option<&'a str>,
    /// The exact peak of the live heap, where the dumps counted it.
    exact_peak: Option<ExactPeak<'a>>,
    dumps: Vec<DumpRow<'a>>,
}

/// The highest exact peak the dumps of a process know (the latest knows
/// the highest) and the dump nearest to it in time.
#[derive(Serialize)]
struct ExactPeak<'a> {
    /// Usable bytes.
    bytes: u64,
    /// When, on the wall clock (the process's start plus the peak's
    /// moment since it).
    at_unix_ns: u64,
    /// The heap was within this many bytes of the peak at that moment.
    margin_bytes: u64,
    nearest: &'a str,
}

#[derive(Serialize)]
struct DumpRow<'a> {
    id: &'a str,
    #[serde(flatten)]
    summary: &'a Summary,
}

#[derive(Serialize)]
struct ErrorRow<'a> {
    id: &'a str,
    error: &'a str,
}

/// The list, or 304 with no body when `If-None-Match` names its version
/// (the front page polls with it).
pub async fn list(State(state): State<Arc<AppState>>, request: HeaderMap) -> Response {
    let snapshot = state.catalog.refresh().await;
    let listed = tokio::task::spawn_blocking(move || snapshot.listing(listing_json)).await;
    let Ok(listed) = listed else {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, "listing failed");
    };
    let held = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == listed.etag || tag.trim() == "*");
    if held {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, listed.etag)]).into_response();
    }
    (
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (header::ETAG, listed.etag),
        ],
        listed.body,
    )
        .into_response()
}

/// The id of the dump with the largest live heap (the first of equals).
fn peak<'a>(dumps: &[DumpRow<'a>]) -> Option<&'a str> {
    let exact = dumps.iter().all(|d| d.summary.live_exact.is_some());
    let live = |d: &DumpRow<'_>| match d.summary.live_exact {
        Some(bytes) if exact => bytes as f64,
        _ => d.summary.live_estimate,
    };
    let mut best: Option<&DumpRow<'a>> = None;
    for dump in dumps {
        if best.is_none_or(|b| live(dump) > live(b)) {
            best = Some(dump);
        }
    }
    best.map(|d| d.id)
}

/// The exact peak of `dumps` (one process, one clock): the highest any
/// dump counted, and the dump written nearest to its moment.
fn exact_peak<'a>(dumps: &[DumpRow<'a>]) -> Option<ExactPeak<'a>> {
    let owner = dumps
        .iter()
        .filter(|d| d.summary.exact_peak.is_some() && d.summary.start_unix_ns != 0)
        .max_by_key(|d| d.summary.exact_peak)?;
    let (start, at) = (owner.summary.start_unix_ns, owner.summary.exact_peak_at_ns);
    let nearest = dumps
        .iter()
        .filter(|d| d.summary.start_unix_ns == start)
        .min_by_key(|d| d.summary.since_start_ns.abs_diff(at))?;
    Some(ExactPeak {
        bytes: owner.summary.exact_peak?,
        at_unix_ns: start.saturating_add(at),
        margin_bytes: owner.summary.exact_peak_margin,
        nearest: nearest.id,
    })
}

/// The dumps of the process that wrote dump `id`, in time order, with
/// their entries, from the last scan (empty if `id` is not a listed dump).
pub fn process_of(snapshot: &Snapshot, id: &str) -> Vec<(String, Arc<Entry>)> {
    let Some(Ok(this)) = snapshot.get(id).map(|e| &e.summary) else {
        return Vec::new();
    };
    let mut dumps: Vec<(String, Arc<Entry>)> = snapshot
        .entries()
        .iter()
        .filter(|entry| matches!(&entry.summary, Ok(s) if same_process(s, this)))
        .map(|entry| (entry.id.clone(), entry.clone()))
        .collect();
    dumps.sort_by_key(|(_, e)| e.summary.as_ref().map(|s| (s.time_unix_ns, s.seq)).ok());
    dumps
}

/// The list groups dumps by pid, executable and command line.
fn same_process(a: &Summary, b: &Summary) -> bool {
    a.pid == b.pid && a.executable == b.executable && a.command_line == b.command_line
}

fn listing_json(snapshot: &Snapshot) -> String {
    let mut processes: BTreeMap<(u32, &str, &str), Vec<DumpRow<'_>>> = BTreeMap::new();
    let mut errors = Vec::new();
    for entry in snapshot.entries() {
        match &entry.summary {
            Ok(summary) => processes
                .entry((
                    summary.pid,
                    summary.executable.as_str(),
                    summary.command_line.as_str(),
                ))
                .or_default()
                .push(DumpRow {
                    id: &entry.id,
                    summary,
                }),
            Err(error) => errors.push(ErrorRow {
                id: &entry.id,
                error,
            }),
        }
    }
    let mut processes: Vec<Process<'_>> = processes
        .into_iter()
        .map(|((pid, executable, command_line), mut dumps)| {
            dumps.sort_by_key(|d| (d.summary.time_unix_ns, d.summary.seq));
            Process {
                key: dumps.first().map_or("", |d| d.id),
                pid,
                executable,
                command_line,
                first_time_unix_ns: dumps.first().map_or(0, |d| d.summary.time_unix_ns),
                peak: peak(&dumps),
                exact_peak: exact_peak(&dumps),
                dumps,
            }
        })
        .collect();
    processes.sort_by_key(|p| std::cmp::Reverse(p.first_time_unix_ns));
    serde_json::to_string(&Listing { processes, errors }).unwrap_or_else(|_| "{}".into())
}
