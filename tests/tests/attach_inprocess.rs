//! Taking over the malloc family from inside a running process: a program
//! loads `libheapsample.so` with `dlopen` (as `heapsample attach` makes its
//! target do) and calls the library's entry points itself. At
//! `lg_prof_sample:0` every allocation after the attach is sampled, so the
//! dump must match the program exactly: what it leaked after the attach, in
//! the function that leaked it and in a plugin loaded after the attach;
//! nothing of the blocks allocated before the attach, though they were
//! freed and reallocated after it; the attach time in the dump; no exit
//! dump after the detach.

use std::path::Path;

use heapsample_tests::{
    BuildOptions, Run, Symbols, build_shared_library, compile_c, dump_files_in, shim_path,
    stacks_in,
};

#[test]
fn attach_in_process_counts_what_was_allocated_since() {
    let program = compile_c("attach_inprocess.c", &BuildOptions::no_pie());
    let dir = heapsample_tests::TempDir::new("attach-inprocess");
    let plugin = build_shared_library(
        "attach_plugin.c",
        &dir.path().join("plugin.so"),
        &["-g", "-O1", "-fno-omit-frame-pointer"],
    );
    let options = format!(
        "lg_prof_sample:0,prof_prefix:{}/heapsample",
        dir.path().display()
    );
    let outcome = Run::program(&program)
        .arg(shim_path())
        .arg(&plugin)
        .arg(&options)
        .run();
    assert!(outcome.status.success(), "{}", outcome.context());
    assert_eq!(
        outcome.stdout,
        "attach 0\ndump 0\ndetach 0\ndone\n",
        "{}",
        outcome.context()
    );
    let dumps = dump_files_in(dir.path());
    assert_eq!(
        dumps.len(),
        1,
        "only the requested dump, no exit dump after the detach: {}",
        outcome.context()
    );
    assert!(
        outcome
            .stderr
            .contains(&format!("dump: {}", dumps[0].path.display())),
        "{}",
        outcome.context()
    );
    assert!(
        outcome.stderr.contains("mode: detached"),
        "{}",
        outcome.context()
    );
    let dump = dumps[0].decode();
    assert!(
        dump.attached_unix_ns()
            .is_some_and(|at| at <= dump.time_unix_ns)
    );

    let symbols = Symbols::of(&program);
    let live_in = |function: &str| -> (u64, u64) {
        stacks_in(&dump, &symbols, function)
            .iter()
            .fold((0, 0), |(n, b), s| (n + s.live_objects, b + s.live_bytes))
    };
    assert_eq!(live_in("leak_after"), (64, 64 * 65536));
    assert_eq!(
        stacks_in(&dump, &symbols, "allocate_before").len(),
        0,
        "blocks of before the attach are never the profiler's"
    );
    let plugin_symbols = Symbols::load(Path::new(&plugin));
    let plugin_live: (u64, u64) = dump
        .stacks
        .iter()
        .filter(|s| plugin_symbols.innermost_function(&dump, s) == Some("plugin_leak"))
        .fold((0, 0), |(n, b), s| (n + s.live_objects, b + s.live_bytes));
    assert_eq!(
        plugin_live,
        (32, 32 * 65536),
        "the plugin loaded after the attach is profiled"
    );
    // The reallocated blocks were freed: nothing else of any size is live
    // but the two leaks and the loader's own bookkeeping of the plugin.
    let other_live: u64 =
        dump.stacks.iter().map(|s| s.live_bytes).sum::<u64>() - 64 * 65536 - 32 * 65536;
    assert!(other_live < 65536, "{other_live} other live bytes");
    // Exact counters count from the attach: the 100 reallocations, the two
    // leaks and whatever the plugin's loading allocated.
    assert!(
        dump.totals.allocations >= 196 && dump.totals.allocations < 400,
        "{:?}",
        dump.totals
    );
}
