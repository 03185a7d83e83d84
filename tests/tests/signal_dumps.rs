//! The dump signal in forked children and beside Python's subprocesses, and
//! no profiler thread before a background dump is due (so
//! single-threaded-only calls keep working).

use heapsample_tests::*;

fn program() -> Program {
    compile_c("signal_fork.c", &BuildOptions::no_pie())
}

/// Pre-fork workers inherit the dump signal's handler: SIGUSR2 to each of
/// six forked workers (three blocked in a sleep loop, three spinning in
/// their own code) writes that worker's signal dump, and the parent's own
/// signal still works afterwards.
#[test]
fn signal_dumps_work_in_forked_children() {
    let dir = TempDir::new("signal-fork");
    let prefix = dir.path().join("d");
    let outcome = Run::program(&program())
        .arg(&prefix)
        .arg("6")
        .with_shim()
        .prof_conf(format!("prof_signal:USR2,prof_prefix:{}", prefix.display()))
        .timeout(std::time::Duration::from_secs(120))
        .run();
    for worker in 0..6 {
        assert!(
            outcome
                .stdout
                .contains(&format!("worker {worker} signal_dump=1")),
            "{}",
            outcome.context()
        );
    }
    assert!(
        outcome.stdout.contains("parent signal_dump=1"),
        "{}",
        outcome.context()
    );
    outcome.assert_success();
    // Each worker's signal dump is its own.
    for file in dump_files_in(dir.path())
        .iter()
        .filter(|f| f.trigger == "s")
    {
        assert_eq!(file.decode().pid, file.pid, "{}", file.name);
    }
}

/// `unshare -U` fails with EINVAL in a multi-threaded process: under every
/// option that may dump in the background it must still work until a dump
/// is due, and the program must see one thread.
#[test]
fn no_thread_before_a_background_dump_is_due() {
    if !prerequisite::command_succeeds("unshare", &["-U", "true"]) {
        return skip(Missing::Privilege(
            "unshare -U does not work here even without the shim",
        ));
    }
    for conf in [
        "prof_signal:USR2",
        "lg_prof_interval:30",
        "prof_gdump:true",
        "prof_signal:USR2,lg_prof_interval:30,prof_gdump:true,prof_exact:true",
    ] {
        let outcome = Run::new("unshare")
            .args(["-U", "true"])
            .with_shim()
            .prof_conf(conf)
            .run();
        assert!(outcome.status.success(), "{conf}: {}", outcome.context());
        assert!(
            outcome.heapsample_lines().is_empty(),
            "{}",
            outcome.context()
        );
        let threads = Run::program(&program())
            .arg("threads")
            .with_shim()
            .prof_conf(conf)
            .run();
        threads.assert_success();
        assert!(
            threads.stdout.contains("threads=1"),
            "{conf}: {}",
            threads.context()
        );
    }
}

/// CPython starts subprocesses with `vfork`; the child resets every signal
/// handler before it `exec`s, running in its parent's memory. That is not
/// the program taking the dump signal over: no warning, and the signal
/// still dumps. When the program does take it over afterwards, exactly one
/// warning says so, after that moment.
#[test]
fn python_subprocesses_leave_signal_dumps_on_without_a_warning() {
    let python = if std::path::Path::new("/usr/bin/python3").is_file() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let dir = TempDir::new("signal-python");
    let prefix = dir.path().join("py");
    let outcome = Run::new(python)
        .arg(programs_dir().join("signal_subprocess.py"))
        .arg(&prefix)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .with_shim()
        .prof_conf(format!("prof_signal:USR2,prof_prefix:{}", prefix.display()))
        .run();
    outcome.assert_success();
    assert!(
        outcome
            .stdout
            .contains("signal dumps after subprocesses: 1"),
        "{}",
        outcome.context()
    );
    let stderr: Vec<&str> = outcome.stderr.lines().collect();
    let warnings: Vec<usize> = (0..stderr.len())
        .filter(|&i| stderr[i].starts_with("<heapsample>:"))
        .collect();
    let taken_over = stderr
        .iter()
        .position(|line| *line == "taking the signal over")
        .expect("the script announces it");
    assert_eq!(warnings.len(), 1, "{}", outcome.context());
    assert!(
        warnings[0] > taken_over && stderr[warnings[0]].contains("installed its own handler"),
        "{}",
        outcome.context()
    );
}
