//! The dumps a server may show: found below the paths given on the
//! command line ([`crate::scan`]), scanned again when the list is asked for
//! so new dumps appear while the program runs, each summarized once per
//! version of its file.
//!
//! Owns the only mapping from a request's dump id to a file: an id is
//! looked up among the scanned entries, never turned into a path of its
//! own, and the file is opened relative to its root, never out of it
//! ([`crate::roots`]), when it is read: a dump or a directory swapped for a
//! link after the scan is refused.
//!
//! Requests never wait for a scan they did not ask for: they read the last
//! finished scan, a [`Snapshot`] swapped in whole when the next is done,
//! and the only lock they take guards that swap. A scan runs on a blocking
//! thread, one at a time, reading only new and changed files; a listing
//! waits for a scan that started after it arrived (so it sees every file
//! added before it asked), and the listings that arrive during one scan
//! share the next. A scan whose client left still finishes and is kept.

use crate::roots::{Refused, Root};
use crate::scan::{Found, MAX_ENTRIES, Version, scan};
use axum::body::Bytes;
use heapdiff::input::{load_opened, trigger_name};
use heapdiff::model::TimeInfo;
use heapdiff::model::live_heap::{Agreement, LiveHeap};
use heapdiff::model::time::DEFAULT_TEMPORARY_NS;
use heapdiff::render::live_heap::words;
use heapsample_format::Dump;
use nix::fcntl::OFlag;
use serde::Serialize;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// What the list shows about one dump, read once per version of the file.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub pid: u32,
    pub executable: String,
    pub command_line: String,
    pub time_unix_ns: u64,
    pub trigger: &'static str,
    pub seq: u64,
    pub trigger_seq: u64,
    pub sample_period: u64,
    /// Estimated live bytes (requested) and its 95 % interval.
    pub live_estimate: f64,
    pub live_low: f64,
    pub live_high: f64,
    /// Every allocation was sampled: the estimate is exact.
    pub live_exact_sampling: bool,
    /// Exact live heap (usable bytes) under `prof_exact`.
    pub live_exact: Option<u64>,
    /// The estimate and the exact counter reconciled, in words.
    pub live_note: String,
    /// How the exact counter relates to the estimate in usable bytes:
    /// `within`, `above`, `below`, `no-live-sample` or `not-counted`.
    pub live_agreement: &'static str,
    /// By how many bytes it lies above or below (0 otherwise).
    pub live_gap: f64,
    pub allocated_exact: u64,
    pub allocations: u64,
    pub samples_taken: u64,
    pub samples_live: u64,
    pub stacks: usize,
    /// The live samples carry their births (dump format 4): the dump can
    /// tell what was allocated in a range and is still live.
    pub births: bool,
    /// The stacks carry the lifetimes of freed samples: temporary
    /// allocations can be told.
    pub lifetimes: bool,
    /// The dump's moment, ns since the profiler's start (0: not known).
    pub since_start_ns: u64,
    /// The profiler's start on the wall clock (0: not known): dumps with
    /// the same start (and pid) share their clock.
    pub start_unix_ns: u64,
    /// The exact peak of the live heap so far (usable bytes), where
    /// counted (`prof_exact`, format 4), and when the heap first came
    /// within `exact_peak_margin` bytes of it, ns since the start.
    pub exact_peak: Option<u64>,
    pub exact_peak_at_ns: u64,
    pub exact_peak_margin: u64,
    /// What the profiler cost up to the dump (format 5 on; null before):
    /// the timeline's cost band.
    pub cost: Option<heapdiff::render::cost::CostReport>,
}

/// One dump file found below a root.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// The id used in URLs: the path relative to its root.
    pub id: String,
    #[serde(skip)]
    root: usize,
    #[serde(skip)]
    relative: PathBuf,
    #[serde(skip)]
    version: Version,
    /// The summary, or why the file cannot be read as a dump.
    pub summary: std::result::Result<Summary, String>,
}

impl Entry {
    /// What tells this version of its file from others (size, time,
    /// identity), for keys of built pages.
    pub fn version(&self) -> Version {
        self.version
    }
}

/// What one scan found, sorted by id; never changed once made.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Which scan made it (0: none yet).
    number: u64,
    by_id: HashMap<String, Arc<Entry>>,
    sorted: Vec<Arc<Entry>>,
    /// The list as sent (built once, by the first listing that asks, and
    /// carried to the next scan when that found the same files).
    listing: OnceLock<Listed>,
}

/// The dump list as sent and its entity tag (a hash of the body), so a
/// poller that holds this version is answered 304 without the body.
#[derive(Clone, Debug)]
pub struct Listed {
    pub body: Bytes,
    pub etag: String,
}

impl Listed {
    fn of(body: String) -> Listed {
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hasher::write(&mut hasher, body.as_bytes());
        let etag = format!(
            "\"{:016x}-{:x}\"",
            std::hash::Hasher::finish(&hasher),
            body.len()
        );
        Listed {
            body: Bytes::from(body),
            etag,
        }
    }
}

impl Snapshot {
    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<Entry>> {
        self.by_id.get(id)
    }

    /// Every entry, sorted by id.
    pub fn entries(&self) -> &[Arc<Entry>] {
        &self.sorted
    }

    /// The list built by `build` from this snapshot, once.
    pub fn listing(&self, build: impl FnOnce(&Snapshot) -> String) -> Listed {
        self.listing.get_or_init(|| Listed::of(build(self))).clone()
    }

    /// The same entries (the same versions of the same files) as `other`.
    fn same_entries(&self, other: &Snapshot) -> bool {
        self.sorted.len() == other.sorted.len()
            && self
                .sorted
                .iter()
                .zip(&other.sorted)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// The roots and the last scan of them.
#[derive(Debug)]
pub struct Catalog {
    roots: Vec<Root>,
    current: RwLock<Arc<Snapshot>>,
    /// Held by the running scan.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Scans started so far.
    started: AtomicU64,
}

impl Catalog {
    /// Paths that do not exist are an error; nothing is scanned yet.
    pub fn new(paths: &[PathBuf]) -> Result<Catalog, String> {
        let roots = paths
            .iter()
            .enumerate()
            .map(|(index, path)| Root::open(path, index, paths.len()))
            .collect::<Result<_, _>>()?;
        Ok(Catalog {
            roots,
            current: RwLock::new(Arc::new(Snapshot::default())),
            turn: Arc::new(tokio::sync::Mutex::new(())),
            started: AtomicU64::new(0),
        })
    }

    /// The last finished scan.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A scan that started after this call, finished (see the module docs).
    pub async fn refresh(self: &Arc<Catalog>) -> Arc<Snapshot> {
        let arrived = self.started.load(Ordering::SeqCst);
        let turn = self.turn.clone().lock_owned().await;
        let current = self.snapshot();
        if current.number > arrived {
            return current;
        }
        let catalog = self.clone();
        let scan = tokio::task::spawn_blocking(move || {
            let snapshot = catalog.scan_now();
            drop(turn);
            snapshot
        });
        scan.await.unwrap_or_else(|_| self.snapshot())
    }

    /// Scan on this thread and keep the result (at start, and for
    /// [`Catalog::refresh`], which holds the turn).
    pub fn scan_now(&self) -> Arc<Snapshot> {
        let number = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let old = self.snapshot();
        let mut found = scan(&self.roots);
        found.truncate(MAX_ENTRIES);
        let mut by_id = HashMap::with_capacity(found.len());
        for found in found {
            let entry = match old.get(&found.id) {
                Some(old)
                    if (old.root, &old.relative, old.version)
                        == (found.root, &found.relative, found.version) =>
                {
                    old.clone()
                }
                _ => Arc::new(self.summarized(found)),
            };
            by_id.insert(entry.id.clone(), entry);
        }
        let mut sorted: Vec<Arc<Entry>> = by_id.values().cloned().collect();
        sorted.sort_by(|a, b| a.id.cmp(&b.id));
        let mut snapshot = Snapshot {
            number,
            by_id,
            sorted,
            listing: OnceLock::new(),
        };
        if snapshot.same_entries(&old) {
            snapshot.listing = old.listing.clone();
        }
        let snapshot = Arc::new(snapshot);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = snapshot.clone();
        snapshot
    }

    /// Open the entry's file for reading, below its root.
    pub fn open(&self, entry: &Entry) -> Result<File, Refused> {
        self.open_found(entry.root, &entry.relative)
    }

    fn open_found(&self, root: usize, relative: &Path) -> Result<File, Refused> {
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK;
        self.roots[root]
            .open_beneath(relative, flags)
            .map(File::from)
    }

    /// The entry of a file found, read and summarized; any failure is the
    /// row's error text (naming nothing outside the roots).
    fn summarized(&self, found: Found) -> Entry {
        let summary = self
            .open_found(found.root, &found.relative)
            .map_err(|refused| refused.to_string())
            .and_then(|file| {
                load_opened(file, Path::new(&found.id)).map_err(|e| {
                    let text = e.to_string();
                    let prefix = format!("{}: ", found.id);
                    text.strip_prefix(&prefix).unwrap_or(&text).to_string()
                })
            })
            .map(|input| summary_of(&input.dump));
        Entry {
            id: found.id,
            root: found.root,
            relative: found.relative,
            version: found.version,
            summary,
        }
    }
}

/// The list's numbers: the live estimate with its interval from the
/// samples, the exact counters beside it, and how they relate in words.
pub fn summary_of(dump: &Dump) -> Summary {
    let live = LiveHeap::of(&[dump]);
    let time = TimeInfo::of(dump, DEFAULT_TEMPORARY_NS);
    let interval = live.requested;
    let (agreement, gap) = match live.agreement() {
        Agreement::NotCounted => ("not-counted", 0.0),
        Agreement::NoLiveSample => ("no-live-sample", 0.0),
        Agreement::Within => ("within", 0.0),
        Agreement::ExactAbove(by) => ("above", by.round()),
        Agreement::ExactBelow(by) => ("below", by.round()),
    };
    Summary {
        pid: dump.pid,
        executable: dump.executable.clone(),
        command_line: dump.command_line.join(" "),
        time_unix_ns: dump.time_unix_ns,
        trigger: trigger_name(dump.trigger),
        seq: dump.seq,
        trigger_seq: dump.trigger_seq,
        sample_period: dump.sample_period(),
        live_estimate: interval.estimate.round(),
        live_low: interval.low.round(),
        live_high: interval.high.round(),
        live_exact_sampling: live.every_allocation_sampled,
        live_exact: dump.totals.live_usable_bytes,
        live_note: words(&live, dump.sample_period()),
        live_agreement: agreement,
        live_gap: gap,
        allocated_exact: dump.totals.bytes_allocated,
        allocations: dump.totals.allocations,
        samples_taken: dump.totals.samples_taken,
        samples_live: dump.totals.samples_live,
        stacks: dump.stacks.len(),
        births: time.births,
        lifetimes: time.lifetimes,
        since_start_ns: time.dump_ns,
        start_unix_ns: time.start_unix_ns,
        exact_peak: time.peak.map(|p| p.live_usable_bytes),
        exact_peak_at_ns: time.peak.map_or(0, |p| p.at_ns),
        exact_peak_margin: time.peak.map_or(0, |p| p.time_margin_bytes),
        cost: Some(heapdiff::render::cost::CostReport::of(dump)).filter(|cost| cost.recorded),
    }
}
