//! Whether a signal handler runs on a thread is decided from its live call
//! chain: a thread waiting inside a handler is never taken (the handler
//! may have interrupted `malloc`), while one that merely has stale copies
//! of the signal trampoline's address on its stack, left by handlers that
//! returned (an idle PostgreSQL backend, a shell in `wait4`), is.

mod attach_common;

use attach_common::{Driven, heapsample, heapsample_ok, stderr_of};
use heapsample_tests::{BuildOptions, TempDir, compile_c};

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
    for _ in 0..3 {
        heapsample_ok(&[
            "attach",
            &pid,
            "-o",
            out.path().to_str().unwrap(),
            "--timeout",
            "1",
        ]);
        heapsample_ok(&["dump", &pid, "--timeout", "1"]);
        heapsample_ok(&["detach", &pid, "--timeout", "1"]);
    }
    waiter.send_only("end");
    assert!(waiter.finish().1.success());
}

#[test]
fn a_thread_waiting_in_a_handler_is_not_taken() {
    let program = compile_c("attach_handler.c", &BuildOptions::no_pie());
    let out = TempDir::new("attach-in-handler");
    let mut waiter = Driven::start(&program.path, &["handler"], &[]);
    assert_eq!(waiter.answer(), "in handler");
    let pid = waiter.pid_arg();
    let refused = heapsample(&[
        "attach",
        &pid,
        "-o",
        out.path().to_str().unwrap(),
        "--timeout",
        "0.5",
    ]);
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
    heapsample_ok(&[
        "attach",
        &pid,
        "-o",
        out.path().to_str().unwrap(),
        "--timeout",
        "1",
    ]);
    heapsample_ok(&["detach", &pid, "--timeout", "1"]);
    waiter.send_only("end");
    let (transcript, status) = waiter.finish();
    assert!(status.success());
    assert_eq!(transcript, "in handler\nreturned\n");
}
