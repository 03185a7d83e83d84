//! The recorder's layering, checked over the source: every module belongs to
//! one layer, imports only from its own layer or the layers below, and the
//! import graph has no cycle (the check is `heapsample-layers`', shared
//! with the other crates). The layers are described in `src/lib.rs`.

/// Lowest first. Code in layers 0–8 may run inside malloc; layer 9 never does.
const LAYERS: heapsample_layers::Layers<'static> = &[
    (
        "leaves",
        &[
            "arch",
            "sys",
            "syscalls",
            "clock",
            "warn",
            "sampling_law",
            "thread_countdown",
            "nursery",
            "chunks",
            "record_counters",
        ],
    ),
    ("thread block", &["tls"]),
    // Keeps each thread's kernel id in the thread's block.
    ("locks", &["spin_lock"]),
    (
        "tables",
        &[
            "live_table",
            "stack_threads",
            "lifetimes",
            "stack_table",
            "object_ids",
            "modules",
            "backtrace",
            "walk_ends",
            "own_heap",
        ],
    ),
    ("next allocator", &["next_alloc"]),
    ("state", &["state", "attachment"]),
    (
        "events",
        &[
            "sample_event",
            "threads",
            "triggers",
            "dump_thread",
            "memory_limit",
            "table_setup",
        ],
    ),
    ("dispatch", &["startup", "call_accounting", "routes"]),
    ("hooks", &["contracts", "fast_path", "cxx"]),
    (
        "outside malloc",
        &[
            "process",
            "process_context",
            "dump_assembly",
            "jitdump",
            "runtime_names",
            "dump_file",
            "dump_series",
            "dump_sequence",
            "api",
            "lifecycle",
            "exec_final",
            "slots",
            "takeover",
        ],
    ),
];

#[test]
fn recorder_imports_only_downwards_without_cycles() {
    let problems = heapsample_layers::problems_of_crate(env!("CARGO_MANIFEST_DIR"), LAYERS, 20);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
