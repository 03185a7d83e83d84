//! A process waiting in `epoll_wait` and receiving signals while it is
//! attached to and detached from, over and over: an `epoll_wait` the stop
//! interrupted restarts instead of failing with EINTR (which it would
//! never have done unattached), and every real-time signal sent meanwhile
//! is delivered, none lost (real-time signals queue, so each one counts).

mod attach_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use attach_common::{Driven, heapsample_ok};
use heapsample_tests::{BuildOptions, TempDir, compile_c};

#[test]
fn an_interrupted_epoll_wait_restarts() {
    let program = compile_c("attach_waits.c", &BuildOptions::no_pie());
    let out = TempDir::new("attach-epoll");
    let mut waiter = Driven::start(&program.path, &[], &[]);
    assert_eq!(waiter.answer(), "ready");
    let pid = waiter.pid_arg();
    for _ in 0..20 {
        heapsample_ok(&["attach", &pid, "-o", out.path().to_str().unwrap()]);
        heapsample_ok(&["status", &pid]);
        heapsample_ok(&["detach", &pid]);
    }
    assert_eq!(waiter.send("count"), "signals 0 eintr 0");
    waiter.send_only("end");
    assert!(waiter.finish().1.success());
}

#[test]
fn signals_sent_during_attaches_are_all_delivered() {
    let program = compile_c("attach_waits.c", &BuildOptions::no_pie());
    let out = TempDir::new("attach-signals");
    let mut waiter = Driven::start(&program.path, &[], &[]);
    assert_eq!(waiter.answer(), "ready");
    let pid = waiter.pid();
    let sending = Arc::new(AtomicBool::new(true));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (sending, sent) = (sending.clone(), sent.clone());
        std::thread::spawn(move || {
            while sending.load(Ordering::Relaxed) {
                // SAFETY: sigqueue to our own child with a zeroed value.
                let queued =
                    unsafe { libc::sigqueue(pid, libc::SIGRTMIN() + 1, std::mem::zeroed()) };
                if queued == 0 {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    let pid_arg = pid.to_string();
    for _ in 0..20 {
        heapsample_ok(&["attach", &pid_arg, "-o", out.path().to_str().unwrap()]);
        heapsample_ok(&["detach", &pid_arg]);
    }
    sending.store(false, Ordering::Relaxed);
    sender.join().unwrap();
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent > 100, "only {sent} signals sent");
    // Let the last ones land, then ask.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let answer = waiter.send("count");
    let received: u64 = answer.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(received, sent, "{answer}");
    waiter.send_only("end");
    assert!(waiter.finish().1.success());
}
