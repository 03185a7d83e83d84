//! Symbolization of return addresses taken from a real gcc-compiled binary.

mod common;

use common::{Fixture, dump, module, stack};
use heapdiff::model::folding::folded;
use heapdiff::model::{BuildOptions, Metric, Profile};
use heapdiff::symbols::{LocationTable, Progress, ProgressCallback, SymbolizeOptions};
use std::sync::{Arc, Mutex};

fn symbolize(dump: &heapsample_format::Dump) -> (LocationTable, Profile, Vec<String>) {
    let mut table = LocationTable::default();
    let stacks = table.intern_dump(dump);
    let mut warnings = Vec::new();
    let options = SymbolizeOptions::default();
    table.symbolize(&options, &mut |w| warnings.push(w));
    let profile = Profile::build(dump, &stacks, &table, BuildOptions::default());
    (table, profile, warnings)
}

/// The caller's callback hears every step: counts that only grow, of the
/// addresses not yet symbolized, ending with all of them done; a second
/// symbolization of the same addresses has nothing left to do.
#[test]
fn progress_goes_to_the_callers_callback() {
    let fixture = Fixture::new("progress", &["-no-pie"]);
    let path = fixture.binary.display().to_string();
    let dump = dump(
        &path,
        0,
        vec![module(&fixture.binary, 0)],
        vec![
            stack(fixture.leaf_stack(0), 1, 10),
            stack(fixture.inline_stack(0), 1, 2),
        ],
    );
    let reports = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&reports);
    let options = SymbolizeOptions {
        progress: Some(ProgressCallback::new(move |p: Progress| {
            heard.lock().unwrap().push(p)
        })),
        ..SymbolizeOptions::default()
    };
    let mut table = LocationTable::default();
    table.intern_dump(&dump);
    table.symbolize(&options, &mut |w| panic!("{w}"));
    let seen = std::mem::take(&mut *reports.lock().unwrap());
    // Five distinct return addresses: three of one stack, two of the other.
    let addresses = 5;
    assert!(seen.iter().all(|p| p.total == addresses), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].done <= w[1].done), "{seen:?}");
    assert_eq!(
        seen.last(),
        Some(&Progress {
            done: addresses,
            total: addresses
        })
    );
    table.symbolize(&options, &mut |w| panic!("{w}"));
    let again = reports.lock().unwrap().clone();
    assert_eq!(again, vec![Progress { done: 0, total: 0 }], "nothing left");
}

#[test]
fn non_pie_names_lines_and_inlined_frames() {
    let fixture = Fixture::new("nonpie", &["-no-pie"]);
    let path = fixture.binary.display().to_string();
    let dump = dump(
        &path,
        0,
        vec![module(&fixture.binary, 0)],
        vec![
            stack(fixture.leaf_stack(0), 1, 10),
            stack(fixture.inline_stack(0), 1, 2),
        ],
    );
    let (table, profile, warnings) = symbolize(&dump);
    assert!(warnings.is_empty(), "{warnings:?}");
    let stacks = folded(&profile, &table, Metric::InuseSpace);
    let keys: Vec<(&str, f64)> = stacks.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        keys,
        vec![
            ("main;calls_leaf;leaf_alloc", 10.0),
            ("main;outer_with_inline;inlined_helper", 2.0),
        ]
    );
    let leaf = table
        .locations
        .iter()
        .find(|l| l.lines.first().is_some_and(|f| f.function == "leaf_alloc"))
        .expect("leaf location");
    let line = &leaf.lines[0];
    assert!(
        line.file.as_deref().is_some_and(|f| f.ends_with("prog.c")),
        "{line:?}"
    );
    assert_eq!(
        line.line, 6,
        "malloc call is on line 6 of the program: {line:?}"
    );
}

#[test]
fn pie_with_load_bias() {
    let fixture = Fixture::new("pie", &["-pie", "-fPIE"]);
    let bias = 0x5555_5555_4000;
    let path = fixture.binary.display().to_string();
    let dump = dump(
        &path,
        0,
        vec![module(&fixture.binary, bias)],
        vec![stack(fixture.leaf_stack(bias), 3, 100)],
    );
    let (table, profile, warnings) = symbolize(&dump);
    assert!(warnings.is_empty(), "{warnings:?}");
    let stacks = folded(&profile, &table, Metric::InuseSpace);
    assert_eq!(
        stacks.get("main;calls_leaf;leaf_alloc"),
        Some(&300.0),
        "{stacks:?}"
    );
}

#[test]
fn missing_module_gives_offsets_and_one_warning() {
    let fixture = Fixture::new("missing", &["-no-pie"]);
    let mut gone = module(&fixture.binary, 0);
    gone.path = "/nonexistent/libgone.so".into();
    let dump = dump(
        "/nonexistent/libgone.so",
        0,
        vec![gone],
        vec![
            stack(fixture.leaf_stack(0), 1, 10),
            stack(fixture.inline_stack(0), 1, 2),
        ],
    );
    let (table, profile, warnings) = symbolize(&dump);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("/nonexistent/libgone.so") && warnings[0].contains("not found"));
    let stacks = folded(&profile, &table, Metric::InuseSpace);
    let expected = format!(
        "libgone.so+{:#x};libgone.so+{:#x}",
        fixture.ret("main", "outer_with_inline"),
        fixture.ret("outer_with_inline", "malloc")
    );
    assert_eq!(stacks.get(&expected), Some(&2.0), "{stacks:?}");
}

#[test]
fn build_id_mismatch_is_detected() {
    let fixture = Fixture::new("mismatch", &["-no-pie"]);
    let mut wrong = module(&fixture.binary, 0);
    wrong.build_id = vec![0xde, 0xad, 0xbe, 0xef];
    let path = fixture.binary.display().to_string();
    let dump = dump(
        &path,
        0,
        vec![wrong],
        vec![stack(fixture.leaf_stack(0), 1, 10)],
    );
    let (table, profile, warnings) = symbolize(&dump);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("build-id mismatch"), "{warnings:?}");
    let stacks = folded(&profile, &table, Metric::InuseSpace);
    assert!(
        stacks.keys().all(|k| k.starts_with("prog+0x")),
        "{stacks:?}"
    );
}

#[test]
fn stripped_binary_with_debug_file_by_build_id() {
    let fixture = Fixture::new("buildid", &["-no-pie"]);
    let stripped = fixture.dir.join("stripped");
    let debug_root = fixture.dir.join("debugroot");
    let (build_id, _) = common::build_id_and_text(&fixture.binary);
    let id_dir = debug_root
        .join(".build-id")
        .join(format!("{:02x}", build_id[0]));
    std::fs::create_dir_all(&id_dir).unwrap();
    let rest: String = build_id[1..].iter().map(|b| format!("{b:02x}")).collect();
    let debug_file = id_dir.join(format!("{rest}.debug"));
    run(
        "objcopy",
        &[
            "--only-keep-debug",
            &fixture.binary.display().to_string(),
            &debug_file.display().to_string(),
        ],
    );
    run(
        "strip",
        &[
            "-g",
            "-o",
            &stripped.display().to_string(),
            &fixture.binary.display().to_string(),
        ],
    );
    let mut m = module(&fixture.binary, 0);
    m.path = stripped.display().to_string();
    let dump = dump(
        &m.path.clone(),
        0,
        vec![m],
        vec![stack(fixture.inline_stack(0), 1, 2)],
    );
    let mut table = LocationTable::default();
    let stacks = table.intern_dump(&dump);
    let mut warnings = Vec::new();
    let options = SymbolizeOptions {
        debug_dirs: vec![debug_root],
        ..SymbolizeOptions::default()
    };
    table.symbolize(&options, &mut |w| warnings.push(w));
    assert!(warnings.is_empty(), "{warnings:?}");
    let profile = Profile::build(&dump, &stacks, &table, BuildOptions::default());
    let stacks = folded(&profile, &table, Metric::InuseSpace);
    assert_eq!(
        stacks.get("main;outer_with_inline;inlined_helper"),
        Some(&2.0),
        "{stacks:?}"
    );
    assert!(
        table.modules[0]
            .symbols_from
            .as_ref()
            .unwrap()
            .ends_with(format!("{rest}.debug"))
    );
}

#[test]
fn stripped_binary_with_debuglink() {
    let fixture = Fixture::new("debuglink", &["-no-pie"]);
    let binary = fixture.binary.display().to_string();
    let debug = fixture.dir.join("prog.dbg").display().to_string();
    let linked = fixture.dir.join("linked").display().to_string();
    run("objcopy", &["--only-keep-debug", &binary, &debug]);
    run(
        "objcopy",
        &[
            "--strip-debug",
            &format!("--add-gnu-debuglink={debug}"),
            &binary,
            &linked,
        ],
    );
    let mut m = module(&fixture.binary, 0);
    m.path = linked.clone();
    let dump = dump(
        &linked,
        0,
        vec![m],
        vec![stack(fixture.leaf_stack(0), 1, 10)],
    );
    let (table, profile, warnings) = symbolize(&dump);
    assert!(warnings.is_empty(), "{warnings:?}");
    let stacks = folded(&profile, &table, Metric::InuseSpace);
    assert_eq!(
        stacks.get("main;calls_leaf;leaf_alloc"),
        Some(&10.0),
        "{stacks:?}"
    );
    assert!(
        table.modules[0]
            .symbols_from
            .as_ref()
            .unwrap()
            .ends_with("prog.dbg")
    );
}

fn run(program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .expect(program);
    assert!(status.success(), "{program} {args:?} failed");
}

#[test]
fn same_module_at_two_load_biases_shares_locations() {
    let fixture = Fixture::new("aslr", &["-pie", "-fPIE"]);
    let path = fixture.binary.display().to_string();
    let (first, second) = (0x5555_5555_4000, 0x5600_0000_0000);
    let base = dump(
        &path,
        0,
        vec![module(&fixture.binary, first)],
        vec![stack(fixture.leaf_stack(first), 1, 10)],
    );
    let new = dump(
        &path,
        0,
        vec![module(&fixture.binary, second)],
        vec![stack(fixture.leaf_stack(second), 2, 10)],
    );
    let mut table = LocationTable::default();
    let base_stacks = table.intern_dump(&base);
    let new_stacks = table.intern_dump(&new);
    assert_eq!(
        base_stacks, new_stacks,
        "same file addresses, same locations"
    );
    table.symbolize(&SymbolizeOptions::default(), &mut |w| panic!("{w}"));
    let profile = Profile::build(&new, &new_stacks, &table, BuildOptions::default());
    let stacks = folded(&profile, &table, Metric::InuseSpace);
    assert_eq!(
        stacks.get("main;calls_leaf;leaf_alloc"),
        Some(&20.0),
        "{stacks:?}"
    );
}
