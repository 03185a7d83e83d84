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

/// The library draws nothing and writes nothing to stderr: what it has to
/// say goes to its callers (notices, warnings, progress reports), and the
/// command line decides what to print.
#[test]
fn the_library_never_writes_to_stderr() {
    let mut offenders = Vec::new();
    let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or_default();
                    if ["eprint", "stderr()", "io::stderr"]
                        .iter()
                        .any(|w| code.contains(w))
                    {
                        offenders.push(format!("{}:{}: {line}", path.display(), n + 1));
                    }
                }
            }
        }
    }
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}
