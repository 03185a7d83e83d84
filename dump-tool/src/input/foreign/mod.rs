//! Other profilers' heap dumps as input: jemalloc's `heap_v2` profiles
//! (`jeprof.<pid>.<seq>.*.heap`, written under `MALLOC_CONF=prof:true`) and
//! gperftools' heap profiles (`HEAPPROFILE=prefix`, `<prefix>.0001.heap`).
//!
//! Owns turning such a text file into a [`heapsample_format::Dump`], so the
//! rest of heapdiff (symbolization, correction, every format, `--base` on
//! either side) treats it like one of ours:
//! - counts are the raw sampled counts, weighted with the average-size
//!   correction jeprof and pprof apply (`records::stack`; jemalloc 5.3's
//!   `prof_unbias` writes counts meant for that correction, at every
//!   period, `lg_prof_sample:0` included); a stack of several threads is
//!   corrected as a whole, as jeprof does (`records::thread_stacks`);
//!   an unsampled gperftools profile (`@ heapprofile`) is exact;
//! - the module map comes from the `MAPPED_LIBRARIES:` section (the
//!   process's `/proc/self/maps`): executable mappings become modules, their
//!   load bias and build-id are read from the file when it exists;
//! - frames inside the allocator library itself (jemalloc's backtrace and
//!   sampling code at the leaf) are dropped, as jeprof does.
//!
//! Never panics on bad input: every problem is an error naming the line.
//! The formats' texts are parsed in `jemalloc` and `gperftools` (with
//! their shared pieces in `records`), the module map in `maps`.

mod gperftools;
mod jemalloc;
mod maps;
mod records;

use gperftools::parse_gperftools;
use heapsample_format::{Dump, Module, Stack, Totals, Trigger};
use jemalloc::parse_jemalloc;
use maps::parse_maps;
use records::Records;
use std::path::Path;
use std::time::SystemTime;

/// The `writer` of a dump read from a jemalloc profile.
const JEMALLOC_WRITER: &str = "jemalloc heap_v2 profile";
/// The `writer` of a dump read from a gperftools profile.
const GPERFTOOLS_WRITER: &str = "gperftools heap profile";

/// True for a dump read from another profiler's heap profile (its exact
/// counters, if any, are not heapsample's).
pub fn is_foreign(dump: &Dump) -> bool {
    dump.writer == JEMALLOC_WRITER || dump.writer == GPERFTOOLS_WRITER
}

/// Which foreign format a file is, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignKind {
    /// `heap_v2/<period>`: jemalloc.
    Jemalloc,
    /// `heap profile: … @ heapprofile` or `@ heap_v2/<period>`: gperftools.
    Gperftools,
}

impl ForeignKind {
    /// The format's own name, as reports give it.
    pub fn name(self) -> &'static str {
        match self {
            ForeignKind::Jemalloc => "jemalloc heap_v2",
            ForeignKind::Gperftools => "gperftools heap profile",
        }
    }
}

/// The foreign format `bytes` start with, if any.
pub fn detect(bytes: &[u8]) -> Option<ForeignKind> {
    if bytes.starts_with(b"heap_v2/") {
        Some(ForeignKind::Jemalloc)
    } else if bytes.starts_with(b"heap profile:") {
        Some(ForeignKind::Gperftools)
    } else {
        None
    }
}

/// Parse a foreign heap profile read from `path` (its name may hold the
/// pid), last modified at `modified` (the dump's time).
pub fn parse(
    bytes: &[u8],
    kind: ForeignKind,
    path: &Path,
    modified: Option<SystemTime>,
) -> Result<Dump, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "not a heap profile: invalid UTF-8 at byte {}",
            e.valid_up_to()
        )
    })?;
    let (profile, maps) = match text.find("\nMAPPED_LIBRARIES:") {
        Some(at) => (&text[..at], &text[at + "\nMAPPED_LIBRARIES:".len()..]),
        None => (text, ""),
    };
    let records = match kind {
        ForeignKind::Jemalloc => parse_jemalloc(profile)?,
        ForeignKind::Gperftools => parse_gperftools(profile)?,
    };
    let modules = parse_maps(maps)?;
    if modules.is_empty() {
        return Err(
            "no MAPPED_LIBRARIES section: its addresses cannot be symbolized (the file is cut short?)"
                .to_string(),
        );
    }
    Ok(into_dump(records, modules, kind, path, modified))
}

/// True for the allocator libraries whose own frames sit at the leaf.
fn is_allocator_library(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    ["libjemalloc", "libtcmalloc", "libprofiler"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

fn into_dump(
    records: Records,
    modules: Vec<Module>,
    kind: ForeignKind,
    path: &Path,
    modified: Option<SystemTime>,
) -> Dump {
    let allocator_ranges: Vec<(u64, u64)> = modules
        .iter()
        .filter(|m| is_allocator_library(&m.path))
        .flat_map(|m| m.ranges.iter().copied())
        .collect();
    let in_allocator = |address: u64| {
        allocator_ranges
            .iter()
            .any(|&(start, end)| address >= start && address < end)
    };
    let stacks: Vec<Stack> = records
        .stacks
        .into_iter()
        .map(|mut stack| {
            let drop = stack
                .frames
                .iter()
                .take_while(|&&a| in_allocator(a))
                .count();
            stack
                .frames
                .drain(..drop.min(stack.frames.len().saturating_sub(1)));
            stack
        })
        .collect();
    let executable = modules
        .iter()
        .find(|m| !m.path.contains(".so"))
        .or(modules.first())
        .map(|m| m.path.clone())
        .unwrap_or_default();
    let (writer, exact) = match kind {
        ForeignKind::Jemalloc => (JEMALLOC_WRITER, false),
        ForeignKind::Gperftools => (GPERFTOOLS_WRITER, records.unsampled),
    };
    let totals = if exact {
        Totals {
            allocations: records.header.alloc_objects,
            bytes_allocated: records.header.alloc_bytes,
            samples_taken: records.header.alloc_objects,
            samples_live: records.header.live_objects,
            ..Totals::default()
        }
    } else {
        Totals::default()
    };
    let time_unix_ns = modified
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    Dump {
        writer: writer.to_string(),
        pid: pid_from_name(path),
        executable,
        command_line: Vec::new(),
        time_unix_ns,
        trigger: Trigger::Final,
        seq: 0,
        trigger_seq: 0,
        lg_sample_period: records.period.trailing_zeros(),
        config: String::new(),
        modules,
        threads: records.threads,
        stacks,
        totals,
        process: heapsample_format::Process::default(),
        bytes_per_call: 0,
        live_samples: Vec::new(),
        peak: None,
        context: Default::default(),
        runtime: Default::default(),
        cost: Default::default(),
        removed_dumps: Vec::new(),
    }
}

/// `jeprof.<pid>.<seq>…heap` names the pid; gperftools names do not.
fn pid_from_name(path: &Path) -> u32 {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    name.as_deref()
        .and_then(|n| n.split('.').nth(1))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JEMALLOC: &str = "heap_v2/524288
  t*: 3: 3072 [0: 0]
  t0: 2: 2048 [0: 0] main
  t1: 1: 1024 [0: 0]
@ 0x7f0000001000 0x401234 0x401300
  t*: 3: 3072 [0: 0]
  t0: 2: 2048 [0: 0]
  t1: 1: 1024 [0: 0]

MAPPED_LIBRARIES:
00401000-00402000 r-xp 00001000 08:01 1 /nonexistent/prog
7f0000000000-7f0000010000 r-xp 00000000 08:01 2 /nonexistent/libjemalloc.so.2
";

    #[test]
    fn jemalloc_threads_stacks_and_allocator_frames() {
        let dump = parse(
            JEMALLOC.as_bytes(),
            ForeignKind::Jemalloc,
            Path::new("jeprof.4242.0.f.heap"),
            None,
        )
        .unwrap();
        assert_eq!(dump.lg_sample_period, 19);
        assert_eq!(dump.pid, 4242);
        assert_eq!(dump.executable, "/nonexistent/prog");
        assert_eq!(dump.threads.len(), 2);
        assert_eq!(dump.threads[0].name, "main");
        assert_eq!(dump.stacks.len(), 2, "one stack per thread line");
        assert_eq!(dump.stacks[0].frames, vec![0x401234, 0x401300]);
        assert_eq!(dump.stacks[0].live_bytes + dump.stacks[1].live_bytes, 3072);
        assert_eq!(dump.modules[0].ranges, vec![(0x401000, 0x402000)]);
    }

    fn jemalloc(body: &str) -> Dump {
        let text = format!(
            "{body}\nMAPPED_LIBRARIES:\n00401000-00402000 r-xp 00001000 08:01 1 /nonexistent/prog\n"
        );
        parse(text.as_bytes(), ForeignKind::Jemalloc, Path::new("x"), None).unwrap()
    }

    /// jeprof's `AdjustSamples`: `n / (1 − exp(−(b/n)/R))`.
    fn adjusted(n: f64, b: f64, period: f64) -> f64 {
        n / (1.0 - (-(b / n) / period).exp())
    }

    #[test]
    fn threads_add_up_to_the_stack_as_jeprof_corrects_it() {
        // Two threads of very different average sizes on one stack.
        let dump = jemalloc(
            "heap_v2/16384
  t*: 4: 63000 [4: 63000]
@ 0x401234
  t*: 4: 63000 [4: 63000]
  t0: 3: 3000 [3: 3000]
  t1: 1: 60000 [1: 60000]
",
        );
        assert_eq!(dump.stacks.len(), 2);
        let sum = |f: fn(&Stack) -> f64| dump.stacks.iter().map(f).sum::<f64>();
        let objects = sum(|s| s.live.objects);
        let bytes = sum(|s| s.alloc.bytes);
        assert!(
            (objects - adjusted(4.0, 63000.0, 16384.0)).abs() < 1e-9,
            "{objects}"
        );
        assert!((bytes - adjusted(63000.0, 63000.0 * 63000.0 / 4.0, 16384.0)).abs() < 1e-6);
        // Each thread keeps its own share: the small objects' thread has
        // most of the objects.
        assert!(dump.stacks[0].live.objects > 3.0 * dump.stacks[1].live.objects);
    }

    #[test]
    fn lg_prof_sample_0_files_are_corrected_and_exact() {
        // jemalloc samples every allocation at lg 0 but writes its counts
        // divided by 1 − exp(−size): 1000 objects of 8 bytes read 1000.3.
        let dump = jemalloc("heap_v2/1\n@ 0x401234\n  t*: 1000: 8000 [1000: 8000]\n");
        let live = dump.stacks[0].live;
        assert!((live.objects - adjusted(1000.0, 8000.0, 1.0)).abs() < 1e-9);
        assert!(live.objects > 1000.3 && live.objects < 1000.4);
        assert_eq!(live.objects_variance, 0.0);
    }

    #[test]
    fn gperftools_unsampled_is_exact() {
        let text = "heap profile:    2:     1024 [     3:     1100] @ heapprofile
     2:     1024 [     3:     1100] @ 0x00401189 0x004011ca

MAPPED_LIBRARIES:
00401000-00402000 r-xp 00001000 00:00 1    /nonexistent/prog
";
        let dump = parse(
            text.as_bytes(),
            ForeignKind::Gperftools,
            Path::new("x.0001.heap"),
            None,
        )
        .unwrap();
        assert_eq!(dump.lg_sample_period, 0);
        assert_eq!(dump.totals.allocations, 3);
        assert_eq!(dump.stacks[0].alloc_bytes, 1100);
    }

    #[test]
    fn mutated_files_never_panic() {
        let mut state = 0x5eed_u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        for _ in 0..3000 {
            let mut bytes = JEMALLOC.as_bytes().to_vec();
            for _ in 0..1 + next() % 4 {
                let index = next() % bytes.len();
                let alphabet = b"0123456789abcdefx:[]@t* \n/-";
                bytes[index] = alphabet[next() % alphabet.len()];
            }
            if let Some(kind) = detect(&bytes) {
                let _ = parse(&bytes, kind, Path::new("x"), None);
            }
        }
    }

    #[test]
    fn bad_input_names_the_line() {
        let error = parse(
            b"heap_v2/4096\n  t*: 1: x [0: 0]\n",
            ForeignKind::Jemalloc,
            Path::new("x"),
            None,
        )
        .unwrap_err();
        assert!(error.starts_with("line 2:"), "{error}");
        let error = parse(
            b"heap_v2/1000\n",
            ForeignKind::Jemalloc,
            Path::new("x"),
            None,
        )
        .unwrap_err();
        assert!(error.contains("power of two"), "{error}");
        let error = parse(
            b"heap_v2/4096\n",
            ForeignKind::Jemalloc,
            Path::new("x"),
            None,
        )
        .unwrap_err();
        assert!(error.contains("MAPPED_LIBRARIES"), "{error}");
    }
}
