//! The time views of `heapdiff serve` in a real browser (Debian's chromium
//! through chromedriver), on the dumps of the C++ service of the viewer
//! tests (`viewer_service.cpp`: a start-up table per template
//! instantiation, 40 sessions of 4 KiB leaked a round, 256 blocks of
//! 2 KiB allocated and freed at once a round, a 24 MiB peak), run under
//! the shim whose dumps carry births and lifetimes (format 4):
//!
//! - the growing panel classifies the leak as accumulating (from the
//!   births of its live memory in the last dump);
//! - the exact peak (counted between dumps) is at least the program's
//!   24 MiB and every dump's exact live heap, and is marked on the
//!   timeline with the dump nearest to it;
//! - a range dragged on the timeline, with "what it allocated that is
//!   still live" chosen, opens the memory allocated between its ends and
//!   still live at its end: the leak of those rounds and nothing of the
//!   start-up tables, as `heapdiff --born-after` says and near the
//!   program's truth;
//! - a dump's "temporary allocations" link opens the flame graph of
//!   temporary space: the churn first, as `heapdiff -m temp-space` says
//!   and near the program's truth; its "lifetimes" link the lifetimes
//!   page: the churn all temporary, the peak's 24 MiB freed after its
//!   20 ms, as `heapdiff lifetimes` says;
//! - time views a dump cannot answer are refused with one line.

mod browser_common;
mod serve_common;

use browser_common::*;
use fantoccini::Client;
use heapsample_tests::*;
use serde_json::{Value, json};
use serve_common::*;
use std::path::Path;

/// The self value of the table's row `name` (None: no such row).
async fn self_of(client: &Client, name: &str) -> Option<f64> {
    let value = eval(
        client,
        &format!(
            "(() => {{ const tr = Array.from(document.querySelectorAll('#functions tbody tr')).find(tr => tr.querySelector('td.name').textContent === {name:?});
                return tr ? parseFloat(tr.querySelector('td.self').dataset.value) : null; }})()"
        ),
    )
    .await;
    value.as_f64()
}

/// `heapdiff --format json ARGS` of `dump`: function `name`'s self value
/// in `metric`.
fn cli_self(dump: &Path, args: &[&str], metric: &str, name: &str) -> f64 {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    all.push(dump.to_str().unwrap());
    let report: Value = serde_json::from_str(&heapdiff_ok(&all)).unwrap();
    report["metrics"][metric]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == json!(name))
        .map_or(0.0, |f| f["self"]["estimate"].as_f64().unwrap())
}

#[tokio::test]
async fn ranges_temporaries_and_classes_on_a_cpp_service() {
    let cpp = run_cpp_service();
    let dir = cpp.dir.path();
    let names = prof_names(&cpp);
    let manual = |n: u32| {
        names
            .iter()
            .find(|x| x.ends_with(&format!(".m{n}.prof")))
            .unwrap()
            .clone()
    };
    let server = Server::start(&[dir]);
    let listing: Value = serde_json::from_str(&server.get("/api/dumps").1).unwrap();
    let rows = listing["processes"][0]["dumps"].as_array().unwrap().clone();
    assert!(
        rows.iter()
            .all(|d| d["births"] == json!(true) && d["lifetimes"] == json!(true)),
        "every dump carries births and lifetimes: {rows:?}"
    );
    let since_start = |id: &str| {
        rows.iter().find(|d| d["id"] == json!(id)).unwrap()["since_start_ns"]
            .as_u64()
            .unwrap()
    };
    // Manual dumps: m0..m3 end rounds 0..3, m4 is the peak inside round
    // 4, m5..m10 end rounds 4..9.
    let (start, end) = (manual(1), manual(10));
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client.goto(&format!("{}/", server.url)).await.unwrap();
    let key = wait_for(
        &client,
        "document.querySelector('section.process') && document.querySelector('section.process').dataset.key",
    )
    .await;
    let key = key.as_str().unwrap().to_string();
    let section = format!("section.process[data-key='{key}']");

    // The leak, classified from the births of its live memory.
    let class = wait_for(
        &client,
        &format!("(Array.from(document.querySelectorAll(\"{section} tr.grows\")).find(tr => tr.dataset.name === 'Registry<…>::add') || {{querySelector: () => null}}).querySelector('td.kind') && Array.from(document.querySelectorAll(\"{section} tr.grows\")).find(tr => tr.dataset.name === 'Registry<…>::add').querySelector('td.kind').dataset.class"),
    )
    .await;
    assert_eq!(class, json!("accumulating"));

    // The exact peak, counted between dumps: at least the program's 24 MiB
    // and every dump's exact live heap, marked on the timeline, and one
    // click from the dump nearest to it (the one written at the top of the
    // peak, or the high-water dump right after it).
    let peak = &listing["processes"][0]["exact_peak"];
    let peak_bytes = peak["bytes"].as_f64().expect("an exact peak");
    let highest_dump = rows
        .iter()
        .filter_map(|d| d["live_exact"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        peak_bytes >= truth(&cpp, "peak") && peak_bytes >= highest_dump,
        "{peak}"
    );
    let nearest = peak["nearest"].as_str().unwrap();
    assert!(
        nearest.ends_with(".m4.prof") || nearest.contains(".u"),
        "{nearest}"
    );
    wait_for(
        &client,
        &format!("document.querySelector(\"{section} svg.timeline .exact-peak-mark\").dataset.nearest === {nearest:?}"),
    )
    .await;

    // A range: what rounds 2..9 allocated that is still live at m10.
    click(&client, &format!("{section} input.range-born")).await;
    let event = |id: &str, kind: &str| {
        format!(
            "(() => {{ const p = heapdiffIndex.pointOf({key:?}, {id:?});
                const svg = document.querySelector(\"{section} svg.timeline\");
                svg.dispatchEvent(new MouseEvent({kind:?}, {{clientX: p.x, clientY: p.y, bubbles: true}}));
                return true; }})()"
        )
    };
    eval(&client, &event(&start, "mousedown")).await;
    eval(&client, &event(&end, "mousemove")).await;
    eval(&client, &event(&end, "mouseup")).await;
    viewer_ready(&client).await;
    let opened = url(&client).await;
    assert!(
        opened.contains(&format!("dump={end}")) && opened.contains(&format!("born_since={start}")),
        "{opened}"
    );
    let title = eval(&client, "document.title").await;
    assert!(title.as_str().unwrap().contains("still live"), "{title}");
    let leaked = self_of(&client, "Registry<…>::add")
        .await
        .expect("the leak in the range");
    let born_after = format!("{}ns", since_start(&start));
    let cli = cli_self(
        &dir.join(&end),
        &["--born-after", &born_after],
        "inuse-space",
        "Registry<…>::add",
    );
    assert!(
        (leaked - cli).abs() <= 0.01 * cli,
        "viewer {leaked}, heapdiff --born-after {cli}"
    );
    // 8 rounds of 40 sessions of 4 KiB. At a 16 KiB period a 4 KiB object
    // is sampled with p = 1 - e^(-1/4) = 0.221; 320 of them give a
    // relative standard error of sqrt((1 - p) / (p n)) = 10.5 %: 0.45 is
    // over 4 standard errors, and the exact binomial tails outside it
    // (fewer than 39 or more than 102 samples of 320) are 2.3e-5.
    let truth_bytes = 8.0 * truth(&cpp, "leak");
    assert!(
        (leaked - truth_bytes).abs() < 0.45 * truth_bytes,
        "{leaked} allocated in the range and live, the program kept {truth_bytes}"
    );
    let rows = table_names(&client).await;
    assert!(
        !rows
            .iter()
            .any(|r| r.starts_with("Cache<") || r == "descend"),
        "start-up memory is not born in the range: {rows:?}"
    );

    // The dump's own view links its temporary allocations.
    client
        .goto(&format!("{}/view?dump={end}", server.url))
        .await
        .unwrap();
    viewer_ready(&client).await;
    assert!(
        table_names(&client)
            .await
            .iter()
            .any(|r| r.starts_with("Cache<")),
        "the whole dump has the start-up tables"
    );
    eval(&client, "Array.from(document.querySelectorAll('#links a')).find(a => a.textContent === 'temporary allocations').click()").await;
    viewer_ready(&client).await;
    assert!(url(&client).await.contains("view=temporary"));
    let metric = eval(
        &client,
        "document.getElementById('metric').selectedOptions[0].textContent",
    )
    .await;
    assert_eq!(metric, json!("temp-space"));
    let top = eval(
        &client,
        "Array.from(document.querySelectorAll('#functions tbody tr')).map(tr => [tr.querySelector('td.name').textContent, parseFloat(tr.querySelector('td.self').dataset.value)]).sort((a, b) => b[1] - a[1])[0]",
    )
    .await;
    assert_eq!(top[0], json!("churn"), "{top}");
    let temporary = top[1].as_f64().unwrap();
    let cli = cli_self(
        &dir.join(&end),
        &["-m", "temp-space"],
        "temp-space",
        "churn",
    );
    assert!(
        (temporary - cli).abs() <= 0.01 * cli,
        "viewer {temporary}, heapdiff -m temp-space {cli}"
    );
    // 10 rounds of 256 blocks of 2 KiB freed at once. A 2 KiB block is
    // sampled with p = 1 - e^(-1/8) = 0.118; 2,560 of them give a relative
    // standard error of 5.4 %: 0.25 is over 4 standard errors (exact
    // binomial tails outside it, under 226 or over 376 samples: 4.3e-6).
    let churned = 10.0 * 256.0 * 2048.0;
    assert!(
        (temporary - churned).abs() < 0.25 * churned,
        "{temporary} temporary bytes, the program churned {churned}"
    );

    // The lifetimes page: the churn all temporary, the peak's blocks
    // freed after 20 ms or more, as `heapdiff lifetimes` says.
    client.back().await.unwrap();
    viewer_ready(&client).await;
    eval(&client, "Array.from(document.querySelectorAll('#links a')).find(a => a.textContent === 'lifetimes').click()").await;
    wait_for(&client, "window.heapdiffLifetimes && heapdiffLifetimes.ready && document.querySelector('tr.function')").await;
    let row = |name: &str| {
        format!(
            "(() => {{ const tr = document.querySelector('tr.function[data-name=\"{name}\"]');
                return [parseFloat(tr.querySelector('td.freed').dataset.value), parseFloat(tr.querySelector('td.temporary').dataset.value),
                        Array.from(tr.querySelectorAll('.strip span[data-bucket]')).map(s => parseInt(s.dataset.bucket, 10))]; }})()"
        )
    };
    let churn = eval(&client, &row("churn")).await;
    assert_eq!(
        churn[0], churn[1],
        "every churned block is temporary: {churn}"
    );
    let report: Value = serde_json::from_str(&heapdiff_ok(&[
        "lifetimes",
        "--format",
        "json",
        dir.join(&end).to_str().unwrap(),
    ]))
    .unwrap();
    let cli_churn = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == json!("churn"))
        .unwrap()["freed"]["bytes"]["estimate"]
        .as_f64()
        .unwrap();
    assert!(
        (churn[0].as_f64().unwrap() - cli_churn).abs() < 1.0,
        "{churn} vs {cli_churn}"
    );
    let report_blocks = eval(&client, &row("build_report")).await;
    assert_eq!(
        report_blocks[1].as_f64(),
        Some(0.0),
        "the peak's blocks are not temporary"
    );
    // They lived at least the program's 20 ms sleep (bucket 15 starts at
    // 16.4 ms; a loaded machine may stretch the sleep into later ones).
    let buckets: Vec<u64> = serde_json::from_value(report_blocks[2].clone()).unwrap();
    assert!(
        !buckets.is_empty() && buckets.iter().all(|&b| b >= 15),
        "freed 20 ms or more after: {report_blocks}"
    );
    assert!(
        (report_blocks[0].as_f64().unwrap() - truth(&cpp, "peak")).abs()
            < 0.1 * truth(&cpp, "peak"),
        "{report_blocks}"
    );
    client.close().await.unwrap();

    // What a view cannot answer: one line each.
    for (query, status, words) in [
        (
            format!("dump={start}&born_since={end}"),
            422,
            "written after",
        ),
        (
            format!("dump={end}&born_since={start}&base={start}"),
            400,
            "one dump",
        ),
        (format!("dump={end}&view=lifetimes"), 400, "unknown view"),
        (
            format!("dump={end}&view=temporary&born_since={start}"),
            400,
            "one time view",
        ),
    ] {
        let (got, body) = server.get(&format!("/view?{query}"));
        assert_eq!(got, status, "{query}: {body}");
        assert!(
            body.contains(words) && body.lines().count() <= 2,
            "{query}: {body}"
        );
    }
}
