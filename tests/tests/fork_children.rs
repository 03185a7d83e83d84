//! `prof_fork_final`: which forked children write an exit dump.

use std::path::PathBuf;
use std::process::Command;

use heapsample_tests::*;

/// The benchmark's fork-heavy workload, built here (in the returned
/// directory).
fn fork_children() -> (TempDir, PathBuf) {
    let out = TempDir::new("fork-children-bin");
    let binary = out.path().join("fork_children");
    let status = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(workspace_root().join("bench/workloads/fork_children.c"))
        .status()
        .expect("gcc");
    assert!(status.success());
    (out, binary)
}

/// Dumps of children (any pid but the parent's).
fn child_dumps(outcome: &Outcome) -> usize {
    outcome
        .dump_files()
        .iter()
        .filter(|f| f.pid != outcome.pid && f.trigger == "f")
        .count()
}

#[test]
fn which_forked_children_dump_at_exit() {
    let (_dir, binary) = fork_children();
    // (option, children, bytes each child allocates, how long each lives in
    // ms, child dumps expected). 4 MiB is 8 sampling periods: a child misses
    // every sample with e^-8 odds. The default (`lived`) wants a child that
    // sampled and ran for a second.
    let cases = [
        ("", "20", "4194304", "0", 0),
        ("", "2", "4194304", "1100", 2),
        ("", "2", "0", "1100", 0),
        ("prof_fork_final:sampled", "20", "0", "0", 0),
        ("prof_fork_final:sampled", "20", "4194304", "0", 20),
        ("prof_fork_final:all", "20", "0", "0", 20),
        ("prof_fork_final:none", "2", "4194304", "1100", 0),
    ];
    for (conf, children, bytes, life_ms, expected) in cases {
        let outcome = Run::new(&binary)
            .args([children, bytes, "exit", life_ms])
            .with_shim()
            .prof_conf(conf)
            .run();
        outcome.assert_success();
        assert_eq!(
            child_dumps(&outcome),
            expected,
            "PROF_CONF={conf} with {children} children of {bytes} bytes living {life_ms} ms\n{}",
            outcome.context()
        );
        assert!(
            outcome.dump_files().iter().any(|f| f.pid == outcome.pid),
            "the parent always dumps"
        );
    }
}
