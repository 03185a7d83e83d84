//! heapdiff: reads heapsample dumps, symbolizes them offline, corrects the
//! sampled counts and renders flamegraphs, differential flamegraphs, folded
//! stacks, text reports, JSON, pprof profiles and the browser viewer.
//!
//! Stages, each importing only from the stages above it in this list (and
//! within a stage without cycles between its files; `tests/layers.rs`
//! checks it):
//!
//! 0. leaves: [`error`] (the one-line error), [`stats`] (estimates,
//!    intervals and the rule for a change, as pure math).
//! 1. [`input`]: files → checked dumps (heapsample dumps of every format
//!    version, jemalloc and gperftools profiles), compatibility of dumps.
//! 2. [`symbols`]: addresses → locations, functions, files, lines, names.
//! 3. [`model`]: dumps → corrected profiles; views (focus, hide, threads,
//!    size classes), folding, merging.
//! 4. [`compare`]: per-function values and changes, pairing of dumps, the
//!    CI gate's verdict.
//! 5. [`pipeline`]: the one way from dump files to a view
//!    ([`pipeline::Session`]): load, check, symbolize, build, merge,
//!    transform.
//! 6. [`render`]: one output format each, from a [`pipeline::View`] (bytes,
//!    never files).
//!
//! The command line (`cli/`, the `heapdiff` binary: arguments, output
//! files) and the web server (`serve/`: axum and tokio) are crates of their
//! own above this one, so the library builds without either.

pub mod compare;
pub mod error;
pub mod input;
pub mod model;
pub mod pipeline;
pub mod render;
pub mod stats;
pub mod symbols;

pub use error::{Error, Result};
