//! pprof profiles: of one dump or a pair (`/pprof/ID[?base=ID]`), and of
//! the latest dump of a process at stable URLs in the shapes continuous
//! profilers scrape (`/debug/pprof/heap` and `/debug/pprof/allocs`, the
//! process picked by `?pid=N` or `?exe=NAME`; Parca and Grafana Alloy pull
//! these). `go tool pprof URL` works on all of them without flags: where
//! a frame is left unsymbolized, pprof asks the server's symbol service
//! (`symbols`), which answers with the names heapdiff gave.
//!
//! Built through the one pipeline like the views, kept for the next
//! request (`built_cache`).

use crate::AppState;
use crate::catalog::{Entry, Snapshot};
use crate::listing::process_of;
use crate::query::{Pick, checked, checked_query};
use crate::responses::refuse;
use crate::view_limit::Presence;
use crate::work::{Failure, built, cache_key, kept, listed, read_entry};
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use heapdiff::model::Metric;
use heapdiff::pipeline::Loaded;
use heapdiff::render;
use heapdiff::render::pprof::PprofOptions;
use serde::Deserialize;
use std::sync::Arc;

/// `/pprof/ID[?base=ID]`: the gzipped profile.
pub async fn pprof(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    uri: Uri,
    query: Result<Query<Pick>, QueryRejection>,
) -> Response {
    let pick = match checked_query(&uri, query) {
        Ok(pick) => pick,
        Err((status, why)) => return refuse(status, why),
    };
    let entries: Result<Vec<_>, _> = std::iter::once(id.as_str())
        .chain(pick.base.as_deref())
        .map(|id| listed(&state, id))
        .collect();
    let allow_mismatch = pick.allow_mismatch.as_deref() == Some("1");
    match entries {
        Ok(entries) => {
            profile_response(&state, entries, state.settings.metric, allow_mismatch).await
        }
        Err((status, why)) => refuse(status, &why),
    }
}

/// `?pid=N` or `?exe=NAME` (the executable's path or file name); other
/// parameters scrapers send (`seconds`, `gc`, `debug`) are ignored.
#[derive(Deserialize)]
pub struct Process {
    pid: Option<u32>,
    exe: Option<String>,
}

/// `/debug/pprof/heap`: the latest dump of a process, in-use space first.
pub async fn latest_heap(
    state: State<Arc<AppState>>,
    uri: Uri,
    query: Result<Query<Process>, QueryRejection>,
) -> Response {
    latest(state, uri, query, Metric::InuseSpace).await
}

/// `/debug/pprof/allocs`: the same profile, allocated space first.
pub async fn latest_allocs(
    state: State<Arc<AppState>>,
    uri: Uri,
    query: Result<Query<Process>, QueryRejection>,
) -> Response {
    latest(state, uri, query, Metric::AllocSpace).await
}

async fn latest(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    query: Result<Query<Process>, QueryRejection>,
    metric: Metric,
) -> Response {
    let process = match checked(&uri, query, "bad query: ?pid=N or ?exe=NAME") {
        Ok(process) => process,
        Err((status, why)) => return refuse(status, why),
    };
    let snapshot = state.catalog.refresh().await;
    match latest_entry(&snapshot, &process) {
        Ok(entry) => profile_response(&state, vec![entry], metric, false).await,
        Err((status, why)) => refuse(status, &why),
    }
}

/// The newest dump of the process `wanted` names (the newest such process
/// when several match: a restarted service), or why there is none.
fn latest_entry(snapshot: &Snapshot, wanted: &Process) -> Result<Arc<Entry>, Failure> {
    let matches = |entry: &Entry| {
        let Ok(summary) = &entry.summary else {
            return false;
        };
        wanted.pid.is_none_or(|pid| pid == summary.pid)
            && wanted.exe.as_deref().is_none_or(|exe| {
                summary.executable == exe || summary.executable.rsplit('/').next() == Some(exe)
            })
    };
    let time = |entry: &Entry| entry.summary.as_ref().map(|s| (s.time_unix_ns, s.seq)).ok();
    let newest = snapshot
        .entries()
        .iter()
        .filter(|e| matches(e))
        .max_by_key(|e| time(e))
        .cloned()
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                "no dump of such a process here".to_string(),
            )
        })?;
    if wanted.pid.is_none() && wanted.exe.is_none() {
        let processes = snapshot
            .entries()
            .iter()
            .filter_map(|e| e.summary.as_ref().ok().map(|s| (s.pid, &s.executable)))
            .collect::<std::collections::BTreeSet<_>>();
        if processes.len() > 1 {
            let names: Vec<String> = processes
                .iter()
                .take(20)
                .map(|(pid, exe)| format!("pid={pid} ({exe})"))
                .collect();
            return Err((
                StatusCode::BAD_REQUEST,
                format!(
                    "name a process with ?pid=N or ?exe=NAME: {}",
                    names.join(", ")
                ),
            ));
        }
    }
    // The newest dump of the newest matching process.
    Ok(process_of(snapshot, &newest.id)
        .pop()
        .map_or(newest, |(_, entry)| entry))
}

/// The profile of `entries` (a dump, then its base) measuring `metric`
/// first, built or kept (while the symbol service still knows its names).
async fn profile_response(
    state: &Arc<AppState>,
    entries: Vec<Arc<Entry>>,
    metric: Metric,
    allow_mismatch: bool,
) -> Response {
    let key = cache_key(
        &format!("pprof {} {allow_mismatch}", metric.name()),
        &entries,
    );
    let dump_id = entries[0].id.clone();
    let cached = match kept(state, &key, &entries) {
        Ok(value) => value.filter(|_| state.symbolz.touch(&key)),
        Err((status, why)) => return refuse(status, &why),
    };
    let bytes = match cached {
        Some(bytes) => Ok(bytes),
        None => {
            let task_key = key.clone();
            built(state, "the profile failed", move |state, presence| {
                render_pprof(state, presence, &entries, metric, allow_mismatch, &task_key)
            })
            .await
            .map(|bytes| {
                let bytes = Bytes::from(bytes);
                state.pages.put(key, bytes.clone());
                bytes
            })
        }
    };
    match bytes {
        Ok(bytes) => {
            let mut response = (
                [
                    (header::CONTENT_TYPE, "application/octet-stream"),
                    (
                        header::CONTENT_DISPOSITION,
                        "attachment; filename=\"profile.pb.gz\"",
                    ),
                ],
                bytes,
            )
                .into_response();
            if let Ok(value) = HeaderValue::from_str(&crate::urls::url_path(&dump_id)) {
                response.headers_mut().insert("x-heapdiff-dump", value);
            }
            response
        }
        Err(refusal) => refusal,
    }
}

fn render_pprof(
    state: &AppState,
    presence: &Presence,
    entries: &[Arc<Entry>],
    metric: Metric,
    allow_mismatch: bool,
    key: &str,
) -> Result<Vec<u8>, Failure> {
    let id = entries[0].id.clone();
    let new = Loaded::one(id.clone(), read_entry(state, &entries[0])?);
    let base = match entries.get(1) {
        Some(entry) => Some(Loaded::one(entry.id.clone(), read_entry(state, entry)?)),
        None => None,
    };
    if presence.left() {
        return Err((StatusCode::REQUEST_TIMEOUT, "the client left".to_string()));
    }
    let mut settings = state.settings.clone();
    settings.metric = metric;
    settings.allow_mismatch = allow_mismatch;
    let base_id = entries.get(1).map(|e| e.id.clone());
    state
        .symbols
        .with_session(new, base, &settings, |session| {
            let view = session.view();
            state.symbolz.remember(key, &view);
            let first = view.new.first_dump();
            let mut comments = vec![format!("heapdiff serve: {id}")];
            if let Some(base) = &base_id {
                comments.push(format!("minus base {base} (negated samples)"));
            }
            comments.extend(first.attach_note());
            let options = PprofOptions {
                executable: first.executable.clone(),
                time_unix_ns: first.time_unix_ns,
                comments,
            };
            render::pprof::render(&view, &options)
                .map_err(|why| (StatusCode::INTERNAL_SERVER_ERROR, why))
        })
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?
}
