//! Renderers: each turns a [`crate::pipeline::View`] into the bytes of one
//! output format. They never touch files; the caller writes what they
//! return.

pub mod bounds;
pub mod folded;
pub mod gate;
pub mod html;
pub mod json;
pub mod live_heap;
pub mod pprof;
pub mod svg;
pub mod svg_intervals;
pub mod text;
pub mod xml;

/// Round a corrected estimate to the integer the text formats show.
pub fn round(value: f64) -> i64 {
    value.round() as i64
}
