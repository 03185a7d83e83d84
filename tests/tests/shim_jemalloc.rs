//! `LD_PRELOAD="libheapsample.so libjemalloc.so.2"`: the shim forwards to
//! jemalloc (the next definition), programs run unchanged, and the counts are
//! right: jemalloc's own operator new/delete are interposed too and each
//! allocation is counted exactly once.
//!
//! Skipped (with a message) when libjemalloc2 is not installed, except under
//! `CI`, where it is a failure.

use heapsample_tests::*;

/// Run `run` with jemalloc alone (the reference: usable sizes, realloc(p, 0)
/// are jemalloc's) and with the shim in front of it; same stdout and status.
fn same_as_jemalloc_alone(run: Run, jemalloc: &std::path::Path) -> Outcome {
    let reference = run
        .clone()
        .preload(Preload::Only(vec![jemalloc.to_path_buf()]))
        .run();
    let profiled = run
        .preload(Preload::ShimThen(vec![jemalloc.to_path_buf()]))
        .run();
    assert_eq!(
        describe_status(&profiled.status),
        describe_status(&reference.status),
        "exit status differs\n--- shim+jemalloc ---\n{}\n--- jemalloc ---\n{}",
        profiled.context(),
        reference.context()
    );
    assert!(
        profiled.stdout == reference.stdout,
        "stdout differs: {}\n--- shim+jemalloc ---\n{}\n--- jemalloc ---\n{}",
        first_difference(&reference.stdout, &profiled.stdout),
        profiled.context(),
        reference.context()
    );
    profiled
}

fn assert_jemalloc_loaded(dump: &heapsample_format::Dump) {
    assert!(
        dump.modules.iter().any(|m| m.path.contains("libjemalloc")),
        "libjemalloc is not in the dump's module map: {:?}",
        dump.modules.iter().map(|m| &m.path).collect::<Vec<_>>()
    );
}

#[test]
fn c_program_on_jemalloc_exact_counts() {
    let Some(jemalloc) = jemalloc_path() else {
        return;
    };
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let profiled = same_as_jemalloc_alone(
        Run::program(&program).prof_conf("lg_prof_sample:0"),
        &jemalloc,
    );
    let (_, dump) = profiled.final_dump();
    assert_jemalloc_loaded(&dump);
    let table = per_function(&dump, &Symbols::of(&program));
    let problems = site_mismatches(
        &sites_with_usable(&profiled),
        &table,
        SiteCheck {
            live: true,
            alloc: true,
            // the program measured jemalloc's usable sizes through the shim
            usable: true,
        },
    );
    assert!(
        problems.is_empty(),
        "counts on jemalloc differ from the program's:\n{}\n{}",
        problems.join("\n"),
        render_per_function(&table)
    );
}

/// C++ on jemalloc: jemalloc defines operator new/delete itself, so unless
/// the shim interposes them, `new` bypasses it (0 counted); counting both in
/// operator new and in a malloc it calls would double them.
#[test]
fn cxx_program_on_jemalloc_counts_new_once() {
    let Some(jemalloc) = jemalloc_path() else {
        return;
    };
    let program = compile_cxx("cxx.cpp", &BuildOptions::no_pie());
    let profiled = same_as_jemalloc_alone(
        Run::program(&program).prof_conf("lg_prof_sample:0"),
        &jemalloc,
    );
    let (_, dump) = profiled.final_dump();
    assert_jemalloc_loaded(&dump);
    let table = per_function(&dump, &Symbols::of(&program));
    let problems = site_mismatches(
        &parse_sites(&profiled.stdout),
        &table,
        SiteCheck {
            live: true,
            alloc: true,
            usable: false,
        },
    );
    assert!(
        problems.is_empty(),
        "C++ counts on jemalloc differ from the program's (operator new/delete interposition):\n{}\n{}",
        problems.join("\n"),
        render_per_function(&table)
    );
}

/// Behaviour at the default period, C++ and the threaded program.
#[test]
fn programs_run_unchanged_on_jemalloc() {
    let Some(jemalloc) = jemalloc_path() else {
        return;
    };
    let cxx = compile_cxx("cxx.cpp", &BuildOptions::no_pie());
    let profiled = same_as_jemalloc_alone(Run::program(&cxx), &jemalloc);
    assert!(
        profiled.heapsample_lines().is_empty(),
        "{}",
        profiled.context()
    );
    profiled.final_dump();
    let threads = compile_c("threads.c", &BuildOptions::no_pie());
    let profiled = same_as_jemalloc_alone(Run::program(&threads), &jemalloc);
    profiled.final_dump();
}

/// The allocator contracts hold on jemalloc too (pvalloc skipped: jemalloc
/// does not define it, so glibc's pvalloc memory would reach jemalloc's free
/// with or without the shim).
#[test]
fn edge_cases_pass_on_jemalloc() {
    let Some(jemalloc) = jemalloc_path() else {
        return;
    };
    let program = compile_c("edge.c", &BuildOptions::no_pie());
    for conf in ["lg_prof_sample:19", "lg_prof_sample:0"] {
        let profiled = same_as_jemalloc_alone(
            Run::program(&program).arg("no-pvalloc").prof_conf(conf),
            &jemalloc,
        );
        let failed: Vec<&str> = profiled
            .stdout
            .lines()
            .filter(|l| l.starts_with("FAIL"))
            .collect();
        assert!(failed.is_empty(), "{conf}: {failed:?}");
        profiled.assert_success();
    }
}
