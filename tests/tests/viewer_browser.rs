//! The flamegraph viewer in a real browser (Debian's chromium through
//! chromedriver), served by `heapdiff serve` over the dumps of real
//! services run under the shim (`viewer_service.cpp`, `viewer_service.py`;
//! see `browser_common`).
//!
//! On the C++ service: the functions table sorts by every column (checked
//! on the values it shows) and in a comparison colours a change only where
//! the reports' rule finds it significant (checked against `heapdiff
//! --format json` function by function); all its columns fit at 1280 and
//! 1600 px; two instantiations of one template stay two rows, and the
//! full-name switch (and `serve --full-names`) shows whole signatures; the
//! 120-frame chain opens with its root on screen; zoom and sort live in the
//! URL and in the history (Back undoes a zoom), Esc resets, `/` searches,
//! the canvas and the table's headers work from the keyboard; the table
//! follows the zoom; left-heavy order; a function's callers and callees;
//! threads of one name split by tid, with the thread colour in the legend;
//! every view links the previous and next dump and the diffs with them.
//!
//! On the CPython service (stacks of 100+ frames): the root is on screen,
//! its three threads (all named after the process) are three roots, and a
//! comparison with the C++ service's dump is refused as the command line
//! refuses it, with a link that compares anyway. A program whose live heap
//! no sample caught says so instead of "0 B (exact)", and every live heap
//! is reconciled with the exact counter in words.

mod browser_common;
mod serve_common;

use browser_common::*;
use fantoccini::Client;
use heapsample_tests::*;
use serde_json::{Value, json};
use serve_common::Server;
use std::collections::HashMap;

/// The `data-value`s of column `column` of the table, top to bottom.
async fn column(client: &Client, column: &str) -> Vec<f64> {
    let values = eval(
        client,
        &format!(
            "Array.from(document.querySelectorAll('#functions tbody td.{column}')).map(td => parseFloat(td.dataset.value))"
        ),
    )
    .await;
    serde_json::from_value(values).expect("numbers")
}

/// Sort the table by `column`, largest first, with its header button.
async fn sort_descending(client: &Client, column: &str) {
    for _ in 0..2 {
        let state = eval(
            client,
            &format!("document.querySelector('#functions th[data-column={column}]').getAttribute('aria-sort')"),
        )
        .await;
        if state == json!("descending") {
            return;
        }
        click(
            client,
            &format!("#functions th[data-column={column}] button"),
        )
        .await;
    }
    panic!("{column} never sorted largest first");
}

fn nonincreasing(values: &[f64]) -> bool {
    values.windows(2).all(|w| w[0] >= w[1])
}

/// Every header of the table ends inside the table's panel and the window.
async fn columns_fit(client: &Client, width: u32) {
    client.set_window_size(width, 900).await.expect("resize");
    wait_for(client, &format!("window.innerWidth <= {width}")).await;
    let fit = eval(
        client,
        "(() => { const side = document.getElementById('side').getBoundingClientRect();
            const right = Math.min(side.right, document.documentElement.clientWidth);
            return Array.from(document.querySelectorAll('#functions th')).map(th => {
              const r = th.getBoundingClientRect();
              return [th.dataset.column, r.width > 20 && r.right <= right + 0.5 && r.left >= side.left - 0.5];
            }); })()",
    )
    .await;
    let fit: Vec<(String, bool)> = serde_json::from_value(fit).expect("pairs");
    assert!(fit.len() >= 5, "{fit:?}");
    assert!(
        fit.iter().all(|(_, shown)| *shown),
        "at {width} px: {fit:?}"
    );
}

/// The JS to click the first drawn frame named `name`.
fn click_frame(name: &str) -> String {
    format!(
        "(() => {{ const b = heapdiffViewer.frameBox({name:?}); const c = document.getElementById('canvas');
            c.dispatchEvent(new MouseEvent('click', {{clientX: b.x, clientY: b.y, bubbles: true}})); return true; }})()"
    )
}

/// The root of the flame graph is drawn inside the window and inside the
/// scrolling box, without the user scrolling.
async fn root_on_screen(client: &Client) {
    let at = eval(
        client,
        "(() => { const r = heapdiffViewer.rootBox(); const box = document.getElementById('graph').getBoundingClientRect();
            return [r.y, box.top, box.bottom, window.innerHeight, document.getElementById('canvas').getBoundingClientRect().height]; })()",
    )
    .await;
    let at: Vec<f64> = serde_json::from_value(at).expect("numbers");
    let (y, top, bottom, window, canvas) = (at[0], at[1], at[2], at[3], at[4]);
    assert!(
        canvas > window,
        "the graph is deeper than the window: {at:?}"
    );
    assert!(y > top && y < bottom && y < window, "root at {y}: {at:?}");
}

/// The viewer's link labelled `label`.
async fn link(client: &Client, label: &str) -> Option<String> {
    let href = eval(
        client,
        &format!(
            "(Array.from(document.querySelectorAll('#links a')).find(a => a.textContent === {label:?}) || {{}}).href || null"
        ),
    )
    .await;
    href.as_str().map(str::to_string)
}

#[tokio::test]
async fn the_functions_table_names_zoom_and_keys_on_a_cpp_service() {
    let run = run_cpp_service();
    let dir = run.dir.path();
    let names = prof_names(&run);
    let manual = |n: u32| manual_of(&run, n);
    let (first, last_round) = (manual(0), manual(10));
    let exit = names
        .iter()
        .find(|n| n.contains(".f."))
        .expect("exit dump")
        .clone();
    let server = Server::start(&[dir]);
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    let page = |id: &str, base: Option<&str>| {
        let mut url = format!("{}/view?dump={id}", server.url);
        if let Some(base) = base {
            url.push_str(&format!("&base={base}"));
        }
        url
    };

    // The exit dump: a 120-frame chain, opened with its root on screen.
    client.goto(&page(&exit, None)).await.unwrap();
    viewer_ready(&client).await;
    root_on_screen(&client).await;

    // Two instantiations of one template are two rows, each its own size.
    let rows = table_names(&client).await;
    let selfs = column(&client, "self").await;
    let self_of = |name: &str| {
        selfs[rows
            .iter()
            .position(|r| r == name)
            .unwrap_or_else(|| panic!("{name} in {rows:?}"))]
    };
    assert!(
        (self_of("Cache<int>::fill") - 524_288.0).abs() < 5_000.0,
        "{rows:?} {selfs:?}"
    );
    assert!((self_of("Cache<double>::fill") - 1_048_576.0).abs() < 10_000.0);
    // Full names on demand, in the URL.
    click(&client, "#full-names").await;
    wait_for(&client, "Array.from(document.querySelectorAll('#functions td.name')).some(td => td.textContent === 'Cache<int>::fill(unsigned long)')").await;
    assert!(url(&client).await.contains("names=full"));
    click(&client, "#full-names").await;
    wait_for(&client, "Array.from(document.querySelectorAll('#functions td.name')).some(td => td.textContent === 'Cache<int>::fill')").await;

    // Sorting by each column orders the rows by it; the sort is in the URL.
    for name in ["self", "selfp", "total", "totalp"] {
        sort_descending(&client, name).await;
        let values = column(&client, name).await;
        assert!(
            values.len() > 5 && nonincreasing(&values),
            "{name}: {values:?}"
        );
    }
    sort_descending(&client, "self").await;
    assert!(url(&client).await.contains("s=self"));
    client.refresh().await.unwrap();
    viewer_ready(&client).await;
    wait_for(&client, "document.querySelector('#functions th[data-column=self]').getAttribute('aria-sort') === 'descending'").await;
    // Headers are buttons: Enter on one sorts.
    element(&client, "#functions th[data-column=total] button")
        .await
        .send_keys(ENTER)
        .await
        .unwrap();
    wait_for(&client, "document.querySelector('#functions th[data-column=total]').getAttribute('aria-sort') === 'descending'").await;

    // Left-heavy order puts the widest child of main first.
    let left = |name: &str| format!("heapdiffViewer.frameBox({name:?}).left");
    let registry = "Registry<…>::add";
    let order = eval(
        &client,
        &format!("[{}, {}]", left(registry), left("Cache<double>::fill")),
    )
    .await;
    assert!(
        order[0].as_f64() > order[1].as_f64(),
        "by name: Cache before Registry {order}"
    );
    click(&client, "#heavy").await;
    let order = eval(
        &client,
        &format!("[{}, {}]", left(registry), left("Cache<double>::fill")),
    )
    .await;
    assert!(
        order[0].as_f64() < order[1].as_f64(),
        "left-heavy: Registry first {order}"
    );
    click(&client, "#heavy").await;

    // A click zooms; the zoom is in the URL and the table follows it;
    // Back undoes it without leaving the page, Forward redoes it.
    eval(&client, &click_frame(registry)).await;
    assert_eq!(
        eval(&client, "heapdiffViewer.zoomedName()").await,
        json!(registry)
    );
    assert!(url(&client).await.contains("z="));
    let zoomed_rows = table_names(&client).await;
    assert!(
        zoomed_rows.contains(&registry.to_string())
            && !zoomed_rows.iter().any(|r| r.starts_with("Cache<")),
        "{zoomed_rows:?}"
    );
    client.back().await.unwrap();
    wait_for(&client, "heapdiffViewer.zoomedName() === 'all'").await;
    assert!(url(&client).await.contains("/view?dump="), "still the view");
    assert!(
        table_names(&client)
            .await
            .iter()
            .any(|r| r.starts_with("Cache<"))
    );
    client.forward().await.unwrap();
    wait_for(
        &client,
        &format!("heapdiffViewer.zoomedName() === {registry:?}"),
    )
    .await;
    // Esc resets the zoom; `/` goes to the search box.
    element(&client, "body")
        .await
        .send_keys(ESCAPE)
        .await
        .unwrap();
    wait_for(&client, "heapdiffViewer.zoomedName() === 'all'").await;
    element(&client, "body").await.send_keys("/").await.unwrap();
    assert_eq!(
        eval(&client, "document.activeElement.id").await,
        json!("search")
    );
    element(&client, "#search")
        .await
        .send_keys(ESCAPE)
        .await
        .unwrap();

    // The canvas from the keyboard: focus puts a cursor on the root, the
    // arrow toward the leaves moves it to a child, Enter zooms there.
    element(&client, "#canvas")
        .await
        .send_keys(ARROW_UP)
        .await
        .unwrap();
    let cursor = wait_for(
        &client,
        "heapdiffViewer.cursorName() !== 'all' && heapdiffViewer.cursorName()",
    )
    .await;
    element(&client, "#canvas")
        .await
        .send_keys(ENTER)
        .await
        .unwrap();
    wait_for(
        &client,
        &format!("heapdiffViewer.zoomedName() === {cursor}"),
    )
    .await;
    element(&client, "#canvas")
        .await
        .send_keys(ESCAPE)
        .await
        .unwrap();
    wait_for(&client, "heapdiffViewer.zoomedName() === 'all'").await;

    // Threads: the two threads named "pool" are two roots, by tid, and the
    // legend names the thread colour.
    click(&client, "#threads").await;
    wait_for(
        &client,
        "document.getElementById('legend').textContent.includes('thread')",
    )
    .await;
    let pools: Vec<String> = table_names(&client)
        .await
        .into_iter()
        .filter(|n| n.starts_with("[thread pool tid "))
        .collect();
    assert_eq!(pools.len(), 2, "{:?}", table_names(&client).await);
    click(&client, "#threads").await;

    // Callers and callees of a function, from its row; Back returns.
    let descend_total = {
        let rows = table_names(&client).await;
        column(&client, "total").await[rows
            .iter()
            .position(|r| r == "descend")
            .expect("descend row")]
    };
    eval(&client, "Array.from(document.querySelectorAll('#functions td.name a')).find(a => a.textContent === 'descend').click()").await;
    wait_for(&client, "heapdiffViewer.state.view === 'sandwich'").await;
    let roots: Vec<f64> =
        serde_json::from_value(eval(&client, "heapdiffViewer.sandwichRoots()").await).unwrap();
    assert_eq!(
        roots,
        [descend_total, descend_total],
        "callers and callees of descend"
    );
    assert!(
        eval(
            &client,
            "document.getElementById('sandwich-title').textContent"
        )
        .await
        .as_str()
        .unwrap()
        .starts_with("descend")
    );
    client.back().await.unwrap();
    wait_for(
        &client,
        "heapdiffViewer.state.view === 'flame' && !document.getElementById('graph').hidden",
    )
    .await;

    // Every view links its neighbours; `[` goes to the previous dump.
    assert!(link(&client, "diff with previous").await.is_some());
    assert!(
        link(&client, "diff with first")
            .await
            .unwrap()
            .contains(&format!("base={first}"))
    );
    assert!(
        link(&client, "next →").await.is_none(),
        "the exit dump is the last"
    );
    element(&client, "body").await.send_keys("[").await.unwrap();
    wait_for(
        &client,
        &format!(
            "location.search.includes({:?})",
            format!("dump={last_round}")
        ),
    )
    .await;
    viewer_ready(&client).await;
    assert!(link(&client, "next →").await.unwrap().contains(&exit));

    // A comparison: every column fits at 1280 and 1600 px, sorts, and
    // colours a change only where the reports find it significant.
    client.goto(&page(&exit, Some(&first))).await.unwrap();
    viewer_ready(&client).await;
    // A comparison opens sorted by self change: the leak on the first row.
    wait_for(&client, "document.querySelector('#functions th[data-column=dself]').getAttribute('aria-sort') === 'descending'").await;
    assert_eq!(
        table_names(&client).await.first().map(String::as_str),
        Some("Registry<…>::add"),
        "the leak first"
    );
    for width in [1280, 1600] {
        columns_fit(&client, width).await;
    }
    client.set_window_size(1400, 1000).await.unwrap();
    for name in ["dself", "dtotal", "btotal"] {
        sort_descending(&client, name).await;
        let values = column(&client, name).await;
        assert!(nonincreasing(&values), "{name}: {values:?}");
    }
    // Two dumps of one process: in-use changes rest on the live samples
    // only one of them has, in the page as in the reports.
    let (mut compared, mut noise) = check_significance_against_json(
        &client,
        &dir.join(&first),
        &dir.join(&exit),
        "shared-samples",
    )
    .await;
    // Two runs of the service compared (independent samples, exported to
    // a file): most changes are noise. The rows that change share one
    // sampled chain (the registry's 400 sessions of 4 KiB, each sampled with
    // probability 0.22 at lg 14), so one pair of runs shows no noise when
    // that chain's difference lands outside its 95 % interval: 3.8 % of
    // pairs (4·10⁵ simulated pairs of 400 sessions, the interval combined as
    // heapdiff does; 1 in 9 seen over a few runs). Up to four pairs are
    // compared until one shows noise, the last three of fresh runs, so a
    // false failure takes 0.038³ = 5.5·10⁻⁵ even if the first pair (against
    // this run's later dump) never showed noise, 2·10⁻⁶ if it is like the
    // others.
    let mut runs: (Outcome, Option<Outcome>) = (run_cpp_service(), None);
    for pair in 0..4 {
        let (base, new) = match &runs {
            (other, None) => (
                other.dir.path().join(manual_of(other, 10)),
                dir.join(&last_round),
            ),
            (one, Some(another)) => (
                one.dir.path().join(manual_of(one, 10)),
                another.dir.path().join(manual_of(another, 10)),
            ),
        };
        let exported = dir.join(format!("independent-{pair}.html"));
        heapdiff_ok(&[
            "--format",
            "html",
            "--base",
            base.to_str().unwrap(),
            new.to_str().unwrap(),
            "-o",
            exported.to_str().unwrap(),
        ]);
        open_file(&client, &exported).await;
        viewer_ready(&client).await;
        let (more, more_noise) =
            check_significance_against_json(&client, &base, &new, "independent").await;
        compared += more;
        noise += more_noise;
        if noise > 0 {
            break;
        }
        runs = (run_cpp_service(), Some(run_cpp_service()));
    }
    assert!(compared >= 10, "{compared} rows compared");
    assert!(noise >= 1, "no row changed within the noise");
    client.goto(&page(&exit, None)).await.unwrap();
    viewer_ready(&client).await;
    for width in [1280, 1600] {
        columns_fit(&client, width).await;
    }
    client.close().await.unwrap();

    // serve --full-names opens on whole signatures.
    drop(server);
    let full = Server::start_with(&[dir], |command| {
        command.arg("--full-names");
    });
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client
        .goto(&format!("{}/view?dump={exit}", full.url))
        .await
        .unwrap();
    viewer_ready(&client).await;
    assert_eq!(
        eval(&client, "document.getElementById('full-names').checked").await,
        json!(true)
    );
    assert!(
        table_names(&client)
            .await
            .iter()
            .any(|n| n == "Cache<double>::fill(unsigned long)")
    );
    client.close().await.unwrap();
}

/// The name of manual dump number `n` of a service run.
fn manual_of(run: &Outcome, n: u32) -> String {
    prof_names(run)
        .into_iter()
        .find(|name| name.ends_with(&format!(".m{n}.prof")))
        .unwrap_or_else(|| panic!("dump m{n} in {:?}", prof_names(run)))
}

/// In the comparison on the page, each change's colour (`td.dself`,
/// `td.dtotal`: grew, shrank or noise) matches what `heapdiff --format
/// json` says of its significance, for every function the two name alike.
/// The report's in-use variance rule must be `rule`. How many rows were
/// compared, and how many changed within the noise (the caller checks
/// there are some, so the check has teeth).
async fn check_significance_against_json(
    client: &Client,
    base: &std::path::Path,
    new: &std::path::Path,
    rule: &str,
) -> (usize, usize) {
    let json: Value = serde_json::from_str(&heapdiff_ok(&[
        "--format",
        "json",
        "--base",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
    ]))
    .expect("JSON report");
    assert_eq!(json["metrics"]["inuse-space"]["variance_rule"], json!(rule));
    let mut reports: HashMap<String, (bool, bool)> = HashMap::new();
    for change in json["metrics"]["inuse-space"]["changes"]
        .as_array()
        .unwrap()
    {
        let delta = &change["delta"];
        // Leave out changes whose interval ends next to zero: the page
        // rounds values, so a verdict on the edge may differ.
        let clear = |d: &Value| {
            let (low, high) = (d["low"].as_f64().unwrap(), d["high"].as_f64().unwrap());
            low.abs().min(high.abs()) > 1e-3 * (high - low).abs().max(1.0) || low == high
        };
        if clear(&delta["self"]) && clear(&delta["total"]) {
            reports.insert(
                change["name"].as_str().unwrap().to_string(),
                (
                    delta["self"]["significant"] == json!(true),
                    delta["total"]["significant"] == json!(true),
                ),
            );
        }
    }
    let rows = eval(
        client,
        "Array.from(document.querySelectorAll('#functions tbody tr')).map(tr => [tr.querySelector('td.name').textContent,
            tr.querySelector('td.dself').className, tr.querySelector('td.dtotal').className,
            parseFloat(tr.querySelector('td.dtotal').dataset.value), tr.className])",
    )
    .await;
    let rows: Vec<(String, String, String, f64, String)> = serde_json::from_value(rows).unwrap();
    let (mut compared, mut noise) = (0, 0);
    for (name, self_class, total_class, total_change, row_class) in &rows {
        let Some(&(self_significant, total_significant)) = reports.get(name) else {
            continue;
        };
        compared += 1;
        let coloured = |class: &str| class.contains("grew") || class.contains("shrank");
        assert_eq!(
            coloured(self_class),
            self_significant,
            "{name}: self {self_class}"
        );
        assert_eq!(
            coloured(total_class),
            total_significant,
            "{name}: total {total_class}"
        );
        assert_eq!(
            row_class.contains("growth") || row_class.contains("shrink"),
            total_significant,
            "{name}: row {row_class}"
        );
        if *total_change != 0.0 && !total_significant {
            noise += 1;
        }
    }
    (compared, noise)
}

#[tokio::test]
async fn cpython_stacks_threads_and_a_refused_comparison() {
    let python = run_python_service();
    let cpp = run_cpp_service();
    let server = Server::start(&[python.dir.path(), cpp.dir.path()]);
    let python_names = prof_names(&python);
    let peak = python_names
        .iter()
        .find(|n| n.ends_with(".m4.prof"))
        .expect("peak dump");
    let cpp_exit = prof_names(&cpp)
        .into_iter()
        .find(|n| n.contains(".f."))
        .expect("exit dump");
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    let python_id = format!("0%2F{peak}");
    client
        .goto(&format!("{}/view?dump={python_id}", server.url))
        .await
        .unwrap();
    viewer_ready(&client).await;
    let depth = eval(
        &client,
        "Math.round(document.getElementById('canvas').getBoundingClientRect().height / 16)",
    )
    .await;
    assert!(
        depth.as_u64().unwrap() > 60,
        "deep native stacks: {depth} rows"
    );
    root_on_screen(&client).await;
    // CPython names every thread after the process: three threads, three
    // roots, told apart by tid.
    click(&client, "#threads").await;
    wait_for(
        &client,
        "document.getElementById('legend').textContent.includes('thread')",
    )
    .await;
    let threads: Vec<String> = table_names(&client)
        .await
        .into_iter()
        .filter(|n| n.starts_with("[thread ") && n.contains(" tid "))
        .collect();
    assert!(threads.len() >= 3, "{threads:?}");

    // Python against C++: refused, as the command line refuses it.
    let mismatch = format!("{}/view?dump={python_id}&base=1%2F{cpp_exit}", server.url);
    let (status, _) = server.get(&mismatch[server.url.len()..]);
    assert_eq!(status, 422);
    client.goto(&mismatch).await.unwrap();
    let refusal = wait_for(
        &client,
        "document.getElementById('refusal') && document.getElementById('refusal').textContent",
    )
    .await;
    assert!(
        refusal
            .as_str()
            .unwrap()
            .contains("comparing different programs is meaningless"),
        "{refusal}"
    );
    click(&client, "#compare-anyway").await;
    viewer_ready(&client).await;
    assert!(eval(&client, "Array.from(document.querySelectorAll('#links a')).some(a => a.textContent.includes('different programs'))").await == json!(true));
    client.close().await.unwrap();
}

#[tokio::test]
async fn live_heap_numbers_are_reconciled_in_words() {
    // `echo` keeps stdout's buffer (4 KiB) live to the end; at a 4 MiB
    // period it is all but never sampled.
    let quiet = Run::new("/bin/echo")
        .arg("hello")
        .with_shim()
        .prof_conf("lg_prof_sample:22,prof_exact:true")
        .run();
    quiet.assert_success();
    let growth = serve_common::run_growth();
    let server = Server::start(&[quiet.dir.path(), growth.dir.path()]);
    let Some(driver) = start_driver() else {
        return;
    };
    let client = connect(&driver).await;
    client.goto(&format!("{}/", server.url)).await.unwrap();
    wait_for(&client, "document.querySelectorAll('tr.dump').length").await;
    let quiet_id = format!("0/{}", prof_names(&quiet)[0]);
    let row = eval(
        &client,
        &format!(
            "(() => {{ const tr = document.querySelector('tr[data-id=\"{quiet_id}\"]');
                return [tr.querySelector('td.live').textContent, tr.querySelector('td.exact').textContent,
                        tr.querySelector('td.agreement').textContent, tr.querySelector('td.live').title]; }})()"
        ),
    )
    .await;
    let row: Vec<String> = serde_json::from_value(row).unwrap();
    let listing: Value = serde_json::from_str(&server.get("/api/dumps").1).unwrap();
    let dump = listing["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["dumps"].as_array().unwrap())
        .find(|d| d["id"] == json!(quiet_id))
        .expect("the quiet dump listed")
        .clone();
    assert!(dump["live_exact"].as_u64().unwrap() >= 1024, "{dump}");
    assert!(
        !row[0].contains("(exact)"),
        "an estimate from no sample is not exact: {row:?}"
    );
    if dump["samples_live"] == json!(0) {
        assert_eq!(row[0], "0 B (no live sample)", "{row:?}");
        assert!(
            row[2].contains("no sample caught") && row[3].contains("No sampled object is live"),
            "{row:?}"
        );
    }
    // Every exact value is labelled usable bytes and reconciled in words.
    let header = eval(&client, "Array.from(document.querySelectorAll('table.dumps th')).map(th => th.textContent).join('|')").await;
    assert!(
        header
            .as_str()
            .unwrap()
            .contains("exact live (usable bytes)"),
        "{header}"
    );
    let notes = eval(
        &client,
        "Array.from(document.querySelectorAll('tr.dump td.live')).map(td => td.title)",
    )
    .await;
    for note in notes.as_array().unwrap() {
        let note = note.as_str().unwrap();
        assert!(note.contains("usable"), "{note}");
    }
    // The viewer's footer says the same.
    let growth_exit = prof_names(&growth)
        .into_iter()
        .find(|n| n.contains(".f."))
        .unwrap();
    client
        .goto(&format!("{}/view?dump=1%2F{growth_exit}", server.url))
        .await
        .unwrap();
    viewer_ready(&client).await;
    let footer = eval(&client, "document.getElementById('totals').textContent").await;
    let footer = footer.as_str().unwrap();
    assert!(
        footer.contains("counts usable bytes")
            && footer.contains("usable bytes per requested byte"),
        "{footer}"
    );
    client.close().await.unwrap();
}
