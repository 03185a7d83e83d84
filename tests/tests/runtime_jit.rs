//! Generated code a program names in its own perf map, with a C program
//! that is its own tiny JIT (tests/programs/rt_jit.c): stubs generated into
//! an anonymous executable mapping, named in `/tmp/perf-PID.map`.
//! - Code freed and other code generated at the same address, the map
//!   rewritten between two dumps: each dump names the address as the map
//!   did when it was written (`jit_first`, then `jit_second`).
//! - A corrupted frame chain in generated code (rbp wild: unmapped, not
//!   canonical, a loop, the code itself) never faults: output and exit
//!   status are as without the profiler, and the stacks end at the stub.
//!
//! And generated code whose unwind information changes while the walk keeps
//! "no unwind information here" as a cached rule (tests/programs/rt_jit_cfi.c):
//! - CFI registered with `__register_frame` for a stub that keeps no frame
//!   pointer, then deregistered: the stacks end at the stub before, go
//!   through it to `main` while registered, and end there again after.
//! - A module loaded where generated code without CFI ran (its page copied,
//!   the module unloaded, the copy run, unmapped, the module loaded again at
//!   the same address): stepped by the module's own tables, not as code
//!   without unwind information.
//! - Frames registered and deregistered while threads allocate at lg 0, and
//!   libgcc's first lookup after each registration mallocing under its
//!   object mutex with generated code on the stack: no deadlock. Nor with
//!   a signal frame on that stack, which the walk cannot step itself (the
//!   capture then keeps no frame rather than ask libgcc).

use std::time::Duration;

use heapsample_tests::locate::path_str;
use heapsample_tests::run::{Outcome, Run, assert_same_behaviour};
use heapsample_tests::temp_dir::TempDir;
use heapsample_tests::tools::heapdiff_ok;
use heapsample_tests::{BuildOptions, build_shared_library, compile_c};

/// `rt_jit_cfi.c`'s blocks per phase and their size: at `lg_prof_sample:0`
/// every byte is sampled, so a phase's stacks weigh exactly their product.
const CFI_BLOCKS: u64 = 300;
const CFI_BLOCK_BYTES: u64 = 4096;

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

/// The final dump's alloc-space folded stacks that end in `allocate_block`,
/// with their bytes, of a run of `rt_jit_cfi` at `lg_prof_sample:0`.
fn cfi_stacks(outcome: &Outcome) -> Vec<(String, u64)> {
    outcome.assert_success();
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", outcome.pid));
    let (file, _) = outcome.final_dump();
    heapdiff_ok(&[path_str(&file.path), "-m", "alloc-space", "-f", "folded"])
        .lines()
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(stack, _)| stack.ends_with(";allocate_block"))
        .map(|(stack, bytes)| (stack.to_string(), bytes.parse().expect("folded bytes")))
        .collect()
}

#[test]
fn frames_registered_later_are_unwound_until_deregistered() {
    let program = compile_c("rt_jit_cfi.c", &BuildOptions::no_pie());
    let outcome = Run::new(&program.path)
        .arg("register")
        .prof_conf("lg_prof_sample:0")
        .with_shim()
        .run();
    // The registration reached the program's libgcc, and so did its end.
    assert_eq!(
        outcome.stdout,
        "libgcc knows the stub: yes\nlibgcc knows the stub: no\n",
        "{}",
        outcome.context()
    );
    let stacks = cfi_stacks(&outcome);
    let phase = CFI_BLOCKS * CFI_BLOCK_BYTES;
    // Without CFI the stub keeps no frame chain (rbp 0): the walk ends at it,
    // where libgcc's does; with its CFI registered, it goes on to `main`.
    let registered: Vec<_> = stacks
        .iter()
        .filter(|(stack, _)| {
            stack.starts_with("_start;")
                && stack.ends_with(";main;registering;after_registering;jit_cfi_[j];allocate_block")
        })
        .collect();
    let unregistered: u64 = stacks
        .iter()
        .filter(|(stack, _)| stack == "jit_cfi_[j];allocate_block")
        .map(|(_, bytes)| bytes)
        .sum();
    assert_eq!(
        registered.iter().map(|(_, bytes)| bytes).sum::<u64>(),
        phase,
        "{stacks:#?}\n{}",
        outcome.context()
    );
    assert_eq!(
        unregistered,
        2 * phase,
        "before registering and after deregistering: {stacks:#?}"
    );
    assert_eq!(registered.len() + 1, stacks.len(), "{stacks:#?}");
}

#[test]
fn a_module_loaded_where_generated_code_ran_is_unwound_by_its_tables() {
    let dir = TempDir::new("jit-reload");
    let plugin = build_shared_library("rt_jit_cfi_plugin.c", &dir.path().join("plugin.so"), &[]);
    let program = compile_c("rt_jit_cfi.c", &BuildOptions::no_pie());
    let outcome = Run::new(&program.path)
        .arg("reload")
        .arg(&plugin)
        .prof_conf("lg_prof_sample:0")
        .with_shim()
        .run();
    assert!(
        outcome.stdout.starts_with("same address"),
        "the module must land where its copy ran: {}",
        outcome.context()
    );
    let stacks = cfi_stacks(&outcome);
    // `plugin_call` keeps no frame pointer: taken for code without unwind
    // information (the copy's rule), it is stepped by its caller's rbp and
    // `after_reload` is lost.
    let reloaded: u64 = stacks
        .iter()
        .filter(|(stack, _)| {
            stack.starts_with("_start;")
                && stack.ends_with(";main;reload;after_reload;plugin_call;allocate_block")
        })
        .map(|(_, bytes)| bytes)
        .sum();
    assert_eq!(reloaded, CFI_BLOCKS * CFI_BLOCK_BYTES, "{stacks:#?}");
    assert!(
        !stacks
            .iter()
            .any(|(stack, _)| stack.contains(";reload;plugin_call;")),
        "{stacks:#?}"
    );
}

/// `rt_jit_cfi MODE` at lg 0, run to a successful end that prints
/// `expected`. Natively a mode takes under 0.1 s (300 registrations, each
/// followed by a libgcc backtrace); at lg 0 every allocation is a sampled
/// walk, well under 100x. A deadlock never ends: 120 s tells the two apart
/// on any load this suite runs under.
fn run_to_the_end(mode: &str, expected: &str) -> Outcome {
    let program = compile_c("rt_jit_cfi.c", &BuildOptions::no_pie());
    let outcome = Run::new(&program.path)
        .arg(mode)
        .prof_conf("lg_prof_sample:0")
        .with_shim()
        .timeout(Duration::from_secs(120))
        .run();
    outcome.assert_success();
    assert_eq!(outcome.stdout, expected, "{}", outcome.context());
    outcome
}

/// 4 threads allocate through a registered stub while the main thread
/// registers and deregisters frames and takes libgcc backtraces.
#[test]
fn registering_frames_while_threads_allocate_never_deadlocks() {
    let outcome = run_to_the_end("threads", "threads: 300 rounds\n");
    let stacks = cfi_stacks(&outcome);
    // The workers' stacks go through the registered stub to the thread's start.
    let workers: Vec<_> = stacks
        .iter()
        .filter(|(stack, _)| stack.contains("jit_cfi_[j]"))
        .collect();
    assert!(!workers.is_empty(), "{stacks:#?}");
    for (stack, _) in workers {
        assert!(
            stack.contains("start_thread;")
                && stack.ends_with(";allocating;jit_cfi_[j];allocate_block"),
            "{stack}"
        );
    }
}

/// After each of 300 registrations a signal whose handler takes a libgcc
/// backtrace (a signal frame, which the profiler's walk hands to libgcc).
#[test]
fn a_libgcc_walk_in_a_signal_handler_with_frames_registered_never_deadlocks() {
    run_to_the_end("handler", "in a handler: 300 rounds\n");
}
