//! heapdiff's layering, checked over the source: every top-level module (a
//! stage) belongs to one layer and imports only from its own layer or the
//! layers below, and the import graph between files has no cycle (the
//! check is `heapsample-layers`', shared with the other crates). The
//! layers are described in `src/lib.rs`.

/// Lowest first.
const LAYERS: heapsample_layers::Layers<'static> = &[
    ("leaves", &["error", "stats"]),
    ("input", &["input"]),
    ("symbols", &["symbols"]),
    ("model", &["model"]),
    ("comparisons", &["compare"]),
    ("pipeline", &["pipeline"]),
    ("output formats", &["render"]),
];

#[test]
fn heapdiff_imports_only_downwards_without_cycles() {
    let problems = heapsample_layers::problems_of_crate(env!("CARGO_MANIFEST_DIR"), LAYERS, 30);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
