//! Real projects' own test suites under the shim, each passing
//! exactly as it does without it (same set of passed, failed and skipped
//! test cases, same exit status). The reference run without the shim
//! happens in the same test, concurrently, so environment-specific failures
//! (a test that fails on this machine anyway) cancel out.
//!
//! - CPython's regression tests (`python -m test`, `PYTHONMALLOC=malloc` so
//!   every object goes through malloc): containers, strings, json, re, gc,
//!   weakref, sort, threading, and a subset of test_subprocess (many child
//!   processes, all preloaded). Needs a Python whose `test` package holds
//!   the test modules: `$HEAPSAMPLE_SUITE_PYTHON`, else `python3` on PATH,
//!   else `/usr/bin/python3` (Debian: `libpython3.11-testsuite`, installed
//!   by scripts/test.sh).
//! - The `indexmap` crate's own test suite (unit tests, quickcheck property
//!   tests, integration tests; libtest runs them on several threads): the
//!   crate's source from the cargo registry is copied to
//!   `<target>/heapsample-suites/` and built there once with
//!   `cargo test --no-run` (dev-dependencies from crates.io), then each test
//!   binary runs with and without the shim.
//!
//! The shim runs with a small sampling period and interval dumps, so the
//! sampling, stack capture and dumper paths are busy; every dump written
//! must decode. A missing prerequisite skips locally and fails under the
//! test command (see `prerequisite`).

use heapsample_tests::format;
use heapsample_tests::{Missing, Outcome, Run, TempDir, shim_path, skip, target_dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The shim's options for every suite: sample every ~16 KiB on average and
/// dump every 64 MiB allocated, into `dir` (absolute: the suites change
/// directory and spawn children elsewhere).
fn prof_conf(dir: &Path) -> String {
    format!(
        "lg_prof_sample:14,lg_prof_interval:26,prof_prefix:{}/hs",
        dir.display()
    )
}

/// Outcome of one test case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Passed,
    Skipped,
    Failed,
}

type Results = BTreeMap<String, Status>;

/// Check the shim's run against the reference: same cases, same outcomes.
fn compare(suite: &str, reference: &Results, shim: &Results, min_cases: usize) {
    let count = |r: &Results, s: Status| r.values().filter(|&&v| v == s).count();
    eprintln!(
        "{suite}: reference {} cases ({} passed, {} skipped, {} failed); \
         shim {} cases ({} passed, {} skipped, {} failed)",
        reference.len(),
        count(reference, Status::Passed),
        count(reference, Status::Skipped),
        count(reference, Status::Failed),
        shim.len(),
        count(shim, Status::Passed),
        count(shim, Status::Skipped),
        count(shim, Status::Failed),
    );
    let failed_anyway: Vec<&String> = reference
        .iter()
        .filter(|(_, s)| **s == Status::Failed)
        .map(|(n, _)| n)
        .collect();
    if !failed_anyway.is_empty() {
        eprintln!("{suite}: failing without the shim too (environment): {failed_anyway:?}");
    }
    assert!(
        reference.len() >= min_cases,
        "{suite}: only {} test cases ran without the shim (expected >= {min_cases}): \
         the suite did not run properly",
        reference.len()
    );
    let mut differences = Vec::new();
    for (name, status) in reference {
        match shim.get(name) {
            Some(s) if s == status => {}
            Some(s) => differences.push(format!(
                "{name}: {status:?} without the shim, {s:?} with it"
            )),
            None => differences.push(format!(
                "{name}: {status:?} without the shim, not run with it"
            )),
        }
    }
    for (name, status) in shim {
        if !reference.contains_key(name) {
            differences.push(format!(
                "{name}: {status:?} with the shim, not run without it"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{suite} behaves differently under the shim ({} cases):\n  {}",
        differences.len(),
        differences.join("\n  ")
    );
}

/// Every dump in `dir` decodes; returns how many there are.
fn check_dumps(suite: &str, dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("list the dump directory") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".prof") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read a dump");
        if let Err(e) = format::decode(&bytes) {
            panic!("{suite}: dump {name} does not decode: {e}");
        }
        n += 1;
    }
    n
}

/// Run `run` with and without the shim at the same time; returns
/// (reference, shim).
fn both(run: Run, dumps: &Path) -> (Outcome, Outcome) {
    let plain = run.without_shim();
    let shimmed = run.with_shim().prof_conf(prof_conf(dumps));
    std::thread::scope(|s| {
        let reference = s.spawn(|| plain.run());
        let shim = shimmed.run();
        (reference.join().expect("reference run"), shim)
    })
}

// ---------------------------------------------------------------------------
// CPython

/// A Python interpreter with CPython's test modules, if any.
fn python_with_tests() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("HEAPSAMPLE_SUITE_PYTHON") {
        candidates.push(PathBuf::from(p));
    }
    candidates.push(PathBuf::from("python3"));
    candidates.push(PathBuf::from("/usr/bin/python3"));
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args([
                "-c",
                "import test.libregrtest, test.test_dict, test.test_subprocess, test.test_threading",
            ])
            .env_remove("LD_PRELOAD")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Parse regrtest's `--junit-xml` output: one `<testcase name="...">` per
/// case, with a `<skipped>`, `<failure>` or `<error>` child if not passed.
fn parse_junit(xml: &str) -> Results {
    let mut results = Results::new();
    let mut parts = xml.split("<testcase ");
    parts.next();
    for part in parts {
        let Some(start) = part.find("name=\"") else {
            continue;
        };
        let rest = &part[start + 6..];
        let Some(end) = rest.find('"') else { continue };
        let name = rest[..end].to_string();
        // The case's own element ends at "/>" (no children) or at its
        // closing tag.
        let body_end = part.find("</testcase>").unwrap_or(part.len());
        let self_closing = part[..part.find('>').unwrap_or(0) + 1].ends_with("/>");
        let body = if self_closing { "" } else { &part[..body_end] };
        let status = if body.contains("<failure") || body.contains("<error") {
            Status::Failed
        } else if body.contains("<skipped") {
            Status::Skipped
        } else {
            Status::Passed
        };
        // A name seen twice (should not happen) keeps the worst outcome.
        let entry = results.entry(name).or_insert(status);
        *entry = (*entry).max(status);
    }
    results
}

/// One `python -m test` invocation with and without the shim.
fn python_run(python: &Path, label: &str, args: &[&str]) -> (Results, Results, usize) {
    let dumps = TempDir::new(&format!("suite-py-{label}-dumps"));
    let xml_dir = TempDir::new(&format!("suite-py-{label}-xml"));
    let run_for = |which: &str| {
        let xml = xml_dir.path().join(format!("{which}.xml"));
        Run::new(python)
            .args(["-m", "test", "--timeout=120", "--junit-xml"])
            .arg(&xml)
            .args(args)
            .env("PYTHONMALLOC", "malloc")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .timeout(Duration::from_secs(240))
    };
    // The shim's run writes shim.xml, the reference plain.xml: build the
    // two commands separately (`both` clones one).
    let plain = run_for("plain");
    let shimmed = run_for("shim")
        .with_shim()
        .prof_conf(prof_conf(dumps.path()));
    let started = Instant::now();
    let (reference, shim) = std::thread::scope(|s| {
        let reference = s.spawn(|| plain.run());
        let shim = shimmed.run();
        (reference.join().expect("reference run"), shim)
    });
    eprintln!(
        "python {label}: reference {:?}, shim {:?} (wall {:?} for both, concurrently)",
        reference.elapsed,
        shim.elapsed,
        started.elapsed()
    );
    let read = |which: &str, outcome: &Outcome| {
        let xml = xml_dir.path().join(format!("{which}.xml"));
        let text = std::fs::read_to_string(&xml).unwrap_or_else(|e| {
            panic!(
                "python {label}: no junit output {} ({e})\n{}",
                xml.display(),
                outcome.context()
            )
        });
        parse_junit(&text)
    };
    let (r, s) = (read("plain", &reference), read("shim", &shim));
    assert_eq!(
        reference.status.code(),
        shim.status.code(),
        "python {label}: exit status differs\n--- reference ---\n{}\n--- shim ---\n{}",
        reference.context(),
        shim.context()
    );
    let foreign: Vec<&str> = shim
        .stderr
        .lines()
        .filter(|l| l.contains("<heapsample>"))
        .collect();
    assert!(
        foreign.is_empty(),
        "python {label}: the shim warned: {foreign:?}"
    );
    let n = check_dumps(&format!("python {label}"), dumps.path());
    (r, s, n)
}

#[test]
fn cpython_regression_tests_under_the_shim() {
    let _ = shim_path();
    let Some(python) = python_with_tests() else {
        return skip(Missing::Software(
            "no Python with CPython's test modules (python3 -c 'import test.test_dict'; \
             Debian: apt-get install libpython3.11-testsuite)",
        ));
    };
    eprintln!("python: {}", python.display());
    let started = Instant::now();
    // Allocation-heavy modules, run whole.
    let (r1, s1, d1) = python_run(
        &python,
        "containers",
        &[
            "test_dict",
            "test_list",
            "test_set",
            "test_unicode",
            "test_json",
            "test_re",
            "test_gc",
            "test_weakref",
            "test_sort",
        ],
    );
    compare("cpython containers", &r1, &s1, 1000);
    // Threads and child processes (each child is preloaded too).
    let (r2, s2, d2) = python_run(
        &python,
        "threads-processes",
        &[
            "test_threading",
            "test_subprocess",
            "-m",
            "test.test_threading.*",
            "-m",
            "test_communicate*",
            "-m",
            "test_check_output*",
            "-m",
            "test_run_*",
            "-m",
            "test_env*",
            "-m",
            "test_pipesizes",
            "-m",
            "*fork*",
        ],
    );
    compare("cpython threads/subprocess", &r2, &s2, 200);
    eprintln!(
        "cpython: {} + {} cases, {d1} + {d2} dumps decoded, {:?} in all",
        r1.len(),
        r2.len(),
        started.elapsed()
    );
    assert!(d1 > 0 && d2 > 0, "the shim wrote no dumps");
}

// ---------------------------------------------------------------------------
// indexmap

const INDEXMAP: &str = "indexmap-2.14.2";

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo")
        })
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// The crate's source in the cargo registry, fetched if needed.
fn registry_source(krate: &str, scratch: &Path) -> Option<PathBuf> {
    let find = || -> Option<PathBuf> {
        let src = cargo_home().join("registry").join("src");
        std::fs::read_dir(src)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join(krate))
            .find(|p| p.join("Cargo.toml").is_file())
    };
    if let Some(found) = find() {
        return Some(found);
    }
    // Fetch it through a throwaway package depending on exactly that version.
    let (name, version) = krate.rsplit_once('-').expect("name-version");
    let fetcher = scratch.join("fetch");
    std::fs::create_dir_all(fetcher.join("src")).ok()?;
    std::fs::write(
        fetcher.join("Cargo.toml"),
        format!(
            "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             [dependencies]\n{name} = \"={version}\"\n[workspace]\n"
        ),
    )
    .ok()?;
    std::fs::write(fetcher.join("src/lib.rs"), "").ok()?;
    let status = Command::new(cargo())
        .arg("fetch")
        .current_dir(&fetcher)
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    find()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy to {}: {e}", target.display()));
        }
    }
}

/// Build the crate's tests (once; cargo's own caching makes later calls a
/// no-op) and return the test executables.
fn build_crate_tests(krate: &str) -> Option<Vec<PathBuf>> {
    let scratch = target_dir().join("heapsample-suites");
    std::fs::create_dir_all(&scratch).expect("create the suites directory");
    let source = scratch.join(krate);
    // A lock file: concurrent test binaries must not copy or build at once.
    let lock_path = scratch.join(format!("{krate}.lock"));
    let lock = std::fs::File::create(&lock_path).expect("create the lock file");
    // SAFETY: plain syscall on an open fd; released when `lock` drops.
    unsafe {
        use std::os::fd::AsRawFd;
        libc::flock(lock.as_raw_fd(), libc::LOCK_EX);
    }
    if !source.join("Cargo.toml").is_file() {
        let registry = registry_source(krate, &scratch)?;
        let tmp = scratch.join(format!(".{krate}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        copy_dir(&registry, &tmp);
        // Its own workspace: the scratch dir is inside this workspace.
        let manifest = tmp.join("Cargo.toml");
        let mut text = std::fs::read_to_string(&manifest).expect("read Cargo.toml");
        text.push_str("\n[workspace]\n");
        std::fs::write(&manifest, text).expect("write Cargo.toml");
        std::fs::rename(&tmp, &source).expect("move the source into place");
    }
    let started = Instant::now();
    let output = Command::new(cargo())
        .args(["test", "--release", "--no-run", "--message-format=json"])
        .current_dir(&source)
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    if !output.status.success() {
        eprintln!(
            "cargo test --no-run of {krate} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    let mut executables = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if !line.contains("\"reason\":\"compiler-artifact\"") || !line.contains("\"test\":true") {
            continue;
        }
        if let Some(at) = line.find("\"executable\":\"") {
            let rest = &line[at + 14..];
            if let Some(end) = rest.find('"') {
                executables.push(PathBuf::from(&rest[..end]));
            }
        }
    }
    executables.sort();
    eprintln!(
        "{krate}: {} test binaries built or up to date in {:?}",
        executables.len(),
        started.elapsed()
    );
    Some(executables)
}

/// libtest's default output: `test <name> ... ok|FAILED|ignored`.
fn parse_libtest(binary: &str, stdout: &str) -> Results {
    let mut results = Results::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let Some((name, outcome)) = rest.rsplit_once(" ... ") else {
            continue;
        };
        let status = if outcome == "ok" {
            Status::Passed
        } else if outcome.starts_with("ignored") {
            Status::Skipped
        } else if outcome == "FAILED" {
            Status::Failed
        } else {
            continue;
        };
        results.insert(format!("{binary}::{name}"), status);
    }
    results
}

#[test]
fn indexmap_test_suite_under_the_shim() {
    let _ = shim_path();
    let Some(binaries) = build_crate_tests(INDEXMAP) else {
        return skip(Missing::Software(&format!(
            "cannot build the test suite of {INDEXMAP} (cargo, crates.io or the registry)"
        )));
    };
    assert!(
        binaries.len() >= 3,
        "expected the lib and integration test binaries of {INDEXMAP}, got {binaries:?}"
    );
    let dumps = TempDir::new("suite-indexmap-dumps");
    let started = Instant::now();
    let (mut reference, mut shim) = (Results::new(), Results::new());
    for binary in &binaries {
        let stem = binary
            .file_name()
            .unwrap()
            .to_string_lossy()
            .rsplit_once('-')
            .map(|(s, _)| s.to_string())
            .unwrap_or_default();
        let run = Run::new(binary)
            // Bigger quickcheck runs (random inputs; the properties hold for all).
            .env("QUICKCHECK_GENERATOR_SIZE", "100")
            .env("QUICKCHECK_TESTS", "2000")
            .env("RUST_TEST_THREADS", "2")
            .timeout(Duration::from_secs(120));
        let (plain, with) = both(run, dumps.path());
        assert_eq!(
            plain.status.code(),
            with.status.code(),
            "{stem}: exit status differs\n--- reference ---\n{}\n--- shim ---\n{}",
            plain.context(),
            with.context()
        );
        reference.extend(parse_libtest(&stem, &plain.stdout));
        shim.extend(parse_libtest(&stem, &with.stdout));
        let warned: Vec<&str> = with
            .stderr
            .lines()
            .filter(|l| l.contains("<heapsample>"))
            .collect();
        assert!(warned.is_empty(), "{stem}: the shim warned: {warned:?}");
    }
    compare(INDEXMAP, &reference, &shim, 100);
    let n = check_dumps(INDEXMAP, dumps.path());
    eprintln!(
        "{INDEXMAP}: {} binaries, {} cases, {n} dumps decoded, {:?}",
        binaries.len(),
        reference.len(),
        started.elapsed()
    );
    assert!(n >= binaries.len(), "fewer dumps than test binaries");
}

#[test]
fn junit_and_libtest_parsers() {
    let xml = r#"<testsuites><testsuite><testcase name="a.b" status="run" result="completed" time="0.1" /><testcase name="a.c" status="run" result="completed" time="0.1"><skipped>why</skipped></testcase><testcase name="a.d" status="run" result="completed" time="0.1"><failure type="AssertionError">x</failure></testcase><testcase name="a.e" status="run" result="completed" time="0.1"><error>y</error></testcase></testsuite></testsuites>"#;
    let r = parse_junit(xml);
    assert_eq!(r["a.b"], Status::Passed);
    assert_eq!(r["a.c"], Status::Skipped);
    assert_eq!(r["a.d"], Status::Failed);
    assert_eq!(r["a.e"], Status::Failed);
    let out = "running 3 tests\ntest x::y ... ok\ntest z ... ignored, slow\ntest w ... FAILED\n\ntest result: FAILED";
    let r = parse_libtest("bin", out);
    assert_eq!(r.len(), 3);
    assert_eq!(r["bin::x::y"], Status::Passed);
    assert_eq!(r["bin::z"], Status::Skipped);
    assert_eq!(r["bin::w"], Status::Failed);
}
