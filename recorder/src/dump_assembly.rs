//! What a dump holds: a [`Dump`] assembled from the tables as they are now.
//!
//! Owns the reading of every table a dump covers (stacks and their records
//! with their lifetimes, the live samples one by one, the module map and
//! its contexts, the thread list, the exact counters and peak) into one
//! value, and the process facts it carries (command line, time, identity,
//! the clocks' origin, the attach time, where it runs, the runtimes' names
//! of generated code its frames fall in: `runtime_names`).
//! Naming, numbering and writing the file are `writer`'s and `dump_file`'s.
//!
//! A dump is consistent within itself while the program runs on: the live
//! table is walked once, first, and both the list of live samples and each
//! stack's live counts and sums come from that one walk (the records keep
//! only cumulative counts; counters of their own for the live ones moved
//! while the walk ran, and a sample being recorded or freed was on one side
//! only). The stack table is read after the walk, so it holds every record
//! a walked sample names, and its cumulative counts include them.
//!
//! Never runs inside malloc: it allocates, takes the module map's and the
//! thread registry's locks for copies, and reads `/proc`.

use core::sync::atomic::Ordering::Relaxed;

use std::collections::HashMap;

use heapsample_format::{Dump, LiveSample, Peak, Process, ThreadInfo, Totals, Trigger};

use crate::live_table::{self, LIVE, USABLE_UNKNOWN};
use crate::record_counters::certain_weights;
use crate::stack_table::{LiveCounts, OTHER_THREADS, STACKS};
use crate::{modules, process, state, sys, threads};

/// The name in the dump's thread list of the samples whose thread the stack
/// table no longer tells apart.
pub const OTHER_THREADS_NAME: &str = "other threads";

/// Build the profile from the tables as they are now, unnumbered (`seq`
/// and `trigger_seq` 0: the writer numbers the dumps it writes).
pub fn assemble(trigger: Trigger) -> Dump {
    let config = state::config();
    let exact = threads::exact_counts();
    let mut contexts = modules::Contexts::new();
    let walked = walk_live();
    let counts_are_weights = crate::sampling_law::samples_every_allocation();
    let live_counts = live_counts(&walked, counts_are_weights);
    let (stacks, records) = STACKS.snapshot(
        config.prof_accum,
        counts_are_weights,
        &|record| live_counts.get(&record).copied().unwrap_or_default(),
        &mut |objects| contexts.number(objects),
    );
    let (start_monotonic_ns, start_unix_ns) = state::start_time();
    let live_samples = live_samples(walked, &records, start_monotonic_ns);
    let mut runtime = crate::runtime_names::runtime_frames(&stacks);
    runtime.walk_ends = threads::walk_ends();
    let mut thread_list = threads::thread_infos();
    if stacks.iter().any(|stack| stack.thread == OTHER_THREADS) {
        thread_list.push(ThreadInfo {
            serial: OTHER_THREADS,
            tid: 0,
            name: OTHER_THREADS_NAME.to_string(),
        });
    }
    Dump {
        writer: concat!("heapsample ", env!("CARGO_PKG_VERSION")).to_string(),
        pid: std::process::id(),
        executable: modules::main_executable(),
        command_line: command_line(),
        time_unix_ns: sys::clock_ns(libc::CLOCK_REALTIME),
        trigger,
        seq: 0,
        trigger_seq: 0,
        lg_sample_period: crate::sampling_law::lg_period(),
        config: config.describe(),
        modules: contexts.modules(),
        threads: thread_list,
        stacks,
        totals: Totals {
            allocations: exact.allocations,
            frees: config.prof_exact.then_some(exact.frees),
            bytes_allocated: exact.bytes_allocated,
            live_usable_bytes: config
                .prof_exact
                .then_some(exact.live_usable_bytes.max(0) as u64),
            samples_taken: state::samples_taken(),
            samples_dropped: state::samples_dropped(),
            samples_live: live_samples.len() as u64,
            threads_seen: exact.threads_seen,
            profiler_bytes: sys::MAPPED_BYTES.load(Relaxed),
            resets: state::resets(),
            dropped: state::dropped_weights(),
        },
        process: {
            let (id, parent_id) = process::identity();
            Process {
                id,
                parent_id,
                start_monotonic_ns,
                start_unix_ns,
                dump_monotonic_ns: sys::clock_ns(libc::CLOCK_MONOTONIC),
                attach_unix_ns: crate::attachment::attached_unix_ns(),
            }
        },
        bytes_per_call: heapsample_format::BYTES_PER_CALL as u32,
        live_samples,
        peak: config.prof_exact.then(|| {
            let (live_usable_bytes, at, time_margin_bytes) = state::exact_peak();
            Peak {
                live_usable_bytes,
                at_ns: at.saturating_sub(start_monotonic_ns),
                time_margin_bytes,
            }
        }),
        context: crate::process_context::read(),
        runtime,
        cost: Default::default(),
        removed_dumps: Vec::new(),
    }
}

/// Every live sample now: one walk of the live table.
fn walk_live() -> Vec<live_table::LiveSample> {
    let mut walked = Vec::with_capacity(LIVE.live_count() as usize);
    LIVE.for_each(&mut |sample| walked.push(sample));
    walked
}

/// Each record's live counts and Horvitz–Thompson sums, as the walked
/// samples make them up (a sample's weights are a function of its size, as
/// its allocation added them; with `counts_are_weights` the sums are the
/// counts). A sample whose usable size the table did not keep counts its
/// request, the least it can be.
fn live_counts(
    walked: &[live_table::LiveSample],
    counts_are_weights: bool,
) -> HashMap<u32, LiveCounts> {
    let mut counts = HashMap::<u32, LiveCounts>::new();
    for sample in walked {
        let record = counts.entry(sample.record).or_default();
        record.objects += 1;
        record.bytes += sample.size;
        record.usable_bytes += if sample.usable == USABLE_UNKNOWN {
            sample.size
        } else {
            sample.usable
        };
        if let Some(weights) = crate::sample_event::sample_weights(sample.size) {
            record.weights = record.weights.plus(&weights);
        }
    }
    if counts_are_weights {
        for record in counts.values_mut() {
            record.weights = certain_weights(record.objects, record.bytes);
        }
    }
    counts
}

/// The walked samples, each naming its record's place in the dump's stacks
/// (`records`, as the snapshot returned them), born relative to the
/// profiler's start, in birth order.
fn live_samples(
    walked: Vec<live_table::LiveSample>,
    records: &[u32],
    start_monotonic_ns: u64,
) -> Vec<LiveSample> {
    let index: HashMap<u32, u32> = records
        .iter()
        .enumerate()
        .map(|(at, &record)| (record, at as u32))
        .collect();
    let mut samples: Vec<LiveSample> = walked
        .into_iter()
        .filter_map(|sample| {
            let &stack = index.get(&sample.record)?;
            Some(LiveSample {
                stack,
                thread: sample.thread,
                birth_ns: sample.birth.saturating_sub(start_monotonic_ns),
                size: sample.size,
                usable: if sample.usable == USABLE_UNKNOWN {
                    0
                } else {
                    sample.usable
                },
            })
        })
        .collect();
    samples.sort_by_key(|s| (s.birth_ns, s.thread, s.stack));
    samples
}

fn command_line() -> Vec<String> {
    crate::process_context::read_proc_file(c"/proc/self/cmdline")
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}
