//! Renderers: each turns a [`crate::pipeline::View`] into the bytes of one
//! output format. They never touch files; the caller writes what they
//! return.

pub mod bounds;
pub mod cost;
pub mod folded;
pub mod gate;
pub mod html;
pub mod json;
pub mod json_rows;
pub mod live_heap;
pub mod pprof;
pub mod svg;
pub mod svg_intervals;
pub mod text;
pub mod time_json;
pub mod time_text;
pub mod xml;

/// A ranked function led by its program frame: `svc::Ledger::record ←
/// via std::make_unique<…>`, or the function alone when it is its own
/// program frame or has none.
pub fn program_first(name: &str, program_frame: Option<&str>) -> String {
    match program_frame {
        Some(program) if program != name => format!("{program} ← via {name}"),
        _ => name.to_string(),
    }
}

/// Round a corrected estimate to the integer the text formats show.
pub fn round(value: f64) -> i64 {
    value.round() as i64
}

/// A duration in the unit that suits it: `850 ns`, `1.02 ms`, `4.8 h`.
pub fn duration(ns: u64) -> String {
    let ns = ns as f64;
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else if ns < 60e9 {
        (ns / 1e9, "s")
    } else if ns < 3600e9 {
        (ns / 60e9, "min")
    } else {
        (ns / 3600e9, "h")
    };
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}
