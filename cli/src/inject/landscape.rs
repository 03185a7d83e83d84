//! What an attach must know about the process's code before it stops a
//! thread: the ranges whose locks matter, and the walker of its threads'
//! call chains. Arch-neutral; `safepoint` judges a stopped thread with it.

use super::frames::Walker;
use super::proc::Mapping;

/// Code and data ranges of the objects whose locks matter.
pub struct Landscape {
    /// Every mapping of the C library, the loader, the allocator's object
    /// and the profiler.
    pub risky: Vec<(u64, u64)>,
    /// The C library's executable mappings.
    pub libc_code: Vec<(u64, u64)>,
    /// The C library's signal return trampoline (`__restore_rt`).
    pub restorer: Option<u64>,
    /// The process's mappings (for stack room).
    pub maps: Vec<Mapping>,
    /// The threads' call chains.
    pub walker: Walker,
}
