//! What a test needs from the machine, and what happens when it is missing:
//! the one place every test that may not run everywhere asks.
//!
//! Two kinds of prerequisite, two rules:
//! - [`Missing::Software`]: a program, library or package that the test
//!   command (`scripts/test.sh`) installs. Under
//!   `HEAPSAMPLE_REQUIRE_PREREQUISITES=1`, which the test command sets, its
//!   absence fails the test: CI has everything installed, so a missing one is
//!   a broken setup, never a reason to pass. Elsewhere (a developer's plain
//!   `cargo test`) the test is skipped.
//! - [`Missing::Privilege`]: a privilege or kernel facility the machine may
//!   not grant (root, a cgroup v2 memory controller, `SCHED_FIFO`, user
//!   namespaces). Always a skip, never a failure, and always counted.
//!
//! A skip is never silent: [`skip`] prints `SKIPPED: <test>: <reason>` on
//! stderr and, when `HEAPSAMPLE_SKIP_LOG` names a file, appends one line
//! `<test binary>\t<test>\t<reason>` to it. libtest swallows the output of a
//! test that passes, so the test command counts that file for the suite's
//! closing line (`N passed, N failed, N skipped`): a test that skipped all or
//! part of its checks is counted as skipped, not passed.
//!
//! The test is named by its thread (libtest runs each test on a thread named
//! after it), so call [`skip`] from the test's own thread.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Set to `1` by the test command: missing software fails instead of skipping.
pub const REQUIRE_VARIABLE: &str = "HEAPSAMPLE_REQUIRE_PREREQUISITES";
/// Names the file every skip is appended to.
pub const SKIP_LOG_VARIABLE: &str = "HEAPSAMPLE_SKIP_LOG";

/// Why a test (or a part of it) cannot run here.
#[derive(Clone, Copy, Debug)]
pub enum Missing<'a> {
    /// Software the test command installs: what is missing and how to get
    /// it (e.g. "go is not installed (apt-get install golang-go)").
    Software(&'a str),
    /// A privilege or kernel facility this machine does not grant.
    Privilege(&'a str),
}

/// True when the test command asked for every installable prerequisite.
pub fn software_required() -> bool {
    std::env::var(REQUIRE_VARIABLE).as_deref() == Ok("1")
}

/// The calling test cannot run all its checks here: record it as skipped
/// (see the module docs), or panic for missing software when
/// `HEAPSAMPLE_REQUIRE_PREREQUISITES=1`. The caller then returns (or goes
/// on without the part it skipped).
pub fn skip(missing: Missing<'_>) {
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed thread>")
        .to_string();
    match missing {
        Missing::Software(what) if software_required() => panic!(
            "{what}, but {REQUIRE_VARIABLE}=1: the test command (scripts/test.sh) must install it"
        ),
        Missing::Software(what) | Missing::Privilege(what) => record(&test, what),
    }
}

fn record(test: &str, reason: &str) {
    eprintln!("SKIPPED: {test}: {reason}");
    let Some(log) = std::env::var_os(SKIP_LOG_VARIABLE).filter(|v| !v.is_empty()) else {
        return;
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let clean = |text: &str| text.replace(['\t', '\n', '\r'], " ");
    let line = format!("{}\t{}\t{}\n", clean(&binary), clean(test), clean(reason));
    // One write of a short line to an O_APPEND file: lines of concurrent
    // tests never interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(error) = written {
        panic!(
            "cannot record a skip in {SKIP_LOG_VARIABLE}={}: {error}",
            Path::new(&log).display()
        );
    }
}

/// True if an executable file `program` is in one of `PATH`'s directories.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
    })
}

/// True if `program ARGS` runs and exits with status 0 (its output
/// discarded): the probe for a tool or a privilege.
pub fn command_succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
