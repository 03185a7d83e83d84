//! Generated code a program names in its own perf map, with a C program
//! that is its own tiny JIT (tests/programs/rt_jit.c): stubs generated into
//! an anonymous executable mapping, named in `/tmp/perf-PID.map`.
//! - Code freed and other code generated at the same address, the map
//!   rewritten between two dumps: each dump names the address as the map
//!   did when it was written (`jit_first`, then `jit_second`).
//! - A corrupted frame chain in generated code (rbp wild: unmapped, not
//!   canonical, a loop, the code itself) never faults: output and exit
//!   status are as without the profiler, and the stacks end at the stub.

use heapsample_tests::locate::path_str;
use heapsample_tests::run::{Run, assert_same_behaviour};
use heapsample_tests::tools::heapdiff_ok;
use heapsample_tests::{BuildOptions, compile_c};

/// The alloc-space folded stacks of a dump that end in `allocate_block`.
fn block_stacks(path: &str) -> Vec<String> {
    heapdiff_ok(&[path, "-m", "alloc-space", "-f", "folded"])
        .lines()
        .filter_map(|line| line.rsplit_once(' ').map(|(stack, _)| stack.to_string()))
        .filter(|stack| stack.ends_with(";allocate_block"))
        .collect()
}

#[test]
fn each_dump_names_reused_code_as_its_map_did() {
    let program = compile_c("rt_jit.c", &BuildOptions::no_pie());
    let outcome = Run::new(&program.path)
        .arg("rewrite")
        .prof_conf("lg_prof_sample:14")
        .with_shim()
        .run();
    outcome.assert_success();
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", outcome.pid));
    let mut dumps = outcome.dumps();
    dumps.retain(|(file, _)| file.trigger.starts_with('m'));
    dumps.sort_by_key(|(file, _)| file.seq);
    assert_eq!(
        dumps.len(),
        2,
        "two dumps through the API: {}",
        outcome.context()
    );
    for ((file, dump), (named, not_named)) in dumps
        .iter()
        .zip([("jit_first", "jit_second"), ("jit_second", "jit_first")])
    {
        let names: Vec<&str> = dump
            .runtime
            .symbols
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, [named], "{}", file.name);
        let stacks = block_stacks(path_str(&file.path));
        assert!(!stacks.is_empty(), "{}: no stack of the stub", file.name);
        for stack in &stacks {
            assert!(
                stack.starts_with("_start;")
                    && stack.ends_with(&format!(";main;rewrite;{named}_[j];allocate_block")),
                "{}: {stack}",
                file.name
            );
            assert!(!stack.contains(not_named), "{}: {stack}", file.name);
        }
    }
}

#[test]
fn a_corrupted_frame_chain_in_generated_code_never_faults() {
    let program = compile_c("rt_jit.c", &BuildOptions::no_pie());
    let run = Run::new(&program.path)
        .arg("hostile")
        .prof_conf("lg_prof_sample:14");
    let (reference, profiled) = assert_same_behaviour(&run.clone().with_shim());
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", reference.pid));
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", profiled.pid));
    profiled.assert_success();
    assert!(
        profiled.stdout.starts_with("hostile: 500 blocks"),
        "{}",
        profiled.context()
    );
    let (file, _) = profiled.final_dump();
    let stacks = block_stacks(path_str(&file.path));
    assert!(!stacks.is_empty(), "no stack of the stub");
    for stack in &stacks {
        assert!(
            stack.ends_with("jit_hostile_[j];allocate_block"),
            "the walk goes through the stub: {stack}"
        );
    }
}
