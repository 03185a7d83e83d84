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
    // ms, whether it forks a grandchild before leaving, child dumps
    // expected). 16 MiB in 4 KiB blocks is 32 sampling periods: a child's
    // samples are Poisson with mean 32, so it misses every one with odds
    // e^-32 = 1.3e-14, and one of the 24 children that must sample does
    // with 3e-13 per run (at 4 MiB, e^-8 per child: 8e-3 per run, which
    // happened). The default (`lived`) wants a child that sampled and ran
    // for a second.
    // A child's own forks do not restart its clock: the children that fork
    // a grandchild just before leaving still count as having run a second.
    let cases = [
        ("", "20", "16777216", "0", "", 0),
        ("", "2", "16777216", "1100", "", 2),
        ("", "2", "16777216", "1100", "grandchild", 2),
        ("", "2", "0", "1100", "", 0),
        ("prof_fork_final:sampled", "20", "0", "0", "", 0),
        ("prof_fork_final:sampled", "20", "16777216", "0", "", 20),
        ("prof_fork_final:all", "20", "0", "0", "", 20),
        ("prof_fork_final:none", "2", "16777216", "1100", "", 0),
    ];
    for (conf, children, bytes, life_ms, then, expected) in cases {
        let outcome = Run::new(&binary)
            .args([children, bytes, "exit", life_ms, then])
            .with_shim()
            .prof_conf(conf)
            .run();
        outcome.assert_success();
        assert_eq!(
            child_dumps(&outcome),
            expected,
            "PROF_CONF={conf} with {children} children of {bytes} bytes living {life_ms} ms {then}\n{}",
            outcome.context()
        );
        assert!(
            outcome.dump_files().iter().any(|f| f.pid == outcome.pid),
            "the parent always dumps"
        );
    }
}

/// Children of one parent sample independently: each draws its own
/// intervals after the fork (a child that kept its parent's generator and
/// countdown would sample exactly the allocations its siblings sample).
///
/// 40 children each allocate 1 MiB in 4 KiB blocks at a mean period of
/// 16 KiB: a block is sampled with p = 1 − e^(−1/4) ≈ 0.221, so a child's
/// own sample count is binomial(256, p): mean 56.6, variance
/// 256·p·(1−p) ≈ 44.1. Every child also carries the parent's samples, the
/// same number in each, so the variance of the children's totals is that of
/// their own counts. With 39 degrees of freedom the sample variance over
/// σ² lies in [0.348, 2.131] but with probability 10⁻⁴ (χ²₃₉'s 5·10⁻⁵ and
/// 1 − 5·10⁻⁵ quantiles over 39; the binomial's excess kurtosis, −0.0007,
/// moves them by far less than their third digit). Children that share
/// their parent's generator give 0 and fail surely; a variance twice the
/// binomial's fails with probability 0.36. (With 20 children and [0.30,
/// 2.4] a false failure was 2·10⁻³, not the 10⁻³ stated.)
#[test]
fn forked_children_sample_independently() {
    const CHILDREN: usize = 40;
    let (_dir, binary) = fork_children();
    let outcome = Run::new(&binary)
        .args([CHILDREN.to_string().as_str(), "1048576"])
        .with_shim()
        .prof_conf("lg_prof_sample:14,prof_fork_final:all")
        .run();
    outcome.assert_success();
    let counts: Vec<f64> = outcome
        .dumps()
        .iter()
        .filter(|(f, _)| f.pid != outcome.pid && f.trigger == "f")
        .map(|(_, d)| d.totals.samples_taken as f64)
        .collect();
    assert_eq!(counts.len(), CHILDREN, "{}", outcome.context());
    let n = CHILDREN as f64;
    let mean = counts.iter().sum::<f64>() / n;
    let variance = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let p = 1.0 - (-0.25f64).exp();
    let sigma2 = 256.0 * p * (1.0 - p);
    let ratio = variance / sigma2;
    eprintln!("children's samples: {counts:?}; variance {variance:.1} = {ratio:.2} σ²");
    assert!(
        (0.348..=2.131).contains(&ratio),
        "the children's sample counts vary {ratio:.2}× as much as independent sampling would \
         (counts {counts:?})"
    );
}
