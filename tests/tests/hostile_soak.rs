//! Soak. 16 threads churn random-sized blocks with interval dumps
//! every 4 MiB allocated; the process's RSS (sampled by the program every
//! 250 ms) stays flat and every dump decodes.
//!
//! CI mode runs 12 s. `HEAPSAMPLE_SOAK_SECS=600` runs longer.

mod hostile_common;
use heapsample_tests::*;
use std::time::Duration;

#[test]
fn sixteen_threads_churn_with_interval_dumps() {
    let seconds: u64 = std::env::var("HEAPSAMPLE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let program = compile_c("hostile_soak.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .args([seconds.to_string(), "16".to_string()])
        .with_shim()
        .prof_conf("lg_prof_interval:22,lg_prof_sample:16")
        .timeout(Duration::from_secs(seconds * 3 + 60))
        .run();
    outcome.assert_success();
    assert!(
        outcome.heapsample_lines().is_empty(),
        "{}",
        outcome.context()
    );
    let rss: Vec<u64> = outcome
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("rss_kb "))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert!(rss.len() >= 8, "{}", outcome.context());
    // Skip the first second (warm-up: arenas and tables get touched), then
    // compare the first and the last third.
    let steady = &rss[4..];
    let third = steady.len() / 3;
    let early = *steady[..third].iter().max().unwrap();
    let late = *steady[steady.len() - third..].iter().max().unwrap();
    let dumps = outcome.dumps();
    let intervals = dumps.iter().filter(|(f, _)| f.trigger == "i").count();
    eprintln!(
        "soak {seconds}s: {intervals} interval dumps, RSS KiB early max {early}, late max {late}, all {rss:?}"
    );
    assert!(intervals >= 5, "only {intervals} interval dumps");
    assert!(
        late <= early + early / 10 + 4096,
        "RSS grew from {early} KiB to {late} KiB during the soak: {rss:?}"
    );
    let _ = outcome.final_dump();
}
