//! Frames in code that a language runtime generated (JIT code,
//! interpreter trampolines): the names the runtime published for the
//! sampled addresses (perf maps, jitdump), copied into the dump when it is
//! written, and how many stacks the walk had to end early, and why.
//!
//! Runtime code moves and its maps are rewritten or deleted, so a dump
//! never depends on them: it keeps, for each region of generated code that
//! one of its frames falls in, the region and the runtime's name for it at
//! the dump's moment. Two dumps may name one address differently.
//!
//! Plain data: no I/O.

use crate::serde_strings::owned_from_borrowed;
use serde::{Deserialize, Serialize};

/// What kind of code a frame is in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameKind {
    /// Compiled code of a loaded object (the default).
    #[default]
    Native,
    /// The interpreter's own loop (`_PyEval_EvalFrameDefault`, V8's
    /// interpreter builtins, the JVM's template interpreter).
    Interpreter,
    /// A Python function (a CPython perf trampoline).
    Python,
    /// A JavaScript function (V8's generated code).
    JavaScript,
    /// A Java method (the JVM's generated code).
    Java,
    /// Generated code whose runtime published a name that says nothing of
    /// its language (.NET, an unknown JIT).
    Jit,
}

/// A region of generated code and the runtime's name for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeSymbol {
    /// Start address in the process.
    pub start: u64,
    /// Length in bytes.
    pub size: u64,
    /// The name as the runtime wrote it.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub name: String,
    /// The language of the code.
    pub kind: FrameKind,
}

/// Why the walk of a sampled stack stopped: counts of samples per reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkEnds {
    /// Walks that reached the outermost frame.
    pub complete: u64,
    /// Walks cut at the frame limit.
    pub depth_limit: u64,
    /// Walks that reached code with neither unwind tables nor a usable
    /// frame-pointer chain.
    pub no_unwind_info: u64,
    /// Walks whose next frame lay outside readable stack memory.
    pub unreadable_stack: u64,
}

/// The runtime-generated code a dump's frames fall in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeFrames {
    /// The named regions the dump's frames fall in, by start address.
    pub symbols: Vec<RuntimeSymbol>,
    /// Where the names were read from (`/tmp/perf-PID.map`, ...), empty when
    /// none was found.
    #[serde(deserialize_with = "crate::serde_strings::owned_list_from_borrowed")]
    pub sources: Vec<String>,
    /// How the walks of the sampled stacks ended.
    pub walk_ends: WalkEnds,
}
