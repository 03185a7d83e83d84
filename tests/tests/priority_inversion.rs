//! A real-time thread that allocates never waits long for the profiler:
//! a SCHED_FIFO thread timing malloc/free pairs (and short-lived FIFO
//! threads timing their first pair, which sets them up in the profiler and
//! takes its locks) shares one CPU with a thread writing dumps in a loop.
//! Were an allocation to spin on a lock held by the preempted dumping
//! thread, it would wait until the kernel throttles real-time threads
//! (50 ms a second by default); the profiler's locks instead wait with
//! priority inheritance, so the wait is bounded by the dumper's critical
//! section (microseconds).
//!
//! A counted skip (see `prerequisite`) where SCHED_FIFO is not permitted.

use heapsample_tests::*;

/// The worst pair may exceed the worst pair of the same program without
/// the shim by at most this much: far below a throttling period (50 ms) and
/// far above a dump's critical sections and the noise of a shared machine.
const SLACK_NS: u64 = 10_000_000;

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|item| item.strip_prefix(&format!("{name}=")))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
}

#[test]
fn a_real_time_allocator_never_waits_for_the_dumping_thread() {
    let program = compile_c(
        "rt_inversion.c",
        &BuildOptions {
            extra_flags: vec!["-lpthread".into(), "-ldl".into()],
            ..BuildOptions::no_pie()
        },
    );
    let plain = Run::program(&program).arg("1").run();
    plain.assert_success();
    let plain_line = plain
        .stdout
        .lines()
        .find(|l| l.starts_with("rt "))
        .unwrap_or_default();
    if plain_line.contains("policy=none") {
        return skip(Missing::Privilege("SCHED_FIFO is not permitted here"));
    }
    let plain_worst = field(plain_line, "max_ns").max(field(plain_line, "first_max_ns"));
    for conf in ["lg_prof_sample:0", "", "lg_prof_sample:14"] {
        let outcome = Run::program(&program)
            .arg("1")
            .with_shim()
            .prof_conf(format!("{conf},prof_final:false").trim_start_matches(','))
            .run();
        outcome.assert_success();
        let line = outcome
            .stdout
            .lines()
            .find(|l| l.starts_with("rt "))
            .unwrap_or_else(|| panic!("no result line\n{}", outcome.context()));
        eprintln!("PROF_CONF={conf:?}: {line} (without the shim: {plain_line})");
        assert!(
            field(line, "dumps") > 10,
            "the dumping thread hardly ran: {line}"
        );
        for name in ["max_ns", "first_max_ns"] {
            let worst = field(line, name);
            assert!(
                worst <= plain_worst + SLACK_NS,
                "PROF_CONF={conf:?}: {name} {worst} ns, without the shim {plain_worst} ns\n{}",
                outcome.context()
            );
        }
    }
}
