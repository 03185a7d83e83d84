//! Hostile programs: 1,000 short-lived threads, each allocating and
//! exiting. The program works, no sample is lost, and the shim's memory stays
//! within a stated bound.
//!
//! The bound. The shim's own memory is (a) the tables it maps with `mmap`,
//! reported in every dump as `totals.profiler_bytes` (pages are touched
//! lazily, so resident memory is at most that), plus (b) heap blocks from the
//! next allocator: one pooled 2 KiB `ThreadExt` per thread alive at the same
//! time, one `ThreadInfo` (~64 B) per thread ever set up, and the dump being
//! encoded at exit (about twice the dump's size). So
//!
//! `VmHWM(shim) - VmHWM(plain) <= profiler_bytes + 2 KiB * alive + 128 B * threads + 2 * dump + 8 MiB`
//!
//! (8 MiB of slack for glibc arenas and the shim's code). The test also
//! prints the measured numbers.

mod hostile_common;
use heapsample_tests::*;
use hostile_common::*;

const THREADS: u64 = 1000;
const ALIVE: u64 = 50;

#[test]
fn thousand_short_lived_threads_bounded_memory_and_no_lost_sample() {
    let program = compile_c("hostile_threads.c", &BuildOptions::no_pie());
    let run = Run::program(&program)
        .args([THREADS.to_string(), ALIVE.to_string()])
        .with_shim()
        .prof_conf("lg_prof_sample:0");
    let plain = run.without_shim().run();
    plain.assert_success();
    let profiled = run.run();
    profiled.assert_success();
    assert!(
        profiled.heapsample_lines().is_empty(),
        "{}",
        profiled.context()
    );
    for key in ["threads", "thread_allocations"] {
        assert_eq!(get(&plain.stdout, key), get(&profiled.stdout, key), "{key}");
    }
    assert_eq!(get(&profiled.stdout, "threads"), THREADS as i64);
    let (file, dump) = profiled.final_dump();
    let totals = &dump.totals;
    assert_eq!(totals.samples_dropped, 0, "{totals:?}");
    assert_eq!(
        sampled_objects(&dump),
        totals.samples_taken,
        "at lg_prof_sample:0 the stacks must hold every sample taken: {totals:?}"
    );
    let thread_allocs = get(&profiled.stdout, "thread_allocations") as u64;
    assert!(
        totals.samples_taken >= thread_allocs,
        "samples_taken {} < the {thread_allocs} allocations the threads made",
        totals.samples_taken
    );
    assert!(
        totals.threads_seen > THREADS,
        "threads_seen {}",
        totals.threads_seen
    );

    let dump_len = std::fs::metadata(&file.path).map(|m| m.len()).unwrap_or(0);
    let hwm_plain = get(&plain.stdout, "vmhwm_kb") as u64 * 1024;
    let hwm_shim = get(&profiled.stdout, "vmhwm_kb") as u64 * 1024;
    let bound = totals.profiler_bytes + 2048 * ALIVE + 128 * THREADS + 2 * dump_len + (8 << 20);
    let extra = hwm_shim.saturating_sub(hwm_plain);
    eprintln!(
        "1000 threads, lg_prof_sample:0: VmHWM plain {} KiB, with shim {} KiB (+{} KiB); \
         profiler_bytes {} KiB; dump {} KiB; bound {} KiB",
        hwm_plain >> 10,
        hwm_shim >> 10,
        extra >> 10,
        totals.profiler_bytes >> 10,
        dump_len >> 10,
        bound >> 10
    );
    assert!(
        extra <= bound,
        "the shim added {extra} bytes of peak RSS, over the bound {bound}\n{}",
        profiled.context()
    );

    // The same program with 10 threads: the per-thread cost of the shim,
    // beyond its mapped tables, must be small.
    let few = Run::program(&program)
        .args(["10", "10"])
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    few.assert_success();
    let (_, few_dump) = few.final_dump();
    let per_thread_mapped = totals
        .profiler_bytes
        .saturating_sub(few_dump.totals.profiler_bytes)
        / (THREADS - 10);
    eprintln!(
        "profiler_bytes: 10 threads {} KiB, 1000 threads {} KiB ({} B per extra thread)",
        few_dump.totals.profiler_bytes >> 10,
        totals.profiler_bytes >> 10,
        per_thread_mapped
    );
    assert!(
        per_thread_mapped <= 16 * 1024,
        "the shim maps {per_thread_mapped} bytes more per short-lived thread"
    );
}

/// At the default period most short threads take no sample. The format
/// documents `Dump::threads` as "a thread that took at least one sample", so
/// the list (and the shim's registry behind it, which is never trimmed) must
/// not grow with threads that sampled nothing; otherwise a thread-per-request
/// server grows the shim's memory and every dump without bound.
#[test]
fn thread_list_only_holds_threads_that_sampled() {
    let program = compile_c("hostile_threads.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .args([THREADS.to_string(), ALIVE.to_string()])
        .with_shim()
        .run();
    outcome.assert_success();
    let (_, dump) = outcome.final_dump();
    let mut sampled: Vec<u32> = dump.stacks.iter().map(|s| s.thread).collect();
    sampled.sort_unstable();
    sampled.dedup();
    let listed = dump.threads.len();
    eprintln!(
        "default period: {listed} threads listed, {} took samples, {} samples",
        sampled.len(),
        dump.totals.samples_taken
    );
    assert!(
        listed <= sampled.len() + 1,
        "the dump lists {listed} threads but only {} took a sample (threads_seen {}): \
         the registry keeps one entry per thread ever created",
        sampled.len(),
        dump.totals.threads_seen
    );
}

/// A thread-per-task program: 200,000 short threads run the same task (8
/// blocks of 64 KiB allocated at one site and freed), so every thread
/// samples identical stacks, about one sample per thread at the default
/// period. The threads share the stacks: no sample is dropped (every sample
/// taken is in a record of the dump), and the estimate of the bytes
/// allocated, Σ over records, lies within 4 standard errors of the exact
/// count (the standard error from the dump's own variance sum; a correct
/// estimator fails this with probability 6·10⁻⁵). The by-thread view keeps
/// working: every record's thread is in the thread list, the samples of
/// threads beyond the side table's bound are labelled "other threads", and
/// the list stays bounded. The profiler's memory does not grow with the
/// thread count: the process's peak RSS with 200,000 threads exceeds the
/// one with 100,000 threads (both past the side table's bound, 32,768
/// records at the default period) by at most 4 MiB.
#[test]
fn thread_per_task_threads_share_stacks_and_drop_nothing() {
    let program = compile_c("thread_per_task.c", &BuildOptions::no_pie());
    let run = |threads: u64| {
        let outcome = Run::program(&program)
            .args([threads.to_string(), "50".into(), "8".into(), "65536".into()])
            .with_shim()
            .timeout(std::time::Duration::from_secs(300))
            .run();
        outcome.assert_success();
        outcome
    };
    let outcome = run(200_000);
    assert!(
        outcome.heapsample_lines().is_empty(),
        "{}",
        outcome.context()
    );
    let (_, dump) = outcome.final_dump();
    let totals = &dump.totals;
    assert_eq!(totals.samples_dropped, 0, "{totals:?}");
    assert_eq!(sampled_objects(&dump), totals.samples_taken, "{totals:?}");

    let estimate: f64 = dump.stacks.iter().map(|s| s.alloc.bytes).sum();
    let variance: f64 = dump.stacks.iter().map(|s| s.alloc.bytes_variance).sum();
    let exact = totals.bytes_allocated as f64;
    let z = (estimate - exact) / variance.sqrt();
    eprintln!(
        "200,000 threads: {} samples, allocated-bytes estimate {estimate:.4e} against an exact \
         {exact:.4e} (z = {z:.2}); {} records, {} threads listed",
        totals.samples_taken,
        dump.stacks.len(),
        dump.threads.len()
    );
    assert!(z.abs() <= 4.0, "estimate {estimate} exact {exact} z {z}");
    let task_bytes = get(&outcome.stdout, "task_bytes") as f64;
    assert!(
        exact >= task_bytes && exact < task_bytes * 1.01,
        "exact {exact} task bytes {task_bytes}"
    );

    let listed: std::collections::BTreeSet<u32> = dump.threads.iter().map(|t| t.serial).collect();
    assert!(
        dump.stacks.iter().all(|s| listed.contains(&s.thread)),
        "a record's thread is not listed"
    );
    let other = dump
        .threads
        .iter()
        .find(|t| t.serial == 0)
        .expect("the samples of threads beyond the bound are labelled \"other threads\"");
    assert_eq!(other.name, "other threads");
    assert!(
        dump.threads.len() <= 32_768 + 64,
        "{} threads listed",
        dump.threads.len()
    );

    let hwm_200k = get(&outcome.stdout, "vmhwm_kb");
    let hwm_100k = get(&run(100_000).stdout, "vmhwm_kb");
    eprintln!(
        "peak RSS with the shim: 100,000 threads {hwm_100k} KiB, 200,000 threads {hwm_200k} KiB"
    );
    assert!(
        hwm_200k <= hwm_100k + 4096,
        "peak RSS grew from {hwm_100k} KiB to {hwm_200k} KiB"
    );
}
