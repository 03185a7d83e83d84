//! The layers check shared by heapsample's crates (format, recorder,
//! heapdiff): every module belongs to one layer and imports only from its
//! own layer or the layers below, and the import graph between files has
//! no cycle. Each crate names its layers in a test of its own and calls
//! [`problems_of_crate`].
//!
//! A file is a node (`render/svg.rs` is `render::svg`, `render/mod.rs` is
//! `render`); a node's layer is that of its first segment. An import is
//! any path starting with `crate::`, `$crate::` (macros), `super::` or
//! `self::`, and a path starting with the name of a child module
//! (`pub use table::LocationTable;` in `symbols/mod.rs`), outside the
//! file's `#[cfg(test)]` section (unit tests may reach anywhere) and its
//! comments. A path names the deepest module file along it; a path to an
//! item the crate root re-exports (`crate::Weights`, from `pub use
//! weights::Weights;` in `lib.rs`) names the file it is re-exported from.
//! `mod` declarations are not imports.
//!
//! A test-only helper: it reads source text and never runs in a profiled
//! process.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers of a crate, lowest first: a name and the top-level modules
/// in it.
pub type Layers<'a> = &'a [(&'a str, &'a [&'a str])];

/// Module path (segments) of each file node → the nodes it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The source without its `#[cfg(test)]` section.
fn non_test_part(source: &str) -> &str {
    match source.find("#[cfg(test)]") {
        Some(at) => &source[..at],
        None => source,
    }
}

/// Without `//` comments (doc comments mention paths that are not imports).
fn without_comments(source: &str) -> String {
    source
        .lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of a `use` tree or a plain path, braces expanded:
/// `a::{b, c::{D, E}}` → `a::b`, `a::c::D`, `a::c::E`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree: String = without_renames(tree)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let Some(open) = tree.find('{') else {
        return vec![
            tree.split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        ];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let close = tree
        .rfind('}')
        .filter(|&close| close > open)
        .unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .flat_map(expand)
        .map(|tail| prefix.iter().cloned().chain(tail).collect())
        .collect()
}

/// `a::b as c` → `a::b`.
fn without_renames(tree: &str) -> String {
    let mut out = String::new();
    let mut rest = tree;
    while let Some(at) = rest.find(" as ") {
        out.push_str(&rest[..at]);
        let after = rest[at + 4..].trim_start();
        let end = after
            .find(|c: char| !is_identifier_char(c))
            .unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every path of `source` that may name a module of this crate: the trees
/// of `use` items (which rustfmt starts on a line of their own), and
/// `crate::`/`super::`/`self::` paths anywhere.
fn paths(source: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let item = line.trim_start();
        let item = item
            .strip_prefix("pub(crate) ")
            .or_else(|| item.strip_prefix("pub "))
            .unwrap_or(item);
        if let Some(tree) = item.strip_prefix("use ") {
            let start = offset + (line.len() - tree.len());
            if let Some(end) = source[start..].find(';') {
                found.extend(expand(&source[start..start + end]));
            }
        }
        offset += line.len();
    }
    for prefix in ["crate::", "super::", "self::"] {
        let mut rest = source;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            let standalone = before.is_none_or(|c| !is_identifier_char(c) && c != '$')
                || (prefix == "crate::" && before == Some('$'));
            let tail = &rest[at..];
            rest = &rest[at + prefix.len()..];
            if !standalone {
                continue;
            }
            let end = tail
                .find(|c: char| !(is_identifier_char(c) || c == ':'))
                .unwrap_or(tail.len());
            found.push(
                tail[..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            );
        }
    }
    found
}

/// The node a path names from inside `module`, if it is a module of this
/// crate: `crate`, `super` and `self` resolved, then the longest prefix
/// that is a file of the crate.
fn resolve(
    module: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
    reexports: &BTreeMap<String, Vec<String>>,
) -> Option<String> {
    let mut at: Vec<String> = module.to_vec();
    let mut segments = path.iter().peekable();
    match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            at.clear();
            segments.next();
            let item = segments.peek().map(|s| s.as_str()).unwrap_or("");
            if !modules.contains(&vec![item.to_string()])
                && let Some(node) = reexports.get(item)
            {
                return (node.as_slice() != module).then(|| node.join("::"));
            }
        }
        Some("super") => {
            while segments.peek().map(|s| s.as_str()) == Some("super") {
                at.pop();
                segments.next();
            }
        }
        Some("self") => {
            segments.next();
        }
        Some(first) => {
            // A plain `use` path: only a child module of this one counts.
            let mut child = module.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
        }
        None => return None,
    }
    let mut deepest = None;
    for segment in segments {
        at.push(segment.clone());
        if modules.contains(&at) {
            deepest = Some(at.clone());
        } else {
            break;
        }
    }
    deepest
        .filter(|node| node.as_slice() != module)
        .map(|node| node.join("::"))
}

/// Every `.rs` file under `dir` as (module path, source).
fn read_modules(root: &Path, dir: &Path, found: &mut Vec<(Vec<String>, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_modules(root, &path, found);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(root).unwrap().with_extension("");
        let mut module: Vec<String> = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        if module
            .last()
            .is_some_and(|last| last == "mod" || last == "lib")
        {
            module.pop();
        }
        if module.is_empty() {
            continue; // the crate root: declarations and re-exports only
        }
        found.push((module, std::fs::read_to_string(&path).unwrap()));
    }
}

/// Paths in `source` that start with the name of one of `children` (a
/// child module used without a `use`: `builder::Builder::new()`).
fn child_paths(source: &str, children: &[&str]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for child in children {
        let prefix = format!("{child}::");
        let mut rest = source;
        while let Some(at) = rest.find(&prefix) {
            let before = rest[..at].chars().last();
            let standalone = before.is_none_or(|c| !is_identifier_char(c) && c != ':');
            rest = &rest[at + prefix.len()..];
            if standalone {
                found.push(vec![child.to_string()]);
            }
        }
    }
    found
}

/// The graph of `files`, with `root` (the crate root's source) for its
/// re-exports.
pub fn graph_of(files: &[(Vec<String>, String)], root: &str) -> Graph {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let reexports = reexports(root, &modules);
    let mut graph = Graph::new();
    for (module, source) in files {
        let source = without_comments(non_test_part(source));
        let children: Vec<&str> = modules
            .iter()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| m[module.len()].as_str())
            .collect();
        let targets = paths(&source)
            .into_iter()
            .chain(child_paths(&source, &children))
            .filter_map(|path| resolve(module, &path, &modules, &reexports))
            .collect();
        graph.insert(module.join("::"), targets);
    }
    graph
}

/// One cycle of the graph, if any, as the nodes along it.
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
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

/// The items the crate root re-exports (`pub use a::b::Item;`) and the
/// deepest module file each comes from.
fn reexports(root: &str, modules: &BTreeSet<Vec<String>>) -> BTreeMap<String, Vec<String>> {
    let mut found = BTreeMap::new();
    let root = without_comments(non_test_part(root));
    for path in paths(&root) {
        let Some((item, along)) = path.split_last() else {
            continue;
        };
        let along: Vec<String> = along
            .iter()
            .skip_while(|s| *s == "crate" || *s == "self")
            .cloned()
            .collect();
        let deepest = (1..=along.len())
            .rev()
            .map(|n| along[..n].to_vec())
            .find(|prefix| modules.contains(prefix));
        if let Some(node) = deepest {
            found.insert(item.clone(), node);
        }
    }
    found
}

/// The graph of the crate whose manifest directory is `manifest_dir`.
pub fn read_graph(manifest_dir: &str) -> Graph {
    let source_dir = Path::new(manifest_dir).join("src");
    let mut files = Vec::new();
    read_modules(&source_dir, &source_dir, &mut files);
    let root = std::fs::read_to_string(source_dir.join("lib.rs")).unwrap_or_default();
    graph_of(&files, &root)
}

fn layer_of(layers: Layers<'_>, node: &str) -> Option<usize> {
    let top = node.split("::").next().unwrap_or(node);
    layers.iter().position(|(_, tops)| tops.contains(&top))
}

/// Every problem with `graph` under `layers`: modules without a layer,
/// layers naming no module, upward imports, and a cycle.
pub fn problems(graph: &Graph, layers: Layers<'_>) -> Vec<String> {
    let mut problems = Vec::new();
    for (layer, tops) in layers {
        for top in *tops {
            if !graph.contains_key(*top) {
                problems.push(format!(
                    "layer {layer} names `{top}`, which is not a module of src/"
                ));
            }
        }
    }
    for (node, targets) in graph {
        let Some(own) = layer_of(layers, node) else {
            problems.push(format!("module `{node}` has no layer"));
            continue;
        };
        for target in targets {
            if let Some(theirs) = layer_of(layers, target).filter(|&theirs| theirs > own) {
                problems.push(format!(
                    "`{node}` ({}) imports `{target}` from the higher layer {}",
                    layers[own].0, layers[theirs].0
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(graph) {
        problems.push(format!("import cycle: {}", cycle.join(" -> ")));
    }
    problems
}

/// The problems of the crate at `manifest_dir` under `layers`, after
/// checking that at least `min_files` files were read.
pub fn problems_of_crate(manifest_dir: &str, layers: Layers<'_>, min_files: usize) -> Vec<String> {
    let graph = read_graph(manifest_dir);
    if graph.len() < min_files {
        return vec![format!(
            "read only {} files under {manifest_dir}/src",
            graph.len()
        )];
    }
    problems(&graph, layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYERS: Layers<'static> = &[
        ("leaves", &["error", "stats"]),
        ("input", &["input"]),
        ("model", &["model"]),
        ("output formats", &["render"]),
    ];

    fn file(module: &str, source: &str) -> (Vec<String>, String) {
        (
            module.split("::").map(String::from).collect(),
            source.to_string(),
        )
    }

    #[test]
    fn the_check_finds_upward_imports_and_cycles() {
        let files = [
            file("input", "use crate::render::View;"),
            file(
                "render",
                "pub mod svg;\npub mod xml;\nfn f() { xml::escape() }",
            ),
            file("render::svg", "use super::xml::escape;"),
            file("render::xml", "fn f() { super::svg::draw() }"),
            file("model", "pub use profile::Profile;"),
            file("model::profile", "use crate::model::metric::Metric;"),
            file(
                "model::metric",
                "/// see crate::model::profile\npub struct Metric;",
            ),
        ];
        let graph = graph_of(&files, "");
        assert_eq!(
            graph["model"],
            BTreeSet::from(["model::profile".to_string()])
        );
        assert_eq!(
            graph["model::metric"],
            BTreeSet::new(),
            "comments are not imports"
        );
        let problems = problems(&graph, LAYERS);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`input` (input) imports `render`")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p == "import cycle: render::xml -> render::svg -> render::xml"),
            "{problems:?}"
        );
    }

    #[test]
    fn paths_are_read_from_use_trees_and_expressions() {
        let source = "use crate::{a, b::{C, D}, c::e as f};\nuse super::g::H;\npub use child::X;\nfn x() { crate::m::n(); self::k::j(); }\n";
        let found: Vec<String> = paths(source).iter().map(|p| p.join("::")).collect();
        for expected in [
            "crate::a",
            "crate::b::C",
            "crate::b::D",
            "crate::c::e",
            "super::g::H",
            "child::X",
            "crate::m::n",
            "self::k::j",
        ] {
            assert!(
                found.iter().any(|f| f == expected),
                "{expected} in {found:?}"
            );
        }
    }

    #[test]
    fn macros_and_reexports_name_their_files() {
        let files = [
            file("weights", "pub struct Weights;"),
            file("model", "use crate::Weights;\nfn f() { crate::warn!(x) }"),
            file(
                "warn",
                "macro_rules! warn { () => { $crate::weights::f() } }",
            ),
        ];
        let graph = graph_of(&files, "mod weights;\npub use weights::Weights;\n");
        assert_eq!(
            graph["model"],
            BTreeSet::from(["warn".to_string(), "weights".to_string()])
        );
        assert_eq!(graph["warn"], BTreeSet::from(["weights".to_string()]));
    }

    #[test]
    fn a_layer_naming_no_module_is_a_problem() {
        let graph = graph_of(&[file("error", ""), file("input", "")], "");
        let problems = problems(&graph, LAYERS);
        assert!(
            problems.iter().any(|p| p.contains("names `stats`")),
            "{problems:?}"
        );
    }
}
