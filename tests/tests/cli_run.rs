//! `heapsample run`: the command's exit status passes through, an existing
//! `LD_PRELOAD` is kept, the dumps go where `-o` says, and descendants write
//! dumps as `--descendants` says.

mod attach_common;

use std::os::unix::process::ExitStatusExt;

use attach_common::heapsample_path;
use heapsample_tests::{BuildOptions, Run, TempDir, compile_c, dump_files_in, shim_path};

fn child() -> String {
    compile_c("run_child.c", &BuildOptions::no_pie())
        .path
        .to_string_lossy()
        .into_owned()
}

#[test]
fn exit_status_preload_and_output_directory() {
    let child = child();
    let out = TempDir::new("run-out");
    let dir = out.path().join("dumps");
    let dir = dir.to_str().unwrap();
    let outcome = Run::new(heapsample_path())
        .args([
            "run",
            "-o",
            dir,
            "--lg-sample",
            "14",
            "--",
            &child,
            "2048",
            "0",
            "3",
        ])
        .env("LD_PRELOAD", "libm.so.6")
        .run();
    assert_eq!(outcome.status.code(), Some(3), "{}", outcome.context());
    let shim = shim_path();
    let expected = format!("LD_PRELOAD={}:libm.so.6\n", shim.display());
    assert_eq!(outcome.stdout, expected, "{}", outcome.context());
    let dumps = dump_files_in(std::path::Path::new(dir));
    assert_eq!(dumps.len(), 1, "{}", outcome.context());
    let dump = dumps[0].decode();
    assert_eq!(dump.lg_sample_period, 14);
    assert!(
        dump.config
            .contains(&format!("prof_prefix:{dir}/heapsample"))
    );
    assert!(
        dump.totals.bytes_allocated >= 2048 * 1024,
        "{}",
        dump.totals.bytes_allocated
    );
    // The closing lines name the dump and the commands to read it.
    assert!(
        outcome
            .stderr
            .contains(&format!("heapdiff {}", dumps[0].path.display()))
            && outcome.stderr.contains(&format!("heapdiff serve {dir}")),
        "{}",
        outcome.context()
    );
    // Nothing in the working directory.
    assert!(dump_files_in(outcome.dir.path()).is_empty());
}

#[test]
fn death_by_signal_passes_through() {
    let child = child();
    let out = TempDir::new("run-signal");
    let dir = out.path().to_str().unwrap();
    let outcome = Run::new(heapsample_path())
        .args(["run", "-o", dir, "--", &child, "0", "0", "-15"])
        .run();
    assert_eq!(
        outcome.status.signal(),
        Some(libc::SIGTERM),
        "{}",
        outcome.context()
    );
}

#[test]
fn a_missing_command_is_one_clear_line() {
    let outcome = Run::new(heapsample_path())
        .args(["run", "--", "/nonexistent/program"])
        .run();
    assert_eq!(outcome.status.code(), Some(1));
    assert_eq!(
        outcome.stderr.trim(),
        "heapsample: cannot run /nonexistent/program: No such file or directory (os error 2)"
    );
}

/// A script running one command that samples and lives 1.2 s and six
/// short ones that sample: by default only the script and the long one
/// write exit dumps; `--descendants all` keeps every one, `none` only the
/// script's. (bash, which ends through `exit` where dash calls `_exit`;
/// the script ends with a builtin, so bash does not exec its last command.)
#[test]
fn descendants_write_dumps_as_chosen() {
    let child = child();
    let script = format!(
        "{child} 4096 1200 0 >/dev/null; for i in 1 2 3 4 5 6; do {child} 4096 0 0 >/dev/null; done; echo done"
    );
    for (choice, expected) in [("lived", 2), ("all", 8), ("none", 1)] {
        let out = TempDir::new("run-descendants");
        let dir = out.path().to_str().unwrap();
        let outcome = Run::new(heapsample_path())
            .args([
                "run",
                "-o",
                dir,
                "--lg-sample",
                "14",
                "--descendants",
                choice,
            ])
            .args(["--", "/bin/bash", "-c", &script])
            .run();
        assert!(outcome.status.success(), "{}", outcome.context());
        let dumps = dump_files_in(out.path());
        let names: Vec<&str> = dumps.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(dumps.len(), expected, "--descendants {choice}: {names:?}");
        assert!(
            dumps.iter().any(|d| d.pid == outcome_child_pid(&outcome)),
            "the script's own dump is always written: {names:?}"
        );
    }
}

/// The pid of the command `heapsample run` started: the script's, named in
/// the closing line.
fn outcome_child_pid(outcome: &heapsample_tests::Outcome) -> u32 {
    let line = outcome
        .stderr
        .lines()
        .find(|l| l.trim_start().starts_with("heapdiff /"))
        .unwrap_or_else(|| panic!("no closing line: {}", outcome.context()));
    let name = line.rsplit('/').next().unwrap();
    name.split('.').nth(1).unwrap().parse().unwrap()
}
