//! heapdiff: reads heapsample dumps, symbolizes them offline, corrects the
//! sampled counts and renders flamegraphs, differential flamegraphs, folded
//! stacks, text reports and pprof profiles.
//!
//! The pipeline is `load` (file → checked [`heapsample_format::Dump`]) →
//! `symbolize` (addresses → locations with inlined frames, names from
//! `names`) → `profile` (estimates per stack, metric, diff; `estimate`
//! holds the interval math) → `transform` (the view: focus, hide,
//! threads, size classes) → `render::*` (bytes) → `output` (atomic write).
//! `merge` sums many dumps; `serve` is the web server over a directory of
//! dumps.

pub mod error;
pub mod estimate;
pub mod foreign;
pub mod gate;
pub mod load;
pub mod merge;
pub mod names;
pub mod output;
pub mod profile;
pub mod render;
pub mod serve;
pub mod symbolize;
pub mod transform;

pub use error::{Error, Result};
