//! `heapsample attach` on a C program that leaks: attached after it ran a
//! while, at `lg_prof_sample:0` (every allocation sampled, so the dump must
//! be the program's exact truth), the dump holds what leaked since the
//! attach, in the function that leaked it, and nothing of what leaked
//! before; blocks allocated before the attach and freed or reallocated
//! after it are neither counted nor disturbed; after the detach the program
//! runs to its end with the output and status of a run never attached, and
//! writes no exit dump.

mod attach_common;

use std::io::Read;
use std::path::Path;

use attach_common::{Driven, dump_now, heapsample_ok, unattached};
use heapsample_tests::{BuildOptions, Symbols, TempDir, compile_c, dump_files_in, stacks_in};

const LEAK: u64 = 16384;

#[test]
fn a_leak_since_the_attach_is_found_exactly() {
    let program = compile_c("attach_leaker.c", &BuildOptions::no_pie());
    let symbols = Symbols::of(&program);
    let out = TempDir::new("attach-c");
    let dir = out.path().to_str().unwrap();
    let commands = [
        "hold 300", "leak 100", "leak 200", "release", "leak 50", "end",
    ];
    let (expected, expected_status) = unattached(&program.path, &[], &[], &commands);

    let mut leaker = Driven::start(&program.path, &[], &[]);
    let pid = leaker.pid_arg();
    assert_eq!(leaker.send("hold 300"), "holding 300");
    assert_eq!(leaker.send("leak 100"), "leaked 100");
    let attached = heapsample_ok(&["attach", &pid, "-o", dir, "--lg-sample", "0"]);
    assert!(
        attached.starts_with(&format!("heapsample: attached to process {pid}")),
        "{attached}"
    );
    assert_eq!(leaker.send("leak 200"), "leaked 300");
    assert_eq!(leaker.send("release"), "released 300");
    // The leak is born at once just after the attach; the dump 2 s later
    // puts it well inside the first 10 % of the run since the attach.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (path, dump) = dump_now(&pid);
    assert!(path.starts_with(out.path()), "{}", path.display());

    let live_in = |function: &str| {
        stacks_in(&dump, &symbols, function)
            .iter()
            .fold((0, 0), |(n, b), s| (n + s.live_objects, b + s.live_bytes))
    };
    assert_eq!(
        live_in("leak_in_loop"),
        (200, 200 * LEAK),
        "what leaked since the attach"
    );
    assert_eq!(live_in("churn"), (0, 0));
    assert!(
        stacks_in(&dump, &symbols, "hold_blocks").is_empty(),
        "blocks allocated before the attach are not the profiler's"
    );
    // Since the attach: 200 leaks, 1600 churned blocks, 150 reallocations.
    let allocations = dump.totals.allocations;
    assert!((1950..2050).contains(&allocations), "{:?}", dump.totals);
    let attached_at = dump
        .attached_unix_ns()
        .expect("the dump says when the attach was");
    assert!(attached_at <= dump.time_unix_ns);
    // The attach is the profiler's start: births and the dump's moment count
    // from it, on both clocks.
    let since_start = dump.time_unix_ns - dump.process.start_unix_ns;
    assert!(
        dump.process.start_unix_ns.abs_diff(attached_at) < 1_000_000_000
            && since_start.abs_diff(dump.process.dump_time_ns()) < 1_000_000_000,
        "{:?}",
        dump.process
    );
    assert!(dump.process.id != 0, "an attached process has an identity");
    every_view_says_it_counts_from_the_attach(&path, attached_at);
    every_time_view_counts_from_the_attach(&path, attached_at, &dump);

    let detached = heapsample_ok(&["detach", &pid]);
    assert!(detached.contains("slots restored"), "{detached}");
    assert_eq!(leaker.send("leak 50"), "leaked 350");
    assert!(leaker.send("end").starts_with("checksum "));
    let (transcript, status) = leaker.finish();
    assert_eq!(
        transcript, expected,
        "the same output as a run never attached"
    );
    assert_eq!(status.code(), expected_status.code());
    let dumps = dump_files_in(out.path());
    assert_eq!(dumps.len(), 1, "no exit dump after the detach: {dumps:?}");
}

/// heapdiff's text, JSON, pprof and html say what in-use means for a dump
/// of an attached process.
fn every_view_says_it_counts_from_the_attach(dump: &Path, attached_at: u64) {
    let dump = dump.to_str().unwrap();
    let note = "before this dump: in-use counts what was allocated since the attach";
    let text = heapsample_tests::heapdiff_ok(&["-f", "text", dump]);
    assert!(
        text.lines()
            .take(4)
            .any(|l| l.starts_with("heapdiff: ") && l.contains(note)),
        "in the header: {text}"
    );
    let json = heapsample_tests::heapdiff_ok(&["-f", "json", dump]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let found = json
        .pointer("/new/attached_unix_ns")
        .and_then(|v| v.as_u64());
    assert_eq!(found, Some(attached_at), "{json}");
    let pprof = Path::new(dump).with_extension("pb.gz");
    heapsample_tests::heapdiff_ok(&["-f", "pprof", "-o", pprof.to_str().unwrap(), dump]);
    let mut decoded = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&pprof).unwrap())
        .read_to_end(&mut decoded)
        .unwrap();
    assert!(
        String::from_utf8_lossy(&decoded).contains(note),
        "the pprof comment"
    );
    let html = heapsample_tests::heapdiff_ok(&["-f", "html", "-o", "-", dump]);
    assert!(html.contains(note), "the viewer's title");
}

/// The svg title, `ages`, `leaks` and `lifetimes` (text and JSON) say
/// "since the attach", their runs and windows count from it, and memory
/// born just after the attach and kept is "early after the attach", never
/// "start-up" (the process started long before).
fn every_time_view_counts_from_the_attach(
    path: &Path,
    attached_at: u64,
    dump: &heapsample_format::Dump,
) {
    let dump_path = path.to_str().unwrap();
    let svg = heapsample_tests::heapdiff_ok(&["-f", "svg", "-o", "-", dump_path]);
    // inferno's title: `<text id="title" …>TITLE</text>`.
    let title = svg
        .split("id=\"title\"")
        .nth(1)
        .and_then(|t| t.split("</text>").next())
        .unwrap_or_default();
    assert!(
        title.contains("since the attach"),
        "the svg's title: {title}"
    );
    // A birth range counts from the attach too.
    let ranged = heapsample_tests::heapdiff_ok(&["-f", "text", "--born-after", "0s", dump_path]);
    assert!(
        ranged.lines().any(
            |l| l.starts_with("heapdiff: in use counts only memory born in [")
                && l.ends_with(" since the attach")
        ),
        "{ranged}"
    );
    let run_since_attach = dump.time_unix_ns - attached_at;
    for report in ["ages", "leaks", "lifetimes"] {
        let text = heapsample_tests::heapdiff_ok(&[report, dump_path]);
        let header = text.lines().next().unwrap_or_default();
        assert!(
            header.contains("since the attach"),
            "{report}'s header: {text}"
        );
        assert!(!text.contains("start-up"), "{report}: {text}");
        let json = heapsample_tests::heapdiff_ok(&[report, "-f", "json", dump_path]);
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(json["scope"], "since_attach", "{report}: {json}");
        assert_eq!(json["attached_unix_ns"], attached_at, "{report}: {json}");
        // Times count from the profiler's start, which is the attach.
        assert_eq!(
            json["start_unix_ns"], dump.process.start_unix_ns,
            "{report}"
        );
        assert!(
            !json.to_string().contains("\"start-up\""),
            "{report}: {json}"
        );
    }
    let ages = heapsample_tests::heapdiff_ok(&["ages", "-f", "json", dump_path]);
    let ages: serde_json::Value = serde_json::from_str(&ages).unwrap();
    // The run is the time from the attach to the dump (within the clocks'
    // disagreement and the attach's own duration, far under a second).
    let run_ns = ages["run_ns"].as_u64().unwrap();
    assert!(
        run_ns.abs_diff(run_since_attach) < 1_000_000_000,
        "run {run_ns} ns, {run_since_attach} ns since the attach"
    );
    let leak = ages["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "leak_in_loop")
        .unwrap_or_else(|| panic!("leak_in_loop in {ages}"));
    assert_eq!(leak["class"], "early-after-attach", "{leak}");
    assert_eq!(
        leak["live"]["bytes"]["estimate"].as_f64(),
        Some((200 * LEAK) as f64),
        "every allocation sampled: the exact bytes"
    );
    let text = heapsample_tests::heapdiff_ok(&["ages", dump_path]);
    assert!(
        text.contains("leak_in_loop: early-after-attach")
            && text.contains("born in the first 10 % after the attach"),
        "{text}"
    );
    // The viewer's age panel names the class the same way.
    let html = heapsample_tests::heapdiff_ok(&["-f", "html", "-o", "-", dump_path]);
    let model_start = html
        .find(r#"<script id="model" type="application/json">"#)
        .expect("the model");
    let model = &html[model_start..];
    let model = &model[model.find('>').unwrap() + 1..model.find("</script>").unwrap()];
    let model: serde_json::Value = serde_json::from_str(model).expect("the model parses");
    let row = model["ages"]["functions"]
        .as_array()
        .expect("the age panel's functions")
        .iter()
        .find(|f| f["name"] == "leak_in_loop")
        .unwrap_or_else(|| panic!("leak_in_loop in the age panel"));
    assert_eq!(row["class"], "early-after-attach", "{row}");
}

/// The names of the process's threads.
fn thread_names(pid: &str) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .map(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect()
}

/// Interval dumps while attached need the profiler's dump thread; the
/// detach ends it, so the program is left with its own threads only.
#[test]
fn interval_dumps_while_attached_and_no_thread_left_after() {
    let program = compile_c("attach_leaker.c", &BuildOptions::no_pie());
    let out = TempDir::new("attach-interval");
    let dir = out.path().to_str().unwrap();
    let mut leaker = Driven::start(&program.path, &[], &[]);
    let pid = leaker.pid_arg();
    assert_eq!(leaker.send("leak 10"), "leaked 10");
    let before = thread_names(&pid);
    let options = ["--lg-sample", "14", "--conf", "lg_prof_interval:20"];
    heapsample_ok(&[&["attach", pid.as_str(), "-o", dir][..], &options[..]].concat());
    assert_eq!(leaker.send("leak 200"), "leaked 210");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while dump_files_in(out.path()).iter().all(|d| d.trigger != "i") {
        assert!(std::time::Instant::now() < deadline, "no interval dump");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(thread_names(&pid).contains(&"heapsample-dump".to_string()));
    heapsample_ok(&["detach", &pid]);
    assert_eq!(
        thread_names(&pid),
        before,
        "the detach leaves no thread behind"
    );
    assert!(leaker.send("end").starts_with("checksum "));
    assert!(leaker.finish().1.success());
}
