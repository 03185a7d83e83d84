//! The statistics of sampled estimates, as pure math: no dumps, no
//! profiles, no I/O; numbers in, numbers out.
//!
//! Owns the estimator's rules: [`estimate`] (one Horvitz–Thompson estimate,
//! its variance and its 95 % interval) and [`change`] (the change of a
//! value between two dumps: its variance, interval and significance). Every
//! report computes intervals and significance here; the browser viewer
//! implements [`change`]'s rule in `assets/stats.js`, and one table of test
//! vectors (`change_vectors.json`) is checked against both. [`births`]:
//! rates over a time window and the leak / cache / start-up rule.
//! Must never depend on any other module of the crate, so that any layer
//! can use it and its rules stay testable on plain numbers.

pub mod births;
pub mod change;
pub mod estimate;

pub use births::{Class, Windows, per_second};
pub use change::{Accumulation, Delta, Pairing};
pub use estimate::{Estimate, Interval, Z95};
