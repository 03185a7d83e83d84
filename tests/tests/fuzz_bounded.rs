//! A bounded, stable-toolchain fuzz run of the two parsers that read
//! untrusted input, so CI exercises them without nightly or cargo-fuzz (the
//! coverage-guided targets are in `fuzz/`, run with `fuzz/run.sh`).
//!
//! - The dump decoder (`heapsample_format::decode`): seeded random mutations
//!   of the real dumps in `fuzz/seeds/dump/` (bit flips, byte insertion and
//!   deletion, truncation, splices of two dumps, varint and length-field
//!   inflation, interesting bytes). Most mutations are applied to the body
//!   and the header's length and CRC recomputed, so the bincode decoder
//!   itself is reached rather than the checksum check. Each input must
//!   decode without panicking, within a bounded time, with a peak heap
//!   proportional to its size (measured by a counting global allocator), and
//!   every `Ok(dump)` must re-encode into a file that decodes to the same
//!   dump.
//! - heapdiff's loading path (`heapdiff::input::load` on a file, then
//!   interning and building the profile, no symbolization): never panics and
//!   agrees with `decode`.
//! - The `PROF_CONF` parser (`heapsample_recorder::config::parse`) on random
//!   key:value soup: never panics, every bad item yields exactly one warning
//!   (and a good one none), and the result stays within the ranges
//!   documented in MALLOC_CONF.md.
//!
//! Knobs: `HEAPSAMPLE_FUZZ_SEED` (the seed, printed by every run; default
//! from the clock) and `HEAPSAMPLE_FUZZ_SECS` (seconds for the whole file,
//! default 15). A failing input is written to
//! `<target>/fuzz-failures/` and named in the panic message.

use heapsample_options::config::{self, Config, GdumpStep};
use heapsample_tests::format::{self, DecodeError, Dump, HEADER_LEN};
use heapsample_tests::{TempDir, target_dir, workspace_root};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// A counting allocator: per-thread current and peak bytes, so one test can
// measure the heap a single decode needs while other tests run in parallel.

struct Counting;

thread_local! {
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

thread_local! {
    /// While a decode runs: the largest single allocation it may request
    /// (0: no limit), and the input, saved by [`trap`] if it is exceeded.
    static TRAP_LIMIT: Cell<usize> = const { Cell::new(0) };
    static TRAP_INPUT: Cell<(*const u8, usize)> = const { Cell::new((std::ptr::null(), 0)) };
}

/// Where a trapped input is saved (set once per process, NUL-terminated).
static TRAP_PATH: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// Called by the allocator when a decode requests more than its limit at
/// once: the process is about to abort ("memory allocation of N bytes
/// failed"), so save the input and say so with raw syscalls (no allocation
/// here). Returns true if the request must be refused.
fn trap(size: usize) -> bool {
    let limit = TRAP_LIMIT.try_with(|l| l.get()).unwrap_or(0);
    if limit == 0 || size <= limit {
        return false;
    }
    let _ = TRAP_LIMIT.try_with(|l| l.set(0));
    let (ptr, len) = TRAP_INPUT
        .try_with(|i| i.get())
        .unwrap_or((std::ptr::null(), 0));
    let say = |bytes: &[u8]| {
        // SAFETY: writing a valid buffer to fd 2.
        unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
    };
    say(
        b"\nfuzz_bounded: decode requested a single allocation larger than its heap limit \
          (proportional to the input); refusing it (the process aborts). Input saved to ",
    );
    if let Some(path) = TRAP_PATH.get() {
        say(path.as_bytes());
        if !ptr.is_null() {
            // SAFETY: path is NUL-terminated; ptr/len is the live input slice
            // of the decode in progress on this thread.
            unsafe {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                    0o644,
                );
                if fd >= 0 {
                    libc::write(fd, ptr.cast(), len);
                    libc::close(fd);
                }
            }
        }
    }
    say(b"\n");
    true
}

fn track(delta: isize) {
    let _ = CURRENT.try_with(|current| {
        let now = current.get() + delta;
        current.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now);
            }
        });
    });
}

// SAFETY: forwards every call to the system allocator unchanged; the
// bookkeeping only touches const-initialized thread-locals (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if trap(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if trap(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if trap(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Run `f` and return its result with the peak heap growth (bytes) of this
/// thread while it ran.
fn measure_peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = CURRENT.with(|c| c.get());
    PEAK.with(|p| p.set(start));
    let result = f();
    let peak = PEAK.with(|p| p.get());
    (result, (peak - start).max(0) as usize)
}

// ---------------------------------------------------------------------------
// Randomness and budgets

/// SplitMix64: small, fast, good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn seed_for(test: &str) -> u64 {
    let base = match std::env::var("HEAPSAMPLE_FUZZ_SEED") {
        Ok(s) => s
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("HEAPSAMPLE_FUZZ_SEED={s:?} is not a u64")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    };
    eprintln!("{test}: HEAPSAMPLE_FUZZ_SEED={base}");
    // Each test gets its own stream from the same printed seed.
    let mut h = base;
    for b in test.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
    }
    h
}

/// This test's share of the file's time budget (`HEAPSAMPLE_FUZZ_SECS`,
/// default 15 s for the whole file; tests run in parallel).
fn budget(share: f64) -> Duration {
    let total: f64 = std::env::var("HEAPSAMPLE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15.0);
    Duration::from_secs_f64(total * share)
}

/// Longest CPU time one input may take on its thread. Decoding a few KB
/// takes microseconds. The thread's own CPU time, not the wall clock: a
/// loaded machine (or a stop of the whole test process) can hold a
/// runnable thread off its core for longer than any wall-clock bound,
/// while a decoder that loops or allocates without end spends CPU time
/// whatever the load.
const PER_INPUT_LIMIT: Duration = Duration::from_secs(1);

/// CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`): what a decode
/// costs, whatever else the machine runs. Decoding, loading and parsing
/// run on the calling thread only.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Peak heap one decode may use: proportional to the input (the largest
/// in-memory element per encoded byte is a Module, ~112 bytes for >= 6
/// bytes, and a vector may double once) plus serde's capped preallocations
/// along one nesting chain (1 MiB each).
fn heap_limit(input_len: usize) -> usize {
    64 * input_len + (8 << 20)
}

fn save_failure(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = target_dir().join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(name);
    let _ = std::fs::write(&path, bytes);
    path
}

// ---------------------------------------------------------------------------
// Seeds and mutations

fn seed_dumps() -> Vec<(String, Vec<u8>)> {
    let dir = workspace_root().join("fuzz").join("seeds").join("dump");
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list the seed corpus {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "prof"))
        .map(|p| {
            let bytes =
                std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    seeds.sort();
    assert!(
        seeds.len() >= 3,
        "expected at least 3 seed dumps in {}",
        dir.display()
    );
    seeds
}

/// The header for `body`, with its correct length and CRC.
fn with_header(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&format::MAGIC);
    out.extend_from_slice(&format::VERSION.to_le_bytes());
    out.extend_from_slice(&crc32fast_hash(body).to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// CRC-32 (IEEE), bitwise: the tests crate does not depend on crc32fast.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        t
    });
    let mut crc = !0u32;
    for &b in bytes {
        crc = table[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// Bytes that mean something to bincode's varint encoding (251: u16
/// follows, 252: u32, 253: u64, 254: u128) and to bool/option/enum tags.
const INTERESTING: &[u8] = &[0, 1, 2, 4, 0x7f, 0x80, 250, 251, 252, 253, 254, 255];

/// Large values to plant as varint-encoded lengths or counts.
const BIG: &[u64] = &[
    u64::MAX,
    1 << 60,
    1 << 40,
    1 << 32,
    u32::MAX as u64,
    1 << 31,
    1 << 20,
    1 << 16,
    65535,
    251,
];

fn varint(value: u64) -> Vec<u8> {
    if value < 251 {
        vec![value as u8]
    } else if value <= u64::from(u16::MAX) {
        let mut v = vec![251];
        v.extend_from_slice(&(value as u16).to_le_bytes());
        v
    } else if value <= u64::from(u32::MAX) {
        let mut v = vec![252];
        v.extend_from_slice(&(value as u32).to_le_bytes());
        v
    } else {
        let mut v = vec![253];
        v.extend_from_slice(&value.to_le_bytes());
        v
    }
}

/// One random mutation of `data` in place; `other` is a second input for
/// splices. Returns the mutation's name (for failure messages).
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) -> &'static str {
    if data.is_empty() {
        data.push(rng.next() as u8);
        return "grow-empty";
    }
    match rng.below(11) {
        0 => {
            let n = 1 + rng.below(4);
            for _ in 0..n {
                let at = rng.below(data.len());
                data[at] ^= 1 << rng.below(8);
            }
            "bit-flip"
        }
        1 => {
            let at = rng.below(data.len());
            data[at] = *rng.pick(INTERESTING);
            "interesting-byte"
        }
        2 => {
            let at = rng.below(data.len() + 1);
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let b = if rng.chance(2) {
                    *rng.pick(INTERESTING)
                } else {
                    rng.next() as u8
                };
                data.insert(at, b);
            }
            "insert"
        }
        3 => {
            let at = rng.below(data.len());
            let n = (1 + rng.below(16)).min(data.len() - at);
            data.drain(at..at + n);
            "delete"
        }
        4 => {
            let keep = rng.below(data.len());
            data.truncate(keep);
            "truncate"
        }
        5 => {
            // Splice: a prefix of this input and a suffix of the other.
            let cut = rng.below(data.len() + 1);
            let from = if other.is_empty() {
                0
            } else {
                rng.below(other.len())
            };
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
            "splice"
        }
        6 => {
            // Replace one byte with a large varint (a length or count that
            // claims far more than the input holds).
            let at = rng.below(data.len());
            let big = *rng.pick(BIG);
            let value = if rng.chance(2) {
                big
            } else {
                big.saturating_sub(rng.below(4) as u64)
            };
            data.splice(at..at + 1, varint(value));
            "varint-inflate"
        }
        7 => {
            // Widen a small varint without changing its value (non-canonical
            // but decodable): shifts the rest, keeps the meaning.
            let at = rng.below(data.len());
            if data[at] < 251 {
                let v = u64::from(data[at]);
                let wide = match rng.below(3) {
                    0 => {
                        let mut w = vec![251];
                        w.extend_from_slice(&(v as u16).to_le_bytes());
                        w
                    }
                    1 => {
                        let mut w = vec![252];
                        w.extend_from_slice(&(v as u32).to_le_bytes());
                        w
                    }
                    _ => {
                        let mut w = vec![253];
                        w.extend_from_slice(&v.to_le_bytes());
                        w
                    }
                };
                data.splice(at..at + 1, wide);
            }
            "varint-widen"
        }
        8 => {
            // Add a small amount to one byte (counts off by a few).
            let at = rng.below(data.len());
            data[at] = data[at].wrapping_add(1 + rng.below(3) as u8);
            "increment"
        }
        9 => {
            // Duplicate a chunk (repeated elements, lengths now wrong).
            let at = rng.below(data.len());
            let n = (1 + rng.below(64)).min(data.len() - at);
            let chunk: Vec<u8> = data[at..at + n].to_vec();
            let to = rng.below(data.len() + 1);
            data.splice(to..to, chunk);
            "duplicate-chunk"
        }
        _ => {
            // Random bytes over a span.
            let at = rng.below(data.len());
            let n = (1 + rng.below(32)).min(data.len() - at);
            for b in &mut data[at..at + n] {
                *b = rng.next() as u8;
            }
            "random-span"
        }
    }
}

/// Mutations of the header itself (the body left as it is).
fn mutate_header(rng: &mut Rng, file: &mut [u8]) -> &'static str {
    if file.len() < HEADER_LEN {
        return "none";
    }
    match rng.below(4) {
        0 => {
            let claimed = *rng.pick(&[
                u64::MAX,
                1 << 60,
                format::MAX_BODY_LEN,
                format::MAX_BODY_LEN + 1,
                0,
                (file.len() - HEADER_LEN) as u64 + 1,
                (file.len() - HEADER_LEN) as u64 - 1,
            ]);
            file[16..24].copy_from_slice(&claimed.to_le_bytes());
            "header-length"
        }
        1 => {
            let version = *rng.pick(&[0u32, 2, u32::MAX]);
            file[8..12].copy_from_slice(&version.to_le_bytes());
            "header-version"
        }
        2 => {
            let at = rng.below(8);
            file[at] ^= 1 << rng.below(8);
            "header-magic"
        }
        _ => {
            let at = 12 + rng.below(4);
            file[at] ^= 1 << rng.below(8);
            "header-crc"
        }
    }
}

// ---------------------------------------------------------------------------
// The checks on one decoder input

struct Stats {
    inputs: u64,
    ok: u64,
    slowest: Duration,
    largest_heap_ratio: f64,
    errors: std::collections::BTreeMap<&'static str, u64>,
}

impl Stats {
    fn new() -> Stats {
        Stats {
            inputs: 0,
            ok: 0,
            slowest: Duration::ZERO,
            largest_heap_ratio: 0.0,
            errors: Default::default(),
        }
    }
}

fn error_kind(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::TooShort { .. } => "too-short",
        DecodeError::Foreign => "foreign",
        DecodeError::UnsupportedVersion { .. } => "version",
        DecodeError::BodyTooLarge { .. } => "body-too-large",
        DecodeError::Truncated { .. } => "truncated",
        DecodeError::TrailingBytes { .. } => "trailing",
        DecodeError::Checksum { .. } => "checksum",
        DecodeError::Body(_) => "body",
    }
}

/// Decode `input` and check every property; returns the decoded dump.
fn check_decode(input: &[u8], what: &str, seed: u64, stats: &mut Stats) -> Option<Dump> {
    let fail = |why: String| -> ! {
        let path = save_failure(&format!("decode-{seed}-{}.prof", stats_id(input)), input);
        panic!(
            "{why}\n  input: {what}, {} bytes, saved to {}\n  \
             reproduce: heapsample_format::decode(&std::fs::read(path)?) \
             or HEAPSAMPLE_FUZZ_SEED with the seed printed above",
            input.len(),
            path.display()
        )
    };
    let started = thread_cpu_time();
    let (result, peak) = measure_peak(|| catch_unwind(AssertUnwindSafe(|| guarded_decode(input))));
    let elapsed = thread_cpu_time() - started;
    let result = match result {
        Ok(r) => r,
        Err(_) => fail("decode panicked".to_string()),
    };
    if elapsed > PER_INPUT_LIMIT {
        fail(format!(
            "decode took {elapsed:?} (limit {PER_INPUT_LIMIT:?})"
        ));
    }
    if peak > heap_limit(input.len()) {
        fail(format!(
            "decode of {} bytes used a peak of {peak} heap bytes (limit {})",
            input.len(),
            heap_limit(input.len())
        ));
    }
    stats.inputs += 1;
    stats.slowest = stats.slowest.max(elapsed);
    stats.largest_heap_ratio = stats
        .largest_heap_ratio
        .max(peak as f64 / input.len().max(1) as f64);
    match result {
        Ok(dump) => {
            stats.ok += 1;
            let again = catch_unwind(AssertUnwindSafe(|| format::decode(&format::encode(&dump))));
            match again {
                Ok(Ok(back)) if back == dump => {}
                Ok(Ok(back)) => fail(format!(
                    "re-encoded dump decodes differently:\n  first {dump:?}\n  again {back:?}"
                )),
                Ok(Err(e)) => fail(format!("re-encoded dump does not decode: {e}")),
                Err(_) => fail("encode or decode of the re-encoded dump panicked".into()),
            }
            Some(dump)
        }
        Err(e) => {
            // Every error has a message (Display must not panic either).
            let message = catch_unwind(AssertUnwindSafe(|| e.to_string()))
                .unwrap_or_else(|_| fail(format!("Display of {e:?} panicked")));
            if message.is_empty() {
                fail(format!("{e:?} has an empty message"));
            }
            *stats.errors.entry(error_kind(&e)).or_default() += 1;
            None
        }
    }
}

/// `decode` with the allocator trap armed for this input.
fn guarded_decode(input: &[u8]) -> Result<Dump, DecodeError> {
    TRAP_INPUT.with(|i| i.set((input.as_ptr(), input.len())));
    TRAP_LIMIT.with(|l| l.set(heap_limit(input.len())));
    let result = format::decode(input);
    TRAP_LIMIT.with(|l| l.set(0));
    TRAP_INPUT.with(|i| i.set((std::ptr::null(), 0)));
    result
}

/// Run the test `name` of this binary in a child process (a decoder that
/// aborts the process must fail this test, not kill the whole binary), or,
/// in that child, run `body`.
fn isolated(name: &str, body: impl FnOnce()) {
    const CHILD: &str = "HEAPSAMPLE_FUZZ_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let dir = target_dir().join("fuzz-failures");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}-{}-aborted.prof", std::process::id()));
        let _ = TRAP_PATH.set(std::ffi::CString::new(path.display().to_string()).unwrap());
        body();
        return;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let output = std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("run the test in a child process");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Pass the child's report through.
    for line in stderr.lines().filter(|l| !l.starts_with("note: run with")) {
        eprintln!("  child: {line}");
    }
    if !output.status.success() {
        use std::os::unix::process::ExitStatusExt;
        let how = match output.status.signal() {
            Some(sig) => format!("was killed by signal {sig} (the decoder aborted the process)"),
            None => format!("failed ({})", output.status),
        };
        panic!("{name} {how}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    }
}

fn stats_id(input: &[u8]) -> String {
    format!("{:08x}", crc32fast_hash(input))
}

// ---------------------------------------------------------------------------
// The tests

#[test]
fn seeds_are_real_dumps_that_round_trip() {
    let mut with_stacks = 0;
    for (name, bytes) in seed_dumps() {
        let dump = format::decode(&bytes).unwrap_or_else(|e| panic!("seed {name}: {e}"));
        assert!(!dump.modules.is_empty(), "seed {name} has no modules");
        assert_eq!(
            format::encode(&dump),
            bytes,
            "seed {name} does not re-encode byte for byte"
        );
        assert!(
            bytes.len() <= 16 << 10,
            "seed {name} is {} bytes: keep seeds small",
            bytes.len()
        );
        with_stacks += usize::from(!dump.stacks.is_empty());
    }
    assert!(with_stacks >= 3, "fewer than 3 seeds have stacks");
}

/// The dumps of `fuzz/seeds/dump-v2/`, written by the shim in dump format
/// 2 (no per-sample weights), still load: the decoder converts them with the
/// old average-size correction, and heapdiff says so in one note.
#[test]
fn version_2_seeds_still_load() {
    let dir = workspace_root().join("fuzz").join("seeds").join("dump-v2");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the format-2 seeds") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let (dump, version) =
            format::decode_versioned(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(version, format::LEGACY_VERSION, "{}", path.display());
        let period = dump.sample_period();
        for stack in &dump.stacks {
            let (objects, bytes) = format::unsample(stack.live_objects, stack.live_bytes, period);
            assert!((stack.live.objects - objects).abs() <= 1e-9 * objects.max(1.0));
            assert!((stack.live.bytes - bytes).abs() <= 1e-9 * bytes.max(1.0));
        }
        let output = std::process::Command::new(heapsample_tests::heapdiff_path())
            .args(["--format", "text"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{}: {stderr}", path.display());
        assert_eq!(
            stderr.matches("dump format 2").count(),
            1,
            "{}: expected one note about the old format: {stderr}",
            path.display()
        );
        seen += 1;
    }
    assert!(seen >= 3, "expected at least 3 format-2 seeds");
}

/// Each seed of `fuzz/seeds/dump-v<version>/` decodes as that version,
/// passes `check`, and `heapdiff --format text` reads it; at least three.
fn older_seeds_still_load(version: u32, check: impl Fn(&format::Dump) -> Result<(), String>) {
    let dir = workspace_root()
        .join("fuzz")
        .join("seeds")
        .join(format!("dump-v{version}"));
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the older format's seeds") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let (dump, read) =
            format::decode_versioned(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(read, version, "{}", path.display());
        if let Err(why) = check(&dump) {
            panic!("{}: {why}", path.display());
        }
        let output = std::process::Command::new(heapsample_tests::heapdiff_path())
            .args(["--format", "text"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        seen += 1;
    }
    assert!(seen >= 3, "expected at least 3 format-{version} seeds");
}

/// The dumps of `fuzz/seeds/dump-v3/`, written by the shim in dump format
/// 3, still load: no process identity, clocks, live samples, lifetimes or
/// peak, their countdown's law (no unit per call) kept, and heapdiff reads
/// them.
#[test]
fn version_3_seeds_still_load() {
    older_seeds_still_load(format::VERSION_3, |dump| {
        let untimed = dump.process == format::Process::default()
            && dump.bytes_per_call == 0
            && dump.live_samples.is_empty()
            && dump.peak.is_none()
            && dump.stacks.iter().all(|s| s.lifetimes.is_empty());
        untimed
            .then_some(())
            .ok_or_else(|| format!("time data in a format-3 dump: {:?}", dump.process))
    });
}

/// The dumps of `fuzz/seeds/dump-v4/`, written by the shim in dump format
/// 4, still load: their clocks, live samples and lifetimes kept, no
/// process context, runtime names or profiler cost, and heapdiff reads
/// them.
#[test]
fn version_4_seeds_still_load() {
    older_seeds_still_load(format::PREVIOUS_VERSION, |dump| {
        let converted = dump.process.id != 0
            && dump.context == format::ProcessContext::default()
            && dump.runtime.symbols.is_empty()
            && dump.removed_dumps.is_empty()
            && dump.cost == format::ProfilerCost::default();
        converted
            .then_some(())
            .ok_or_else(|| format!("a format-4 dump converted wrongly: {:?}", dump.context))
    });
}

#[test]
fn decoder_survives_mutated_dumps() {
    isolated("decoder_survives_mutated_dumps", decoder_mutations);
}

fn decoder_mutations() {
    let seed = seed_for("decoder_survives_mutated_dumps");
    let mut rng = Rng(seed);
    let seeds = seed_dumps();
    let bodies: Vec<Vec<u8>> = seeds
        .iter()
        .map(|(_, b)| b[HEADER_LEN..].to_vec())
        .collect();
    let deadline = Instant::now() + budget(0.5);
    let mut stats = Stats::new();
    let mut by_mutation: std::collections::BTreeMap<&'static str, (u64, u64)> = Default::default();
    while Instant::now() < deadline {
        for _ in 0..64 {
            let which = rng.below(bodies.len());
            let other = &bodies[rng.below(bodies.len())];
            let mut body = bodies[which].clone();
            let max_rounds = if rng.chance(4) { 8 } else { 2 };
            let rounds = 1 + rng.below(max_rounds);
            let mut names = Vec::new();
            for _ in 0..rounds {
                names.push(mutate(&mut rng, &mut body, other));
            }
            // Mostly a correct header, so the body decoder is reached;
            // sometimes the header is damaged too, or the whole file mutated.
            let mut file = with_header(&body);
            match rng.below(8) {
                0 => names.push(mutate_header(&mut rng, &mut file)),
                1 => {
                    let mut raw = seeds[which].1.clone();
                    names.clear();
                    names.push("raw");
                    for _ in 0..rounds {
                        names.push(mutate(&mut rng, &mut raw, other));
                    }
                    file = raw;
                }
                _ => {}
            }
            let what = format!("{} mutated by {}", seeds[which].0, names.join("+"));
            let ok = check_decode(&file, &what, seed, &mut stats).is_some();
            let entry = by_mutation.entry(names[names.len() - 1]).or_default();
            entry.0 += 1;
            entry.1 += u64::from(ok);
        }
    }
    eprintln!(
        "decoder: {} inputs in {:?}, {} decoded Ok (and re-encoded), slowest {:?} of CPU, \
         peak heap <= {:.1} x input size; errors {:?}; (inputs, ok) by last mutation {:?}",
        stats.inputs,
        budget(0.5),
        stats.ok,
        stats.slowest,
        stats.largest_heap_ratio,
        stats.errors,
        by_mutation
    );
    assert!(stats.inputs > 1000, "too few inputs: {}", stats.inputs);
    // The mutations must reach the body decoder, not stop at the header.
    assert!(
        stats.errors.get("body").copied().unwrap_or(0) > stats.inputs / 4,
        "mutations rarely reached the body decoder: {:?}",
        stats.errors
    );
    assert!(
        stats.ok > 0,
        "no mutated input decoded: mutations too coarse"
    );
}

/// Bodies full of huge claimed lengths at every position: each must fail
/// (or decode) fast and small. This is deterministic: every position of
/// every seed, with each large value.
#[test]
fn decoder_every_position_inflated() {
    isolated("decoder_every_position_inflated", every_position_inflated);
}

fn every_position_inflated() {
    let mut stats = Stats::new();
    for (name, bytes) in seed_dumps() {
        let body = &bytes[HEADER_LEN..];
        for at in 0..body.len() {
            for &big in &[u64::MAX, 1 << 60, u64::from(u32::MAX)] {
                let mut b = body.to_vec();
                b.splice(at..at + 1, varint(big));
                let file = with_header(&b);
                check_decode(
                    &file,
                    &format!("{name} with byte {at} replaced by varint {big}"),
                    0,
                    &mut stats,
                );
            }
        }
    }
    eprintln!(
        "inflated: {} inputs, {} Ok, slowest {:?} of CPU, peak heap <= {:.1} x input; errors {:?}",
        stats.inputs, stats.ok, stats.slowest, stats.largest_heap_ratio, stats.errors
    );
}

/// heapdiff's loading path from a file: `input::load`, then interning and
/// building the profile for every metric (no symbolization: that reads
/// the files the dump names, covered by heapdiff_hostile.rs).
#[test]
fn heapdiff_load_survives_mutated_dumps() {
    isolated(
        "heapdiff_load_survives_mutated_dumps",
        heapdiff_load_mutations,
    );
}

fn heapdiff_load_mutations() {
    use heapdiff::model::folding::folded;
    use heapdiff::model::{BuildOptions, Metric, Profile};
    use heapdiff::symbols::LocationTable;

    let seed = seed_for("heapdiff_load_survives_mutated_dumps");
    let mut rng = Rng(seed);
    let seeds = seed_dumps();
    let bodies: Vec<Vec<u8>> = seeds
        .iter()
        .map(|(_, b)| b[HEADER_LEN..].to_vec())
        .collect();
    let dir = TempDir::new("fuzz-load");
    let path = dir.path().join("input.prof");
    let deadline = Instant::now() + budget(0.2);
    let (mut inputs, mut loaded) = (0u64, 0u64);
    let mut slowest = Duration::ZERO;
    while Instant::now() < deadline {
        let which = rng.below(bodies.len());
        let mut body = bodies[which].clone();
        let other = &bodies[rng.below(bodies.len())];
        let mut names = Vec::new();
        for _ in 0..1 + rng.below(3) {
            names.push(mutate(&mut rng, &mut body, other));
        }
        let file = with_header(&body);
        std::fs::write(&path, &file).expect("write the input");
        let started = thread_cpu_time();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            TRAP_INPUT.with(|i| i.set((file.as_ptr(), file.len())));
            TRAP_LIMIT.with(|l| l.set(heap_limit(file.len())));
            let loaded = heapdiff::input::load(&path).map(|input| input.dump);
            TRAP_LIMIT.with(|l| l.set(0));
            let built = loaded.as_ref().ok().map(|dump| {
                let mut table = LocationTable::default();
                let stacks = table.intern_dump(dump);
                let profile = Profile::build(dump, &stacks, &table, BuildOptions::default());
                for metric in Metric::ALL {
                    let _ = folded(&profile, &table, metric);
                }
                profile.samples.len()
            });
            (loaded.map(|_| ()).map_err(|e| e.to_string()), built)
        }));
        let elapsed = thread_cpu_time() - started;
        inputs += 1;
        slowest = slowest.max(elapsed);
        let what = format!("{} mutated by {}", seeds[which].0, names.join("+"));
        let fail = |why: String| -> ! {
            let saved = save_failure(&format!("load-{seed}-{}.prof", stats_id(&file)), &file);
            panic!("{why}\n  input: {what}, saved to {}", saved.display())
        };
        let (result, _) = match outcome {
            Ok(r) => r,
            Err(_) => fail("heapdiff load/profile panicked".into()),
        };
        if elapsed > PER_INPUT_LIMIT {
            fail(format!("heapdiff load/profile took {elapsed:?}"));
        }
        // input::load agrees with decode, plus its own range check.
        let decoded = format::decode(&file);
        match (&result, &decoded) {
            (Ok(()), Ok(d)) => {
                assert!(d.lg_sample_period <= 62);
                loaded += 1;
            }
            (Err(_), Err(_)) => {}
            (Err(why), Ok(d)) if d.lg_sample_period > 62 => {
                assert!(why.contains("sampling period"), "{why}")
            }
            _ => fail(format!(
                "input::load and decode disagree: load {result:?}, decode ok = {}",
                decoded.is_ok()
            )),
        }
    }
    eprintln!(
        "heapdiff load: {inputs} inputs, {loaded} loaded and profiled, slowest {slowest:?} of CPU"
    );
    assert!(inputs > 100, "too few inputs: {inputs}");
}

// ---------------------------------------------------------------------------
// Regressions found by this fuzzer

/// A dump whose every string is distinctive, so its length prefix can be
/// found in the encoded body.
fn dump_with_strings() -> Dump {
    use heapsample_tests::format::{Module, Stack, ThreadInfo, Trigger};
    Dump {
        writer: "W-writer-string".into(),
        pid: 7,
        executable: "/E-executable-string".into(),
        command_line: vec!["C-command-line-string".into()],
        time_unix_ns: 1,
        trigger: Trigger::Final,
        lg_sample_period: 0,
        config: "K-config-string".into(),
        modules: vec![Module {
            path: "/M-module-path-string".into(),
            build_id: vec![1, 2, 3, 4],
            load_bias: 0x40_0000,
            ranges: vec![(0x40_0000, 0x50_0000)],
            first_epoch: 0,
            last_epoch: None,
        }],
        threads: vec![ThreadInfo {
            serial: 1,
            tid: 7,
            name: "T-thread-name-string".into(),
        }],
        stacks: vec![Stack {
            frames: vec![0x40_1000],
            thread: 1,
            live_objects: 1,
            live_bytes: 16,
            live_usable_bytes: 24,
            alloc_objects: 1,
            alloc_bytes: 16,
            ..Stack::default()
        }],
        ..format::testing::dump()
    }
}

/// For each string of [`dump_with_strings`] and each huge length: the file
/// with that string's length prefix replaced by the claim.
fn string_length_claims() -> Vec<(String, Vec<u8>)> {
    let dump = dump_with_strings();
    let file = format::encode(&dump);
    let body = &file[HEADER_LEN..];
    let mut out = Vec::new();
    for s in [
        &dump.writer,
        &dump.executable,
        &dump.command_line[0],
        &dump.config,
        &dump.modules[0].path,
        &dump.threads[0].name,
    ] {
        let at = body
            .windows(s.len())
            .position(|w| w == s.as_bytes())
            .expect("string in the body")
            - 1;
        assert_eq!(body[at] as usize, s.len(), "length prefix of {s:?}");
        for claim in [1u64 << 62, 93_888_738_835_801, 1 << 30, 256 << 20] {
            let mut b = body.to_vec();
            b.splice(at..at + 1, varint(claim));
            out.push((format!("{s:?} claiming {claim} bytes"), with_header(&b)));
        }
    }
    out
}

/// Found by `decoder_every_position_inflated`: a string's length prefix is
/// trusted. bincode's serde `deserialize_string` allocates `vec![0u8; len]`
/// for the claimed length before reading, so a ~900-byte dump claiming a
/// 2^46-byte string aborts the process ("memory allocation of
/// 93888738835801 bytes failed", SIGABRT), 2^62 panics with a capacity
/// overflow, and 2^30 allocates 1 GiB. Every claim must fail as a
/// `DecodeError` within the heap limit proportional to the input.
#[test]
fn regression_string_length_claims_decode() {
    isolated("regression_string_length_claims_decode", || {
        let mut stats = Stats::new();
        for (what, file) in string_length_claims() {
            eprintln!("decoding {what}");
            let result = check_decode(&file, &what, 0, &mut stats);
            assert!(result.is_none(), "{what}: decoded");
        }
    });
}

/// The same inputs through the heapdiff binary, with a 1 GiB address-space
/// limit: each must exit with status 2 and one clear error, never abort.
#[test]
fn regression_string_length_claims_heapdiff() {
    let heapdiff = heapsample_tests::heapdiff_path();
    let dir = TempDir::new("strclaim");
    let mut failures = Vec::new();
    for (i, (what, file)) in string_length_claims().into_iter().enumerate() {
        let path = dir.path().join(format!("claim{i}.prof"));
        std::fs::write(&path, &file).expect("write the dump");
        let script = format!(
            "ulimit -v 1048576; exec '{}' --format text -o /dev/null '{}'",
            heapdiff.display(),
            path.display()
        );
        let out = heapsample_tests::Run::new("sh")
            .args(["-c", &script])
            .timeout(Duration::from_secs(20))
            .run();
        let stderr = out.stderr.clone();
        let clean = out.status.code() == Some(2)
            && stderr.contains("corrupt")
            && !stderr.contains("memory allocation")
            && !stderr.contains("panicked");
        if !clean {
            failures.push(format!(
                "{what}: heapdiff {:?}, stderr: {}",
                out.status,
                stderr.lines().take(2).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "heapdiff aborts or fails unclearly on dumps whose string lengths lie \
         (reproduce: replace the length byte of any string in a dump body with a \
         varint 253 + u64 2^46, fix the CRC, run heapdiff):\n{}",
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------
// PROF_CONF

const KEYS: &[&str] = &[
    "prof",
    "prof_active",
    "lg_prof_sample",
    "prof_accum",
    "prof_final",
    "prof_leak",
    "prof_prefix",
    "prof_bt_max",
    "prof_exact",
    "lg_prof_interval",
    "prof_gdump",
    "prof_gdump_step",
    "prof_signal",
    "prof_unwind",
];

const BOOL_KEYS: &[&str] = &[
    "prof",
    "prof_active",
    "prof_accum",
    "prof_final",
    "prof_leak",
    "prof_exact",
    "prof_gdump",
];

/// A random item and whether the parser must accept it (`None`: no oracle,
/// e.g. random bytes; only the one-warning-at-most rule applies).
fn conf_item(rng: &mut Rng) -> (String, Option<bool>) {
    let key = *rng.pick(KEYS);
    let ws = |rng: &mut Rng| -> &'static str {
        const WS: [&str; 6] = ["", "", "", " ", "\t", "  "];
        WS[rng.below(WS.len())]
    };
    let (value, good): (String, bool) = match rng.below(12) {
        0 | 1 => {
            // A value of the right kind for the key.
            let (v, g) = good_or_bad_value(rng, key);
            (v, g)
        }
        2 => {
            // Another key's value.
            let other = *rng.pick(KEYS);
            let (v, _) = good_or_bad_value(rng, other);
            let g = accepts(key, &v);
            (v, g)
        }
        3 => {
            let bytes: Vec<u8> = (0..rng.below(12)).map(|_| rng.next() as u8).collect();
            let v = String::from_utf8_lossy(&bytes).replace(',', "");
            let g = accepts(key, v.trim());
            (v, g)
        }
        4 => {
            let n: i128 = match rng.below(4) {
                0 => rng.below(300) as i128 - 20,
                1 => i128::from(rng.next() as i64),
                2 => rng.next() as i128 * 1000,
                _ => *rng.pick(&[
                    i64::MIN as i128,
                    i64::MAX as i128,
                    i64::MAX as i128 + 1,
                    u64::MAX as i128,
                ]),
            };
            let v = n.to_string();
            let g = accepts(key, &v);
            (v, g)
        }
        _ => good_or_bad_value(rng, key),
    };
    let key_text = match rng.below(20) {
        0 => key.to_uppercase(),
        1 => format!("{key}x"),
        2 => key[..key.len() - 1].to_string(),
        3 => "jemalloc_opt".to_string(),
        _ => key.to_string(),
    };
    let key_ok = key_text == key;
    let item = match rng.below(25) {
        0 => return (key_text, Some(false)), // no colon at all
        1 => return (format!("{}:{}", key_text, value.replace(',', "")), None),
        _ => format!(
            "{}{key_text}{}:{}{}{}",
            ws(rng),
            ws(rng),
            ws(rng),
            value,
            ws(rng)
        ),
    };
    (item, Some(good && key_ok))
}

/// The documented acceptance rules of MALLOC_CONF.md, written independently
/// of the parser: does `key` accept the (trimmed) `value`?
fn accepts(key: &str, value: &str) -> bool {
    let value = value.trim();
    let int_in = |lo: i64, hi: i64| value.parse::<i64>().is_ok_and(|n| (lo..=hi).contains(&n));
    match key {
        k if BOOL_KEYS.contains(&k) => matches!(value, "true" | "false" | "1" | "0"),
        "lg_prof_sample" => int_in(0, 62),
        "prof_bt_max" => int_in(1, 256),
        "lg_prof_interval" => int_in(-1, 62),
        "prof_prefix" => true,
        "prof_unwind" => matches!(value, "fast" | "libgcc"),
        "prof_signal" => {
            let name = value.trim_start_matches("SIG");
            matches!(name, "USR1" | "USR2" | "PROF" | "URG" | "WINCH" | "HUP")
                || name
                    .parse::<i32>()
                    .is_ok_and(|n| (libc_sigrtmin()..=libc_sigrtmax()).contains(&n))
        }
        "prof_gdump_step" => {
            if let Some(p) = value.strip_suffix('%') {
                return p.parse::<u32>().is_ok_and(|p| (1..=1000).contains(&p));
            }
            let split = value
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(value.len());
            let (digits, unit) = value.split_at(split);
            let shift = match unit {
                "" | "B" | "b" => 0,
                "k" | "K" | "KiB" => 10,
                "m" | "M" | "MiB" => 20,
                "g" | "G" | "GiB" => 30,
                _ => return false,
            };
            digits
                .parse::<u64>()
                .is_ok_and(|n| n > 0 && n.checked_mul(1u64 << shift).is_some())
        }
        _ => false,
    }
}

fn libc_sigrtmin() -> i32 {
    // glibc reserves two real-time signals for itself: SIGRTMIN is 34.
    34
}

fn libc_sigrtmax() -> i32 {
    64
}

fn good_or_bad_value(rng: &mut Rng, key: &str) -> (String, bool) {
    let v: String = match key {
        k if BOOL_KEYS.contains(&k) => rng
            .pick(&["true", "false", "1", "0", "yes", "TRUE", "2", "", "-0"])
            .to_string(),
        "lg_prof_sample" | "prof_bt_max" | "lg_prof_interval" => {
            let n = rng.below(300) as i64 - 5;
            match rng.below(6) {
                0 => format!("+{n}"),
                1 => format!("{n}.0"),
                2 => format!("0x{n:x}"),
                _ => n.to_string(),
            }
        }
        "prof_prefix" => rng
            .pick(&[
                "",
                "/tmp/x",
                "a:b",
                "heap sample",
                "../../etc/x",
                "é",
                "%s%n",
            ])
            .to_string(),
        "prof_unwind" => rng
            .pick(&["fast", "libgcc", "FAST", "gcc", "", "fast "])
            .to_string(),
        "prof_signal" => {
            let n = rng.below(80) as i64 - 5;
            match rng.below(4) {
                0 => rng
                    .pick(&[
                        "USR1",
                        "USR2",
                        "SIGPROF",
                        "URG",
                        "WINCH",
                        "HUP",
                        "SIGSIGUSR1",
                        "usr1",
                        "none",
                        "KILL",
                        "SEGV",
                        "SIG",
                    ])
                    .to_string(),
                1 => format!("SIG{n}"),
                _ => n.to_string(),
            }
        }
        _ => {
            let n = match rng.below(4) {
                0 => rng.below(2000) as u64,
                1 => rng.next(),
                2 => rng.next() >> rng.below(64),
                _ => *rng.pick(&[0u64, 1, 1 << 33, 1 << 34, u64::MAX >> 30, u64::MAX >> 29]),
            };
            let unit = *rng.pick(&[
                "", "B", "k", "K", "KiB", "M", "MiB", "g", "G", "GiB", "%", "T", "kb",
            ]);
            format!("{n}{unit}")
        }
    };
    let good = accepts(key, &v);
    (v, good)
}

fn check_ranges(c: &Config, text: &str) {
    assert!(c.lg_prof_sample <= 62, "{text:?}: {c:?}");
    assert!((1..=256).contains(&c.prof_bt_max), "{text:?}: {c:?}");
    assert!((-1..=62).contains(&c.lg_prof_interval), "{text:?}: {c:?}");
    match c.prof_gdump_step {
        GdumpStep::Bytes(b) => assert!(b >= 1, "{text:?}: {c:?}"),
        GdumpStep::Percent { percent, .. } => {
            assert!((1..=1000).contains(&percent), "{text:?}: {c:?}")
        }
    }
    let s = c.prof_signal;
    assert!(
        s == 0 || [1, 10, 12, 23, 27, 28].contains(&s) || (34..=64).contains(&s),
        "{text:?}: signal {s}"
    );
    assert!(!c.prof_prefix.contains(','), "{text:?}: {c:?}");
}

#[test]
fn prof_conf_parser_on_random_soup() {
    let seed = seed_for("prof_conf_parser_on_random_soup");
    let mut rng = Rng(seed);
    let deadline = Instant::now() + budget(0.2);
    let (mut strings, mut items_total, mut bad_total) = (0u64, 0u64, 0u64);
    let mut slowest = Duration::ZERO;
    while Instant::now() < deadline {
        for _ in 0..32 {
            let n = rng.below(12);
            let mut items = Vec::new();
            let mut expected_bad: Option<usize> = Some(0);
            for _ in 0..n {
                let (item, good) = conf_item(&mut rng);
                if item.trim().is_empty() {
                    continue;
                }
                match (good, expected_bad.as_mut()) {
                    (Some(false), Some(bad)) => *bad += 1,
                    (None, _) => expected_bad = None,
                    _ => {}
                }
                items.push(item);
            }
            // Occasionally empty items and stray separators (ignored).
            let sep = if rng.chance(10) { ",," } else { "," };
            let mut text = items.join(sep);
            if rng.chance(10) {
                text.push(',');
            }
            let started = thread_cpu_time();
            let (config, warnings) = catch_unwind(AssertUnwindSafe(|| config::parse(&text)))
                .unwrap_or_else(|_| panic!("parse panicked on {text:?}"));
            let elapsed = thread_cpu_time() - started;
            slowest = slowest.max(elapsed);
            assert!(elapsed < PER_INPUT_LIMIT, "{text:?} took {elapsed:?}");
            strings += 1;
            items_total += items.len() as u64;
            check_ranges(&config, &text);
            // Each item on its own yields at most one warning, and the
            // warnings of the whole string are the sum of the items'.
            let mut per_item = 0;
            for item in &items {
                let (_, w) = config::parse(item);
                assert!(
                    w.len() <= 1,
                    "item {item:?} gave {} warnings: {w:?}",
                    w.len()
                );
                per_item += w.len();
            }
            assert_eq!(
                warnings.len(),
                per_item,
                "{text:?}: warnings {warnings:?} are not one per bad item"
            );
            if let Some(bad) = expected_bad {
                assert_eq!(
                    warnings.len(),
                    bad,
                    "{text:?}: expected {bad} warnings (one per bad item), got {warnings:?}"
                );
            }
            bad_total += warnings.len() as u64;
            for w in &warnings {
                assert!(w.starts_with("PROF_CONF: "), "{w:?}");
            }
            // Last item wins: the configuration equals applying the good
            // items alone, in order.
            let good_only: Vec<&str> = items
                .iter()
                .filter(|i| config::parse(i).1.is_empty())
                .map(|s| s.as_str())
                .collect();
            let (alone, none) = config::parse(&good_only.join(","));
            assert!(none.is_empty(), "{good_only:?}: {none:?}");
            assert_eq!(
                alone, config,
                "{text:?}: bad items changed the configuration"
            );
        }
    }
    eprintln!(
        "PROF_CONF: {strings} strings, {items_total} items, {bad_total} warnings, slowest {slowest:?} of CPU"
    );
    assert!(strings > 1000, "too few strings: {strings}");
}

/// Found by `prof_conf_parser_on_random_soup`: a warning echoes the bad
/// value verbatim, so a `PROF_CONF` value holding a newline or a terminal
/// escape becomes a multi-line (or terminal-controlling) warning, against
/// the README's "one line on stderr starting `<heapsample>:`".
/// Reproduce: `LD_PRELOAD=target/release/libheapsample.so
/// PROF_CONF=$'prof_leak:x\n<heapsample>: forged' /bin/true`.
#[test]
fn prof_conf_warnings_are_one_printable_line() {
    for text in [
        "prof_leak:x\n<heapsample>: forged line",
        "lg_prof_sample:1\r2",
        "prof_unwind:\u{1b}[2Jfast",
        "unknown\nkey:1",
        "no colon\n here",
    ] {
        let (_, warnings) = config::parse(text);
        assert_eq!(warnings.len(), 1, "{text:?}: {warnings:?}");
        for w in &warnings {
            assert!(
                !w.chars().any(|c| c.is_control()),
                "{text:?}: the warning {w:?} holds a control character"
            );
        }
    }
}

/// Arbitrary bytes (as lossy UTF-8) never panic the parser and keep the
/// result in range.
#[test]
fn prof_conf_parser_on_random_bytes() {
    let seed = seed_for("prof_conf_parser_on_random_bytes");
    let mut rng = Rng(seed);
    let deadline = Instant::now() + budget(0.1);
    let alphabet = b"prof_lgsamplexctivum:,%0123456789-+ kKMGiB\tSIGUSR\xff\xc3\xa9";
    let mut n = 0u64;
    while Instant::now() < deadline {
        let len = rng.below(64);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.chance(8) {
                    rng.next() as u8
                } else {
                    *rng.pick(alphabet)
                }
            })
            .collect();
        let text = String::from_utf8_lossy(&bytes);
        let (config, warnings) = catch_unwind(AssertUnwindSafe(|| config::parse(&text)))
            .unwrap_or_else(|_| panic!("parse panicked on {text:?}"));
        check_ranges(&config, &text);
        let items = text.split(',').filter(|i| !i.trim().is_empty()).count();
        assert!(warnings.len() <= items, "{text:?}: {warnings:?}");
        n += 1;
    }
    eprintln!("PROF_CONF random bytes: {n} strings");
}
