//! `heapdiff push` against real receivers in the test (a small HTTP/1.1
//! server on a real socket), no engine installed: what arrives is decoded
//! with the engines' own published definitions and tools, and checked
//! against the dumps of real programs.
//!
//! - Contract: the Pyroscope request (`/ingest`, `name=EXE{host,pid}`,
//!   `from`/`until`, `format=pprof`) carries a profile `go tool pprof`
//!   reads with Go's heap sample types, period type and the values
//!   `heapdiff --format text` shows; the OTLP request decodes with a
//!   decoder driven by the vendored opentelemetry-proto files (not by
//!   heapdiff's structs), names the process, and gives the same values per
//!   function and the thread attributes.
//! - 100 dumps of a real program, placed while the pusher runs, arrive
//!   exactly once at each receiver through a receiver down and up again and
//!   two restarts of the pusher.
//! - A refusing receiver (400) gets each request once, each refusal one
//!   line; a silent one is timed out, retried, and gets everything once
//!   when it answers.
//! - Dumps deleted (as thinning deletes them) after they were seen, while
//!   the receiver fails (503), still arrive.
//! - A queue past its bound drops its oldest requests, one line each, and
//!   sends the rest.
//! - A dump renamed or copied is the same dump: not sent again.

mod push_common;

use heapsample_tests::*;
use push_common::receiver::{Answer, Receiver};
use push_common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Fast polling and backoff for the tests.
const QUICK: [&str; 4] = ["--poll", "0.1", "--max-backoff", "0.5"];

/// Follow `dir`, send to `receiver` as both engines, each request bounded
/// by 10 s (1 s for the silent receiver).
fn args<'a>(dir: &'a str, receiver: &'a str, state: &'a str) -> Vec<&'a str> {
    timed_args(dir, receiver, state, "10")
}

fn timed_args<'a>(
    dir: &'a str,
    receiver: &'a str,
    state: &'a str,
    timeout: &'a str,
) -> Vec<&'a str> {
    let mut args = vec![
        dir,
        "--pyroscope",
        receiver,
        "--otlp",
        receiver,
        "--state",
        state,
    ];
    args.extend(QUICK);
    args.extend(["--timeout", timeout]);
    args
}

/// The dump times that arrived, taken, at each receiver (pyroscope, otlp),
/// counted.
fn arrived(receiver: &Receiver) -> (BTreeMap<u64, usize>, BTreeMap<u64, usize>) {
    let schema = otlp_schema();
    let mut pyroscope = BTreeMap::new();
    for arrival in receiver.taken("/ingest") {
        *pyroscope
            .entry(pprof_of(&arrival.body).time_nanos as u64)
            .or_default() += 1;
    }
    let mut otlp = BTreeMap::new();
    for arrival in receiver.taken(OTLP_PATH) {
        *otlp
            .entry(otlp_time(&otlp_of(&schema, &arrival)))
            .or_default() += 1;
    }
    (pyroscope, otlp)
}

fn every_line_is_heapdiffs(stderr: &str) {
    for line in stderr.lines() {
        assert!(
            line.starts_with("heapdiff: "),
            "a stray line: {line:?}\n{stderr}"
        );
    }
}

#[test]
fn a_hundred_dumps_arrive_once_each_through_restarts_of_receiver_and_pusher() {
    let (_source, files) = interval_dumps();
    assert!(files.len() >= 100, "{} dumps", files.len());
    let files = &files[..100];
    let expected: BTreeSet<u64> = files.iter().map(|f| dump_time(f)).collect();
    assert_eq!(expected.len(), 100, "each dump has its own moment");
    let followed = TempDir::new("push-followed");
    let state = TempDir::new("push-state");
    let log = state.path().join("../push-restarts.log");
    let dir = path_str(followed.path());
    let state_dir = path_str(state.path()).to_string() + "/state";
    let receiver = Receiver::start(Answer::Take);
    let url = receiver.url();
    let args = args(dir, &url, &state_dir);
    let both = |receiver: &Receiver, n: usize| {
        receiver.taken("/ingest").len() >= n && receiver.taken(OTLP_PATH).len() >= n
    };

    // A first quarter, sent while everything runs.
    let pusher = Pusher::start(&args, &log);
    for file in &files[..25] {
        place(file, followed.path());
    }
    wait_until("25 arrived", || both(&receiver, 25), || pusher.stderr());

    // The receiver goes down: the next quarter waits, the pusher says why,
    // and is stopped with it waiting.
    let (port, kept) = receiver.stop();
    for file in &files[25..50] {
        place(file, followed.path());
    }
    let refused =
        format!("heapdiff: push to http://127.0.0.1:{port}/ingest failed: cannot connect");
    wait_until(
        "the failure is told",
        || pusher.stderr().contains(&refused),
        || pusher.stderr(),
    );
    assert!(pusher.stop().success());

    // The receiver up again, a third quarter, the pusher restarted and
    // stopped again once it sent some of what waits.
    let receiver = Receiver::restart(port, kept, Answer::Take);
    for file in &files[50..75] {
        place(file, followed.path());
    }
    let pusher = Pusher::start(&args, &log);
    wait_until("more arrived", || both(&receiver, 30), || pusher.stderr());
    assert!(pusher.stop().success());

    // The last quarter, with a third pusher.
    for file in &files[75..] {
        place(file, followed.path());
    }
    let pusher = Pusher::start(&args, &log);
    wait_until("all arrived", || both(&receiver, 100), || pusher.stderr());
    // Ten more scans: nothing is sent again.
    std::thread::sleep(Duration::from_secs(1));
    let stderr = pusher.stderr();
    assert!(pusher.stop().success());
    let (pyroscope, otlp) = arrived(&receiver);
    for (name, times) in [("pyroscope", pyroscope), ("otlp", otlp)] {
        assert_eq!(
            times.keys().copied().collect::<BTreeSet<_>>(),
            expected,
            "{name}: every dump arrived"
        );
        let twice: Vec<_> = times.iter().filter(|(_, n)| **n != 1).collect();
        assert!(twice.is_empty(), "{name}: sent more than once: {twice:?}");
    }
    every_line_is_heapdiffs(&stderr);
}

#[test]
fn what_arrives_is_the_dumps_profile_as_go_pprof_and_the_otlp_definitions_read_it() {
    let program = compile_c("serve_growth.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_exact:true,prof_final:true")
        .run();
    outcome.assert_success();
    let (file, dump) = outcome.final_dump();
    let exit = path_str(&file.path);
    let state = TempDir::new("push-state");
    let receiver = Receiver::start(Answer::Take);
    let url = receiver.url();
    let state_dir = path_str(state.path()).to_string() + "/state";
    let mut with_header = args(exit, &url, &state_dir);
    with_header.extend(["--header", "X-Scope-OrgID: team-a"]);
    let (status, stderr) = push_once(&with_header);
    assert!(status.success(), "{stderr}");
    assert_eq!(stderr, "", "nothing to say when all went well");
    for arrival in receiver.arrivals() {
        assert_eq!(
            arrival.headers.get("x-scope-orgid").map(String::as_str),
            Some("team-a"),
            "the user's header on every request"
        );
    }

    // heapdiff's own view of the dump: in-use bytes per function.
    let text = heapdiff_ok(&["--format", "text", exit]);
    let self_bytes = |function: &str| -> i64 {
        text.lines()
            .find(|l| l.trim_end().ends_with(&format!("  {function}")))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{function} in heapdiff's text:\n{text}"))
    };
    let functions = ["grow_cache", "steady_table", "worker_alloc"];
    let truth: BTreeMap<&str, i64> = functions.iter().map(|f| (*f, self_bytes(f))).collect();
    assert_eq!(truth["grow_cache"], 8 << 20, "8 rounds of 16 × 64 KiB kept");

    // Pyroscope: the query names the process; go tool pprof reads the body.
    let pyroscope = receiver.taken("/ingest");
    assert_eq!(pyroscope.len(), 1);
    let request = &pyroscope[0];
    let host = &dump.context.hostname;
    assert!(!host.is_empty());
    let name = &request.query["name"];
    let labels = format!("serve_growth{{host={host},pid={}", dump.pid);
    assert!(name.starts_with(&labels) && name.ends_with('}'), "{name}");
    if let Some(container) = name
        .strip_prefix(&labels)
        .and_then(|r| r.strip_prefix(",container="))
    {
        let id = container.trim_end_matches('}');
        assert!(dump.context.cgroup.contains(id) && id.len() == 64, "{name}");
    }
    let second = (dump.time_unix_ns / 1_000_000_000).to_string();
    assert_eq!(request.query["from"], second);
    assert_eq!(request.query["until"], second);
    assert_eq!(request.query["format"], "pprof");
    let home = TempDir::new("push-pprof");
    let body = home.path().join("received.pb.gz");
    std::fs::write(&body, &request.body).unwrap();
    let Some(raw) = go_tool_pprof(&["-raw"], &body, home.path()) else {
        return;
    };
    assert!(raw.contains("PeriodType: space bytes"), "{raw}");
    assert!(raw.contains("Period: 1\n"), "lg_prof_sample:0: {raw}");
    assert!(
        raw.contains("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"),
        "Go's heap sample types in Go's order:\n{raw}"
    );
    let Some(top) = go_tool_pprof(
        &[
            "-top",
            "-sample_index=inuse_space",
            "-unit=byte",
            "-nodecount=50",
        ],
        &body,
        home.path(),
    ) else {
        return;
    };
    for function in functions {
        let flat = top
            .lines()
            .find(|l| l.split_whitespace().last() == Some(function))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("{function} in pprof's top:\n{top}"));
        assert_eq!(flat, format!("{}B", truth[function]), "{function}:\n{top}");
    }

    // OTLP: decoded by the .proto files.
    let otlp = receiver.taken(OTLP_PATH);
    assert_eq!(otlp.len(), 1);
    assert_eq!(otlp[0].content_type, "application/x-protobuf");
    let version = otlp[0].headers.get("otlp-profiles-development-version");
    assert_eq!(version.map(String::as_str), Some("1"));
    let request = otlp_of(&otlp_schema(), &otlp[0]);
    let dictionary = &request["dictionary"];
    let strings: Vec<&str> = dictionary["string_table"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(strings[0], "", "string_table[0] is empty");
    for table in [
        "mapping_table",
        "location_table",
        "function_table",
        "stack_table",
        "attribute_table",
    ] {
        assert_eq!(
            dictionary[table][0],
            serde_json::json!({}),
            "{table}[0] is the zero value"
        );
    }
    let resource: BTreeMap<&str, &serde_json::Value> = request["resource_profiles"][0]["resource"]
        ["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kv| (kv["key"].as_str().unwrap(), &kv["value"]))
        .collect();
    assert_eq!(resource["service.name"]["string_value"], "serve_growth");
    assert_eq!(resource["process.pid"]["int_value"], i64::from(dump.pid));
    assert_eq!(resource["host.name"]["string_value"], host.as_str());
    let profiles = otlp_profiles(&request);
    let string = |value: &serde_json::Value| strings[value.as_i64().unwrap_or(0) as usize];
    let types: Vec<String> = profiles
        .iter()
        .map(|p| {
            let t = &p["sample_type"];
            format!(
                "{}/{}",
                string(&t["type_strindex"]),
                string(&t["unit_strindex"])
            )
        })
        .collect();
    // Go's four heap types in Go's order, then heapdiff's temporary ones
    // (the dump carries lifetimes), as in its pprof output.
    assert_eq!(
        types,
        [
            "alloc_objects/count",
            "alloc_space/bytes",
            "inuse_objects/count",
            "inuse_space/bytes",
            "temp_objects/count",
            "temp_space/bytes"
        ]
    );
    let inuse = &profiles[3];
    assert_eq!(string(&inuse["period_type"]["type_strindex"]), "space");
    assert_eq!(string(&inuse["period_type"]["unit_strindex"]), "bytes");
    assert_eq!(inuse["period"], 1);
    assert_eq!(inuse["time_unix_nano"], dump.time_unix_ns);
    // In-use bytes by leaf function, and the thread of worker_alloc.
    let table = |name: &str, index: &serde_json::Value| -> serde_json::Value {
        dictionary[name][index.as_u64().unwrap_or(0) as usize].clone()
    };
    let mut by_leaf: BTreeMap<String, i64> = BTreeMap::new();
    let mut worker_threads = BTreeSet::new();
    for sample in inuse["samples"].as_array().unwrap() {
        let stack = table("stack_table", &sample["stack_index"]);
        let leaf = table("location_table", &stack["location_indices"][0]);
        let function = table("function_table", &leaf["lines"][0]["function_index"]);
        let leaf_name = string(&function["name_strindex"]).to_string();
        let value = sample["values"][0].as_i64().unwrap();
        if leaf_name == "worker_alloc" {
            for index in sample["attribute_indices"].as_array().unwrap() {
                let attribute = table("attribute_table", index);
                if string(&attribute["key_strindex"]) == "thread" {
                    worker_threads.insert(attribute["value"]["string_value"].to_string());
                }
            }
        }
        *by_leaf.entry(leaf_name).or_default() += value;
    }
    for function in functions {
        assert_eq!(
            by_leaf.get(function),
            Some(&truth[function]),
            "{function}: {by_leaf:?}"
        );
    }
    assert_eq!(worker_threads, BTreeSet::from(["\"worker\"".to_string()]));
}

#[test]
fn a_header_that_is_not_one_is_refused_in_one_line() {
    let dir = TempDir::new("push-header");
    let dir = path_str(dir.path());
    for header in ["no colon", ": value", "Bad Name: x", "X-Ok: bad\u{7f}value"] {
        let (status, stderr) =
            push_once(&[dir, "--pyroscope", "http://127.0.0.1:9", "--header", header]);
        assert_eq!(status.code(), Some(2), "{header:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{header:?}: {stderr}");
        assert!(
            stderr.starts_with("heapdiff: --header"),
            "{header:?}: {stderr}"
        );
    }
}

#[test]
fn a_refusing_receiver_is_told_once_and_a_silent_one_is_retried() {
    let (_source, files) = interval_dumps();
    let followed = TempDir::new("push-followed");
    for file in &files[..3] {
        place(file, followed.path());
    }
    let dir = path_str(followed.path());

    // Refused: each request once, each refusal one line, nothing waits.
    let receiver = Receiver::start(Answer::Refuse);
    let url = receiver.url();
    let state = TempDir::new("push-state");
    let state_dir = path_str(state.path()).to_string() + "/refused";
    let (status, stderr) = push_once(&args(dir, &url, &state_dir));
    assert!(status.success(), "nothing is left waiting: {stderr}");
    let refusals = stderr
        .lines()
        .filter(|l| {
            l.starts_with(&format!("heapdiff: push to {url}/"))
                && l.contains("failed: 400 Bad Request: profile not accepted;")
                && l.ends_with("dropped (a refusal is not retried)")
        })
        .count();
    assert_eq!(refusals, 6, "{stderr}");
    every_line_is_heapdiffs(&stderr);
    assert_eq!(receiver.arrivals().len(), 6);
    let (status, stderr) = push_once(&args(dir, &url, &state_dir));
    assert!(status.success() && stderr.is_empty(), "{stderr}");
    assert_eq!(
        receiver.arrivals().len(),
        6,
        "a refused profile is not sent again"
    );
    drop(receiver);

    // Silent: timed out, retried, delivered once it answers.
    let receiver = Receiver::start(Answer::Hang);
    let url = receiver.url();
    let state_dir = path_str(state.path()).to_string() + "/silent";
    let args = timed_args(dir, &url, &state_dir, "1");
    let pusher = Pusher::start(&args, &state.path().join("silent.log"));
    let line = format!("heapdiff: push to {url}/ingest failed: no answer within 1 s; retrying in");
    wait_until(
        "the timeout is told",
        || pusher.stderr().contains(&line),
        || pusher.stderr(),
    );
    receiver.answer(Answer::Take);
    let both = || receiver.taken("/ingest").len() >= 3 && receiver.taken(OTLP_PATH).len() >= 3;
    wait_until("all arrived", both, || pusher.stderr());
    std::thread::sleep(Duration::from_secs(1));
    assert!(pusher.stop().success());
    let expected: BTreeSet<u64> = files[..3].iter().map(|f| dump_time(f)).collect();
    let (pyroscope, otlp) = arrived(&receiver);
    for times in [pyroscope, otlp] {
        assert_eq!(times.keys().copied().collect::<BTreeSet<_>>(), expected);
        assert!(times.values().all(|&n| n == 1), "{times:?}");
    }
}

#[test]
fn dumps_deleted_after_they_were_seen_still_arrive() {
    let (_source, files) = interval_dumps();
    let followed = TempDir::new("push-followed");
    let state = TempDir::new("push-state");
    let receiver = Receiver::start(Answer::Fail);
    let url = receiver.url();
    let state_dir = path_str(state.path()).to_string() + "/state";
    let args = args(path_str(followed.path()), &url, &state_dir);
    let pusher = Pusher::start(&args, &state.path().join("deleted.log"));
    let placed: Vec<_> = files[..5]
        .iter()
        .map(|f| place(f, followed.path()))
        .collect();
    let queue = state.path().join("state/queue");
    let queued = || {
        std::fs::read_dir(&queue)
            .map(|d| {
                d.flatten()
                    .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                    .count()
            })
            .unwrap_or(0)
    };
    wait_until("10 requests wait", || queued() == 10, || pusher.stderr());
    let line =
        format!("heapdiff: push to {url}/ingest failed: 503 Service Unavailable; retrying in");
    wait_until(
        "the failure is told",
        || pusher.stderr().contains(&line),
        || pusher.stderr(),
    );
    // Thinned away before they were sent.
    for file in &placed {
        std::fs::remove_file(file).unwrap();
    }
    receiver.answer(Answer::Take);
    let both = || receiver.taken("/ingest").len() >= 5 && receiver.taken(OTLP_PATH).len() >= 5;
    wait_until("all arrived", both, || pusher.stderr());
    std::thread::sleep(Duration::from_millis(500));
    let stderr = pusher.stderr();
    assert!(pusher.stop().success());
    assert_eq!(queued(), 0, "nothing waits");
    let expected: BTreeSet<u64> = files[..5].iter().map(|f| dump_time(f)).collect();
    let (pyroscope, otlp) = arrived(&receiver);
    for times in [pyroscope, otlp] {
        assert_eq!(times.keys().copied().collect::<BTreeSet<_>>(), expected);
        assert!(times.values().all(|&n| n == 1), "{times:?}");
    }
    every_line_is_heapdiffs(&stderr);
}

#[test]
fn a_queue_past_its_bound_drops_the_oldest_with_a_line_each() {
    let (_source, files) = interval_dumps();
    let followed = TempDir::new("push-followed");
    for file in &files[..5] {
        place(file, followed.path());
    }
    let receiver = Receiver::start(Answer::Fail);
    let url = receiver.url();
    let state = TempDir::new("push-state");
    let state_dir = path_str(state.path()).to_string() + "/state";
    let mut args = args(path_str(followed.path()), &url, &state_dir);
    args.extend(["--max-queue", "4"]);
    // Five dumps, two requests each, four may wait: the three oldest dumps'
    // six requests are dropped, one line each; the receiver fails, so the
    // rest wait (exit 1).
    let (status, stderr) = push_once(&args);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let dropped = stderr
        .lines()
        .filter(|l| l.starts_with("heapdiff: push queue over its bound (4 requests, "))
        .count();
    assert_eq!(dropped, 6, "{stderr}");
    every_line_is_heapdiffs(&stderr);
    receiver.answer(Answer::Take);
    let (status, stderr) = push_once(&args);
    assert!(status.success(), "{stderr}");
    let expected: BTreeSet<u64> = files[3..5].iter().map(|f| dump_time(f)).collect();
    let (pyroscope, otlp) = arrived(&receiver);
    for times in [pyroscope, otlp] {
        assert_eq!(times.keys().copied().collect::<BTreeSet<_>>(), expected);
        assert!(times.values().all(|&n| n == 1), "{times:?}");
    }
}

#[test]
fn a_dump_renamed_or_copied_is_not_sent_again() {
    let (_source, files) = interval_dumps();
    let followed = TempDir::new("push-followed");
    let placed = place(&files[0], followed.path());
    let receiver = Receiver::start(Answer::Take);
    let url = receiver.url();
    let state = TempDir::new("push-state");
    let state_dir = path_str(state.path()).to_string() + "/state";
    let args = args(path_str(followed.path()), &url, &state_dir);
    let (status, stderr) = push_once(&args);
    assert!(status.success(), "{stderr}");
    assert_eq!(receiver.arrivals().len(), 2);
    // Brought home under another name (as from a container), and copied
    // into a subdirectory: the same dump.
    std::fs::rename(&placed, followed.path().join("renamed.prof")).unwrap();
    std::fs::create_dir(followed.path().join("copies")).unwrap();
    place(&files[0], &followed.path().join("copies"));
    let (status, stderr) = push_once(&args);
    assert!(status.success() && stderr.is_empty(), "{stderr}");
    assert_eq!(receiver.arrivals().len(), 2, "nothing sent again");
    // A new dump is.
    place(&files[1], followed.path());
    let (status, stderr) = push_once(&args);
    assert!(status.success(), "{stderr}");
    assert_eq!(receiver.arrivals().len(), 4);
}
