//! The heapdiff binary end to end on dumps built from a real gcc binary:
//! every format, comparisons, default paths, mismatches and bad input.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{Fixture, dump, module, stack};
use heapsample_format::{Dump, encode};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn heapdiff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heapdiff"))
        .args(args)
        .output()
        .expect("run heapdiff")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn write_dump(dir: &Path, name: &str, dump: &Dump) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, encode(dump)).unwrap();
    path
}

/// base: leaf site 10 objects × 100 B live, inline site 5 × 40 B.
/// new:  leaf site 30 × 100 B (grew by 2000), inline site gone (−200).
fn two_dumps(fixture: &Fixture) -> (PathBuf, PathBuf) {
    let exe = fixture.binary.display().to_string();
    let modules = vec![module(&fixture.binary, 0)];
    let base = dump(
        &exe,
        0,
        modules.clone(),
        vec![
            stack(fixture.leaf_stack(0), 10, 100),
            stack(fixture.inline_stack(0), 5, 40),
        ],
    );
    let new = dump(
        &exe,
        0,
        modules,
        vec![stack(fixture.leaf_stack(0), 30, 100)],
    );
    (
        write_dump(&fixture.dir, "base.prof", &base),
        write_dump(&fixture.dir, "new.prof", &new),
    )
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn folded_single_profile_is_exact_with_period_one() {
    let fixture = Fixture::new("cli-folded", &["-no-pie"]);
    let (base, _) = two_dumps(&fixture);
    let out = heapdiff(&["--format", "folded", s(&base)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "main;calls_leaf;leaf_alloc 1000\nmain;outer_with_inline;inlined_helper 200\n"
    );
    let objects = heapdiff(&["-f", "folded", "-m", "inuse-objects", "-o", "-", s(&base)]);
    assert_eq!(
        stdout(&objects),
        "main;calls_leaf;leaf_alloc 10\nmain;outer_with_inline;inlined_helper 5\n"
    );
}

#[test]
fn keep_allocator_frames_keeps_nothing_extra_when_frames_start_in_user_code() {
    let fixture = Fixture::new("cli-keep", &["-no-pie"]);
    let (base, _) = two_dumps(&fixture);
    let out = heapdiff(&["-f", "folded", "--keep-allocator-frames", s(&base)]);
    assert!(stdout(&out).contains("main;calls_leaf;leaf_alloc 1000"));
}

#[test]
fn folded_diff_signs_and_magnitudes() {
    let fixture = Fixture::new("cli-diff", &["-no-pie"]);
    let (base, new) = two_dumps(&fixture);
    // The default is the two-column form flame graph tools draw.
    let two = heapdiff(&["-f", "folded", "--base", s(&base), s(&new)]);
    assert!(two.status.success(), "{}", stderr(&two));
    assert_eq!(
        stdout(&two),
        "main;calls_leaf;leaf_alloc 1000 3000\nmain;outer_with_inline;inlined_helper 200 0\n"
    );
    let delta = heapdiff(&["-f", "folded", "--delta", "--base", s(&base), s(&new)]);
    assert_eq!(
        stdout(&delta),
        "main;calls_leaf;leaf_alloc 2000\nmain;outer_with_inline;inlined_helper -200\n"
    );
}

#[test]
fn text_report_single_and_diff() {
    let fixture = Fixture::new("cli-text", &["-no-pie"]);
    let (base, new) = two_dumps(&fixture);
    let out = heapdiff(&["-f", "text", "--top", "5", s(&base)]);
    let text = stdout(&out);
    assert!(
        text.contains("Top 5 functions by self inuse-space"),
        "{text}"
    );
    let leaf_row = text
        .lines()
        .find(|l| l.ends_with(" leaf_alloc"))
        .expect(&text);
    assert!(
        leaf_row.split_whitespace().next() == Some("1000"),
        "{leaf_row}"
    );
    assert!(
        text.contains("totals: sampled estimate: in use 1200 bytes in 15 objects"),
        "{text}"
    );
    assert!(
        text.contains("totals: exact counters:   allocated 1200 bytes in 15 allocations"),
        "{text}"
    );

    let diff = stdout(&heapdiff(&["-f", "text", "--base", s(&base), s(&new)]));
    let grew = diff
        .lines()
        .find(|l| l.ends_with(" leaf_alloc"))
        .expect(&diff);
    let columns: Vec<&str> = grew.split_whitespace().collect();
    assert_eq!(&columns[..3], &["1000", "3000", "+2000"], "{diff}");
    let shrank = diff
        .lines()
        .find(|l| l.ends_with(" inlined_helper"))
        .expect(&diff);
    let columns: Vec<&str> = shrank.split_whitespace().collect();
    assert_eq!(&columns[..3], &["200", "0", "-200"], "{diff}");
    assert!(
        diff.contains("Delta: +1800 bytes (1200 base → 3000 new)"),
        "{diff}"
    );
}

/// The JSON report: schema, every metric, per-function self and total with
/// point intervals at period 1, and with a base the changes of each function.
#[test]
fn json_report_single_and_diff() {
    let fixture = Fixture::new("cli-json", &["-no-pie"]);
    let (base, new) = two_dumps(&fixture);
    let single: serde_json::Value =
        serde_json::from_str(&stdout(&heapdiff(&["-f", "json", s(&base)]))).unwrap();
    assert_eq!(single["schema"], "heapdiff-report/2");
    // Stacks are written once, their frames indexing the names; each
    // metric's stacks index them.
    let names = single["names"].as_array().unwrap();
    let stacks = single["stacks"].as_array().unwrap();
    let leaves: Vec<&str> = single["metrics"]["inuse-space"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let frames = stacks[entry["stack"].as_u64().unwrap() as usize]
                .as_array()
                .unwrap();
            let leaf = frames.last().unwrap().as_u64().unwrap();
            names[leaf as usize].as_str().unwrap()
        })
        .collect();
    assert!(leaves.contains(&"leaf_alloc"), "{leaves:?}");
    assert_eq!(single["new"]["estimator"], "horvitz-thompson");
    assert_eq!(single["new"]["sampling_period"], 1);
    let inuse = &single["metrics"]["inuse-space"];
    assert_eq!(inuse["total"]["estimate"], 1200.0);
    assert_eq!(inuse["total"]["low"], 1200.0);
    let leaf = inuse["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "leaf_alloc")
        .expect("leaf_alloc");
    assert_eq!(leaf["self"]["estimate"], 1000.0);
    assert_eq!(leaf["self"]["high"], 1000.0);
    assert_eq!(
        single["metrics"]["alloc-objects"]["total"]["estimate"],
        15.0
    );
    assert!(single.get("base").is_none());

    let diff: serde_json::Value = serde_json::from_str(&stdout(&heapdiff(&[
        "-f",
        "json",
        "--base",
        s(&base),
        s(&new),
    ])))
    .unwrap();
    assert_eq!(diff["pairing"], "independent");
    let inuse = &diff["metrics"]["inuse-space"];
    assert_eq!(inuse["delta"]["estimate"], 1800.0);
    assert_eq!(inuse["delta"]["significant"], true);
    let grew = inuse["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "leaf_alloc")
        .expect("leaf_alloc changed");
    assert_eq!(grew["base"]["self"], 1000.0);
    assert_eq!(grew["new"]["self"], 3000.0);
    assert_eq!(grew["delta"]["self"]["estimate"], 2000.0);
    assert_eq!(grew["delta"]["self"]["significant"], true);
}

#[test]
fn svg_default_path_and_summary() {
    let fixture = Fixture::new("cli-svg", &["-no-pie"]);
    let (base, new) = two_dumps(&fixture);
    let out = heapdiff(&[s(&base)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg_path = PathBuf::from(format!("{}.svg", s(&base)));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("leaf_alloc") && svg.contains("inlined_helper"));
    assert!(stderr(&out).contains(&format!("wrote {}", svg_path.display())));
    assert!(stdout(&out).contains("leaf_alloc"), "summary on stdout");

    let diff = heapdiff(&["--base", s(&base), s(&new), "--title", "growth"]);
    assert!(diff.status.success(), "{}", stderr(&diff));
    let diff_svg = std::fs::read_to_string(format!("{}.diff.svg", s(&new))).unwrap();
    assert!(diff_svg.contains("growth") && diff_svg.contains("leaf_alloc"));
    assert!(
        stderr(&diff).contains("--negate"),
        "vanished stacks are pointed out"
    );
    let negated = heapdiff(&[
        "--base",
        s(&base),
        s(&new),
        "--negate",
        "--inverted",
        "-o",
        "-",
    ]);
    let negated_svg = stdout(&negated);
    assert!(
        negated_svg.contains("inlined_helper"),
        "vanished stack visible with --negate"
    );
}

#[test]
fn pprof_output_decodes() {
    let fixture = Fixture::new("cli-pprof", &["-no-pie"]);
    let (base, _) = two_dumps(&fixture);
    let out_path = fixture.dir.join("out.pb.gz");
    let out = heapdiff(&["-f", "pprof", "-o", s(&out_path), s(&base)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let profile = common::read_pprof(&out_path);
    let strings = &profile.string_table;
    let types: Vec<(&str, &str)> = profile
        .sample_type
        .iter()
        .map(|t| {
            (
                strings[t.r#type as usize].as_str(),
                strings[t.unit as usize].as_str(),
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes")
        ]
    );
    let inuse: i64 = profile.sample.iter().map(|s| s.value[3]).sum();
    assert_eq!(inuse, 1200);
    assert_eq!(profile.mapping.len(), 1);
    assert!(!strings[profile.mapping[0].build_id as usize].is_empty());
    let names: Vec<&str> = profile
        .function
        .iter()
        .map(|f| strings[f.name as usize].as_str())
        .collect();
    assert!(
        names.contains(&"inlined_helper") && names.contains(&"outer_with_inline"),
        "{names:?}"
    );
    let with_inline = profile
        .location
        .iter()
        .find(|l| l.line.len() == 2)
        .expect("inlined location");
    assert!(with_inline.line.iter().all(|l| l.line > 0));
}

#[test]
fn go_tool_pprof_reads_the_output() {
    let fixture = Fixture::new("cli-go", &["-no-pie"]);
    let (base, new) = two_dumps(&fixture);
    let single = fixture.dir.join("single.pb.gz");
    assert!(
        heapdiff(&["-f", "pprof", "-o", s(&single), s(&base)])
            .status
            .success()
    );
    let Some(top) = go_pprof_top(&single, &fixture.dir) else {
        return;
    };
    assert!(
        top.contains("leaf_alloc") && top.contains("inlined_helper"),
        "{top}"
    );
    assert!(
        top.contains("1200B total") || top.contains("1.17kB total"),
        "{top}"
    );

    let diff = fixture.dir.join("diff.pb.gz");
    assert!(
        heapdiff(&["-f", "pprof", "--base", s(&base), "-o", s(&diff), s(&new)])
            .status
            .success()
    );
    let top = go_pprof_top(&diff, &fixture.dir).expect("go was there a moment ago");
    // pprof's total is the sum of |values|; the net change is what it accounts for.
    assert!(
        top.contains("leaf_alloc") && top.contains("accounting for 1800B"),
        "{top}"
    );
    assert!(
        top.contains("-200B") && top.contains("inlined_helper"),
        "{top}"
    );
}

/// `go tool pprof -top` in-use space; `None` (a skip) when go is missing.
fn go_pprof_top(profile: &Path, dir: &Path) -> Option<String> {
    heapsample_tests::go_tool_pprof(&["-top", "-sample_index=inuse_space"], profile, dir)
}

#[test]
fn different_programs_error_and_periods_warn() {
    let fixture = Fixture::new("cli-mismatch", &["-no-pie"]);
    let (base, new) = two_dumps(&fixture);
    let mut other = heapsample_format::decode(&std::fs::read(&base).unwrap()).unwrap();
    other.executable = "/usr/bin/other".into();
    other.modules[0].build_id = vec![1, 2, 3];
    let other_path = write_dump(&fixture.dir, "other.prof", &other);
    let out = heapdiff(&["-f", "folded", "--base", s(&other_path), s(&new)]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("/usr/bin/other") && err.contains("--allow-mismatch"),
        "{err}"
    );
    let forced = heapdiff(&[
        "-f",
        "folded",
        "--allow-mismatch",
        "--base",
        s(&other_path),
        s(&new),
    ]);
    assert!(forced.status.success() && stderr(&forced).contains("warning"));

    let mut sampled = heapsample_format::decode(&std::fs::read(&base).unwrap()).unwrap();
    sampled.lg_sample_period = 19;
    let sampled_path = write_dump(&fixture.dir, "sampled.prof", &sampled);
    let out = heapdiff(&["-f", "folded", "--base", s(&sampled_path), s(&new)]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("sampling periods differ"),
        "{}",
        stderr(&out)
    );
}

/// Every malformed input: exit status 2, one line naming the file, no panic.
#[test]
fn bad_input_is_one_line_error() {
    let fixture = Fixture::new("cli-bad", &["-no-pie"]);
    let (base, _) = two_dumps(&fixture);
    let good = std::fs::read(&base).unwrap();
    let mut wrong_version = good.clone();
    wrong_version[8] = 7;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.prof", vec![], "empty file"),
        (
            "truncated.prof",
            good[..good.len() / 2].to_vec(),
            "truncated",
        ),
        ("short.prof", good[..10].to_vec(), "too short"),
        (
            "foreign.prof",
            b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0\x01\0\0\0\0\0\0\0".to_vec(),
            "not a heapsample dump (wrong magic bytes), nor a jemalloc or gperftools heap profile",
        ),
        (
            "cut-jemalloc.heap",
            b"heap_v2/524288\n  t*: 1: 2 [0: 0]\n".to_vec(),
            "no MAPPED_LIBRARIES section",
        ),
        ("version.prof", wrong_version, "version 7"),
        (
            "trailing.prof",
            [good.as_slice(), b"xx"].concat(),
            "after the body",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = fixture.dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        assert_one_line_error(&heapdiff(&["-f", "folded", s(&path)]), &path, expected);
        assert_one_line_error(
            &heapdiff(&["-f", "folded", "--base", s(&path), s(&base)]),
            &path,
            expected,
        );
    }
    let missing = fixture.dir.join("missing.prof");
    assert_one_line_error(&heapdiff(&[s(&missing)]), &missing, "no such file");
    assert_one_line_error(&heapdiff(&[s(&fixture.dir)]), &fixture.dir, "directory");
}

#[test]
fn random_byte_flips_through_the_binary() {
    let fixture = Fixture::new("cli-flips", &["-no-pie"]);
    let (base, _) = two_dumps(&fixture);
    let good = std::fs::read(&base).unwrap();
    let mut rng = common::Lcg(0x5eed);
    let path = fixture.dir.join("flipped.prof");
    for _ in 0..40 {
        let mut bytes = good.clone();
        let index = rng.below(bytes.len() as u64) as usize;
        bytes[index] ^= 1 + rng.below(255) as u8;
        std::fs::write(&path, &bytes).unwrap();
        let out = heapdiff(&["-f", "text", s(&path)]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "flip at {index}: {}",
            stderr(&out)
        );
        assert_eq!(stderr(&out).lines().count(), 1);
    }
}

fn assert_one_line_error(output: &Output, path: &Path, expected: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{}: {err}", path.display());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains(expected), "expected {expected:?} in {err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn unwritable_output_is_an_error() {
    let fixture = Fixture::new("cli-unwritable", &["-no-pie"]);
    let (base, _) = two_dumps(&fixture);
    let out = heapdiff(&["-o", "/nonexistent-dir/out.svg", s(&base)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent-dir/out.svg: cannot write"));
}
