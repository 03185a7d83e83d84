//! Helpers shared by the browser tests: Debian's chromium driven through
//! chromedriver (fantoccini), and the programs whose dumps they look at:
//! a C++ service and a CPython service, each with a slow leak, a transient
//! peak and threads that share a name (`viewer_service.cpp`,
//! `viewer_service.py`), dumping at the end of every round and at the top
//! of the peak.

#![allow(dead_code)]

use fantoccini::{Client, ClientBuilder, Locator};
use heapsample_tests::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// chromedriver on a free port, killed when dropped.
pub struct Driver {
    child: Child,
    pub url: String,
    profile: TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.profile;
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// chromedriver started; `None` (a skip) when chromium is not installed.
pub fn start_driver() -> Option<Driver> {
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

/// Open the local file `page` (an exported HTML report) in `client`.
pub async fn open_file(client: &Client, page: &Path) {
    client
        .goto(&format!("file://{}", page.display()))
        .await
        .expect("open the page");
}

/// A headless browser session with a 1400×1000 window.
pub async fn connect(driver: &Driver) -> Client {
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
pub async fn wait_for(client: &Client, expression: &str) -> Value {
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

pub async fn eval(client: &Client, expression: &str) -> Value {
    client
        .execute(&format!("return ({expression});"), vec![])
        .await
        .unwrap_or_else(|e| panic!("{expression}: {e}"))
}

pub async fn element(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
}

pub async fn click(client: &Client, css: &str) {
    element(client, css).await.click().await.expect("click");
}

pub async fn clear(client: &Client, css: &str) {
    element(client, css).await.clear().await.expect("clear");
}

pub async fn select(client: &Client, css: &str, value: &str) {
    element(client, css)
        .await
        .select_by_value(value)
        .await
        .expect("select");
}

pub async fn type_into(client: &Client, css: &str, text: &str) {
    element(client, css)
        .await
        .send_keys(text)
        .await
        .expect("type");
}

/// WebDriver key codes.
pub const ENTER: &str = "\u{E007}";
pub const ESCAPE: &str = "\u{E00C}";
pub const ARROW_UP: &str = "\u{E013}";
pub const ARROW_RIGHT: &str = "\u{E014}";
pub const SHIFT_ARROW_RIGHT: &str = "\u{E008}\u{E014}";

/// The function names of the viewer's table, in order.
pub async fn table_names(client: &Client) -> Vec<String> {
    let names = eval(
        client,
        "Array.from(document.querySelectorAll('#functions tbody td.name')).map(td => td.textContent)",
    )
    .await;
    serde_json::from_value(names).expect("names")
}

/// The viewer's search: type `text`, the matched percentage.
pub async fn search(client: &Client, text: &str) -> f64 {
    let input = client
        .find(Locator::Id("search"))
        .await
        .expect("search box");
    input.clear().await.expect("clear");
    input
        .send_keys(&format!("{text}{ENTER}"))
        .await
        .expect("type");
    let percent = wait_for(client, "document.getElementById('matched').dataset.percent").await;
    percent
        .as_str()
        .expect("percent")
        .parse()
        .expect("a number")
}

/// The current URL.
pub async fn url(client: &Client) -> String {
    client.current_url().await.expect("url").to_string()
}

/// Wait until the viewer page has drawn its table.
pub async fn viewer_ready(client: &Client) {
    wait_for(
        client,
        "window.heapdiffViewer && document.querySelectorAll('#functions tbody tr').length > 2",
    )
    .await;
}

/// `viewer_service.cpp` under the shim at a sparse period (lg 14, exact
/// counters on, high-water dumps too): 10 round dumps, the peak dump, the
/// exit dump.
pub fn run_cpp_service() -> Outcome {
    let program = compile_cxx("viewer_service.cpp", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:14,prof_exact:true,prof_gdump:true,prof_gdump_step:8M")
        .run();
    outcome.assert_success();
    outcome
}

/// `viewer_service.py` under the shim (`PYTHONMALLOC=malloc`, lg 14, exact
/// counters on).
pub fn run_python_service() -> Outcome {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("programs/viewer_service.py");
    let outcome = Run::new("python3")
        .arg(&script)
        .env("PYTHONMALLOC", "malloc")
        .with_shim()
        .prof_conf("lg_prof_sample:14,prof_exact:true")
        .run();
    outcome.assert_success();
    outcome
}

/// The `.prof` files of an outcome, by name.
pub fn prof_names(outcome: &Outcome) -> Vec<String> {
    let mut names = outcome.dir.entries();
    names.retain(|n| n.ends_with(".prof"));
    names
}

/// The truth line of a service: the numbers after each word.
pub fn truth(outcome: &Outcome, word: &str) -> f64 {
    let words: Vec<&str> = outcome.stdout.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == word)
        .unwrap_or_else(|| panic!("{word} not in {:?}", outcome.stdout));
    words[at + 1].parse().expect("a number")
}
