//! Helpers shared by the `heapdiff serve` tests: a growing program run under
//! the shim, a server process on a free port, and a plain HTTP/1.1 client
//! that can send what a browser would not.

#![allow(dead_code)]

use heapsample_tests::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `serve_growth.c` under the shim: every allocation sampled (the numbers
/// are exact), exact counters on, a dump per MiB allocated and at exit.
pub fn run_growth() -> Outcome {
    let program = compile_c("serve_growth.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_exact:true,lg_prof_interval:20,prof_final:true")
        .run();
    outcome.assert_success();
    outcome
}

/// A running `heapdiff serve`, killed when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub url: String,
    pub port: u16,
}

impl Server {
    /// Serve `paths` on a free loopback port; waits for the printed URL.
    pub fn start(paths: &[&Path]) -> Server {
        Server::start_with(paths, |_| {})
    }

    /// As [`Server::start`], the command changed by `configure` first
    /// (more arguments, limits).
    pub fn start_with(paths: &[&Path], configure: impl FnOnce(&mut Command)) -> Server {
        let mut command = Command::new(heapdiff_path());
        command
            .arg("serve")
            .args(paths)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        configure(&mut command);
        let mut child = command.spawn().expect("start heapdiff serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the server's first line");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .trim_end_matches('/')
            .to_string();
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        Server { child, url, port }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the server process runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Send `request` as is (a full HTTP request) and return the status
    /// code and body.
    pub fn raw(&self, request: &str) -> (u16, String) {
        raw_request(self.port, request)
    }

    /// `GET path` (already encoded as it should go on the wire).
    pub fn get(&self, path: &str) -> (u16, String) {
        get_at(self.port, path)
    }
}

/// Send `request` as is to the server on loopback port `port` and return
/// the status code (0: no answer within a minute) and body.
pub fn raw_request(port: u16, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// `GET path` from the server on loopback port `port`.
pub fn get_at(port: u16, path: &str) -> (u16, String) {
    raw_request(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    )
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The total% column of `function` in `heapdiff --format text`.
pub fn text_total_percent(report: &str, function: &str) -> f64 {
    let section = report
        .split("\n\n")
        .find(|s| s.contains("functions by total"))
        .expect("a total table");
    let line = section
        .lines()
        .find(|l| l.trim_end().ends_with(&format!("  {function}")))
        .unwrap_or_else(|| panic!("{function} not in\n{section}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields[3].trim_end_matches('%').parse().expect("total%")
}

/// The interval dumps and the exit dump of an outcome, oldest first.
pub fn dump_names(outcome: &Outcome) -> Vec<String> {
    let mut names = outcome.dir.entries();
    names.retain(|n| n.ends_with(".prof"));
    names
}
