//! Support library for heapsample's end-to-end tests.
//!
//! The tests run real processes under `LD_PRELOAD=libheapsample.so` and check
//! what they print and the dumps they leave. This crate holds everything they
//! share:
//!
//! - locating things: [`workspace_root`], [`target_dir`], [`shim_path`],
//!   [`heapdiff_path`], [`programs_dir`], [`jemalloc_path`];
//! - building the test programs of `tests/programs/`: [`compile_c`],
//!   [`compile_cxx`], [`compile_rust`] (cached by a hash of source and flags);
//! - running a command with or without the shim, in a fresh directory, with a
//!   timeout: [`Run`] and its result [`Outcome`] (stdout, stderr, exit status,
//!   pid, and the dump files left behind, decoded);
//! - reading dumps: [`DumpFile`], [`Symbols`] (maps return addresses to the
//!   program's functions with `nm`), [`per_function`];
//! - reading the programs' own reports: [`SiteReport`], [`parse_sites`];
//! - [`heapsample_lines`]: the profiler's own stderr lines;
//! - [`prerequisite`]: what a test needs from the machine, and the one way
//!   to skip when it is missing ([`skip`]), counted by the test command.
//!
//! Everything here panics with a message that says what went wrong: these are
//! test helpers, and a panic is a test failure with an explanation.
//!
//! Environment knobs: `CARGO_TARGET_DIR` (where the shim was built),
//! `HEAPSAMPLE_TEST_KEEP=1` (keep the temporary directories for inspection),
//! `HEAPSAMPLE_REQUIRE_PREREQUISITES=1` and `HEAPSAMPLE_SKIP_LOG` (see
//! [`prerequisite`]).

use heapsample_format::{Dump, Stack};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use heapsample_format as format;

pub mod prerequisite;
pub use prerequisite::{Missing, skip};

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // This crate lives in `<root>/tests`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent directory")
        .to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace
/// root if relative) or `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        _ => workspace_root().join("target"),
    }
}

fn release_artifact(name: &str, what: &str) -> PathBuf {
    let path = target_dir().join("release").join(name);
    if !path.is_file() {
        panic!(
            "{what} not found at {}: run `cargo build --release` in {} first \
             (the end-to-end tests use the release build; CARGO_TARGET_DIR is honored)",
            path.display(),
            workspace_root().display()
        );
    }
    path
}

/// Path of the built shim, `target/release/libheapsample.so`, or
/// `$HEAPSAMPLE_SHIM` when set (e.g. a debug build, whose lock-order checks
/// are on). Panics with a message telling to run `cargo build --release` if
/// it is missing.
pub fn shim_path() -> PathBuf {
    match std::env::var_os("HEAPSAMPLE_SHIM") {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "HEAPSAMPLE_SHIM={} is not a file",
                path.display()
            );
            path
        }
        _ => release_artifact("libheapsample.so", "the shim libheapsample.so"),
    }
}

/// Path of the built `heapdiff` tool, `target/release/heapdiff`. Panics with a
/// message telling to run `cargo build --release` if it is missing.
pub fn heapdiff_path() -> PathBuf {
    release_artifact("heapdiff", "the heapdiff binary")
}

/// Runs the built `heapdiff` with `args`.
pub fn heapdiff(args: &[&str]) -> Output {
    Command::new(heapdiff_path())
        .args(args)
        .output()
        .expect("run heapdiff")
}

/// Runs the built `heapdiff` with `args`, asserts it succeeded and returns
/// its standard output.
pub fn heapdiff_ok(args: &[&str]) -> String {
    let out = heapdiff(args);
    assert!(
        out.status.success(),
        "heapdiff {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `path` as `&str` (the tests' paths are UTF-8).
pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// `go tool pprof ARGS PROFILE` (a file or a URL), its standard output and
/// error together; `None` when go is not installed (a skip of the calling
/// test's pprof part, a failure under the test command: see
/// [`prerequisite`]). `home` holds pprof's own files.
pub fn go_tool_pprof(args: &[&str], profile: impl AsRef<OsStr>, home: &Path) -> Option<String> {
    if !prerequisite::command_succeeds("go", &["version"]) {
        skip(Missing::Software(
            "go is not installed, so go tool pprof is not checked (apt-get install golang-go)",
        ));
        return None;
    }
    let output = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        .env("HOME", home)
        .env("PPROF_TMPDIR", home)
        .env_remove("PPROF_BINARY_PATH")
        .output()
        .expect("run go tool pprof");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "go tool pprof failed:\n{text}");
    Some(text)
}

/// `tests/programs/`, the sources of the test programs.
pub fn programs_dir() -> PathBuf {
    workspace_root().join("tests").join("programs")
}

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

/// Build `tests/programs/<source>` into the shared library `output` with
/// gcc (`-shared -fPIC` and `flags`), panicking if it does not build.
pub fn build_shared_library(source: &str, output: &Path, flags: &[&str]) -> PathBuf {
    let status = Command::new("gcc")
        .args(["-shared", "-fPIC"])
        .args(flags)
        .arg("-o")
        .arg(output)
        .arg(programs_dir().join(source))
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc {source} -o {}", output.display());
    output.to_path_buf()
}

/// Path of `libjemalloc.so.2`, from `ldconfig -p` or the Debian location;
/// `None` when it is not installed (a skip of the calling test, a failure
/// under the test command: see [`prerequisite`]).
pub fn jemalloc_path() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Ok(out) = Command::new("ldconfig").arg("-p").output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let line = line.trim();
            if line.starts_with("libjemalloc.so.2 ")
                && line.contains("x86-64")
                && let Some((_, path)) = line.rsplit_once("=> ")
            {
                candidates.push(PathBuf::from(path.trim()));
            }
        }
    }
    candidates.push(PathBuf::from("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"));
    let found = candidates.into_iter().find(|p| p.is_file());
    if found.is_none() {
        skip(Missing::Software(
            "libjemalloc.so.2 is not installed (apt-get install libjemalloc2)",
        ));
    }
    found
}

// ---------------------------------------------------------------------------
// Temporary directories

/// A directory under the system temp dir, removed on drop unless
/// `HEAPSAMPLE_TEST_KEEP` is set (then its path is printed).
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl TempDir {
    /// Create a fresh empty directory whose name contains `label`.
    pub fn new(label: &str) -> TempDir {
        let label: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let path = std::env::temp_dir().join(format!(
                "heapsample-test-{label}-{}-{n}-{nanos:x}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return TempDir { path },
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("cannot create {}: {e}", path.display()),
            }
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Names of the entries in the directory, sorted.
    pub fn entries(&self) -> Vec<String> {
        list_dir(&self.path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("HEAPSAMPLE_TEST_KEEP").is_some() {
            eprintln!("kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------------------
// Building the test programs

/// A built test program.
#[derive(Clone, Debug)]
pub struct Program {
    /// The executable.
    pub path: PathBuf,
    /// True if built as a position-independent executable (addresses in
    /// dumps must then be corrected by the module's load bias).
    pub pie: bool,
}

/// How to build a C or C++ program, see [`compile_c`].
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Build a PIE (`-fPIE -pie`) instead of `-no-pie`.
    pub pie: bool,
    /// Extra compiler flags (`-pthread` is always passed).
    pub extra_flags: Vec<String>,
}

impl BuildOptions {
    /// The default: `-no-pie`, so the program's addresses are absolute.
    pub fn no_pie() -> BuildOptions {
        BuildOptions::default()
    }

    /// A PIE build.
    pub fn pie() -> BuildOptions {
        BuildOptions {
            pie: true,
            ..BuildOptions::default()
        }
    }
}

/// Flags every C/C++ test program is built with: debug info, frame pointers,
/// and no optimisation that would move an allocation call out of the
/// function that is its known site (no sibling calls, no identical-code
/// folding).
pub const COMMON_FLAGS: &[&str] = &[
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-fno-ipa-icf",
    "-pthread",
    "-Wall",
    "-Wno-use-after-free",
    "-Wno-alloc-size-larger-than",
];

static BUILD_LOCK: Mutex<()> = Mutex::new(());

fn content_hash(parts: &[&[u8]]) -> u64 {
    // DefaultHasher::new() uses fixed keys: stable across processes.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

/// Build `source` (a file in `tests/programs/`) with `compiler` and `args`
/// into `<target>/heapsample-test-programs/<stem>-<hash>/<stem>`, unless that
/// file already exists: the hash covers the source, the compiler and the
/// flags, so a cached build is always current.
/// The headers in `tests/programs` (name, then contents, in name order): a
/// program that includes one is rebuilt when it changes.
fn program_headers() -> Vec<Vec<u8>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(programs_dir())
        .map(|dir| dir.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.retain(|p| p.extension().is_some_and(|e| e == "h"));
    names.sort();
    names
        .into_iter()
        .flat_map(|p| {
            let contents = std::fs::read(&p).unwrap_or_default();
            [
                p.file_name()
                    .unwrap_or_default()
                    .as_encoded_bytes()
                    .to_vec(),
                contents,
            ]
        })
        .collect()
}

fn build_cached(source: &str, compiler: &str, args: &[String]) -> PathBuf {
    let src_path = programs_dir().join(source);
    let src = std::fs::read(&src_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", src_path.display()));
    let stem = Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.to_string());
    let joined = args.join("\u{1}");
    let headers = program_headers();
    let mut parts: Vec<&[u8]> = vec![&src, compiler.as_bytes(), joined.as_bytes()];
    parts.extend(headers.iter().map(Vec::as_slice));
    let hash = content_hash(&parts);
    let dir = target_dir()
        .join("heapsample-test-programs")
        .join(format!("{stem}-{hash:016x}"));
    let out = dir.join(&stem);
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if out.is_file() {
        return out;
    }
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    // Build under a unique name, then rename: concurrent test binaries never
    // see a half-written executable.
    let tmp = dir.join(format!(".{stem}.{}.tmp", std::process::id()));
    let output = Command::new(compiler)
        .args(args)
        .arg("-o")
        .arg(&tmp)
        .arg(&src_path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    if !output.status.success() {
        panic!(
            "building {} failed: {compiler} {}\n{}{}",
            src_path.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("cannot rename to {}: {e}", out.display()));
    out
}

fn c_like(source: &str, compiler: &str, lang_flags: &[&str], options: &BuildOptions) -> Program {
    let mut args: Vec<String> = lang_flags.iter().map(|s| s.to_string()).collect();
    args.extend(COMMON_FLAGS.iter().map(|s| s.to_string()));
    if options.pie {
        args.extend(["-fPIE".to_string(), "-pie".to_string()]);
    } else {
        args.extend(["-fno-pie".to_string(), "-no-pie".to_string()]);
    }
    args.extend(options.extra_flags.iter().cloned());
    Program {
        path: build_cached(source, compiler, &args),
        pie: options.pie,
    }
}

/// Build the C program `tests/programs/<source>` with gcc
/// (`-g -O1 -fno-omit-frame-pointer -no-pie ...`, see [`COMMON_FLAGS`]).
pub fn compile_c(source: &str, options: &BuildOptions) -> Program {
    c_like(source, "gcc", &["-std=gnu11"], options)
}

/// Build the C++ program `tests/programs/<source>` with g++ (C++17).
pub fn compile_cxx(source: &str, options: &BuildOptions) -> Program {
    c_like(source, "g++", &["-std=c++17"], options)
}

/// Build the single-file Rust program `tests/programs/<source>` with `rustc`
/// (no cargo): `-C opt-level=1 -g`. Uses `$RUSTC` if set.
pub fn compile_rust(source: &str) -> Program {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let args: Vec<String> = [
        "--edition",
        "2021",
        "-C",
        "opt-level=1",
        "-C",
        "debuginfo=1",
        "-C",
        "force-frame-pointers=yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Program {
        path: build_cached(source, &rustc, &args),
        pie: true,
    }
}

// ---------------------------------------------------------------------------
// Running

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

/// The prefix of every line the profiler writes to stderr.
pub const HEAPSAMPLE_PREFIX: &str = "<heapsample>:";

/// The lines of `stderr` that start with `<heapsample>:`.
pub fn heapsample_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with(HEAPSAMPLE_PREFIX))
        .map(str::to_string)
        .collect()
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

// ---------------------------------------------------------------------------
// Dump files

/// A dump file name parsed: `<prefix>.<pid>[_<generation>].<seq>.<trigger><n>.prof`
/// (e.g. `heapsample.1234.0.f.prof`; `trigger` is `f`, or `i3`, `m0`...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpFile {
    /// Full path.
    pub path: PathBuf,
    /// File name.
    pub name: String,
    /// The prefix (everything before `.<pid>`).
    pub prefix: String,
    /// The pid in the name.
    pub pid: u32,
    /// The generation after the pid (`<pid>_<generation>`), present when an
    /// earlier process with the same pid had taken the plain name.
    pub generation: Option<u64>,
    /// The global sequence number in the name.
    pub seq: u64,
    /// The trigger letter (`f`, `i`, `m`, `u`, `s`).
    pub trigger: String,
    /// The per-trigger sequence number, absent for `f`.
    pub trigger_seq: Option<u64>,
}

impl DumpFile {
    /// Parse a file name; `None` if it does not follow the pattern.
    pub fn parse(path: &Path) -> Option<DumpFile> {
        let name = path.file_name()?.to_str()?.to_string();
        let stem = name.strip_suffix(".prof")?;
        let parts: Vec<&str> = stem.rsplitn(4, '.').collect();
        if parts.len() != 4 {
            return None;
        }
        let (kind, seq, tag, prefix) = (parts[0], parts[1], parts[2], parts[3]);
        let (pid, generation) = match tag.split_once('_') {
            Some((pid, generation)) => (pid, Some(generation.parse().ok()?)),
            None => (tag, None),
        };
        let letter = kind.chars().next()?;
        if !"fimuso".contains(letter) {
            return None;
        }
        let rest = &kind[1..];
        let trigger_seq = if rest.is_empty() {
            None
        } else {
            Some(rest.parse().ok()?)
        };
        Some(DumpFile {
            path: path.to_path_buf(),
            name: name.clone(),
            prefix: prefix.to_string(),
            pid: pid.parse().ok()?,
            generation,
            seq: seq.parse().ok()?,
            trigger: letter.to_string(),
            trigger_seq,
        })
    }

    /// Read and decode the file; panics with the name and error otherwise.
    pub fn decode(&self) -> Dump {
        let bytes = std::fs::read(&self.path)
            .unwrap_or_else(|e| panic!("cannot read dump {}: {e}", self.path.display()));
        heapsample_format::decode(&bytes).unwrap_or_else(|e| {
            panic!(
                "dump {} ({} bytes) does not decode: {e}",
                self.path.display(),
                bytes.len()
            )
        })
    }
}

/// The dump files (see [`DumpFile::parse`]) in `dir`, sorted by name.
pub fn dump_files_in(dir: &Path) -> Vec<DumpFile> {
    list_dir(dir)
        .into_iter()
        .filter_map(|n| DumpFile::parse(&dir.join(n)))
        .collect()
}

// ---------------------------------------------------------------------------
// Symbols

/// One function of a program: `[start, end)` in the file's address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Symbol name as in the symbol table (not demangled).
    pub name: String,
}

/// The functions of one executable (from `nm -S --defined-only`), to map
/// return addresses in a dump to the program's functions.
#[derive(Clone, Debug)]
pub struct Symbols {
    /// The executable.
    pub path: PathBuf,
    /// True if it is a PIE (ELF type `ET_DYN`).
    pub pie: bool,
    /// Its text symbols, sorted by start address.
    pub functions: Vec<Function>,
}

impl Symbols {
    /// Read the symbols of `path` with `nm`.
    pub fn load(path: &Path) -> Symbols {
        let out = Command::new("nm")
            .args(["-S", "--defined-only", "--no-demangle"])
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("cannot run nm: {e}"));
        assert!(
            out.status.success(),
            "nm {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut functions = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() != 4 {
                continue; // no size
            }
            if !matches!(fields[2], "t" | "T" | "w" | "W") {
                continue;
            }
            let (Ok(start), Ok(size)) = (
                u64::from_str_radix(fields[0], 16),
                u64::from_str_radix(fields[1], 16),
            ) else {
                continue;
            };
            if size == 0 {
                continue;
            }
            functions.push(Function {
                start,
                end: start + size,
                name: fields[3].to_string(),
            });
        }
        functions.sort_by_key(|f| f.start);
        Symbols {
            path: path.to_path_buf(),
            pie: elf_is_pie(path),
            functions,
        }
    }

    /// Symbols of a built [`Program`].
    pub fn of(program: &Program) -> Symbols {
        Symbols::load(&program.path)
    }

    /// The function containing a file address.
    pub fn function_containing(&self, file_address: u64) -> Option<&str> {
        let idx = self.functions.partition_point(|f| f.start <= file_address);
        let f = self.functions.get(idx.checked_sub(1)?)?;
        (file_address < f.end).then_some(f.name.as_str())
    }

    /// The file address of function `name`.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.start)
    }

    /// True if `module_path` names this executable (same file).
    pub fn is_this_file(&self, module_path: &str) -> bool {
        same_file(Path::new(module_path), &self.path)
    }

    /// Translate a runtime address captured in `epoch` into this program's
    /// file address: through the dump's module map (the module must be this
    /// file; its load bias is subtracted); if no module holds the address and
    /// the program is not a PIE, the address is already absolute. `None` if
    /// the address is in another object.
    pub fn file_address(&self, dump: &Dump, epoch: u32, address: u64) -> Option<u64> {
        match dump.module_for(address, epoch) {
            Some(m) if self.is_this_file(&m.path) || m.path.is_empty() => {
                Some(address.wrapping_sub(m.load_bias))
            }
            Some(_) => None,
            None if !self.pie => Some(address),
            None => None,
        }
    }

    /// The program function a return address in `stack` points into. Return
    /// addresses point after the call instruction, so `address - 1` is looked
    /// up (the call itself may be a function's last instruction).
    pub fn function_at(&self, dump: &Dump, stack: &Stack, return_address: u64) -> Option<&str> {
        let file_address = self.file_address(dump, stack.epoch, return_address)?;
        self.function_containing(file_address.wrapping_sub(1))
    }

    /// The innermost frame of `stack` that is in this program, as a function
    /// name (frames in libc, libstdc++ ... are skipped).
    pub fn innermost_function(&self, dump: &Dump, stack: &Stack) -> Option<&str> {
        stack
            .frames
            .iter()
            .find_map(|&a| self.function_at(dump, stack, a))
    }

    /// Every frame of `stack` symbolized in this program (`None` for frames
    /// elsewhere), innermost first.
    pub fn frame_functions(&self, dump: &Dump, stack: &Stack) -> Vec<Option<String>> {
        stack
            .frames
            .iter()
            .map(|&a| self.function_at(dump, stack, a).map(str::to_string))
            .collect()
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// True if the ELF file at `path` is `ET_DYN` (a PIE or a shared object).
pub fn elf_is_pie(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes.len() > 18 && &bytes[..4] == b"\x7fELF" && u16::from_le_bytes([bytes[16], bytes[17]]) == 3
}

/// The GNU build-id of an ELF file (via `readelf -n`), if it has one.
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    let out = Command::new("readelf").arg("-n").arg(path).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID:"))?
        .trim()
        .to_string();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

// ---------------------------------------------------------------------------
// Per-site aggregation

/// Counts summed over several stacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Number of stacks summed.
    pub stacks: u64,
    /// Sum of `live_objects`.
    pub live_objects: u64,
    /// Sum of `live_bytes`.
    pub live_bytes: u64,
    /// Sum of `live_usable_bytes`.
    pub live_usable_bytes: u64,
    /// Sum of `alloc_objects`.
    pub alloc_objects: u64,
    /// Sum of `alloc_bytes`.
    pub alloc_bytes: u64,
}

impl Counts {
    /// Add one stack's counts.
    pub fn add(&mut self, s: &Stack) {
        self.stacks += 1;
        self.live_objects += s.live_objects;
        self.live_bytes += s.live_bytes;
        self.live_usable_bytes += s.live_usable_bytes;
        self.alloc_objects += s.alloc_objects;
        self.alloc_bytes += s.alloc_bytes;
    }
}

/// Raw counts of `dump` summed per innermost program function (see
/// [`Symbols::innermost_function`]); stacks with no frame in the program are
/// summed under `"<outside>"`.
pub fn per_function(dump: &Dump, symbols: &Symbols) -> BTreeMap<String, Counts> {
    let mut map: BTreeMap<String, Counts> = BTreeMap::new();
    for s in &dump.stacks {
        let key = symbols
            .innermost_function(dump, s)
            .unwrap_or("<outside>")
            .to_string();
        map.entry(key).or_default().add(s);
    }
    map
}

/// The stacks of `dump` whose innermost program function is `function`.
pub fn stacks_in<'a>(dump: &'a Dump, symbols: &Symbols, function: &str) -> Vec<&'a Stack> {
    dump.stacks
        .iter()
        .filter(|s| symbols.innermost_function(dump, s) == Some(function))
        .collect()
}

/// Assert that the dump's per-function live and allocated counts equal what
/// the program reported for each of its sites (`sites`), naming every
/// mismatch and showing the whole per-function table when one is found.
/// `context` (e.g. [`Outcome::context`]) is appended to the failure message.
pub fn assert_sites_match(dump: &Dump, symbols: &Symbols, sites: &[SiteReport], context: &str) {
    let table = per_function(dump, symbols);
    let check = SiteCheck {
        live: true,
        alloc: true,
        usable: false,
    };
    let problems = site_mismatches(sites, &table, check);
    assert!(
        problems.is_empty(),
        "per-site counts differ from the program's own:\n{problems:#?}\n{}\n{context}",
        render_per_function(&table)
    );
}

/// A readable rendering of the per-function table, for failure messages.
pub fn render_per_function(table: &BTreeMap<String, Counts>) -> String {
    let mut s = String::from(
        "function: stacks live_objects live_bytes live_usable alloc_objects alloc_bytes\n",
    );
    for (k, c) in table {
        let _ = writeln!(
            s,
            "  {k}: {} {} {} {} {} {}",
            c.stacks,
            c.live_objects,
            c.live_bytes,
            c.live_usable_bytes,
            c.alloc_objects,
            c.alloc_bytes
        );
    }
    s
}

// ---------------------------------------------------------------------------
// The programs' own reports

/// One `site <function> key=value ...` line printed by a test program: its
/// own exact numbers for one allocation site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteReport {
    /// The site's function name.
    pub name: String,
    /// The `key=value` fields; values that are not numbers (`unknown`) are
    /// absent.
    pub fields: HashMap<String, u64>,
}

impl SiteReport {
    /// A field that must be present.
    pub fn get(&self, key: &str) -> u64 {
        *self
            .fields
            .get(key)
            .unwrap_or_else(|| panic!("site {} reports no numeric {key}", self.name))
    }

    /// A field that may be absent (e.g. `live_usable=unknown`).
    pub fn opt(&self, key: &str) -> Option<u64> {
        self.fields.get(key).copied()
    }
}

/// Parse every `site ...` line of a program's stdout, in order.
pub fn parse_sites(stdout: &str) -> Vec<SiteReport> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some("site") {
                return None;
            }
            let name = words.next()?.to_string();
            let fields = words
                .filter_map(|w| {
                    let (k, v) = w.split_once('=')?;
                    Some((k.to_string(), v.parse().ok()?))
                })
                .collect();
            Some(SiteReport { name, fields })
        })
        .collect()
}

/// [`parse_sites`] of a run's stdout, with `live_usable` filled in from the
/// `usable <function> <bytes>` lines alloc_sites.c prints on stderr (stderr
/// because glibc's usable sizes depend on the heap layout, which the shim
/// changes, so they cannot be part of the compared stdout).
pub fn sites_with_usable(outcome: &Outcome) -> Vec<SiteReport> {
    let mut usable: HashMap<String, u64> = HashMap::new();
    for line in outcome.stderr.lines() {
        let mut it = line.split_whitespace();
        if it.next() != Some("usable") {
            continue;
        }
        if let (Some(name), Some(Ok(n))) = (it.next(), it.next().map(str::parse::<u64>)) {
            usable.insert(name.to_string(), n);
        }
    }
    let mut sites = parse_sites(&outcome.stdout);
    for site in &mut sites {
        if let Some(n) = usable.get(&site.name) {
            site.fields.insert("live_usable".to_string(), *n);
        }
    }
    sites
}

/// Which numbers [`site_mismatches`] compares.
#[derive(Clone, Copy, Debug)]
pub struct SiteCheck {
    /// Compare `live_objects` and `live_bytes` (always exact at lg 0).
    pub live: bool,
    /// Compare `alloc_objects` and `alloc_bytes` for sites that report
    /// `exact_alloc=1` (with `prof_accum`, the default).
    pub alloc: bool,
    /// Compare `live_usable_bytes` with the program's `live_usable` where
    /// it knows it (only meaningful on the allocator the program ran on).
    pub usable: bool,
}

/// Compare the raw dump counts per function (`table`, from [`per_function`]
/// of a dump taken with `lg_prof_sample:0`, where every allocation is
/// sampled) with the program's own numbers. Returns one message per
/// mismatch; empty means all equal.
pub fn site_mismatches(
    sites: &[SiteReport],
    table: &BTreeMap<String, Counts>,
    check: SiteCheck,
) -> Vec<String> {
    let mut problems = Vec::new();
    for site in sites {
        let got = table.get(&site.name).copied().unwrap_or_default();
        let mut compare = |what: &str, expected: u64, actual: u64| {
            if expected != actual {
                problems.push(format!(
                    "{}: {what} is {actual} in the dump, the program says {expected}",
                    site.name
                ));
            }
        };
        if check.live {
            compare("live_objects", site.get("live_objects"), got.live_objects);
            compare("live_bytes", site.get("live_bytes"), got.live_bytes);
        }
        if check.alloc && site.opt("exact_alloc") == Some(1) {
            compare(
                "alloc_objects",
                site.get("alloc_objects"),
                got.alloc_objects,
            );
            compare("alloc_bytes", site.get("alloc_bytes"), got.alloc_bytes);
        }
        if check.usable
            && let Some(usable) = site.opt("live_usable")
        {
            compare("live_usable_bytes", usable, got.live_usable_bytes);
        }
    }
    problems
}

/// Parse lines `<word> <key>=<number>` / `<word> <key>=<value>` printed on a
/// program's stderr, e.g. fork.c's `pid fork-child=123`: all values of `key`
/// on lines starting with `word`.
pub fn tagged_values(text: &str, word: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(word)).then_some(())?;
            it.find_map(|w| {
                w.split_once('=')
                    .filter(|(k, _)| *k == key)
                    .map(|(_, v)| v.to_string())
            })
        })
        .collect()
}

/// The runtime addresses that alloc_sites.c prints on stderr as
/// `addr <function> 0x...`.
pub fn reported_addresses(stderr: &str) -> BTreeMap<String, u64> {
    stderr
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some("addr")).then_some(())?;
            let name = it.next()?.to_string();
            let addr = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((name, addr))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The leak summary

/// The numbers of a `prof_leak` summary line
/// `<heapsample>: Leak approximation summary: ~N bytes, ~M objects, >= K contexts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeakSummary {
    /// ~N bytes.
    pub bytes: u64,
    /// ~M objects.
    pub objects: u64,
    /// >= K contexts.
    pub contexts: u64,
}

/// Parse a leak summary line (singular or plural units); `None` if `line`
/// is not one.
pub fn parse_leak_summary(line: &str) -> Option<LeakSummary> {
    let rest = line
        .strip_prefix(HEAPSAMPLE_PREFIX)?
        .trim_start()
        .strip_prefix("Leak approximation summary:")?;
    let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return None;
    }
    fn number(part: &str, lead: &str, unit: &str) -> Option<u64> {
        let p = part.strip_prefix(lead)?.trim_start();
        let (n, u) = p.split_once(' ')?;
        (u == unit || u == format!("{unit}s")).then_some(())?;
        n.parse().ok()
    }
    Some(LeakSummary {
        bytes: number(parts[0], "~", "byte")?,
        objects: number(parts[1], "~", "object")?,
        contexts: number(parts[2], ">=", "context")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dump_names() {
        let f = DumpFile::parse(Path::new("/x/heapsample.123.4.f.prof")).unwrap();
        assert_eq!(
            (
                f.prefix.as_str(),
                f.pid,
                f.seq,
                f.trigger.as_str(),
                f.trigger_seq
            ),
            ("heapsample", 123, 4, "f", None)
        );
        let f = DumpFile::parse(Path::new("/x/my.pre.fix.9.10.i3.prof")).unwrap();
        assert_eq!(
            (f.prefix.as_str(), f.seq, f.trigger_seq),
            ("my.pre.fix", 10, Some(3))
        );
        assert!(DumpFile::parse(Path::new("/x/heapsample.1.2.f.prof.tmp")).is_none());
        assert!(DumpFile::parse(Path::new("/x/heapsample.x.2.f.prof")).is_none());
    }

    #[test]
    fn parses_leak_lines() {
        let l = "<heapsample>: Leak approximation summary: ~1234 bytes, ~5 objects, >= 2 contexts";
        assert_eq!(
            parse_leak_summary(l),
            Some(LeakSummary {
                bytes: 1234,
                objects: 5,
                contexts: 2
            })
        );
        let l = "<heapsample>: Leak approximation summary: ~1 byte, ~1 object, >= 1 context";
        assert!(parse_leak_summary(l).is_some());
        assert!(parse_leak_summary("<heapsample>: something else").is_none());
    }

    #[test]
    fn parses_sites() {
        let s = parse_sites("x\nsite f size=8 live_usable=unknown alloc_objects=3\n");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].get("alloc_objects"), 3);
        assert_eq!(s[0].opt("live_usable"), None);
    }
}
