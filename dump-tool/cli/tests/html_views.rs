//! The viewer's page (`--format html`) shows the same view as every other
//! format: each view option changes the stacks the page's model carries,
//! checked on the model embedded in the page, on dumps whose stacks point
//! into a real gcc binary (two threads, two allocation sites).

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{Fixture, dump, module, stack};
use heapsample_format::{Dump, ThreadInfo, encode};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `main → calls_leaf → leaf_alloc`: 10 objects of 100 B on thread `main`;
/// `main → outer_with_inline → inlined_helper`: 5 of 40 B on `worker`.
fn two_thread_dump(fixture: &Fixture, leaf_objects: u64) -> Dump {
    let exe = fixture.binary.display().to_string();
    let mut worker_stack = stack(fixture.inline_stack(0), 5, 40);
    worker_stack.thread = 2;
    let mut dump = dump(
        &exe,
        0,
        vec![module(&fixture.binary, 0)],
        vec![
            stack(fixture.leaf_stack(0), leaf_objects, 100),
            worker_stack,
        ],
    );
    dump.threads = vec![
        ThreadInfo {
            serial: 1,
            tid: 11,
            name: "main".into(),
        },
        ThreadInfo {
            serial: 2,
            tid: 12,
            name: "worker".into(),
        },
    ];
    dump
}

fn write(fixture: &Fixture, name: &str, dump: &Dump) -> PathBuf {
    let path = fixture.dir.join(name);
    std::fs::write(&path, encode(dump)).unwrap();
    path
}

/// The model embedded in the page `heapdiff ARGS -f html -o -` prints.
fn page_model(args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_heapdiff"))
        .args(args)
        .args(["-f", "html", "-o", "-"])
        .output()
        .expect("run heapdiff");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    let page = String::from_utf8(output.stdout).expect("UTF-8 page");
    let start = page
        .find(r#"<script id="model" type="application/json">"#)
        .expect("the model's script element");
    let json = &page[start..];
    let json = &json[json.find('>').unwrap() + 1..json.find("</script>").unwrap()];
    serde_json::from_str(json).expect("the model is JSON")
}

/// Per stack of the model: `thread|root;…;leaf` and its in-use bytes on
/// the new side, sorted.
fn stacks(model: &Value) -> Vec<(String, f64)> {
    let frames = model["frames"].as_array().unwrap();
    let threads = model["threads"].as_array().unwrap();
    let values = model["new_values"].as_array().unwrap();
    let mut previous: Vec<u64> = Vec::new();
    let mut stacks: Vec<(String, f64)> = model["stack_frames"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, tail)| {
            // Each stack is the frames it shares with the one before, then
            // its own.
            let shared = model["stack_shared"][i].as_u64().unwrap() as usize;
            let mut list = previous[..shared].to_vec();
            list.extend(tail.as_array().unwrap().iter().map(|f| f.as_u64().unwrap()));
            previous = list.clone();
            let names: Vec<&str> = list
                .iter()
                .map(|&f| frames[f as usize][0].as_str().unwrap())
                .collect();
            let thread = &threads[model["stack_threads"][i].as_u64().unwrap() as usize];
            let key = format!("{}|{}", thread.as_str().unwrap(), names.join(";"));
            (key, values[4 * i].as_f64().unwrap())
        })
        .collect();
    stacks.sort_by(|a, b| a.0.cmp(&b.0));
    stacks
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn owned(rows: &[(&str, f64)]) -> Vec<(String, f64)> {
    rows.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

const LEAF: &str = "main|main;calls_leaf;leaf_alloc";
const INLINE: &str = "worker|main;outer_with_inline;inlined_helper";

/// The page of the two-thread dump with `flags` has `expected` stacks.
fn check(name: &str, flags: &[&str], expected: &[(&str, f64)]) {
    let fixture = Fixture::new(name, &["-no-pie"]);
    let path = write(&fixture, "new.prof", &two_thread_dump(&fixture, 10));
    let mut args = flags.to_vec();
    args.push(s(&path));
    assert_eq!(stacks(&page_model(&args)), owned(expected), "{flags:?}");
}

#[test]
fn without_options_the_page_has_every_stack() {
    check("html-plain", &[], &[(LEAF, 1000.0), (INLINE, 200.0)]);
}

#[test]
fn focus_keeps_the_matching_stacks() {
    check("html-focus", &["--focus", "leaf_alloc"], &[(LEAF, 1000.0)]);
}

#[test]
fn ignore_drops_the_matching_stacks() {
    check(
        "html-ignore",
        &["--ignore", "leaf_alloc"],
        &[(INLINE, 200.0)],
    );
}

#[test]
fn hide_removes_the_matching_frames() {
    check(
        "html-hide",
        &["--hide", "^calls_leaf$"],
        &[("main|main;leaf_alloc", 1000.0), (INLINE, 200.0)],
    );
}

#[test]
fn by_thread_adds_a_root_frame_per_thread() {
    check(
        "html-by-thread",
        &["--by-thread"],
        &[
            ("main|[thread main];main;calls_leaf;leaf_alloc", 1000.0),
            (
                "worker|[thread worker];main;outer_with_inline;inlined_helper",
                200.0,
            ),
        ],
    );
}

#[test]
fn size_frames_add_a_leaf_frame_per_size_class() {
    check(
        "html-size-frames",
        &["--size-frames"],
        &[
            ("main|main;calls_leaf;leaf_alloc;[64–128 B]", 1000.0),
            (
                "worker|main;outer_with_inline;inlined_helper;[32–64 B]",
                200.0,
            ),
        ],
    );
}

#[test]
fn allocator_frames_drop_matching_leaf_frames() {
    check(
        "html-allocator-frames",
        &["--allocator-frames", "^leaf_alloc$"],
        &[("main|main;calls_leaf", 1000.0), (INLINE, 200.0)],
    );
}

#[test]
fn a_comparison_page_shows_both_sides_through_the_view() {
    let fixture = Fixture::new("html-views-diff", &["-no-pie"]);
    let base = write(&fixture, "base.prof", &two_thread_dump(&fixture, 10));
    let new = write(&fixture, "new.prof", &two_thread_dump(&fixture, 30));
    let model = page_model(&["--focus", "leaf_alloc", "--base", s(&base), s(&new)]);
    assert_eq!(stacks(&model), owned(&[(LEAF, 3000.0)]));
    let base_values = model["base_values"].as_array().unwrap();
    assert_eq!(base_values.len(), 4, "one stack, four metrics");
    assert_eq!(base_values[0].as_f64(), Some(1000.0));
    assert_eq!(model["pairing"], "independent", "seq 0 twice");
    assert_eq!(
        model["accumulations"],
        serde_json::json!(["in-use", "in-use", "cumulative", "cumulative"])
    );
}

#[test]
fn a_merged_page_follows_the_view_options() {
    let fixture = Fixture::new("html-views-merge", &["-no-pie"]);
    let one = write(&fixture, "one.prof", &two_thread_dump(&fixture, 10));
    let two = write(&fixture, "two.prof", &two_thread_dump(&fixture, 30));
    let model = page_model(&["merge", s(&one), s(&two), "--focus", "leaf_alloc"]);
    // The threads named `main` of both processes draw as one stack.
    assert_eq!(stacks(&model), owned(&[(LEAF, 4000.0)]));
    let model = page_model(&["merge", s(&one), s(&two), "--by-thread"]);
    assert_eq!(
        stacks(&model),
        owned(&[
            ("main|[thread main];main;calls_leaf;leaf_alloc", 4000.0),
            (
                "worker|[thread worker];main;outer_with_inline;inlined_helper",
                400.0
            ),
        ])
    );
}
