//! Multi-threaded programs under the shim: allocations freed by another
//! thread are recognised, per-thread attribution, and a dump at exit while
//! other threads are still allocating.

use heapsample_tests::*;

const THREADS: u32 = 8;
const BLOCKS: u32 = 2000;

/// At lg 0: every block allocated in thread_alloc_site (8 threads) and freed
/// by its neighbour thread is counted once and not live; the realloc site
/// (growing blocks received from another thread) leaves nothing live; each of
/// the 8 threads has its own stacks.
#[test]
fn cross_thread_frees_at_lg_prof_sample_0() {
    let program = compile_c("threads.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .args([THREADS.to_string(), BLOCKS.to_string()])
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let sites = parse_sites(&outcome.stdout);
    let (_, dump) = outcome.final_dump();
    let symbols = Symbols::of(&program);
    assert_sites_match(&dump, &symbols, &sites, "");
    let mut serials: Vec<u32> = stacks_in(&dump, &symbols, "thread_alloc_site")
        .iter()
        .map(|s| s.thread)
        .collect();
    serials.sort_unstable();
    serials.dedup();
    assert_eq!(
        serials.len(),
        THREADS as usize,
        "thread_alloc_site ran on {THREADS} threads, the dump attributes it to serials {serials:?}"
    );
    for serial in &serials {
        assert!(
            dump.threads
                .iter()
                .any(|t| t.serial == *serial && t.tid != 0),
            "thread serial {serial} has no ThreadInfo: {:?}",
            dump.threads
        );
    }
    assert!(
        dump.totals.threads_seen > u64::from(THREADS),
        "threads_seen {} (main + {THREADS} workers)",
        dump.totals.threads_seen
    );
}

/// Same at a period that samples a fraction: the live estimate of the site
/// must be exactly 0 (every sampled block was freed by another thread).
#[test]
fn cross_thread_frees_at_a_sparse_period() {
    let program = compile_c("threads.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .args([THREADS.to_string(), "20000".to_string()])
        .with_shim()
        .prof_conf("lg_prof_sample:14")
        .run();
    outcome.assert_success();
    let (_, dump) = outcome.final_dump();
    let table = per_function(&dump, &Symbols::of(&program));
    for site in ["thread_alloc_site", "thread_realloc_site"] {
        let c = table.get(site).copied().unwrap_or_default();
        assert_eq!(
            c.live_objects,
            0,
            "{site}: {} sampled objects still live though the program freed all\n{}",
            c.live_objects,
            render_per_function(&table)
        );
    }
    assert!(
        table
            .get("thread_alloc_site")
            .is_some_and(|c| c.alloc_objects > 100),
        "too few samples in thread_alloc_site\n{}",
        render_per_function(&table)
    );
}

/// The final dump runs while 4 detached threads keep allocating, reallocating
/// and freeing: no crash, no deadlock, a complete dump. Repeated because the
/// race is timing dependent.
#[test]
fn dump_at_exit_while_threads_allocate() {
    let program = compile_c("threads.c", &BuildOptions::no_pie());
    for conf in ["lg_prof_sample:19", "lg_prof_sample:0", "lg_prof_sample:6"] {
        for round in 0..3 {
            let outcome = Run::program(&program)
                .arg("busy-exit")
                .with_shim()
                .prof_conf(conf)
                .timeout(std::time::Duration::from_secs(30))
                .run();
            assert!(
                outcome.status.success(),
                "{conf}, round {round}: the process did not exit cleanly\n{}",
                outcome.context()
            );
            let (_, dump) = outcome.final_dump();
            assert!(dump.totals.allocations > 0);
        }
    }
}

/// Samples of 8 threads at the same moment (lined up on a barrier) while the
/// profiler's tables are made: at the default period the process's first
/// sample is one of these threads' (64 KiB blocks, about one sample every 8
/// blocks), the others' first samples wait for the tables, and no sample is
/// dropped; at lg 0 every allocation is recorded (exactly the 8,000 kept
/// blocks are live in their site).
#[test]
fn first_samples_of_several_threads_at_once() {
    let program = compile_c("first_samples.c", &BuildOptions::no_pie());
    let symbols = Symbols::of(&program);
    let every = Run::program(&program)
        .args(["8", "1000", "64"])
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    every.assert_success();
    assert_eq!(every.stdout, "kept 8000\n", "{}", every.context());
    let (_, dump) = every.final_dump();
    let live: u64 = stacks_in(&dump, &symbols, "worker")
        .iter()
        .map(|s| s.live_objects)
        .sum();
    assert_eq!(live, 8000, "live samples in worker\n{}", every.context());
    assert_eq!(dump.totals.samples_dropped, 0, "{}", every.context());
    // 8 threads x 512 blocks of 64 KiB at the default period (512 KiB):
    // about 8 samples per thread, the first ones at once.
    let sparse = Run::program(&program)
        .args(["8", "512", "65536"])
        .with_shim()
        .run();
    sparse.assert_success();
    let (_, dump) = sparse.final_dump();
    assert_eq!(dump.totals.samples_dropped, 0, "{}", sparse.context());
    assert!(dump.totals.samples_live > 0, "{}", sparse.context());
}

/// Exact counts per stack and per thread at lg 0 across thread exits and a
/// dump taken while threads allocate (threads_exact.c): 16 threads, each
/// allocating a count of its own along two stacks (sizes naming the thread);
/// 8 exit before the middle dump, 8 allocate during it and exit after.
/// The middle dump holds exactly what the exited threads did and what the
/// running ones did before it (their `kept_site`), and never more than
/// their truth for what they were doing during it (`churn_site`: a count
/// may lag, never be doubled); the final dump holds every thread's exact
/// counts, live and allocated.
#[test]
fn exact_counts_per_thread_across_exits_and_a_dump_in_the_middle() {
    const THREADS: u64 = 16;
    const EARLY: u64 = 8;
    let kept = |t: u64| 500 + 7 * t;
    let churn = |t: u64| 3000 + 11 * t;
    let program = compile_c("threads_exact.c", &BuildOptions::no_pie());
    let symbols = Symbols::of(&program);
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    assert_eq!(outcome.stdout, "dump rc=0\n", "{}", outcome.context());
    // (allocated, live) objects per thread of `function`, whose blocks are
    // `base + t` bytes: each record's bytes must name one thread.
    let per_thread = |dump: &heapsample_format::Dump, function: &str, base: u64| {
        let mut counts = std::collections::BTreeMap::<u64, (u64, u64)>::new();
        for stack in stacks_in(dump, &symbols, function) {
            let size = stack.alloc_bytes / stack.alloc_objects.max(1);
            assert_eq!(
                stack.alloc_bytes,
                stack.alloc_objects * size,
                "{function}: a record mixes block sizes (threads): {stack:?}"
            );
            assert_eq!(stack.live_bytes, stack.live_objects * size, "{stack:?}");
            let thread = size.checked_sub(base).filter(|&t| t < THREADS);
            let thread = thread.unwrap_or_else(|| panic!("{function}: size {size}: {stack:?}"));
            let entry = counts.entry(thread).or_default();
            entry.0 += stack.alloc_objects;
            entry.1 += stack.live_objects;
        }
        counts
    };
    let middle: Vec<_> = outcome
        .dumps()
        .into_iter()
        .filter(|(file, _)| file.pid == outcome.pid && file.trigger != "f")
        .collect();
    assert_eq!(
        middle.len(),
        1,
        "one dump in the middle\n{}",
        outcome.context()
    );
    let middle = &middle[0].1;
    let (_, last) = outcome.final_dump();
    for (name, dump) in [("middle", middle), ("final", &last)] {
        let kept_counts = per_thread(dump, "kept_site", 24);
        let expected: std::collections::BTreeMap<u64, (u64, u64)> =
            (0..THREADS).map(|t| (t, (kept(t), kept(t)))).collect();
        assert_eq!(
            kept_counts,
            expected,
            "{name} dump, kept_site: (allocated, live) per thread\n{}",
            render_per_function(&per_function(dump, &symbols))
        );
        let churn_counts = per_thread(dump, "churn_site", 48);
        for t in 0..THREADS {
            let (allocated, live) = churn_counts.get(&t).copied().unwrap_or_default();
            let exact = name == "final" || t < EARLY;
            if exact {
                assert_eq!(
                    (allocated, live),
                    (churn(t), 0),
                    "{name} dump, churn_site of thread {t}: {churn_counts:?}"
                );
            } else {
                assert!(
                    allocated <= churn(t) && live <= 1,
                    "{name} dump, churn_site of thread {t} running during it: \
                     {allocated} allocated, {live} live, truth at most {}",
                    churn(t)
                );
            }
        }
        assert_eq!(dump.totals.samples_dropped, 0, "{name} dump");
    }
}
