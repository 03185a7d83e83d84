//! What `heapsample attach` refuses, each with one clear line and the
//! target unchanged (the library not loaded, the program going on as
//! before): no such process, no permission to trace (another user's
//! process without CAP_SYS_PTRACE), another tracer, a statically linked
//! program, an allocator linked into the program, a musl program, a process
//! that exits during the attach, no safe point within the timeout, a
//! process already profiled (preloaded, or attached), options an attach
//! cannot honour. Yama's refusals are unit tests of the command (this
//! kernel has no Yama).

mod attach_common;

use std::process::{Command, Stdio};

use attach_common::{Driven, heapsample, heapsample_ok, heapsample_path, installed, stderr_of};
use heapsample_tests::{BuildOptions, Program, TempDir, compile_c, shim_path};

fn leaker() -> Program {
    compile_c("attach_leaker.c", &BuildOptions::no_pie())
}

/// `heapsample attach PID ARGS` fails with status 1 and one line on
/// stderr containing `expected`; returns the line.
fn refused(pid: &str, args: &[&str], expected: &str) -> String {
    let mut all = vec!["attach", pid];
    all.extend_from_slice(args);
    let output = heapsample(&all);
    let stderr = stderr_of(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "attach {pid} {args:?}: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("heapsample: "), "{stderr}");
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
    stderr
}

/// The target has not loaded the library.
fn unchanged(pid: &str) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    assert!(
        !maps.contains("libheapsample"),
        "the library was loaded into {pid}"
    );
}

/// A leaker that answers and ends normally after a refusal.
fn still_works(mut target: Driven) {
    assert!(target.send("leak 10").starts_with("leaked "));
    assert!(target.send("end").starts_with("checksum "));
    let (_, status) = target.finish();
    assert!(status.success());
}

#[test]
fn no_such_process_and_options_an_attach_cannot_honour() {
    refused("999999999", &[], "no process 999999999");
    let target = Driven::start(&leaker().path, &[], &[]);
    let pid = target.pid_arg();
    refused(
        &pid,
        &["--conf", "prof_exact:true"],
        "prof_exact needs every block's allocation",
    );
    refused(
        &pid,
        &["--conf", "prof_signal:USR2"],
        "use `heapsample dump PID` instead",
    );
    refused(
        &pid,
        &["--conf", "lg_prof_sample:x"],
        "lg_prof_sample:x is not an integer",
    );
    unchanged(&pid);
    still_works(target);
}

#[test]
fn another_users_process_without_the_capability() {
    if !installed("capsh", "libcap2-bin") || !installed("setpriv", "util-linux") {
        return;
    }
    // The target runs as nobody; the command as root without CAP_SYS_PTRACE.
    let program = leaker();
    let mut target = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&program.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("setpriv (util-linux)");
    let pid = target.id().to_string();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let output = Command::new("capsh")
        .arg("--drop=cap_sys_ptrace")
        .arg("--")
        .arg("-c")
        .arg(format!("exec {} attach {pid}", heapsample_path().display()))
        .output()
        .expect("capsh (libcap2-bin)");
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("belongs to another user (uid 65534)") && stderr.contains("CAP_SYS_PTRACE"),
        "{stderr}"
    );
    unchanged(&pid);
    drop(target.stdin.take());
    assert_eq!(
        target.wait().unwrap().code(),
        Some(1),
        "ended at end of input, as ever"
    );
}

#[test]
fn another_tracer() {
    let target = Driven::start(&leaker().path, &[], &[]);
    let pid = target.pid_arg();
    let tracer_program = compile_c("attach_tracer.c", &BuildOptions::no_pie());
    let mut tracer = Driven::start(&tracer_program.path, &[&pid], &[]);
    assert_eq!(tracer.answer(), "tracing");
    refused(&pid, &[], &format!("is traced by process {}", tracer.pid()));
    unchanged(&pid);
    let _ = tracer.finish();
    still_works(target);
}

#[test]
fn statically_linked_program() {
    let program = compile_c(
        "attach_leaker.c",
        &BuildOptions {
            extra_flags: vec!["-static".into()],
            ..BuildOptions::no_pie()
        },
    );
    let target = Driven::start(&program.path, &[], &[]);
    let pid = target.pid_arg();
    refused(&pid, &[], "is statically linked");
    still_works(target);
}

#[test]
fn allocator_linked_into_the_program() {
    let program = compile_c("attach_own_malloc.c", &BuildOptions::no_pie());
    let mut target = Driven::start(&program.path, &[], &[]);
    let pid = target.pid_arg();
    assert_eq!(target.send("hello"), "hello");
    refused(
        &pid,
        &[],
        "has its allocator linked into the program (malloc in ",
    );
    unchanged(&pid);
    assert_eq!(target.send("again"), "again");
    target.send_only("end");
    assert!(target.finish().1.success());
}

#[test]
fn musl_program() {
    if !installed("musl-gcc", "musl-tools") {
        return;
    }
    let dir = TempDir::new("attach-musl");
    let binary = dir.path().join("leaker-musl");
    let source = heapsample_tests::programs_dir().join("attach_leaker.c");
    let status = Command::new("musl-gcc")
        .args(["-O1", "-o"])
        .arg(&binary)
        .arg(&source)
        .status()
        .expect("musl-gcc (musl-tools, installed by scripts/test.sh)");
    assert!(status.success());
    let target = Driven::start(&binary, &[], &[]);
    let pid = target.pid_arg();
    refused(&pid, &[], "runs on musl, not glibc");
    still_works(target);
}

#[test]
fn no_safe_point_then_exit_during_the_attach() {
    let program = compile_c("attach_stuck.c", &BuildOptions::no_pie());
    // Stuck for good: the attach gives up at its timeout.
    let mut stuck = Driven::start(&program.path, &["0"], &[]);
    assert_eq!(stuck.answer(), "stuck");
    let pid = stuck.pid_arg();
    wait_until_deadlocked(&pid);
    refused(
        &pid,
        &["--timeout", "1"],
        "reached a safe point within 1.0 s",
    );
    unchanged(&pid);
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    assert!(!state.contains(") T"), "left stopped: {state}");
    // SAFETY: ending our own child.
    unsafe { libc::kill(stuck.pid(), libc::SIGKILL) };
    let _ = stuck.finish();
    // Stuck until an alarm ends it after a second, during the attach.
    let mut ending = Driven::start(&program.path, &["1"], &[]);
    assert_eq!(ending.answer(), "stuck");
    let pid = ending.pid_arg();
    wait_until_deadlocked(&pid);
    refused(&pid, &["--timeout", "10"], "exited during the attach");
    let (_, status) = ending.finish();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGALRM),
        "ended by its alarm, as ever"
    );
}

/// Wait until both threads of `attach_stuck` wait in `futex`.
fn wait_until_deadlocked(pid: &str) {
    for _ in 0..500 {
        let blocked = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .flatten()
                    .map(|task| {
                        std::fs::read_to_string(task.path().join("syscall")).unwrap_or_default()
                    })
                    .filter(|syscall| syscall.starts_with("202 "))
                    .count()
            })
            .unwrap_or(0);
        if blocked == 2 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    panic!("process {pid} did not deadlock");
}

#[test]
fn a_process_profiled_already() {
    let program = leaker();
    let out = TempDir::new("attach-twice");
    let dir = out.path().to_str().unwrap();
    let shim = shim_path();
    let conf = format!("prof_final:false,prof_prefix:{dir}/heapsample");
    let preload = [
        ("LD_PRELOAD", shim.to_str().unwrap()),
        ("PROF_CONF", conf.as_str()),
    ];
    let mut preloaded = Driven::start(&program.path, &[], &preload);
    let pid = preloaded.pid_arg();
    assert_eq!(preloaded.send("leak 1"), "leaked 1");
    refused(
        &pid,
        &["-o", dir],
        "profiled already: it started with the profiler preloaded",
    );
    // The control commands work on a preloaded process too.
    let status = heapsample_ok(&["status", &pid]);
    assert!(status.contains("mode: preloaded"), "{status}");
    let (path, dump) = attach_common::dump_now(&pid);
    assert!(path.exists() && dump.attached_unix_ns().is_none());
    assert!(heapsample_ok(&["stop", &pid]).contains("sampling stopped"));
    assert!(heapsample_ok(&["status", &pid]).contains("active: false"));
    assert!(heapsample_ok(&["start", &pid]).contains("it was not sampling"));
    still_works(preloaded);

    let mut target = Driven::start(&program.path, &[], &[]);
    let pid = target.pid_arg();
    assert_eq!(target.send("leak 1"), "leaked 1");
    heapsample_ok(&["attach", &pid, "-o", dir]);
    refused(&pid, &["-o", dir], "is attached already");
    heapsample_ok(&["detach", &pid]);
    let again = heapsample(&["detach", &pid]);
    assert!(stderr_of(&again).contains("detached from this process already"));
    still_works(target);
}

#[test]
fn control_commands_on_an_unprofiled_process() {
    let mut target = Driven::start(&leaker().path, &[], &[]);
    let pid = target.pid_arg();
    // Answering, it runs the program (not the test's fork before exec).
    assert_eq!(target.send("leak 1"), "leaked 1");
    for command in ["dump", "status", "start", "stop", "detach"] {
        let output = heapsample(&[command, &pid]);
        assert_eq!(output.status.code(), Some(1));
        assert!(stderr_of(&output).contains("is not profiled"), "{command}");
    }
    unchanged(&pid);
    still_works(target);
}
