//! 16 threads allocating and freeing across threads, a thread dumping in a
//! loop and the main thread forking children that allocate and dump.

use std::time::Duration;

use heapsample_tests::*;

fn program_field(stdout: &str, key: &str) -> u64 {
    tagged_values(stdout, "program", key)
        .first()
        .unwrap_or_else(|| panic!("no program {key}= in {stdout}"))
        .parse()
        .expect("number")
}

/// Bounded (60 s), nothing crashes or hangs, every dump decodes, children
/// dump under their own pid, and the exact counters match the program's.
///
/// Exactness: at lg_prof_sample:0 every allocation is sampled, so the
/// per-site counts of worker_site in the final dump must equal the
/// program's own. The process-wide exact counter also counts libc's own
/// allocations (stdio, thread creation), so for it the difference
/// `totals.allocations - program allocations` must be non-negative and not
/// exceed that of a control run (same threads, no work, no forks) by more
/// than a small slack (the work and the forks add no libc allocation of
/// their own; 64 covers libc variations such as a lazily grown buffer).
#[test]
fn threads_dumps_and_forks() {
    let program = compile_c("trig_stress.c", &BuildOptions::no_pie());
    let run = |args: [&str; 3]| {
        Run::program(&program)
            .args(args)
            .with_shim()
            .prof_conf("lg_prof_sample:0,prof_fork_final:sampled")
            .timeout(Duration::from_secs(60))
            .run()
    };
    let control = run(["16", "0", "0"]);
    control.assert_success();
    let outcome = run(["16", "3000", "4"]);
    outcome.assert_success();
    assert_eq!(program_field(&outcome.stdout, "dump_failures"), 0);
    let dumps = outcome.dumps(); // panics if one does not decode
    let entries = outcome.dir.entries();
    assert!(
        entries.iter().all(|e| !e.contains(".tmp")),
        "partial files: {entries:?}"
    );
    for (file, dump) in &dumps {
        assert_eq!(file.pid, dump.pid, "{}", file.name);
    }
    let symbols = Symbols::of(&program);
    let (_, final_dump) = outcome.final_dump();
    let sites = parse_sites(&outcome.stdout);
    let table = per_function(&final_dump, &symbols);
    assert_sites_match(&final_dump, &symbols, &sites, "");
    assert_eq!(final_dump.totals.samples_dropped, 0);

    // (Frees are counted under prof_exact only: shim_exact checks them.)
    let extra = |o: &Outcome| -> i64 {
        let (_, d) = o.final_dump();
        assert_eq!(d.totals.frees, None, "frees counted without prof_exact");
        d.totals.allocations as i64 - program_field(&o.stdout, "allocations") as i64
    };
    let alloc_extra = extra(&outcome);
    let control_alloc = extra(&control);
    eprintln!(
        "stress: libc allocations beyond the program's: {alloc_extra} (control {control_alloc}); \
         {} dump files",
        dumps.len()
    );
    assert!(alloc_extra >= 0, "exact counters below the program's own");
    assert!(
        alloc_extra <= control_alloc + 64,
        "allocations counted twice?"
    );

    // Children: their own pid in the names, a manual and a final dump each,
    // with exactly their 1000 child_site allocations.
    let children: Vec<u32> = tagged_values(&outcome.stderr, "child", "pid")
        .iter()
        .map(|p| p.parse().expect("pid"))
        .collect();
    assert_eq!(children.len(), 4, "{}", outcome.context());
    for rc in tagged_values(&outcome.stderr, "child", "dump_rc") {
        assert_eq!(rc, "0");
    }
    let parent_workers = table.get("worker_site").copied().unwrap_or_default();
    for child in children {
        let mine: Vec<_> = dumps.iter().filter(|(f, _)| f.pid == child).collect();
        let letters: Vec<&str> = mine.iter().map(|(f, _)| f.trigger.as_str()).collect();
        assert!(
            letters.contains(&"m") && letters.contains(&"f"),
            "child {child}: {letters:?}"
        );
        for (file, dump) in mine {
            let t = per_function(dump, &symbols);
            let c = t.get("child_site").copied().unwrap_or_default();
            assert_eq!(c.alloc_objects, 1000, "{}", file.name);
            let w = t.get("worker_site").copied().unwrap_or_default();
            assert!(
                w.alloc_objects <= parent_workers.alloc_objects,
                "{}",
                file.name
            );
        }
    }
}
