//! Format version 3, frozen: stacks with weights but no lifetimes, totals
//! without the dropped samples' weights, and no process identity, clocks,
//! live samples or peak. Decoded and converted into the model: what
//! version 3 did not record is absent (process id 0, no live samples, no
//! lifetimes), and its countdown counted a call's request only
//! (`bytes_per_call` 0).

use crate::decode::decode_exactly;
use crate::error::DecodeError;
use crate::model::{Dump, Module, Process, Stack, ThreadInfo, Totals, Trigger, Weights};
use crate::serde_strings::{owned_from_borrowed, owned_list_from_borrowed};
use serde::Deserialize;

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(crate) struct StackV3 {
    pub frames: Vec<u64>,
    pub thread: u32,
    pub epoch: u32,
    pub live_objects: u64,
    pub live_bytes: u64,
    pub live_usable_bytes: u64,
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
    pub live: Weights,
    pub alloc: Weights,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(crate) struct TotalsV3 {
    pub allocations: u64,
    pub frees: Option<u64>,
    pub bytes_allocated: u64,
    pub live_usable_bytes: Option<u64>,
    pub samples_taken: u64,
    pub samples_dropped: u64,
    pub samples_live: u64,
    pub threads_seen: u64,
    pub profiler_bytes: u64,
    pub resets: u64,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(crate) struct DumpV3 {
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub writer: String,
    pub pid: u32,
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub executable: String,
    #[serde(deserialize_with = "owned_list_from_borrowed")]
    pub command_line: Vec<String>,
    pub time_unix_ns: u64,
    pub trigger: Trigger,
    pub seq: u64,
    pub trigger_seq: u64,
    pub lg_sample_period: u32,
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub config: String,
    pub modules: Vec<Module>,
    pub threads: Vec<ThreadInfo>,
    pub stacks: Vec<StackV3>,
    pub totals: TotalsV3,
}

/// The key under which a profiler attached to a running process recorded
/// the attach time (Unix nanoseconds) in a version-3 dump's configuration.
const ATTACHED_KEY: &str = "attached_unix_ns";

/// Decode a body of version 3 and convert it.
pub(crate) fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
    let old: DumpV3 = decode_exactly(body)?;
    Ok(convert(old))
}

/// A version-3 dump in the model.
pub(crate) fn convert(old: DumpV3) -> Dump {
    let attach_unix_ns = old
        .config
        .split(',')
        .filter_map(|item| item.split_once(':'))
        .find(|(key, _)| *key == ATTACHED_KEY)
        .and_then(|(_, value)| value.parse().ok());
    let stacks = old
        .stacks
        .into_iter()
        .map(|s| Stack {
            frames: s.frames,
            thread: s.thread,
            epoch: s.epoch,
            live_objects: s.live_objects,
            live_bytes: s.live_bytes,
            live_usable_bytes: s.live_usable_bytes,
            alloc_objects: s.alloc_objects,
            alloc_bytes: s.alloc_bytes,
            live: s.live,
            alloc: s.alloc,
            lifetimes: Vec::new(),
        })
        .collect();
    let t = old.totals;
    Dump {
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
        totals: Totals {
            allocations: t.allocations,
            frees: t.frees,
            bytes_allocated: t.bytes_allocated,
            live_usable_bytes: t.live_usable_bytes,
            samples_taken: t.samples_taken,
            samples_dropped: t.samples_dropped,
            samples_live: t.samples_live,
            threads_seen: t.threads_seen,
            profiler_bytes: t.profiler_bytes,
            resets: t.resets,
            dropped: Weights::default(),
        },
        process: Process {
            attach_unix_ns,
            ..Process::default()
        },
        bytes_per_call: 0,
        live_samples: Vec::new(),
        peak: None,
    }
}
