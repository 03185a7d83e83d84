//! The viewer page (`/view?dump=ID[&base=ID]`) and the pprof profile
//! (`/pprof/ID[?base=ID]`) of one dump or a pair: opened through the
//! catalog (below their roots, never out of them), built by the one
//! pipeline in the shared symbol table, a few at a time (`view_limit`);
//! the work stops before symbolizing when its client left. Errors name
//! dumps by their ids, never by a path on the server.

use crate::AppState;
use crate::query::{Pick, checked_query};
use crate::responses::refuse;
use crate::roots::Refused;
use crate::urls::{url_component, url_path};
use crate::view_limit::{Presence, Unfinished};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use heapdiff::input::load_opened;
use heapdiff::pipeline::{Loaded, Session};
use heapdiff::render;
use heapdiff::render::html::{self, Link};
use heapdiff::render::pprof::PprofOptions;
use std::path::Path;
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
    let page = built(&state, "the view failed", move |state, presence| {
        render_view(state, presence, &id, base.as_deref())
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
    let bytes = built(&state, "the profile failed", move |state, presence| {
        render_pprof(state, presence, &id, base.as_deref())
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

type Failure = (StatusCode, String);

/// The dump the catalog knows under `id`, read from below its root.
fn load_entry(state: &AppState, id: &str) -> Result<Loaded, Failure> {
    let entry = state
        .catalog
        .snapshot()
        .get(id)
        .cloned()
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no dump {id:?} here")))?;
    let file = state.catalog.open(&entry).map_err(|refused| {
        let status = match refused {
            Refused::Missing => StatusCode::NOT_FOUND,
            Refused::Outside => StatusCode::FORBIDDEN,
            Refused::Failed(_) => StatusCode::UNPROCESSABLE_ENTITY,
        };
        (status, format!("{id}: {refused}"))
    })?;
    let input = load_opened(file, Path::new(id))
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    Ok(Loaded::one(id.to_string(), input))
}

/// Run `f` on the session of dump `id` (compared with `base`), built in the
/// shared symbol table, unless the client left before the dumps were read.
fn with_session<T>(
    state: &AppState,
    presence: &Presence,
    id: &str,
    base: Option<&str>,
    f: impl FnOnce(&Session) -> T,
) -> Result<T, Failure> {
    let new = load_entry(state, id)?;
    let base = base.map(|base| load_entry(state, base)).transpose()?;
    if presence.left() {
        return Err((StatusCode::REQUEST_TIMEOUT, "the client left".to_string()));
    }
    state
        .symbols
        .with_session(new, base, &state.settings, f)
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
}

fn render_view(
    state: &AppState,
    presence: &Presence,
    id: &str,
    base_id: Option<&str>,
) -> Result<String, Failure> {
    with_session(state, presence, id, base_id, |session| {
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

fn render_pprof(
    state: &AppState,
    presence: &Presence,
    id: &str,
    base_id: Option<&str>,
) -> Result<Vec<u8>, Failure> {
    with_session(state, presence, id, base_id, |session| {
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
