//! Helpers shared by the hostile_* and write_safety tests: building the small
//! C libraries preloaded beside the shim, and reading the numbers the test
//! programs print.

#![allow(dead_code)]

use heapsample_tests::*;
use std::path::PathBuf;
use std::process::Command;

/// Build `tests/programs/<source>` into a shared library (`gcc -shared
/// -fPIC`), cached under the target directory by a hash of the source.
pub fn compile_shared(source: &str) -> PathBuf {
    let src_path = programs_dir().join(source);
    let src = std::fs::read(&src_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", src_path.display()));
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &src {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    let stem = source.trim_end_matches(".c");
    let dir = target_dir()
        .join("heapsample-test-programs")
        .join(format!("{stem}-{hash:016x}"));
    let out = dir.join(format!("lib{stem}.so"));
    if out.is_file() {
        return out;
    }
    std::fs::create_dir_all(&dir).expect("create library dir");
    static UNIQUE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = UNIQUE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".lib{stem}.{}.{n}.tmp", std::process::id()));
    let output = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O1", "-g", "-Wall", "-o"])
        .arg(&tmp)
        .arg(&src_path)
        .output()
        .expect("run gcc");
    assert!(
        output.status.success(),
        "building {source} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&tmp, &out).expect("rename library");
    out
}

/// The value after `key` in whitespace-separated `key value` output.
pub fn value_of(text: &str, key: &str) -> Option<i64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == key)
        .and_then(|w| w[1].parse().ok())
}

/// Like [`value_of`] but panics with the text when missing.
pub fn get(text: &str, key: &str) -> i64 {
    value_of(text, key).unwrap_or_else(|| panic!("no `{key} <number>` in output:\n{text}"))
}

/// Sum of alloc_objects over the stacks of a dump.
pub fn sampled_objects(dump: &format::Dump) -> u64 {
    dump.stacks.iter().map(|s| s.alloc_objects).sum()
}
