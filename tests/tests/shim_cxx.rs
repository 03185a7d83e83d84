//! C++ on glibc: operator new/delete (plain, array, aligned, nothrow, sized
//! delete) reach the shim through malloc and are counted exactly once.

use heapsample_tests::*;

#[test]
fn cxx_exact_counts_at_lg_prof_sample_0() {
    let program = compile_cxx("cxx.cpp", &BuildOptions::no_pie());
    let (_, outcome) = assert_same_behaviour(
        &Run::program(&program)
            .with_shim()
            .prof_conf("lg_prof_sample:0"),
    );
    let sites = parse_sites(&outcome.stdout);
    assert_eq!(sites.len(), 5, "{}", outcome.context());
    let (_, dump) = outcome.final_dump();
    let symbols = Symbols::of(&program);
    assert_sites_match(&dump, &symbols, &sites, "");
    // frames[0] is the return address in operator new (libstdc++) or in the
    // site itself: never in the shim.
    for stack in stacks_in(&dump, &symbols, "cxx_site_new") {
        let first = stack.frames[0];
        let module = dump.module_for(first, stack.epoch).map(|m| m.path.as_str());
        assert!(
            !module.unwrap_or("").contains("libheapsample"),
            "the shim's own frame {first:#x} is in the stack"
        );
    }
}

/// No stack anywhere starts inside the shim itself (its frames are removed).
#[test]
fn no_shim_frames_in_stacks() {
    let program = compile_cxx("cxx.cpp", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let (_, dump) = outcome.final_dump();
    let mut bad = Vec::new();
    for stack in &dump.stacks {
        if let Some(&first) = stack.frames.first() {
            if dump
                .module_for(first, stack.epoch)
                .is_some_and(|m| m.path.contains("libheapsample"))
            {
                bad.push(format!("{first:#x}"));
            }
        } else {
            bad.push("empty stack".to_string());
        }
    }
    assert!(
        bad.is_empty(),
        "{} stacks start in the shim or are empty: {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}
