//! Comparisons over profiles: per-function values and changes, whether two
//! dumps are of one process, and the CI gate.
//!
//! Owns applying [`crate::stats`]' rules to profiles: [`comparison`] (a
//! base and a new profile: pairing, shared live samples, the one way a
//! change of a set of stacks is made), [`functions`] (self
//! and total values and changes), [`growth`] (the functions that grow
//! across a series of dumps), [`pairing`](mod@pairing) (same process or
//! independent), [`gate`] (`--fail-if-grows`: the verdict as data; its
//! words are `render::gate`'s), the time views: [`lifetimes`] (freed
//! memory per lifetime bucket, temporary allocations) and [`ages`] (live
//! memory by birth, leak / cache / start-up, leak candidates). No I/O, no
//! formatting.

pub mod ages;
pub mod comparison;
pub mod functions;
pub mod gate;
pub mod growth;
pub mod lifetimes;
pub mod pairing;

pub use comparison::{ChangeSums, Comparison, VarianceRule};
pub use functions::{
    FunctionChange, FunctionValue, ProgramFrameValue, function_changes, function_values,
    program_frame_values,
};
pub use pairing::pairing;

/// Sorts `rows` largest `value` first, ties by `name` (a value that is not
/// a number ties).
fn largest_first<T>(rows: &mut [T], value: impl Fn(&T) -> f64, name: impl Fn(&T) -> &str) {
    rows.sort_by(|a, b| {
        value(b)
            .partial_cmp(&value(a))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| name(a).cmp(name(b)))
    });
}
