//! `heapsample attach` on a C++ program allocating hard on four threads
//! (maps, strings, new/delete, each result checked): 200 attach/detach
//! cycles in a row while it runs, with no deadlock, no crash and the output
//! of a run never attached; then a library it loads after an attach is
//! profiled (its `operator new` allocations are in the dump).

mod attach_common;

use std::path::Path;
use std::process::Command;

use attach_common::{Driven, dump_now, heapsample_ok, unattached};
use heapsample_tests::{BuildOptions, Symbols, TempDir, compile_cxx};

fn build_plugin(dir: &Path) -> std::path::PathBuf {
    let output = dir.join("attach_cxx_plugin.so");
    let source = heapsample_tests::programs_dir().join("attach_cxx_plugin.cpp");
    let status = Command::new("g++")
        .args([
            "-shared",
            "-fPIC",
            "-g",
            "-O1",
            "-fno-omit-frame-pointer",
            "-o",
        ])
        .arg(&output)
        .arg(&source)
        .status()
        .expect("run g++");
    assert!(status.success());
    output
}

#[test]
fn two_hundred_attach_detach_cycles_then_a_plugin() {
    let program = compile_cxx("attach_cxx.cpp", &BuildOptions::pie());
    let out = TempDir::new("attach-cxx");
    let dir = out.path().to_str().unwrap();
    let plugin = build_plugin(out.path());
    let plugin_command = format!("plugin {}", plugin.display());
    let commands = ["start", &plugin_command, "stop", "end"];
    let (expected, expected_status) = unattached(&program.path, &[], &[], &commands);

    let mut target = Driven::start(&program.path, &[], &[]);
    let pid = target.pid_arg();
    assert_eq!(target.send("start"), "started");
    let attach = ["attach", &pid, "-o", dir, "--lg-sample", "14"];
    let mut longest_stop_ms: f64 = 0.0;
    for _ in 0..200 {
        let attached = heapsample_ok(&attach);
        longest_stop_ms = longest_stop_ms.max(stopped_ms(&attached));
        heapsample_ok(&["detach", &pid]);
    }
    heapsample_ok(&attach);
    assert_eq!(target.send(&plugin_command), "plugin 1000");
    let (_, dump) = dump_now(&pid);
    heapsample_ok(&["detach", &pid]);
    assert_eq!(target.send("stop"), "thread 0 ok");
    target.send_only("end");
    let (transcript, status) = target.finish();
    assert_eq!(
        transcript, expected,
        "the same output as a run never attached"
    );
    assert_eq!(status.code(), expected_status.code());
    eprintln!("longest stop of the attaching thread over 200 attaches: {longest_stop_ms:.1} ms");

    let plugin_symbols = Symbols::load(&plugin);
    let (objects, bytes) = dump
        .stacks
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .any(|&frame| plugin_symbols.function_at(&dump, s, frame) == Some("plugin_make"))
        })
        .fold((0.0, 0.0), |(n, b), s| {
            (n + s.live.objects, b + s.live.bytes)
        });
    // 1000 objects of 1 KiB at a 16 KiB period: Bin(1000, 0.0606) samples,
    // 60.6 expected, a relative standard error of 13 %. The estimate lies
    // in [0.5, 1.6) of the truth but with probability 9·10⁻⁶ (the exact
    // binomial tails: under 31 or over 97 samples); ±40 % was 3σ, a false
    // failure of 1.6·10⁻³. Samples counted twice fail it with probability
    // 0.95.
    let truth = 1000.0 * 1024.0;
    assert!(
        (0.5 * truth..1.6 * truth).contains(&bytes),
        "plugin_make: {bytes} bytes in {objects} objects live, truth {truth}"
    );
}

/// "thread T was stopped X ms" in `heapsample attach`'s first line.
fn stopped_ms(attached: &str) -> f64 {
    attached
        .split("was stopped ")
        .nth(1)
        .and_then(|rest| rest.split(" ms").next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no stop time in {attached:?}"))
}
