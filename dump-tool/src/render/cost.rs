//! What leaving the profiler on cost, as a dump says (format 5 on): the
//! one text line, the json object, and the dumps removed to keep the
//! series within its bounds.
//!
//! Reads one dump's `cost`, `totals` and `removed_dumps`; no I/O.

use heapsample_format::{Dump, OwnMemory, ProfilerCost, RemovedDump};
use serde::Serialize;

use crate::input::trigger_name;

const MIB: f64 = (1u64 << 20) as f64;

/// Nanoseconds from the profiler's start to the dump; 0 when unknown.
fn run_ns(dump: &Dump) -> u64 {
    let process = &dump.process;
    if process.start_monotonic_ns == 0 {
        return 0;
    }
    process
        .dump_monotonic_ns
        .saturating_sub(process.start_monotonic_ns)
}

fn own_memory_bytes(memory: &OwnMemory) -> u64 {
    memory.stack_table + memory.frames + memory.live_table + memory.lifetimes + memory.other
}

/// True if the dump says anything of its cost (older formats, foreign
/// profiles and merged sides do not).
fn recorded(cost: &ProfilerCost) -> bool {
    *cost != ProfilerCost::default()
}

/// `profiler cost: N dumps written (X MiB, Y ms), own memory Z MiB (…),
/// sampling ≈ W ms (P % of the run), S samples taken, D dropped`; None when
/// the dump does not record its cost.
pub fn cost_line(dump: &Dump) -> Option<String> {
    let cost = &dump.cost;
    if !recorded(cost) {
        return None;
    }
    let memory = &cost.memory;
    let mib = |bytes: u64| format!("{:.1}", bytes as f64 / MIB);
    let run = run_ns(dump);
    let share = if run == 0 {
        "of an unknown run".to_string()
    } else {
        format!(
            "{:.2} % of the run",
            cost.sampling_ns as f64 * 100.0 / run as f64
        )
    };
    Some(format!(
        "profiler cost: {} dumps written ({} MiB, {:.0} ms), own memory {} MiB mapped \
         (stack table {}, frames {}, live table {}, lifetimes {}, other {} MiB), \
         sampling ≈ {:.1} ms ({share}), {} samples taken, {} dropped",
        cost.dumps_written,
        mib(cost.dump_bytes),
        cost.dump_ns as f64 / 1e6,
        mib(own_memory_bytes(memory)),
        mib(memory.stack_table),
        mib(memory.frames),
        mib(memory.live_table),
        mib(memory.lifetimes),
        mib(memory.other),
        cost.sampling_ns as f64 / 1e6,
        dump.totals.samples_taken,
        dump.totals.samples_dropped,
    ))
}

/// `removed dumps: N to keep the series within its bounds: name, name…`;
/// None when the dump lists none.
pub fn removed_line(dump: &Dump) -> Option<String> {
    if dump.removed_dumps.is_empty() {
        return None;
    }
    let names: Vec<&str> = dump
        .removed_dumps
        .iter()
        .map(|removed| removed.file_name.as_str())
        .collect();
    Some(format!(
        "removed dumps: {} since the previous dump, to keep the series within its bounds: {}",
        names.len(),
        names.join(", ")
    ))
}

/// The json `cost` object: the dump's own fields, their sums and shares.
#[derive(Clone, Debug, Serialize)]
pub struct CostReport {
    /// The profiler's own mapped memory by table, bytes.
    pub memory: OwnMemory,
    /// Their sum.
    pub own_memory_bytes: u64,
    /// Dumps written before this one, their bytes and the ns spent writing.
    pub dumps_written: u64,
    pub dump_bytes: u64,
    pub dump_ns: u64,
    /// Estimated ns in the sampling path since the start.
    pub sampling_ns: u64,
    /// From the profiler's start to the dump, ns (0: unknown).
    pub run_ns: u64,
    /// `sampling_ns / run_ns` (null when the run's length is unknown).
    pub sampling_share: Option<f64>,
    pub samples_taken: u64,
    pub samples_dropped: u64,
    /// Whether the dump records its cost (format 5 on).
    pub recorded: bool,
}

impl CostReport {
    /// The cost of `dump`.
    pub fn of(dump: &Dump) -> CostReport {
        let cost = &dump.cost;
        let run = run_ns(dump);
        CostReport {
            memory: cost.memory,
            own_memory_bytes: own_memory_bytes(&cost.memory),
            dumps_written: cost.dumps_written,
            dump_bytes: cost.dump_bytes,
            dump_ns: cost.dump_ns,
            sampling_ns: cost.sampling_ns,
            run_ns: run,
            sampling_share: (run != 0).then(|| cost.sampling_ns as f64 / run as f64),
            samples_taken: dump.totals.samples_taken,
            samples_dropped: dump.totals.samples_dropped,
            recorded: recorded(cost),
        }
    }
}

/// A removed dump in json.
#[derive(Serialize)]
pub struct RemovedReport {
    pub file_name: String,
    pub seq: u64,
    pub trigger: &'static str,
    pub time_unix_ns: u64,
}

impl RemovedReport {
    /// The json of each of `removed`.
    pub fn all(removed: &[RemovedDump]) -> Vec<RemovedReport> {
        removed
            .iter()
            .map(|removed| RemovedReport {
                file_name: removed.file_name.clone(),
                seq: removed.seq,
                trigger: trigger_name(removed.trigger),
                time_unix_ns: removed.time_unix_ns,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_line_says_each_part() {
        let mut dump = heapsample_format::testing::dump();
        assert_eq!(cost_line(&dump), None, "no cost recorded");
        dump.process.start_monotonic_ns = 1_000_000_000;
        dump.process.dump_monotonic_ns = 11_000_000_000;
        dump.cost = ProfilerCost {
            memory: OwnMemory {
                stack_table: 2 << 20,
                frames: 1 << 20,
                live_table: 4 << 20,
                lifetimes: 0,
                other: 1 << 20,
            },
            dumps_written: 3,
            dump_bytes: 3 << 20,
            dump_ns: 12_000_000,
            sampling_ns: 50_000_000,
        };
        let line = cost_line(&dump).unwrap();
        assert!(
            line.starts_with(
                "profiler cost: 3 dumps written (3.0 MiB, 12 ms), own memory 8.0 MiB mapped \
                 (stack table 2.0, frames 1.0, live table 4.0, lifetimes 0.0, other 1.0 MiB), \
                 sampling ≈ 50.0 ms (0.50 % of the run)"
            ),
            "{line}"
        );
        dump.removed_dumps = vec![RemovedDump {
            file_name: "p.1.000003.t3.prof".into(),
            seq: 3,
            trigger: heapsample_format::Trigger::Time,
            time_unix_ns: 5,
        }];
        assert_eq!(
            removed_line(&dump).unwrap(),
            "removed dumps: 1 since the previous dump, to keep the series within its bounds: p.1.000003.t3.prof"
        );
    }
}
