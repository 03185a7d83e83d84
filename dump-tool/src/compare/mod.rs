//! Comparisons over profiles: per-function values and changes, whether two
//! dumps are of one process, and the CI gate.
//!
//! Owns applying [`crate::stats`]' rules to profiles: [`functions`] (self
//! and total values and changes), [`growth`] (the functions that grow
//! across a series of dumps), [`pairing`](mod@pairing) (same process or
//! independent), [`gate`] (`--fail-if-grows`: the verdict as data; its
//! words are `render::gate`'s). No I/O, no formatting.

pub mod functions;
pub mod gate;
pub mod growth;
pub mod pairing;

pub use functions::{
    FunctionChange, FunctionValue, function_changes, function_values, total_change,
};
pub use pairing::pairing;
