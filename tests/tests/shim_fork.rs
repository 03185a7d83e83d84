//! fork without exec (children allocate and exit), fork+exec, posix_spawn,
//! with a thread allocating in the parent meanwhile.

use heapsample_tests::*;

/// At lg 0: every process that wrote a dump wrote its own
/// (`heapsample.<its pid>...`, pid inside matching), the parent's dump has
/// none of its children's allocations, fork children that wrote a dump have
/// exactly theirs, and the exec'd copy of the program profiled itself.
#[test]
fn fork_and_exec_dumps() {
    let program = compile_c("fork.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let parent: u32 = tagged_values(&outcome.stderr, "pid", "parent")[0]
        .parse()
        .expect("parent pid");
    assert_eq!(parent, outcome.pid);
    let fork_children: Vec<u32> = tagged_values(&outcome.stderr, "pid", "fork-child")
        .iter()
        .map(|v| v.parse().expect("pid"))
        .collect();
    assert_eq!(fork_children.len(), 10, "{}", outcome.context());
    let exec_self: u32 = tagged_values(&outcome.stderr, "pid", "exec-self")[0]
        .parse()
        .expect("pid");
    let exec_true: u32 = tagged_values(&outcome.stderr, "pid", "exec-true")[0]
        .parse()
        .expect("pid");

    let dumps = outcome.dumps();
    for (file, dump) in &dumps {
        assert_eq!(
            file.pid, dump.pid,
            "{} holds the dump of pid {}",
            file.name, dump.pid
        );
    }
    let mut names: Vec<(u32, String)> = dumps
        .iter()
        .map(|(f, _)| (f.pid, f.trigger.clone()))
        .collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "two final dumps for one pid");

    let (_, parent_dump) = outcome.final_dump();
    check_identities_and_clocks(&dumps, &parent_dump, &fork_children);

    let symbols = Symbols::of(&program);
    let sites = parse_sites(&outcome.stdout);
    let table = per_function(&parent_dump, &symbols);
    let problems = site_mismatches(
        &sites
            .iter()
            .filter(|s| s.name == "parent_site" || s.name == "child_site")
            .cloned()
            .collect::<Vec<_>>(),
        &table,
        SiteCheck {
            live: true,
            alloc: true,
            usable: false,
        },
    );
    assert!(
        problems.is_empty(),
        "parent's dump:\n{}\n{}",
        problems.join("\n"),
        render_per_function(&table)
    );

    // Fork children: a dump is optional (the profiler may disable itself in
    // the child), but if written it is the child's own.
    for (file, dump) in dumps.iter().filter(|(f, _)| fork_children.contains(&f.pid)) {
        let t = per_function(dump, &symbols);
        let c = t.get("child_site").copied().unwrap_or_default();
        assert_eq!(
            (c.alloc_objects, c.alloc_bytes, c.live_objects, c.live_bytes),
            (200, 51200, 100, 25600),
            "{}: child_site counts (as the child printed them)\n{}",
            file.name,
            render_per_function(&t)
        );
    }

    // The exec'd copy is a fresh process under LD_PRELOAD: it must profile.
    let (file, dump) = dumps
        .iter()
        .find(|(f, _)| f.pid == exec_self)
        .unwrap_or_else(|| {
            panic!(
                "no dump from the exec'd child {exec_self}\n{}",
                outcome.context()
            )
        });
    let t = per_function(dump, &symbols);
    let problems = site_mismatches(
        &sites
            .iter()
            .filter(|s| s.name == "exec_child_site")
            .cloned()
            .collect::<Vec<_>>(),
        &t,
        SiteCheck {
            live: true,
            alloc: true,
            usable: false,
        },
    );
    assert!(
        problems.is_empty(),
        "{}: {}",
        file.name,
        problems.join("\n")
    );
    assert!(
        dumps.iter().any(|(f, _)| f.pid == exec_true),
        "/bin/true exec'd under LD_PRELOAD left no dump"
    );
}

/// Every process that dumped has an identity of its own (all different, none
/// 0); a fork child names its parent's as its parent id and keeps its
/// parent's clock origin; an exec'd process starts afresh (no parent id).
/// Each dump's own moment lies after its start on the monotonic clock, and
/// the wall clock tells the same span (within a second).
fn check_identities_and_clocks(
    dumps: &[(DumpFile, heapsample_format::Dump)],
    parent: &heapsample_format::Dump,
    fork_children: &[u32],
) {
    let mut ids: Vec<u128> = dumps.iter().map(|(_, d)| d.process.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), dumps.len(), "two dumps with one process id");
    assert!(ids.iter().all(|&id| id != 0), "a process id of 0");
    assert_eq!(
        parent.process.parent_id, 0,
        "the first process has no parent"
    );
    for (file, dump) in dumps {
        let p = &dump.process;
        assert!(
            p.start_monotonic_ns > 0 && p.dump_monotonic_ns >= p.start_monotonic_ns,
            "{}: {p:?}",
            file.name
        );
        let wall = dump.time_unix_ns as i128 - p.start_unix_ns as i128;
        let monotonic = i128::from(p.dump_time_ns());
        assert!(
            (wall - monotonic).abs() < 1_000_000_000,
            "{}: the wall clock says {wall} ns since the start, the monotonic {monotonic}",
            file.name
        );
        assert_eq!(
            p.attach_unix_ns, None,
            "{}: preloaded, not attached",
            file.name
        );
        if fork_children.contains(&file.pid) {
            assert_eq!(p.parent_id, parent.process.id, "{}: parent id", file.name);
            assert_eq!(
                p.start_monotonic_ns, parent.process.start_monotonic_ns,
                "{}: a fork child keeps its parent's start",
                file.name
            );
        } else if file.pid != parent.pid {
            assert_eq!(
                p.parent_id, 0,
                "{}: an exec'd process starts afresh",
                file.name
            );
        }
    }
}

/// Forking 10 times while another thread allocates must not deadlock any
/// child, at several periods.
#[test]
fn fork_while_another_thread_allocates() {
    let program = compile_c("fork.c", &BuildOptions::no_pie());
    for conf in ["lg_prof_sample:19", "lg_prof_sample:4", "lg_prof_sample:0"] {
        let (_, profiled) = assert_same_behaviour(
            &Run::program(&program)
                .with_shim()
                .prof_conf(conf)
                .timeout(std::time::Duration::from_secs(40)),
        );
        profiled.assert_success();
    }
}

/// Forked processes share unwind rules, but never those of an object only
/// one of them loaded: two siblings load two builds of a plugin with the
/// same code layout and different frame sizes at the same address, one after
/// the other; every stack through the second one's plugin must still reach
/// `main` (a rule reused from the first would send the walk into the
/// plugin's padding, or, with the 4 MB frame, past the end of the stack).
#[test]
fn siblings_loading_different_objects_at_one_address_keep_correct_stacks() {
    siblings_load_different_objects("dlopen", 4000);
}

/// The same with loads no interposed `dlopen` sees (`dlmopen` into the base
/// namespace, as glibc's own loads of NSS and iconv modules), and a frame
/// larger than what is left of the stack above it.
#[test]
fn siblings_loading_different_objects_unseen_keep_correct_stacks() {
    siblings_load_different_objects("dlmopen", 4_000_000);
}

fn siblings_load_different_objects(how: &str, big_frame: u32) {
    let libs = TempDir::new("fork-plugins");
    let build = |name: &str, pad: u32| {
        build_shared_library(
            "fork_plugin.c",
            &libs.path().join(name),
            &[
                "-O1",
                "-fomit-frame-pointer",
                "-fno-stack-protector",
                "-fcf-protection=none",
                &format!("-DPAD={pad}"),
            ],
        )
    };
    let big = build("fork_plugin_big.so", big_frame);
    let small = build("fork_plugin_small.so", 256);
    let program = compile_c(
        "fork_plugins.c",
        &BuildOptions {
            extra_flags: vec!["-ldl".into()],
            ..BuildOptions::no_pie()
        },
    );
    let outcome = Run::program(&program)
        .arg(how)
        .args([&big, &small])
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_fork_final:all")
        .run();
    outcome.assert_success();
    let addresses = tagged_values(&outcome.stderr, "fork_plugins:", "plugin_alloc");
    assert_eq!(addresses.len(), 2, "{}", outcome.context());
    assert_eq!(
        addresses[0],
        addresses[1],
        "the plugins must load at one address for this test to show anything\n{}",
        outcome.context()
    );
    let symbols = Symbols::of(&program);
    let children = tagged_values(&outcome.stderr, "fork_plugins:", "pid");
    let dumps = outcome.dumps();
    for child in &children {
        let pid: u32 = child.parse().expect("pid");
        let (file, dump) = dumps
            .iter()
            .find(|(f, _)| f.pid == pid && f.trigger == "f")
            .unwrap_or_else(|| panic!("no exit dump of child {pid}\n{}", outcome.context()));
        let stacks = stacks_in(dump, &symbols, "leaf_site");
        let allocations: u64 = stacks.iter().map(|s| s.alloc_objects).sum();
        assert_eq!(allocations, 200, "{}", file.name);
        for stack in stacks {
            let functions = symbols.frame_functions(dump, stack);
            let reaches = |name: &str| functions.iter().any(|f| f.as_deref() == Some(name));
            assert!(
                reaches("child_work") && reaches("main"),
                "{}: a stack through the plugin stops short: {functions:?}",
                file.name
            );
        }
    }
}

/// A parent that never had a second thread takes no lock around fork, and
/// its children reset only what differs from a fresh process: after the
/// parent's own dumps, each child still numbers its dumps from 0, under its
/// own pid, and its dumps hold what it allocated.
#[test]
fn children_of_a_single_threaded_parent_that_dumped_number_their_own_dumps() {
    let program = compile_c("dump_then_fork.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .args(["3", "5"])
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_fork_final:all")
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("children=5"),
        "{}",
        outcome.context()
    );
    let mut by_pid: std::collections::BTreeMap<u32, Vec<(u64, String)>> = Default::default();
    for file in outcome.dump_files() {
        by_pid
            .entry(file.pid)
            .or_default()
            .push((file.seq, file.trigger.clone()));
    }
    let numbered = |triggers: &[&str]| -> Vec<(u64, String)> {
        (0u64..)
            .zip(triggers.iter().map(|t| t.to_string()))
            .collect()
    };
    for names in by_pid.values_mut() {
        names.sort();
    }
    assert_eq!(
        by_pid.remove(&outcome.pid),
        Some(numbered(&["m", "m", "m", "f"])),
        "the parent's dumps\n{}",
        outcome.context()
    );
    assert_eq!(
        by_pid.len(),
        5,
        "one set of dumps per child\n{}",
        outcome.context()
    );
    for (pid, names) in &by_pid {
        assert_eq!(
            names,
            &numbered(&["m", "f"]),
            "child {pid}\n{}",
            outcome.context()
        );
    }
    for (file, dump) in outcome.dumps() {
        assert_eq!(
            file.pid, dump.pid,
            "{} holds another process's dump",
            file.name
        );
        if file.pid != outcome.pid {
            // The parent's 128 live blocks, the child's 128 more (exact).
            let live: u64 = dump.stacks.iter().map(|s| s.live_objects).sum();
            assert!(live >= 256, "{}: {live} live objects", file.name);
        }
    }
}
