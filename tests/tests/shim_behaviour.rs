//! Programs behave the same under the shim: identical stdout and exit status
//! with and without `LD_PRELOAD=libheapsample.so`, nothing from the shim on
//! stderr unless asked, and a final dump that decodes.

use heapsample_tests::*;
use std::path::Path;

/// Same behaviour, no `<heapsample>:` lines, and the main process's final
/// dump present and complete.
fn check(run: Run) -> (Outcome, Outcome) {
    let (reference, profiled) = assert_same_behaviour(&run);
    assert!(
        profiled.heapsample_lines().is_empty(),
        "the shim printed warnings nobody asked for: {:?}\n{}",
        profiled.heapsample_lines(),
        profiled.context()
    );
    if run.ld_preload().is_some() {
        let (file, dump) = profiled.final_dump();
        assert_eq!(
            dump.pid, profiled.pid,
            "{}: pid inside is {}",
            file.name, dump.pid
        );
    }
    (reference, profiled)
}

#[test]
fn c_program_default_config() {
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    check(Run::program(&program).arg("5").with_shim());
}

#[test]
fn c_program_every_allocation_sampled() {
    let program = compile_c("alloc_sites.c", &BuildOptions::pie());
    check(
        Run::program(&program)
            .with_shim()
            .prof_conf("lg_prof_sample:0"),
    );
}

#[test]
fn cxx_program() {
    let program = compile_cxx("cxx.cpp", &BuildOptions::no_pie());
    check(Run::program(&program).with_shim());
    check(
        Run::program(&program)
            .with_shim()
            .prof_conf("lg_prof_sample:0"),
    );
}

#[test]
fn rust_program() {
    let program = compile_rust("rust_prog.rs");
    check(Run::program(&program).with_shim());
    check(
        Run::program(&program)
            .with_shim()
            .prof_conf("lg_prof_sample:0"),
    );
}

#[test]
fn multithreaded_program() {
    let program = compile_c("threads.c", &BuildOptions::no_pie());
    check(Run::program(&program).with_shim());
    check(
        Run::program(&program)
            .args(["8", "3000"])
            .with_shim()
            .prof_conf("lg_prof_sample:0"),
    );
}

#[test]
fn fork_program() {
    let program = compile_c("fork.c", &BuildOptions::no_pie());
    check(Run::program(&program).with_shim());
}

fn python3() -> String {
    if Path::new("/usr/bin/python3").is_file() {
        "/usr/bin/python3".to_string()
    } else {
        "python3".to_string()
    }
}

#[test]
fn python_with_pythonmalloc_malloc() {
    let script = programs_dir().join("script.py");
    let run = Run::new(python3())
        .arg(&script)
        .env("PYTHONMALLOC", "malloc")
        .env("PYTHONHASHSEED", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .with_shim();
    let (_, profiled) = check(run.clone());
    let (_, dump) = profiled.final_dump();
    assert!(
        dump.totals.allocations > 100_000,
        "python with PYTHONMALLOC=malloc made only {} allocations through the shim",
        dump.totals.allocations
    );
    check(run.prof_conf("lg_prof_sample:10"));
}

#[test]
fn perl_script() {
    let script = programs_dir().join("script.pl");
    check(
        Run::new("perl")
            .arg(&script)
            .env("PERL_HASH_SEED", "0")
            .with_shim(),
    );
}

#[test]
fn sort_command() {
    let input: String = (0..50_000u64)
        .map(|i| format!("line {:08}\n", (i * 2_654_435_761) % 1_000_003))
        .collect();
    check(
        Run::new("sort")
            .env("LC_ALL", "C")
            .stdin(input.clone())
            .with_shim(),
    );
    check(
        Run::new("sort")
            .args(["-r", "-k2"])
            .env("LC_ALL", "C")
            .stdin(input)
            .with_shim()
            .prof_conf("lg_prof_sample:0"),
    );
}

#[test]
fn gcc_version() {
    check(Run::new("gcc").arg("--version").with_shim());
}

/// gcc compiling a file runs cc1 and as and ld (fork+exec of children that
/// inherit LD_PRELOAD): the output binary works.
#[test]
fn gcc_compiles_under_the_shim() {
    let dir = TempDir::new("gcc-src");
    let src = dir.path().join("hello.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void){puts(\"hello\");return 0;}\n",
    )
    .expect("write source");
    let out = dir.path().join("hello");
    let outcome = Run::new("gcc")
        .arg("-O1")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .with_shim()
        .run();
    outcome.assert_success();
    let hello = Run::new(&out).run();
    hello.assert_success();
    assert_eq!(hello.stdout, "hello\n");
    // Every process of the pipeline that left a dump left a complete one.
    let dumps = outcome.dumps();
    assert!(!dumps.is_empty(), "gcc left no dump\n{}", outcome.context());
}

/// The shim brings no library into a program beyond libc and the loader
/// (libgcc's unwinder is linked in): every library it needed would be
/// loaded, relocated, forked and finalized in every profiled process, and a
/// C program such as `/bin/true` would load libgcc_s only for the profiler.
#[test]
fn the_shim_needs_no_library_beyond_libc() {
    let out = std::process::Command::new("readelf")
        .arg("-d")
        .arg(shim_path())
        .output()
        .expect("readelf (binutils)");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(!needed.is_empty(), "no NEEDED entries found in:\n{text}");
    for library in &needed {
        assert!(
            library.starts_with("libc.so") || library.starts_with("ld-linux"),
            "the shim needs {library} (all: {needed:?})"
        );
    }
}

/// The unwinder linked into the shim stays private: a program (C++
/// exceptions) keeps binding `_Unwind_*` to its own libgcc_s, never to the
/// shim's copy. The shim exports libgcc's frame registration
/// (`__register_frame*`, `__deregister_frame*`) only to forward it to the
/// program's libgcc_s and remember it (runtime_jit's tests check libgcc
/// still finds what was registered).
#[test]
fn the_shim_exports_no_unwinder_symbol() {
    let out = std::process::Command::new("readelf")
        .args(["--dyn-syms", "--wide"])
        .arg(shim_path())
        .output()
        .expect("readelf (binutils)");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let defined: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains(" UND "))
        .filter_map(|l| l.split_whitespace().nth(7))
        .collect();
    assert!(defined.contains(&"malloc"), "no malloc among {defined:?}");
    let unwinder: Vec<&&str> = defined
        .iter()
        .filter(|name| {
            ["_Unwind_", "__gcc_personality"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
        })
        .collect();
    assert!(unwinder.is_empty(), "the shim exports {unwinder:?}");
    let mut registration: Vec<&str> = defined
        .iter()
        .copied()
        .filter(|name| {
            name.starts_with("__register_frame") || name.starts_with("__deregister_frame")
        })
        .collect();
    registration.sort_unstable();
    assert_eq!(
        registration,
        [
            "__deregister_frame",
            "__deregister_frame_info",
            "__deregister_frame_info_bases",
            "__register_frame",
            "__register_frame_info",
            "__register_frame_info_bases",
            "__register_frame_info_table",
            "__register_frame_info_table_bases",
            "__register_frame_table",
        ]
    );
}

/// The profiler makes its tables (the live table, the stack index, the
/// shared unwind rule cache) at the first sample: a process that never
/// samples maps none of them and still writes its exit dump; one that
/// samples maps them and keeps every sample.
#[test]
fn tables_are_made_at_the_first_sample() {
    let program = compile_c("tables_mapped.c", &BuildOptions::no_pie());
    // A mean period of 2^40 bytes: the chance that the few kilobytes this
    // run allocates (stdio's buffers) take a sample is below 1e-8.
    let (_, quiet) = check(
        Run::program(&program)
            .args(["0", "64"])
            .with_shim()
            .prof_conf("lg_prof_sample:40"),
    );
    assert_eq!(
        quiet.stdout,
        "rule cache: not mapped\n",
        "{}",
        quiet.context()
    );
    let (_, dump) = quiet.final_dump();
    assert_eq!(dump.totals.samples_dropped, 0, "{}", quiet.context());
    let sampled = Run::program(&program)
        .args(["100", "64"])
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    assert!(sampled.status.success(), "{}", sampled.context());
    assert_eq!(
        sampled.stdout,
        "rule cache: mapped\n",
        "{}",
        sampled.context()
    );
    let (_, dump) = sampled.final_dump();
    let live: u64 = dump.stacks.iter().map(|s| s.live_objects).sum();
    assert!(
        live >= 100,
        "{live} live samples for 100 kept blocks\n{}",
        sampled.context()
    );
    assert_eq!(dump.totals.samples_dropped, 0, "{}", sampled.context());
}

/// A process that has not sampled makes its tables before its first fork,
/// so that its children inherit and share them: after the fork both map the
/// rule cache; a child that never samples writes a valid exit dump, and one
/// that samples every allocation keeps each of its blocks.
#[test]
fn a_process_that_never_sampled_makes_its_tables_at_its_first_fork() {
    let program = compile_c("tables_mapped.c", &BuildOptions::no_pie());
    // lg 40: below 1e-8 the chance of a sample (see above); lg 0: every
    // allocation, the parent's first one included.
    for (lg, blocks) in [(40, 0), (0, 100)] {
        let outcome = Run::program(&program)
            .args([&blocks.to_string(), "64", "fork"])
            .with_shim()
            .prof_conf(format!("lg_prof_sample:{lg},prof_fork_final:all"))
            .run();
        assert!(outcome.status.success(), "{}", outcome.context());
        let lines: Vec<&str> = outcome.stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{}", outcome.context());
        assert!(
            lines[0].starts_with("child pid=") && lines[0].ends_with(" rule cache: mapped"),
            "{}",
            outcome.context()
        );
        assert_eq!(
            lines[1],
            "parent rule cache: mapped",
            "{}",
            outcome.context()
        );
        let child: u32 = lines[0]["child pid=".len()..]
            .split(' ')
            .next()
            .and_then(|pid| pid.parse().ok())
            .expect("the child's pid");
        let dumps = outcome.dumps();
        let (_, dump) = dumps
            .iter()
            .find(|(file, _)| file.pid == child && file.trigger == "f")
            .unwrap_or_else(|| panic!("no exit dump of child {child}\n{}", outcome.context()));
        assert_eq!(dump.totals.samples_dropped, 0, "{}", outcome.context());
        let live: u64 = dump.stacks.iter().map(|s| s.live_objects).sum();
        assert!(
            live >= 2 * blocks,
            "lg {lg}: {live} live samples in the child for {} kept blocks\n{}",
            2 * blocks,
            outcome.context()
        );
    }
}
