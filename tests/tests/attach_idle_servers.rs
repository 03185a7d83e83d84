//! Real servers idling with no work: `redis-server`, and a PostgreSQL 15
//! cluster (its postmaster, its background processes and one client
//! backend, a `psql` session left idle) run as another user (`nobody`)
//! while the test runs as root. Each process takes the idle sequence
//! (attach, status, dump ×3, stop, start, detach, attach, detach: each
//! command within 1 s), the dumps land in a directory the server's user
//! can write, and the server answers afterwards as before.

mod attach_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use attach_common::{idle_sequence, installed};
use heapsample_tests::TempDir;

/// A free port on the loopback interface.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().unwrap().port()
}

fn report(server: &str, pid: &str, timings: &[(&str, Duration)]) {
    eprintln!(
        "{server} {pid}: {}",
        timings
            .iter()
            .map(|(name, took)| format!("{name} {:.1}", took.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
fn redis_idle() {
    if !installed("redis-server", "redis-server") || !installed("redis-cli", "redis-tools") {
        return;
    }
    let port = free_port().to_string();
    let dir = TempDir::new("idle-redis");
    let mut server = Command::new("redis-server")
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
        .args(["--appendonly", "no", "--dir", dir.path().to_str().unwrap()])
        .stdout(Stdio::null())
        .spawn()
        .expect("run redis-server");
    let ping = || {
        let output = Command::new("redis-cli")
            .args(["-p", &port, "ping"])
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let started = Instant::now();
    while ping() != "PONG" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = server.id().to_string();
    let timings = idle_sequence(&pid, &dir.path().join("out"));
    report("redis-server", &pid, &timings);
    assert_eq!(ping(), "PONG");
    let _ = server.kill();
    let _ = server.wait();
}

/// `command` run as `nobody` when this test runs as root (PostgreSQL
/// refuses to run as root), as this user otherwise.
fn as_server_user(program: &str) -> Command {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let mut command = Command::new("setpriv");
        command.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            program,
        ]);
        command
    } else {
        Command::new(program)
    }
}

/// The processes whose parent is `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rfind(')')
            .and_then(|at| stat[at + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(parent) {
            children.push(pid);
        }
    }
    children.sort();
    children
}

#[test]
fn postgresql_idle() {
    let bin = std::path::Path::new("/usr/lib/postgresql/15/bin");
    if !bin.join("initdb").exists() {
        heapsample_tests::skip(heapsample_tests::Missing::Software(
            "PostgreSQL 15 is not installed (apt-get install postgresql)",
        ));
        return;
    }
    if !installed("setpriv", "util-linux") || !installed("psql", "postgresql-client") {
        return;
    }
    let dir = TempDir::new("idle-postgres");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let status = Command::new("chown")
            .args(["nobody:nogroup", dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let data = dir.path().join("data");
    let socket_dir = dir.path().to_str().unwrap().to_string();
    let port = free_port().to_string();
    let initdb = as_server_user(bin.join("initdb").to_str().unwrap())
        .args([
            "-D",
            data.to_str().unwrap(),
            "-A",
            "trust",
            "-U",
            "postgres",
        ])
        .arg("--no-sync")
        .output()
        .expect("run initdb");
    assert!(initdb.status.success(), "{initdb:?}");
    let options = format!("-p {port} -k {socket_dir} -c listen_addresses=''");
    let log = dir.path().join("log");
    let start = as_server_user(bin.join("pg_ctl").to_str().unwrap())
        .args(["start", "-w", "-D", data.to_str().unwrap()])
        .args(["-l", log.to_str().unwrap(), "-o", &options])
        .output()
        .expect("run pg_ctl");
    assert!(start.status.success(), "{start:?}");
    let psql = |extra: &[&str]| {
        let mut command = as_server_user("psql");
        command.args(["-h", &socket_dir, "-p", &port, "-U", "postgres", "-qtA"]);
        command.args(extra);
        command
    };
    // One client session left idle: its backend waits in epoll_wait.
    let mut session = psql(&[])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("run psql");
    let postmaster: i32 = std::fs::read_to_string(data.join("postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let started = Instant::now();
    let mut processes = children_of(postmaster);
    // The checkpointer, background writer, WAL writer, autovacuum launcher,
    // logical replication launcher and the session's backend.
    while processes.len() < 6 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the postmaster has only {processes:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        processes = children_of(postmaster);
    }
    std::thread::sleep(Duration::from_millis(200));
    processes.insert(0, postmaster);
    let out = dir.path().join("out");
    for pid in &processes {
        let pid = pid.to_string();
        let name = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .replace('\0', " ");
        let timings = idle_sequence(&pid, &out);
        report(name.trim(), &pid, &timings);
    }
    // The dumps are the server's user's, in a directory made for it.
    let dumps = std::fs::read_dir(&out).unwrap().count();
    assert_eq!(dumps, 3 * processes.len(), "dumps in {}", out.display());
    let answer = psql(&["-c", "select 40 + 2"]).output().expect("run psql");
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout).trim(),
        "42",
        "{answer:?}"
    );
    drop(session.stdin.take());
    assert!(session.wait().unwrap().success());
    let stop = as_server_user(bin.join("pg_ctl").to_str().unwrap())
        .args(["stop", "-m", "fast", "-w", "-D", data.to_str().unwrap()])
        .output()
        .expect("run pg_ctl stop");
    assert!(stop.status.success(), "{stop:?}");
}
