//! Other programs the tests run on what the profiler wrote: the built
//! `heapdiff`, and `go tool pprof` (a prerequisite, see
//! [`crate::prerequisite`]).

use crate::locate::heapdiff_path;
use crate::prerequisite::{self, Missing, skip};
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// Runs the built `heapdiff` with `args`.
pub fn heapdiff(args: &[&str]) -> Output {
    Command::new(heapdiff_path())
        .args(args)
        .output()
        .expect("run heapdiff")
}

/// Runs the built `heapdiff` with `args`, asserts it succeeded and returns
/// its standard output.
pub fn heapdiff_ok(args: &[&str]) -> String {
    let out = heapdiff(args);
    assert!(
        out.status.success(),
        "heapdiff {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `go tool pprof ARGS PROFILE` (a file or a URL), its standard output and
/// error together; `None` when go is not installed (a skip of the calling
/// test's pprof part, a failure under the test command: see
/// [`crate::prerequisite`]). `home` holds pprof's own files.
pub fn go_tool_pprof(args: &[&str], profile: impl AsRef<OsStr>, home: &Path) -> Option<String> {
    if !prerequisite::command_succeeds("go", &["version"]) {
        skip(Missing::Software(
            "go is not installed, so go tool pprof is not checked (apt-get install golang-go)",
        ));
        return None;
    }
    let output = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        .env("HOME", home)
        .env("PPROF_TMPDIR", home)
        .env_remove("PPROF_BINARY_PATH")
        .output()
        .expect("run go tool pprof");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "go tool pprof failed:\n{text}");
    Some(text)
}

/// heapdiff's folded lines `stack value` as (frames root first, value); a
/// line that is not one (a comment, a blank) is left out.
pub fn parse_folded(text: &str) -> Vec<(Vec<String>, i64)> {
    text.lines()
        .filter_map(|line| {
            let (stack, value) = line.rsplit_once(' ')?;
            let frames = stack.split(';').map(str::to_string).collect();
            Some((frames, value.parse().ok()?))
        })
        .collect()
}

/// The stacks of `metric` in a heapdiff `--format json` report, each as its
/// frames' names root first joined with `;`, as a folded line without its
/// value.
pub fn json_stacks(report: &serde_json::Value, metric: &str) -> Vec<String> {
    report["metrics"][metric]["stacks"]
        .as_array()
        .expect("stacks")
        .iter()
        .map(|entry| {
            let index = entry["stack"].as_u64().expect("a stack index") as usize;
            report["stacks"][index]
                .as_array()
                .expect("a stack's name indices")
                .iter()
                .map(|name| {
                    let name = name.as_u64().expect("a name index") as usize;
                    report["names"][name].as_str().expect("a name")
                })
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect()
}
