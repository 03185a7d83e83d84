//! The routes, the check of `Host` before them, and the headers every
//! response carries.

use crate::AppState;
use crate::host::{AllowedHosts, check_host};
use crate::listing::list;
use crate::responses::{asset, refuse};
use crate::views::{pprof, view};
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use heapdiff::render::html;
use std::sync::Arc;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const INDEX_JS: &str = include_str!("../assets/index.js");

/// Every route of the server over `state`, answering only requests to
/// the `allowed` hosts.
pub fn router(state: Arc<AppState>, allowed: Arc<AllowedHosts>) -> Router {
    Router::new()
        .route("/", get(index))
        .route(
            "/index.js",
            get(|| async { asset(INDEX_JS, "text/javascript") }),
        )
        .route(
            "/style.css",
            get(|| async { asset(html::VIEWER_CSS, "text/css") }),
        )
        .route("/api/dumps", get(list))
        .route("/view", get(view))
        .route("/pprof/{*id}", get(pprof))
        .fallback(|| async { refuse(StatusCode::NOT_FOUND, "no such page") })
        .layer(axum::middleware::from_fn_with_state(allowed, check_host))
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(state)
}

async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src data:",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn index() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}
