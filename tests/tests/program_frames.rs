//! The program's frame of every ranked function, on real programs that
//! allocate through their runtimes (every allocation sampled,
//! `lg_prof_sample:0`):
//!
//! - `program_frames.cpp`: `svc::Ledger::record` leaks through `std::map`
//!   and `std::string`, `svc::Archive::keep` through `std::make_unique`,
//!   over 8 dumps and an exit dump that frees everything;
//! - `program_frames.rs`: `remember` leaks through `HashMap`/`Vec`,
//!   `hoard` through `String`/`Vec`;
//! - `program_frames.c`: `remember_line` leaks through glibc's `getline`
//!   (an inline wrapper of `__getdelim` from `<bits/stdio.h>`),
//!   `intern_name` through `strdup` (120 copies of 201 bytes: 24,120 bytes).
//!
//! Every view names the program frame (`leaks`, `ages`, `lifetimes`, `-f
//! text`, `-f json`, `--group program-frame`, the served growing panel);
//! `--not-mine` and `--all-mine` change it; and `heapdiff leaks`, its JSON
//! and the served growth report give the same candidates in the same order
//! on the same files, the exit dump left out of the trend with a line
//! saying what it freed; in Chromium, the front page's growing panel and
//! the viewer's age panel lead their rows with the program frame; the
//! front page's process summary is `heapdiff leaks`' on the same files,
//! line for line, and fits its section at 1024 px; the viewer's bottom-up
//! graph has the allocating functions at its root with their self values
//! of `-f json`, and grouped by program frame (the server's `--group
//! program-frame`) the program's functions with `-f json`'s program frames.

mod browser_common;
mod serve_common;

use browser_common::*;
use heapsample_tests::*;
use serde_json::Value;
use serve_common::*;
use std::path::{Path, PathBuf};

fn heapdiff(args: &[&str], dumps: &[PathBuf]) -> String {
    let outcome = Run::new(heapdiff_path()).args(args).args(dumps).run();
    assert!(outcome.status.success(), "{args:?}\n{}", outcome.context());
    outcome.stdout
}

fn json(args: &[&str], dumps: &[PathBuf]) -> Value {
    let text = heapdiff(args, dumps);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}\n{text}"))
}

/// Run `program` under the shim at `lg_prof_sample:0` with the exact
/// counters; its dumps, oldest first.
fn dumps_of(program: &Program) -> (Outcome, Vec<PathBuf>) {
    let outcome = Run::program(program)
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_exact:true")
        .run();
    outcome.assert_success();
    let mut dumps: Vec<PathBuf> = outcome.dump_files().into_iter().map(|f| f.path).collect();
    dumps.sort();
    assert!(!dumps.is_empty());
    (outcome, dumps)
}

/// `(name, program_frame)` of each leak candidate of a `leaks -f json`.
fn candidates(report: &Value) -> Vec<(String, Option<String>)> {
    report["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["program_frame"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// The `(program frame, self)` rows of a `-f json` report's metric.
fn program_frames(report: &Value, metric: &str) -> Vec<(String, f64)> {
    report["metrics"][metric]["program_frames"]
        .as_array()
        .expect("program_frames")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["self"]["estimate"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The last column of the rows of `heapdiff leaks`' text table.
fn text_candidates(text: &str) -> Vec<String> {
    let table = text
        .split("\n\n")
        .find(|s| s.contains("program frame ← via allocating function"))
        .unwrap_or_else(|| panic!("no candidate table in\n{text}"));
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // rate, interval, class, trend, then the name (with spaces); a
            // candidate's caveat (weak evidence) follows it on a line of its own.
            fields.first()?.parse::<f64>().ok()?;
            Some(fields[4..].join(" "))
        })
        .collect()
}

fn led(name: &str, program: &Option<String>) -> String {
    match program {
        Some(p) if p != name => format!("{p} ← via {name}"),
        _ => name.to_string(),
    }
}

const RECORD: &str = "svc::Ledger::record";
const KEEP: &str = "svc::Archive::keep";

#[test]
fn cxx_leaks_through_std_are_named_by_the_program_everywhere() {
    let program = compile_cxx("program_frames.cpp", &BuildOptions::pie());
    let (_outcome, dumps) = dumps_of(&program);
    assert_eq!(dumps.len(), 9, "8 rounds and the exit dump: {dumps:?}");
    let exit = dumps.last().unwrap().clone();
    assert!(exit.to_str().unwrap().ends_with(".f.prof"), "{exit:?}");
    let last_running = dumps[dumps.len() - 2].clone();

    // leaks: the exit dump left out, the leak found, led by its program frame.
    let report = json(&["leaks", "-f", "json"], &dumps);
    let rows = candidates(&report);
    assert!(rows.len() >= 3, "{rows:?}");
    for (name, program) in &rows[..3] {
        assert!(name.starts_with("std::"), "{name}");
        let program = program.as_deref().unwrap_or_default();
        assert!(program == RECORD || program == KEEP, "{name}: {program}");
    }
    let programs: Vec<&str> = rows.iter().filter_map(|r| r.1.as_deref()).collect();
    assert!(
        programs.contains(&RECORD) && programs.contains(&KEEP),
        "{rows:?}"
    );
    let left_out = &report["exit_dump_left_out"];
    assert!(
        left_out["dump"].as_str().unwrap().ends_with(".f.prof"),
        "{left_out}"
    );
    assert!(
        left_out["freed_bytes"].as_f64().unwrap() > 1e6,
        "{left_out}"
    );
    // The process summary: the peak and the dump nearest to it, the live
    // heap before exit and at exit (exact), the top leak by program frame.
    let summary = &report["process_summary"];
    let peak = report["peak"]["live_usable_bytes"].as_f64().unwrap();
    let nearest = summary["nearest_live_bytes"].as_f64().unwrap();
    assert!(nearest <= peak, "{summary}");
    assert_eq!(summary["missed_bytes"].as_f64().unwrap(), peak - nearest);
    let before = &summary["live_before_exit"];
    let at_exit = &summary["live_at_exit"];
    assert_eq!(before["exact"], true, "{summary}");
    assert!(
        before["dump"].as_str().unwrap().ends_with(".m7.prof"),
        "{summary}"
    );
    assert!(
        at_exit["dump"].as_str().unwrap().ends_with(".f.prof"),
        "{summary}"
    );
    assert!(
        before["bytes"].as_f64().unwrap() > at_exit["bytes"].as_f64().unwrap() + 1e6,
        "{summary}"
    );
    assert_eq!(summary["top_leak"].as_str(), Some(rows[0].0.as_str()));
    assert_eq!(
        summary["top_leak_program_frame"].as_str(),
        rows[0].1.as_deref()
    );
    let text = heapdiff(&["leaks"], &dumps);
    assert!(text.contains("left out of the trend: it freed"), "{text}");
    assert!(text.contains("process: top leak candidate svc::"), "{text}");
    assert!(text.contains("process: exact peak "), "{text}");
    let led_rows: Vec<String> = rows.iter().map(|(n, p)| led(n, p)).collect();
    assert_eq!(
        text_candidates(&text),
        led_rows,
        "text and json disagree\n{text}"
    );
    assert!(text_candidates(&text)[0].starts_with("svc::"), "{text}");

    // The same files served: the growth report's candidates and panel rows.
    let dir = TempDir::new("program-frames-serve");
    for dump in &dumps {
        std::fs::copy(dump, dir.path().join(dump.file_name().unwrap())).unwrap();
    }
    let server = Server::start(&[dir.path()]);
    let listing: Value = serde_json::from_str(&server.get("/api/dumps").1).unwrap();
    let key = listing["processes"][0]["key"].as_str().unwrap().to_string();
    let (status, body) = server.get(&format!("/api/growth?process={key}"));
    assert_eq!(status, 200, "{body}");
    let growth: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(growth["without_exit_dump"], true, "{growth}");
    assert_eq!(
        candidates(&growth),
        rows,
        "served and command line disagree"
    );
    let panel: Vec<(String, Option<String>)> = growth["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["label"].as_str().unwrap().to_string(),
                f["program_frame"].as_str().map(str::to_string),
            )
        })
        .collect();
    let in_candidates: Vec<(String, Option<String>)> = rows
        .iter()
        .filter(|r| panel.iter().any(|p| p.0 == r.0))
        .cloned()
        .collect();
    assert_eq!(panel, in_candidates, "the panel's order is the candidates'");
    assert!(panel.len() >= 3, "{panel:?}");

    // ages and lifetimes name it too.
    let ages = json(&["ages", "-f", "json"], std::slice::from_ref(&last_running));
    let named: Vec<&str> = ages["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"].as_str().unwrap().starts_with("std::"))
        .filter_map(|f| f["program_frame"].as_str())
        .collect();
    assert!(
        named.contains(&RECORD) && named.contains(&KEEP),
        "{named:?}"
    );
    let lifetimes = json(&["lifetimes", "-f", "json"], std::slice::from_ref(&exit));
    let freed: Vec<&str> = lifetimes["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["program_frame"].as_str())
        .collect();
    assert!(
        freed.contains(&RECORD) && freed.contains(&KEEP),
        "{freed:?}"
    );

    // -f json: each function and the grouping; -f text's table.
    let report = json(&["-f", "json"], std::slice::from_ref(&last_running));
    let make_unique = report["metrics"]["inuse-space"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"].as_str().unwrap().starts_with("std::make_unique"))
        .expect("std::make_unique allocates");
    assert_eq!(make_unique["program_frame"], KEEP);
    let grouped = program_frames(&report, "inuse-space");
    let top: Vec<&str> = grouped.iter().take(2).map(|(n, _)| n.as_str()).collect();
    assert!(top.contains(&RECORD) && top.contains(&KEEP), "{grouped:?}");
    let text = heapdiff(&["-f", "text"], std::slice::from_ref(&last_running));
    assert!(text.contains(&format!("{RECORD} ← via std::")), "{text}");
    let text = heapdiff(
        &["-f", "text", "--group", "program-frame"],
        std::slice::from_ref(&last_running),
    );
    let first_table = text.split("\n\n").nth(1).unwrap();
    let leaders: Vec<&str> = first_table
        .lines()
        .skip(2)
        .take(2)
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert!(
        leaders.contains(&RECORD) && leaders.contains(&KEEP),
        "{first_table}"
    );

    // The rule overridden: record is not mine (main is), or all is mine.
    let report = json(
        &["leaks", "-f", "json", "--not-mine", "svc::Ledger::"],
        &dumps,
    );
    let programs: Vec<Option<String>> = candidates(&report).into_iter().map(|r| r.1).collect();
    assert!(programs.contains(&Some("main".into())), "{programs:?}");
    assert!(!programs.contains(&Some(RECORD.into())), "{programs:?}");
    let report = json(&["leaks", "-f", "json", "--all-mine"], &dumps);
    for (name, program) in candidates(&report) {
        assert_eq!(program.as_deref(), Some(name.as_str()));
    }
}

/// On one dump: the default leak candidates are led by one of `expected`
/// (one row per allocating function, named with the program frame that
/// carries most of it: two program functions reaching one `Vec` function
/// share its row), every one of `expected` leads its own row when grouped
/// by program frame, and the text and json reports name each.
fn single_dump_checks(dump: &Path, expected: &[&str], leaf_prefix: &str) -> Value {
    let dumps = [dump.to_path_buf()];
    let report = json(&["leaks", "-f", "json"], &dumps);
    let rows = candidates(&report);
    let (leaf, program) = rows.first().unwrap_or_else(|| panic!("no candidate"));
    assert!(leaf.starts_with(leaf_prefix), "{rows:?}");
    assert!(
        expected.contains(&program.as_deref().unwrap_or_default()),
        "{rows:?}"
    );
    let text = heapdiff(&["leaks"], &dumps);
    let led_rows: Vec<String> = rows.iter().map(|(n, p)| led(n, p)).collect();
    assert_eq!(text_candidates(&text), led_rows, "{text}");
    let grouped = json(&["leaks", "-f", "json", "--group", "program-frame"], &dumps);
    let grouped: Vec<String> = candidates(&grouped).into_iter().map(|r| r.0).collect();
    for want in expected {
        assert!(
            grouped.iter().take(expected.len()).any(|g| g == want),
            "{want} does not lead {grouped:?}"
        );
    }
    let ages = json(&["ages", "-f", "json"], &dumps);
    let named: Vec<&str> = ages["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["program_frame"].as_str())
        .collect();
    assert!(
        expected.iter().any(|want| named.contains(want)),
        "ages: {named:?}"
    );
    let text = heapdiff(&["-f", "text"], &dumps);
    for want in expected {
        assert!(text.contains(&format!("{want} ← via ")), "{text}");
    }
    let report = json(&["-f", "json"], &dumps);
    let grouped = program_frames(&report, "inuse-space");
    for want in expected {
        assert!(
            grouped.iter().any(|(n, _)| n == want),
            "{want}: {grouped:?}"
        );
    }
    report
}

#[test]
fn c_leaks_through_the_c_library_are_named_by_the_program() {
    let program = compile_c("program_frames.c", &BuildOptions::no_pie());
    let (outcome, dumps) = dumps_of(&program);
    assert!(outcome.stdout.contains("names 120"), "{}", outcome.stdout);
    let report = single_dump_checks(&dumps[0], &["remember_line", "intern_name"], "__GI___");
    // strdup's copies: 120 of 201 bytes, exactly (every allocation sampled).
    let grouped = program_frames(&report, "inuse-space");
    let interned = grouped.iter().find(|(n, _)| n == "intern_name").unwrap();
    assert_eq!(interned.1, 120.0 * 201.0, "{grouped:?}");
    // Overridden: intern_name is not mine, main called strdup's caller.
    let report = json(&["-f", "json", "--not-mine", "intern_"], &dumps);
    let grouped = program_frames(&report, "inuse-space");
    assert!(
        !grouped.iter().any(|(n, _)| n == "intern_name"),
        "{grouped:?}"
    );
    let main = grouped.iter().find(|(n, _)| n == "main").unwrap();
    assert!(main.1 >= 120.0 * 201.0, "{grouped:?}");
}

#[test]
fn rust_leaks_through_vec_and_hashmap_are_named_by_the_program() {
    let program = compile_rust("program_frames.rs");
    let (outcome, dumps) = dumps_of(&program);
    assert!(outcome.stdout.contains("entries 120"), "{}", outcome.stdout);
    single_dump_checks(
        &dumps[0],
        &["program_frames::remember", "program_frames::hoard"],
        "alloc::",
    );
    // All mine: the leaf is its own program frame.
    let report = json(&["leaks", "-f", "json", "--all-mine"], &dumps);
    for (name, program) in candidates(&report) {
        assert_eq!(program.as_deref(), Some(name.as_str()));
    }
}

/// In Chromium: the growing panel of the front page and the age panel of
/// the viewer lead the C++ program's rows with its own functions, in the
/// order of `heapdiff leaks` (the panel) and of `heapdiff ages` (the ages).
#[tokio::test]
async fn the_viewer_leads_with_the_program_frame() {
    let program = compile_cxx("program_frames.cpp", &BuildOptions::pie());
    let (outcome, dumps) = dumps_of(&program);
    let last_running = dumps[dumps.len() - 2].clone();
    let leaks = candidates(&json(&["leaks", "-f", "json"], &dumps));
    let ages = json(&["ages", "-f", "json"], std::slice::from_ref(&last_running));
    let server = Server::start(&[outcome.dir.path()]);
    let listing: Value = serde_json::from_str(&server.get("/api/dumps").1).unwrap();
    let key = listing["processes"][0]["key"].as_str().unwrap().to_string();
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client.goto(&format!("{}/", server.url)).await.unwrap();
    let rows = format!(
        "Array.from(document.querySelectorAll(\"section.process[data-key='{key}'] tr.grows\"))"
    );
    wait_for(&client, &format!("{rows}.length > 0")).await;
    let drawn = eval(
        &client,
        &format!("{rows}.map(tr => [tr.dataset.name, tr.dataset.program || null, tr.querySelector('td.name').textContent])"),
    )
    .await;
    let drawn: Vec<(String, Option<String>, String)> = serde_json::from_value(drawn).unwrap();
    let expected: Vec<(String, Option<String>)> = leaks
        .iter()
        .filter(|c| drawn.iter().any(|d| d.0 == c.0))
        .cloned()
        .collect();
    let got: Vec<(String, Option<String>)> =
        drawn.iter().map(|d| (d.0.clone(), d.1.clone())).collect();
    assert_eq!(got, expected, "the panel against heapdiff leaks");
    assert!(drawn.len() >= 3, "{drawn:?}");
    for (name, program, text) in &drawn {
        assert_eq!(
            text,
            &led(name, program),
            "the row leads with the program frame"
        );
    }
    assert!(drawn[0].2.starts_with("svc::"), "{drawn:?}");

    let id = last_running.file_name().unwrap().to_str().unwrap();
    client
        .goto(&format!("{}/view?dump={id}", server.url))
        .await
        .unwrap();
    let rows = "Array.from(document.querySelectorAll('#ages tr[data-name]'))";
    wait_for(&client, &format!("{rows}.length > 0")).await;
    let drawn = eval(
        &client,
        &format!("{rows}.map(tr => [tr.dataset.name, tr.dataset.program || null, tr.querySelector('td.name').textContent])"),
    )
    .await;
    let drawn: Vec<(String, Option<String>, String)> = serde_json::from_value(drawn).unwrap();
    let reported: Vec<(String, Option<String>)> = ages["functions"]
        .as_array()
        .unwrap()
        .iter()
        .take(drawn.len())
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["program_frame"].as_str().map(str::to_string),
            )
        })
        .collect();
    let got: Vec<(String, Option<String>)> =
        drawn.iter().map(|d| (d.0.clone(), d.1.clone())).collect();
    assert_eq!(got, reported, "the age panel against heapdiff ages");
    for (name, program, text) in &drawn {
        assert_eq!(text, &led(name, program));
    }
    let programs: Vec<&str> = drawn.iter().filter_map(|d| d.1.as_deref()).collect();
    assert!(
        programs.contains(&RECORD) && programs.contains(&KEEP),
        "{drawn:?}"
    );
    client.close().await.unwrap();
}

/// The `process: ` lines of `heapdiff leaks`' text, dump paths named as
/// the server names them (relative to `dir`).
fn summary_lines(text: &str, dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    text.lines()
        .filter(|l| l.starts_with("process: "))
        .map(|l| l.replace(&prefix, ""))
        .collect()
}

/// The json summary with its dump paths named as the server names them.
fn served_names(mut summary: Value, dir: &Path) -> Value {
    let prefix = format!("{}/", dir.display());
    for key in ["live_before_exit", "live_at_exit"] {
        if let Some(dump) = summary[key]["dump"].as_str() {
            summary[key]["dump"] = Value::from(dump.replace(&prefix, ""));
        }
    }
    summary
}

#[tokio::test]
async fn the_front_page_summary_is_the_summary_of_heapdiff_leaks() {
    let program = compile_cxx("program_frames.cpp", &BuildOptions::pie());
    let (outcome, dumps) = dumps_of(&program);
    let dir = outcome.dir.path();
    let expected = summary_lines(&heapdiff(&["leaks"], &dumps), dir);
    // The whole story: the peak, before exit, at exit, the top leak.
    assert_eq!(expected.len(), 4, "{expected:?}");
    assert!(
        expected[0].starts_with("process: exact peak "),
        "{expected:?}"
    );
    assert!(
        expected[3].starts_with(&format!("process: top leak candidate {RECORD}"))
            || expected[3].starts_with(&format!("process: top leak candidate {KEEP}")),
        "{expected:?}"
    );
    let json_summary = served_names(
        json(&["leaks", "-f", "json"], &dumps)["process_summary"].clone(),
        dir,
    );

    let server = Server::start(&[dir]);
    let listing: Value = serde_json::from_str(&server.get("/api/dumps").1).unwrap();
    let key = listing["processes"][0]["key"].as_str().unwrap().to_string();
    let (status, body) = server.get(&format!("/api/growth?process={key}"));
    assert_eq!(status, 200, "{body}");
    let growth: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(growth["process_summary"], json_summary, "served json");
    assert_eq!(growth["summary_lines"], serde_json::json!(expected));

    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client.set_window_size(1024, 1000).await.expect("resize");
    client.goto(&format!("{}/", server.url)).await.unwrap();
    let lines = format!(
        "Array.from(document.querySelectorAll(\"section.process[data-key='{key}'] .process-summary p\"))"
    );
    wait_for(&client, &format!("{lines}.length > 0")).await;
    let drawn = eval(&client, &format!("{lines}.map(p => p.textContent)")).await;
    assert_eq!(
        drawn,
        serde_json::json!(expected),
        "the front page's summary"
    );
    // Above the timeline, whole, inside its section at 1024 px.
    let placed = eval(
        &client,
        &format!(
            "(() => {{ const s = document.querySelector(\"section.process[data-key='{key}']\");
               const box = s.querySelector('.process-summary'), chart = s.querySelector('svg.timeline');
               const limit = Math.min(s.getBoundingClientRect().right, document.documentElement.clientWidth) + 1;
               return [box.getBoundingClientRect().bottom <= chart.getBoundingClientRect().top,
                       {lines}.filter(p => p.getBoundingClientRect().right > limit || p.scrollWidth > p.clientWidth + 1).length,
                       document.documentElement.scrollWidth]; }})()"
        ),
    )
    .await;
    assert_eq!(placed[0], true, "the summary sits above the timeline");
    assert_eq!(placed[1], 0, "summary lines past their section at 1024 px");
    assert!(placed[2].as_u64().unwrap() <= 1024, "{placed}");
    client.close().await.unwrap();
}

/// `(name, self)` of a `-f json` report's functions that allocated, largest
/// first.
fn allocating(report: &Value) -> Vec<(String, f64)> {
    let mut rows: Vec<(String, f64)> = report["metrics"]["inuse-space"]["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["self"]["estimate"].as_f64().unwrap(),
            )
        })
        .filter(|(_, value)| *value > 0.0)
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    rows
}

/// The viewer's root frames, widest first, as `(label, value)`.
async fn root_frames(client: &fantoccini::Client) -> Vec<(String, f64)> {
    serde_json::from_value(eval(client, "heapdiffViewer.rootFrames()").await).unwrap()
}

/// The first `n` rows of `got` and `expected` name the same functions
/// with the same values (to the byte: both sum the same stacks).
fn assert_same_top(got: &[(String, f64)], expected: &[(String, f64)], n: usize, what: &str) {
    assert!(
        got.len() >= n && expected.len() >= n,
        "{what}: {got:?}\n{expected:?}"
    );
    for (g, e) in got.iter().zip(expected).take(n) {
        assert_eq!(g.0, e.0, "{what}: {got:?}\n{expected:?}");
        assert!((g.1 - e.1).abs() <= 1.0, "{what}: {g:?} against {e:?}");
    }
}

#[tokio::test]
async fn bottom_up_and_by_program_frame_agree_with_the_command_line() {
    let program = compile_cxx("program_frames.cpp", &BuildOptions::pie());
    let (outcome, dumps) = dumps_of(&program);
    let last_running = dumps[dumps.len() - 2].clone();
    let report = json(&["-f", "json"], std::slice::from_ref(&last_running));
    let functions = allocating(&report);
    let grouped = program_frames(&report, "inuse-space");
    let server = Server::start(&[outcome.dir.path()]);
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    let id = last_running.file_name().unwrap().to_str().unwrap();
    client
        .goto(&format!("{}/view?dump={id}", server.url))
        .await
        .unwrap();
    viewer_ready(&client).await;
    assert_eq!(
        eval(
            &client,
            "document.getElementById('metric').selectedOptions[0].textContent"
        )
        .await,
        "inuse-space"
    );
    let top_down = root_frames(&client).await;
    // Top-down, the roots are where threads start (`_start`), never an
    // allocating function.
    assert!(
        top_down.iter().any(|(name, _)| name == "_start")
            && !top_down.iter().any(|(name, _)| name == &functions[0].0),
        "{top_down:?}"
    );

    // Bottom-up: the allocating functions at the root, each with its self
    // value; the C++ program allocates through std, never by itself.
    click(&client, "#bottom-up").await;
    wait_for(&client, "heapdiffViewer.state.bottomUp === true").await;
    let bottom_up = root_frames(&client).await;
    assert_same_top(
        &bottom_up,
        &functions,
        3,
        "bottom-up roots against -f json's self",
    );
    assert!(
        bottom_up.iter().all(|(name, _)| !name.starts_with("svc::")),
        "{bottom_up:?}"
    );

    // Grouped by program frame, bottom-up: the program's functions at the
    // root with -f json's program-frame values, the view kept.
    click(&client, "#group-program").await;
    wait_for(&client, "location.search.includes('group=program-frame')").await;
    viewer_ready(&client).await;
    wait_for(&client, "heapdiffViewer.state.bottomUp === true").await;
    assert_eq!(
        eval(&client, "document.getElementById('group-program').checked").await,
        true
    );
    let by_program = root_frames(&client).await;
    assert_same_top(
        &by_program,
        &grouped,
        2,
        "grouped roots against -f json's program frames",
    );
    let top: Vec<&str> = by_program.iter().take(2).map(|(n, _)| n.as_str()).collect();
    assert!(
        top.contains(&RECORD) && top.contains(&KEEP),
        "{by_program:?}"
    );
    let (status, _) = server.get(&format!("/view?dump={id}&group=other"));
    assert_eq!(status, 400, "an unknown grouping is refused");
    client.close().await.unwrap();
}

/// `-f text` and `-f json` keep two instantiations of one template apart
/// as the viewer does (`Cache<int>::fill` keeps 512 KiB, `Cache<double>::fill`
/// 1 MiB in `viewer_service.cpp`, blocks sampled on every run at lg 14),
/// and label every other function by its short name.
#[test]
fn text_keeps_template_instantiations_apart() {
    let outcome = run_cpp_service();
    let mut dumps: Vec<PathBuf> = outcome.dump_files().into_iter().map(|f| f.path).collect();
    dumps.sort();
    let last = [dumps.last().unwrap().clone()];
    let text = heapdiff(&["-f", "text"], &last);
    let self_table = text.split("\n\n").nth(1).unwrap();
    let self_of = |name: &str| -> f64 {
        let line = self_table
            .lines()
            .find(|l| l.trim_end().ends_with(&format!("  {name}")))
            .unwrap_or_else(|| panic!("{name} not in\n{self_table}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(
        self_of("Cache<int>::fill") >= 512.0 * 1024.0,
        "{self_table}"
    );
    assert!(
        self_of("Cache<double>::fill") >= 1024.0 * 1024.0,
        "{self_table}"
    );
    assert!(!self_table.contains("Cache<…>::fill"), "{self_table}");
    assert!(self_table.contains("Registry<…>::add"), "{self_table}");
    let report = json(&["-f", "json"], &last);
    let names: Vec<&str> = report["metrics"]["inuse-space"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"Cache<int>::fill") && names.contains(&"Cache<double>::fill"),
        "{names:?}"
    );
}
