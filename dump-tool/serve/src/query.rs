//! The query of a request, checked before any work: its length, then its
//! parameters.

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{StatusCode, Uri};
use serde::Deserialize;

/// Longest query string accepted (longer: 414 URI Too Long).
pub const MAX_QUERY_LEN: usize = 2048;

/// `?dump=ID[&base=ID][&allow_mismatch=1]`, or a time view of one dump:
/// `&born_since=ID` (its live memory allocated since that dump of its
/// process) or `&view=temporary` (its temporary allocations); and
/// `&group=program-frame`: grouped by program frame (`--group`).
#[derive(Deserialize)]
pub struct Pick {
    pub dump: Option<String>,
    pub base: Option<String>,
    /// `1`: compare dumps of different programs anyway.
    pub allow_mismatch: Option<String>,
    pub born_since: Option<String>,
    pub view: Option<String>,
    pub group: Option<String>,
}

/// The ids of a query, or the status and reason of its refusal.
pub fn checked_query(
    uri: &Uri,
    query: Result<Query<Pick>, QueryRejection>,
) -> Result<Pick, (StatusCode, &'static str)> {
    checked(uri, query, "bad query")
}

/// The parameters `T` of a query, or the status and reason of its
/// refusal (`bad` says what a query should be).
pub fn checked<T>(
    uri: &Uri,
    query: Result<Query<T>, QueryRejection>,
    bad: &'static str,
) -> Result<T, (StatusCode, &'static str)> {
    if uri.query().is_some_and(|q| q.len() > MAX_QUERY_LEN) {
        return Err((StatusCode::URI_TOO_LONG, "query too long"));
    }
    query
        .map(|Query(value)| value)
        .map_err(|_| (StatusCode::BAD_REQUEST, bad))
}
