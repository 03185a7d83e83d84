//! What the profiler itself cost the process up to a dump, and the dumps
//! it removed to keep its series within its bounds: what a user reads as
//! "what leaving it on costs".
//!
//! Plain data: no I/O.

use crate::serde_strings::owned_from_borrowed;
use crate::trigger::Trigger;
use serde::{Deserialize, Serialize};

/// The profiler's own memory, in bytes, by what holds it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnMemory {
    /// The stack table (records and its index).
    pub stack_table: u64,
    /// The stacks' frames.
    pub frames: u64,
    /// The live table.
    pub live_table: u64,
    /// Lifetime blocks.
    pub lifetimes: u64,
    /// Everything else it mapped (threads' blocks, buffers, caches).
    pub other: u64,
}

/// The profiler's cost up to a dump.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfilerCost {
    /// Its own memory.
    pub memory: OwnMemory,
    /// Dumps written before this one.
    pub dumps_written: u64,
    /// Bytes of those dumps.
    pub dump_bytes: u64,
    /// Nanoseconds spent writing them.
    pub dump_ns: u64,
    /// Estimated nanoseconds spent in the sampling path since the start:
    /// the sample events (stack capture, record, live-table entry), one in
    /// 64 timed with the clock the event already reads and standing for 64.
    pub sampling_ns: u64,
}

/// A dump removed to keep the series within its bounds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedDump {
    /// Its file name (no directory).
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub file_name: String,
    /// Its sequence number.
    pub seq: u64,
    /// Why it had been written.
    pub trigger: Trigger,
    /// When it had been written, nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
}
