//! Renderers: each turns corrected profiles into the bytes of one output
//! format. They never touch files; `output` writes what they return.

pub mod folded;
pub mod gate;
pub mod html;
pub mod json;
pub mod pprof;
pub mod svg;
pub mod svg_intervals;
pub mod text;
pub mod xml;

use crate::model::{Metric, Profile};
use crate::symbols::LocationTable;

/// What every renderer gets: the symbolized locations, the new profile and,
/// for a comparison, the base profile.
pub struct View<'a> {
    pub table: &'a LocationTable,
    pub new: &'a Profile,
    /// How to name the new dump in titles and reports (its path).
    pub new_name: &'a str,
    pub base: Option<Base<'a>>,
    pub metric: Metric,
}

/// The base side of a comparison.
pub struct Base<'a> {
    pub profile: &'a Profile,
    pub name: &'a str,
}

/// Round a corrected estimate to the integer the text formats show.
pub fn round(value: f64) -> i64 {
    value.round() as i64
}
