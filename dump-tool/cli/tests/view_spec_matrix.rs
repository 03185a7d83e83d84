//! Every output format × every view option: the output names the setting
//! (folded, which has no comment syntax, names it on stderr). Fails when a
//! renderer omits the view's description.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{Fixture, dump, module, stack};
use heapsample_format::encode;
use std::path::Path;
use std::process::Command;

/// Each option and the words every output must show for it.
const OPTIONS: &[(&[&str], &str)] = &[
    (&[], "metric inuse-space"),
    (&["-m", "alloc-space"], "metric alloc-space"),
    (&["--focus", "."], "focus /./"),
    (&["--ignore", "^none_ignored$"], "ignore /^none_ignored$/"),
    (&["--hide", "^none_hidden$"], "hide /^none_hidden$/"),
    (
        &["--allocator-frames", "^none_wrapped$"],
        "allocator-frames /^none_wrapped$/",
    ),
    (&["--by-thread"], "by thread"),
    (&["--size-frames"], "size frames"),
    (&["--full-names"], "full names"),
    (&["--keep-allocator-frames"], "allocator frames kept"),
    (
        &["--born-after", "1s", "--born-before", "5s"],
        "born in [1s, 5s) since the profiler's start",
    ),
    (
        &["--born-after", "2s"],
        "born in [2s, the dump) since the profiler's start",
    ),
    (&["-m", "temp-space"], "temporary: freed within 0.001s"),
    (
        &["-m", "temp-objects", "--temporary", "250us"],
        "temporary: freed within 0.00025s",
    ),
];

const FORMATS: &[&str] = &["text", "json", "svg", "pprof", "html", "folded"];

/// What a run of `format` shows: its output file or stdout, and for
/// folded its stderr (pprof decompressed: its comments are plain strings).
fn shown(dir: &Path, dump: &Path, format: &str, args: &[&str], base: Option<&Path>) -> String {
    let out_path = dir.join(format!("out.{format}"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_heapdiff"));
    command.args(["-f", format]).args(args);
    if format != "folded" {
        // Folded goes to stdout and names the view on stderr (not with -q).
        command.args(["-q", "-o"]).arg(&out_path);
    }
    if let Some(base) = base {
        command.arg("--base").arg(base);
    }
    let out = command.arg(dump).output().expect("run heapdiff");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{format} {args:?}: {stderr}");
    match format {
        "folded" => stderr,
        "pprof" => {
            let profile = common::read_pprof(&out_path);
            let strings = &profile.string_table;
            let comments: Vec<&str> = profile
                .comment
                .iter()
                .map(|&i| strings[i as usize].as_str())
                .collect();
            comments.join("\n")
        }
        // The svg's and the page's text is XML-escaped.
        "svg" | "html" => std::fs::read_to_string(&out_path)
            .unwrap()
            .replace("&apos;", "'")
            .replace("&#39;", "'")
            .replace("&quot;", "\"")
            .replace("&amp;", "&"),
        _ => std::fs::read_to_string(&out_path).unwrap(),
    }
}

/// `dump` with clocks (a 10 s run) and its stacks' live objects listed
/// with births a second apart: the birth range and the temporary metrics
/// apply to it.
fn with_births(dump: heapsample_format::Dump) -> heapsample_format::Dump {
    let run_ns = 10_000_000_000;
    let mut live_samples = Vec::new();
    for (index, stack) in dump.stacks.iter().enumerate() {
        let size = stack.live_bytes / stack.live_objects.max(1);
        for i in 0..stack.live_objects {
            live_samples.push(heapsample_format::LiveSample {
                stack: index as u32,
                thread: stack.thread,
                birth_ns: i * 1_000_000_000,
                size,
                usable: size,
            });
        }
    }
    heapsample_format::Dump {
        process: heapsample_format::Process {
            start_monotonic_ns: 1,
            dump_monotonic_ns: 1 + run_ns,
            start_unix_ns: dump.time_unix_ns - run_ns,
            ..dump.process.clone()
        },
        live_samples,
        ..dump
    }
}

#[test]
fn every_format_names_every_view_option() {
    let fixture = Fixture::new("cli-view-spec", &["-no-pie"]);
    let exe = fixture.binary.display().to_string();
    let modules = vec![module(&fixture.binary, 0)];
    // 10 live objects of 100 bytes, and 5 of 64 bytes freed within 1 µs.
    let freed = heapsample_format::Stack {
        live_objects: 0,
        live_bytes: 0,
        live_usable_bytes: 0,
        ..stack(fixture.inline_stack(0), 5, 64)
    };
    let mut profile = with_births(dump(
        &exe,
        0,
        modules.clone(),
        vec![stack(fixture.leaf_stack(0), 10, 100), freed],
    ));
    profile.stacks[1].lifetimes = vec![heapsample_format::LifetimeBucket {
        bucket: 0,
        samples: 5,
        sampled_bytes: 320,
        weights: profile.stacks[1].alloc,
    }];
    let path = fixture.dir.join("one.prof");
    std::fs::write(&path, encode(&profile)).unwrap();
    let mut missing = Vec::new();
    let mut summaries = String::new();
    for (args, words) in OPTIONS {
        let mut lines: Vec<(&str, Option<String>)> = Vec::new();
        for format in FORMATS {
            let shown = shown(&fixture.dir, &path, format, args, None);
            if !shown.contains(words) {
                missing.push(format!("{format} {args:?}: no {words:?}"));
            }
            if !shown.contains("sampling period 1 bytes") {
                missing.push(format!("{format} {args:?}: no sampling period"));
            }
            lines.push((format, view_line(&shown)));
        }
        // Every format states the view in the same words.
        let (_, first) = &lines[0];
        for (format, line) in &lines {
            assert_eq!(line, first, "{format} {args:?} against {}", lines[0].0);
        }
        summaries.push_str(&format!(
            "{}\t{}\n",
            args.join(" "),
            first.as_deref().unwrap_or("-")
        ));
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // And in the words of the golden file, one line per option.
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/view_lines.tsv");
    if std::env::var_os("HEAPSAMPLE_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &summaries).unwrap();
    }
    let expected = std::fs::read_to_string(&golden)
        .expect("tests/golden/view_lines.tsv (HEAPSAMPLE_WRITE_GOLDEN=1 writes it)");
    assert_eq!(
        summaries, expected,
        "the view lines changed: check them, then HEAPSAMPLE_WRITE_GOLDEN=1"
    );
}

/// The one-line view description an output carries (`view: metric …`, up
/// to the end of its line, string or element).
fn view_line(shown: &str) -> Option<String> {
    let start = shown.find("view: metric ")?;
    let rest = &shown[start..];
    let end = rest.find(['\n', '<', '"']).unwrap_or(rest.len());
    Some(rest[..end].trim_end().to_string())
}

#[test]
fn every_format_names_the_base_sampling() {
    let fixture = Fixture::new("cli-view-spec-base", &["-no-pie"]);
    let exe = fixture.binary.display().to_string();
    let modules = vec![module(&fixture.binary, 0)];
    let one = dump(
        &exe,
        0,
        modules.clone(),
        vec![stack(fixture.leaf_stack(0), 10, 100)],
    );
    let base = fixture.dir.join("base.prof");
    let new = fixture.dir.join("new.prof");
    std::fs::write(&base, encode(&one)).unwrap();
    std::fs::write(&new, encode(&one)).unwrap();
    for format in FORMATS {
        let shown = shown(&fixture.dir, &new, format, &["--focus", "."], Some(&base));
        for words in ["(base 1 bytes)", "focus /./"] {
            assert!(shown.contains(words), "{format}: no {words:?} in\n{shown}");
        }
    }
}

/// A filter changes the view's `total`, never `whole_total` (json), and the
/// text header states both; without a filter they are equal and the line
/// is left out.
#[test]
fn the_whole_profile_total_stands_beside_the_views() {
    let fixture = Fixture::new("cli-view-whole-total", &["-no-pie"]);
    let exe = fixture.binary.display().to_string();
    let modules = vec![module(&fixture.binary, 0)];
    // Sampling period 1: every value is exact. 1,000 bytes each.
    let profile = dump(
        &exe,
        0,
        modules,
        vec![
            stack(fixture.leaf_stack(0), 10, 100),
            stack(fixture.inline_stack(0), 5, 200),
        ],
    );
    let path = fixture.dir.join("two.prof");
    std::fs::write(&path, encode(&profile)).unwrap();
    let totals = |args: &[&str]| {
        let json = shown(&fixture.dir, &path, "json", args, None);
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        let metric = &json["metrics"]["inuse-space"];
        (
            metric["total"]["estimate"].as_f64().unwrap(),
            metric["whole_total"]["estimate"].as_f64().unwrap(),
        )
    };
    assert_eq!(totals(&[]), (2000.0, 2000.0));
    assert_eq!(totals(&["--ignore", "^leaf_alloc$"]), (1000.0, 2000.0));
    assert_eq!(totals(&["--focus", "^leaf_alloc$"]), (1000.0, 2000.0));
    let line = "heapdiff: this view holds 1000 bytes";
    let text = shown(
        &fixture.dir,
        &path,
        "text",
        &["--ignore", "^leaf_alloc$"],
        None,
    );
    assert!(
        text.lines().take(6).any(|l| l.starts_with(line)
            && l.contains("of the whole profile's 2000 bytes")
            && l.contains("50.0%")),
        "{text}"
    );
    let text = shown(&fixture.dir, &path, "text", &[], None);
    assert!(!text.contains("whole profile"), "{text}");
}

/// The detection limit of object counts is stated for the sizes the dump
/// allocates, from the sampling law: the fewest objects of size s of which
/// one is sampled with probability >= 95 % at period R is
/// ⌈ln 20 / −(s + 1)·ln(1 − 1/R)⌉ (the countdown counts one byte per call).
#[test]
fn the_detection_limit_names_the_sizes_present() {
    let fixture = Fixture::new("cli-view-size-limits", &["-no-pie"]);
    let exe = fixture.binary.display().to_string();
    let modules = vec![module(&fixture.binary, 0)];
    let lg = 14;
    let profile = dump(
        &exe,
        lg,
        modules,
        vec![
            stack(fixture.leaf_stack(0), 10, 8),
            stack(fixture.inline_stack(0), 5, 4096),
        ],
    );
    let path = fixture.dir.join("sizes.prof");
    std::fs::write(&path, encode(&profile)).unwrap();
    let limit = |size: f64| {
        let period = f64::from(1u32 << lg);
        (20f64.ln() / (-(size + 1.0) * (-1.0 / period).ln_1p())).ceil()
    };
    let json = shown(&fixture.dir, &path, "json", &[], None);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    for metric in ["alloc-objects", "inuse-objects"] {
        let by_size = &json["metrics"][metric]["detection_limit_by_size"];
        let expected = serde_json::json!([
            {"object_size": 8, "objects": limit(8.0)},
            {"object_size": 4096, "objects": limit(4096.0)},
        ]);
        assert_eq!(by_size, &expected, "{metric}");
    }
    assert_eq!(limit(8.0), 5454.0);
    assert!(
        json["metrics"]["alloc-space"]
            .get("detection_limit_by_size")
            .is_none()
    );
    let text = shown(&fixture.dir, &path, "text", &["-m", "alloc-objects"], None);
    let line = text
        .lines()
        .find(|l| l.starts_with("detection limit for the object sizes present: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(" objects of 8 bytes, 12 of 4096 bytes"),
        "{line}"
    );
}
