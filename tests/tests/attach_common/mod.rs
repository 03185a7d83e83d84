//! What the tests of the `heapsample` command share: the built command,
//! and running it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use heapsample_tests::target_dir;

/// The built `heapsample` command (`target/release/heapsample`).
pub fn heapsample_path() -> PathBuf {
    let path = target_dir().join("release").join("heapsample");
    assert!(
        path.is_file(),
        "{} not found: run `cargo build --release` first",
        path.display()
    );
    path
}

/// Runs `heapsample ARGS` to its end.
pub fn heapsample(args: &[&str]) -> Output {
    Command::new(heapsample_path())
        .args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("PROF_CONF")
        .output()
        .expect("run heapsample")
}

/// Standard error of `output` as text.
pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output of `output` as text.
pub fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `heapsample ARGS`, asserts it succeeded and returns its standard
/// output.
pub fn heapsample_ok(args: &[&str]) -> String {
    let output = heapsample(args);
    assert!(
        output.status.success(),
        "heapsample {args:?} failed ({}):\n{}{}",
        output.status,
        stdout_of(&output),
        stderr_of(&output)
    );
    stdout_of(&output)
}

/// A program driven through its standard input, one command a line, each
/// answered with one line on its standard output. A watchdog kills it if
/// a test hangs.
pub struct Driven {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    transcript: String,
    alive: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Driven {
    /// Start `program` with `args` and `env` (nothing profiled).
    pub fn start(program: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Driven {
        use std::process::Stdio;
        let mut command = Command::new(program);
        command
            .args(args)
            .env_remove("LD_PRELOAD")
            .env_remove("PROF_CONF")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let alive = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (pid, watched) = (child.id() as i32, alive.clone());
        std::thread::spawn(move || {
            for _ in 0..1800 {
                std::thread::sleep(std::time::Duration::from_millis(100));
                if !watched.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
            }
            // SAFETY: killing our own child that outlived the test's time.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        Driven {
            stdin: child.stdin.take(),
            stdout: std::io::BufReader::new(child.stdout.take().expect("piped")),
            child,
            transcript: String::new(),
            alive,
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The pid as a command-line argument.
    pub fn pid_arg(&self) -> String {
        self.pid().to_string()
    }

    /// Send one command and return its answer (without the newline).
    pub fn send(&mut self, command: &str) -> String {
        self.send_only(command);
        self.answer()
    }

    /// Send one command without waiting for its answer.
    pub fn send_only(&mut self, command: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("write a command");
        stdin.flush().expect("flush");
    }

    /// Read one line of answer (without the newline).
    pub fn answer(&mut self) -> String {
        use std::io::BufRead;
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read an answer");
        assert!(!line.is_empty(), "the program ended instead of answering");
        self.transcript.push_str(&line);
        line.trim_end().to_string()
    }

    /// Close its input, read the rest of its output and wait for its end.
    /// Returns everything it printed and its exit status.
    pub fn finish(mut self) -> (String, std::process::ExitStatus) {
        use std::io::Read;
        drop(self.stdin.take());
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        self.transcript.push_str(&rest);
        let status = self.child.wait().expect("wait");
        self.alive
            .store(false, std::sync::atomic::Ordering::Relaxed);
        (self.transcript.clone(), status)
    }
}

/// The output and status of `program` given all of `commands` at once,
/// nothing attached: what an attached run must print too.
pub fn unattached(
    program: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    commands: &[&str],
) -> (String, std::process::ExitStatus) {
    let mut driven = Driven::start(program, args, env);
    for command in commands {
        driven.send(command);
    }
    driven.finish()
}

/// The dump path `heapsample dump PID` printed, decoded.
pub fn dump_now(pid: &str) -> (std::path::PathBuf, heapsample_tests::format::Dump) {
    let path = std::path::PathBuf::from(heapsample_ok(&["dump", pid]).trim());
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dump = heapsample_tests::format::decode(&bytes).expect("the dump decodes");
    (path, dump)
}

/// True if `program` is installed; otherwise the test is recorded as
/// skipped (a failure under the test command, which installs `package`).
pub fn installed(program: &str, package: &str) -> bool {
    if heapsample_tests::prerequisite::on_path(program) {
        return true;
    }
    heapsample_tests::skip(heapsample_tests::Missing::Software(&format!(
        "{program} is not installed (apt-get install {package})"
    )));
    false
}

/// Each command's bound on an idle process: a safe point within 1 s
/// (`--timeout 1`) and the whole command within 1 s. A wall-clock bound,
/// with a wide margin: the slowest of the 400 commands of `attach_idle`
/// took 44 ms (most 3–20 ms) at a load average of 8–10 on 2 cores, so a
/// command misses it only if the machine keeps it off a core for most of a
/// second. It must stay under the programs' 1.5 s waits: a command that
/// waited for the next wait to begin would take that long.
const COMMAND_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// The sequence of commands an idle process must take, each within
/// `COMMAND_BOUND`: attach (dumps into `out`), status, dump three times,
/// stop, start, detach, attach again, detach. Returns each command's name
/// and duration.
pub fn idle_sequence(pid: &str, out: &std::path::Path) -> Vec<(&'static str, std::time::Duration)> {
    let out = out.to_str().unwrap();
    let steps: [(&str, Vec<&str>); 10] = [
        ("attach", vec!["attach", pid, "-o", out]),
        ("status", vec!["status", pid]),
        ("dump", vec!["dump", pid]),
        ("dump", vec!["dump", pid]),
        ("dump", vec!["dump", pid]),
        ("stop", vec!["stop", pid]),
        ("start", vec!["start", pid]),
        ("detach", vec!["detach", pid]),
        ("attach", vec!["attach", pid, "-o", out]),
        ("detach", vec!["detach", pid]),
    ];
    let mut timings = Vec::new();
    for (name, mut args) in steps {
        args.extend(["--timeout", "1"]);
        let started = std::time::Instant::now();
        let output = heapsample(&args);
        let took = started.elapsed();
        assert!(
            output.status.success(),
            "heapsample {args:?} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(took < COMMAND_BOUND, "heapsample {args:?} took {took:?}");
        timings.push((name, took));
    }
    timings
}
