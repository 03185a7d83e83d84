//! heapdiff end to end: real programs run under the shim with
//! `lg_prof_sample:0` (every allocation sampled, so the numbers are exact),
//! then heapdiff (the release binary) reads their dumps.
//!
//! - C: folded output attributes exactly each site's bytes and objects to
//!   the site's function, for a no-pie and a PIE build;
//! - Rust: the same for demangled Rust function names (no hash);
//! - the SVG is well-formed XML and names the sites;
//! - a comparison of two dumps of one program, where one site grew and one
//!   shrank: folded diff and text report show the right signs and sizes;
//! - pprof output read by `go tool pprof -top` with the right totals;
//! - random byte flips of a real dump: one-line error, exit 2, no panic.

use heapsample_tests::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------
// Helpers

/// Sum of the values of the stacks that contain `function` as a frame.
fn attributed(folded: &[(Vec<String>, i64)], function: &str) -> i64 {
    folded
        .iter()
        .filter(|(frames, _)| frames.iter().any(|f| f == function))
        .map(|(_, value)| value)
        .sum()
}

/// Compile a C source given as text with the support library's flags.
fn compile_c_text(dir: &Path, name: &str, source: &str) -> PathBuf {
    let source_path = dir.join(format!("{name}.c"));
    std::fs::write(&source_path, source).expect("write C source");
    let binary = dir.join(name);
    let status = Command::new("gcc")
        .args(COMMON_FLAGS)
        .args(["-fno-pie", "-no-pie", "-ldl", "-o"])
        .arg(&binary)
        .arg(&source_path)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc {name}.c failed");
    binary
}

/// Compile a Rust source given as text with rustc (`-C opt-level=1 -g`).
fn compile_rust_text(dir: &Path, name: &str, source: &str) -> PathBuf {
    let source_path = dir.join(format!("{name}.rs"));
    std::fs::write(&source_path, source).expect("write Rust source");
    let binary = dir.join(name);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let output = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "-C",
            "opt-level=1",
            "-C",
            "debuginfo=2",
        ])
        .args(["-C", "force-frame-pointers=yes", "--crate-name", name, "-o"])
        .arg(&binary)
        .arg(&source_path)
        .output()
        .expect("run rustc");
    assert!(
        output.status.success(),
        "rustc {name}.rs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

// ---------------------------------------------------------------------------
// C: known sites, exact bytes

fn check_c_sites(options: &BuildOptions) {
    let program = compile_c("alloc_sites.c", options);
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let sites = parse_sites(&outcome.stdout);
    assert!(sites.len() >= 10, "no sites\n{}", outcome.context());
    let (file, _) = outcome.final_dump();
    let dump = path_str(&file.path);
    let space = parse_folded(&heapdiff_ok(&["-f", "folded", "-o", "-", dump]));
    let objects = parse_folded(&heapdiff_ok(&["-f", "folded", "-m", "inuse-objects", dump]));
    let alloc = parse_folded(&heapdiff_ok(&["-f", "folded", "-m", "alloc-space", dump]));
    let mut problems = Vec::new();
    for site in &sites {
        let mut check = |what: &str, expected: u64, folded: &[(Vec<String>, i64)]| {
            let got = attributed(folded, &site.name);
            if got != expected as i64 {
                problems.push(format!(
                    "{} {what}: heapdiff says {got}, the program {expected}",
                    site.name
                ));
            }
        };
        check("inuse-space", site.get("live_bytes"), &space);
        check("inuse-objects", site.get("live_objects"), &objects);
        if site.opt("exact_alloc") == Some(1) {
            check("alloc-space", site.get("alloc_bytes"), &alloc);
        }
    }
    assert!(
        problems.is_empty(),
        "{} build:\n{}\nfolded inuse-space:\n{:#?}",
        if options.pie { "PIE" } else { "no-pie" },
        problems.join("\n"),
        space
    );
    // The allocator's own frames are dropped: no stack ends in malloc.
    assert!(
        space
            .iter()
            .all(|(frames, _)| frames.last().is_some_and(|f| f != "malloc"))
    );
}

#[test]
fn c_sites_exact_bytes_no_pie() {
    check_c_sites(&BuildOptions::no_pie());
}

#[test]
fn c_sites_exact_bytes_pie() {
    check_c_sites(&BuildOptions::pie());
}

// ---------------------------------------------------------------------------
// Rust: demangled names, exact bytes

const RUST_SITES: &str = r#"
#[inline(never)]
fn make_buffers(count: usize, size: usize) -> Vec<Vec<u8>> {
    let mut buffers = Vec::with_capacity(count);
    for i in 0..count {
        let mut buffer = Vec::with_capacity(size);
        buffer.push(i as u8);
        buffers.push(buffer);
    }
    buffers
}

#[inline(never)]
fn make_boxes(count: usize) -> Vec<Box<[u64; 100]>> {
    (0..count).map(|i| Box::new([i as u64; 100])).collect()
}

fn main() {
    let buffers = make_buffers(40, 5000);
    let boxes = make_boxes(25);
    println!("buffers={} boxes={}", buffers.len(), boxes.len());
    std::mem::forget(buffers);
    std::mem::forget(boxes);
}
"#;

#[test]
fn rust_names_are_demangled_and_bytes_exact() {
    let dir = TempDir::new("heapdiff-rust");
    let binary = compile_rust_text(dir.path(), "rust_sites", RUST_SITES);
    let outcome = run_exact(&binary);
    let (file, _) = outcome.final_dump();
    let dump = path_str(&file.path);
    let folded_text = heapdiff_ok(&["-f", "folded", dump]);
    let folded = parse_folded(&folded_text);
    // 40 buffers of 5000 bytes, plus the outer Vec of 40 Vec<u8> (24 bytes each).
    assert_eq!(
        attributed(&folded, "rust_sites::make_buffers"),
        40 * 5000 + 40 * 24,
        "{folded_text}"
    );
    // 25 boxes of 800 bytes, plus the Vec of 25 pointers.
    assert_eq!(
        attributed(&folded, "rust_sites::make_boxes"),
        25 * 800 + 25 * 8,
        "{folded_text}"
    );
    assert!(
        !folded_text.contains("17h"),
        "hash suffix left: {folded_text}"
    );
    assert!(
        !folded_text.contains("__rust_alloc"),
        "allocator frames kept: {folded_text}"
    );
}

// ---------------------------------------------------------------------------
// SVG

#[test]
fn svg_is_well_formed_and_names_the_sites() {
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let (file, _) = outcome.final_dump();
    let svg_path = outcome.dir.path().join("out.svg");
    heapdiff_ok(&[
        "-o",
        path_str(&svg_path),
        "--title",
        "sites",
        path_str(&file.path),
    ]);
    let svg = std::fs::read_to_string(&svg_path).expect("svg written");
    if let Err(why) = check_well_formed(&svg) {
        panic!("SVG is not well-formed XML: {why}");
    }
    for name in ["alloc_site_big", "alloc_site_malloc_half_freed", "main"] {
        assert!(svg.contains(name), "{name} missing from the SVG");
    }
}

/// A small well-formedness check: every element closed in order, comments,
/// CDATA, processing instructions and the doctype skipped, attribute values
/// quoted.
fn check_well_formed(xml: &str) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    let mut rest = xml;
    let mut roots = 0;
    while let Some(start) = rest.find('<') {
        rest = &rest[start..];
        let skip = [
            ("<!--", "-->"),
            ("<![CDATA[", "]]>"),
            ("<?", "?>"),
            ("<!", ">"),
        ];
        if let Some((_, end)) = skip.iter().find(|(open, _)| rest.starts_with(open)) {
            let close = rest.find(end).ok_or(format!("unterminated {end}"))?;
            rest = &rest[close + end.len()..];
            continue;
        }
        let close = tag_end(rest).ok_or("unterminated tag")?;
        let tag = &rest[1..close];
        rest = &rest[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let expected = open
                .pop()
                .ok_or(format!("</{name}> without an open element"))?;
            if expected != name.trim() {
                return Err(format!("</{name}> closes <{expected}>"));
            }
        } else {
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            if open.is_empty() {
                roots += 1;
            }
            if !tag.ends_with('/') {
                open.push(name);
            }
        }
    }
    match (open.last(), roots) {
        (Some(unclosed), _) => Err(format!("<{unclosed}> never closed")),
        (None, 1) => Ok(()),
        (None, n) => Err(format!("{n} root elements")),
    }
}

/// The index of the `>` that ends the tag at the start of `text`, skipping
/// quoted attribute values.
fn tag_end(text: &str) -> Option<usize> {
    let mut quote = None;
    for (index, c) in text.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(index),
            _ => {}
        }
    }
    None
}

// ---------------------------------------------------------------------------
// Differential: one site grew, one shrank

/// `grow_site` holds 10 × 1000 bytes at the first dump and 30 × 1000 at
/// exit; `shrink_site` 50 × 512 then 20 × 512. The first dump is a manual
/// `heapsample_dump(NULL)` (the shim exports it), the second the exit dump.
const DIFF_PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))
static void *grown[30];
static void *shrunk[50];
static volatile unsigned long sink;

NOINLINE void grow_site(int from, int to) {
    for (int i = from; i < to; i++) { grown[i] = malloc(1000); memset(grown[i], 1, 1000); }
}

NOINLINE void shrink_site(void) {
    for (int i = 0; i < 50; i++) { shrunk[i] = malloc(512); memset(shrunk[i], 2, 512); }
}

NOINLINE void release_some(void) {
    for (int i = 0; i < 30; i++) { free(shrunk[i]); shrunk[i] = NULL; }
}

int main(void) {
    shrink_site();
    grow_site(0, 10);
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapsample_dump");
    if (dump) {
        int rc = dump(NULL);
        printf("manual-dump rc=%d\n", rc);
    } else {
        printf("manual-dump unavailable\n");
    }
    release_some();
    grow_site(10, 30);
    for (int i = 0; i < 30; i++) sink += ((unsigned char *)grown[i])[0];
    return 0;
}
"#;

/// (base dump, new dump) of the diff program, and the run whose directory
/// holds them.
fn diff_dumps(dir: &Path) -> (PathBuf, PathBuf, Outcome) {
    let binary = compile_c_text(dir, "diff_prog", DIFF_PROGRAM);
    let full = run_exact(&binary);
    let (final_file, _) = full.final_dump();
    let manual: Vec<DumpFile> = full
        .dump_files()
        .into_iter()
        .filter(|f| f.trigger == "m")
        .collect();
    assert!(
        full.stdout.contains("manual-dump rc=0") && manual.len() == 1,
        "the manual dump failed\n{}",
        full.context()
    );
    let base = manual[0].path.clone();
    (base, final_file.path, full)
}

#[test]
fn diff_shows_growth_and_shrinkage() {
    let dir = TempDir::new("heapdiff-diff");
    let (base, new, _keep) = diff_dumps(dir.path());
    let (base, new) = (path_str(&base), path_str(&new));

    let folded = parse_folded(&heapdiff_ok(&[
        "-f", "folded", "--delta", "--base", base, new,
    ]));
    assert_eq!(attributed(&folded, "grow_site"), 20 * 1000, "{folded:?}");
    assert_eq!(attributed(&folded, "shrink_site"), -30 * 512, "{folded:?}");

    let two = heapdiff_ok(&["-f", "folded", "--base", base, new]);
    let shrink_line = two.lines().find(|l| l.contains("shrink_site")).expect(&two);
    assert!(shrink_line.ends_with(" 25600 10240"), "{shrink_line}");

    let text = heapdiff_ok(&["-f", "text", "--base", base, new]);
    let row = |name: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from\n{text}"));
        line.split_whitespace()
            .take(3)
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("grow_site"), ["10000", "30000", "+20000"], "{text}");
    assert_eq!(row("shrink_site"), ["25600", "10240", "-15360"], "{text}");

    let svg = dir.path().join("diff.svg");
    heapdiff_ok(&["--base", base, new, "-o", path_str(&svg)]);
    let svg = std::fs::read_to_string(svg).expect("diff svg");
    check_well_formed(&svg).expect("well-formed differential SVG");
    assert!(svg.contains("grow_site") && svg.contains("shrink_site"));
}

// ---------------------------------------------------------------------------
// pprof

#[test]
fn go_tool_pprof_reads_totals() {
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let (file, dump) = outcome.final_dump();
    let profile = outcome.dir.path().join("out.pb.gz");
    heapdiff_ok(&[
        "-f",
        "pprof",
        "-o",
        path_str(&profile),
        path_str(&file.path),
    ]);
    let expected: u64 = dump.stacks.iter().map(|s| s.live_bytes).sum();
    let Some(top) = go_pprof_top(&profile, outcome.dir.path(), "inuse_space") else {
        return;
    };
    assert!(
        top.contains(&format!("of {expected}B total")),
        "expected {expected}B total in\n{top}"
    );
    assert!(top.contains("alloc_site_big"), "{top}");
    let objects: u64 = dump.stacks.iter().map(|s| s.alloc_objects).sum();
    let top = go_pprof_top(&profile, outcome.dir.path(), "alloc_objects").expect("go present");
    assert!(
        top.contains(&format!("of {objects} total")),
        "expected {objects} total in\n{top}"
    );
}

/// `go tool pprof -top` of `index`, in bytes for the space indexes; `None`
/// (a skip) when go is missing.
fn go_pprof_top(profile: &Path, home: &Path, index: &str) -> Option<String> {
    let sample_index = format!("-sample_index={index}");
    let mut args = vec!["-top", sample_index.as_str()];
    if index.ends_with("_space") {
        args.push("-unit=B");
    }
    go_tool_pprof(&args, profile, home)
}

// ---------------------------------------------------------------------------
// Bad input: random byte flips of a real dump

#[test]
fn byte_flips_of_a_real_dump_never_panic() {
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let (file, _) = outcome.final_dump();
    let good = std::fs::read(&file.path).expect("read dump");
    let flipped = outcome.dir.path().join("flipped.prof");
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..300 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let index = (state >> 33) as usize % good.len();
        let mask = ((state >> 13) as u8).max(1);
        let mut bytes = good.clone();
        bytes[index] ^= mask;
        std::fs::write(&flipped, &bytes).expect("write flipped dump");
        let out = heapdiff(&["-f", "folded", path_str(&flipped)]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !stderr.contains("panicked"),
            "panic on flip at {index}: {stderr}"
        );
        match out.status.code() {
            Some(0) => *outcomes.entry("accepted".into()).or_default() += 1,
            Some(2) => {
                assert_eq!(stderr.lines().count(), 1, "flip at {index}: {stderr}");
                assert!(stderr.contains("flipped.prof"), "{stderr}");
                *outcomes.entry("error".into()).or_default() += 1;
            }
            other => panic!("flip at {index}: exit {other:?}: {stderr}"),
        }
    }
    assert!(
        outcomes.get("error").copied().unwrap_or(0) > 250,
        "{outcomes:?}"
    );
}
