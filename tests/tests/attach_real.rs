//! `heapsample attach` on real software: CPython (`PYTHONMALLOC=malloc`,
//! Debian's non-PIE `python3`, which makes its own PLT entry the global
//! `malloc`) growing a cache, and `redis-server` (on jemalloc) under
//! `redis-benchmark` load. Each is attached, dumped and detached while it
//! works; the growth since the attach is found, and the program goes on as
//! if never attached (the same output; the server answers throughout).

mod attach_common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use attach_common::{Driven, dump_now, heapsample_ok, installed, unattached};
use heapsample_tests::TempDir;
use heapsample_tests::format::Dump;

/// The dump's estimate of the live heap and its standard error.
fn live_estimate(dump: &Dump) -> (f64, f64) {
    let (bytes, variance) = dump.stacks.iter().fold((0.0, 0.0), |(b, v), s| {
        (b + s.live.bytes, v + s.live.bytes_variance)
    });
    (bytes, variance.sqrt())
}

#[test]
fn python_growing_cache() {
    let script = heapsample_tests::programs_dir().join("attach_cache.py");
    let script = script.to_str().unwrap();
    let python = std::path::Path::new("/usr/bin/python3");
    let env = [("PYTHONMALLOC", "malloc"), ("PYTHONDONTWRITEBYTECODE", "1")];
    let commands = ["grow 100", "grow 500", "grow 50", "end"];
    let (expected, expected_status) = unattached(python, &[script], &env, &commands);

    let out = TempDir::new("attach-python");
    let mut cache = Driven::start(python, &[script], &env);
    let pid = cache.pid_arg();
    assert_eq!(cache.send("grow 100"), "size 100");
    heapsample_ok(&[
        "attach",
        &pid,
        "-o",
        out.path().to_str().unwrap(),
        "--lg-sample",
        "14",
    ]);
    assert_eq!(cache.send("grow 500"), "size 600");
    let (_, dump) = dump_now(&pid);
    heapsample_ok(&["detach", &pid]);
    assert_eq!(cache.send("grow 50"), "size 650");
    assert_eq!(cache.send("end"), "done");
    let (transcript, status) = cache.finish();
    assert_eq!(transcript, expected);
    assert_eq!(status.code(), expected_status.code());

    // 500 bytes objects of 10,000 bytes (plus their 33-byte headers) since
    // the attach; the interpreter's own allocations in between are a few
    // tens of KiB. Four standard errors (the estimator is unbiased; a false
    // failure about once in 16,000 runs) plus 64 KiB for those.
    let truth = 500.0 * 10033.0;
    let (estimate, error) = live_estimate(&dump);
    assert!(
        (estimate - truth).abs() <= 4.0 * error + 65536.0,
        "live estimate {estimate:.0} ± {error:.0}, growth since the attach {truth}"
    );
}

/// A free port on the loopback interface.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().unwrap().port()
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli (installed by scripts/test.sh)");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn used_memory(port: u16) -> f64 {
    let info = redis_cli(port, &["info", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in {info:?}"))
}

#[test]
fn redis_under_benchmark_load() {
    if !installed("redis-server", "redis-server") || !installed("redis-benchmark", "redis-tools") {
        return;
    }
    let port = free_port();
    let out = TempDir::new("attach-redis");
    let mut server = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--dir", out.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .spawn()
        .expect("run redis-server (installed by scripts/test.sh)");
    let started = Instant::now();
    while redis_cli(port, &["ping"]) != "PONG" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = server.id().to_string();
    // Load: 400,000 SETs of 256-byte values on up to 200,000 keys.
    let mut benchmark = Command::new("redis-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "-t",
            "set",
            "-n",
            "400000",
            "-r",
            "200000",
        ])
        .args(["-d", "256", "-c", "20", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redis-benchmark");
    // The server must answer all along.
    let pinging = Arc::new(AtomicBool::new(true));
    let pinger = {
        let pinging = pinging.clone();
        std::thread::spawn(move || {
            let mut answers = 0;
            while pinging.load(Ordering::Relaxed) {
                assert_eq!(
                    redis_cli(port, &["ping"]),
                    "PONG",
                    "the server stopped answering"
                );
                answers += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            answers
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    heapsample_ok(&[
        "attach",
        &pid,
        "-o",
        out.path().to_str().unwrap(),
        "--lg-sample",
        "16",
    ]);
    let at_attach = used_memory(port);
    // Let the benchmark grow the heap by some 16 MB under the profiler,
    // however fast or loaded the machine (it ends some 70 MB above empty).
    let growing = Instant::now();
    while used_memory(port) - at_attach < 16e6
        && growing.elapsed() < Duration::from_secs(60)
        && benchmark.try_wait().is_ok_and(|ended| ended.is_none())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, dump) = dump_now(&pid);
    let at_dump = used_memory(port);
    heapsample_ok(&["detach", &pid]);
    let benchmark = benchmark.wait_with_output().expect("redis-benchmark");
    pinging.store(false, Ordering::Relaxed);
    let answers = pinger.join().expect("every ping answered");
    assert!(benchmark.status.success(), "{benchmark:?}");
    assert!(answers > 10);
    assert_eq!(redis_cli(port, &["ping"]), "PONG");
    let _ = server.kill();
    let _ = server.wait();

    // The growth since the attach, as the server counts it (jemalloc's
    // allocated bytes), against the dump's live estimate, which counts
    // requested bytes: within a factor of two either way.
    let growth = at_dump - at_attach;
    let (estimate, error) = live_estimate(&dump);
    eprintln!("redis: live estimate {estimate:.0} ± {error:.0}, used_memory grew {growth}");
    assert!(
        growth > 4e6,
        "the benchmark grew the heap by only {growth} bytes"
    );
    assert!(
        (0.5 * growth..2.0 * growth).contains(&estimate),
        "live estimate {estimate:.0}, server's growth {growth}"
    );
}
