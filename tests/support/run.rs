//! Running a command with or without the shim, in a fresh directory, with a
//! timeout: [`Run`] and its result [`Outcome`] (output, status, pid, and the
//! dump files left behind), and the comparison of a run with and without
//! the shim ([`assert_same_behaviour`]), and many runs on the two cores
//! ([`in_parallel`]).

use crate::dump_files::{DumpFile, dump_files_in};
use crate::locate::shim_path;
use crate::profiler_lines::{HEAPSAMPLE_PREFIX, heapsample_lines};
use crate::programs::Program;
use crate::temp_dir::TempDir;
use heapsample_format::Dump;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Run `program` under the shim at `lg_prof_sample:0` (every allocation
/// sampled), asserting that it succeeded.
pub fn run_exact(program: &Path) -> Outcome {
    let outcome = Run::new(program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    outcome
}

/// Which libraries to preload.
#[derive(Clone, Debug, Default)]
pub enum Preload {
    /// Nothing: the program as it is.
    #[default]
    None,
    /// `LD_PRELOAD=<shim>`.
    Shim,
    /// `LD_PRELOAD="<shim> <others...>"`, e.g. the shim chained to jemalloc.
    ShimThen(Vec<PathBuf>),
    /// Exactly these libraries (e.g. jemalloc alone, for a reference run).
    Only(Vec<PathBuf>),
}

/// A command to run in a fresh temporary directory with a timeout.
///
/// The environment is inherited minus `LD_PRELOAD`, `PROF_CONF` and
/// `MALLOC_CONF`, which are set only as asked. Build it with the methods,
/// then call [`Run::run`].
#[derive(Clone, Debug)]
pub struct Run {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    preload: Preload,
    prof_conf: Option<String>,
    stdin: Vec<u8>,
    timeout: Duration,
    label: String,
}

impl Run {
    /// Run `program` (a path, or a name looked up in `PATH`).
    pub fn new(program: impl AsRef<OsStr>) -> Run {
        let program = program.as_ref().to_os_string();
        let label = Path::new(&program)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        Run {
            program,
            args: Vec::new(),
            env: Vec::new(),
            preload: Preload::None,
            prof_conf: None,
            stdin: Vec::new(),
            timeout: Duration::from_secs(60),
            label,
        }
    }

    /// Run a built [`Program`].
    pub fn program(program: &Program) -> Run {
        Run::new(&program.path)
    }

    /// Add one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Run {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Add several arguments.
    pub fn args<I, S>(mut self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Set an environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Run {
        self.env
            .push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Preload the shim (`LD_PRELOAD=<shim_path()>`).
    pub fn with_shim(mut self) -> Run {
        self.preload = Preload::Shim;
        self
    }

    /// Choose the preloaded libraries.
    pub fn preload(mut self, preload: Preload) -> Run {
        self.preload = preload;
        self
    }

    /// Set `PROF_CONF` (only meaningful with the shim preloaded).
    pub fn prof_conf(mut self, conf: impl Into<String>) -> Run {
        self.prof_conf = Some(conf.into());
        self
    }

    /// Bytes for standard input (default: empty).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Run {
        self.stdin = bytes.into();
        self
    }

    /// Kill the process group after this long (default 60 s) and panic.
    pub fn timeout(mut self, timeout: Duration) -> Run {
        self.timeout = timeout;
        self
    }

    /// A copy of this run without any preload or `PROF_CONF`: the reference.
    pub fn without_shim(&self) -> Run {
        let mut plain = self.clone();
        plain.preload = Preload::None;
        plain.prof_conf = None;
        plain
    }

    /// The `LD_PRELOAD` value this run uses, if any.
    pub fn ld_preload(&self) -> Option<String> {
        let libs: Vec<PathBuf> = match &self.preload {
            Preload::None => return None,
            Preload::Shim => vec![shim_path()],
            Preload::ShimThen(others) => {
                let mut v = vec![shim_path()];
                v.extend(others.iter().cloned());
                v
            }
            Preload::Only(libs) => libs.clone(),
        };
        Some(
            libs.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
        )
    }

    /// A shell-like rendering of the command, for failure messages.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(pre) = self.ld_preload() {
            let _ = write!(s, "LD_PRELOAD='{pre}' ");
        }
        if let Some(conf) = &self.prof_conf {
            let _ = write!(s, "PROF_CONF='{conf}' ");
        }
        for (k, v) in &self.env {
            let _ = write!(s, "{}='{}' ", k.to_string_lossy(), v.to_string_lossy());
        }
        s.push_str(&self.program.to_string_lossy());
        for a in &self.args {
            let _ = write!(s, " {}", a.to_string_lossy());
        }
        s
    }

    /// Run in a fresh temporary directory (the process's cwd, where dumps
    /// land) and wait for it, at most the timeout (then the whole process
    /// group is killed and this panics). Output is captured completely.
    pub fn run(&self) -> Outcome {
        let dir = TempDir::new(&self.label);
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(dir.path())
            .env_remove("LD_PRELOAD")
            .env_remove("PROF_CONF")
            .env_remove("MALLOC_CONF")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(pre) = self.ld_preload() {
            cmd.env("LD_PRELOAD", pre);
        }
        if let Some(conf) = &self.prof_conf {
            cmd.env("PROF_CONF", conf);
        }
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.describe()));
        let pid = child.id();
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = self.stdin.clone();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let mut out_pipe = child.stdout.take().expect("stdout is piped");
        let mut err_pipe = child.stderr.take().expect("stderr is piped");
        let out_reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out_pipe.read_to_end(&mut v);
            v
        });
        let err_reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err_pipe.read_to_end(&mut v);
            v
        });
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => panic!("waiting for {}: {e}", self.describe()),
            }
            if started.elapsed() > self.timeout {
                // SAFETY: plain syscall; the group was created for this child.
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
                let _ = child.wait();
                let stdout = out_reader.join().unwrap_or_default();
                let stderr = err_reader.join().unwrap_or_default();
                panic!(
                    "timed out after {:?} (killed): {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    self.timeout,
                    self.describe(),
                    tail(&String::from_utf8_lossy(&stdout), 4000),
                    tail(&String::from_utf8_lossy(&stderr), 4000)
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let _ = writer.join();
        // Children that outlive the main process (forked, detached) keep the
        // pipes open; wait for them within the remaining time.
        let remaining = self.timeout.saturating_sub(started.elapsed());
        let deadline = Instant::now() + remaining.max(Duration::from_secs(1));
        while !(out_reader.is_finished() && err_reader.is_finished()) {
            if Instant::now() > deadline {
                // SAFETY: plain syscall on our child's process group.
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        Outcome {
            command: self.describe(),
            status,
            pid,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            elapsed: started.elapsed(),
            dir,
        }
    }
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// What a finished [`Run`] left: its output, status, pid and directory.
#[derive(Debug)]
pub struct Outcome {
    /// The command as [`Run::describe`] renders it.
    pub command: String,
    /// Exit status of the main process.
    pub status: ExitStatus,
    /// Pid of the main process (the one whose dump is `<prefix>.<pid>...`).
    pub pid: u32,
    /// Everything written to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything written to stderr (lossy UTF-8).
    pub stderr: String,
    /// Wall-clock time from start to exit.
    pub elapsed: Duration,
    /// The working directory it ran in (removed when the outcome is dropped).
    pub dir: TempDir,
}

impl Outcome {
    /// A multi-line summary for assertion messages: command, status,
    /// directory listing, the end of stdout and stderr.
    pub fn context(&self) -> String {
        format!(
            "command: {}\nstatus: {}\ncwd entries: {:?}\n--- stdout (end) ---\n{}\n--- stderr (end) ---\n{}",
            self.command,
            describe_status(&self.status),
            self.dir.entries(),
            tail(&self.stdout, 3000),
            tail(&self.stderr, 3000)
        )
    }

    /// Panic unless the process exited with status 0.
    pub fn assert_success(&self) -> &Outcome {
        assert!(self.status.success(), "process failed\n{}", self.context());
        self
    }

    /// The profiler's own stderr lines (those starting with `<heapsample>:`).
    pub fn heapsample_lines(&self) -> Vec<String> {
        heapsample_lines(&self.stderr)
    }

    /// stderr without the `<heapsample>:` lines.
    pub fn stderr_without_heapsample(&self) -> String {
        self.stderr
            .lines()
            .filter(|l| !l.starts_with(HEAPSAMPLE_PREFIX))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// All files in the working directory whose names follow the dump
    /// pattern `<prefix>.<pid>.<seq>.<trigger>[<n>].prof`, sorted by name.
    pub fn dump_files(&self) -> Vec<DumpFile> {
        dump_files_in(self.dir.path())
    }

    /// Every dump file decoded; panics (with the file name and the decode
    /// error) if one does not decode.
    pub fn dumps(&self) -> Vec<(DumpFile, Dump)> {
        self.dump_files()
            .into_iter()
            .map(|f| {
                let dump = f.decode();
                (f, dump)
            })
            .collect()
    }

    /// The final dump of the main process: exactly one file
    /// `heapsample.<pid>.<seq>.f.prof` must exist for its pid; it is decoded.
    pub fn final_dump(&self) -> (DumpFile, Dump) {
        let mine: Vec<DumpFile> = self
            .dump_files()
            .into_iter()
            .filter(|f| f.pid == self.pid && f.trigger == "f")
            .collect();
        assert!(
            mine.len() == 1,
            "expected exactly one final dump heapsample.{}.<seq>.f.prof, found {:?}\n{}",
            self.pid,
            mine.iter().map(|f| &f.name).collect::<Vec<_>>(),
            self.context()
        );
        let file = mine.into_iter().next().expect("one file");
        let dump = file.decode();
        (file, dump)
    }
}

/// "exit status 3" or "killed by signal 11 (core dumped)".
pub fn describe_status(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        format!("exit status {code}")
    } else if let Some(sig) = status.signal() {
        format!(
            "killed by signal {sig}{}",
            if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            }
        )
    } else {
        format!("{status:?}")
    }
}

/// Run `run` without the shim and as given (with it), and check the program
/// behaves the same: identical stdout and exit status, and stderr identical
/// apart from `<heapsample>:` lines. Returns both outcomes
/// `(reference, profiled)` for further checks.
pub fn assert_same_behaviour(run: &Run) -> (Outcome, Outcome) {
    let reference = run.without_shim().run();
    let profiled = run.run();
    assert_eq!(
        describe_status(&profiled.status),
        describe_status(&reference.status),
        "exit status differs under the shim\n--- profiled ---\n{}\n--- reference ---\n{}",
        profiled.context(),
        reference.context()
    );
    if profiled.stdout != reference.stdout {
        panic!(
            "stdout differs under the shim\n{}\n--- profiled ---\n{}\n--- reference ---\n{}",
            first_difference(&reference.stdout, &profiled.stdout),
            profiled.context(),
            reference.context()
        );
    }
    (reference, profiled)
}

/// Describe the first differing line of two texts.
pub fn first_difference(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    for i in 0..e.len().max(a.len()) {
        if e.get(i) != a.get(i) {
            return format!(
                "first difference at line {}:\n  expected: {:?}\n  actual:   {:?}",
                i + 1,
                e.get(i),
                a.get(i)
            );
        }
    }
    "texts differ only in line endings".to_string()
}

/// `jobs` calls of `work` (given the job's number) on two threads, the
/// machine's two cores; the results in the order of the jobs.
pub fn in_parallel<T: Send>(jobs: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let job = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if job >= jobs {
                        break;
                    }
                    let result = work(job);
                    results.lock().unwrap().push((job, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(job, _)| *job);
    results.into_iter().map(|(_, r)| r).collect()
}

/// `program` run under jemalloc's own heap profiler (the library at
/// `jemalloc`, `lg_prof_sample:lg`, `prof_accum`, its final profile written
/// into `dir`): the run and the `.heap` profile it wrote.
pub fn jemalloc_heap_profile(
    program: &Program,
    jemalloc: &Path,
    lg: u32,
    dir: &Path,
) -> (Outcome, PathBuf) {
    let name = format!("lg{lg}");
    let outcome = Run::program(program)
        .env("LD_PRELOAD", jemalloc)
        .env(
            "MALLOC_CONF",
            format!(
                "prof:true,prof_accum:true,prof_final:true,lg_prof_sample:{lg},prof_prefix:{}",
                dir.join(&name).display()
            ),
        )
        .run();
    outcome.assert_success();
    let profile = std::fs::read_dir(dir)
        .expect("read the profile's directory")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| {
            path.extension().is_some_and(|x| x == "heap")
                && path
                    .file_name()
                    .is_some_and(|file| file.to_string_lossy().starts_with(&format!("{name}.")))
        })
        .expect("jemalloc wrote a .heap file");
    (outcome, profile)
}
