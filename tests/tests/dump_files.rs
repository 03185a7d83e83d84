//! What dumps may replace, what they are called when a pid repeats, what
//! they print, what killed dumps leave behind, and what a dump in progress
//! costs a `fork` on another thread.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;

use heapsample_tests::*;

fn program() -> Program {
    compile_c("dump_targets.c", &BuildOptions::no_pie())
}

fn explicit_dump_to(target: &Path) -> Outcome {
    let outcome = Run::program(&program())
        .arg("explicit")
        .arg(target)
        .with_shim()
        .run();
    outcome.assert_success();
    outcome
}

/// `heapsample_dump` to a FIFO or a device node fails with EINVAL and one
/// warning, and leaves the node as it was (as root, a dump to `/dev/null`
/// would otherwise replace the system's `/dev/null` with a regular file).
#[test]
fn non_regular_targets_are_refused() {
    let dir = TempDir::new("targets");
    let fifo = dir.path().join("fifo");
    let fifo_c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo_c.as_ptr(), 0o644) }, 0, "mkfifo");
    let mut targets = vec![fifo];
    let device = dir.path().join("null");
    let device_path = path_str(&device);
    if prerequisite::command_succeeds("mknod", &[device_path, "c", "1", "3"]) {
        targets.push(device);
    } else {
        skip(Missing::Privilege(
            "mknod is not permitted here: the device-node case is not checked",
        ));
    }
    for target in targets {
        let before = std::fs::symlink_metadata(&target).unwrap().file_type();
        let outcome = explicit_dump_to(&target);
        assert!(outcome.stdout.contains("rc=22"), "{}", outcome.context());
        let lines = outcome.heapsample_lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("not a regular file"), "{lines:?}");
        let after = std::fs::symlink_metadata(&target).unwrap().file_type();
        assert_eq!(
            (before.is_fifo(), before.is_char_device()),
            (after.is_fifo(), after.is_char_device()),
            "{} was replaced",
            target.display()
        );
        let leftovers: Vec<String> = dir
            .entries()
            .into_iter()
            .filter(|name| name.contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
    // A regular file is still replaced by the dump.
    let regular = dir.path().join("regular.prof");
    std::fs::write(&regular, "old").unwrap();
    let outcome = explicit_dump_to(&regular);
    assert!(outcome.stdout.contains("rc=0"), "{}", outcome.context());
    format::decode(&std::fs::read(&regular).unwrap()).expect("a dump replaced the file");
}

/// Three runs that are each pid 1 of their own pid namespace (as every
/// container's first process is) leave three exit dumps, and their names
/// sort in the order the runs happened.
#[test]
fn a_repeated_pid_never_replaces_a_dump() {
    if !prerequisite::command_succeeds("unshare", &["--pid", "--fork", "true"]) {
        return skip(Missing::Privilege("unshare --pid is not permitted here"));
    }
    let dir = TempDir::new("pid-reuse");
    let prefix = dir.path().join("d");
    for _ in 0..3 {
        let outcome = Run::new("unshare")
            .args(["--pid", "--fork", "env"])
            .arg(format!("LD_PRELOAD={}", shim_path().display()))
            .arg(format!("PROF_CONF=prof_prefix:{}", prefix.display()))
            .arg(&program().path)
            .args(["leak", "10"])
            .run();
        outcome.assert_success();
    }
    let mut files = dump_files_in(dir.path());
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(files.len(), 3, "{names:?}");
    assert!(files.iter().all(|f| f.pid == 1), "{names:?}");
    assert_eq!(files[0].generation, None, "{names:?}");
    let times: Vec<u64> = files.iter().map(|f| f.decode().time_unix_ns).collect();
    assert!(
        times.windows(2).all(|pair| pair[0] < pair[1]),
        "names do not sort in time order: {names:?} {times:?}"
    );
}

/// A newline in `prof_prefix` cannot forge a `<heapsample>:` line: the leak
/// summary quotes the path escaped, like every other message.
#[test]
fn a_newline_in_the_prefix_is_escaped() {
    let dir = TempDir::new("newline");
    let prefix = format!("{}/a\n<heapsample>: forged", dir.path().display());
    let outcome = Run::program(&program())
        .args(["leak", "20000"])
        .with_shim()
        .prof_conf(format!("prof_leak:true,prof_prefix:{prefix}"))
        .run();
    outcome.assert_success();
    let lines = outcome.heapsample_lines();
    assert_eq!(lines.len(), 2, "{}", outcome.context());
    assert!(
        lines
            .iter()
            .all(|line| !line.starts_with("<heapsample>: forged")),
        "{lines:?}"
    );
    assert!(lines[1].contains(r"/a\n<heapsample>: forged."), "{lines:?}");
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".prof.tmp."))
        .collect()
}

/// Processes killed with SIGKILL while writing large dumps leave their
/// temporary files; the next process dumping with the same prefix removes
/// them, but not the temporary file of a process that is still running.
#[test]
fn temporaries_of_killed_dumps_are_removed_later() {
    let dir = TempDir::new("killed");
    let prefix = dir.path().join("k");
    let conf = format!("lg_prof_sample:0,prof_prefix:{}", prefix.display());
    let mut kills = 0;
    while temporaries(dir.path()).is_empty() && kills < 20 {
        let mut child = Command::new(&program().path)
            .args(["big", "15", "1000"])
            .current_dir(dir.path())
            .env("LD_PRELOAD", shim_path())
            .env("PROF_CONF", &conf)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start");
        // Into the dump loop, then a moment that may fall inside a write.
        std::thread::sleep(std::time::Duration::from_millis(900 + 137 * kills));
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
    }
    let left = temporaries(dir.path());
    assert!(!left.is_empty(), "{kills} kills left no temporary file");
    eprintln!("{kills} kills left {left:?}");
    // A temporary file named after a running process (this one) stays.
    let live = format!("k.1.000000.m0.prof.tmp.{}", std::process::id());
    std::fs::write(dir.path().join(&live), "in progress").unwrap();
    let later = Run::program(&program())
        .args(["leak", "1"])
        .with_shim()
        .prof_conf(format!("prof_prefix:{}", prefix.display()))
        .run();
    later.assert_success();
    assert_eq!(temporaries(dir.path()), vec![live]);
}

fn value(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

/// While another thread writes ~20 MB dumps in a loop, `fork` does not wait
/// for them: its median latency stays far below a dump's duration (a fork
/// that waited for the dump in progress would take half a dump on average).
#[test]
fn fork_does_not_wait_for_a_dump_in_progress() {
    let dir = TempDir::new("forklat");
    let outcome = Run::program(&program())
        .args(["forklat", "17", "40"])
        .arg(dir.path().join("loop.prof"))
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_final:false")
        .timeout(std::time::Duration::from_secs(120))
        .run();
    outcome.assert_success();
    let line = |what: &str| {
        outcome
            .stdout
            .lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what} line\n{}", outcome.context()))
            .to_string()
    };
    let size = std::fs::metadata(dir.path().join("loop.prof"))
        .unwrap()
        .len();
    let (alone, during, dumps) = (line("alone"), line("during"), line("dumps "));
    eprintln!("dump of {size} bytes\n{alone}\n{during}\n{dumps}");
    assert!(size > 15 << 20, "the dump is only {size} bytes");
    let dump_median = value(&dumps, "median_us=");
    let fork_median = value(&during, "median_us=");
    let bound = (dump_median / 20.0).max(5000.0);
    assert!(
        fork_median < bound,
        "fork waited for dumps: median {fork_median} us during dumps of {dump_median} us"
    );
}
