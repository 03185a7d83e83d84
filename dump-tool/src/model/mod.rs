//! The model: dumps as corrected profiles, and the views of them.
//!
//! Owns [`Profile`] ([`profile`]: one sample per distinct stack and thread
//! with its estimates, variances and raw counts), the [`Metric`]s
//! ([`metric`]), frames and the allocator frames dropped at the leaf
//! ([`frames`], [`allocator`]), lifetimes, births and the time a dump
//! tells ([`time`]), folded stacks ([`folding`]), the views
//! (`--focus`, `--hide`, threads, size classes: [`transform`]), the
//! merge of many profiles ([`merge`]), the live heap three ways
//! ([`live_heap`]: estimated, in usable bytes, exact) and the program's
//! own frame of a stack ([`program_frame`](mod@program_frame): what is "not mine"). Reads dumps and the
//! symbolized location table; never reads files, never formats output.

pub mod allocator;
pub mod folding;
pub mod frames;
pub mod live_heap;
pub mod merge;
pub mod metric;
pub mod profile;
pub mod program_frame;
pub mod size_class;
pub mod time;
pub mod transform;
pub mod walk_ends;

pub use frames::{FrameLabels, FrameRef, FunctionNames, distinct_labels, function_name, line_of};
pub use metric::{Metric, RawCounts, Values};
pub use profile::{BuildOptions, Origin, Profile, Sample};
pub use program_frame::{NotMine, ProgramFrames, leaf_name, program_frame, program_frame_name};
pub use time::{Birth, BirthRange, TimeInfo, TimePoint};
pub use transform::Transforms;
