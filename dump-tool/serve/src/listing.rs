//! The dump list (`/api/dumps`): processes with their dumps, and the files
//! that are not readable dumps, from a scan that started after the request
//! arrived (`Catalog::refresh`), built once per scan.

use crate::AppState;
use crate::catalog::{Snapshot, Summary};
use crate::responses::refuse;
use axum::extract::State;
use axum::http::{StatusCode, header};
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
    pid: u32,
    executable: &'a str,
    command_line: &'a str,
    first_time_unix_ns: u64,
    dumps: Vec<DumpRow<'a>>,
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

pub async fn list(State(state): State<Arc<AppState>>) -> Response {
    let snapshot = state.catalog.refresh().await;
    let body = tokio::task::spawn_blocking(move || snapshot.listing(listing_json)).await;
    match body {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "listing failed"),
    }
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
                pid,
                executable,
                command_line,
                first_time_unix_ns: dumps.first().map_or(0, |d| d.summary.time_unix_ns),
                dumps,
            }
        })
        .collect();
    processes.sort_by_key(|p| std::cmp::Reverse(p.first_time_unix_ns));
    serde_json::to_string(&Listing { processes, errors }).unwrap_or_else(|_| "{}".into())
}
