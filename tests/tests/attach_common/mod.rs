//! What the tests of the `heapsample` command share: the built command,
//! and running it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use heapsample_tests::target_dir;

/// The built `heapsample` command (`target/release/heapsample`).
pub fn heapsample_path() -> PathBuf {
    let path = target_dir().join("release").join("heapsample");
    assert!(
        path.is_file(),
        "{} not found: run `cargo build --release` first",
        path.display()
    );
    path
}

/// Runs `heapsample ARGS` to its end.
pub fn heapsample(args: &[&str]) -> Output {
    Command::new(heapsample_path())
        .args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("PROF_CONF")
        .output()
        .expect("run heapsample")
}

/// Standard error of `output` as text.
pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output of `output` as text.
pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}
