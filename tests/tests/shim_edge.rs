//! Allocator contracts under the shim (tests/programs/edge.c): calloc and
//! reallocarray overflow, alignments of posix_memalign / aligned_alloc /
//! memalign / valloc / pvalloc, realloc grow/shrink/NULL/0, malloc(0),
//! free(NULL), errno preserved across free, malloc_usable_size.

use heapsample_tests::*;

fn check_all_pass(outcome: &Outcome) {
    let failed: Vec<&str> = outcome
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    assert!(
        failed.is_empty(),
        "allocator contract broken under the shim:\n{}\n{}",
        failed.join("\n"),
        outcome.context()
    );
    let passed = outcome
        .stdout
        .lines()
        .filter(|l| l.starts_with("PASS"))
        .count();
    assert!(
        passed >= 40,
        "only {passed} checks ran\n{}",
        outcome.context()
    );
    outcome.assert_success();
}

/// The program passes without the shim (so the test itself is sound), and
/// with it: same output, every check PASS.
#[test]
fn edge_cases_pass_under_the_shim() {
    let program = compile_c("edge.c", &BuildOptions::no_pie());
    let (reference, profiled) = assert_same_behaviour(&Run::program(&program).with_shim());
    check_all_pass(&reference);
    check_all_pass(&profiled);
    profiled.final_dump();
}

/// With every allocation sampled, every free takes the slow path (table
/// probe, errno save/restore) and every allocation records a backtrace.
#[test]
fn edge_cases_pass_with_every_allocation_sampled() {
    let program = compile_c("edge.c", &BuildOptions::no_pie());
    let (_, profiled) = assert_same_behaviour(
        &Run::program(&program)
            .with_shim()
            .prof_conf("lg_prof_sample:0"),
    );
    check_all_pass(&profiled);
    let (_, dump) = profiled.final_dump();
    // The failed calls (overflow, huge sizes) allocated nothing: no sample
    // may claim billions of bytes.
    for s in &dump.stacks {
        assert!(
            s.alloc_bytes < 1 << 40,
            "a stack claims {} bytes allocated: a failed allocation was recorded",
            s.alloc_bytes
        );
    }
}

/// The same checks with a period that samples some but not all.
#[test]
fn edge_cases_pass_at_a_small_period() {
    let program = compile_c("edge.c", &BuildOptions::no_pie());
    let (_, profiled) = assert_same_behaviour(
        &Run::program(&program)
            .with_shim()
            .prof_conf("lg_prof_sample:8"),
    );
    check_all_pass(&profiled);
}
