//! `heapsample` on idle processes: a program waiting in each blocking
//! call a server idles in (single-threaded, and with three more threads
//! idling in `nanosleep`, `pthread_cond_wait` and `read`) is attached,
//! asked for its status, dumped three times, stopped, started, detached,
//! attached again and detached. Every command succeeds within 1 s (each
//! is given `--timeout 1`, and its whole run is timed too), and every wait
//! of the program ends when it would have without the profiler: never
//! before its time, never with an EINTR the program would not have seen,
//! and late only by what the thread was held stopped for.

mod attach_common;

use attach_common::{Driven, heapsample, idle_sequence};
use heapsample_tests::{BuildOptions, TempDir, compile_c};

/// The length of each of the program's waits: longer than a command's
/// 1 s timeout, so that a command cannot succeed by waiting for the next
/// wait to begin.
const WAIT_MS: u64 = 1500;

/// How much later than its time a wait may end. A wait that keeps an
/// absolute deadline (the kernel's restart block, an absolute timeout, a
/// helper acting at a time) ends late by the time its thread is held
/// stopped at its deadline (a few milliseconds: the commands print it);
/// `ppoll`, `select` and `pselect6` restart with the remaining time the
/// kernel wrote back, so they end late by the sum of the stops during the
/// wait (ten commands of a few milliseconds each); add the scheduler's
/// delay in waking it, which the same wait suffers without the profiler.
/// 500 ms is missed only if a loaded machine leaves a runnable thread
/// unscheduled for a large part of half a second: measured at most 42 ms
/// late (select, with three threads) over the 60 waits of one run at a
/// load average of 8–10 on 2 cores, most under 2 ms.
const LATE_BOUND_US: i64 = 500_000;

/// The program's report: waits, short ones, least and most microseconds
/// late, EINTRs.
fn parse_report(line: &str) -> (u64, u64, i64, i64, u64) {
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        (fields.len(), fields[0], fields[2], fields[4], fields[7]),
        (9, "waits", "short", "over_us", "eintr"),
        "{line}"
    );
    let number = |at: usize| fields[at].parse::<i64>().unwrap();
    (
        number(1) as u64,
        number(3) as u64,
        number(5),
        number(6),
        number(8) as u64,
    )
}

fn idle_in(mode: &str) {
    idle_in_restarting(mode, false);
}

/// `epoll_wait` with its own timeout: a stop makes the kernel fail it with
/// EINTR and keeps no deadline, so it restarts with its timeout counted in
/// full. It then ends at most its timeout after the last stop, which comes
/// before the sequence's end, and it began at most its timeout before the
/// sequence: late by at most the sequence's time and one timeout more
/// (plus `LATE_BOUND_US` for the scheduler, as for the other waits).
#[test]
fn epoll_timeout() {
    idle_in_restarting("epoll_timeout", true);
}

fn idle_in_restarting(mode: &str, restarts_in_full: bool) {
    let program = compile_c("idle_waits.c", &BuildOptions::no_pie());
    // A single-threaded and a multi-threaded one, started together so that
    // both sequences fall inside their first wait (longer than a command's
    // 1 s timeout: a thread left in `restart_syscall` by the first command
    // must be a safe point for the next ones, not merely be waited out).
    let ms = WAIT_MS.to_string();
    let runs: Vec<(&str, TempDir, Driven)> = ["0", "3"]
        .into_iter()
        .map(|threads| {
            let dir = TempDir::new(&format!("idle-{mode}-{threads}"));
            let stop_file = dir.path().join("stop");
            let waiter = Driven::start(
                &program.path,
                &[mode, &ms, threads, stop_file.to_str().unwrap()],
                &[],
            );
            (threads, dir, waiter)
        })
        .collect();
    for (threads, dir, mut waiter) in runs {
        assert_eq!(waiter.answer(), "ready");
        let out = dir.path().join("out");
        let sequence_started = std::time::Instant::now();
        let timings = idle_sequence(&waiter.pid_arg(), &out);
        let sequence_us = sequence_started.elapsed().as_micros() as i64;
        let late_bound_us = match restarts_in_full {
            false => LATE_BOUND_US,
            true => LATE_BOUND_US + sequence_us + WAIT_MS as i64 * 1000,
        };
        std::fs::write(dir.path().join("stop"), "").unwrap();
        let report = waiter.answer();
        let (transcript, status) = waiter.finish();
        assert!(status.success(), "{mode}: {status}: {transcript}");
        let (waits, short, least, most, eintr) = parse_report(&report);
        let slowest = timings.iter().map(|t| t.1).max().unwrap();
        eprintln!(
            "{mode} threads {threads}: slowest command {:.1} ms ({}); {waits} waits of {WAIT_MS} ms \
             ended {:.1}..{:.1} ms late",
            slowest.as_secs_f64() * 1e3,
            timings
                .iter()
                .map(|(name, took)| format!("{name} {:.1}", took.as_secs_f64() * 1e3))
                .collect::<Vec<_>>()
                .join(", "),
            least as f64 / 1e3,
            most as f64 / 1e3,
        );
        assert!(waits >= 1, "{mode}: {report}");
        assert_eq!(short, 0, "{mode}: a wait ended before its time: {report}");
        assert_eq!(eintr, 0, "{mode}: the program saw EINTR: {report}");
        assert!(
            most <= late_bound_us,
            "{mode}: a wait ended {most} µs late: {report}"
        );
    }
}

macro_rules! idle_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                idle_in(stringify!($name));
            }
        )*
    };
}

idle_tests!(
    nanosleep,
    clock_nanosleep,
    poll,
    ppoll,
    select,
    pselect6,
    epoll_wait,
    epoll_pwait,
    epoll_pwait2,
    futex,
    cond_timedwait,
    read,
    recvmsg,
    accept4,
    wait4,
    waitid,
    pause,
    sigsuspend,
    sigtimedwait,
);

/// Attached by root, a process of another user (`nobody`) gets an output
/// directory it can write: a new one is created owned by it, one it cannot
/// write is refused before anything changes, and a later attach without
/// options dumps into the first directory while one with another `-o`
/// says what to do.
#[test]
fn another_users_process() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        heapsample_tests::skip(heapsample_tests::Missing::Privilege(
            "attaching to another user's process needs root (CI runs as root)",
        ));
        return;
    }
    if !attach_common::installed("setpriv", "util-linux") {
        return;
    }
    let program = compile_c("idle_waits.c", &BuildOptions::no_pie());
    let dir = TempDir::new("idle-nobody");
    let stop_file = dir.path().join("stop");
    let ms = WAIT_MS.to_string();
    let mut waiter = Driven::start(
        std::path::Path::new("setpriv"),
        &[
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            program.path.to_str().unwrap(),
            "nanosleep",
            &ms,
            "0",
            stop_file.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(waiter.answer(), "ready");
    let pid = waiter.pid_arg();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    let uid: u32 = uid_line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_ne!(uid, 0, "{uid_line}");

    // A directory root owns and the target cannot write: refused, nothing
    // loaded.
    let roots = dir.path().join("roots");
    std::fs::create_dir(&roots).unwrap();
    let refused = heapsample(&["attach", &pid, "-o", roots.to_str().unwrap()]);
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        message.contains(&format!("runs as uid {uid}")) && message.contains("cannot write into"),
        "{message}"
    );
    let unprofiled = heapsample(&["status", &pid]);
    assert!(
        String::from_utf8_lossy(&unprofiled.stderr).contains("is not profiled"),
        "{unprofiled:?}"
    );

    // A new directory (two levels): created for the target, which dumps
    // into it.
    let first = dir.path().join("new").join("dumps");
    attach_common::heapsample_ok(&["attach", &pid, "-o", first.to_str().unwrap()]);
    let (path, _) = attach_common::dump_now(&pid);
    assert_eq!(path.parent(), Some(first.as_path()));
    use std::os::unix::fs::MetadataExt;
    for made in [first.as_path(), first.parent().unwrap(), path.as_path()] {
        assert_eq!(
            std::fs::metadata(made).unwrap().uid(),
            uid,
            "{}",
            made.display()
        );
    }
    attach_common::heapsample_ok(&["detach", &pid]);

    // Another -o later: refused with what to do; without options: the
    // first directory again.
    let second = dir.path().join("second");
    let refused = heapsample(&["attach", &pid, "-o", second.to_str().unwrap()]);
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        message.contains(&format!("dumps in {}", first.display()))
            && message.contains("attach again without options"),
        "{message}"
    );
    attach_common::heapsample_ok(&["attach", &pid]);
    let (again, _) = attach_common::dump_now(&pid);
    assert_eq!(again.parent(), Some(first.as_path()));
    attach_common::heapsample_ok(&["detach", &pid]);

    std::fs::write(&stop_file, "").unwrap();
    let report = waiter.answer();
    let (_, status) = waiter.finish();
    assert!(status.success());
    let (_, short, _, _, eintr) = parse_report(&report);
    assert_eq!((short, eintr), (0, 0), "{report}");
}
