//! heapdiff never trusts its input. Module paths naming a FIFO,
//! /dev/zero, a directory or a huge sparse file neither hang it nor exhaust
//! memory (each run is bounded by a 20 s timeout and a 2 GB address-space
//! limit); a 1 KB file claiming 2^60 stacks fails fast with exit status 2:
//! within 5 s of CPU time, which the kernel enforces (`RLIMIT_CPU`), not of
//! wall-clock time, which a loaded machine can stretch past any bound.

use heapsample_tests::format::{self, Dump, Module, Stack, Totals, Trigger};
use heapsample_tests::*;
use std::path::Path;
use std::time::{Duration, Instant};

fn dump_with_module(path: &str) -> Dump {
    Dump {
        writer: "test".into(),
        pid: 1,
        executable: path.into(),
        command_line: vec![path.into()],
        time_unix_ns: 1,
        trigger: Trigger::Final,
        lg_sample_period: 0,
        modules: vec![Module {
            path: path.into(),
            build_id: vec![1, 2, 3, 4],
            load_bias: 0x40_0000,
            ranges: vec![(0x40_0000, 0x50_0000)],
            first_epoch: 0,
            last_epoch: None,
        }],
        stacks: vec![Stack {
            frames: vec![0x40_1234, 0x40_2345],
            thread: 1,
            epoch: 0,
            live_objects: 1,
            live_bytes: 100,
            live_usable_bytes: 104,
            alloc_objects: 1,
            alloc_bytes: 100,
            live: format::legacy_weights(1, 100, 1),
            alloc: format::legacy_weights(1, 100, 1),
            lifetimes: vec![],
        }],
        ..format::testing::dump()
    }
}

fn run_heapdiff(dir: &Path, dump: &Path) -> Outcome {
    run_heapdiff_limited(dir, dump, &["--as=2000000000"])
}

/// heapdiff's text report of `dump` under `prlimit` with `limits`.
fn run_heapdiff_limited(dir: &Path, dump: &Path, limits: &[&str]) -> Outcome {
    Run::new("prlimit")
        .args(limits)
        .arg(heapdiff_path())
        .args(["-f", "text"])
        .arg(dump)
        .env("HOME", dir)
        .timeout(Duration::from_secs(20))
        .run()
}

#[test]
fn hostile_module_paths() {
    let dir = TempDir::new("hostile-modules");
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let sparse = dir.path().join("sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let subdir = dir.path().join("a-directory");
    std::fs::create_dir(&subdir).unwrap();
    for (label, path) in [
        ("dev-zero", "/dev/zero"),
        ("directory", subdir.to_str().unwrap()),
        ("sparse-64GiB", sparse.to_str().unwrap()),
        ("dev-stdin", "/dev/stdin"),
        // Last: the one that hung heapdiff when this test was written.
        ("fifo", fifo.to_str().unwrap()),
    ] {
        let file = dir.path().join(format!("{label}.prof"));
        std::fs::write(&file, format::encode(&dump_with_module(path))).unwrap();
        let started = Instant::now();
        let outcome = run_heapdiff(dir.path(), &file);
        eprintln!(
            "{label}: {} in {:?}: {}",
            describe_status(&outcome.status),
            started.elapsed(),
            outcome.stderr.lines().next().unwrap_or("")
        );
        assert!(
            outcome.status.code().is_some_and(|c| c == 0 || c == 2),
            "{label}: heapdiff did not end cleanly\n{}",
            outcome.context()
        );
    }
    // The FIFO was never opened for writing, nothing was written anywhere.
    assert_eq!(std::fs::metadata(&sparse).unwrap().len(), 64 << 30);
}

#[test]
fn one_kilobyte_claiming_2_pow_60_stacks() {
    let mut dump = dump_with_module("/bin/true");
    dump.stacks.clear();
    dump.totals = Totals::default();
    let encoded = format::encode(&dump);
    let body = &encoded[format::HEADER_LEN..];
    // The stacks count (0, one byte) comes right before the totals
    // (9 one-byte zero varints and an Option None = 10 bytes).
    let cut = body.len() - 11;
    assert_eq!(body[cut], 0);
    let mut new_body = body[..cut].to_vec();
    new_body.push(253); // varint marker for a u64
    new_body.extend_from_slice(&(1u64 << 60).to_le_bytes());
    new_body.resize(1000, 7);
    let mut file = Vec::new();
    file.extend_from_slice(&format::MAGIC);
    file.extend_from_slice(&format::VERSION.to_le_bytes());
    file.extend_from_slice(&crc32(&new_body).to_le_bytes());
    file.extend_from_slice(&(new_body.len() as u64).to_le_bytes());
    file.extend_from_slice(&new_body);
    assert!(file.len() <= 1024);
    let dir = TempDir::new("huge-count");
    let path = dir.path().join("huge.prof");
    std::fs::write(&path, &file).unwrap();
    // Fast: 5 s of CPU at most, or SIGXCPU ends it and the status is not
    // 2. (Reading 2^60 of anything would take years.)
    let started = Instant::now();
    let outcome = run_heapdiff_limited(dir.path(), &path, &["--as=2000000000", "--cpu=5"]);
    let took = started.elapsed();
    assert_eq!(
        outcome.status.code(),
        Some(2),
        "after {took:?}\n{}",
        outcome.context()
    );
    let first = outcome.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("heapdiff: ") && first.contains("huge.prof"),
        "{first}"
    );
    assert!(first.contains("corrupt"), "unclear error: {first}");
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
