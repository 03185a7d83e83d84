//! The viewer page (`/view?dump=ID[&base=ID]`) and the pprof profile
//! (`/pprof/ID[?base=ID]`) of one dump or a pair: read through the
//! catalog, built by the one pipeline in the shared symbol table, a few at
//! a time (`view_limit`).

use crate::AppState;
use crate::query::{Pick, checked_query};
use crate::responses::refuse;
use crate::urls::{url_component, url_path};
use crate::view_limit::Unfinished;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use heapdiff::input::load;
use heapdiff::pipeline::{Loaded, Session};
use heapdiff::render;
use heapdiff::render::html::{self, Link};
use heapdiff::render::pprof::PprofOptions;
use std::sync::Arc;

/// `/view?dump=ID[&base=ID]`: the viewer page.
pub async fn view(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    query: Result<Query<Pick>, QueryRejection>,
) -> Response {
    let (id, base) = match checked_query(&uri, query) {
        Ok(Pick {
            dump: Some(id),
            base,
        }) => (id, base),
        Ok(_) => return refuse(StatusCode::BAD_REQUEST, "name a dump: ?dump=ID"),
        Err((status, why)) => return refuse(status, why),
    };
    let page = built(&state, "the view failed", move |state| {
        render_view(state, &id, base.as_deref())
    })
    .await;
    page.map(|page| ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response())
        .unwrap_or_else(|refusal| refusal)
}

/// `/pprof/ID[?base=ID]`: the gzipped profile.
pub async fn pprof(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    uri: Uri,
    query: Result<Query<Pick>, QueryRejection>,
) -> Response {
    let base = match checked_query(&uri, query) {
        Ok(pick) => pick.base,
        Err((status, why)) => return refuse(status, why),
    };
    let bytes = built(&state, "the profile failed", move |state| {
        render_pprof(state, &id, base.as_deref())
    })
    .await;
    let attachment = [
        (header::CONTENT_TYPE, "application/octet-stream"),
        (
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"profile.pb.gz\"",
        ),
    ];
    bytes
        .map(|bytes| (attachment, bytes).into_response())
        .unwrap_or_else(|refusal| refusal)
}

/// `build` run within the limit on views built at once; its failure, or
/// the work's (`failed` says what failed), as the refusal to send.
async fn built<T: Send + 'static>(
    state: &Arc<AppState>,
    failed: &'static str,
    build: impl FnOnce(&AppState) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Response> {
    let task_state = state.clone();
    match state.views.run(move || build(&task_state)).await {
        Ok(Ok(built)) => Ok(built),
        Ok(Err((status, why))) => Err(refuse(status, &why)),
        Err(Unfinished::Closed) => Err(refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down")),
        Err(Unfinished::Failed) => Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, failed)),
    }
}

type Failure = (StatusCode, String);

/// The dump the catalog knows under `id`, read.
fn load_entry(state: &AppState, id: &str) -> Result<Loaded, Failure> {
    let path = {
        let catalog = state.catalog.lock().unwrap_or_else(|e| e.into_inner());
        catalog
            .get(id)
            .map(|entry| entry.path.clone())
            .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no dump {id:?} here")))?
    };
    let input =
        load(&path).map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, format!("{id}: {e}")))?;
    Ok(Loaded::one(id.to_string(), input))
}

/// Run `f` on the session of dump `id` (compared with `base`), built in the
/// shared symbol table.
fn with_session<T>(
    state: &AppState,
    id: &str,
    base: Option<&str>,
    f: impl FnOnce(&Session) -> T,
) -> Result<T, Failure> {
    let new = load_entry(state, id)?;
    let base = base.map(|base| load_entry(state, base)).transpose()?;
    state
        .symbols
        .with_session(new, base, &state.settings, f)
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
}

fn render_view(state: &AppState, id: &str, base_id: Option<&str>) -> Result<String, Failure> {
    with_session(state, id, base_id, |session| {
        let mut model = html::model(&session.view());
        model.links = view_links(id, base_id);
        html::page(&model)
    })
}

fn view_links(id: &str, base: Option<&str>) -> Vec<Link> {
    let mut pprof = format!("/pprof/{}", url_path(id));
    if let Some(base) = base {
        pprof.push_str(&format!("?base={}", url_component(base)));
    }
    vec![
        Link {
            label: "all dumps".into(),
            href: "/".into(),
        },
        Link {
            label: "download pprof".into(),
            href: pprof,
        },
    ]
}

fn render_pprof(state: &AppState, id: &str, base_id: Option<&str>) -> Result<Vec<u8>, Failure> {
    with_session(state, id, base_id, |session| {
        let view = session.view();
        let new = view.new.first_dump();
        let mut comments = vec![format!("heapdiff serve: {id}")];
        if let Some(base) = base_id {
            comments.push(format!("minus base {base} (negated samples)"));
        }
        comments.extend(new.attach_note());
        let options = PprofOptions {
            executable: new.executable.clone(),
            time_unix_ns: new.time_unix_ns,
            comments,
        };
        render::pprof::render(&view, &options)
            .map_err(|why| (StatusCode::INTERNAL_SERVER_ERROR, why))
    })?
}
