//! `heapdiff serve [DIR|DUMP...]`: a local web server that lists the dumps
//! under the given paths (grouped by process, with a timeline each), shows
//! any dump or pair of dumps in the flamegraph viewer, and serves each as a
//! pprof profile at a stable URL.
//!
//! Owns the HTTP surface: GET (and HEAD) only, every other method refused;
//! the only files it reads are the catalog's dumps (`catalog` maps ids to
//! files) and the symbol files of their modules. Symbolization is shared by
//! all requests: one location table whose addresses are symbolized once;
//! at most two views are built at a time. It never writes a file.

mod catalog;

use crate::input::load;
use crate::model::BuildOptions;
use crate::pipeline::{Loaded, Session, Settings};
use crate::render;
use crate::render::html::{self, Link};
use crate::render::pprof::PprofOptions;
use crate::symbols::{LocationTable, SymbolizeOptions};
use crate::{Error, Result};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use catalog::Catalog;
use clap::Parser;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

const INDEX_HTML: &str = include_str!("../../assets/index.html");
const INDEX_JS: &str = include_str!("../../assets/index.js");

/// The shared symbol table is dropped and rebuilt past this many addresses,
/// so a long-running server's memory stays bounded.
const MAX_CACHED_LOCATIONS: usize = 2_000_000;
/// Views built at the same time (each holds its dumps in memory).
const CONCURRENT_VIEWS: usize = 2;
/// Longest query string accepted.
const MAX_QUERY_LEN: usize = 2048;

/// Browse dumps in a browser: list, timelines, flamegraphs, diffs, pprof.
#[derive(Parser, Debug)]
#[command(name = "heapdiff serve")]
pub struct ServeArgs {
    /// Directories to watch for dumps (and single dump files). Default: `.`.
    pub paths: Vec<PathBuf>,
    /// TCP port; 0 picks a free one.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Address to listen on. Anything but loopback exposes the dumps.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Also look for modules and debug files here. Repeatable.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
    /// Keep the allocator's own frames at the leaf of each stack.
    #[arg(long)]
    pub keep_allocator_frames: bool,
}

struct AppState {
    catalog: Mutex<Catalog>,
    symbols: Mutex<LocationTable>,
    settings: Settings,
    views: Semaphore,
}

/// Run the server until it is killed.
pub fn run(args: ServeArgs) -> Result<()> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let mut catalog = Catalog::new(&paths).map_err(Error::new)?;
    catalog.rescan();
    let count = catalog.entries().len();
    let mut symbolize = SymbolizeOptions::with_debug_dirs(args.debug_dir.clone());
    symbolize.progress = false;
    let settings = Settings {
        symbolize,
        build: BuildOptions {
            keep_allocator_frames: args.keep_allocator_frames,
        },
        // Any two listed dumps can be compared (the page names both).
        allow_mismatch: true,
        ..Settings::default()
    };
    let state = Arc::new(AppState {
        catalog: Mutex::new(catalog),
        symbols: Mutex::new(LocationTable::default()),
        settings,
        views: Semaphore::new(CONCURRENT_VIEWS),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::new(format!("cannot start the server: {e}")))?;
    runtime.block_on(async move {
        let address = SocketAddr::new(args.bind, args.port);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| Error::new(format!("cannot listen on {address}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::new(format!("cannot listen on {address}: {e}")))?;
        println!("heapdiff: serving {count} dumps at http://{local}/");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        axum::serve(listener, router(state))
            .await
            .map_err(|e| Error::new(format!("server stopped: {e}")))
    })
}

fn router(state: Arc<AppState>) -> Router {
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

fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{why}\n"),
    )
        .into_response()
}

async fn index() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}

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
    summary: &'a catalog::Summary,
}

#[derive(Serialize)]
struct ErrorRow<'a> {
    id: &'a str,
    error: &'a str,
}

async fn list(State(state): State<Arc<AppState>>) -> Response {
    let state = state.clone();
    let body = tokio::task::spawn_blocking(move || {
        let mut catalog = state.catalog.lock().unwrap_or_else(|e| e.into_inner());
        catalog.rescan();
        listing_json(&catalog)
    })
    .await;
    match body {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "listing failed"),
    }
}

fn listing_json(catalog: &Catalog) -> String {
    let mut processes: BTreeMap<(u32, &str, &str), Vec<DumpRow<'_>>> = BTreeMap::new();
    let mut errors = Vec::new();
    for entry in catalog.entries() {
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

/// `?dump=ID[&base=ID]`.
#[derive(Deserialize)]
struct Pick {
    dump: Option<String>,
    base: Option<String>,
}

async fn view(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
    query: std::result::Result<Query<Pick>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (id, base) = match checked_query(&uri, query) {
        Ok(Pick {
            dump: Some(id),
            base,
        }) => (id, base),
        Ok(_) => return refuse(StatusCode::BAD_REQUEST, "name a dump: ?dump=ID"),
        Err((status, why)) => return refuse(status, why),
    };
    let Ok(_permit) = state.views.acquire().await else {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    };
    let task_state = state.clone();
    let result =
        tokio::task::spawn_blocking(move || render_view(&task_state, &id, base.as_deref())).await;
    match result {
        Ok(Ok(page)) => {
            ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
        }
        Ok(Err((status, why))) => refuse(status, &why),
        Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "the view failed"),
    }
}

async fn pprof(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    uri: axum::http::Uri,
    query: std::result::Result<Query<Pick>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let base = match checked_query(&uri, query) {
        Ok(pick) => pick.base,
        Err((status, why)) => return refuse(status, why),
    };
    let Ok(_permit) = state.views.acquire().await else {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    };
    let task_state = state.clone();
    let result =
        tokio::task::spawn_blocking(move || render_pprof(&task_state, &id, base.as_deref())).await;
    match result {
        Ok(Ok(bytes)) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"profile.pb.gz\"",
                ),
            ],
            bytes,
        )
            .into_response(),
        Ok(Err((status, why))) => refuse(status, &why),
        Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "the profile failed"),
    }
}

/// The ids of a query, or the status and reason of its refusal.
fn checked_query(
    uri: &axum::http::Uri,
    query: std::result::Result<Query<Pick>, axum::extract::rejection::QueryRejection>,
) -> std::result::Result<Pick, (StatusCode, &'static str)> {
    if uri.query().is_some_and(|q| q.len() > MAX_QUERY_LEN) {
        return Err((StatusCode::URI_TOO_LONG, "query too long"));
    }
    query
        .map(|Query(pick)| pick)
        .map_err(|_| (StatusCode::BAD_REQUEST, "bad query"))
}

type Failure = (StatusCode, String);

/// The dump the catalog knows under `id`, read.
fn load_entry(state: &AppState, id: &str) -> std::result::Result<Loaded, Failure> {
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

/// Run `f` on the session of dump `id` (compared with `base`), symbolized
/// in the shared table (only addresses not seen before are symbolized).
fn with_session<T>(
    state: &AppState,
    id: &str,
    base: Option<&str>,
    f: impl FnOnce(&Session) -> T,
) -> std::result::Result<T, Failure> {
    let new = load_entry(state, id)?;
    let base = base.map(|base| load_entry(state, base)).transpose()?;
    let mut table = state.symbols.lock().unwrap_or_else(|e| e.into_inner());
    if table.locations.len() > MAX_CACHED_LOCATIONS {
        *table = LocationTable::default();
    }
    let session = Session::open(
        std::mem::take(&mut *table),
        new,
        base,
        &state.settings,
        &mut |notice| eprintln!("heapdiff: {notice}"),
    )
    .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    let result = f(&session);
    *table = session.into_table();
    Ok(result)
}

fn render_view(
    state: &AppState,
    id: &str,
    base_id: Option<&str>,
) -> std::result::Result<String, Failure> {
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

fn render_pprof(
    state: &AppState,
    id: &str,
    base_id: Option<&str>,
) -> std::result::Result<Vec<u8>, Failure> {
    with_session(state, id, base_id, |session| {
        let view = session.view();
        let new = view.new.first_dump();
        let mut comments = vec![format!("heapdiff serve: {id}")];
        if let Some(base) = base_id {
            comments.push(format!("minus base {base} (negated samples)"));
        }
        let options = PprofOptions {
            executable: new.executable.clone(),
            time_unix_ns: new.time_unix_ns,
            comments,
        };
        render::pprof::render(&view, &options)
            .map_err(|why| (StatusCode::INTERNAL_SERVER_ERROR, why))
    })?
}

/// Percent-encode everything but unreserved characters and `/`.
fn url_path(text: &str) -> String {
    text.split('/')
        .map(url_component)
        .collect::<Vec<_>>()
        .join("/")
}

/// Percent-encode everything but unreserved characters.
fn url_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
