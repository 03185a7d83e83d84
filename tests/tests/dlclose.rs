//! dlopen/dlclose: stacks recorded in a library that was unloaded (and
//! replaced by another library at the same address) still symbolize, in
//! the dump's module map and through `heapdiff --format folded`.

use std::path::{Path, PathBuf};
use std::process::Command;

use heapsample_tests::*;

fn build_lib(dir: &Path, name: &str, function: &str) -> PathBuf {
    build_shared_library(
        "trig_dl_lib.c",
        &dir.join(name),
        &[
            "-g",
            "-O1",
            "-fno-omit-frame-pointer",
            &format!("-DALLOC_FN={function}"),
        ],
    )
}

#[test]
fn unloaded_library_frames_stay_attributed() {
    check_attribution("lg_prof_sample:0", &[]);
}

/// Under `prof_exact` the profiler runs in a mode of its own; dlclose must
/// be recorded there too.
#[test]
fn unloaded_library_frames_stay_attributed_under_prof_exact() {
    check_attribution("lg_prof_sample:0,prof_exact:true", &[]);
}

/// Once the bootstrap arena served an allocation (here: a preloaded dlsym
/// that allocates while the shim looks up the next allocator), the profiler
/// runs on the arena-aware paths; dlclose must be recorded there too.
#[test]
fn unloaded_library_frames_stay_attributed_after_bootstrap_arena_use() {
    let libs = TempDir::new("dl-hook");
    let hook = build_shared_library(
        "dlsym_allocates.c",
        &libs.path().join("libdlsym_allocates.so"),
        &["-O1", "-ldl"],
    );
    let outcome = check_attribution("lg_prof_sample:0", &[hook]);
    let blocks = outcome
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("dlsym_allocates: arena_blocks="))
        .and_then(|n| n.parse::<u32>().ok());
    assert!(
        blocks.is_some_and(|n| n > 0),
        "the bootstrap arena was not used, so this test shows nothing\n{}",
        outcome.context()
    );
}

/// Run trig_dl_main under the shim (followed by `then` in LD_PRELOAD) with
/// `conf`, and check that the objects allocated in the unloaded library and
/// in its replacement are attributed to each.
fn check_attribution(conf: &str, then: &[PathBuf]) -> Outcome {
    let libs = TempDir::new("dl-libs");
    let liba = build_lib(libs.path(), "libtrig_a.so", "liba_alloc");
    let libb = build_lib(libs.path(), "libtrig_b.so", "libb_alloc");
    let program = compile_c(
        "trig_dl_main.c",
        &BuildOptions {
            extra_flags: vec!["-ldl".into()],
            ..BuildOptions::no_pie()
        },
    );
    let preload = if then.is_empty() {
        Preload::Shim
    } else {
        Preload::ShimThen(then.to_vec())
    };
    let outcome = Run::program(&program)
        .arg(&liba)
        .arg(&libb)
        .preload(preload)
        .prof_conf(conf)
        .run();
    outcome.assert_success();
    let out = &outcome.stdout;
    assert!(
        out.contains("unmapped=1"),
        "liba was not unloaded\n{}",
        outcome.context()
    );
    assert!(out.contains("dump rc=0"), "{}", outcome.context());
    let same_address = out.contains("same_address=1");
    eprintln!("dlclose: libb at the same address as liba: {same_address}");
    let dump_path = outcome.dir.path().join("dl.prof");
    let dump =
        heapsample_format::decode(&std::fs::read(&dump_path).expect("dl.prof")).expect("decodes");

    let is = |m: &heapsample_format::Module, lib: &Path| Path::new(&m.path) == lib;
    let module_a = dump
        .modules
        .iter()
        .find(|m| is(m, &liba))
        .unwrap_or_else(|| panic!("liba is not in the module map: {:#?}", dump.modules));
    assert!(
        module_a.last_epoch.is_some(),
        "liba still marked loaded: {module_a:?}"
    );
    let syms_a = Symbols::load(&liba);
    let syms_b = Symbols::load(&libb);
    // Per library function, objects of the stacks whose frames the dump's
    // map (for the stack's epoch) attributes to that library.
    let (mut in_a, mut in_b) = (0u64, 0u64);
    for stack in &dump.stacks {
        for &address in &stack.frames {
            let Some(m) = dump.module_for(address, stack.epoch) else {
                continue;
            };
            let file = address.wrapping_sub(m.load_bias).wrapping_sub(1);
            if is(m, &liba) && syms_a.function_containing(file) == Some("liba_alloc") {
                assert!(
                    stack.epoch >= m.first_epoch && Some(stack.epoch) <= m.last_epoch,
                    "epoch range"
                );
                in_a += stack.alloc_objects;
                break;
            }
            if is(m, &libb) && syms_b.function_containing(file) == Some("libb_alloc") {
                in_b += stack.alloc_objects;
                break;
            }
        }
    }
    assert_eq!(
        (in_a, in_b),
        (300, 200),
        "objects attributed to liba_alloc / libb_alloc"
    );

    let folded = Command::new(heapdiff_path())
        .args(["--format", "folded", "--metric", "alloc-objects"])
        .arg(&dump_path)
        .output()
        .expect("heapdiff");
    assert!(
        folded.status.success(),
        "{}",
        String::from_utf8_lossy(&folded.stderr)
    );
    let text = String::from_utf8_lossy(&folded.stdout);
    let count = |function: &str| -> u64 {
        text.lines()
            .filter(|l| {
                l.rsplit_once(' ')
                    .is_some_and(|(s, _)| s.ends_with(function))
            })
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(
        (count("liba_alloc"), count("libb_alloc")),
        (300, 200),
        "heapdiff folded must name the unloaded library's function (symbolizing by epoch)\n{text}"
    );
    outcome
}
