//! Where things are: the workspace, cargo's target directory, the built
//! shim and `heapdiff`, the test programs' sources, libjemalloc.
//!
//! A missing build panics with the command that makes it; a missing
//! libjemalloc is a prerequisite (see [`crate::prerequisite`]).

use crate::prerequisite::{Missing, skip};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // This crate lives in `<root>/tests`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent directory")
        .to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace
/// root if relative) or `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        _ => workspace_root().join("target"),
    }
}

fn release_artifact(name: &str, what: &str) -> PathBuf {
    let path = target_dir().join("release").join(name);
    if !path.is_file() {
        panic!(
            "{what} not found at {}: run `cargo build --release` in {} first \
             (the end-to-end tests use the release build; CARGO_TARGET_DIR is honored)",
            path.display(),
            workspace_root().display()
        );
    }
    path
}

/// Path of the built shim, `target/release/libheapsample.so`, or
/// `$HEAPSAMPLE_SHIM` when set (e.g. a debug build, whose lock-order checks
/// are on). Panics with a message telling to run `cargo build --release` if
/// it is missing.
pub fn shim_path() -> PathBuf {
    match std::env::var_os("HEAPSAMPLE_SHIM") {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "HEAPSAMPLE_SHIM={} is not a file",
                path.display()
            );
            path
        }
        _ => release_artifact("libheapsample.so", "the shim libheapsample.so"),
    }
}

/// Path of the built `heapdiff` tool, `target/release/heapdiff`. Panics with a
/// message telling to run `cargo build --release` if it is missing.
pub fn heapdiff_path() -> PathBuf {
    release_artifact("heapdiff", "the heapdiff binary")
}

/// `path` as `&str` (the tests' paths are UTF-8).
pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// `tests/programs/`, the sources of the test programs.
pub fn programs_dir() -> PathBuf {
    workspace_root().join("tests").join("programs")
}

/// Path of `libjemalloc.so.2`, from `ldconfig -p` or the Debian location;
/// `None` when it is not installed (a skip of the calling test, a failure
/// under the test command: see [`crate::prerequisite`]).
pub fn jemalloc_path() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Ok(out) = Command::new("ldconfig").arg("-p").output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let line = line.trim();
            if line.starts_with("libjemalloc.so.2 ")
                && line.contains("x86-64")
                && let Some((_, path)) = line.rsplit_once("=> ")
            {
                candidates.push(PathBuf::from(path.trim()));
            }
        }
    }
    candidates.push(PathBuf::from("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"));
    let found = candidates.into_iter().find(|p| p.is_file());
    if found.is_none() {
        skip(Missing::Software(
            "libjemalloc.so.2 is not installed (apt-get install libjemalloc2)",
        ));
    }
    found
}
