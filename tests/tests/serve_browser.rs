//! `heapdiff serve` and `heapdiff --format html` in a real browser (Debian's
//! chromium driven through chromedriver), on dumps of a real program run
//! under the shim with every allocation sampled (`serve_growth.c`: one
//! function, `grow_cache`, keeps 1 MiB more each round).
//!
//! One browser session for the whole file: open the index, see the process
//! and its timeline; open the exit dump and read the top function from the
//! table; search a regex and compare the matched percentage with
//! `heapdiff --format text`; add a transform and find it again after a
//! reload (it lives in the URL); split by thread; select two dumps, open
//! their diff and find `grow_cache` marked as growth; then open the exported
//! HTML file from disk and do the same without a server, and evaluate the
//! viewer's rule for a change on the shared table of test vectors (the Rust
//! reports' rule passes the same table). Last, a synthetic
//! profile of 50,000 distinct stacks opens and draws (the time it took is
//! printed; speed claims live in the benchmark).
//!
//! The front page of a process, on a C++ and a CPython service with a slow
//! leak and a transient peak (`browser_common`): its timeline has a time
//! axis, a mark per dump by trigger, the peak marked, hover showing a dump,
//! a click opening it and a drag opening the diff of a range; finding the
//! peak and the leak takes at most two clicks each, checked against the
//! programs' own truth. With 2,000 dumps the list is paged and the
//! timeline's points thinned.

mod browser_common;
mod serve_common;

use browser_common::*;
use fantoccini::{Client, Locator};
use heapsample_tests::*;
use serde_json::{Value, json};
use serve_common::*;
use std::path::Path;
use std::time::Instant;

/// The checks made on a single dump's viewer, served or from disk.
async fn check_single_view(client: &Client, text_percent: f64) {
    wait_for(
        client,
        "document.querySelectorAll('#functions tbody tr').length > 3",
    )
    .await;
    client
        .find(Locator::Css("#functions th[data-column=self]"))
        .await
        .expect("self column")
        .click()
        .await
        .expect("sort by self");
    let top = table_names(client).await;
    assert_eq!(top[0], "grow_cache", "top self function: {top:?}");
    let percent = search(client, "/grow_c.*e$/").await;
    assert!(
        (percent - text_percent).abs() < 0.1,
        "matched {percent}% vs text report {text_percent}%"
    );
    // The table follows the search.
    assert_eq!(table_names(client).await, ["grow_cache"]);
    // A tooltip names bytes, objects and the share of the total.
    let tooltip = eval(client, "heapdiffViewer.describeFunction('grow_cache')").await;
    let tooltip = tooltip.as_str().expect("tooltip");
    assert!(
        tooltip.contains("inuse-space: 8.00 MiB")
            && tooltip.contains("of total")
            && tooltip.contains("inuse-objects: 128"),
        "{tooltip}"
    );
    // The real tooltip appears on hover, and a click zooms; reset undoes it.
    let hover = "(() => { const b = heapdiffViewer.frameBox('grow_cache');
        const c = document.getElementById('canvas');
        c.dispatchEvent(new MouseEvent('mousemove', {clientX: b.x, clientY: b.y, bubbles: true}));
        c.dispatchEvent(new MouseEvent('click', {clientX: b.x, clientY: b.y, bubbles: true}));
        return document.getElementById('tooltip').textContent; })()";
    let shown = eval(client, hover).await;
    assert!(shown.as_str().unwrap().starts_with("grow_cache"), "{shown}");
    assert_eq!(
        eval(client, "heapdiffViewer.zoomedName()").await,
        json!("grow_cache")
    );
    click(client, "#reset").await;
    assert_eq!(
        eval(client, "heapdiffViewer.zoomedName()").await,
        json!("all")
    );
    // Metric, icicle and minimum width are part of the URL.
    select(client, "#metric", "2").await;
    let alloc = eval(client, "heapdiffViewer.describeFunction('grow_cache')").await;
    assert!(
        alloc.as_str().unwrap().contains("alloc-space: 8.00 MiB"),
        "{alloc}"
    );
    click(client, "#icicle").await;
    let url = client.current_url().await.unwrap().to_string();
    assert!(url.contains("m=2") && url.contains("icicle=1"), "{url}");
    select(client, "#metric", "0").await;
    click(client, "#icicle").await;
    // Rename by regex.
    select(client, "#transform-kind", "rename").await;
    type_into(client, "#transform-pattern", "/grow_(\\w+)/").await;
    type_into(client, "#transform-with", "GROW_$1").await;
    click(client, "#transform-add").await;
    wait_for(client, "heapdiffViewer.describeFunction('GROW_cache')").await;
    click(client, "#transform-list .transform-remove").await;
    wait_for(client, "heapdiffViewer.describeFunction('grow_cache')").await;
    clear(client, "#transform-pattern").await;
    clear(client, "#transform-with").await;
}

#[tokio::test]
async fn serve_and_exported_html_in_chromium() {
    let run = run_growth();
    let dir = run.dir.path();
    let names = dump_names(&run);
    let exit_dump = names
        .iter()
        .find(|n| n.contains(".f."))
        .expect("exit dump")
        .clone();
    let first_dump = names[0].clone();
    let text = String::from_utf8_lossy(
        heapdiff_ok(&["--format", "text", dir.join(&exit_dump).to_str().unwrap()]).as_bytes(),
    )
    .into_owned();
    let text_percent = text_total_percent(&text, "grow_cache");
    let server = Server::start(&[dir]);
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;

    // The index: one process, its dumps and timeline points.
    client
        .goto(&format!("{}/", server.url))
        .await
        .expect("index");
    let rows = wait_for(&client, "document.querySelectorAll('tr.dump').length").await;
    assert_eq!(rows.as_u64(), Some(names.len() as u64));
    let points = eval(
        &client,
        "document.querySelectorAll('section.process circle.point').length",
    )
    .await;
    assert!(
        points.as_u64().unwrap() >= 2 * names.len() as u64,
        "timeline points: {points}"
    );

    // Open the exit dump from the list.
    client
        .find(Locator::Css(&format!("tr[data-id='{exit_dump}'] a.open")))
        .await
        .expect("link to the exit dump")
        .click()
        .await
        .expect("open");
    check_single_view(&client, text_percent).await;

    // A transform lives in the URL: reload and it is still there.
    select(&client, "#transform-kind", "remove").await;
    type_into(&client, "#transform-pattern", "/^main$/").await;
    click(&client, "#transform-add").await;
    let search_box = client.find(Locator::Id("search")).await.unwrap();
    search_box.clear().await.unwrap();
    search_box.send_keys("\u{E007}").await.unwrap();
    wait_for(&client, "!Array.from(document.querySelectorAll('#functions td.name')).some(td => td.textContent === 'main')").await;
    let url = client.current_url().await.unwrap().to_string();
    assert!(url.contains("t="), "{url}");
    client.goto(&url).await.unwrap();
    client.refresh().await.unwrap();
    wait_for(
        &client,
        "document.querySelectorAll('#transform-list li').length === 1",
    )
    .await;
    wait_for(&client, "document.querySelectorAll('#functions tbody tr').length > 3 && !Array.from(document.querySelectorAll('#functions td.name')).some(td => td.textContent === 'main')").await;
    // Removing it brings main back.
    click(&client, "#transform-list .transform-remove").await;
    wait_for(&client, "Array.from(document.querySelectorAll('#functions td.name')).some(td => td.textContent === 'main')").await;

    // Per-thread split: a root frame per thread name.
    click(&client, "#threads").await;
    wait_for(&client, "Array.from(document.querySelectorAll('#functions td.name')).some(td => td.textContent === '[thread worker]')").await;

    // Back to the list: select the first and the exit dump, open the diff.
    client.goto(&format!("{}/", server.url)).await.unwrap();
    wait_for(&client, "document.querySelectorAll('tr.dump').length").await;
    for id in [&first_dump, &exit_dump] {
        click(&client, &format!("tr[data-id='{id}'] input.pick")).await;
    }
    click(&client, "#diff").await;
    wait_for(
        &client,
        "document.querySelectorAll('#functions tbody tr').length > 3",
    )
    .await;
    let growth = eval(&client, "Array.from(document.querySelectorAll('#functions tr.growth td.name')).map(td => td.textContent)").await;
    assert!(
        growth.as_array().unwrap().contains(&json!("grow_cache")),
        "growth rows: {growth}"
    );
    let steady = eval(&client, "Array.from(document.querySelectorAll('#functions tr.growth td.name')).some(td => td.textContent === 'steady_table')").await;
    assert_eq!(steady, json!(false), "steady_table did not grow");
    let legend = eval(&client, "document.getElementById('legend').textContent").await;
    assert!(legend.as_str().unwrap().contains("grew"), "{legend}");
    let pprof_link = eval(&client, "Array.from(document.querySelectorAll('#links a')).map(a => a.getAttribute('href')).find(h => h.startsWith('/pprof/'))").await;
    let (status, _) = server.get(pprof_link.as_str().unwrap());
    assert_eq!(status, 200, "{pprof_link}");

    // The exported file, opened from disk with no server.
    let exported = dir.join("export.html");
    heapdiff_ok(&[
        "--format",
        "html",
        dir.join(&exit_dump).to_str().unwrap(),
        "-o",
        exported.to_str().unwrap(),
    ]);
    drop(server);
    open_file(&client, &exported).await;
    check_single_view(&client, text_percent).await;
    let diff_file = dir.join("export.diff.html");
    heapdiff_ok(&[
        "--format",
        "html",
        "--base",
        dir.join(&first_dump).to_str().unwrap(),
        dir.join(&exit_dump).to_str().unwrap(),
        "-o",
        diff_file.to_str().unwrap(),
    ]);
    open_file(&client, &diff_file).await;
    wait_for(&client, "Array.from(document.querySelectorAll('#functions tr.growth td.name')).some(td => td.textContent === 'grow_cache')").await;
    check_change_vectors(&client).await;

    // 50,000 distinct stacks.
    let big = dir.join("big.prof");
    std::fs::write(&big, synthetic_dump(50_000)).unwrap();
    let big_html = dir.join("big.html");
    heapdiff_ok(&[
        "--format",
        "html",
        big.to_str().unwrap(),
        "-o",
        big_html.to_str().unwrap(),
    ]);
    let started = Instant::now();
    open_file(&client, &big_html).await;
    let ms = wait_for(
        &client,
        "window.heapdiffViewer && heapdiffViewer.firstDrawMs",
    )
    .await;
    eprintln!(
        "50,000 stacks ({} bytes of HTML): first draw {ms} ms after the script started, page loaded in {:?}",
        std::fs::metadata(&big_html).unwrap().len(),
        started.elapsed()
    );
    let timings = eval(
        &client,
        "JSON.stringify([heapdiffViewer.parseMs, heapdiffViewer.timings])",
    )
    .await;
    eprintln!("viewer phases (ms): parse, then {timings}");
    let percent = search(&client, "/^0xc0[0-4]/").await;
    assert!(percent > 0.0 && percent < 100.0, "{percent}");
    client.close().await.unwrap();
}

/// The viewer's rules for an interval and for a change, evaluated in the
/// page on every vector of the table the Rust reports' rules are tested
/// on: the same interval, verdict and confidence.
async fn check_change_vectors(client: &Client) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../dump-tool/src/stats/change_vectors.json");
    let vectors: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the vectors")).unwrap();
    let results = client
        .execute(
            "const s = heapdiffViewer.stats, v = arguments[0]; \
             return [v.estimates.map(e => s.interval(e.estimate)), \
                     v.changes.map(c => s.change(c.base, c.new, c.pairing, c.accumulation, c.parts))];",
            vec![vectors.clone()],
        )
        .await
        .expect("evaluate the vectors");
    // Another implementation of the gamma point: equal to 1e-9.
    let close = |ours: f64, theirs: f64| {
        (ours - theirs).abs() <= 1e-9 * ours.abs().max(theirs.abs()).max(1.0)
    };
    for (index, (table, keys, flags)) in [
        (
            "estimates",
            &["low", "high"][..],
            &[("lowConfidence", "low_confidence")][..],
        ),
        (
            "changes",
            &["value", "variance", "low", "high"][..],
            &[
                ("significant", "significant"),
                ("lowConfidence", "low_confidence"),
            ][..],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let vectors = vectors[table].as_array().unwrap();
        let results = results[index].as_array().expect("one result per vector");
        assert_eq!(results.len(), vectors.len());
        assert!(
            vectors.len() >= 10,
            "only {} {table} vectors",
            vectors.len()
        );
        for (vector, result) in vectors.iter().zip(results) {
            let note = &vector["note"];
            for key in keys {
                let (ours, theirs) = (result[key].as_f64().unwrap(), vector[key].as_f64().unwrap());
                assert!(
                    close(ours, theirs),
                    "{note}: {key} {ours} in the browser, {theirs} in the table"
                );
            }
            for (ours, theirs) in flags {
                assert_eq!(result[ours], vector[theirs], "{note}: {theirs}");
            }
        }
    }
}

/// A dump of `count` distinct stacks of 12 frames each, mapped to no
/// module (frames are shown as addresses), one sampled object each.
fn synthetic_dump(count: u64) -> Vec<u8> {
    use heapsample_format::*;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let stacks = (0..count)
        .map(|_| {
            // Few roots, many leaves: a realistic fan-out.
            let frames: Vec<u64> = (0..12u64)
                .map(|depth| 0x1000 * (depth + 1) + next() % (2 + depth * depth * 40))
                .collect();
            let size = 16 + next() % 4096;
            Stack {
                frames,
                thread: 1,
                live_objects: 1,
                live_bytes: size,
                alloc_objects: 1,
                alloc_bytes: size,
                live: sample_weights(size, 1),
                alloc: sample_weights(size, 1),
                ..Stack::default()
            }
        })
        .collect();
    encode(&Dump {
        writer: "synthetic".into(),
        pid: 1,
        executable: "/synthetic".into(),
        command_line: vec!["synthetic".into()],
        time_unix_ns: 0,
        trigger: Trigger::Final,
        lg_sample_period: 0,
        threads: vec![ThreadInfo {
            serial: 1,
            tid: 1,
            name: "main".into(),
        }],
        stacks,
        ..format::testing::dump()
    })
}

/// The front page's section of the process `pid`, its key.
async fn process_key(client: &Client, pid: u32) -> String {
    let key = wait_for(
        client,
        &format!("(document.querySelector('section.process[data-pid=\"{pid}\"]') || {{}}).dataset && document.querySelector('section.process[data-pid=\"{pid}\"]').dataset.key"),
    )
    .await;
    key.as_str().expect("key").to_string()
}

/// Send a mouse event of `kind` to the process's timeline at dump `id`.
fn timeline_event(key: &str, id: &str, kind: &str) -> String {
    format!(
        "(() => {{ const p = heapdiffIndex.pointOf({key:?}, {id:?});
            const svg = document.querySelector('section.process[data-key={key:?}] svg.timeline');
            svg.dispatchEvent(new MouseEvent({kind:?}, {{clientX: p.x, clientY: p.y, bubbles: true}}));
            return true; }})()"
    )
}

/// From the front page: the peak in one click (its dump opens and its
/// largest function holds `peak_bytes`), the leak in at most two (the
/// growing panel names it first; a click opens the diff of the series
/// with it found, its growth ≈ `leak_bytes`).
async fn leak_and_peak_in_two_clicks(
    client: &Client,
    server: &Server,
    pid: u32,
    peak_bytes: f64,
    leak_bytes: f64,
) -> String {
    client.goto(&format!("{}/", server.url)).await.unwrap();
    let key = process_key(client, pid).await;
    let section = format!("section.process[data-key='{key}']");
    // Click 1: the peak.
    click(client, &format!("{section} .actions a.peak")).await;
    viewer_ready(client).await;
    let biggest: f64 = serde_json::from_value(
        eval(client, "Math.max(...Array.from(document.querySelectorAll('#functions td.self')).map(td => parseFloat(td.dataset.value)))").await,
    )
    .unwrap();
    assert!(
        (biggest - peak_bytes).abs() < 0.1 * peak_bytes,
        "the peak's largest function holds {biggest}, the program held {peak_bytes}"
    );
    // The leak: named by the growing panel (no click), opened by one.
    client.goto(&format!("{}/", server.url)).await.unwrap();
    wait_for(
        client,
        &format!("document.querySelectorAll(\"{section} tr.grows\").length > 0"),
    )
    .await;
    let first = eval(
        client,
        &format!("document.querySelector(\"{section} tr.grows\").dataset.name"),
    )
    .await;
    let leak = first.as_str().unwrap().to_string();
    click(client, &format!("{section} tr.grows td.name a")).await;
    // The table shows the functions found: it may be one row.
    wait_for(
        client,
        "window.heapdiffViewer && document.querySelector('#functions tbody tr')",
    )
    .await;
    wait_for(client, "document.getElementById('matched').dataset.percent").await;
    let rows = table_names(client).await;
    assert!(rows.contains(&leak), "{leak} found in the diff: {rows:?}");
    let change = eval(
        client,
        &format!("(() => {{ const tr = Array.from(document.querySelectorAll('#functions tbody tr')).find(tr => tr.querySelector('td.name').textContent === {leak:?});
            return [parseFloat(tr.querySelector('td.dself').dataset.value), tr.querySelector('td.dself').className]; }})()"),
    )
    .await;
    let grown = change[0].as_f64().unwrap();
    assert!(
        (grown - leak_bytes).abs() < 0.35 * leak_bytes
            && change[1].as_str().unwrap().contains("grew"),
        "{leak} grew by {grown} ({change}), the program leaked {leak_bytes}"
    );
    leak
}

#[tokio::test]
async fn the_front_page_finds_the_leak_and_the_peak() {
    let cpp = run_cpp_service();
    let python = run_python_service();
    let server = Server::start(&[cpp.dir.path(), python.dir.path()]);
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;

    // The C++ service: the peak is build_report's 24 MiB; the leak
    // Registry<Session>::add's 40 sessions a round, over the rounds between
    // the first and the last round dump (the exit dump is left out).
    let rounds = truth(&cpp, "rounds") - 1.0;
    let leak = leak_and_peak_in_two_clicks(
        &client,
        &server,
        cpp.pid,
        truth(&cpp, "peak"),
        rounds * truth(&cpp, "leak"),
    )
    .await;
    assert_eq!(leak, "Registry<…>::add");
    // The steady tables do not grow.
    client.goto(&format!("{}/", server.url)).await.unwrap();
    let key = process_key(&client, cpp.pid).await;
    let section = format!("section.process[data-key='{key}']");
    wait_for(
        &client,
        &format!("document.querySelectorAll(\"{section} tr.grows\").length > 0"),
    )
    .await;
    let growing = eval(&client, &format!("Array.from(document.querySelectorAll(\"{section} tr.grows\")).map(tr => tr.dataset.name)")).await;
    for steady in [
        "Cache<int>::fill",
        "Cache<double>::fill",
        "descend",
        "pool_work",
    ] {
        assert!(
            !growing.as_array().unwrap().contains(&json!(steady)),
            "{steady} in {growing}"
        );
    }

    // Its timeline: a time axis, a mark per dump by trigger, the peak.
    let names = prof_names(&cpp);
    let marks = eval(
        &client,
        &format!("document.querySelectorAll(\"{section} svg.timeline .trigger\").length"),
    )
    .await;
    assert_eq!(marks.as_u64(), Some(names.len() as u64));
    let manual = eval(
        &client,
        &format!("document.querySelectorAll(\"{section} svg.timeline .trigger-manual\").length"),
    )
    .await;
    assert_eq!(
        manual.as_u64(),
        Some(names.iter().filter(|n| n.contains(".m")).count() as u64)
    );
    let ticks = eval(&client, &format!("Array.from(document.querySelectorAll(\"{section} svg.timeline text.time-tick\")).map(t => t.textContent)")).await;
    assert!(
        ticks.as_array().unwrap().len() >= 2 && ticks[0] == json!("+0 ms"),
        "{ticks}"
    );
    // The cost band: a shade between each two dumps, and what the newest
    // (the exit dump) says leaving it on cost, counting every dump before it.
    let band = eval(
        &client,
        &format!("document.querySelectorAll(\"{section} svg.timeline .cost-band\").length"),
    )
    .await;
    assert!(band.as_u64().unwrap_or(0) >= 1, "cost band: {band}");
    let cost = eval(
        &client,
        &format!("document.querySelector(\"{section} svg.timeline .cost-summary\").textContent"),
    )
    .await;
    let cost = cost.as_str().unwrap_or_default();
    assert!(
        cost.starts_with("so far: sampling ≈ ")
            && cost.contains(" own memory ")
            && cost.contains(&format!(" {} dumps written (", names.len() - 1)),
        "{cost}"
    );
    let peak_id = wait_for(
        &client,
        &format!("document.querySelector(\"{section} .peak-mark\").dataset.id"),
    )
    .await;
    assert!(
        peak_id.as_str().unwrap().ends_with(".m4.prof"),
        "the dump at the top of the peak: {peak_id}"
    );
    // Hover shows a dump; a click opens it; a drag opens the diff of a range.
    let id = |n: u32| {
        format!(
            "0/{}",
            names
                .iter()
                .find(|x| x.ends_with(&format!(".m{n}.prof")))
                .unwrap()
        )
    };
    eval(&client, &timeline_event(&key, &id(2), "mousemove")).await;
    let tip = eval(&client, "document.getElementById('tip').textContent").await;
    assert!(
        tip.as_str().unwrap().contains(&id(2)) && tip.as_str().unwrap().contains("usable"),
        "{tip}"
    );
    eval(&client, &timeline_event(&key, &id(2), "mousedown")).await;
    eval(&client, &timeline_event(&key, &id(2), "mouseup")).await;
    viewer_ready(&client).await;
    assert!(
        url(&client)
            .await
            .ends_with(&format!("/view?dump={}", id(2).replace('/', "%2F"))),
        "{}",
        url(&client).await
    );
    client.back().await.unwrap();
    wait_for(
        &client,
        &format!("heapdiffIndex.pointOf({key:?}, {:?})", id(1)),
    )
    .await;
    eval(&client, &timeline_event(&key, &id(1), "mousedown")).await;
    eval(&client, &timeline_event(&key, &id(6), "mousemove")).await;
    eval(&client, &timeline_event(&key, &id(6), "mouseup")).await;
    viewer_ready(&client).await;
    let opened = url(&client).await;
    assert!(
        opened.contains(&format!("dump={}", id(6).replace('/', "%2F")))
            && opened.contains(&format!("base={}", id(1).replace('/', "%2F"))),
        "{opened}"
    );
    // The same range from the keyboard: arrows, Shift+arrows, Enter.
    client.back().await.unwrap();
    wait_for(
        &client,
        &format!("heapdiffIndex.pointOf({key:?}, {:?})", id(1)),
    )
    .await;
    let timeline = element(&client, &format!("{section} svg.timeline")).await;
    timeline.send_keys("\u{E011}").await.unwrap(); // Home: the first dump
    timeline.send_keys(SHIFT_ARROW_RIGHT).await.unwrap();
    timeline.send_keys(ENTER).await.unwrap();
    viewer_ready(&client).await;
    assert!(
        url(&client).await.contains("base="),
        "{}",
        url(&client).await
    );

    // The CPython service: the peak is the 24 blocks of 1 MiB; the leak
    // 200 strings of 2,000 characters a round (and their object headers).
    let rounds = truth(&python, "rounds") - 1.0;
    let strings = rounds * 200.0 * (truth(&python, "leak") / 200.0 + 49.0);
    leak_and_peak_in_two_clicks(
        &client,
        &server,
        python.pid,
        truth(&python, "peak"),
        strings,
    )
    .await;
    client.close().await.unwrap();
}

#[tokio::test]
async fn two_thousand_dumps_are_paged_and_thinned() {
    let program = compile_c(
        "../../bench/workloads/serve_series.c",
        &BuildOptions::no_pie(),
    );
    let outcome = Run::program(&program)
        .arg("2000")
        .with_shim()
        .prof_conf("lg_prof_sample:14,prof_exact:true,prof_final:false")
        .run();
    outcome.assert_success();
    let server = Server::start(&[outcome.dir.path()]);
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client.goto(&format!("{}/", server.url)).await.unwrap();
    let key = process_key(&client, outcome.pid).await;
    wait_for(&client, "heapdiffIndex.firstPaintMs !== null").await;
    // Collapsed, and paged once opened.
    assert_eq!(
        eval(&client, "document.querySelector('details.dump-list').open").await,
        json!(false)
    );
    click(&client, "details.dump-list summary").await;
    let rows = eval(&client, "document.querySelectorAll('tr.dump').length").await;
    assert_eq!(rows, json!(50), "one page of the list");
    let pager = eval(&client, "document.querySelector('.pager span').textContent").await;
    assert_eq!(pager, json!("dumps 1951–2000 of 2000"));
    click(&client, ".pager button.older").await;
    let pager = eval(&client, "document.querySelector('.pager span').textContent").await;
    assert_eq!(pager, json!("dumps 1901–1950 of 2000"));
    let width = eval(
        &client,
        "document.querySelector('svg.timeline').getAttribute('width')",
    )
    .await;
    let drawn = eval(&client, &format!("heapdiffIndex.drawnPoints({key:?})")).await;
    assert!(
        drawn.as_u64().unwrap() <= width.as_str().unwrap().parse::<u64>().unwrap(),
        "{drawn} points on {width} px"
    );
    let page_height = eval(&client, "document.documentElement.scrollHeight").await;
    assert!(
        page_height.as_u64().unwrap() < 4000,
        "a page, not 2,000 rows: {page_height} px"
    );
    eprintln!(
        "2,000 dumps: first paint after {} ms (timings live in bench/serve_scale.py)",
        eval(&client, "heapdiffIndex.firstPaintMs").await
    );
    client.close().await.unwrap();
}
