//! Hostile programs: the next allocator fails. `libfailing.so`
//! (tests/programs/hostile_failing_lib.c), preloaded after the shim, returns
//! NULL with ENOMEM on every 7th call once armed; and a run under an
//! address-space limit (`prlimit --as`, and `setrlimit` inside the program).
//! NULL and errno must reach the program, its error handling must work, and
//! the shim must not take the process down: dumps still decode, or fail with
//! one warning.

mod hostile_common;
use heapsample_tests::*;
use hostile_common::*;

fn program() -> Program {
    compile_c("hostile_oom.c", &BuildOptions::no_pie())
}

fn check_failing_run(outcome: &Outcome) {
    assert!(
        outcome.status.success(),
        "the program died over a failing allocator (a program that handles NULL must survive \
         the profiler)\n{}",
        outcome.context()
    );
    let out = &outcome.stdout;
    assert!(get(out, "nulls") > 0, "{out}");
    assert_eq!(get(out, "nulls"), get(out, "enomem"), "{out}");
    assert_eq!(get(out, "bad_errno"), 0, "{out}");
    assert_eq!(get(out, "realloc_lost"), 0, "{out}");
    assert!(get(out, "realloc_kept") > 0, "{out}");
    assert!(
        outcome.heapsample_lines().len() <= 1,
        "{}",
        outcome.context()
    );
    for (_, dump) in outcome.dumps() {
        assert!(dump.totals.allocations > 0);
    }
}

/// Reference: the program over libfailing alone handles every NULL.
#[test]
fn failing_allocator_without_the_shim() {
    let failing = compile_shared("hostile_failing_lib.c");
    let outcome = Run::program(&program())
        .arg("failing")
        .preload(Preload::Only(vec![failing]))
        .run();
    check_failing_run(&outcome);
}

/// The shim between the program and a failing allocator, at the default
/// period and at lg_prof_sample:0 (every allocation takes the sample path,
/// which itself allocates from the failing allocator).
#[test]
fn failing_next_allocator_default_period() {
    let failing = compile_shared("hostile_failing_lib.c");
    let outcome = Run::program(&program())
        .arg("failing")
        .preload(Preload::ShimThen(vec![failing]))
        .run();
    check_failing_run(&outcome);
}

#[test]
fn failing_next_allocator_every_allocation_sampled() {
    let failing = compile_shared("hostile_failing_lib.c");
    let outcome = Run::program(&program())
        .arg("failing")
        .preload(Preload::ShimThen(vec![failing]))
        .prof_conf("lg_prof_sample:0")
        .run();
    check_failing_run(&outcome);
}

/// Armed from process start (FAILING_START), so the shim's start-up and
/// every later allocation of anyone may fail; the program only mallocs and
/// checks.
#[test]
fn failing_from_start() {
    let failing = compile_shared("hostile_failing_lib.c");
    let outcome = Run::program(&program())
        .args(["checked", "20000"])
        .preload(Preload::ShimThen(vec![failing]))
        .env("FAILING_START", "200")
        .env("FAILING_EVERY", "7")
        .prof_conf("lg_prof_sample:12")
        .run();
    assert!(outcome.status.success(), "{}", outcome.context());
    assert!(get(&outcome.stdout, "nulls") > 0, "{}", outcome.context());
    assert_eq!(get(&outcome.stdout, "bad_errno"), 0);
    assert!(
        outcome.heapsample_lines().len() <= 1,
        "{}",
        outcome.context()
    );
}

/// `setrlimit(RLIMIT_AS)` inside the program (after the shim mapped its
/// tables): huge requests fail with ENOMEM, small ones work, the manual and
/// the exit dump are written.
#[test]
fn address_space_limit_set_by_the_program() {
    let run = Run::program(&program())
        .args(["limited", "256"])
        .with_shim()
        .prof_conf("lg_prof_sample:12");
    let (reference, profiled) = assert_same_behaviour(&run);
    assert_eq!(
        get(&reference.stdout, "refused"),
        8,
        "{}",
        reference.context()
    );
    assert_eq!(get(&profiled.stderr, "dump"), 0, "{}", profiled.context());
    assert!(
        profiled.heapsample_lines().is_empty(),
        "{}",
        profiled.context()
    );
    let _ = profiled.final_dump();
}

/// Under `prlimit --as` from the start, too small for the shim's tables at
/// lg_prof_sample:0 (they are mapped at start-up): the program behaves as
/// without the shim, and the shim either profiles or says once that it
/// cannot.
#[test]
fn address_space_limit_from_the_start() {
    if std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("prlimit (util-linux) is needed for this test");
    }
    let program = program();
    for (limit, conf) in [
        ("400000000", "lg_prof_sample:0"),
        ("200000000", "lg_prof_sample:12"),
    ] {
        let run = Run::new("prlimit")
            .arg(format!("--as={limit}"))
            .arg(&program.path)
            .arg("limited")
            .with_shim()
            .prof_conf(conf);
        let (_, profiled) = assert_same_behaviour(&run);
        let lines = profiled.heapsample_lines();
        assert!(lines.len() <= 1, "{lines:?}");
        eprintln!(
            "--as={limit} {conf}: {:?} {}",
            lines,
            profiled.stdout.trim()
        );
        for (_, dump) in profiled.dumps() {
            assert!(dump.totals.allocations > 0);
        }
    }
}
