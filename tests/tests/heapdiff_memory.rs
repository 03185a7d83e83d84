//! heapdiff's peak memory on a large dump: a real program leaves one live
//! block at each of 131,072 distinct stacks (`many_stacks.c`, 38 frames
//! each, `lg_prof_sample:0`, a PIE as distributions build them), a dump of
//! about 55 MiB; `heapdiff -f text`, `-f pprof`, `ages` and `-f json` (streamed
//! into its file, at most 1 KiB a stack) on it must each peak at no more
//! than 3× the dump's size, measured as the child's own
//! peak RSS (`ru_maxrss` from `wait4`). Memory, unlike time, repeats from
//! run to run (within a few hundred KiB: page alignment and ASLR).
//!
//! The bound's derivation: heapdiff reads the whole file (1×) and decodes it
//! into the dump's records: per stack a 160-byte record and 8 bytes per
//! frame (a 9-byte varint in the file), about 0.9× the file, plus the
//! decoder's growth of the vector of records (up to 1.6× its length), so
//! decoding peaks near 2.1×. Afterwards the file is gone and the frames
//! are released into the location table's tree of calls (a few bytes per
//! stack); the profile holds per stack a 232-byte sample, 8 bytes per frame
//! and its live samples' births, about 1.1× the file beside the records.
//! Add heapdiff itself and the symbols it reads (the binary, libc's DWARF
//! when its debug package is installed: about 45 MiB, a fixed cost that is
//! 0.8× of this dump) and the peak is about 2.3× (measured: 2.33× for text,
//! ages and json, 2.44× for pprof); 3× leaves 0.56× of margin (31 MiB) against the
//! variations of allocator and symbol files. Before the dump was read
//! into compact tables the same views peaked at 6× (the frames kept three
//! times over as vectors of 8- and 16-byte ids).

use heapsample_tests::*;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// The largest peak RSS allowed, as a multiple of the dump's size.
const MAX_RSS_OVER_DUMP: f64 = 3.0;

/// Runs heapdiff with `args` (output discarded) and returns its peak RSS
/// in bytes, from its own rusage.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also gives its rusage"
)]
fn peak_rss(args: &[&str]) -> u64 {
    let mut child = Command::new(heapdiff_path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run heapdiff");
    // Its stderr read to the end first: a full pipe never blocks it.
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not yet waited for; both pointers are
    // valid for the call.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 heapdiff {args:?}");
    let status = std::process::ExitStatus::from_raw(status);
    assert!(status.success(), "heapdiff {args:?}: {status}: {stderr}");
    u64::try_from(usage.ru_maxrss).expect("a peak RSS") * 1024
}

#[test]
fn views_of_a_large_dump_peak_under_three_times_its_size() {
    let program = compile_c("many_stacks.c", &BuildOptions::pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .arg("17")
        .run();
    outcome.assert_success();
    let (file, dump) = outcome.final_dump();
    assert!(
        dump.stacks.len() >= 1 << 17,
        "{} stacks: every leaf's own",
        dump.stacks.len()
    );
    let stacks = dump.stacks.len();
    drop(dump);
    let path: &Path = &file.path;
    let size = std::fs::metadata(path).expect("the dump").len();
    let dump = path_str(path);
    let json = outcome.dir.path().join("report.json");
    let views: [Vec<&str>; 4] = [
        vec!["-f", "text", dump],
        vec!["-f", "pprof", "-q", "-o", "/dev/null", dump],
        vec!["ages", dump],
        vec!["-f", "json", "-q", "-o", path_str(&json), dump],
    ];
    let measured: Vec<(&[&str], f64)> = views
        .iter()
        .map(|view| (view.as_slice(), peak_rss(view) as f64 / size as f64))
        .collect();
    let report: Vec<String> = measured
        .iter()
        .map(|(view, ratio)| format!("{view:?}: {ratio:.2}× the dump"))
        .collect();
    eprintln!("peak RSS, dump of {size} bytes:\n{}", report.join("\n"));
    assert!(
        measured
            .iter()
            .all(|&(_, ratio)| ratio <= MAX_RSS_OVER_DUMP),
        "peak RSS over {MAX_RSS_OVER_DUMP}× the dump of {size} bytes:\n{}",
        report.join("\n")
    );
    // The json report, streamed into its file, in shared strings.
    let json_bytes = std::fs::metadata(&json).expect("the json report").len();
    assert!(
        json_bytes <= 1024 * stacks as u64,
        "json: {json_bytes} bytes for {stacks} stacks, over 1 KiB a stack"
    );
}
