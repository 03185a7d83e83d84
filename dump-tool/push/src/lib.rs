//! `heapdiff push DIR… --pyroscope URL --otlp URL`: follows directories of
//! dumps as `heapdiff serve` does (its [`Catalog`]: the same walk, the same
//! files, each summarized once per version) and sends each new dump once
//! to each receiver given ([`targets`]): Pyroscope's HTTP ingest API and an
//! OpenTelemetry Collector's OTLP/HTTP profiles receiver. Profiles are built
//! by heapdiff's one pipeline, as `heapdiff --format pprof` and `serve`'s
//! `/debug/pprof/heap` build them.
//!
//! Owns the state directory ([`queue`]): a dump is taken in once (its
//! identity, not its file name: [`origin::dump_key`]), its requests queued
//! on disk before anything is sent, so a dump deleted (thinned) after it
//! was seen is still sent, and a restart of the pusher or of a receiver
//! loses nothing. Each receiver is retried with exponential backoff after
//! a failure; a refusal (4xx but 408 and 429) drops the request. Every failure is one line
//! on stderr, `heapdiff: push to URL failed: …`. It reads dumps and writes
//! only in its state directory; it never touches the dumps. One thread:
//! dumps are built between requests, requests are sent one at a time on a
//! current-thread tokio runtime.

pub mod http;
pub mod origin;
pub mod otlp;
pub mod otlp_profile;
pub mod queue;
pub mod targets;

use heapdiff::input::load_opened;
use heapdiff::pipeline::{Loaded, Settings};
use heapdiff::render::pprof::{PbProfile, PprofOptions, build};
use heapdiff_serve::catalog::{Catalog, Entry};
use heapdiff_serve::symbol_cache::SymbolCache;
use origin::{Origin, dump_key};
use queue::{Bounds, State};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use targets::Target;

/// The shared symbol table starts over past this many addresses.
const MAX_CACHED_LOCATIONS: usize = 2_000_000;

/// What to follow, where to send it, and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub paths: Vec<PathBuf>,
    pub targets: Vec<Target>,
    /// The state directory.
    pub state: PathBuf,
    pub bounds: Bounds,
    /// How often the directories are scanned.
    pub poll: Duration,
    /// Each request's bound (connecting, sending and the answer).
    pub timeout: Duration,
    /// The longest wait between two attempts on a failing receiver.
    pub max_backoff: Duration,
    /// Send what is there and what waits, once, then stop.
    pub once: bool,
    pub settings: Settings,
}

/// Set by SIGTERM and SIGINT: stop between two requests.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Follow and send until stopped (SIGTERM, SIGINT: true), or, with `once`,
/// until one round is done: true when nothing is left waiting.
pub fn run(config: Config) -> Result<bool, String> {
    if config.targets.is_empty() {
        return Err("push needs a receiver: --pyroscope URL and/or --otlp URL".into());
    }
    let catalog = Catalog::new(&config.paths)?;
    let mut state = State::open(&config.state, config.bounds)?;
    install_stop_handlers()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start: {e}"))?;
    let mut pusher = Pusher {
        config: &config,
        symbols: SymbolCache::new(MAX_CACHED_LOCATIONS),
        backoff: HashMap::new(),
        noted: HashSet::new(),
    };
    loop {
        pusher.take_in(&catalog, &mut state)?;
        runtime.block_on(pusher.deliver(&mut state));
        if config.once {
            return Ok(state.waiting_count() == 0);
        }
        let until = Instant::now() + config.poll;
        while Instant::now() < until && !STOP.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50).min(config.poll));
        }
        if STOP.load(Ordering::SeqCst) {
            return Ok(true);
        }
    }
}

fn install_stop_handlers() -> Result<(), String> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(request_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { sigaction(signal, &action) }
            .map_err(|e| format!("cannot handle {signal}: {e}"))?;
    }
    Ok(())
}

/// A receiver that failed: when it may be tried again, and how long the
/// next wait is.
struct Backoff {
    until: Instant,
    next: Duration,
}

struct Pusher<'a> {
    config: &'a Config,
    symbols: SymbolCache,
    backoff: HashMap<&'static str, Backoff>,
    /// Dumps (id and version) already reported as not sendable.
    noted: HashSet<String>,
}

impl Pusher<'_> {
    /// Queue the requests of every dump not seen before.
    fn take_in(&mut self, catalog: &Catalog, state: &mut State) -> Result<(), String> {
        let snapshot = catalog.scan_now();
        let mut present = HashSet::new();
        let mut new = Vec::new();
        for entry in snapshot.entries() {
            let summary = match &entry.summary {
                Ok(summary) => summary,
                Err(why) => {
                    self.note(entry, why);
                    continue;
                }
            };
            let key = dump_key(
                summary.pid,
                summary.start_unix_ns,
                summary.seq,
                summary.time_unix_ns,
            );
            present.insert(key.clone());
            if !state.seen(&key) {
                new.push((summary.time_unix_ns, entry, key));
            }
        }
        // Oldest first, so that a queue past its bound drops the oldest.
        new.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
        for (_, entry, key) in new {
            if STOP.load(Ordering::SeqCst) {
                return Ok(());
            }
            if state.seen(&key) {
                continue; // a copy of a dump taken in just now
            }
            match self.profile(catalog, entry) {
                Ok((profile, origin)) => {
                    let requests = self
                        .config
                        .targets
                        .iter()
                        .map(|target| target.request(&profile, &origin, &entry.id, &key))
                        .collect();
                    state.enqueue(&key, requests)?;
                }
                // Gone since the scan: not seen, so a dump back under the
                // same identity is taken in then.
                Err(why) => self.note(entry, &why),
            }
        }
        state.compact(&present)
    }

    /// One line per dump (and version) that cannot be sent.
    fn note(&mut self, entry: &Entry, why: &str) {
        if self
            .noted
            .insert(format!("{} {:?}", entry.id, entry.version()))
        {
            eprintln!("heapdiff: push: {}: not sent: {why}", entry.id);
        }
    }

    /// The dump's pprof profile, built by the pipeline, and its origin.
    fn profile(&self, catalog: &Catalog, entry: &Entry) -> Result<(PbProfile, Origin), String> {
        let file = catalog.open(entry).map_err(|refused| refused.to_string())?;
        let input = load_opened(file, Path::new(&entry.id)).map_err(|e| e.to_string())?;
        let origin = Origin::of(&input.dump);
        let loaded = Loaded::one(entry.id.clone(), input);
        let profile = self
            .symbols
            .with_session(loaded, None, &self.config.settings, |session| {
                let view = session.view();
                let first = view.new.first_dump();
                let mut comments = vec![format!("heapdiff push: {}", entry.id)];
                comments.extend(first.attach_note());
                let options = PprofOptions {
                    executable: first.executable.clone(),
                    time_unix_ns: first.time_unix_ns,
                    comments,
                };
                build(&view, &options)
            })
            .map_err(|e| e.to_string())?;
        Ok((profile, origin))
    }

    /// Send what waits, oldest first, to each receiver not backing off.
    async fn deliver(&mut self, state: &mut State) {
        for waiting in state.waiting() {
            if STOP.load(Ordering::SeqCst) {
                return;
            }
            let Some(target) = self
                .config
                .targets
                .iter()
                .find(|t| t.name == waiting.header.target)
            else {
                eprintln!(
                    "heapdiff: push: {} was queued for {}, no longer a receiver; dropped",
                    waiting.header.dump, waiting.header.target
                );
                state.done(waiting.number);
                continue;
            };
            if self
                .backoff
                .get(target.name)
                .is_some_and(|b| Instant::now() < b.until)
            {
                continue;
            }
            let body = match state.body(&waiting) {
                Ok(body) => body,
                Err(why) => {
                    eprintln!(
                        "heapdiff: push: the queued request of {} cannot be read ({why}); dropped",
                        waiting.header.dump
                    );
                    state.done(waiting.number);
                    continue;
                }
            };
            let url = target.url_with(&waiting.header.query);
            let outcome = http::post(
                &url,
                &waiting.header.content_type,
                &target.headers(),
                body,
                self.config.timeout,
            )
            .await;
            match outcome {
                http::Outcome::Taken => {
                    self.backoff.remove(target.name);
                    state.done(waiting.number);
                }
                http::Outcome::Refused(why) => {
                    eprintln!(
                        "heapdiff: push to {} failed: {why}; {} dropped (a refusal is not retried)",
                        target.url, waiting.header.dump
                    );
                    state.done(waiting.number);
                }
                http::Outcome::Retry(why) => {
                    let wait = self.failed(target.name);
                    eprintln!(
                        "heapdiff: push to {} failed: {why}; retrying in {} ({} waiting)",
                        target.url,
                        http::humanized(wait),
                        state.waiting_count()
                    );
                }
            }
        }
    }

    /// A failure of `target`: the wait before its next attempt (1 s,
    /// doubled each failure in a row up to the maximum).
    fn failed(&mut self, target: &'static str) -> Duration {
        let max = self.config.max_backoff;
        let backoff = self.backoff.entry(target).or_insert(Backoff {
            until: Instant::now(),
            next: Duration::from_secs(1).min(max),
        });
        let wait = backoff.next;
        backoff.until = Instant::now() + wait;
        backoff.next = (wait * 2).min(max);
        wait
    }
}
