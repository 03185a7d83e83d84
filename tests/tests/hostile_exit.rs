//! Hostile programs: exit while other threads allocate and dump,
//! `_exit`, `vfork`/`posix_spawn` children, programs that close or `dup2`
//! over every descriptor, and programs that own SIGUSR2 while
//! `prof_signal:USR2` is set.

mod hostile_common;
use heapsample_tests::*;
use hostile_common::*;
use std::time::Duration;

fn program() -> Program {
    compile_c("hostile_exit.c", &BuildOptions::no_pie())
}

/// Four threads allocate and call heapsample_dump in a loop while main calls
/// exit(): the process exits 0, every dump left behind decodes, no temporary
/// file is left, the final dump exists. Repeated to vary the interleaving.
#[test]
fn exit_while_threads_allocate_and_dump() {
    let program = program();
    for (round, conf) in [
        "lg_prof_sample:0",
        "lg_prof_sample:10",
        "lg_prof_sample:14,lg_prof_interval:18",
    ]
    .iter()
    .cycle()
    .take(6)
    .enumerate()
    {
        let outcome = Run::program(&program)
            .args(["exit-race", "4", &(30 + 20 * round).to_string()])
            .with_shim()
            .prof_conf(*conf)
            .timeout(Duration::from_secs(60))
            .run();
        outcome.assert_success();
        assert!(
            outcome.heapsample_lines().is_empty(),
            "{}",
            outcome.context()
        );
        let dumps = outcome.dumps();
        assert!(
            dumps.iter().any(|(f, _)| f.trigger == "m"),
            "no manual dump was written by the racing threads\n{}",
            outcome.context()
        );
        let _ = outcome.final_dump();
        let leftovers: Vec<String> = outcome
            .dir
            .entries()
            .into_iter()
            .filter(|n| n.contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
}

/// `_exit(3)`: status 3, no final dump (documented), the manual dump made
/// before it decodes, nothing else on stderr.
#[test]
fn underscore_exit() {
    let outcome = Run::program(&program())
        .arg("_exit")
        .with_shim()
        .prof_conf("lg_prof_sample:8")
        .run();
    assert_eq!(outcome.status.code(), Some(3), "{}", outcome.context());
    assert!(
        outcome.stdout.contains("manual dump 0"),
        "{}",
        outcome.context()
    );
    let dumps = outcome.dumps();
    let triggers: Vec<&str> = dumps.iter().map(|(f, _)| f.trigger.as_str()).collect();
    assert_eq!(triggers, vec!["m"], "{}", outcome.context());
    assert!(
        outcome.heapsample_lines().is_empty(),
        "{}",
        outcome.context()
    );
}

fn check_children(mode: &str, expected: &[&str]) {
    let run = Run::program(&program())
        .arg(mode)
        .with_shim()
        .prof_conf("lg_prof_sample:8");
    let (_, profiled) = assert_same_behaviour(&run);
    for line in expected {
        assert!(
            profiled.stdout.contains(line),
            "missing {line:?}\n{}",
            profiled.context()
        );
    }
    assert!(
        profiled.heapsample_lines().is_empty(),
        "{}",
        profiled.context()
    );
    // The parent's final dump, and one final dump per exec'd child (each is
    // the same program under the inherited LD_PRELOAD).
    let _ = profiled.final_dump();
    let finals: Vec<u32> = profiled
        .dumps()
        .iter()
        .filter(|(f, _)| f.trigger == "f")
        .map(|(f, d)| {
            assert_eq!(f.pid, d.pid, "{} holds pid {}", f.name, d.pid);
            f.pid
        })
        .collect();
    assert!(
        finals.len() >= 2,
        "expected the child's final dump too: {finals:?}"
    );
}

#[test]
fn vfork_exec_children() {
    check_children(
        "vfork",
        &["vfork child status 7", "vfork failed-exec status 127"],
    );
}

#[test]
fn posix_spawn_children() {
    check_children("spawn", &["spawn child status 7", "spawn sh status 5"]);
}

/// The program closes every descriptor and opens three files, which get
/// descriptors 0, 1 and 2. With the default configuration the shim has
/// nothing to say and must not write into them.
#[test]
fn closed_descriptors_receive_no_stray_bytes() {
    let outcome = Run::program(&program())
        .args(["close-fds", "/dev/null/cannot/exist.prof"])
        .with_shim()
        .prof_conf("lg_prof_sample:10")
        .run();
    outcome.assert_success();
    let dir = outcome.dir.path();
    let file0 = std::fs::read_to_string(dir.join("file0.txt")).unwrap();
    assert!(
        file0.starts_with("program line\ndump rc "),
        "file0: {file0:?}"
    );
    // heapsample_dump to an impossible path reports an errno, not success.
    let rc = get(&file0, "rc");
    assert!(
        rc > 0,
        "heapsample_dump to an impossible path returned {rc}"
    );
    let text = std::fs::read_to_string(dir.join("file1.txt")).unwrap();
    assert_eq!(
        text, "program line\n",
        "file1.txt received bytes the program did not write"
    );
    let _ = outcome.final_dump();
}

/// Same program, but the failed manual dump makes the shim want to warn. The
/// descriptor 2 it would warn on is now the program's own data file
/// (`file2.txt`): the warning must not land in it.
#[test]
fn warning_is_not_written_into_a_file_that_reused_fd_2() {
    let outcome = Run::program(&program())
        .args(["close-fds", "/dev/null/cannot/exist.prof"])
        .with_shim()
        .prof_conf("lg_prof_sample:10")
        .run();
    outcome.assert_success();
    let text = std::fs::read_to_string(outcome.dir.path().join("file2.txt")).unwrap();
    assert_eq!(
        text, "program line\n",
        "the shim wrote its warning into the program's file that reuses descriptor 2"
    );
}

/// /dev/null dup2'ed over 0..200, then a file opened at 200+: the shim writes
/// nothing into it and still writes its dumps (to files it opens itself).
#[test]
fn dup2_dev_null_over_many_descriptors() {
    let outcome = Run::program(&program())
        .arg("dup2-null")
        .with_shim()
        .prof_conf("lg_prof_sample:10")
        .run();
    outcome.assert_success();
    let text = std::fs::read_to_string(outcome.dir.path().join("after.txt")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("program line"), "{text:?}");
    let last = lines.next().unwrap_or_default();
    assert!(last.starts_with("dump rc 0 fd "), "{text:?}");
    assert_eq!(lines.next(), None, "stray bytes: {text:?}");
    assert!(get(last, "fd") >= 200, "{text:?}");
    let dumps = outcome.dumps();
    assert!(dumps.iter().any(|(f, _)| f.trigger == "m"));
    let _ = outcome.final_dump();
}

/// prof_signal:USR2 and a program that installs its own SIGUSR2 handler
/// after start-up: every raise reaches the program's handler, the program
/// behaves as without the shim, and nothing crashes.
#[test]
fn program_owns_sigusr2() {
    let run = Run::program(&program())
        .arg("own-usr2")
        .with_shim()
        .prof_conf("prof_signal:USR2,lg_prof_sample:12");
    let (_, profiled) = assert_same_behaviour(&run);
    assert!(
        profiled.stdout.contains("usr2 handled 5"),
        "{}",
        profiled.context()
    );
    let _ = profiled.final_dump();
}

/// SIGUSR2 inherited as ignored across exec: the shim leaves it ignored
/// (raising it does nothing), says so in one warning, and makes no signal
/// dump.
#[test]
fn inherited_ignored_sigusr2_is_left_alone() {
    let outcome = Run::program(&program())
        .arg("usr2-ign-exec")
        .with_shim()
        .prof_conf("prof_signal:USR2")
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("usr2 ignored at start 1"),
        "{}",
        outcome.context()
    );
    assert!(
        outcome.stdout.contains("usr2 ignored at end 1"),
        "{}",
        outcome.context()
    );
    // Two processes, one warning each: before exec the program itself sets
    // SIGUSR2 to SIG_IGN (the shim notices the takeover); after exec the
    // inherited SIG_IGN is left alone.
    let lines = outcome.heapsample_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("installed its own handler for signal USR2")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("signal USR2 already has a handler")),
        "{lines:?}"
    );
    assert!(outcome.dumps().iter().all(|(f, _)| f.trigger != "s"));
}

/// A library preloaded after the shim registers an atexit handler that runs
/// after the shim's exit dump and allocates, reallocs and frees: the program
/// exits 0 with its output intact.
#[test]
fn allocations_after_the_exit_dump() {
    let late = compile_shared("hostile_late_lib.c");
    let program = compile_cxx("hostile_cxx.cpp", &BuildOptions::no_pie());
    let run = Run::program(&program)
        .arg("300")
        .preload(Preload::ShimThen(vec![late.clone()]))
        .prof_conf("lg_prof_sample:0");
    let reference = Run::program(&program)
        .arg("300")
        .preload(Preload::Only(vec![late]))
        .run();
    let profiled = run.run();
    profiled.assert_success();
    reference.assert_success();
    assert_eq!(profiled.stdout, reference.stdout, "{}", profiled.context());
    assert!(
        profiled.stdout.contains("late atexit made 5120"),
        "{}",
        profiled.context()
    );
    assert!(
        profiled.heapsample_lines().is_empty(),
        "{}",
        profiled.context()
    );
    let (_, dump) = profiled.final_dump();
    assert_eq!(sampled_objects(&dump), dump.totals.samples_taken);
}
