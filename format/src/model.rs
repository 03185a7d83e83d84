//! What a dump holds, as every reader and the writer see it: the process
//! (its random identity and the clocks its times are measured on), its
//! loaded objects and threads, the distinct stacks with their sampled
//! counts, Horvitz–Thompson [`Weights`] and lifetime distributions, the live
//! samples one by one, the exact counters and the exact peak.
//!
//! These types are the model, independent of the file's version: an older
//! version is converted into them when decoded (see `versions`). Their
//! serde layout, in field order, is the body of the current version
//! ([`VERSION`](crate::VERSION)); a field added, removed or moved here is a
//! new format version (the golden dumps of `format/tests/versions.rs` fail
//! until it is one).
//!
//! Plain data: no I/O, no allocation beyond the fields themselves.

use crate::lifetimes::LifetimeBucket;
use crate::live_samples::LiveSample;
use crate::process_context::ProcessContext;
use crate::profiler_cost::{ProfilerCost, RemovedDump};
use crate::runtime_frames::RuntimeFrames;
use crate::sampling::SamplingLaw;
use crate::serde_strings::{owned_from_borrowed, owned_list_from_borrowed};
use serde::{Deserialize, Serialize};

pub use crate::trigger::Trigger;
pub use crate::weights::Weights;

/// One loaded object (executable, shared library, vdso) as it was mapped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// Path of the file as the loader names it; the main executable's real path.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub path: String,
    /// The GNU build-id note, empty if the object has none.
    pub build_id: Vec<u8>,
    /// Load bias: the value to subtract from a runtime address to get the
    /// address in the file's own (ELF virtual address) space.
    pub load_bias: u64,
    /// Runtime address ranges `[start, end)` of its executable segments.
    pub ranges: Vec<(u64, u64)>,
    /// The first of the module epochs ([`Stack::epoch`]) whose stacks may
    /// have frames in this object at these addresses.
    pub first_epoch: u32,
    /// The last such epoch; `None`: every epoch from the first on.
    pub last_epoch: Option<u32>,
}

impl Module {
    /// True if this module mapped `address` during `epoch`.
    pub fn contains(&self, address: u64, epoch: u32) -> bool {
        epoch >= self.first_epoch
            && self.last_epoch.is_none_or(|last| epoch <= last)
            && self
                .ranges
                .iter()
                .any(|&(start, end)| address >= start && address < end)
    }
}

/// A thread that took at least one sample.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The shim's own serial number for the thread, 1 for the first one seen.
    pub serial: u32,
    /// The kernel thread id.
    pub tid: u32,
    /// The thread name when it was first seen (`/proc/.../comm`), maybe empty.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub name: String,
}

/// One distinct call stack of sampled allocations, with its raw counts and
/// its Horvitz–Thompson [`Weights`].
///
/// Counts are what the sampler saw, not estimates; the weights are the
/// estimates (and their variances) of the true counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stack {
    /// Return addresses, innermost first; the first is the allocation call
    /// site's return address. The shim's own frames are not included.
    pub frames: Vec<u64>,
    /// The [`ThreadInfo::serial`] of the thread that allocated.
    pub thread: u32,
    /// The module epoch of the stack: which of the objects mapped at its
    /// frames' addresses over the process's life it was captured in
    /// ([`Dump::module_for`]).
    pub epoch: u32,
    /// Sampled objects still live.
    pub live_objects: u64,
    /// Requested bytes of the sampled objects still live.
    pub live_bytes: u64,
    /// Usable bytes (as the allocator reports them) of those objects.
    pub live_usable_bytes: u64,
    /// Sampled objects ever allocated here (cumulative).
    pub alloc_objects: u64,
    /// Requested bytes of all sampled objects allocated here (cumulative).
    pub alloc_bytes: u64,
    /// Weights of the sampled objects still live.
    pub live: Weights,
    /// Weights of all sampled objects allocated here (cumulative).
    pub alloc: Weights,
    /// How long the sampled objects allocated here and freed since lived
    /// (cumulative, every thread's): the non-empty buckets, in increasing
    /// order. A stack's distribution is carried by one of its entries (the
    /// one of the thread that first sampled it, or "other threads"); the
    /// others' is empty.
    pub lifetimes: Vec<LifetimeBucket>,
}

/// Exact process-wide counters kept beside the samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Calls that allocated (malloc, calloc, realloc, new, ...), all threads.
    /// While memory is exhausted, a small `malloc` that failed may be
    /// counted too (the fast path counts before forwarding).
    pub allocations: u64,
    /// Calls that released a non-null pointer, present under
    /// `prof_exact:true` (the default free path counts nothing, to stay one
    /// load and one branch).
    pub frees: Option<u64>,
    /// Bytes requested by all allocations.
    pub bytes_allocated: u64,
    /// Exact live heap in usable bytes, present under `prof_exact:true`.
    pub live_usable_bytes: Option<u64>,
    /// Allocations sampled since the start (or the last reset).
    pub samples_taken: u64,
    /// Samples that could not be recorded (a table was full).
    pub samples_dropped: u64,
    /// Sampled objects live at the time of the dump.
    pub samples_live: u64,
    /// Threads that ever allocated.
    pub threads_seen: u64,
    /// Bytes the profiler itself holds for its tables (its own overhead).
    pub profiler_bytes: u64,
    /// Times the samples were forgotten (`heapsample_reset`) before this
    /// dump: two dumps of one process with the same count share their
    /// cumulative samples. 0 in format-2 dumps.
    pub resets: u64,
    /// The Horvitz–Thompson weights of the dropped samples
    /// ([`Totals::samples_dropped`]): what the estimates miss because of
    /// them. Zero before format 4.
    pub dropped: Weights,
}

/// Which process a dump is of, and the clocks its times are measured on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// Drawn at random when the profiler starts (a forked child draws its
    /// own): two dumps are of one process exactly when their ids are equal.
    /// 0 when not known (formats 2 and 3).
    pub id: u128,
    /// The id of the process this one was forked from, 0 if none or not
    /// known.
    pub parent_id: u128,
    /// The profiler's start (its attach, for an attached process) on the
    /// monotonic clock (`CLOCK_MONOTONIC`, nanoseconds): births, lifetimes
    /// and the peak's time count from it. A forked child keeps its parent's
    /// start, so the births it inherited keep their meaning.
    pub start_monotonic_ns: u64,
    /// The same moment on the wall clock, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// The dump's own moment on the monotonic clock (its wall-clock time is
    /// [`Dump::time_unix_ns`]).
    pub dump_monotonic_ns: u64,
    /// When `heapsample attach` started sampling the process, nanoseconds
    /// since the Unix epoch; None for a process profiled from its start.
    /// In-use values then count what was allocated since and is still live.
    pub attach_unix_ns: Option<u64>,
}

impl Process {
    /// Nanoseconds from the profiler's start to the dump (0 when not known).
    pub fn dump_time_ns(&self) -> u64 {
        self.dump_monotonic_ns
            .saturating_sub(self.start_monotonic_ns)
    }
}

/// The highest the exact live heap has been (`prof_exact`); in a forked
/// child, since the fork (from the heap it inherited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peak {
    /// The live heap at its highest, in usable bytes.
    pub live_usable_bytes: u64,
    /// When the live heap first came within [`Peak::time_margin_bytes`] of
    /// its highest: nanoseconds since the profiler's start.
    pub at_ns: u64,
    /// How close to the peak the heap was at [`Peak::at_ns`] (the shim reads
    /// the clock when the heap rises that far above where it last read it:
    /// the larger of 4 KiB and 1/256 of the heap).
    pub time_margin_bytes: u64,
}

/// A whole heap profile as written by the shim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dump {
    /// Version of the shim that wrote the dump.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub writer: String,
    /// Process id of the profiled process.
    pub pid: u32,
    /// Path of the main executable.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub executable: String,
    /// The command line, argument by argument.
    #[serde(deserialize_with = "owned_list_from_borrowed")]
    pub command_line: Vec<String>,
    /// Wall-clock time of the dump, nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
    /// Why the dump was written.
    pub trigger: Trigger,
    /// Sequence number of the dump among all dumps of the process.
    pub seq: u64,
    /// Sequence number among the dumps with the same trigger.
    pub trigger_seq: u64,
    /// log2 of the mean sampling period in bytes; 0 samples everything.
    pub lg_sample_period: u32,
    /// The effective configuration, as `key:value,...`.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub config: String,
    /// The objects loaded with the program and the objects the stacks'
    /// frames lie in, with the epochs they cover.
    pub modules: Vec<Module>,
    /// Threads that took samples.
    pub threads: Vec<ThreadInfo>,
    /// Distinct stacks with their sampled counts.
    pub stacks: Vec<Stack>,
    /// Exact counters.
    pub totals: Totals,
    /// The process's identity and clocks.
    pub process: Process,
    /// Bytes of the sampling countdown one call uses up beside its request
    /// ([`BYTES_PER_CALL`](crate::BYTES_PER_CALL) from format 4 on, 0
    /// before): the sampling law of this dump ([`Dump::sampling_law`]).
    pub bytes_per_call: u32,
    /// Every live sample (all of the live heap at `lg_prof_sample:0`), in
    /// birth order.
    #[serde(
        serialize_with = "crate::live_samples::serialize",
        deserialize_with = "crate::live_samples::deserialize"
    )]
    pub live_samples: Vec<LiveSample>,
    /// The exact live heap's highest point, with `prof_exact`.
    pub peak: Option<Peak>,
    /// The machine and container the process ran in (format 5 on; before,
    /// empty).
    pub context: ProcessContext,
    /// Names of the runtime-generated code the frames fall in, and how the
    /// walks ended (format 5 on).
    pub runtime: RuntimeFrames,
    /// What the profiler cost up to this dump (format 5 on; zero before).
    pub cost: ProfilerCost,
    /// Dumps of this process removed since its previous dump to keep the
    /// series within its bounds (format 5 on).
    pub removed_dumps: Vec<RemovedDump>,
}

impl Dump {
    /// The mean sampling period in bytes.
    pub fn sample_period(&self) -> u64 {
        1u64 << self.lg_sample_period.min(62)
    }

    /// The law the samples of this dump were drawn with.
    pub fn sampling_law(&self) -> SamplingLaw {
        SamplingLaw::with_bytes_per_call(self.sample_period(), u64::from(self.bytes_per_call))
    }

    /// The module that held `address` when a stack of `epoch` was captured.
    pub fn module_for(&self, address: u64, epoch: u32) -> Option<&Module> {
        self.modules.iter().find(|m| m.contains(address, epoch))
    }
}
