//! JavaScript frames above native allocations: Node.js started with
//! `--perf-basic-prof --interpreted-frames-native-stack` writes its perf map;
//! the walk steps through V8's code by the frame pointer, the exit dump
//! carries the map's names of the sampled code, and heapdiff shows the
//! script's functions (`handleRequest (rt_leak.js)` calling
//! `makeBuffer (rt_leak.js)`) in call order above the native allocation,
//! with their kind, alike in folded, json and pprof. The program is
//! tests/programs/rt_leak.js, leaking `Buffer.allocUnsafeSlow` buffers (each
//! one malloc of its size). The same again with `--perf-prof`, where the
//! names come from the jitdump (`jit-PID.dump`) node writes instead.
//!
//! V8's optimizing tier inlines small functions: a buffer made by an
//! optimized `handleRequest` has `makeBuffer` inlined and shows
//! `handleRequest` alone (the perf map has no inlining records), as `perf`
//! shows it. So every leak stack names `handleRequest`, and those naming
//! `makeBuffer` name it below `handleRequest`.

use heapdiff::render::pprof::PbProfile;
use heapsample_format::FrameKind;
use heapsample_tests::locate::{path_str, programs_dir};
use heapsample_tests::prerequisite::{Missing, skip};
use heapsample_tests::run::Run;
use heapsample_tests::tools::{heapdiff_ok, json_stacks};
use prost::Message;
use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

const HANDLE: &str = "handleRequest (rt_leak.js)";
const MAKE: &str = "makeBuffer (rt_leak.js)";
const NATIVE: &str = "node::NodeArrayBufferAllocator::AllocateUninitialized";

/// The alloc-space folded stacks of `dump` (names without their kind suffix)
/// ending in the leak's native allocation, and their kind suffixes.
fn leak_stacks_folded(dump: &str) -> Vec<(Vec<String>, Vec<String>)> {
    heapdiff_ok(&[dump, "-m", "alloc-space", "-f", "folded"])
        .lines()
        .filter_map(|line| line.rsplit_once(' ').map(|(stack, _)| stack))
        .filter(|stack| stack.ends_with(NATIVE) && stack.contains("(rt_leak.js)"))
        .map(|stack| {
            stack
                .split(';')
                .map(|frame| {
                    for suffix in ["_[j]", "_[i]"] {
                        if let Some(name) = frame.strip_suffix(suffix) {
                            return (name.to_string(), suffix.to_string());
                        }
                    }
                    (frame.to_string(), String::new())
                })
                .unzip()
        })
        .collect()
}

/// The stacks (root first, joined by `;`) of a gzipped pprof file ending in
/// the leak's native allocation, and the system name of each function.
fn leak_stacks_pprof(path: &Path) -> (BTreeSet<String>, Vec<(String, String)>) {
    let gz = std::fs::read(path).expect("read pprof");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut bytes)
        .expect("gunzip");
    let profile = PbProfile::decode(&bytes[..]).expect("decode profile.proto");
    let text = |index: i64| profile.string_table[index as usize].clone();
    let function_name = |id: u64| {
        let function = &profile.function[id as usize - 1];
        text(function.name)
    };
    let stacks = profile
        .sample
        .iter()
        .map(|sample| {
            let mut names: Vec<String> = sample
                .location_id
                .iter()
                .flat_map(|&id| {
                    let location = &profile.location[id as usize - 1];
                    location
                        .line
                        .iter()
                        .map(|line| function_name(line.function_id))
                        .collect::<Vec<_>>()
                })
                .collect();
            names.reverse();
            names.join(";")
        })
        .filter(|stack| {
            let leaf = stack.rsplit(';').next().unwrap_or("");
            leaf.starts_with(NATIVE) && stack.contains("(rt_leak.js)")
        })
        .collect();
    let system_names = profile
        .function
        .iter()
        .map(|function| (text(function.name), text(function.system_name)))
        .collect();
    (stacks, system_names)
}

/// The viewer's model of `dump` (`-f html`): its stacks (root first,
/// joined by `;`) ending in the leak's native allocation, and each frame
/// label's kind.
fn viewer_model(
    dump: &str,
    dir: &Path,
) -> (BTreeSet<String>, std::collections::BTreeMap<String, String>) {
    let html = dir.join("viewer.html");
    heapdiff_ok(&[
        dump,
        "-m",
        "alloc-space",
        "-f",
        "html",
        "-o",
        path_str(&html),
    ]);
    let page = std::fs::read_to_string(&html).expect("read the page");
    let start = r#"<script id="model" type="application/json">"#;
    let data = page.split_once(start).expect("the model").1;
    let data = data.split_once("</script>").expect("the model's end").0;
    let model: serde_json::Value = serde_json::from_str(data).expect("the model parses");
    let labels: Vec<&str> = model["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|frame| frame[0].as_str().expect("a label"))
        .collect();
    let kinds = model["frame_kinds"].as_array().expect("frame_kinds");
    assert_eq!(labels.len(), kinds.len());
    let kind_of = labels
        .iter()
        .zip(kinds)
        .map(|(label, kind)| {
            (
                label.to_string(),
                kind.as_str().expect("a kind").to_string(),
            )
        })
        .collect();
    let shared = model["stack_shared"].as_array().expect("stack_shared");
    let mut previous: Vec<u64> = Vec::new();
    let mut stacks = BTreeSet::new();
    for (rest, shared) in model["stack_frames"]
        .as_array()
        .expect("stack_frames")
        .iter()
        .zip(shared)
    {
        let mut frames = previous[..shared.as_u64().expect("shared") as usize].to_vec();
        frames.extend(
            rest.as_array()
                .expect("frames")
                .iter()
                .map(|f| f.as_u64().expect("a frame")),
        );
        let stack: Vec<&str> = frames.iter().map(|&f| labels[f as usize]).collect();
        if stack.last() == Some(&NATIVE) && stack.iter().any(|f| f.ends_with("(rt_leak.js)")) {
            stacks.insert(stack.join(";"));
        }
        previous = frames;
    }
    (stacks, kind_of)
}

/// Where `node` run with `flag` publishes its names.
#[derive(Clone, Copy)]
enum Names {
    /// `--perf-basic-prof`: `/tmp/perf-PID.map`.
    PerfMap,
    /// `--perf-prof`: `jit-PID.dump` in its working directory.
    Jitdump,
}

#[test]
fn javascript_frames_are_named_in_call_order_in_every_output() {
    check(Names::PerfMap);
}

#[test]
fn javascript_frames_are_named_from_a_jitdump() {
    check(Names::Jitdump);
}

/// Debian's Node.js, or a skip (a failure under the test command, which
/// installs it).
fn installed_node() -> Option<&'static Path> {
    let node = Path::new("/usr/bin/node");
    if node.exists() {
        return Some(node);
    }
    skip(Missing::Software(
        "Node.js is not installed (apt-get install nodejs)",
    ));
    None
}

fn check(names: Names) {
    let Some(node) = installed_node() else {
        return;
    };
    let script = programs_dir().join("rt_leak.js");
    let flag = match names {
        Names::PerfMap => "--perf-basic-prof",
        Names::Jitdump => "--perf-prof",
    };
    let outcome = Run::new(node)
        .args([flag, "--interpreted-frames-native-stack", path_str(&script)])
        .prof_conf("lg_prof_sample:14")
        .with_shim()
        .run();
    outcome.assert_success();
    let (file, dump) = outcome.final_dump();
    let source = match names {
        Names::PerfMap => format!("/tmp/perf-{}.map", outcome.pid),
        Names::Jitdump => {
            path_str(&outcome.dir.path().join(format!("jit-{}.dump", outcome.pid))).to_string()
        }
    };
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", outcome.pid));
    assert_eq!(dump.runtime.sources, [source], "{}", outcome.context());
    for function in ["handleRequest", "makeBuffer"] {
        assert!(
            dump.runtime.symbols.iter().any(|symbol| {
                symbol.kind == FrameKind::JavaScript
                    && symbol.name.contains(&format!("{function} "))
                    && symbol.name.contains("rt_leak.js:")
            }),
            "{function} not among the dump's runtime symbols: {:?}",
            dump.runtime.symbols
        );
    }
    let path = path_str(&file.path);

    // folded: every leak stack names handleRequest above the native
    // allocation; makeBuffer, where shown, between them; JavaScript frames
    // carry the JIT suffix, native ones none; no bare address.
    let folded = leak_stacks_folded(path);
    assert!(!folded.is_empty(), "no leak stack names the script");
    let mut with_make = 0;
    for (frames, suffixes) in &folded {
        let stack = frames.join(";");
        let at = |name: &str| frames.iter().position(|frame| frame == name);
        let handle = at(HANDLE).unwrap_or_else(|| panic!("no {HANDLE}: {stack}"));
        let native = at(NATIVE).expect("the leak's allocation");
        assert!(handle < native, "{stack}");
        if let Some(make) = at(MAKE) {
            with_make += 1;
            assert!(handle < make && make < native, "{stack}");
            assert_eq!(suffixes[make], "_[j]", "{stack}");
        }
        assert_eq!(suffixes[handle], "_[j]", "{stack}");
        assert_eq!(suffixes[native], "", "{stack}");
        assert_eq!(frames[0], "_start", "the walk reaches the root: {stack}");
        assert!(!stack.contains("0x"), "no bare address: {stack}");
    }
    assert!(with_make > 0, "no leak stack names {MAKE}: {folded:#?}");
    let folded: BTreeSet<String> = folded.iter().map(|(f, _)| f.join(";")).collect();

    // json: the same stacks, frame for frame, and each name's kind.
    let json: serde_json::Value =
        serde_json::from_str(&heapdiff_ok(&[path, "-m", "alloc-space", "-f", "json"]))
            .expect("heapdiff's json parses");
    let names = json["names"].as_array().expect("names");
    let kinds = json["name_kinds"].as_array().expect("name_kinds");
    assert_eq!(names.len(), kinds.len());
    let kind_of = |wanted: &str| {
        let index = names.iter().position(|name| name == wanted);
        index.map(|index| kinds[index].as_str().expect("a kind"))
    };
    assert_eq!(kind_of(HANDLE), Some("javascript"));
    assert_eq!(kind_of(MAKE), Some("javascript"));
    assert_eq!(kind_of(NATIVE), Some("native"));
    let json_stacks: BTreeSet<String> = json_stacks(&json, "alloc-space")
        .into_iter()
        .filter(|stack| stack.ends_with(NATIVE) && stack.contains("(rt_leak.js)"))
        .collect();
    assert_eq!(json_stacks, folded, "json and folded disagree");

    // The program frame of the native allocation is the script's function
    // that called it, not the runtime's code.
    let allocation = json["metrics"]["alloc-space"]["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .find(|f| f["name"].as_str().is_some_and(|n| n.starts_with(NATIVE)))
        .unwrap_or_else(|| panic!("{NATIVE} not among json's functions"));
    let program = allocation["program_frame"].as_str().unwrap_or("(none)");
    assert!(
        program == MAKE || program == HANDLE,
        "the allocation's program frame is {program}, not the script's"
    );

    // pprof (whose native names are whole signatures): the same JavaScript
    // frames in the same order, and the kind in each function's system name.
    let pprof = outcome.dir.path().join("node.pb.gz");
    heapdiff_ok(&[
        path,
        "-m",
        "alloc-space",
        "-f",
        "pprof",
        "-o",
        path_str(&pprof),
    ]);
    let (pprof_stacks, system_names) = leak_stacks_pprof(&pprof);
    let javascript = |stacks: &BTreeSet<String>| -> BTreeSet<String> {
        stacks
            .iter()
            .map(|stack| {
                let frames = stack.split(';');
                let frames = frames.filter(|frame| kind_of(frame) == Some("javascript"));
                frames.collect::<Vec<_>>().join(";")
            })
            .collect()
    };
    assert_eq!(
        javascript(&pprof_stacks),
        javascript(&folded),
        "pprof and folded disagree"
    );
    // text: both functions with their kind; the caller's total holds the
    // callee's.
    let text = heapdiff_ok(&[path, "-m", "alloc-space", "-f", "text", "--top", "500"]);
    let total_of = |name: &str| -> f64 {
        let row = format!("  {name}  [javascript]");
        let line = text
            .lines()
            .find(|line| line.ends_with(&row))
            .unwrap_or_else(|| panic!("no row {row:?} in\n{text}"));
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields[2].parse().expect("a total")
    };
    assert!(total_of(HANDLE) >= total_of(MAKE), "{text}");

    // The viewer's model (`-f html`, as `heapdiff serve` sends it): the same
    // JavaScript frames in the same order, each with its kind.
    let (viewer_stacks, viewer_kinds) = viewer_model(path, outcome.dir.path());
    assert_eq!(
        viewer_kinds.get(HANDLE).map(String::as_str),
        Some("javascript")
    );
    assert_eq!(
        viewer_kinds.get(MAKE).map(String::as_str),
        Some("javascript")
    );
    assert_eq!(viewer_kinds.get(NATIVE).map(String::as_str), Some("native"));
    assert_eq!(
        javascript(&viewer_stacks),
        javascript(&folded),
        "the viewer and folded disagree"
    );
    for (name, system) in &system_names {
        let wanted = match name.as_str() {
            HANDLE | MAKE => format!("javascript:{name}"),
            NATIVE => name.clone(),
            _ => continue,
        };
        assert_eq!(system, &wanted, "pprof's system name of {name}");
    }
}

/// The alloc-space estimate of the leak's native allocation (every stack
/// ending in it) in the exit dump of `outcome`, and heapdiff's stderr.
fn leak_total(outcome: &heapsample_tests::run::Outcome) -> (f64, String) {
    let (file, _) = outcome.final_dump();
    let output = heapsample_tests::tools::heapdiff(&[
        path_str(&file.path),
        "-m",
        "alloc-space",
        "-f",
        "folded",
    ]);
    assert!(output.status.success(), "{output:?}");
    let total = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(stack, _)| stack.ends_with(NATIVE))
        .map(|(_, value)| value.parse::<f64>().expect("a folded value"))
        .sum();
    (total, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Without perf support the stacks are as before (the script's frames say
/// `[node: no perf map]`, never an address) and heapdiff says in one line
/// how to get names; the names change no estimate: the leak's total with
/// and without them agree with each other and with the program's truth.
///
/// The bound: each buffer of `s` bytes is sampled with probability
/// `p = 1 − exp(−s/P)` (P = 16 KiB) and weighted `s/p`, so the estimate's
/// variance is Σ s²(1 − p)/p over the 4000 buffers (σ ≈ 0.8 MB of 77.8 MB);
/// two independent runs differ with σ√2. Five σ (a false failure below
/// one in a million, the estimate being a sum of 4000 independent terms)
/// plus 1 MiB for node's own ArrayBuffers, which the truth leaves out.
#[test]
fn without_perf_support_one_line_says_how_and_estimates_do_not_change() {
    let Some(node) = installed_node() else {
        return;
    };
    let script = programs_dir().join("rt_leak.js");
    let run = |flags: &[&str]| {
        let outcome = Run::new(node)
            .args(flags)
            .arg(&script)
            .prof_conf("lg_prof_sample:14")
            .with_shim()
            .run();
        outcome.assert_success();
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", outcome.pid));
        outcome
    };
    let plain = run(&[]);
    let named = run(&["--perf-basic-prof", "--interpreted-frames-native-stack"]);
    let truth: f64 = plain
        .stdout
        .split_whitespace()
        .nth(3)
        .and_then(|bytes| bytes.parse().ok())
        .unwrap_or_else(|| panic!("the program's truth: {}", plain.stdout));
    let period = 16384.0_f64;
    let variance: f64 = (0..4000)
        .map(|i| {
            let size = 16384.0 + f64::from(i % 7) * 1024.0;
            let p = 1.0 - (-size / period).exp();
            size * size * (1.0 - p) / p
        })
        .sum();
    let sigma = variance.sqrt();
    let slack = 1_048_576.0;

    let (plain_total, plain_stderr) = leak_total(&plain);
    let (named_total, named_stderr) = leak_total(&named);
    let hints: Vec<&str> = plain_stderr
        .lines()
        .filter(|line| line.contains("published no names"))
        .collect();
    assert_eq!(hints.len(), 1, "{plain_stderr}");
    assert!(hints[0].contains("--perf-basic-prof"), "{}", hints[0]);
    assert!(
        !named_stderr.contains("published no names"),
        "{named_stderr}"
    );

    let (file, _) = plain.final_dump();
    let folded = heapdiff_ok(&[path_str(&file.path), "-m", "alloc-space", "-f", "folded"]);
    let leaks: Vec<&str> = folded
        .lines()
        .filter(|line| line.contains(NATIVE) && line.contains("[node: no perf map]"))
        .collect();
    assert!(!leaks.is_empty(), "{folded}");
    for line in &leaks {
        assert!(!line.contains("0x"), "no bare address: {line}");
        assert!(
            !line.contains("rt_leak.js"),
            "no name without a map: {line}"
        );
    }

    for (what, total) in [("without names", plain_total), ("with names", named_total)] {
        assert!(
            (total - truth).abs() <= 5.0 * sigma + slack,
            "{what}: {total} against the program's {truth} (σ {sigma})"
        );
    }
    assert!(
        (plain_total - named_total).abs() <= 5.0 * sigma * 2f64.sqrt() + slack,
        "{plain_total} without names, {named_total} with (σ {sigma})"
    );
}
