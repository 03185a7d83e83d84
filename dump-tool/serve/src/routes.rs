//! The routes, the check of `Host` before them, and the headers every
//! response carries.

use crate::AppState;
use crate::growth::growth;
use crate::host::{AllowedHosts, check_host};
use crate::lifetimes::lifetimes;
use crate::listing::list;
use crate::profiles::{latest_allocs, latest_heap, pprof};
use crate::responses::{asset, refuse};
use crate::symbols::{MAX_QUERY_BYTES, symbol_count, symbol_names};
use crate::views::view;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use heapdiff::render::html;
use std::sync::Arc;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const LIFETIMES_HTML: &str = include_str!("../assets/lifetimes.html");
/// The scripts of the dump list and the lifetimes page, each served at
/// `/NAME`: the viewer's number formats and age bars, then the pages' own
/// modules.
const INDEX_SCRIPTS: [(&str, &str); 6] = [
    ("/format.js", html::VIEWER_SCRIPTS[0].1),
    ("/ages.js", html::AGES_JS),
    ("/timeline.js", include_str!("../assets/timeline.js")),
    ("/growth.js", include_str!("../assets/growth.js")),
    ("/index.js", include_str!("../assets/index.js")),
    ("/lifetimes.js", include_str!("../assets/lifetimes.js")),
];

/// Every route of the server over `state`, answering only requests to
/// the `allowed` hosts.
pub fn router(state: Arc<AppState>, allowed: Arc<AllowedHosts>) -> Router {
    let mut router = Router::new();
    for (path, script) in INDEX_SCRIPTS {
        router = router.route(
            path,
            get(move || async move { asset(script, "text/javascript") }),
        );
    }
    let symbol_service = get(symbol_count)
        .post(symbol_names)
        .layer(DefaultBodyLimit::max(MAX_QUERY_BYTES));
    router
        .route("/", get(index))
        .route(
            "/style.css",
            get(|| async { asset(html::VIEWER_CSS, "text/css") }),
        )
        .route("/api/dumps", get(list))
        .route("/api/growth", get(growth))
        .route("/api/lifetimes", get(lifetimes))
        .route(
            "/lifetimes",
            get(|| async { asset(LIFETIMES_HTML, "text/html; charset=utf-8") }),
        )
        .route("/view", get(view))
        .route("/pprof/{*id}", get(pprof))
        .route("/debug/pprof/heap", get(latest_heap))
        .route("/debug/pprof/allocs", get(latest_allocs))
        .route("/symbolz", symbol_service.clone())
        .route("/debug/pprof/symbol", symbol_service)
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
