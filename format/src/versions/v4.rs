//! Format version 4, frozen: the model as it was before format 5 added
//! where the process ran, the names of runtime-generated code, the
//! profiler's own cost and the removed dumps. Decoded and converted into
//! the model: what version 4 did not record is empty (no architecture
//! recorded: version 4 was written on x86_64 only).

use crate::codec::decode_exactly;
use crate::error::DecodeError;
use crate::live_samples::LiveSample;
use crate::model::{Dump, Module, Peak, Process, Stack, ThreadInfo, Totals, Trigger};
use crate::process_context::ProcessContext;
use crate::serde_strings::{owned_from_borrowed, owned_list_from_borrowed};
use serde::Deserialize;

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(crate) struct DumpV4 {
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
    pub stacks: Vec<Stack>,
    pub totals: Totals,
    pub process: Process,
    pub bytes_per_call: u32,
    #[cfg_attr(test, serde(serialize_with = "crate::live_samples::serialize"))]
    #[serde(deserialize_with = "crate::live_samples::deserialize")]
    pub live_samples: Vec<LiveSample>,
    pub peak: Option<Peak>,
}

/// Decode a body of version 4 and convert it.
pub(crate) fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
    let old: DumpV4 = decode_exactly(body)?;
    Ok(convert(old))
}

/// A version-4 dump in the model.
pub(crate) fn convert(old: DumpV4) -> Dump {
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
        stacks: old.stacks,
        totals: old.totals,
        process: old.process,
        bytes_per_call: old.bytes_per_call,
        live_samples: old.live_samples,
        peak: old.peak,
        context: ProcessContext::default(),
        runtime: Default::default(),
        cost: Default::default(),
        removed_dumps: Vec::new(),
    }
}
