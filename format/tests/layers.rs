//! The format crate's layering, checked over the source (the check is
//! `heapsample-layers`', shared with the recorder and heapdiff): every
//! module belongs to one layer and imports only from its own layer or the
//! layers below, and the import graph between files has no cycle. This
//! crate is what the shim and heapdiff agree through; the layers are
//! described in `src/lib.rs`.

/// Lowest first.
const LAYERS: heapsample_layers::Layers<'static> = &[
    (
        "leaves",
        &[
            "serde_strings",
            "file_layout",
            "weights",
            "trigger",
            "error",
            "codec",
            "collected_files",
        ],
    ),
    (
        "parts",
        &[
            "sampling",
            "lifetimes",
            "live_samples",
            "legacy_correction",
            "process_context",
            "runtime_frames",
            "profiler_cost",
        ],
    ),
    ("model", &["model", "attached", "testing"]),
    ("file", &["header", "encode", "versions", "decode"]),
    ("unit tests", &["test_dumps"]),
];

#[test]
fn format_imports_only_downwards_without_cycles() {
    let problems = heapsample_layers::problems_of_crate(env!("CARGO_MANIFEST_DIR"), LAYERS, 15);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
