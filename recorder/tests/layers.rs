//! The recorder's layering, checked over the source: every module belongs to
//! one layer, imports only from its own layer or the layers below, and the
//! import graph has no cycle. The layers are described in `src/lib.rs`.
//!
//! An import is any `crate::name` or `$crate::name` path outside a module's
//! `#[cfg(test)]` section (unit tests may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Lowest first. Code in layers 0–8 may run inside malloc; layer 9 never does.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves",
        &[
            "sys", "syscalls", "clock", "warn", "config", "sampling", "sampler", "nursery",
            "chunks", "counters",
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
            "own_heap",
        ],
    ),
    ("next allocator", &["next_alloc"]),
    ("state", &["state", "attachment"]),
    (
        "events",
        &[
            "sample",
            "threads",
            "triggers",
            "dumper",
            "memory_limit",
            "table_setup",
        ],
    ),
    ("dispatch", &["startup", "counting", "routes"]),
    ("hooks", &["contracts", "fast_path", "cxx"]),
    (
        "outside malloc",
        &[
            "process",
            "process_context",
            "dump_contents",
            "runtime_names",
            "dump_file",
            "writer",
            "api",
            "lifecycle",
            "exec_final",
            "slots",
            "takeover",
        ],
    ),
];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// The source without its `#[cfg(test)]` section.
fn non_test_part(source: &str) -> &str {
    match source.find("#[cfg(test)]") {
        Some(at) => &source[..at],
        None => source,
    }
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level names of a `{a, b::c, d::{e, f}}` group (without braces).
fn group_names(group: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(identifier(group[start..at].trim()));
                start = at + 1;
            }
            _ => {}
        }
    }
    names.push(identifier(group[start..].trim()));
    names.into_iter().filter(|name| !name.is_empty()).collect()
}

/// The modules of this crate that `source` refers to.
fn imports(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let source = non_test_part(source);
    let mut rest = source;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map(|(end, _)| end)
                .unwrap_or(group.len());
            found.extend(group_names(&group[..end]).into_iter().map(String::from));
        } else {
            let name = identifier(rest);
            if !name.is_empty() {
                found.insert(name.to_string());
            }
        }
    }
    found
}

fn read_graph() -> Graph {
    let source_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    for entry in std::fs::read_dir(&source_dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(module) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "rs") || module == "lib" {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let mut targets = imports(&source);
        targets.remove(module);
        graph.insert(module.to_string(), targets);
    }
    graph
}

/// Every problem with `graph`: modules without a layer, imports of
/// non-modules or upward, and cycles.
fn problems(graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for (module, targets) in graph {
        let Some(own) = layer_of(module) else {
            problems.push(format!("module `{module}` has no layer in LAYERS"));
            continue;
        };
        for target in targets {
            if !graph.contains_key(target) {
                continue; // a crate-root item such as a macro or re-export
            }
            match layer_of(target) {
                Some(theirs) if theirs > own => problems.push(format!(
                    "`{module}` ({}) imports `{target}` from the higher layer {}",
                    LAYERS[own].0, LAYERS[theirs].0
                )),
                _ => {}
            }
        }
    }
    if let Some(cycle) = find_cycle(graph) {
        problems.push(format!("import cycle: {}", cycle.join(" -> ")));
    }
    problems
}

/// One cycle of the graph, if any, as the modules along it.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::Open);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next.as_str()).copied().unwrap_or(Mark::Done) {
                Mark::Open => {
                    let start = path.iter().position(|n| n == next).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(cycle) = visit(next, graph, marks, path) {
                        return Some(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks: BTreeMap<String, Mark> = graph.keys().map(|k| (k.clone(), Mark::New)).collect();
    for node in graph.keys() {
        if marks[node] == Mark::New
            && let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn recorder_imports_only_downwards_without_cycles() {
    let graph = read_graph();
    assert!(graph.len() > 20, "read only {} modules", graph.len());
    let problems = problems(&graph);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_layer_names_existing_modules() {
    let graph = read_graph();
    for (layer, modules) in LAYERS {
        for module in *modules {
            assert!(
                graph.contains_key(*module),
                "layer {layer} names `{module}`, which is not a module of src/"
            );
        }
    }
}

#[test]
fn the_check_finds_upward_imports_and_cycles() {
    let graph: Graph = [
        ("sys", vec!["writer"]),
        ("writer", vec!["api"]),
        ("api", vec!["writer"]),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_string(), t.into_iter().map(String::from).collect()))
    .collect();
    let problems = problems(&graph);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`sys` (leaves) imports `writer`")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p == "import cycle: api -> writer -> api"),
        "{problems:?}"
    );
}

#[test]
fn imports_are_read_from_paths_groups_and_macros() {
    let source = "use crate::{a, b::{C, D}, c::e as f};\nuse crate::g::H;\nfn x() { crate::warn!(k); $crate::m::n }\n#[cfg(test)]\nmod tests { use crate::z; }";
    let found: Vec<String> = imports(source).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "g", "m", "warn"]);
}
