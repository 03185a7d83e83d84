//! Exact counts: with `lg_prof_sample:0` every allocation is sampled, so the
//! dump's raw counts per allocation site must equal the numbers the program
//! (tests/programs/alloc_sites.c) counted itself.

use heapsample_tests::*;

fn run_sites(options: &BuildOptions, conf: &str) -> (Program, Outcome) {
    let program = compile_c("alloc_sites.c", options);
    let outcome = Run::program(&program).with_shim().prof_conf(conf).run();
    outcome.assert_success();
    (program, outcome)
}

fn check_exact(options: &BuildOptions) {
    let (program, outcome) = run_sites(options, "lg_prof_sample:0");
    let sites = parse_sites(&outcome.stdout);
    assert!(
        sites.len() >= 10,
        "program printed no sites\n{}",
        outcome.context()
    );
    let (file, dump) = outcome.final_dump();
    assert_eq!(
        dump.lg_sample_period, 0,
        "{}: lg_prof_sample:0 not applied",
        file.name
    );
    let symbols = Symbols::of(&program);
    let table = per_function(&dump, &symbols);
    let problems = site_mismatches(
        &sites,
        &table,
        SiteCheck {
            live: true,
            alloc: true,
            usable: false,
        },
    );
    assert!(
        problems.is_empty(),
        "per-site counts differ from the program's own ({}):\n{}\n{}",
        if program.pie { "PIE" } else { "no-pie" },
        problems.join("\n"),
        render_per_function(&table)
    );
    // The realloc site reports no exact cumulative numbers (how a moving
    // realloc is accounted is the profiler's choice), but it made at least
    // its `count` mallocs.
    let moved = sites
        .iter()
        .find(|s| s.name == "alloc_site_realloc_moved_freed")
        .expect("site reported");
    let got = table
        .get("alloc_site_realloc_moved_freed")
        .copied()
        .unwrap_or_default();
    assert!(
        got.alloc_objects >= moved.get("alloc_objects") / 2,
        "alloc_site_realloc_moved_freed: {} sampled allocations, expected at least {}\n{}",
        got.alloc_objects,
        moved.get("alloc_objects") / 2,
        render_per_function(&table)
    );
}

/// The core acceptance test of exact mode: exact counts per site, no-pie build
/// (addresses absolute).
#[test]
fn exact_counts_per_site_at_lg_prof_sample_0() {
    check_exact(&BuildOptions::no_pie());
}

/// The same with a PIE build: the program's addresses are only mapped back
/// through the dump's module map (load bias), so a wrong module map fails.
#[test]
fn exact_counts_per_site_pie() {
    check_exact(&BuildOptions::pie());
}

/// The program's own function addresses (printed at run time) minus the
/// module's load bias are the symbol table's addresses, and the module that
/// holds them is the executable with its build-id.
#[test]
fn module_map_matches_the_program() {
    for options in [BuildOptions::no_pie(), BuildOptions::pie()] {
        let (program, outcome) = run_sites(&options, "lg_prof_sample:0");
        let (_, dump) = outcome.final_dump();
        let symbols = Symbols::of(&program);
        assert!(
            symbols.is_this_file(&dump.executable),
            "dump.executable is {:?}, the program is {}",
            dump.executable,
            program.path.display()
        );
        let addresses = reported_addresses(&outcome.stderr);
        assert!(addresses.len() >= 10, "{}", outcome.context());
        for (name, runtime) in &addresses {
            let module = dump.module_for(*runtime, 0).unwrap_or_else(|| {
                panic!(
                    "no module in the dump holds {name} at {runtime:#x} (epoch 0); modules: {:#?}",
                    dump.modules
                )
            });
            assert!(
                symbols.is_this_file(&module.path),
                "{name} at {runtime:#x} attributed to {:?}",
                module.path
            );
            let expected = symbols.address_of(name).expect("symbol exists");
            assert_eq!(
                runtime.wrapping_sub(module.load_bias),
                expected,
                "{name}: runtime {runtime:#x} - load bias {:#x} is not the symbol address {expected:#x} (pie: {})",
                module.load_bias,
                program.pie
            );
            if !program.pie {
                assert_eq!(module.load_bias, 0, "a no-pie executable has no load bias");
            }
            if let Some(id) = build_id(&program.path) {
                assert_eq!(
                    module.build_id, id,
                    "build-id of {} in the dump differs from readelf's",
                    module.path
                );
            }
        }
        assert!(
            dump.modules.iter().any(|m| m.path.contains("libc.so")),
            "libc is not in the module map: {:#?}",
            dump.modules
        );
    }
}

/// Each sampled record keeps the allocator's usable size: at lg 0, the live
/// usable bytes per site equal the sum of malloc_usable_size the program
/// computed over its live objects.
#[test]
fn usable_bytes_per_site_at_lg_prof_sample_0() {
    let (program, outcome) = run_sites(&BuildOptions::no_pie(), "lg_prof_sample:0");
    let sites = sites_with_usable(&outcome);
    let (_, dump) = outcome.final_dump();
    let table = per_function(&dump, &Symbols::of(&program));
    let problems = site_mismatches(
        &sites,
        &table,
        SiteCheck {
            live: false,
            alloc: false,
            usable: true,
        },
    );
    assert!(
        problems.is_empty(),
        "usable bytes differ:\n{}\n{}",
        problems.join("\n"),
        render_per_function(&table)
    );
}

/// Backtraces are complete: alloc_site_deep is reached through 21 frames of
/// `recurse` from `main`, and all of them are in the stack.
#[test]
fn deep_stacks_are_complete() {
    let (program, outcome) = run_sites(&BuildOptions::no_pie(), "lg_prof_sample:0");
    let (_, dump) = outcome.final_dump();
    let symbols = Symbols::of(&program);
    let deep = stacks_in(&dump, &symbols, "alloc_site_deep");
    assert!(!deep.is_empty(), "no stack in alloc_site_deep");
    for stack in deep {
        let names = symbols.frame_functions(&dump, stack);
        let program_frames: Vec<&str> = names.iter().flatten().map(String::as_str).collect();
        let recursion = program_frames.iter().filter(|n| **n == "recurse").count();
        assert_eq!(
            recursion, 21,
            "expected alloc_site_deep <- 21 x recurse <- main, got {program_frames:?}"
        );
        assert_eq!(program_frames.first(), Some(&"alloc_site_deep"));
        assert!(
            program_frames.contains(&"main"),
            "main missing from {program_frames:?}"
        );
    }
}

/// `prof_bt_max:N` caps the stored frames at N, keeping the innermost ones.
#[test]
fn prof_bt_max_caps_the_depth() {
    let (program, outcome) = run_sites(&BuildOptions::no_pie(), "lg_prof_sample:0,prof_bt_max:4");
    assert!(
        outcome.heapsample_lines().is_empty(),
        "unexpected warnings: {:?}",
        outcome.heapsample_lines()
    );
    let (_, dump) = outcome.final_dump();
    let too_deep: Vec<usize> = dump
        .stacks
        .iter()
        .map(|s| s.frames.len())
        .filter(|&n| n > 4)
        .collect();
    assert!(
        too_deep.is_empty(),
        "stacks deeper than 4 frames: {too_deep:?}"
    );
    // The innermost frames are the ones kept: the deep site is still found.
    let symbols = Symbols::of(&program);
    let table = per_function(&dump, &symbols);
    let sites = parse_sites(&outcome.stdout);
    let deep = sites
        .iter()
        .find(|s| s.name == "alloc_site_deep")
        .expect("reported");
    assert_eq!(
        table.get("alloc_site_deep").map(|c| c.live_objects),
        Some(deep.get("live_objects")),
        "{}",
        render_per_function(&table)
    );
}

/// The exact totals agree with the program's numbers and with the stacks.
#[test]
fn totals_are_consistent_at_lg_prof_sample_0() {
    let (_, outcome) = run_sites(&BuildOptions::no_pie(), "lg_prof_sample:0");
    let sites = parse_sites(&outcome.stdout);
    let (_, dump) = outcome.final_dump();
    let t = &dump.totals;
    // (Sites with exact_alloc=0 count realloc their own way: left out.)
    let exact: Vec<&SiteReport> = sites
        .iter()
        .filter(|s| s.opt("exact_alloc") == Some(1))
        .collect();
    let program_allocs: u64 = exact.iter().map(|s| s.get("alloc_objects")).sum();
    let program_bytes: u64 = exact.iter().map(|s| s.get("alloc_bytes")).sum();
    assert!(
        t.allocations >= program_allocs,
        "totals.allocations {} < the program's own {program_allocs}",
        t.allocations
    );
    assert!(
        t.bytes_allocated >= program_bytes,
        "totals.bytes_allocated {} < the program's own {program_bytes}",
        t.bytes_allocated
    );
    assert_eq!(t.frees, None, "frees are counted under prof_exact only");
    let stack_allocs: u64 = dump.stacks.iter().map(|s| s.alloc_objects).sum();
    let stack_live: u64 = dump.stacks.iter().map(|s| s.live_objects).sum();
    assert_eq!(t.samples_dropped, 0, "samples dropped: {t:?}");
    assert_eq!(
        stack_allocs, t.samples_taken,
        "the stacks hold {stack_allocs} sampled allocations, totals.samples_taken is {}",
        t.samples_taken
    );
    assert_eq!(
        stack_live, t.samples_live,
        "the stacks hold {stack_live} live samples, totals.samples_live is {}",
        t.samples_live
    );
    assert!(
        t.samples_taken <= t.allocations,
        "more samples than allocations: {t:?}"
    );
    assert!(
        t.samples_taken >= program_allocs,
        "at lg 0 every allocation is sampled: {} samples < {program_allocs} allocations by the program",
        t.samples_taken
    );
    assert!(t.threads_seen >= 1, "{t:?}");
    assert_eq!(t.live_usable_bytes, None, "prof_exact is off by default");
}

/// `prof_exact:true` adds the exact live heap in usable bytes: at least what
/// the program itself holds live, and (at lg 0, where everything is also
/// sampled) close to the sum over the sampled stacks.
#[test]
fn prof_exact_reports_the_live_heap() {
    let (_, outcome) = run_sites(&BuildOptions::no_pie(), "lg_prof_sample:0,prof_exact:true");
    let sites = sites_with_usable(&outcome);
    let (_, dump) = outcome.final_dump();
    let exact = dump
        .totals
        .live_usable_bytes
        .unwrap_or_else(|| panic!("prof_exact:true but totals.live_usable_bytes is None"));
    let program_live: u64 = sites.iter().filter_map(|s| s.opt("live_usable")).sum();
    assert!(
        exact >= program_live,
        "exact live heap {exact} < the program's own live usable bytes {program_live}"
    );
    // Frees are counted too: at least the program's own (realloc sites,
    // exact_alloc=0, count their own way and are left out), never more than
    // the allocations.
    let t = &dump.totals;
    let frees = t.frees.expect("prof_exact:true counts frees");
    let program_frees: u64 = sites
        .iter()
        .filter(|s| s.opt("exact_alloc") == Some(1))
        .map(|s| s.get("alloc_objects") - s.get("live_objects"))
        .sum();
    assert!(
        frees >= program_frees,
        "totals.frees {frees} < the program's own {program_frees}"
    );
    assert!(frees <= t.allocations, "more frees than allocations: {t:?}");
    let sampled: u64 = dump.stacks.iter().map(|s| s.live_usable_bytes).sum();
    // Slack for objects allocated before the shim could sample (bootstrap).
    let slack = 64 * 1024;
    assert!(
        exact.abs_diff(sampled) <= slack,
        "exact live heap {exact} vs sampled live usable bytes {sampled}: differ by more than {slack}"
    );
}
