//! Whether a signal handler runs on a thread is decided from its live call
//! chain: a thread inside a handler that interrupted the C library outside
//! a wait is never taken (such a handler may have interrupted `malloc`);
//! one inside a handler that interrupted a wait is (a PostgreSQL 15
//! postmaster's children live inside its SIGCHLD handler), and so is one
//! that merely has stale copies of the signal trampoline's address on its
//! stack, left by handlers that returned (an idle PostgreSQL backend, a
//! shell in `wait4`).

mod attach_common;

use attach_common::{Driven, heapsample, heapsample_ok, stderr_of};
use heapsample_tests::{BuildOptions, TempDir, compile_c};

/// `heapsample attach PID -o OUT --timeout SECONDS`.
fn attach_args<'a>(pid: &'a str, out: &'a TempDir, seconds: &'a str) -> [&'a str; 6] {
    let out = out.path().to_str().unwrap();
    ["attach", pid, "-o", out, "--timeout", seconds]
}

/// Three rounds of attach, dump and detach, each of which must succeed.
fn attach_dump_detach_three_times(pid: &str, out: &TempDir) {
    for _ in 0..3 {
        heapsample_ok(&attach_args(pid, out, "1"));
        heapsample_ok(&["dump", pid, "--timeout", "1"]);
        heapsample_ok(&["detach", pid, "--timeout", "1"]);
    }
}

#[test]
fn stale_signal_frames_on_the_stack_are_no_handler() {
    let program = compile_c("attach_handler.c", &BuildOptions::no_pie());
    let out = TempDir::new("attach-stale-frames");
    let mut waiter = Driven::start(&program.path, &["stale"], &[]);
    let answer = waiter.answer();
    let stale: u32 = answer
        .strip_prefix("waiting ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"));
    // The trampoline's address lies above the waiting thread's stack
    // pointer: a search of the stack's words finds it.
    assert!(stale >= 1, "{answer}");
    let pid = waiter.pid_arg();
    attach_dump_detach_three_times(&pid, &out);
    waiter.send_only("end");
    assert!(waiter.finish().1.success());
}

#[test]
fn a_handler_that_interrupted_the_c_library_outside_a_wait() {
    // The signal comes from raise(), so the handler interrupted the C
    // library right after a system call that is no wait.
    let program = compile_c("attach_handler.c", &BuildOptions::no_pie());
    let out = TempDir::new("attach-in-handler");
    let mut waiter = Driven::start(&program.path, &["handler"], &[]);
    assert_eq!(waiter.answer(), "in handler");
    let pid = waiter.pid_arg();
    let refused = heapsample(&attach_args(&pid, &out, "0.5"));
    assert!(!refused.status.success());
    assert!(
        stderr_of(&refused).contains("in a signal handler"),
        "{}",
        stderr_of(&refused)
    );
    // Nothing was changed: the library is not even loaded.
    let status = heapsample(&["status", &pid]);
    assert!(
        stderr_of(&status).contains("is not profiled"),
        "{}",
        stderr_of(&status)
    );
    // Once the handler returned, the same thread is taken.
    assert_eq!(waiter.send("leave"), "returned");
    heapsample_ok(&attach_args(&pid, &out, "1"));
    heapsample_ok(&["detach", &pid, "--timeout", "1"]);
    waiter.send_only("end");
    let (transcript, status) = waiter.finish();
    assert!(status.success());
    assert_eq!(transcript, "in handler\nreturned\n");
}

/// A handler that interrupted a `read` (to restart it, or to fail it with
/// EINTR) and waits in `read` itself: the thread is taken, repeatedly, and
/// the program's `read` ends as it would have.
fn handler_over_a_wait(mode: &str, ended: &str) {
    let program = compile_c("attach_handler.c", &BuildOptions::no_pie());
    let out = TempDir::new(&format!("attach-handler-{mode}"));
    let mut waiter = Driven::start(&program.path, &[mode], &[]);
    assert_eq!(waiter.answer(), "in handler");
    let pid = waiter.pid_arg();
    attach_dump_detach_three_times(&pid, &out);
    assert_eq!(waiter.send("leave"), ended);
    waiter.send_only("end");
    let (_, status) = waiter.finish();
    assert!(status.success());
}

#[test]
fn a_handler_that_interrupted_a_restarting_wait() {
    handler_over_a_wait("in_wait", "returned restarted");
}

#[test]
fn a_handler_that_interrupted_a_failing_wait() {
    handler_over_a_wait("in_wait_eintr", "returned eintr");
}
