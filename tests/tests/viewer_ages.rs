//! The age of live memory in the viewer, in a real browser (Debian's
//! chromium through chromedriver), on the exit dump of
//! `tests/programs/time_sites.c` under the shim at `lg_prof_sample:0`
//! (format 4, births of every live object): a start-up table allocated
//! before the first tick and kept, a slow leak of a few objects every tick,
//! a cache that turns over, temporaries freed at once.
//!
//! - Per function, the bars drawn are `heapdiff ages -f json`'s slices of
//!   that function: the same count, each bar's value and 95 % interval
//!   equal to the report's (the page draws the pipeline's numbers), the
//!   interval in the bar's tooltip, the same class.
//! - The leak's live bytes spread over the run (at least half of the
//!   slices hold some; none holds half of them), the start-up table's sit
//!   in the first slice alone: 80 ticks make a run of at least 0.25 s, so
//!   the first of 8 slices lasts at least 31 ms, and the table is made
//!   a few ms after the start.
//! - `heapdiff serve` draws the same panel on the dump's page (checked
//!   against the report with the default settings).
//! - A format-3 dump (the format's golden file) shows the one line saying
//!   it carries no births, and no bars.
//!
//! - The growing panel of the served front page draws the leak's age bars
//!   of the last dump it measured, as `heapdiff ages -f json` of that dump.
//!
//! The page waits for elements, never for time.

mod browser_common;
mod serve_common;

use browser_common::*;
use fantoccini::Client;
use heapsample_tests::*;
use serde_json::Value;
use serve_common::*;
use std::path::Path;

const TICKS: &str = "80";

/// `heapdiff ARGS --allocator-frames ^make$ DUMP` (the program's one
/// allocation helper is an allocator frame, so each site is its own
/// allocating function).
fn heapdiff_sites(args: &[&str], dump: &Path) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--allocator-frames", "^make$", path_str(dump)]);
    heapdiff_ok(&all)
}

/// Per drawn function: its name, class and bars `[estimate, low, high,
/// tooltip]`.
const DRAWN: &str = "Array.from(document.querySelectorAll('#ages tr[data-name]')).map(tr => ({
    name: tr.dataset.name, class: tr.dataset.class,
    bars: Array.from(tr.querySelectorAll('rect.age-bar')).map(r =>
        [parseFloat(r.dataset.bytes), parseFloat(r.dataset.low), parseFloat(r.dataset.high),
         r.querySelector('title').textContent])}))";

fn triple(bound: &Value) -> [f64; 3] {
    ["estimate", "low", "high"].map(|k| bound[k].as_f64().expect("a number"))
}

/// Wait for the page's age bars; check that every function of `report`
/// (`heapdiff ages -f json`) is drawn with its class and its slices'
/// values and intervals, the interval in each bar's tooltip; the drawn
/// rows.
async fn drawn_as_reported(client: &Client, report: &Value) -> Vec<Value> {
    let slices = report["slices_ns"].as_array().unwrap().len();
    let functions = report["functions"].as_array().unwrap();
    assert!(!functions.is_empty(), "{report}");
    wait_for(
        client,
        &format!(
            "document.querySelectorAll('#ages tr[data-name]').length === {}",
            functions.len()
        ),
    )
    .await;
    assert_eq!(
        eval(client, "document.querySelector('#ages .ages-missing')").await,
        Value::Null,
        "a format-4 dump has births"
    );
    let drawn = eval(client, DRAWN).await;
    let drawn = drawn.as_array().unwrap().clone();
    assert_eq!(drawn.len(), functions.len(), "{drawn:?}");
    for function in functions {
        let name = function["name"].as_str().unwrap();
        let row = drawn
            .iter()
            .find(|d| d["name"] == function["name"])
            .unwrap_or_else(|| panic!("{name} not drawn: {drawn:?}"));
        assert_eq!(row["class"], function["class"], "{name}");
        let bars = row["bars"].as_array().unwrap();
        assert_eq!(bars.len(), slices, "{name}: {bars:?}");
        for (i, (bar, slice)) in bars
            .iter()
            .zip(function["slices"].as_array().unwrap())
            .enumerate()
        {
            let drawn = [0, 1, 2].map(|k| bar[k].as_f64().unwrap());
            assert_eq!(drawn, triple(&slice["bytes"]), "{name}, slice {i}");
            let tooltip = bar[3].as_str().unwrap();
            assert!(tooltip.contains("95 % ["), "{name}, slice {i}: {tooltip}");
        }
    }
    drawn
}

/// A leak's live bytes per birth slice spread over the run: at least half
/// of the slices hold some, none holds half of them.
fn assert_spread(bytes: &[f64]) {
    let total: f64 = bytes.iter().sum();
    let holding = bytes.iter().filter(|&&b| b > 0.0).count();
    assert!(
        2 * holding >= bytes.len() && bytes.iter().all(|&b| b < total / 2.0),
        "the leak's live bytes spread over the run: {bytes:?}"
    );
}

#[tokio::test]
async fn age_slices_per_function_are_the_age_reports() {
    let program = compile_c("time_sites.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .arg(TICKS)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let (file, _) = outcome.final_dump();
    let dir = outcome.dir.path();
    let page = dir.join("ages.html");
    heapdiff_sites(&["-f", "html", "-o", path_str(&page)], &file.path);
    let report: Value = serde_json::from_str(&heapdiff_sites(&["ages", "-f", "json"], &file.path))
        .expect("the age report's JSON");

    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    open_file(&client, &page).await;
    let drawn = drawn_as_reported(&client, &report).await;
    let bars_of = |name: &str| -> Vec<f64> {
        let row = drawn.iter().find(|d| d["name"] == name).unwrap();
        row["bars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b[0].as_f64().unwrap())
            .collect()
    };
    let leak = bars_of("site_leak");
    assert_spread(&leak);
    let startup = bars_of("site_startup");
    assert!(
        startup[0] > 0.0 && startup[1..].iter().all(|&b| b == 0.0),
        "the start-up table sits in the first slice: {startup:?}"
    );
    let class_of = |name: &str| drawn.iter().find(|d| d["name"] == name).unwrap()["class"].clone();
    assert_eq!(class_of("site_leak"), "accumulating");
    assert_eq!(class_of("site_startup"), "start-up");

    // Served: the same panel on the page of the dump, against the report
    // with the same (default) settings.
    let server = Server::start(&[dir]);
    let listing: Value = serde_json::from_str(&server.get("/api/dumps").1).unwrap();
    let id = listing["processes"][0]["dumps"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let report: Value =
        serde_json::from_str(&heapdiff_ok(&["ages", "-f", "json", path_str(&file.path)])).unwrap();
    client
        .goto(&format!("{}/view?dump={id}", server.url))
        .await
        .unwrap();
    drawn_as_reported(&client, &report).await;

    // A format-3 dump: the reason instead of the bars.
    let old = workspace_root().join("format/tests/golden/v3.dump");
    let old_page = dir.join("v3.html");
    heapdiff_ok(&["-f", "html", "-o", path_str(&old_page), path_str(&old)]);
    open_file(&client, &old_page).await;
    viewer_ready(&client).await;
    let reason = wait_for(
        &client,
        "document.querySelector('#ages .ages-missing') && document.querySelector('#ages .ages-missing').textContent",
    )
    .await;
    assert!(
        reason
            .as_str()
            .unwrap()
            .contains("which dump format 3 does not carry"),
        "{reason}"
    );
    assert_eq!(
        eval(
            &client,
            "document.querySelectorAll('#ages rect.age-bar').length"
        )
        .await,
        0
    );
    client.close().await.unwrap();
}

/// The growing panel of `heapdiff serve`'s front page, on the C++ service
/// of the browser tests (a leak of 40 sessions a round over 10 rounds,
/// dumped every round): the leak's row draws the age bars of the last dump
/// the panel measured, equal to `heapdiff ages -f json` of that dump, its
/// bytes spread over the run.
#[tokio::test]
async fn the_growing_panel_draws_the_leaks_age_bars() {
    let cpp = run_cpp_service();
    let dir = cpp.dir.path();
    let server = Server::start(&[dir]);
    let listing: Value = serde_json::from_str(&server.get("/api/dumps").1).unwrap();
    let key = listing["processes"][0]["key"].as_str().unwrap().to_string();
    let growth: Value =
        serde_json::from_str(&server.get(&format!("/api/growth?process={key}")).1).unwrap();
    let last = growth["dumps"].as_array().unwrap().last().unwrap();
    let last = dir.join(last.as_str().unwrap());
    let report: Value =
        serde_json::from_str(&heapdiff_ok(&["ages", "-f", "json", path_str(&last)])).unwrap();
    let leak = "Registry<…>::add";
    let reported = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == leak)
        .unwrap_or_else(|| panic!("{leak} not in {report}"));
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client.goto(&format!("{}/", server.url)).await.unwrap();
    let row = format!(
        "Array.from(document.querySelectorAll(\"section.process[data-key='{key}'] tr.grows\")).find(tr => tr.dataset.name === {leak:?})"
    );
    wait_for(
        &client,
        &format!("{row} && {row}.querySelectorAll('rect.age-bar').length > 0"),
    )
    .await;
    let bars = eval(
        &client,
        &format!(
            "Array.from({row}.querySelectorAll('rect.age-bar')).map(r => [parseFloat(r.dataset.bytes), parseFloat(r.dataset.low), parseFloat(r.dataset.high)])"
        ),
    )
    .await;
    let bars: Vec<[f64; 3]> = serde_json::from_value(bars).unwrap();
    let slices: Vec<[f64; 3]> = reported["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| triple(&s["bytes"]))
        .collect();
    assert_eq!(bars, slices, "{leak}: drawn and reported");
    assert_spread(&slices.iter().map(|s| s[0]).collect::<Vec<_>>());
    client.close().await.unwrap();
}
