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
