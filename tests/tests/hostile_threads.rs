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
