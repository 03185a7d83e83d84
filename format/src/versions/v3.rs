//! Format version 3, frozen: stacks with weights but no lifetimes, totals
//! without the dropped samples' weights, and no process identity, clocks,
//! live samples or peak. Decoded and converted into the model: what
//! version 3 did not record is absent (process id 0, no live samples, no
//! lifetimes), and its countdown counted a call's request only
//! (`bytes_per_call` 0).

use crate::codec::decode_exactly;
use crate::error::DecodeError;
use crate::model::{Dump, Module, Process, Stack, ThreadInfo, Totals, Trigger, Weights};
use crate::serde_strings::{owned_from_borrowed, owned_list_from_borrowed};
use crate::versions::v4::DumpV4;
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

/// Decode a body of version 3 and convert it.
pub(crate) fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
    let old: DumpV3 = decode_exactly(body)?;
    Ok(convert(old))
}

/// A version-3 dump in the model (through version 4's layout).
pub(crate) fn convert(old: DumpV3) -> Dump {
    super::v4::convert(to_v4(old))
}

/// A version-3 dump in version 4's layout.
fn to_v4(old: DumpV3) -> DumpV4 {
    let attach_unix_ns = crate::attached::attach_time_in_config(&old.config);
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
    DumpV4 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::config;
    use crate::file_layout::VERSION_3;
    use crate::test_dumps::file_with_body;

    /// A version-3 dump of an attached process (`heapsample attach` wrote
    /// the attach time into its configuration string) reads with the
    /// attach time as its field.
    #[test]
    fn the_attach_time_of_a_version_3_dump_comes_from_its_config() {
        let v3 = |options: &str| DumpV3 {
            writer: "heapsample 0.1".into(),
            pid: 7,
            executable: "/bin/app".into(),
            command_line: vec!["app".into()],
            time_unix_ns: 1_700_000_002_000_000_000,
            trigger: Trigger::Manual,
            seq: 1,
            trigger_seq: 1,
            lg_sample_period: 19,
            config: options.into(),
            modules: vec![],
            threads: vec![],
            stacks: vec![],
            totals: TotalsV3 {
                allocations: 10,
                frees: None,
                bytes_allocated: 100,
                live_usable_bytes: None,
                samples_taken: 0,
                samples_dropped: 0,
                samples_live: 0,
                threads_seen: 1,
                profiler_bytes: 0,
                resets: 0,
            },
        };
        let read = |options: &str| {
            let body = bincode::serde::encode_to_vec(v3(options), config()).unwrap();
            crate::decode_versioned(&file_with_body(VERSION_3, &body)).unwrap()
        };
        let (attached, version) = read("prof:true,attached_unix_ns:1700000000000000000");
        assert_eq!(version, VERSION_3);
        assert_eq!(attached.attached_unix_ns(), Some(1_700_000_000_000_000_000));
        assert!(
            attached
                .attach_note()
                .unwrap()
                .starts_with("attached 2.0 s before this dump")
        );
        let (preloaded, _) = read("prof:true,lg_prof_sample:19");
        assert_eq!(preloaded.attached_unix_ns(), None);
        assert_eq!(preloaded.process.id, 0);
    }
}
