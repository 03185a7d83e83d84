//! `heapdiff serve [DIR|DUMP...]`: a local web server that lists the dumps
//! under the given paths (grouped by process, with a timeline each and the
//! functions that grow across it: [`growth`]), shows any dump or pair of
//! dumps in the flamegraph viewer ([`views`]), and serves each as a pprof
//! profile at a stable URL, the latest of each process in the shapes
//! continuous profilers scrape, with the symbol service `go tool pprof`
//! asks ([`profiles`], [`symbols`]).
//!
//! Owns the HTTP surface ([`routes`]): GET (and HEAD) only but the symbol
//! service's POST, every other method refused, requests naming another
//! host refused ([`host`]),
//! connections bounded in number, header size and time ([`connections`]).
//! The only files it reads are the catalog's dumps ([`catalog`] maps ids
//! to files, opened below the directories given and never out of them:
//! [`roots`]) and the symbol files of their modules.
//! Every view is built by the library's one pipeline
//! (`heapdiff::pipeline::Session`) in a symbol table shared by all requests
//! ([`symbol_cache`]: an address is symbolized once, the table dropped when
//! it grows too large); at most two views are built at a time
//! ([`view_limit`]); what was built is kept for the next visit within a
//! bound ([`built_cache`]). It never writes a file. The web stack (axum, tokio)
//! lives in this crate only: the `heapdiff` library builds without it.

pub mod built_cache;
pub mod catalog;
pub mod connections;
pub mod growth;
pub mod host;
pub mod lifetimes;
pub mod listing;
pub mod profiles;
pub mod query;
pub mod responses;
pub mod roots;
pub mod routes;
pub mod scan;
pub mod symbol_cache;
pub mod symbols;
pub mod time_views;
pub mod urls;
pub mod view_limit;
pub mod views;
pub mod work;

use built_cache::BuiltCache;

use catalog::Catalog;
use heapdiff::pipeline::Settings;
use heapdiff::{Error, Result};
use host::AllowedHosts;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use symbol_cache::SymbolCache;
use symbols::SymbolMemory;
use view_limit::ViewLimit;

/// The shared symbol table is dropped and rebuilt past this many addresses,
/// so a long-running server's memory stays bounded.
const MAX_CACHED_LOCATIONS: usize = 2_000_000;
/// Views built at the same time (each holds its dumps in memory).
const CONCURRENT_VIEWS: usize = 2;
/// Bytes of built pages, profiles and reports kept for the next visit.
const BUILT_BYTES: usize = 256 << 20;

/// What to serve, where, and how views are built.
#[derive(Clone, Debug)]
pub struct Config {
    /// Directories to watch for dumps (and single dump files); empty: `.`.
    pub paths: Vec<PathBuf>,
    pub bind: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    /// Names answered to besides loopback names and the bound address
    /// (`*`: any), see [`host`].
    pub allow_hosts: Vec<String>,
    /// How every view is symbolized and built.
    pub settings: Settings,
}

/// What every request shares.
pub struct AppState {
    pub catalog: Arc<Catalog>,
    pub symbols: SymbolCache,
    pub settings: Settings,
    pub views: ViewLimit,
    /// Built pages, profiles and growth reports, by the dumps they show.
    pub pages: BuiltCache,
    /// The names of the profiles served last, for `go tool pprof`.
    pub symbolz: SymbolMemory,
}

/// Run the server until it is killed.
pub fn run(config: Config) -> Result<()> {
    let paths = if config.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        config.paths.clone()
    };
    let catalog = Catalog::new(&paths).map_err(Error::new)?;
    let count = catalog.scan_now().entries().len();
    let state = Arc::new(AppState {
        catalog: Arc::new(catalog),
        symbols: SymbolCache::new(MAX_CACHED_LOCATIONS),
        settings: config.settings,
        views: ViewLimit::new(CONCURRENT_VIEWS),
        pages: BuiltCache::new(BUILT_BYTES),
        symbolz: SymbolMemory::default(),
    });
    let allowed = Arc::new(AllowedHosts::new(config.bind, &config.allow_hosts));
    let limit = connections::connection_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::new(format!("cannot start the server: {e}")))?;
    runtime.block_on(async move {
        let address = SocketAddr::new(config.bind, config.port);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| Error::new(format!("cannot listen on {address}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::new(format!("cannot listen on {address}: {e}")))?;
        println!("heapdiff: serving {count} dumps at http://{local}/");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        connections::serve(listener, routes::router(state, allowed), limit).await;
        Ok(())
    })
}
