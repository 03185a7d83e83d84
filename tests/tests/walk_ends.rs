//! The walk of each sampled stack: exact where it can be (stacks of
//! varying depth through alternating functions, whose outer frames the walk
//! takes from the thread's previous capture wherever they are unchanged,
//! agree frame by frame and count by count with the program's own calls),
//! and counted where it ends early, with the reason in the dump and in
//! heapdiff's text and json (code without unwind information or frame
//! pointer, the frame limit), and no early end for a plain C program.

use std::collections::BTreeMap;

use heapsample_tests::*;

fn program() -> Program {
    compile_c("walk_ends.c", &BuildOptions::no_pie())
}

/// `walk_ends.c`'s `depth_of`.
fn depth_of(i: i64) -> usize {
    1 + ((i * 7 + i / 5) % 23) as usize
}

/// `walk_ends.c`'s `pattern_of`.
fn pattern_of(i: i64) -> usize {
    ((i / 3) % 8) as usize
}

/// The program frames of allocation i's stack in `paths`, innermost first,
/// as the program calls them.
fn expected_frames(i: i64) -> Vec<String> {
    expected_frames_below(i, &["paths", "main"])
}

/// The program frames of allocation i's stack, innermost first, when its
/// recursion is called from `outer` (innermost first).
fn expected_frames_below(i: i64, outer: &[&str]) -> Vec<String> {
    let (depth, pattern) = (depth_of(i), pattern_of(i));
    let mut frames = vec!["leaf_alloc".to_string()];
    for level in 0..depth {
        let b = (pattern >> (level % 3)) & 1 == 1;
        frames.push(if b { "down_b" } else { "down_a" }.to_string());
    }
    frames.extend(outer.iter().map(|name| name.to_string()));
    frames
}

/// Allocation i's size (`walk_ends.c` names the path by it).
fn size_of(i: i64) -> u64 {
    1000 + 8 * depth_of(i) as u64 + pattern_of(i) as u64
}

/// The program's frames of `stack` (innermost first, up to `main`).
fn program_frames(symbols: &Symbols, dump: &format::Dump, stack: &format::Stack) -> Vec<String> {
    let mut names: Vec<String> = symbols
        .frame_functions(dump, stack)
        .into_iter()
        .flatten()
        .filter(|name| name != "next")
        .collect();
    if let Some(main) = names.iter().position(|name| name == "main") {
        names.truncate(main + 1);
    }
    names
}

/// Allocations and bytes per program-frame path.
type PerPath = BTreeMap<Vec<String>, (u64, u64)>;

fn run(mode: &str, n: i64, conf: &str) -> (Outcome, format::Dump) {
    let run = Run::program(&program())
        .args([mode, &n.to_string()])
        .with_shim()
        .prof_conf(conf);
    let (_, profiled) = assert_same_behaviour(&run);
    assert!(
        profiled.stdout.contains(&format!("{mode} done {n}")),
        "{}",
        profiled.context()
    );
    assert!(
        profiled.heapsample_lines().is_empty(),
        "{}",
        profiled.context()
    );
    let (_, dump) = profiled.final_dump();
    (profiled, dump)
}

/// Allocations and bytes per path of `allocations` (path, size).
fn per_path(allocations: impl Iterator<Item = (Vec<String>, u64)>) -> PerPath {
    let mut paths = PerPath::new();
    for (path, size) in allocations {
        let entry = paths.entry(path).or_default();
        entry.0 += 1;
        entry.1 += size;
    }
    paths
}

/// Allocations and bytes per program-frame path of `dump`'s stacks through
/// `leaf_alloc`, each path cut after the first frame named in `outermost`.
fn seen_paths(dump: &format::Dump, symbols: &Symbols, outermost: &[&str]) -> PerPath {
    let mut seen = PerPath::new();
    for stack in stacks_in(dump, symbols, "leaf_alloc") {
        let mut frames = program_frames(symbols, dump, stack);
        if let Some(last) = frames
            .iter()
            .position(|name| outermost.contains(&name.as_str()))
        {
            frames.truncate(last + 1);
        }
        let entry = seen.entry(frames).or_default();
        entry.0 += stack.alloc_objects;
        entry.1 += stack.alloc_bytes;
    }
    seen
}

fn assert_same_paths(seen: &PerPath, expected: &PerPath) {
    assert_eq!(
        seen.len(),
        expected.len(),
        "distinct paths: seen {:#?}",
        seen.keys().collect::<Vec<_>>()
    );
    for (path, counts) in expected {
        assert_eq!(
            seen.get(path),
            Some(counts),
            "allocations and bytes of path {path:?}"
        );
    }
}

fn walks(dump: &format::Dump) -> u64 {
    let ends = dump.runtime.walk_ends;
    ends.complete + ends.depth_limit + ends.no_unwind_info + ends.unreadable_stack
}

fn heapdiff_text_and_json(outcome: &Outcome) -> (String, serde_json::Value) {
    let (file, _) = outcome.final_dump();
    let path = file.path.to_str().unwrap();
    let text = heapdiff_ok(&["-f", "text", path]);
    let json = heapdiff_ok(&["-f", "json", path]);
    (text, serde_json::from_str(&json).expect("heapdiff's json"))
}

#[test]
fn stacks_of_varying_depth_match_the_programs_calls_and_end_whole() {
    const N: i64 = 4000;
    let (outcome, dump) = run("paths", N, "lg_prof_sample:0");
    let symbols = Symbols::of(&program());
    let expected = per_path((0..N).map(|i| (expected_frames(i), size_of(i))));
    assert_same_paths(&seen_paths(&dump, &symbols, &["main"]), &expected);
    // Every sample's walk reached the outermost frame.
    let ends = dump.runtime.walk_ends;
    assert_eq!(walks(&dump), dump.totals.samples_taken, "{ends:?}");
    assert_eq!(ends.complete, dump.totals.samples_taken, "{ends:?}");
    let (text, json) = heapdiff_text_and_json(&outcome);
    assert!(!text.contains("ended early"), "{text}");
    let json_ends = &json["new"]["walk_ends"];
    assert_eq!(json_ends["complete"], ends.complete, "{json_ends}");
    assert_eq!(json_ends["no_unwind_info"], 0, "{json_ends}");
}

/// Where the walk's reuse of the thread's previous capture could go wrong: the
/// recursion left by `longjmp` (its frames stay below the stack pointer)
/// and the next allocation made at another depth, at stack pointers shifted
/// by varying amounts, so the same return addresses sit at other stack
/// pointers from one allocation to the next. Every stack must still be the
/// program's own call path, count for count.
#[test]
fn stacks_left_by_longjmp_at_shifted_stack_pointers_match_the_programs_calls() {
    const N: i64 = 3000;
    let (_, dump) = run("jumps", N, "lg_prof_sample:0");
    let symbols = Symbols::of(&program());
    let outer = ["jump_from", "shifted", "jumps", "main"];
    let expected = per_path((0..N).map(|i| (expected_frames_below(i, &outer), size_of(i))));
    assert_same_paths(&seen_paths(&dump, &symbols, &["main"]), &expected);
    let ends = dump.runtime.walk_ends;
    assert_eq!(ends.complete, dump.totals.samples_taken, "{ends:?}");
}

/// Threads run one after another on the stack glibc keeps for the next one,
/// alternately under two functions: each thread's stacks are its own calls,
/// never a frame of the thread before it at the same stack addresses.
#[test]
fn threads_on_a_reused_stack_see_their_own_calls() {
    const THREADS: i64 = 60;
    let (_, dump) = run("threads", THREADS, "lg_prof_sample:0");
    let symbols = Symbols::of(&program());
    let expected = per_path((0..THREADS).flat_map(|t| {
        let body = if t % 2 == 1 { "thread_b" } else { "thread_a" };
        (20 * t..20 * t + 20)
            .map(move |i| (expected_frames_below(i, &["run_paths", body]), size_of(i)))
    }));
    let seen = seen_paths(&dump, &symbols, &["thread_a", "thread_b"]);
    assert_same_paths(&seen, &expected);
}

/// Allocations made while the profiler's own `dlclose` runs (a library's
/// destructor) have one of its frames between the program's, which the
/// recorder drops; the walk's memo of the thread's previous capture must
/// never bring such a frame back unseen. Twenty frames deep, so that the
/// memo is used, each destructor (and constructor) allocating twice from one
/// call site, so that the second capture can replay the first's outer
/// frames: no stack holds an address of the profiler's, and every
/// allocation is counted exactly under the program's frames.
#[test]
fn frames_of_the_profilers_own_dlclose_never_reach_a_stack() {
    const N: i64 = 200;
    let libraries = TempDir::new("walk-ends-dlopen");
    let build = |name: &str, size: u32| {
        let flags = ["-g", "-O1", &format!("-DCTOR_SIZE={size}")];
        build_shared_library("walk_ends_lib.c", &libraries.path().join(name), &flags)
    };
    let (a, b) = (build("liba.so", 3001), build("libb.so", 3002));
    let run = Run::program(&program())
        .arg("dlopen")
        .arg(N.to_string())
        .arg(&a)
        .arg(&b)
        .with_shim()
        .prof_conf("lg_prof_sample:0");
    let (_, profiled) = assert_same_behaviour(&run);
    assert!(
        profiled.stdout.contains(&format!("dlopen done {N}")),
        "{}",
        profiled.context()
    );
    let (_, dump) = profiled.final_dump();
    let shim = std::fs::canonicalize(shim_path()).expect("the shim");
    let own: Vec<(u64, u64)> = dump
        .modules
        .iter()
        .filter(|module| std::fs::canonicalize(&module.path).ok().as_ref() == Some(&shim))
        .flat_map(|module| module.ranges.iter().copied())
        .collect();
    assert!(
        !own.is_empty(),
        "the shim's mapping is in the dump's modules"
    );
    for stack in &dump.stacks {
        for &address in &stack.frames {
            assert!(
                !own.iter()
                    .any(|&(start, end)| (start..end).contains(&address)),
                "a frame of the profiler's own at {address:#x} in {:?}",
                stack.frames
            );
        }
    }
    // Each library's constructor and destructor ran N / 2 times, under the
    // program's 20 load_round frames.
    let symbols = Symbols::of(&program());
    for size in [3001, 3002, 4001, 4002] {
        let stacks: Vec<&format::Stack> = dump
            .stacks
            .iter()
            .filter(|stack| {
                stack.alloc_objects > 0 && stack.alloc_bytes == size * stack.alloc_objects
            })
            .collect();
        let objects: u64 = stacks.iter().map(|stack| stack.alloc_objects).sum();
        assert_eq!(objects, N as u64, "constructor allocations of {size} bytes");
        for stack in stacks {
            let names = symbols.frame_functions(&dump, stack);
            let rounds = names
                .iter()
                .flatten()
                .filter(|name| *name == "load_round")
                .count();
            assert_eq!(rounds, 20, "{names:?}");
        }
    }
}

#[test]
fn code_without_unwind_information_or_frame_pointer_is_counted_and_said() {
    const N: i64 = 300;
    let (outcome, dump) = run("jit", N, "lg_prof_sample:0");
    let ends = dump.runtime.walk_ends;
    // Every allocation is a sample: those made under the stub end there.
    assert_eq!(ends.no_unwind_info, N as u64, "{ends:?}");
    assert_eq!(
        (ends.depth_limit, ends.unreadable_stack),
        (0, 0),
        "{ends:?}"
    );
    assert_eq!(walks(&dump), dump.totals.samples_taken, "{ends:?}");
    let symbols = Symbols::of(&program());
    // The stacks under the stub stop at it: no program frame above
    // `allocate_under_jit`.
    for stack in stacks_in(&dump, &symbols, "leaf_alloc") {
        let names = program_frames(&symbols, &dump, stack);
        if names.iter().any(|name| name == "allocate_under_jit") {
            assert_eq!(names, ["leaf_alloc", "allocate_under_jit"]);
            assert_eq!(stack.alloc_objects, N as u64);
        } else {
            assert_eq!(names, ["leaf_alloc", "jit", "main"]);
        }
    }
    let (text, json) = heapdiff_text_and_json(&outcome);
    let line = text
        .lines()
        .find(|line| line.contains("ended early"))
        .unwrap_or_else(|| panic!("no line about early ends:\n{text}"));
    let total = walks(&dump);
    assert!(
        line.starts_with(&format!(
            "stacks: {N} of {total} sampled stacks ended early"
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!("{N} in code without unwind information"))
            && line.contains("-fno-omit-frame-pointer"),
        "{line}"
    );
    assert_eq!(json["new"]["walk_ends"]["no_unwind_info"], N, "{json}");
}

#[test]
fn stacks_cut_at_the_frame_limit_are_counted_and_said() {
    const N: i64 = 600;
    let (outcome, dump) = run("paths", N, "lg_prof_sample:0,prof_bt_max:12");
    // Stacks of leaf_alloc, d frames of down_*, paths, main and libc's start:
    // more than 12 frames exactly when d + 2 + (libc's) > 12.
    let ends = dump.runtime.walk_ends;
    let deep = (0..N).filter(|&i| depth_of(i) + 3 > 12).count() as u64;
    assert!(ends.depth_limit >= deep, "{ends:?}, {deep} deeper than 12");
    assert_eq!(walks(&dump), dump.totals.samples_taken, "{ends:?}");
    assert_eq!(ends.no_unwind_info, 0, "{ends:?}");
    let (text, _) = heapdiff_text_and_json(&outcome);
    assert!(
        text.lines().any(|line| line.starts_with("stacks: ")
            && line.contains(&format!(
                "{} at the frame limit (raise prof_bt_max",
                ends.depth_limit
            ))),
        "{text}"
    );
}
