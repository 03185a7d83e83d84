//! Format version 2 ([`LEGACY_VERSION`](super::LEGACY_VERSION)), frozen:
//! stacks with raw counts only and totals without `resets`. Decoded and
//! converted into the model as a version-3 dump whose weights are filled
//! with the average-size correction ([`legacy_weights`]).

use crate::codec::decode_exactly;
use crate::error::DecodeError;
use crate::legacy_correction::legacy_weights;
use crate::model::{Dump, Module, ThreadInfo, Trigger};
use crate::serde_strings::{owned_from_borrowed, owned_list_from_borrowed};
use crate::versions::v3::{DumpV3, StackV3, TotalsV3, convert};
use serde::Deserialize;

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct StackV2 {
    frames: Vec<u64>,
    thread: u32,
    epoch: u32,
    live_objects: u64,
    live_bytes: u64,
    live_usable_bytes: u64,
    alloc_objects: u64,
    alloc_bytes: u64,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct TotalsV2 {
    allocations: u64,
    frees: Option<u64>,
    bytes_allocated: u64,
    live_usable_bytes: Option<u64>,
    samples_taken: u64,
    samples_dropped: u64,
    samples_live: u64,
    threads_seen: u64,
    profiler_bytes: u64,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct DumpV2 {
    #[serde(deserialize_with = "owned_from_borrowed")]
    writer: String,
    pid: u32,
    #[serde(deserialize_with = "owned_from_borrowed")]
    executable: String,
    #[serde(deserialize_with = "owned_list_from_borrowed")]
    command_line: Vec<String>,
    time_unix_ns: u64,
    trigger: Trigger,
    seq: u64,
    trigger_seq: u64,
    lg_sample_period: u32,
    #[serde(deserialize_with = "owned_from_borrowed")]
    config: String,
    modules: Vec<Module>,
    threads: Vec<ThreadInfo>,
    stacks: Vec<StackV2>,
    totals: TotalsV2,
}

/// Decode a body of version 2 and convert it (through version 3's layout,
/// with the old correction's weights).
pub(crate) fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
    let old: DumpV2 = decode_exactly(body)?;
    let period = 1u64 << old.lg_sample_period.min(62);
    let stacks = old
        .stacks
        .into_iter()
        .map(|s| StackV3 {
            live: legacy_weights(s.live_objects, s.live_bytes, period),
            alloc: legacy_weights(s.alloc_objects, s.alloc_bytes, period),
            frames: s.frames,
            thread: s.thread,
            epoch: s.epoch,
            live_objects: s.live_objects,
            live_bytes: s.live_bytes,
            live_usable_bytes: s.live_usable_bytes,
            alloc_objects: s.alloc_objects,
            alloc_bytes: s.alloc_bytes,
        })
        .collect();
    let t = old.totals;
    Ok(convert(DumpV3 {
        writer: old.writer,
        pid: old.pid,
        executable: old.executable,
        command_line: old.command_line,
        time_unix_ns: old.time_unix_ns,
        trigger: old.trigger,
        seq: old.seq,
        trigger_seq: old.trigger_seq,
        lg_sample_period: old.lg_sample_period,
        config: old.config,
        modules: old.modules,
        threads: old.threads,
        stacks,
        totals: TotalsV3 {
            allocations: t.allocations,
            frees: t.frees,
            bytes_allocated: t.bytes_allocated,
            live_usable_bytes: t.live_usable_bytes,
            samples_taken: t.samples_taken,
            samples_dropped: t.samples_dropped,
            samples_live: t.samples_live,
            threads_seen: t.threads_seen,
            profiler_bytes: t.profiler_bytes,
            resets: 0,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::config;
    use crate::file_layout::LEGACY_VERSION;
    use crate::test_dumps::file_with_body;
    use crate::{decode_versioned, unsample};

    #[test]
    fn version_2_dumps_decode_with_the_old_correction() {
        let v2 = DumpV2 {
            writer: "old".into(),
            pid: 7,
            executable: "/bin/true".into(),
            command_line: vec!["true".into()],
            time_unix_ns: 1,
            trigger: Trigger::Final,
            seq: 0,
            trigger_seq: 0,
            lg_sample_period: 19,
            config: String::new(),
            modules: vec![],
            threads: vec![],
            stacks: vec![StackV2 {
                frames: vec![1, 2],
                thread: 1,
                epoch: 0,
                live_objects: 4,
                live_bytes: 4000,
                live_usable_bytes: 4096,
                alloc_objects: 5,
                alloc_bytes: 5000,
            }],
            totals: TotalsV2 {
                allocations: 10,
                frees: None,
                bytes_allocated: 100,
                live_usable_bytes: None,
                samples_taken: 5,
                samples_dropped: 0,
                samples_live: 4,
                threads_seen: 1,
                profiler_bytes: 0,
            },
        };
        let body = bincode::serde::encode_to_vec(&v2, config()).unwrap();
        let file = file_with_body(LEGACY_VERSION, &body);
        let (dump, version) = decode_versioned(&file).unwrap();
        assert_eq!(version, LEGACY_VERSION);
        let stack = &dump.stacks[0];
        let (n, b) = unsample(4, 4000, 1 << 19);
        assert!((stack.live.objects - n).abs() < 1e-9 && (stack.live.bytes - b).abs() < 1e-6);
        assert!(stack.live.bytes_variance > 0.0);
        assert_eq!((stack.alloc_objects, dump.totals.samples_live), (5, 4));
    }
}
