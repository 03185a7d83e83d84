//! PROF_CONF handling, the dump file's name and completeness, prof:false,
//! prof_final, prof_prefix, prof_accum, prof_active and the prof_leak summary.

use heapsample_format::Trigger;
use heapsample_tests::*;
use std::time::{SystemTime, UNIX_EPOCH};

fn sites_program() -> Program {
    compile_c("alloc_sites.c", &BuildOptions::no_pie())
}

/// A bad PROF_CONF: output and status unchanged, exactly one `<heapsample>:`
/// line per bad item, naming it; the good items still apply and the
/// profiler still runs (a dump is written).
#[test]
fn bad_prof_conf_items_warn_once_each() {
    let program = sites_program();
    // (PROF_CONF, words each warning must contain (one list per bad item),
    //  expected lg_sample_period in the dump)
    let cases: &[(&str, &[&[&str]], u32)] = &[
        ("nonsense_key:1", &[&["nonsense_key"]], 19),
        (
            "lg_prof_sample:banana",
            &[&["lg_prof_sample", "banana"]],
            19,
        ),
        ("prof:maybe", &[&["prof", "maybe"]], 19),
        ("prof_bt_max:abc", &[&["prof_bt_max", "abc"]], 19),
        ("justakey", &[&["justakey"]], 19),
        (
            "nonsense_key:1,lg_prof_sample:banana",
            &[&["nonsense_key"], &["lg_prof_sample", "banana"]],
            19,
        ),
        ("lg_prof_sample:0,nonsense_key:1", &[&["nonsense_key"]], 0),
        ("nonsense_key:1,lg_prof_sample:3", &[&["nonsense_key"]], 3),
    ];
    let mut failures = Vec::new();
    for (conf, expected, lg) in cases {
        let run = Run::program(&program).with_shim().prof_conf(*conf);
        let (_, profiled) = assert_same_behaviour(&run);
        let lines = profiled.heapsample_lines();
        if lines.len() != expected.len() {
            failures.push(format!(
                "PROF_CONF={conf:?}: expected {} <heapsample>: line(s), got {}: {lines:?}",
                expected.len(),
                lines.len()
            ));
            continue;
        }
        for words in expected.iter() {
            if !lines.iter().any(|l| words.iter().all(|w| l.contains(w))) {
                failures.push(format!(
                    "PROF_CONF={conf:?}: no warning mentions {words:?}: {lines:?}"
                ));
            }
        }
        // The rest of stderr is the program's own, untouched.
        if profiled
            .stderr_without_heapsample()
            .lines()
            .any(|l| !l.starts_with("addr ") && !l.starts_with("usable "))
        {
            failures.push(format!(
                "PROF_CONF={conf:?}: stray stderr: {}",
                profiled.stderr_without_heapsample()
            ));
        }
        let (_, dump) = profiled.final_dump();
        if dump.lg_sample_period != *lg {
            failures.push(format!(
                "PROF_CONF={conf:?}: dump has lg_sample_period {}, expected {lg}",
                dump.lg_sample_period
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The final dump is `heapsample.<pid>.<seq>.f.prof` in the working
/// directory, complete (it decodes; header, CRC), describes the process, and
/// nothing else (no temporary file) is left beside it.
#[test]
fn dump_file_name_and_contents() {
    let program = sites_program();
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    let outcome = Run::program(&program).arg("2").with_shim().run();
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    outcome.assert_success();
    let entries = outcome.dir.entries();
    assert_eq!(
        entries.len(),
        1,
        "expected exactly the dump in the working directory, found {entries:?}"
    );
    let (file, dump) = outcome.final_dump();
    assert_eq!(entries[0], file.name);
    assert_eq!(file.prefix, "heapsample");
    assert_eq!(file.trigger, "f");
    assert_eq!(
        file.name,
        format!("heapsample.{}.{:06}.f.prof", outcome.pid, file.seq)
    );
    assert_eq!(dump.pid, outcome.pid);
    assert_eq!(dump.seq, file.seq, "seq in the name and in the dump differ");
    assert_eq!(dump.trigger, Trigger::Final);
    assert!(
        Symbols::of(&program).is_this_file(&dump.executable),
        "executable {:?}",
        dump.executable
    );
    assert_eq!(
        dump.command_line.get(1).map(String::as_str),
        Some("2"),
        "command line {:?}",
        dump.command_line
    );
    assert!(
        dump.time_unix_ns >= before && dump.time_unix_ns <= after,
        "dump time {} is outside the run [{before}, {after}]",
        dump.time_unix_ns
    );
    assert!(
        !dump.config.is_empty(),
        "the effective configuration is empty"
    );
    assert!(!dump.modules.is_empty(), "no modules");
    assert!(dump.totals.allocations > 0, "{:?}", dump.totals);
}

/// `prof:false`: pure pass-through, no dump, no output, same behaviour.
#[test]
fn prof_false_writes_nothing() {
    let program = sites_program();
    // (Not combined with prof_leak:true: jemalloc lets prof_leak switch
    // prof on, so that combination is the shim's choice.)
    for extra in ["", ",lg_prof_sample:0", ",prof_final:true"] {
        let (_, profiled) = assert_same_behaviour(
            &Run::program(&program)
                .with_shim()
                .prof_conf(format!("prof:false{extra}")),
        );
        assert!(
            profiled.dir.entries().is_empty(),
            "prof:false{extra} left files: {:?}",
            profiled.dir.entries()
        );
        assert!(
            profiled.heapsample_lines().is_empty(),
            "prof:false{extra} printed {:?}",
            profiled.heapsample_lines()
        );
    }
}

/// `prof_final:false`: no dump at exit.
#[test]
fn prof_final_false_writes_no_dump() {
    let program = sites_program();
    let (_, profiled) = assert_same_behaviour(
        &Run::program(&program)
            .with_shim()
            .prof_conf("prof_final:false"),
    );
    assert!(
        profiled.dump_files().is_empty(),
        "prof_final:false wrote {:?}",
        profiled.dir.entries()
    );
}

/// `prof_prefix` may name another directory.
#[test]
fn prof_prefix_with_a_directory() {
    let program = sites_program();
    let out = TempDir::new("prefix");
    let prefix = out.path().join("myprof");
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf(format!("prof_prefix:{}", prefix.display()))
        .run();
    outcome.assert_success();
    assert!(
        outcome.dump_files().is_empty(),
        "a dump went to the cwd: {:?}",
        outcome.dir.entries()
    );
    let files = dump_files_in(out.path());
    assert_eq!(
        files.len(),
        1,
        "expected one dump in {}, found {:?}",
        out.path().display(),
        out.entries()
    );
    assert_eq!(out.entries().len(), 1, "extra files: {:?}", out.entries());
    let file = &files[0];
    assert_eq!(file.prefix, "myprof");
    assert_eq!(file.pid, outcome.pid);
    assert_eq!(file.decode().pid, outcome.pid);
}

/// `prof_accum:false` keeps only stacks with live objects; the live counts
/// stay exact.
#[test]
fn prof_accum_false_drops_dead_stacks() {
    let program = sites_program();
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_accum:false")
        .run();
    outcome.assert_success();
    let (_, dump) = outcome.final_dump();
    let dead = dump.stacks.iter().filter(|s| s.live_objects == 0).count();
    assert_eq!(
        dead, 0,
        "prof_accum:false kept {dead} stacks with no live objects"
    );
    let table = per_function(&dump, &Symbols::of(&program));
    let problems = site_mismatches(
        &parse_sites(&outcome.stdout),
        &table,
        SiteCheck {
            live: true,
            alloc: false,
            usable: false,
        },
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // With prof_accum on (the default) the fully freed site is still there.
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    let (_, dump) = outcome.final_dump();
    let table = per_function(&dump, &Symbols::of(&program));
    assert!(
        table
            .get("alloc_site_calloc")
            .is_some_and(|c| c.alloc_objects > 0 && c.live_objects == 0),
        "prof_accum (default true) lost the fully freed alloc_site_calloc\n{}",
        render_per_function(&table)
    );
}

/// `prof_active:false`: the program runs, a dump is written, but nothing is
/// sampled.
#[test]
fn prof_active_false_samples_nothing() {
    let program = sites_program();
    let (_, profiled) = assert_same_behaviour(
        &Run::program(&program)
            .with_shim()
            .prof_conf("prof_active:false,lg_prof_sample:0"),
    );
    let (_, dump) = profiled.final_dump();
    let sampled: u64 = dump.stacks.iter().map(|s| s.alloc_objects).sum();
    assert_eq!(
        (sampled, dump.totals.samples_taken),
        (0, 0),
        "prof_active:false still sampled"
    );
}

fn leak_lines(outcome: &Outcome) -> (LeakSummary, String) {
    let lines = outcome.heapsample_lines();
    assert_eq!(
        lines.len(),
        2,
        "prof_leak:true must print exactly two <heapsample>: lines, got {lines:?}\n{}",
        outcome.context()
    );
    let summary = parse_leak_summary(&lines[0]).unwrap_or_else(|| {
        panic!(
            "first line is not `<heapsample>: Leak approximation summary: ~N bytes, ~M objects, >= K contexts`: {:?}",
            lines[0]
        )
    });
    (summary, lines[1].clone())
}

/// `prof_leak:true` at lg 0: the summary equals the dump's live totals
/// exactly, and the second line names the dump file.
#[test]
fn prof_leak_summary_matches_the_dump_exactly_at_lg_0() {
    let program = sites_program();
    let (_, outcome) = assert_same_behaviour(
        &Run::program(&program)
            .with_shim()
            .prof_conf("prof_leak:true,lg_prof_sample:0"),
    );
    let (summary, second) = leak_lines(&outcome);
    let (file, dump) = outcome.final_dump();
    assert!(
        second.contains(&file.name),
        "second line does not name the dump {}: {second:?}",
        file.name
    );
    let live_bytes: u64 = dump.stacks.iter().map(|s| s.live_bytes).sum();
    let live_objects: u64 = dump.stacks.iter().map(|s| s.live_objects).sum();
    let contexts = dump.stacks.iter().filter(|s| s.live_objects > 0).count() as u64;
    assert_eq!(
        (summary.bytes, summary.objects, summary.contexts),
        (live_bytes, live_objects, contexts),
        "leak summary (bytes, objects, contexts) vs the dump's live stacks"
    );
    let program_live: u64 = parse_sites(&outcome.stdout)
        .iter()
        .map(|s| s.get("live_bytes"))
        .sum();
    assert!(
        summary.bytes >= program_live,
        "leak summary {} bytes < the program's own live {program_live}",
        summary.bytes
    );
}

/// At a sparse period the summary is the unbiased estimate: the sum of the
/// live weights the dump carries (each sample weighted by its own inverse
/// sampling probability), rounded.
#[test]
fn prof_leak_summary_is_consistent_at_a_sparse_period() {
    let program = sites_program();
    let outcome = Run::program(&program)
        .arg("20")
        .with_shim()
        .prof_conf("prof_leak:true,lg_prof_sample:14")
        .run();
    outcome.assert_success();
    let (summary, _) = leak_lines(&outcome);
    let (_, dump) = outcome.final_dump();
    let objects: f64 = dump.stacks.iter().map(|s| s.live.objects).sum();
    let bytes: f64 = dump.stacks.iter().map(|s| s.live.bytes).sum();
    assert!(
        (summary.bytes as f64 - bytes).abs() <= 1.0
            && (summary.objects as f64 - objects).abs() <= 1.0,
        "leak summary {summary:?} is not the dump's weighted estimate ({bytes:.0} bytes, {objects:.0} objects)"
    );
    let contexts = dump.stacks.iter().filter(|s| s.live_objects > 0).count() as u64;
    assert_eq!(summary.contexts, contexts);
}
