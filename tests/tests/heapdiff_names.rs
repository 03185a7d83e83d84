//! heapdiff's names, views, pprof details and foreign dumps, on real
//! programs run under the shim (`lg_prof_sample:0`, so numbers are exact)
//! or under jemalloc / tcmalloc:
//!
//! - C++: short names by default (no parameter lists, `<…>`), whole
//!   signatures with `--full-names`, SVG tooltips with full name and
//!   `file:line`;
//! - two libraries defining `plugin_alloc` are never merged, in any format;
//! - a module without debug info gives one warning naming what was looked
//!   for;
//! - pprof: frames heapdiff could not symbolize stay addresses in mappings
//!   with file offsets and build-ids, and `go tool pprof` symbolizes them;
//!   `pprof::base` on diffs; `thread`/`tid` labels for `-tagfocus`;
//! - views (`--focus`, `--ignore`, `--hide`, `--allocator-frames`,
//!   `--by-thread`, `--size-frames`) in folded, text, svg and pprof; a
//!   Python program's allocator wrappers; Rust names (whole, no hash) and
//!   views on them;
//! - jemalloc heap_v2 and gperftools heap profiles written by Debian's
//!   libjemalloc2 and libtcmalloc, against `jeprof --text` and
//!   `google-pprof --text`, in every format and on either side of `--base`;
//! - the readers (`go tool pprof`, inferno) agree with the text report.

use heapdiff::render::pprof::PbProfile;
use heapsample_tests::*;
use prost::Message;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------
// Helpers

/// Folded lines into (frames root first, values): one trailing number, or
/// two for a comparison (frame names may contain spaces and digits).
fn parse_folded(text: &str) -> Vec<(Vec<String>, Vec<i64>)> {
    text.lines()
        .filter_map(|line| {
            let mut stack = line;
            let mut values = Vec::new();
            while values.len() < 2 {
                let Some((rest, last)) = stack.rsplit_once(' ') else {
                    break;
                };
                let Ok(value) = last.parse::<i64>() else {
                    break;
                };
                values.insert(0, value);
                stack = rest;
                if !stack.ends_with(|c: char| c.is_ascii_digit()) {
                    break;
                }
            }
            let frames = stack.split(';').map(str::to_string).collect();
            (!values.is_empty()).then_some((frames, values))
        })
        .collect()
}

/// Sum of the last column of stacks that contain a frame equal to `frame`.
fn attributed(folded: &[(Vec<String>, Vec<i64>)], frame: &str) -> i64 {
    last_column_where(folded, |frames| frames.iter().any(|f| f == frame))
}

/// Sum of the last column of stacks whose leaf is `frame`.
fn self_value(folded: &[(Vec<String>, Vec<i64>)], frame: &str) -> i64 {
    last_column_where(folded, |frames| frames.last().is_some_and(|f| f == frame))
}

/// Sum of the last column of the stacks whose frames satisfy `wanted`.
fn last_column_where(
    folded: &[(Vec<String>, Vec<i64>)],
    wanted: impl Fn(&[String]) -> bool,
) -> i64 {
    folded
        .iter()
        .filter(|(frames, _)| wanted(frames))
        .map(|(_, values)| values.last().copied().unwrap_or(0))
        .sum()
}

/// The first `count` whitespace-separated fields of `line` and the rest
/// (a function name may contain spaces).
fn split_fields(line: &str, count: usize) -> Option<(Vec<&str>, &str)> {
    let mut rest = line.trim_start();
    let mut fields = Vec::with_capacity(count);
    for _ in 0..count {
        let end = rest.find(char::is_whitespace)?;
        fields.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    Some((fields, rest))
}

/// A row of the text report's first table: self and the function, after
/// the numeric columns (values, percentages, `[low,high]` intervals).
fn text_row(line: &str) -> Option<(i64, &str)> {
    let mut rest = line.trim_start();
    let mut first = None;
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let field = &rest[..end];
        let numeric = field.parse::<f64>().is_ok()
            || field.ends_with('%')
            || (field.starts_with('[') && field.ends_with(']'))
            || field == "-";
        if !numeric {
            break;
        }
        first = first.or_else(|| field.parse::<i64>().ok());
        rest = rest[end..].trim_start();
    }
    Some((first?, rest))
}

/// Every row of the text report's first table: function → self.
fn text_self_rows(text: &str) -> BTreeMap<String, i64> {
    let Some(table) = text.split("\n\n").nth(1) else {
        return BTreeMap::new();
    };
    table
        .lines()
        .filter_map(text_row)
        .filter(|(value, _)| *value != 0)
        .map(|(value, name)| (name.to_string(), value))
        .collect()
}

/// The self column of a function's row in the text report's first table.
fn text_self(text: &str, function: &str) -> Option<i64> {
    let table = text.split("\n\n").nth(1)?;
    table
        .lines()
        .filter_map(text_row)
        .find_map(|(value, name)| (name == function).then_some(value))
}

fn final_dump_path(outcome: &Outcome) -> PathBuf {
    outcome.final_dump().0.path
}

/// Decode a gzipped pprof file.
fn read_pprof(path: &Path) -> PbProfile {
    let gz = std::fs::read(path).expect("read pprof");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut bytes)
        .expect("gunzip");
    PbProfile::decode(&bytes[..]).expect("decode profile.proto")
}

/// `flat` bytes per function from `go tool pprof -top -unit=B`.
fn pprof_flat(top: &str) -> BTreeMap<String, i64> {
    top.lines()
        .filter_map(|line| {
            let (fields, name) = split_fields(line, 5)?;
            let flat = fields[0].strip_suffix('B')?.parse::<i64>().ok()?;
            Some((name.to_string(), flat))
        })
        .collect()
}

fn compile_shared(dir: &Path, source: &str, name: &str, defines: &[&str]) -> PathBuf {
    let flags: Vec<&str> = COMMON_FLAGS
        .iter()
        .copied()
        .chain(["-Wl,--build-id"])
        .chain(defines.iter().copied())
        .collect();
    build_shared_library(source, &dir.join(name), &flags)
}

// ---------------------------------------------------------------------------
// C++ names

#[test]
fn cxx_short_names_full_names_and_tooltips() {
    let program = compile_cxx("names_cxx.cpp", &BuildOptions::no_pie());
    let outcome = run_exact(&program.path);
    let dump = final_dump_path(&outcome);
    let dump = path_str(&dump);

    let short = parse_folded(&heapdiff_ok(&["-f", "folded", dump]));
    // Blob is 96 bytes, 100 of them through make_unique in Pool<Blob>::take.
    assert_eq!(attributed(&short, "Pool<…>::take"), 9600, "{short:#?}");
    assert_eq!(
        self_value(&short, "std::make_unique<…>"),
        9600,
        "{short:#?}"
    );
    // DWARF names it `make_sessions`; the symbol table qualifies it.
    assert!(
        attributed(&short, "(anonymous namespace)::make_sessions") > 100 * 200,
        "{short:#?}"
    );
    for (frames, _) in &short {
        for frame in frames {
            let without_anonymous = frame
                .replace("(anonymous namespace)", "")
                .replace("operator()", "");
            assert!(
                !without_anonymous.contains('(') || frame.contains("{lambda"),
                "parameter list in a short name: {frame}"
            );
            assert!(!frame.contains("std::allocator<char>"), "{frame}");
        }
    }

    let full = parse_folded(&heapdiff_ok(&["-f", "folded", "--full-names", dump]));
    let make_unique = full
        .iter()
        .flat_map(|(frames, _)| frames)
        .find(|f| f.contains("make_unique"))
        .expect("make_unique frame");
    // The whole signature, exactly as c++filt prints the symbol.
    let mangled = symbol_containing(&program.path, "make_unique");
    assert_eq!(make_unique, &cxxfilt(&mangled), "{mangled}");

    let svg_path = outcome.dir.path().join("names.svg");
    heapdiff_ok(&[dump, "-q", "-o", path_str(&svg_path)]);
    let svg = std::fs::read_to_string(&svg_path).expect("svg");
    let tooltip = svg
        .split("<title>")
        .find(|t| t.starts_with("std::make_unique&lt;…&gt;"))
        .expect("make_unique frame in the svg");
    let tooltip = &tooltip[..tooltip.find("</title>").expect("end of title")];
    assert!(
        tooltip.contains("std::make_unique&lt;Blob&gt;()"),
        "{tooltip}"
    );
    assert!(tooltip.contains("unique_ptr.h:"), "file:line: {tooltip}");
}

/// The first DWARF linkage name of `binary` whose demangled name contains
/// `needle` (inlined functions have no symbol, only debug info).
fn symbol_containing(binary: &Path, needle: &str) -> String {
    let output = Command::new("readelf")
        .arg("--debug-dump=info")
        .arg(binary)
        .output()
        .expect("readelf");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.contains("DW_AT_linkage_name"))
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| s.starts_with("_Z"))
        .find(|s| cxxfilt(s).contains(needle))
        .map(str::to_string)
        .expect("linkage name")
}

fn cxxfilt(symbol: &str) -> String {
    let output = Command::new("c++filt")
        .arg(symbol)
        .output()
        .expect("c++filt");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

// ---------------------------------------------------------------------------
// Modules

#[test]
fn same_function_in_two_libraries_is_never_merged() {
    let dir = TempDir::new("names-plugins");
    let a = compile_shared(
        dir.path(),
        "names_plugin.c",
        "libplugin_a.so",
        &["-DPLUGIN_ENTRY=plugin_a_run", "-DCOUNT=1000"],
    );
    let _b = compile_shared(
        dir.path(),
        "names_plugin.c",
        "libplugin_b.so",
        &["-DPLUGIN_ENTRY=plugin_b_run", "-DCOUNT=2000"],
    );
    let main = dir.path().join("plugins");
    let lib_dir = a.parent().expect("dir");
    let status = Command::new("gcc")
        .args(COMMON_FLAGS)
        .arg("-o")
        .arg(&main)
        .arg(programs_dir().join("names_plugins_main.c"))
        .arg(format!("-L{}", lib_dir.display()))
        .args(["-lplugin_a", "-lplugin_b"])
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .status()
        .expect("gcc");
    assert!(status.success());
    let outcome = run_exact(&main);
    let dump = final_dump_path(&outcome);
    let dump = path_str(&dump);

    let folded = parse_folded(&heapdiff_ok(&["-f", "folded", dump]));
    assert_eq!(
        self_value(&folded, "plugin_alloc [libplugin_a.so]"),
        2_048_000
    );
    assert_eq!(
        self_value(&folded, "plugin_alloc [libplugin_b.so]"),
        4_096_000
    );
    assert_eq!(attributed(&folded, "plugin_alloc"), 0, "never merged");

    let text = heapdiff_ok(&["-f", "text", dump]);
    assert_eq!(
        text_self(&text, "plugin_alloc [libplugin_a.so]"),
        Some(2_048_000),
        "{text}"
    );
    assert_eq!(
        text_self(&text, "plugin_alloc [libplugin_b.so]"),
        Some(4_096_000),
        "{text}"
    );

    let pprof = outcome.dir.path().join("plugins.pb.gz");
    heapdiff_ok(&["-f", "pprof", "-q", "-o", path_str(&pprof), dump]);
    if let Some(top) = go_tool_pprof(&["-top", "-unit=B"], &pprof, outcome.dir.path()) {
        let flat = pprof_flat(&top);
        assert_eq!(
            flat.get("plugin_alloc [libplugin_a.so]"),
            Some(&2_048_000),
            "{top}"
        );
        assert_eq!(
            flat.get("plugin_alloc [libplugin_b.so]"),
            Some(&4_096_000),
            "{top}"
        );
    }
}

#[test]
fn missing_debug_info_warns_once_naming_what_was_looked_for() {
    let dir = TempDir::new("names-stripped");
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let binary = dir.path().join("stripped");
    std::fs::copy(&program.path, &binary).expect("copy");
    let debug = dir.path().join("stripped.debug");
    for args in [
        vec![
            "--only-keep-debug".to_string(),
            path_str(&binary).to_string(),
            path_str(&debug).to_string(),
        ],
        vec![
            "--strip-debug".to_string(),
            format!("--add-gnu-debuglink={}", path_str(&debug)),
            path_str(&binary).to_string(),
        ],
    ] {
        let status = Command::new("objcopy")
            .args(&args)
            .status()
            .expect("objcopy");
        assert!(status.success(), "objcopy {args:?}");
    }
    std::fs::remove_file(&debug).expect("remove the debug file");
    let outcome = run_exact(&binary);
    let dump = final_dump_path(&outcome);
    let out = heapdiff(&["-f", "text", path_str(&dump)]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("warning") && l.contains(path_str(&binary)))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    let warning = warnings[0];
    for needle in [
        "no debug info",
        "build-id",
        ".build-id/",
        "debuglink stripped.debug",
    ] {
        assert!(warning.contains(needle), "{needle} missing in: {warning}");
    }
    // Names still come from the symbol table.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("alloc_site_big"), "{text}");
}

// ---------------------------------------------------------------------------
// pprof

#[test]
fn pprof_leaves_unsymbolized_frames_to_pprof_with_correct_mappings() {
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let dir = TempDir::new("names-pprof-sym");
    let binary = dir.path().join("sites");
    std::fs::copy(&program.path, &binary).expect("copy");
    let outcome = run_exact(&binary);
    let dump = final_dump_path(&outcome);
    let pprof = outcome.dir.path().join("sites.pb.gz");
    // heapdiff runs where the binary is not (e.g. another machine)…
    let away = dir.path().join("sites.away");
    std::fs::rename(&binary, &away).expect("move away");
    let out = heapdiff(&["-f", "pprof", "-q", "-o", path_str(&pprof), path_str(&dump)]);
    std::fs::rename(&away, &binary).expect("move back");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));

    let profile = read_pprof(&pprof);
    let strings = &profile.string_table;
    let mapping = profile
        .mapping
        .iter()
        .find(|m| strings[m.filename as usize] == path_str(&binary))
        .expect("the program's mapping");
    assert!(!mapping.has_functions, "not symbolized: pprof must do it");
    // No-pie: text at 0x401000 comes from file offset 0x1000.
    assert_eq!(mapping.memory_start, 0x401000);
    assert_eq!(mapping.file_offset, 0x1000);
    let id = build_id(&binary).expect("build-id");
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(strings[mapping.build_id as usize], hex);
    let unsymbolized = profile
        .location
        .iter()
        .filter(|l| l.mapping_id == mapping.id)
        .all(|l| l.line.is_empty());
    assert!(
        unsymbolized,
        "its frames are addresses, not placeholder names"
    );
    // …and pprof symbolizes them from the binary.
    if let Some(top) = go_tool_pprof(&["-top", "-unit=B"], &pprof, outcome.dir.path()) {
        assert!(top.contains("alloc_site_big"), "{top}");
        assert!(!top.contains("sites+0x"), "{top}");
    }
}

#[test]
fn pprof_diff_base_label_and_thread_labels() {
    let program = compile_c("names_views.c", &BuildOptions::no_pie());
    let base = run_exact(&program.path);
    let new = run_exact(&program.path);
    let (base_dump, new_dump) = (final_dump_path(&base), final_dump_path(&new));
    let pprof = new.dir.path().join("diff.pb.gz");
    heapdiff_ok(&[
        "-f",
        "pprof",
        "-q",
        "-o",
        path_str(&pprof),
        "--base",
        path_str(&base_dump),
        path_str(&new_dump),
    ]);
    let profile = read_pprof(&pprof);
    let strings = &profile.string_table;
    let label = |sample: &heapdiff::render::pprof::PbSample, key: &str| {
        sample
            .label
            .iter()
            .find(|l| strings[l.key as usize] == key)
            .cloned()
    };
    let (mut negative, mut positive) = (0, 0);
    for sample in &profile.sample {
        let is_base =
            label(sample, "pprof::base").is_some_and(|l| strings[l.str as usize] == "true");
        if sample.value.iter().any(|&v| v < 0) {
            assert!(is_base, "a base sample without pprof::base");
            negative += 1;
        } else {
            assert!(!is_base);
            positive += 1;
        }
        assert!(label(sample, "tid").is_some_and(|l| l.num > 0));
    }
    assert!(negative > 0 && positive > 0);

    let single = new.dir.path().join("single.pb.gz");
    heapdiff_ok(&[
        "-f",
        "pprof",
        "-q",
        "-o",
        path_str(&single),
        path_str(&new_dump),
    ]);
    if let Some(tags) = go_tool_pprof(&["-tags"], &single, new.dir.path()) {
        assert!(
            tags.contains("worker-a") && tags.contains("worker-b"),
            "{tags}"
        );
        assert!(tags.contains("tid"), "{tags}");
    }
    if let Some(top) = go_tool_pprof(
        &["-top", "-unit=B", "-tagfocus=thread=worker-a"],
        &single,
        new.dir.path(),
    ) {
        let flat = pprof_flat(&top);
        assert_eq!(flat.get("xmalloc"), Some(&100_000), "{top}");
    }
}

// ---------------------------------------------------------------------------
// Views

#[test]
fn views_in_every_format() {
    let program = compile_c("names_views.c", &BuildOptions::no_pie());
    let outcome = run_exact(&program.path);
    let dump = final_dump_path(&outcome);
    let dump = path_str(&dump);
    let folded = |extra: &[&str]| {
        let mut args = vec!["-f", "folded"];
        args.extend_from_slice(extra);
        args.push(dump);
        parse_folded(&heapdiff_ok(&args))
    };

    let plain = folded(&[]);
    assert_eq!(self_value(&plain, "xmalloc"), 600_000);

    let wrappers = folded(&["--allocator-frames", "^xmalloc$"]);
    assert_eq!(self_value(&wrappers, "small_site"), 100_000);
    assert_eq!(self_value(&wrappers, "big_site"), 500_000);
    assert_eq!(attributed(&wrappers, "xmalloc"), 0);

    let focus = folded(&["--focus", "small_site"]);
    let total: i64 = focus.iter().map(|(_, v)| v[0]).sum();
    assert_eq!(attributed(&focus, "small_site"), 100_000);
    assert_eq!(total, 100_000, "{focus:#?}");

    let ignore = folded(&["--ignore", "small_site"]);
    assert_eq!(attributed(&ignore, "small_site"), 0);
    assert_eq!(attributed(&ignore, "big_site"), 500_000);

    let hide = folded(&["--hide", "^hidden_layer$"]);
    assert_eq!(attributed(&hide, "hidden_layer"), 0);
    assert_eq!(attributed(&hide, "big_site"), 500_000);
    assert!(hide.iter().any(|(frames, _)| {
        frames
            .windows(2)
            .any(|w| w[0] == "worker_b" && w[1] == "big_site")
    }));

    let threads = folded(&["--by-thread"]);
    let root = |name: &str| -> i64 {
        threads
            .iter()
            .filter(|(frames, _)| frames[0] == format!("[thread {name}]"))
            .map(|(_, v)| v[0])
            .sum()
    };
    assert_eq!(root("worker-a"), 100_000, "{threads:#?}");
    assert_eq!(root("worker-b"), 500_000);

    let sizes = folded(&["--size-frames", "--allocator-frames", "^xmalloc$"]);
    let class_under = |class: &str, function: &str| -> i64 {
        sizes
            .iter()
            .filter(|(frames, _)| {
                frames.last().is_some_and(|f| f == class) && frames.iter().any(|f| f == function)
            })
            .map(|(_, v)| v[0])
            .sum()
    };
    assert_eq!(
        class_under("[64–128 B]", "small_site"),
        100_000,
        "{sizes:#?}"
    );
    assert_eq!(class_under("[4–8 KiB]", "big_site"), 500_000);

    // The same views in the text report, the SVG and pprof.
    let text = heapdiff_ok(&[
        "-f",
        "text",
        "--allocator-frames",
        "^xmalloc$",
        "--focus",
        "small_site",
        dump,
    ]);
    assert_eq!(text_self(&text, "small_site"), Some(100_000), "{text}");
    assert!(!text.contains("big_site"), "{text}");
    let svg_path = outcome.dir.path().join("view.svg");
    heapdiff_ok(&[
        "-q",
        "--by-thread",
        "--hide",
        "hidden_layer",
        "-o",
        path_str(&svg_path),
        dump,
    ]);
    let svg = std::fs::read_to_string(&svg_path).expect("svg");
    assert!(svg.contains("[thread worker-b]"));
    assert!(!svg.contains("<title>hidden_layer"));
    let pprof = outcome.dir.path().join("view.pb.gz");
    heapdiff_ok(&[
        "-f",
        "pprof",
        "-q",
        "--ignore",
        "small_site",
        "--allocator-frames",
        "^xmalloc$",
        "--size-frames",
        "-o",
        path_str(&pprof),
        dump,
    ]);
    if let Some(top) = go_tool_pprof(&["-top", "-unit=B"], &pprof, outcome.dir.path()) {
        let flat = pprof_flat(&top);
        // big_site's 500,000 B plus stdio's 4 KiB buffer.
        assert_eq!(flat.get("[4–8 KiB]"), Some(&504_096), "{top}");
        // The rows (the profile's comments above them name the view).
        let rows = top.split_once("flat%").map_or("", |(_, rows)| rows);
        assert!(
            !rows.contains("small_site") && !rows.contains("xmalloc"),
            "{top}"
        );
        assert!(top.contains("view: "), "the view in the comments: {top}");
    }
}

#[test]
fn python_allocator_wrappers_move_self_to_their_callers() {
    let outcome = Run::new("python3")
        .args([
            "-c",
            "x = [str(i) * 300 for i in range(20000)]; print(len(x))",
        ])
        .with_shim()
        .prof_conf("lg_prof_sample:12")
        .run();
    outcome.assert_success();
    let dump = final_dump_path(&outcome);
    let dump = path_str(&dump);
    let wrappers = format!("^_?({})$", PYTHON_WRAPPERS.join("|"));
    // Strings of ~1 KB go through PyObject_Malloc to malloc; they are freed
    // at interpreter exit, so look at what was allocated.
    let metric = ["-m", "alloc-space", "-f", "folded"];
    let plain = parse_folded(&heapdiff_ok(&[&metric[..], &[dump]].concat()));
    let viewed = parse_folded(&heapdiff_ok(
        &[&metric[..], &["--allocator-frames", &wrappers, dump]].concat(),
    ));
    let wrapper_self = |folded: &[(Vec<String>, Vec<i64>)]| -> i64 {
        folded
            .iter()
            .filter(|(frames, _)| frames.last().is_some_and(|f| is_python_wrapper(f)))
            .map(|(_, v)| v[0])
            .sum()
    };
    let total =
        |folded: &[(Vec<String>, Vec<i64>)]| -> i64 { folded.iter().map(|(_, v)| v[0]).sum() };
    assert!(
        wrapper_self(&plain) > total(&plain) / 2,
        "the wrappers hold most self"
    );
    assert_eq!(wrapper_self(&viewed), 0);
    assert_eq!(total(&viewed), total(&plain), "nothing lost");
    // The strings' bytes now show as PyUnicode_New's own.
    assert!(self_value(&viewed, "PyUnicode_New") > 20000 * 1000);
}

/// CPython's allocation functions (also with a leading `_`), which hold
/// most "self" bytes of a Python profile unless treated as allocator frames.
const PYTHON_WRAPPERS: [&str; 6] = [
    "PyObject_Malloc",
    "PyObject_Realloc",
    "PyMem_Malloc",
    "PyMem_RawMalloc",
    "PyMem_Realloc",
    "PyMem_RawRealloc",
];

fn is_python_wrapper(frame: &str) -> bool {
    PYTHON_WRAPPERS.contains(&frame.trim_start_matches('_'))
}

#[test]
fn rust_names_and_views() {
    let program = compile_rust("rust_prog.rs");
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let dump = final_dump_path(&outcome);
    let dump = path_str(&dump);
    let metric = ["-m", "alloc-space", "-f", "folded"];
    let short = heapdiff_ok(&[&metric[..], &[dump]].concat());
    // Rust names are shown whole (no hash); the C++ shortening leaves them.
    let full = heapdiff_ok(&[&metric[..], &["--full-names", dump]].concat());
    assert_eq!(short, full);
    let folded = parse_folded(&short);
    let frames = || folded.iter().flat_map(|(frames, _)| frames);
    assert!(frames().any(|f| f == "rust_prog::collections"), "{short}");
    let hashed = frames().find(|f| {
        f.rsplit_once("::h")
            .is_some_and(|(_, h)| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    assert_eq!(hashed, None);
    // Views on Rust names.
    let focus = parse_folded(&heapdiff_ok(
        &[&metric[..], &["--focus", "^rust_prog::collections$", dump]].concat(),
    ));
    let total: i64 = focus.iter().map(|(_, v)| v[0]).sum();
    assert_eq!(total, attributed(&folded, "rust_prog::collections"));
    assert!(total > 0);
}

// ---------------------------------------------------------------------------
// Foreign dumps

/// A program with two known sites, run under another allocator's profiler.
fn foreign_program() -> Program {
    compile_c("names_views.c", &BuildOptions::no_pie())
}

/// The allocator `library` and its profile reader `tool` (both from the
/// Debian `packages`); `None`, a skip, when either is missing.
fn foreign_allocator(library: &str, tool: &str, packages: &str) -> Option<PathBuf> {
    let path = PathBuf::from("/usr/lib/x86_64-linux-gnu").join(library);
    if path.is_file() && prerequisite::on_path(tool) {
        return Some(path);
    }
    skip(Missing::Software(&format!(
        "{library} or {tool} is not installed (apt-get install {packages})"
    )));
    None
}

/// `flat` bytes per function from `jeprof --text --show_bytes` (or
/// google-pprof).
fn perl_pprof_flat(
    tool: &str,
    program: &Path,
    profile: &Path,
    extra: &[&str],
) -> BTreeMap<String, i64> {
    let output = Command::new(tool)
        .args(["--text", "--show_bytes"])
        .args(extra)
        .arg(program)
        .arg(profile)
        .output()
        .unwrap_or_else(|e| panic!("run {tool}: {e}"));
    assert!(
        output.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (fields, name) = split_fields(line, 5)?;
            Some((name.to_string(), fields[0].parse::<i64>().ok()?))
        })
        .collect()
}

fn check_foreign(tool: &str, program: &Path, profile: &Path, scratch: &Path) {
    let dump = path_str(profile);
    let text = heapdiff_ok(&["-f", "text", "--top", "50", dump]);
    let expected = perl_pprof_flat(tool, program, profile, &[]);
    let theirs = expected.get("xmalloc").copied().unwrap_or(0);
    let ours = text_self(&text, "xmalloc").unwrap_or(0);
    assert!(theirs > 0, "{tool} shows no xmalloc: {expected:?}");
    // jeprof rounds per stack; heapdiff rounds the sum.
    assert!(
        (ours - theirs).abs() <= 2,
        "xmalloc: {tool} {theirs}, heapdiff {ours}\n{text}"
    );
    // Every format reads it.
    for format in ["svg", "folded", "pprof"] {
        let out = scratch.join(format!("out.{format}"));
        heapdiff_ok(&["-f", format, "-q", "-o", path_str(&out), dump]);
        assert!(std::fs::metadata(&out).expect("output").len() > 0);
    }
    let folded = parse_folded(&heapdiff_ok(&[
        "-f",
        "folded",
        "--allocator-frames",
        "^xmalloc$",
        dump,
    ]));
    let small = self_value(&folded, "small_site");
    let big = self_value(&folded, "big_site");
    assert!(small > 0 && big > small, "{folded:#?}");
    // JSON names the profile's own format, not a heapsample version.
    let json: serde_json::Value =
        serde_json::from_str(&heapdiff_ok(&["-f", "json", dump])).unwrap();
    let source = match tool {
        "jeprof" => "jemalloc heap_v2",
        _ => "gperftools heap profile",
    };
    assert_eq!(json["new"]["source_format"], source, "{}", json["new"]);
    assert!(
        json["new"].get("format_version").is_none(),
        "{}",
        json["new"]
    );
}

#[test]
fn jemalloc_heap_v2_profile_matches_jeprof() {
    let Some(jemalloc) =
        foreign_allocator("libjemalloc.so.2", "jeprof", "libjemalloc2 libjemalloc-dev")
    else {
        return;
    };
    let program = foreign_program();
    let dir = TempDir::new("names-jemalloc");
    let (_, profile) = jemalloc_heap_profile(&program, &jemalloc, 10, dir.path());
    let text = std::fs::read_to_string(&profile).expect("read");
    assert!(
        text.starts_with("heap_v2/1024"),
        "{}",
        &text[..text.len().min(200)]
    );
    check_foreign("jeprof", &program.path, &profile, dir.path());

    // Either side of --base: an old jemalloc dump against a heapsample dump.
    let ours = run_exact(&program.path);
    let ours = final_dump_path(&ours);
    for (base, new) in [
        (path_str(&profile), path_str(&ours)),
        (path_str(&ours), path_str(&profile)),
    ] {
        let diff = heapdiff_ok(&["-f", "text", "--base", base, new]);
        assert!(diff.contains("Delta:"), "{diff}");
    }
}

/// A jemalloc profile of `program` at `lg_prof_sample:lg` (None: a skip).
fn jemalloc_profile(program: &Program, lg: u32, dir: &TempDir) -> Option<(Outcome, PathBuf)> {
    let jemalloc = foreign_allocator("libjemalloc.so.2", "jeprof", "libjemalloc2 libjemalloc-dev")?;
    Some(jemalloc_heap_profile(program, &jemalloc, lg, dir.path()))
}

/// One call stack of eight threads with different object sizes: jeprof
/// corrects the stack's `t*` line with its average size, and heapdiff's
/// value of the site agrees with it in every metric (to jeprof's rounding)
/// at a sparse period and at `lg_prof_sample:0`, where both object counts
/// are also the program's exact truth (jemalloc samples everything there
/// and writes its counts for jeprof's correction; its bytes are its size
/// classes', not the requested sizes).
#[test]
fn jemalloc_multi_threaded_stacks_match_jeprof() {
    let program = compile_c("jemalloc_threads.c", &BuildOptions::no_pie());
    let dir = TempDir::new("names-jemalloc-threads");
    for lg in [10, 0] {
        let Some((outcome, profile)) = jemalloc_profile(&program, lg, &dir) else {
            return;
        };
        let text = std::fs::read_to_string(&profile).expect("read");
        let site_lines = text
            .split("\n@ ")
            .filter(|stack| stack.matches("\n  t").count() > 2)
            .count();
        assert!(site_lines > 0, "no stack with several thread lines\n{text}");
        for (metric, flag, truth_key) in [
            ("inuse-space", "--inuse_space", "inuse_space"),
            ("inuse-objects", "--inuse_objects", "inuse_objects"),
            ("alloc-space", "--alloc_space", "alloc_space"),
            ("alloc-objects", "--alloc_objects", "alloc_objects"),
        ] {
            let report = heapdiff_ok(&[
                "-f",
                "text",
                "-m",
                metric,
                "--top",
                "50",
                path_str(&profile),
            ]);
            let jeprof = perl_pprof_flat("jeprof", &program.path, &profile, &[flag]);
            for site in ["shared_site", "tiny_site"] {
                let ours = text_self(&report, site).unwrap_or(0);
                let theirs = jeprof.get(site).copied().unwrap_or(0);
                assert!(theirs > 0, "lg {lg} {metric}: jeprof shows no {site}");
                // jeprof rounds its value once, heapdiff sums the threads'
                // shares.
                assert!(
                    (ours - theirs).abs() <= 2,
                    "lg {lg} {metric} {site}: jeprof {theirs}, heapdiff {ours}"
                );
                if lg == 0 && metric.ends_with("objects") {
                    let truth = site_truth(&outcome.stdout, site, truth_key);
                    assert!(
                        (ours - truth).abs() <= 2,
                        "lg 0 {metric} {site}: heapdiff {ours}, truth {truth}"
                    );
                }
            }
        }
    }
}

/// `key=N` of the program's `truth SITE ...` line.
fn site_truth(stdout: &str, site: &str, key: &str) -> i64 {
    stdout
        .lines()
        .find(|line| line.starts_with(&format!("truth {site} ")))
        .and_then(|line| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{key}=")))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no truth for {site} {key} in {stdout}"))
}

#[test]
fn gperftools_heap_profile_matches_google_pprof() {
    let Some(tcmalloc) = foreign_allocator(
        "libtcmalloc.so.4",
        "google-pprof",
        "libgoogle-perftools4 google-perftools",
    ) else {
        return;
    };
    let program = foreign_program();
    let dir = TempDir::new("names-tcmalloc");
    let prefix = dir.path().join("tc");
    let outcome = Run::program(&program)
        .env("LD_PRELOAD", &tcmalloc)
        .env("HEAPPROFILE", &prefix)
        .run();
    outcome.assert_success();
    let profile = dir.path().join("tc.0001.heap");
    assert!(profile.is_file(), "{}", outcome.context());
    check_foreign("google-pprof", &program.path, &profile, dir.path());
    // Unsampled: the numbers are exact.
    let folded = parse_folded(&heapdiff_ok(&[
        "-f",
        "folded",
        "--allocator-frames",
        "^xmalloc$",
        path_str(&profile),
    ]));
    assert_eq!(self_value(&folded, "small_site"), 100_000);
    assert_eq!(self_value(&folded, "big_site"), 500_000);
}

// ---------------------------------------------------------------------------
// The README's diff pipe

/// `heapdiff -f folded --base a b | inferno-flamegraph > diff.svg`: the
/// default folded diff is `stack BASE NEW`, which inferno-flamegraph (its
/// `flamegraph::from_lines`, run here on the same text) draws as a
/// differential graph, shrinkage included; the `--delta` form's negative
/// lines are what flame graph tools drop.
#[test]
fn readme_folded_diff_pipe_draws_growth_and_shrinkage() {
    let program = compile_c("names_views.c", &BuildOptions::no_pie());
    let base = run_exact(&program.path);
    let later = Run::program(&program)
        .arg("later")
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    later.assert_success();
    let (base_dump, new_dump) = (final_dump_path(&base), final_dump_path(&later));
    let diff = |extra: &[&str]| {
        let mut args = vec!["-f", "folded", "--allocator-frames", "^xmalloc$"];
        args.extend_from_slice(extra);
        args.extend(["--base", path_str(&base_dump), path_str(&new_dump)]);
        heapdiff_ok(&args)
    };
    let folded = diff(&[]);
    let rows = parse_folded(&folded);
    let row = |leaf: &str| {
        rows.iter()
            .find(|(frames, _)| frames.last().is_some_and(|f| f == leaf))
            .map(|(_, values)| values.clone())
    };
    assert_eq!(row("small_site"), Some(vec![100_000, 200_000]), "{folded}");
    assert_eq!(row("big_site"), Some(vec![500_000, 50_000]), "{folded}");

    let mut options = inferno::flamegraph::Options::default();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
        .expect("inferno draws the folded diff");
    let svg = String::from_utf8(svg).expect("utf-8");
    let title = |name: &str| {
        svg.split("<title>")
            .find(|t| t.starts_with(&format!("{name} (")))
            .map(|t| t[..t.find("</title>").unwrap_or(t.len())].to_string())
            .unwrap_or_default()
    };
    // Differential titles carry the signed change: growth and shrinkage.
    assert!(
        title("small_site").contains("; +"),
        "{}",
        title("small_site")
    );
    assert!(title("big_site").contains("; -"), "{}", title("big_site"));

    let delta = parse_folded(&diff(&["--delta"]));
    let shrink: Vec<i64> = delta
        .iter()
        .filter(|(frames, _)| frames.last().is_some_and(|f| f == "big_site"))
        .map(|(_, values)| values[0])
        .collect();
    assert_eq!(shrink, [-450_000]);
}

// ---------------------------------------------------------------------------
// Readers agree

#[test]
fn readers_agree_with_the_text_report() {
    let program = compile_c("names_views.c", &BuildOptions::no_pie());
    let outcome = run_exact(&program.path);
    let dump = final_dump_path(&outcome);
    let dump = path_str(&dump);
    let text = heapdiff_ok(&["-f", "text", "--top", "100", dump]);
    let total_line = text
        .lines()
        .find(|l| l.starts_with("totals: sampled estimate"))
        .expect("totals");
    let total: i64 = total_line
        .split_whitespace()
        .nth(5)
        .and_then(|n| n.parse().ok())
        .expect("in use bytes");

    // Folded (what inferno, flamegraph.pl and speedscope read) sums to it.
    let folded = parse_folded(&heapdiff_ok(&["-f", "folded", dump]));
    assert_eq!(folded.iter().map(|(_, v)| v[0]).sum::<i64>(), total);
    assert_eq!(
        self_value(&folded, "xmalloc"),
        text_self(&text, "xmalloc").unwrap()
    );

    // inferno: the root of the SVG is the total.
    let svg_path = outcome.dir.path().join("readers.svg");
    heapdiff_ok(&["-q", "-o", path_str(&svg_path), dump]);
    let svg = std::fs::read_to_string(&svg_path).expect("svg");
    // (The root's tooltip may carry more lines, e.g. its interval, before
    // the value.)
    let root_title = svg
        .split("<title>")
        .find(|t| t.starts_with("all (") || t.starts_with("all\n"))
        .unwrap_or_default();
    assert!(
        root_title.contains(&format!("({} bytes, 100%)", group_thousands(total))),
        "total {total}: {root_title}"
    );

    // go tool pprof: same flat values per function as the text report.
    let pprof = outcome.dir.path().join("readers.pb.gz");
    heapdiff_ok(&[
        "-f",
        "pprof",
        "-q",
        "-o",
        path_str(&pprof),
        "--full-names",
        dump,
    ]);
    if let Some(top) = go_tool_pprof(
        &["-top", "-unit=B", "-nodefraction=0", "-nodecount=1000"],
        &pprof,
        outcome.dir.path(),
    ) {
        assert!(top.contains(&format!("of {total}B total")), "{top}");
        let flat = pprof_flat(&top);
        let rows = text_self_rows(&text);
        assert!(rows.len() >= 3, "{text}");
        for (function, value) in rows {
            assert_eq!(flat.get(&function), Some(&value), "{function}\n{top}");
        }
    }
}

fn group_thousands(value: i64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
