//! heapdiff built for aarch64, run under qemu-user on this machine, against
//! the x86_64 heapdiff: both read the same dumps and must say exactly the
//! same thing, whichever architecture wrote the dump.
//!
//! The aarch64 heapdiff is the one `HEAPSAMPLE_AARCH64_HEAPDIFF` names
//! (scripts/test.sh cross-builds it beside the aarch64 shim that
//! `HEAPSAMPLE_AARCH64_SHIM` names). It runs as `qemu-aarch64 heapdiff …`
//! without `-L`: the arm64 C runtime is installed multiarch (`libc6:arm64`),
//! and qemu 7.2 with `-L` hangs in `pthread_create` (tests/tests/aarch64.rs).
//!
//! Each dump is read by both in every output (text, folded, json, pprof,
//! svg, html, and `heapdiff modules`); standard output, standard error and
//! the files written must be byte for byte the same. Then the shared answer
//! is checked against the program's truth: exact counts per function at
//! `lg_prof_sample:0`, an inlined frame inside its caller, demangled C++
//! names, file and line of each frame, and the program's build-id as
//! `readelf` reads it. The dumps are a C++ program's written by the x86_64
//! shim and by the aarch64 shim, and jemalloc's and gperftools' heap
//! profiles of an x86_64 program.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use heapsample_tests::prerequisite::{self, Missing, skip};
use heapsample_tests::*;

const HEAPDIFF_VARIABLE: &str = "HEAPSAMPLE_AARCH64_HEAPDIFF";
const SHIM_VARIABLE: &str = "HEAPSAMPLE_AARCH64_SHIM";

/// The file an environment variable names, or a skip (a failure under the
/// test command, which builds it).
fn built(variable: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(variable).map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        _ => {
            skip(Missing::Software(&format!(
                "{variable} names no aarch64 {what} (scripts/test.sh builds it)"
            )));
            None
        }
    }
}

/// The aarch64 heapdiff and the tools these tests run, or a skip.
fn aarch64_heapdiff(tools: &[&str]) -> Option<PathBuf> {
    for tool in ["qemu-aarch64", "readelf"].iter().chain(tools) {
        if !prerequisite::on_path(tool) {
            skip(Missing::Software(&format!(
                "{tool} is not installed (apt-get install qemu-user binutils \
                 g++-aarch64-linux-gnu)"
            )));
            return None;
        }
    }
    built(HEAPDIFF_VARIABLE, "heapdiff")
}

/// One heapdiff run in `dir` (both heapdiffs see the same working
/// directory, so relative names in their messages agree).
fn run_in(dir: &Path, command: &mut Command, args: &[&str]) -> Output {
    let output = command
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run heapdiff");
    assert!(
        output.status.success(),
        "heapdiff {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `args` with the x86_64 heapdiff and with the aarch64 one under
/// qemu, asserts both print exactly the same on stdout and stderr, and
/// returns the shared stdout.
fn same_from_both(dir: &Path, arm: &Path, args: &[&str]) -> String {
    let native = run_in(dir, &mut Command::new(heapdiff_path()), args);
    let emulated = run_in(dir, Command::new("qemu-aarch64").arg(arm), args);
    for (stream, ours, theirs) in [
        ("stdout", &native.stdout, &emulated.stdout),
        ("stderr", &native.stderr, &emulated.stderr),
    ] {
        let (ours, theirs) = (
            String::from_utf8_lossy(ours),
            String::from_utf8_lossy(theirs),
        );
        assert!(
            ours == theirs,
            "heapdiff {args:?}: {stream} of the aarch64 heapdiff differs from the x86_64 one's: {}",
            first_difference(&ours, &theirs)
        );
    }
    String::from_utf8_lossy(&native.stdout).into_owned()
}

/// Both heapdiffs write `dump` in `format` to a file; the two files are
/// byte for byte the same. Returns the x86_64 heapdiff's.
fn same_file(dir: &Path, arm: &Path, format: &str, dump: &str) -> PathBuf {
    let native = dir.join(format!("x86_64.{format}"));
    let emulated = dir.join(format!("aarch64.{format}"));
    let native_args = ["-f", format, "-q", "-o", path_str(&native), dump];
    run_in(dir, &mut Command::new(heapdiff_path()), &native_args);
    let emulated_args = ["-f", format, "-q", "-o", path_str(&emulated), dump];
    run_in(dir, Command::new("qemu-aarch64").arg(arm), &emulated_args);
    let ours = std::fs::read(&native).expect("read the x86_64 heapdiff's file");
    let theirs = std::fs::read(&emulated).expect("read the aarch64 heapdiff's file");
    assert!(
        !ours.is_empty() && ours == theirs,
        "the two heapdiffs' {format} files differ"
    );
    native
}

/// The pprof profile of `dump`, the same from both heapdiffs, decoded by
/// `go tool pprof -raw` (None: go is missing, a skip).
fn same_pprof(dir: &Path, arm: &Path, dump: &str) -> Option<String> {
    let profile = same_file(dir, arm, "pprof", dump);
    let home = dir.join("pprof-home");
    std::fs::create_dir_all(&home).expect("pprof's home");
    go_tool_pprof(&["-raw"], &profile, &home)
}

/// Every output both heapdiffs give of `dump` (the flamegraph and the
/// viewer only compared): text, folded inuse-objects, json, modules and
/// the decoded pprof profile.
struct Outputs {
    text: String,
    folded: Vec<(Vec<String>, i64)>,
    json: serde_json::Value,
    modules: String,
    pprof: Option<String>,
}

fn every_output(dir: &Path, arm: &Path, dump: &Path) -> Outputs {
    let dump = path_str(dump);
    let text = same_from_both(dir, arm, &["-f", "text", "--top", "50", dump]);
    let folded = same_from_both(dir, arm, &["-f", "folded", "-m", "inuse-objects", dump]);
    same_from_both(
        dir,
        arm,
        &["-f", "folded", "--full-names", "-m", "alloc-space", dump],
    );
    let json = same_from_both(dir, arm, &["-f", "json", dump]);
    let modules = same_from_both(dir, arm, &["modules", dump]);
    same_file(dir, arm, "svg", dump);
    same_file(dir, arm, "html", dump);
    Outputs {
        text,
        folded: parse_folded(&folded),
        json: serde_json::from_str(&json).expect("heapdiff's json parses"),
        modules,
        pprof: same_pprof(dir, arm, dump),
    }
}

/// A C++ program with a namespace, a class template's member, and a
/// function inlined into its caller. Each `new` line is marked, so the
/// expected file:line is read from the source.
const LEDGER_CC: &str = r#"#include <cstdio>
#include <new>
namespace ledger {
struct Entry { char memo[120]; };
template <typename T> struct Arena {
  __attribute__((noinline)) T *grab() { return new T(); }  // grab's line
};
static inline __attribute__((always_inline)) Entry *inlined_entry() {
  return new Entry();  // the inlined line
}
__attribute__((noinline)) Entry *record(int) { return inlined_entry(); }  // record's line
}  // namespace ledger
static ledger::Entry *kept[300];
int main() {
  ledger::Arena<ledger::Entry> arena;
  for (int i = 0; i < 100; i++) kept[i] = ledger::record(i);
  for (int i = 100; i < 300; i++) kept[i] = arena.grab();
  std::printf("%p %p\n", (void *)kept[0], (void *)kept[299]);
}
"#;

/// The 1-based line of `LEDGER_CC` holding `marker`.
fn line_of(marker: &str) -> usize {
    LEDGER_CC
        .lines()
        .position(|line| line.contains(marker))
        .expect("the marker is in the source")
        + 1
}

/// `binary`'s GNU build-id as `readelf -n` prints it.
fn build_id(binary: &Path) -> String {
    let output = Command::new("readelf")
        .arg("-n")
        .arg(binary)
        .output()
        .expect("run readelf");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("{} has no build-id", binary.display()))
        .to_string()
}

/// `LEDGER_CC` compiled by `compiler` into `dir/name`.
fn compile_ledger(dir: &Path, compiler: &str, name: &str) -> PathBuf {
    let source = dir.join("ledger.cc");
    std::fs::write(&source, LEDGER_CC).expect("write the program");
    let binary = dir.join(name);
    let result = Command::new(compiler)
        .args(["-g", "-O2", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
        .expect("run the compiler");
    assert!(
        result.status.success(),
        "{compiler}: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    binary
}

/// The sum of stacks that hold `chain` consecutively, innermost at the leaf.
fn ending_in(stacks: &[(Vec<String>, i64)], chain: &[&str]) -> i64 {
    let chain: Vec<String> = chain.iter().map(|frame| frame.to_string()).collect();
    stacks
        .iter()
        .filter(|(frames, _)| frames.ends_with(&chain))
        .map(|(_, value)| value)
        .sum()
}

/// What both heapdiffs must have said of the ledger program's dump at
/// lg 0: exact counts of the inlined frame inside its caller and of the
/// template's member; demangled names; file:line of the allocating lines
/// and the inlined call; the binary's build-id and where its names came
/// from.
fn check_ledger(outputs: &Outputs, binary: &Path, architecture: &str, dir: &Path) {
    let context = format!("{:#?}", outputs.folded);
    assert_eq!(
        ending_in(
            &outputs.folded,
            &["main", "ledger::record", "inlined_entry"]
        ),
        100,
        "{context}"
    );
    assert_eq!(
        ending_in(&outputs.folded, &["main", "ledger::Arena<…>::grab"]),
        200,
        "{context}"
    );
    assert!(
        outputs
            .text
            .lines()
            .any(|line| line.starts_with("process: ")
                && line.ends_with(&format!(", {architecture}"))),
        "{}",
        outputs.text
    );
    assert_eq!(outputs.json["new"]["context"]["architecture"], architecture);
    assert!(
        outputs.json["names"]
            .as_array()
            .expect("names")
            .iter()
            .any(|name| name == "ledger::Arena<…>::grab"),
        "{}",
        outputs.json["names"]
    );
    let id = build_id(binary);
    let module = outputs
        .modules
        .lines()
        .find(|line| line.starts_with(path_str(binary)))
        .unwrap_or_else(|| panic!("no line for {}:\n{}", binary.display(), outputs.modules));
    assert!(
        module.contains(&format!("[{id}]")) && module.ends_with("with file and line"),
        "{module}"
    );
    let Some(pprof) = &outputs.pprof else { return };
    let source = dir.join("ledger.cc");
    let source = path_str(&source);
    let inlined = format!(
        "inlined_entry {source}:{} s=0\n             ledger::record {source}:{} s=0(ledger::record(int))",
        line_of("the inlined line"),
        line_of("record's line")
    );
    let grab = format!(
        "ledger::Arena::grab {source}:{} s=0(ledger::Arena<ledger::Entry>::grab())",
        line_of("grab's line")
    );
    let mapping = format!("{} {id} [FN][FL][LN][IN]", path_str(binary));
    for expected in [&inlined, &grab, &mapping] {
        assert!(
            pprof.contains(expected.as_str()),
            "no `{expected}` in:\n{pprof}"
        );
    }
}

/// (a) A dump the x86_64 shim wrote of an x86_64 C++ program: the aarch64
/// heapdiff says exactly what the x86_64 one says, and that is the truth.
#[test]
fn an_x86_64_dump_read_by_both_heapdiffs() {
    let Some(arm) = aarch64_heapdiff(&[]) else {
        return;
    };
    let dir = TempDir::new("aarch64-heapdiff-x86");
    let binary = compile_ledger(dir.path(), "g++", "ledger");
    let outcome = Run::new(&binary)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let (file, _) = outcome.final_dump();
    let outputs = every_output(dir.path(), &arm, &file.path);
    check_ledger(&outputs, &binary, "x86_64", dir.path());
}

/// (b) A dump the aarch64 shim wrote of the same program built for aarch64
/// and run under qemu: both heapdiffs agree and tell the truth.
#[test]
fn an_aarch64_dump_read_by_both_heapdiffs() {
    let Some(arm) = aarch64_heapdiff(&["aarch64-linux-gnu-g++"]) else {
        return;
    };
    let Some(shim) = built(SHIM_VARIABLE, "libheapsample.so") else {
        return;
    };
    let dir = TempDir::new("aarch64-heapdiff-arm");
    let binary = compile_ledger(dir.path(), "aarch64-linux-gnu-g++", "ledger");
    let outcome = Run::new("qemu-aarch64")
        .arg("-E")
        .arg(format!("LD_PRELOAD={}", shim.display()))
        .arg(&binary)
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let (file, _) = outcome.final_dump();
    let outputs = every_output(dir.path(), &arm, &file.path);
    check_ledger(&outputs, &binary, "aarch64", dir.path());
}

/// Both heapdiffs read a foreign heap profile of `names_views.c` (its two
/// sites) alike, and name its format and sites.
fn foreign_profile_read_by_both(arm: &Path, dir: &Path, profile: &Path, source_format: &str) {
    let outputs = every_output(dir, arm, profile);
    assert_eq!(outputs.json["new"]["source_format"], source_format);
    for site in ["small_site", "big_site"] {
        assert!(
            outputs
                .folded
                .iter()
                .any(|(frames, _)| frames.iter().any(|f| f == site)),
            "{site}: {:#?}",
            outputs.folded
        );
    }
}

/// A jemalloc heap profile (`heap_v2`) of an x86_64 program.
#[test]
fn a_jemalloc_profile_read_by_both_heapdiffs() {
    let Some(arm) = aarch64_heapdiff(&[]) else {
        return;
    };
    let Some(jemalloc) = jemalloc_path() else {
        return;
    };
    let program = compile_c("names_views.c", &BuildOptions::no_pie());
    let dir = TempDir::new("aarch64-heapdiff-jemalloc");
    let (_, profile) = jemalloc_heap_profile(&program, &jemalloc, 10, dir.path());
    foreign_profile_read_by_both(&arm, dir.path(), &profile, "jemalloc heap_v2");
}

/// A gperftools heap profile (tcmalloc's `HEAPPROFILE`) of an x86_64
/// program.
#[test]
fn a_gperftools_profile_read_by_both_heapdiffs() {
    let Some(arm) = aarch64_heapdiff(&[]) else {
        return;
    };
    let tcmalloc = PathBuf::from("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4");
    if !tcmalloc.is_file() {
        skip(Missing::Software(
            "libtcmalloc.so.4 is not installed (apt-get install libgoogle-perftools4)",
        ));
        return;
    }
    let program = compile_c("names_views.c", &BuildOptions::no_pie());
    let dir = TempDir::new("aarch64-heapdiff-tcmalloc");
    let outcome = Run::program(&program)
        .env("LD_PRELOAD", &tcmalloc)
        .env("HEAPPROFILE", dir.path().join("tc"))
        .run();
    outcome.assert_success();
    let profile = dir.path().join("tc.0001.heap");
    assert!(profile.is_file(), "{}", outcome.context());
    foreign_profile_read_by_both(&arm, dir.path(), &profile, "gperftools heap profile");
}
