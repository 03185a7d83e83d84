//! The statistics of sampled estimates, as pure math: no dumps, no
//! profiles, no I/O; numbers in, numbers out.
//!
//! Owns the estimator's rules: [`sampling`] (what a period lets a report
//! know: the detection limit, the weight of an unseen allocation, below
//! which object counts are low-confidence), [`estimate`] (one
//! Horvitz–Thompson estimate, its variance and its 95 % interval, with
//! [`quantile`] for its limits), [`change`] (the change of a value
//! between two dumps: its interval, significance and confidence),
//! [`shared`] (the exact in-use change between two dumps that name their
//! live samples) and [`residue`] (float sums that return to whole
//! numbers). Every report computes intervals and significance here; the
//! browser viewer implements [`estimate`]'s and [`change`]'s rules in
//! `assets/stats.js`, and one table of test vectors
//! (`change_vectors.json`) is checked against both. [`births`]: rates
//! over a time window and the leak / cache / start-up rule.
//! Must never depend on any other module of the crate, so that any layer
//! can use it and its rules stay testable on plain numbers.

pub mod births;
pub mod change;
pub mod estimate;
pub mod quantile;
pub mod residue;
pub mod sampling;
pub mod shared;

pub use births::{Caveat, Class, Evidence, Windows, caveats, per_second};
pub use change::{Accumulation, Delta, Pairing};
pub use estimate::{Estimate, Interval, Z95};
pub use sampling::{Sampling, Unit};
