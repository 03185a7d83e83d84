//! The dumps a server may show: found under the paths given on the command
//! line, re-scanned on every listing so new dumps appear while the program
//! runs, each summarized once per (size, modification time).
//!
//! Owns the only mapping from a request's dump id to a file: an id is looked
//! up among the scanned entries and never turned into a path, so `..`,
//! absolute paths and encodings of them name nothing. Symbolic links are
//! followed only when their target stays inside the directory given.
//! Dumps are `*.prof` (and foreign `*.heap` profiles); temporary files
//! (hidden, or with `.tmp` in the name) are skipped.

use heapdiff::input::{load, trigger_name};
use heapdiff::stats::Estimate;
use heapsample_format::Dump;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How deep below a given directory dumps are looked for.
const MAX_DEPTH: usize = 4;
/// At most this many dumps are listed (the newest scan order wins).
const MAX_ENTRIES: usize = 100_000;

/// A path given on the command line.
#[derive(Clone, Debug)]
struct Root {
    /// Canonical path.
    path: PathBuf,
    is_dir: bool,
    /// Prefix of the ids of its dumps (empty with a single root).
    prefix: String,
}

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
    /// Estimated live bytes and its 95 % interval.
    pub live_estimate: f64,
    pub live_low: f64,
    pub live_high: f64,
    /// Exact live heap (usable bytes) under `prof_exact`.
    pub live_exact: Option<u64>,
    pub allocated_exact: u64,
    pub allocations: u64,
    pub samples_taken: u64,
    pub samples_live: u64,
    pub stacks: usize,
}

/// A dump file found by a scan: its id, path and version.
struct Found {
    id: String,
    path: PathBuf,
    version: (u64, Option<SystemTime>),
}

/// One file found under a root.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// The id used in URLs: the path relative to its root.
    pub id: String,
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    version: (u64, Option<SystemTime>),
    /// The summary, or why the file cannot be read as a dump.
    pub summary: std::result::Result<Summary, String>,
}

/// The scanned dumps.
#[derive(Debug)]
pub struct Catalog {
    roots: Vec<Root>,
    entries: HashMap<String, Entry>,
}

impl Catalog {
    /// Paths that do not exist are an error; nothing is scanned yet.
    pub fn new(paths: &[PathBuf]) -> Result<Catalog, String> {
        let mut roots = Vec::new();
        for (index, path) in paths.iter().enumerate() {
            let canonical = path
                .canonicalize()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let is_dir = canonical.is_dir();
            let prefix = if paths.len() > 1 {
                format!("{index}/")
            } else {
                String::new()
            };
            roots.push(Root {
                path: canonical,
                is_dir,
                prefix,
            });
        }
        Ok(Catalog {
            roots,
            entries: HashMap::new(),
        })
    }

    /// Look for dumps again; summarize new and changed files.
    pub fn rescan(&mut self) {
        let mut found: Vec<Found> = Vec::new();
        for root in &self.roots {
            if root.is_dir {
                walk(&root.path, &root.path, &root.prefix, 0, &mut found);
            } else if let Ok(metadata) = std::fs::metadata(&root.path) {
                let name = root
                    .path
                    .file_name()
                    .map_or_else(|| "dump".to_string(), |n| n.to_string_lossy().into_owned());
                found.push(Found {
                    id: format!("{}{name}", root.prefix),
                    path: root.path.clone(),
                    version: version(&metadata),
                });
            }
        }
        found.truncate(MAX_ENTRIES);
        let mut entries = HashMap::with_capacity(found.len());
        for Found { id, path, version } in found {
            let entry = match self.entries.remove(&id) {
                Some(old) if old.version == version && old.path == path => old,
                _ => Entry {
                    summary: summarize(&path),
                    id: id.clone(),
                    path,
                    version,
                },
            };
            entries.insert(id, entry);
        }
        self.entries = entries;
    }

    /// The entry with this id, if the last scan found it.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.get(id)
    }

    /// Every entry, sorted by id.
    pub fn entries(&self) -> Vec<&Entry> {
        let mut all: Vec<&Entry> = self.entries.values().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }
}

fn version(metadata: &std::fs::Metadata) -> (u64, Option<SystemTime>) {
    (metadata.len(), metadata.modified().ok())
}

/// True for names the shim writes dumps under (`.prof`) and those of
/// jemalloc and gperftools heap profiles (`.heap`); temporary and hidden
/// files are not dumps (yet).
fn is_dump_name(name: &str) -> bool {
    !name.starts_with('.')
        && !name.contains(".tmp")
        && (name.ends_with(".prof") || name.ends_with(".heap"))
}

/// Collect dumps below `dir` (inside `root`), ids relative to `root`.
fn walk(root: &Path, dir: &Path, prefix: &str, depth: usize, found: &mut Vec<Found>) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    for item in listing.flatten() {
        if found.len() >= MAX_ENTRIES {
            return;
        }
        let name = item.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Some(path) = inside(root, &item.path()) else {
            continue;
        };
        let Ok(metadata) = std::fs::metadata(&path) else {
            continue;
        };
        if metadata.is_dir() {
            if depth < MAX_DEPTH {
                walk(root, &path, prefix, depth + 1, found);
            }
        } else if metadata.is_file() && is_dump_name(&name) {
            let relative = item.path();
            let relative = relative.strip_prefix(root).unwrap_or(&relative);
            found.push(Found {
                id: format!("{prefix}{}", relative.to_string_lossy()),
                path,
                version: version(&metadata),
            });
        }
    }
}

/// `path` with symbolic links resolved, if it stays inside `root`.
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    let is_link = std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(true);
    if !is_link {
        return Some(path.to_path_buf());
    }
    let target = path.canonicalize().ok()?;
    target.starts_with(root).then_some(target)
}

/// Read the dump and summarize it; any failure is the row's error text.
fn summarize(path: &Path) -> std::result::Result<Summary, String> {
    let dump = load(path).map(|input| input.dump).map_err(|e| {
        let text = e.to_string();
        let prefix = format!("{}: ", path.display());
        text.strip_prefix(&prefix).unwrap_or(&text).to_string()
    })?;
    Ok(summary_of(&dump))
}

/// The list's numbers: the live estimate with its interval from the
/// samples, the exact counters beside it.
pub fn summary_of(dump: &Dump) -> Summary {
    let mut live = Estimate::default();
    for stack in &dump.stacks {
        live = live.plus(&Estimate {
            value: stack.live.bytes,
            variance: stack.live.bytes_variance,
            floor: stack.live_bytes as f64,
        });
    }
    let interval = live.interval();
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
        live_exact: dump.totals.live_usable_bytes,
        allocated_exact: dump.totals.bytes_allocated,
        allocations: dump.totals.allocations,
        samples_taken: dump.totals.samples_taken,
        samples_live: dump.totals.samples_live,
        stacks: dump.stacks.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_names() {
        assert!(is_dump_name("heapsample.12.000001.i000001.prof"));
        assert!(!is_dump_name("heapsample.12.000001.f.prof.tmp.12"));
        assert!(!is_dump_name(".hidden.prof"));
        assert!(!is_dump_name("notes.txt"));
        assert!(is_dump_name("jeprof.4242.0.f.heap"));
    }
}
