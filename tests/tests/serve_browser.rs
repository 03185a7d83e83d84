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

mod serve_common;

use fantoccini::{Client, ClientBuilder, Locator};
use heapsample_tests::*;
use serde_json::{Value, json};
use serve_common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// chromedriver on a free port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
    profile: TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.profile;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// chromedriver started; `None` (a skip) when chromium is not installed.
fn start_driver() -> Option<Driver> {
    let driver = "/usr/bin/chromedriver";
    if !(Path::new(driver).exists() && Path::new("/usr/bin/chromium").exists()) {
        skip(Missing::Software(
            "the browser tests need Debian's chromium and chromium-driver \
             (apt-get install chromium chromium-driver)",
        ));
        return None;
    }
    let port = free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Driver {
        child,
        url,
        profile: TempDir::new("chromium-profile"),
    })
}

async fn connect(driver: &Driver) -> Client {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ];
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.push(format!(
        "--user-data-dir={}",
        driver.profile.path().display()
    ));
    let capabilities = json!({
        "goog:chromeOptions": { "binary": "/usr/bin/chromium", "args": args }
    });
    let serde_json::Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a browser session")
}

/// Evaluate `expression` in the page until it is truthy; its value.
async fn wait_for(client: &Client, expression: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let value = client
            .execute(&format!("return ({expression});"), vec![])
            .await
            .unwrap_or(Value::Null);
        let truthy = !matches!(&value, Value::Null | Value::Bool(false))
            && value != json!(0)
            && value != json!("");
        if truthy {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {expression}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn eval(client: &Client, expression: &str) -> Value {
    client
        .execute(&format!("return ({expression});"), vec![])
        .await
        .unwrap_or_else(|e| panic!("{expression}: {e}"))
}

async fn element(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
}

async fn click(client: &Client, css: &str) {
    element(client, css).await.click().await.expect("click");
}

async fn clear(client: &Client, css: &str) {
    element(client, css).await.clear().await.expect("clear");
}

async fn select(client: &Client, css: &str, value: &str) {
    element(client, css)
        .await
        .select_by_value(value)
        .await
        .expect("select");
}

async fn type_into(client: &Client, css: &str, text: &str) {
    element(client, css)
        .await
        .send_keys(text)
        .await
        .expect("type");
}

/// The function names of the table, in order.
async fn table_names(client: &Client) -> Vec<String> {
    let names = eval(
        client,
        "Array.from(document.querySelectorAll('#functions tbody td.name')).map(td => td.textContent)",
    )
    .await;
    serde_json::from_value(names).expect("names")
}

async fn search(client: &Client, text: &str) -> f64 {
    let input = client
        .find(Locator::Id("search"))
        .await
        .expect("search box");
    input.clear().await.expect("clear");
    input
        .send_keys(&format!("{text}\u{E007}"))
        .await
        .expect("type");
    let percent = wait_for(client, "document.getElementById('matched').dataset.percent").await;
    percent
        .as_str()
        .expect("percent")
        .parse()
        .expect("a number")
}

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
    client
        .goto(&format!("file://{}", exported.display()))
        .await
        .unwrap();
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
    client
        .goto(&format!("file://{}", diff_file.display()))
        .await
        .unwrap();
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
    client
        .goto(&format!("file://{}", big_html.display()))
        .await
        .unwrap();
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
                     v.changes.map(c => s.change(c.base, c.new, c.pairing, c.accumulation))];",
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
        seq: 0,
        trigger_seq: 0,
        lg_sample_period: 0,
        config: String::new(),
        modules: vec![],
        threads: vec![ThreadInfo {
            serial: 1,
            tid: 1,
            name: "main".into(),
        }],
        stacks,
        totals: Totals::default(),
        process: format::Process::default(),
        bytes_per_call: 0,
        live_samples: vec![],
        peak: None,
    })
}
