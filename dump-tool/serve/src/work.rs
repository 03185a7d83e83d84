//! What the routes that build something share: running the work within
//! the limit on views built at once and turning its failure into a
//! refusal, reading a listed dump from below its root, and the keys under
//! which built responses are kept (`built_cache`) and the check that lets
//! a kept response be sent: its dumps still open below their roots in the
//! versions it was built from (a dump swapped for a link after it was
//! built is refused as when nothing was kept).

use crate::AppState;
use crate::catalog::Entry;
use crate::responses::refuse;
use crate::roots::Refused;
use crate::scan::Version;
use crate::view_limit::{Presence, Unfinished};
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use heapdiff::input::{Input, load_opened};
use std::path::Path;
use std::sync::Arc;

/// A refusal: its status and one line saying why.
pub type Failure = (StatusCode, String);

/// `build` run within the limit on views built at once; its failure, or
/// the work's (`failed` says what failed), as the refusal to send.
pub async fn built<T: Send + 'static>(
    state: &Arc<AppState>,
    failed: &'static str,
    build: impl FnOnce(&AppState, &Presence) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Response> {
    let task_state = state.clone();
    match state
        .views
        .run(move |presence| build(&task_state, presence))
        .await
    {
        Ok(Ok(built)) => Ok(built),
        Ok(Err((status, why))) => Err(refuse(status, &why)),
        Err(Unfinished::Closed) => Err(refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down")),
        Err(Unfinished::Failed) => Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, failed)),
    }
}

/// The JSON kept under `key` for `entries`, or else `build`'s, built as
/// [`built`] builds and kept for the next request.
pub async fn json_kept_or_built(
    state: &Arc<AppState>,
    key: String,
    entries: &[Arc<Entry>],
    failed: &'static str,
    build: impl FnOnce(&AppState, &Presence) -> Result<String, Failure> + Send + 'static,
) -> Response {
    let json = |body: Bytes| ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    match kept(state, &key, entries) {
        Ok(Some(body)) => return json(body),
        Ok(None) => {}
        Err((status, why)) => return refuse(status, &why),
    }
    match built(state, failed, build).await {
        Ok(body) => {
            let body = Bytes::from(body);
            state.pages.put(key, body.clone());
            json(body)
        }
        Err(refusal) => refusal,
    }
}

/// The entry the last scan listed under `id`.
pub fn listed(state: &AppState, id: &str) -> Result<Arc<Entry>, Failure> {
    state
        .catalog
        .snapshot()
        .get(id)
        .cloned()
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no dump {id:?} here")))
}

/// The dump of `entry`, read from below its root.
pub fn read_entry(state: &AppState, entry: &Entry) -> Result<Input, Failure> {
    let file = open_entry(state, entry)?;
    load_opened(file, Path::new(&entry.id))
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
}

/// The file of `entry`, opened below its root.
fn open_entry(state: &AppState, entry: &Entry) -> Result<std::fs::File, Failure> {
    state.catalog.open(entry).map_err(|refused| {
        let status = match refused {
            Refused::Missing => StatusCode::NOT_FOUND,
            Refused::Outside => StatusCode::FORBIDDEN,
            Refused::Failed(_) => StatusCode::UNPROCESSABLE_ENTITY,
        };
        (status, format!("{}: {refused}", entry.id))
    })
}

/// The response kept under `key` for `entries`, if every one of them
/// still opens below its root in its listed version; a dump that no
/// longer opens there is refused as a build would refuse it, one rewritten
/// since is built anew (`None`).
pub fn kept(state: &AppState, key: &str, entries: &[Arc<Entry>]) -> Result<Option<Bytes>, Failure> {
    let Some(value) = state.pages.get(key) else {
        return Ok(None);
    };
    for entry in entries {
        let file = open_entry(state, entry)?;
        if Version::of_file(&file) != Some(entry.version()) {
            return Ok(None);
        }
    }
    Ok(Some(value))
}

/// The key of something built from `entries` (in this order, each in its
/// listed version) as `what` says.
pub fn cache_key(what: &str, entries: &[Arc<Entry>]) -> String {
    let mut key = what.to_string();
    for entry in entries {
        key.push_str(&format!("\u{0}{}\u{0}{:?}", entry.id, entry.version()));
    }
    key
}
