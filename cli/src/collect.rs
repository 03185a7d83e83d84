//! `heapsample collect DIR`: what the dumps in DIR need to be named after
//! the process and its container are gone. For every module of every dump
//! with a build-id: the module's own file (when its build-id matches and it
//! is not larger than the limit) as `DIR/.build-id/xx/yyyy`, and its
//! separate debug file, when the system has one, as `….debug` — the layout
//! debuggers use, stored once per build-id. `heapdiff` looks there first.
//!
//! Files are read from the host's filesystem, or under `--root` (a
//! container's `/proc/PID/root`). A copy is written beside its final name
//! and linked into place, so a reader never sees half a file and an
//! existing entry is never replaced. Nothing but `DIR/.build-id` is
//! written.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use object::Object;

use crate::Failure;

/// Options of `heapsample collect`.
#[derive(Args, Clone, Debug)]
pub struct CollectArgs {
    /// The dump directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Read the modules under this root instead of `/` (a container's
    /// root, `/proc/PID/root`).
    #[arg(long, value_name = "PATH")]
    pub root: Option<PathBuf>,
    /// Copy no module larger than this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    pub max_mib: u64,
}

/// What became of one module.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Copied now (bytes of the module and of its debug file).
    Copied(u64),
    /// Collected before.
    AlreadyThere,
    /// Not copied, and why.
    Skipped(String),
}

/// Run `heapsample collect`.
pub fn run(args: CollectArgs) -> Result<u8, Failure> {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    let outcomes = collect(&args.dir, &root, args.max_mib << 20)?;
    let mut copied = 0u64;
    let mut bytes = 0u64;
    for (path, outcome) in &outcomes {
        match outcome {
            Outcome::Copied(n) => {
                copied += 1;
                bytes += n;
            }
            Outcome::AlreadyThere => {}
            Outcome::Skipped(why) => eprintln!("heapsample: {path}: not collected: {why}"),
        }
    }
    println!(
        "collected {copied} of {} modules ({:.1} MiB) into {}",
        outcomes.len(),
        bytes as f64 / (1 << 20) as f64,
        args.dir.join(".build-id").display()
    );
    Ok(0)
}

/// Collect the modules of every dump in `dir`, read under `root`; each
/// module path (first seen) with its outcome.
pub fn collect(dir: &Path, root: &Path, max_bytes: u64) -> Result<Vec<(String, Outcome)>, Failure> {
    let modules = modules_of_dumps(dir)?;
    Ok(modules
        .into_iter()
        .map(|(build_id, path)| {
            let outcome = collect_one(dir, root, &path, &build_id, max_bytes);
            (path, outcome)
        })
        .collect())
}

/// Every build-id of the dumps in `dir` (`*.prof` files that decode as
/// heapsample dumps) with the first path recorded for it.
fn modules_of_dumps(dir: &Path) -> Result<BTreeMap<Vec<u8>, String>, Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::new(format!("cannot list {}: {e}", dir.display())))?;
    let mut modules = BTreeMap::new();
    let mut dumps = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "prof") {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(dump) = heapsample_format::decode(&bytes) else {
            continue; // a foreign or damaged file: heapdiff says why
        };
        dumps += 1;
        for module in dump.modules {
            if !module.build_id.is_empty() && module.path.starts_with('/') {
                modules.entry(module.build_id).or_insert(module.path);
            }
        }
    }
    if dumps == 0 {
        return Err(Failure::new(format!(
            "no heapsample dump in {}",
            dir.display()
        )));
    }
    Ok(modules)
}

fn collect_one(dir: &Path, root: &Path, path: &str, build_id: &[u8], max_bytes: u64) -> Outcome {
    let (Some(module), Some(debug)) = (
        heapsample_format::build_id_path(build_id, ""),
        heapsample_format::build_id_path(build_id, ".debug"),
    ) else {
        return Outcome::Skipped("no build-id".to_string());
    };
    let target = dir.join(module);
    if target.exists() {
        return Outcome::AlreadyThere;
    }
    let source = under(root, Path::new(path));
    let bytes = match std::fs::read(&source) {
        Ok(bytes) => bytes,
        Err(e) => return Outcome::Skipped(format!("cannot read {}: {e}", source.display())),
    };
    if bytes.len() as u64 > max_bytes {
        return Outcome::Skipped(format!(
            "{} MiB, over the limit of {} MiB (--max-mib)",
            bytes.len() >> 20,
            max_bytes >> 20
        ));
    }
    match object::File::parse(&*bytes)
        .map(|file| file.build_id().ok().flatten().map(<[u8]>::to_vec))
    {
        Ok(Some(found)) if found == build_id => {}
        Ok(_) => {
            return Outcome::Skipped(format!(
                "{} is not the file the dumps recorded (another build-id)",
                source.display()
            ));
        }
        Err(e) => return Outcome::Skipped(format!("{}: {e}", source.display())),
    }
    if let Err(e) = place(&target, &bytes) {
        return Outcome::Skipped(format!("cannot write {}: {e}", target.display()));
    }
    let mut copied = bytes.len() as u64;
    let system_debug = Path::new("/usr/lib/debug").join(&debug);
    for candidate in [under(root, &system_debug), system_debug.clone()] {
        if let Ok(debug_bytes) = std::fs::read(&candidate)
            && debug_bytes.len() as u64 <= max_bytes
            && place(&dir.join(&debug), &debug_bytes).is_ok()
        {
            copied += debug_bytes.len() as u64;
            break;
        }
    }
    Outcome::Copied(copied)
}

/// `path` (absolute) read under `root`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Write `bytes` as `target`, never replacing an existing file: a
/// temporary file beside it, linked into place, then removed. False when
/// `target` existed (and was kept).
pub fn place(target: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let parent = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let temporary = parent.join(format!(
        ".{}.{}.tmp",
        target.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        match std::fs::hard_link(&temporary, target) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    })();
    let _ = std::fs::remove_file(&temporary);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collected_copies_use_the_debuggers_layout() {
        assert_eq!(
            under(Path::new("/proc/7/root"), Path::new("/usr/lib/x.so")),
            PathBuf::from("/proc/7/root/usr/lib/x.so")
        );
    }

    #[test]
    fn a_file_is_placed_once_and_never_replaced() {
        let dir = std::env::temp_dir().join(format!("heapsample-collect-{}", std::process::id()));
        let target = dir.join(".build-id/ab/cdef");
        assert!(place(&target, b"first").unwrap());
        assert!(!place(&target, b"second").unwrap());
        assert_eq!(std::fs::read(&target).unwrap(), b"first");
        let left: Vec<_> = std::fs::read_dir(target.parent().unwrap())
            .unwrap()
            .collect();
        assert_eq!(left.len(), 1, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
