//! The lifetimes of one dump's freed memory, where the dump carries them
//! (format 4): `/api/lifetimes?dump=ID`, the report of `heapdiff lifetimes
//! --format json` (per allocating function, freed objects and bytes per
//! lifetime bucket and the temporary ones, each with its 95 % interval),
//! and `/lifetimes?dump=ID`, the page that draws it (`assets/lifetimes.js`).
//! Built by the pipeline in the shared symbol table, kept like the views
//! (`built_cache`); a dump without lifetimes is refused with one line.

use crate::AppState;
use crate::query::{Pick, checked_query};
use crate::responses::refuse;
use crate::work::{Failure, cache_key, json_kept_or_built, listed, read_entry};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use heapdiff::pipeline::Loaded;
use heapdiff::pipeline::time::{lifetimes as lifetime_rows, require};
use heapdiff::render::time_json;
use std::sync::Arc;

/// `/api/lifetimes?dump=ID`.
pub async fn lifetimes(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    query: Result<Query<Pick>, QueryRejection>,
) -> Response {
    let id = match checked_query(&uri, query) {
        Ok(Pick {
            dump: Some(id),
            base: None,
            ..
        }) => id,
        Ok(_) => return refuse(StatusCode::BAD_REQUEST, "name one dump: ?dump=ID"),
        Err((status, why)) => return refuse(status, why),
    };
    let entry = match listed(&state, &id) {
        Ok(entry) => entry,
        Err((status, why)) => return refuse(status, &why),
    };
    let entries = vec![entry];
    let key = cache_key("lifetimes", &entries);
    let read = entries.clone();
    json_kept_or_built(
        &state,
        key,
        &entries,
        "the lifetimes failed",
        move |state, presence| {
            let input = read_entry(state, &read[0])?;
            if presence.left() {
                return Err((StatusCode::REQUEST_TIMEOUT, "the client left".to_string()));
            }
            report(state, Loaded::one(id.clone(), input), &id)
        },
    )
    .await
}

fn report(state: &AppState, new: Loaded, id: &str) -> Result<String, Failure> {
    let refused = |e: heapdiff::error::Error| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string());
    state
        .symbols
        .with_session(new, None, &state.settings, |session| {
            let view = session.view();
            require(&view, false, true, "the lifetimes view").map_err(refused)?;
            Ok(time_json::lifetimes(id, &lifetime_rows(&view)))
        })
        .map_err(refused)?
}
