//! Input: files in, checked [`heapsample_format::Dump`]s out.
//!
//! Owns opening and reading files ([`file`](mod@file)), decoding heapsample dumps of
//! every supported format version and checking their values ([`dump_file`]),
//! other profilers' heap profiles ([`foreign`]), and whether dumps can be
//! compared or merged ([`compatibility`]). The lowest stage but the pure
//! statistics: it knows nothing of symbols, profiles or output, and never
//! writes a file.

pub mod compatibility;
pub mod dump_file;
pub mod file;
pub mod foreign;
pub mod trigger;

pub use compatibility::{Compatibility, check_comparable, merge_warnings};
pub use dump_file::{Input, legacy_note, load, load_opened};
pub use trigger::trigger_name;
