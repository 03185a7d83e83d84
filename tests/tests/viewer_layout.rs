//! The viewer and the front page never hide a number, in a real browser
//! (Debian's chromium through chromedriver), and the front page polls
//! cheaply.
//!
//! Layout, at 1024, 1280 and 1600 px, on three series served at once (the
//! C++ and the CPython services of `browser_common`, and 2,000 dumps of
//! `bench/workloads/serve_series.c`): on the front page and in the viewer's
//! diff of the C++ service's first and last dumps, no table cell outside
//! a name column whose text is cut (`scrollWidth > clientWidth`), no
//! element reaching past its panel (a process's section, the viewer's side
//! panel) or the window, no two labels of a timeline overlapping.
//!
//! Polling: `/api/dumps` carries an ETag and answers 304 with no body to a
//! request that sends it back, a new dump changes it; the page stops
//! polling once every process listed has written its exit dump, and keeps
//! polling while one has not.

mod browser_common;
mod serve_common;

use browser_common::*;
use fantoccini::Client;
use heapsample_tests::*;
use serde_json::json;
use serve_common::*;
use std::time::Duration;

const WIDTHS: [u32; 3] = [1024, 1280, 1600];

/// Cells (outside name columns) whose text is cut, as "table: text".
const CUT_CELLS: &str = "Array.from(document.querySelectorAll('td, th'))
    .filter(c => !c.classList.contains('name') && !c.closest('td.name') && c.offsetParent !== null
                 && c.scrollWidth > c.clientWidth + 1)
    .map(c => (c.closest('table').id || c.closest('table').className) + ': ' + c.textContent)";

/// Elements below `panel` (CSS) whose right edge passes the panel's or the
/// window's, as "tag.class: text".
fn too_wide(panel: &str) -> String {
    format!(
        "Array.from(document.querySelectorAll({panel:?})).flatMap(p => {{
            const limit = Math.min(p.getBoundingClientRect().right, document.documentElement.clientWidth) + 1;
            return Array.from(p.querySelectorAll('*')).filter(e => {{
                const r = e.getBoundingClientRect();
                return r.width > 0 && r.right > limit && !e.closest('td.name');
            }}).map(e => e.tagName + '.' + e.getAttribute('class') + ': ' + (e.textContent || '').slice(0, 60));
        }})"
    )
}

/// Pairs of overlapping labels on the timelines, as "a / b".
const OVERLAPPING_LABELS: &str = "Array.from(document.querySelectorAll('svg.timeline')).flatMap(svg => {
    const boxes = Array.from(svg.querySelectorAll('text')).map(t => [t.textContent, t.getBoundingClientRect()])
        .filter(([, r]) => r.width > 0);
    const out = [];
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
        const [a, r] = boxes[i], [b, s] = boxes[j];
        if (r.left < s.right - 0.5 && s.left < r.right - 0.5 && r.top < s.bottom - 0.5 && s.top < r.bottom - 0.5) out.push(a + ' / ' + b);
    }
    return out;
})";

/// Assert that `expression` finds nothing once the page has settled (the
/// growth panels and the list load in the background): it is evaluated
/// until it finds nothing, for at most 10 s, and the last finding reported.
async fn none(client: &Client, what: &str, width: u32, expression: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = eval(client, expression).await;
        if found == json!([]) || std::time::Instant::now() > deadline {
            assert_eq!(found, json!([]), "{what} at {width} px");
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn resize(client: &Client, width: u32) {
    client.set_window_size(width, 1000).await.expect("resize");
    let inner = eval(client, "window.innerWidth").await.as_u64().unwrap();
    assert!(
        inner <= u64::from(width) && inner + 40 >= u64::from(width),
        "window {inner} px for {width}"
    );
}

/// The front page with at least `processes` processes (pyenv's shims may
/// add theirs), every growth panel and dump list drawn.
async fn front_page_ready(client: &Client, url: &str, processes: usize) {
    client.goto(url).await.unwrap();
    wait_for(
        client,
        &format!("document.querySelectorAll('section.process svg.timeline').length >= {processes}"),
    )
    .await;
    wait_for(
        client,
        "Array.from(document.querySelectorAll('.growth-panel')).every(g => g.childElementCount > 0
            || g.closest('section').querySelector('details.dump-list summary').textContent === '1 dumps')",
    )
    .await;
    eval(
        client,
        "(document.querySelectorAll('details.dump-list').forEach(d => { d.open = true; }), true)",
    )
    .await;
}

#[tokio::test]
async fn no_number_hidden_at_1024_1280_and_1600_px() {
    let cpp = run_cpp_service();
    let python = run_python_service();
    let program = compile_c(
        "../../bench/workloads/serve_series.c",
        &BuildOptions::no_pie(),
    );
    let series = Run::program(&program)
        .arg("2000")
        .with_shim()
        .prof_conf("lg_prof_sample:14,prof_exact:true,prof_final:false")
        .run();
    series.assert_success();
    let server = Server::start(&[cpp.dir.path(), python.dir.path(), series.dir.path()]);
    let Some(driver) = start_driver() else {
        return;
    };
    let names = prof_names(&cpp);
    let (first, last) = (&names[0], &names[names.len() - 1]);
    let diff = format!("{}/view?dump=0/{last}&base=0/{first}", server.url);
    let client = connect(&driver).await;
    for width in WIDTHS {
        resize(&client, width).await;
        front_page_ready(&client, &format!("{}/", server.url), 3).await;
        none(&client, "cut cells on the front page", width, CUT_CELLS).await;
        none(
            &client,
            "elements past a process's section",
            width,
            &too_wide("section.process"),
        )
        .await;
        none(
            &client,
            "overlapping timeline labels",
            width,
            OVERLAPPING_LABELS,
        )
        .await;
        let page = eval(&client, "document.documentElement.scrollWidth").await;
        assert!(
            page.as_u64().unwrap() <= u64::from(width),
            "the front page is {page} px wide at {width} px"
        );

        client.goto(&diff).await.unwrap();
        viewer_ready(&client).await;
        none(&client, "cut cells in the viewer", width, CUT_CELLS).await;
        none(
            &client,
            "elements past the viewer's side panel",
            width,
            &too_wide("#side"),
        )
        .await;
        let page = eval(&client, "document.documentElement.scrollWidth").await;
        assert!(
            page.as_u64().unwrap() <= u64::from(width),
            "the viewer is {page} px wide at {width} px"
        );
        // The change column keeps its unit whole.
        let deltas = eval(
            &client,
            "Array.from(document.querySelectorAll('#functions td.dtotal')).map(td => td.textContent)",
        )
        .await;
        for delta in deltas.as_array().unwrap() {
            let delta = delta.as_str().unwrap();
            assert!(delta.ends_with('B'), "a change without its unit: {delta}");
        }
    }
    client.close().await.unwrap();
}

/// The raw response's status, `ETag` and body.
fn listing(server: &Server, etag: Option<&str>) -> (u16, Option<String>, String) {
    let condition = etag.map_or(String::new(), |e| format!("If-None-Match: {e}\r\n"));
    let request = format!(
        "GET /api/dumps HTTP/1.1\r\nHost: 127.0.0.1\r\n{condition}Connection: close\r\n\r\n"
    );
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let etag = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("etag: ")
                .or_else(|| l.strip_prefix("ETag: "))
        })
        .map(str::to_string);
    (status, etag, body.to_string())
}

#[tokio::test]
async fn the_list_answers_304_and_the_page_stops_polling_when_all_exited() {
    let cpp = run_cpp_service();
    let server = Server::start(&[cpp.dir.path()]);
    let (status, etag, body) = listing(&server, None);
    assert_eq!(status, 200);
    assert!(body.contains("\"processes\""), "{body}");
    let etag = etag.expect("an ETag on the list");
    let (status, again, body) = listing(&server, Some(&etag));
    assert_eq!(
        (status, again.as_deref(), body.as_str()),
        (304, Some(etag.as_str()), "")
    );
    let (status, _, _) = listing(&server, Some("\"something-else\""));
    assert_eq!(status, 200, "another version gets the list");
    // A new dump (a copy of one, as a new file) is a new version.
    let names = prof_names(&cpp);
    std::fs::copy(
        cpp.dir.path().join(&names[0]),
        cpp.dir.path().join("copy.prof"),
    )
    .unwrap();
    let (status, changed, _) = listing(&server, Some(&etag));
    assert_eq!(status, 200, "a new file changes the list");
    assert_ne!(changed.as_deref(), Some(etag.as_str()));
    std::fs::remove_file(cpp.dir.path().join("copy.prof")).unwrap();

    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client.goto(&format!("{}/", server.url)).await.unwrap();
    wait_for(&client, "heapdiffIndex.firstPaintMs !== null").await;
    // Every process has its exit dump: no further request.
    wait_for(&client, "heapdiffIndex.polling === false").await;
    let polls = eval(&client, "heapdiffIndex.polls").await;
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(eval(&client, "heapdiffIndex.polls").await, polls);
    assert_eq!(
        eval(&client, "document.getElementById('polling').hidden").await,
        json!(false),
        "the page says it stopped"
    );

    // A process without an exit dump keeps the page polling.
    let program = compile_c(
        "../../bench/workloads/serve_series.c",
        &BuildOptions::no_pie(),
    );
    let running = Run::program(&program)
        .arg("5")
        .with_shim()
        .prof_conf("lg_prof_sample:14,prof_final:false")
        .run();
    running.assert_success();
    let server = Server::start(&[running.dir.path()]);
    client.goto(&format!("{}/", server.url)).await.unwrap();
    wait_for(&client, "heapdiffIndex.firstPaintMs !== null").await;
    let polls = eval(&client, "heapdiffIndex.polls").await.as_u64().unwrap();
    wait_for(&client, &format!("heapdiffIndex.polls >= {}", polls + 2)).await;
    assert_eq!(eval(&client, "heapdiffIndex.polling").await, json!(true));
    client.close().await.unwrap();
}
