//! The heapsample dump format, shared by the shim (which writes it) and
//! `heapdiff` (which reads it).
//!
//! A dump file is a fixed 24-byte header followed by a bincode body:
//!
//! | offset | size | field                                   |
//! |--------|------|-----------------------------------------|
//! | 0      | 8    | magic `HEAPSMPL`                        |
//! | 8      | 4    | format version, little endian           |
//! | 12     | 4    | CRC-32 of the body, little endian       |
//! | 16     | 8    | body length in bytes, little endian     |
//! | 24     | n    | [`Dump`], bincode 2 "standard" encoding |
//!
//! The header lets a reader tell a foreign file, a newer version, a truncated
//! file and a corrupted body apart before decoding anything, and the body is
//! decoded with an allocation limit proportional to the file size, so a small
//! corrupt file can never make the reader allocate gigabytes.
//!
//! One module per job, everything public re-exported here, in layers that
//! import only downwards and without cycles (`tests/layers.rs` checks it):
//! 1. leaves: `weights` ([`Weights`], the Horvitz–Thompson sums),
//!    `trigger` ([`Trigger`]), `file_layout` (the header's numbers and the
//!    [`VERSION`]s), `error` ([`DecodeError`]), `codec` (bincode as every
//!    body uses it), `serde_strings`, `collected_files` (where a module's
//!    files are kept beside collected dumps, [`build_id_path`]);
//! 2. parts of a dump: `sampling` (the sampling law and the weights of a
//!    sample, [`SamplingLaw`], [`sample_weights`], used inside malloc),
//!    `lifetimes` (the log-scale buckets of freed samples' lifetimes,
//!    [`lifetime_bucket`], used inside free), `live_samples` (the live
//!    samples one by one, [`LiveSample`], and their compact wire layout),
//!    `legacy_correction` (the average-size correction of format-2 dumps
//!    and foreign profiles, [`legacy_weights`]), and format 5's
//!    `process_context` (where the process ran, [`ProcessContext`]),
//!    `runtime_frames` (names of runtime-generated code its frames fall
//!    in, [`RuntimeFrames`]) and `profiler_cost` ([`ProfilerCost`]);
//! 3. the model: `model` (the types a dump holds, [`Dump`], [`Stack`],
//!    [`Process`] ..., the same whatever version a file was written in),
//!    `attached` (the attach time of a dump of an attached process,
//!    [`Dump::attached_unix_ns`]; version 3 kept it in its configuration
//!    string), `testing` (the one constructor of test fixtures, feature
//!    `testing`);
//! 4. the file: `header`, `encode`, `decode` (the file around the body, the
//!    writer, the reader) and `versions` (one module per version read, and
//!    the one match that picks it: adding a version adds a module and an
//!    arm there).
//!
//! This crate holds plain data and codecs only: it exports no C symbols and
//! knows nothing about interposition.

mod codec;
mod collected_files;
mod decode;
mod encode;
mod error;
mod file_layout;
mod header;
mod legacy_correction;
mod lifetimes;
mod live_samples;
mod model;
mod process_context;
mod profiler_cost;
mod runtime_frames;
mod sampling;
mod serde_strings;
mod trigger;
mod versions;
mod weights;

mod attached;

pub use attached::ATTACHED_KEY;
pub use collected_files::build_id_path;
pub use decode::{decode, decode_versioned};
pub use encode::{encode, encode_to};
pub use error::DecodeError;
pub use file_layout::{
    HEADER_LEN, LEGACY_VERSION, MAGIC, MAX_BODY_LEN, PREVIOUS_VERSION, READABLE_VERSIONS,
    TIMED_VERSION, VERSION, VERSION_3,
};
pub use legacy_correction::{legacy_weights, unsample, unsample_scale};
pub use lifetimes::{LIFETIME_BUCKETS, LifetimeBucket, bucket_bounds_ns, lifetime_bucket};
pub use live_samples::LiveSample;
pub use model::{Dump, Module, Peak, Process, Stack, ThreadInfo, Totals};
pub use process_context::{Namespaces, ProcessContext};
pub use profiler_cost::{OwnMemory, ProfilerCost, RemovedDump};
pub use runtime_frames::{FrameKind, RuntimeFrames, RuntimeSymbol, WalkEnds};
pub use sampling::{
    BYTES_GRID, BYTES_PER_CALL, OBJECTS_GRID, SamplingLaw, inclusion_probability, sample_weights,
    weights_with_probability,
};
pub use trigger::Trigger;
pub use weights::Weights;

#[cfg(test)]
mod test_dumps;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
