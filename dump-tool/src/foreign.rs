//! Other profilers' heap dumps as input: jemalloc's `heap_v2` profiles
//! (`jeprof.<pid>.<seq>.*.heap`, written under `MALLOC_CONF=prof:true`) and
//! gperftools' heap profiles (`HEAPPROFILE=prefix`, `<prefix>.0001.heap`).
//!
//! Owns turning such a text file into a [`heapsample_format::Dump`], so the
//! rest of heapdiff (symbolization, correction, every format, `--base` on
//! either side) treats it like one of ours:
//! - counts are the raw sampled counts, weighted with the average-size
//!   correction jeprof and pprof apply (`legacy_weights`; jemalloc 5.3's
//!   `prof_unbias` writes counts meant for that correction);
//!   an unsampled gperftools profile (`@ heapprofile`) has period 1, exact;
//! - the module map comes from the `MAPPED_LIBRARIES:` section (the
//!   process's `/proc/self/maps`): executable mappings become modules, their
//!   load bias and build-id are read from the file when it exists;
//! - frames inside the allocator library itself (jemalloc's backtrace and
//!   sampling code at the leaf) are dropped, as jeprof does.
//!
//! Never panics on bad input: every problem is an error naming the line.

use heapsample_format::{Dump, Module, Stack, ThreadInfo, Totals, Trigger, legacy_weights};
use std::collections::BTreeMap;
use std::path::Path;

/// Which foreign format a file is, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignKind {
    /// `heap_v2/<period>`: jemalloc.
    Jemalloc,
    /// `heap profile: … @ heapprofile` or `@ heap_v2/<period>`: gperftools.
    Gperftools,
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

/// Parse a foreign heap profile read from `path`.
pub fn parse(bytes: &[u8], kind: ForeignKind, path: &Path) -> Result<Dump, String> {
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
    Ok(into_dump(records, modules, kind, path))
}

/// What both formats give: a sampling period, threads, stacks, and totals
/// when the header has them.
#[derive(Debug, Default)]
struct Records {
    period: u64,
    threads: Vec<ThreadInfo>,
    stacks: Vec<Stack>,
    header: Counts,
}

/// `live_objects: live_bytes [alloc_objects: alloc_bytes]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    live_objects: u64,
    live_bytes: u64,
    alloc_objects: u64,
    alloc_bytes: u64,
}

fn bad(line_number: usize, why: impl std::fmt::Display) -> String {
    format!("line {line_number}: {why}")
}

/// `a: b [c: d]` with any spacing.
fn parse_counts(text: &str, line_number: usize) -> Result<Counts, String> {
    let cleaned: String = text
        .chars()
        .map(|c| if matches!(c, ':' | '[' | ']') { ' ' } else { c })
        .collect();
    let numbers: Vec<u64> = cleaned
        .split_whitespace()
        .map(|n| n.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            bad(
                line_number,
                format!("expected `a: b [c: d]`, found `{text}`"),
            )
        })?;
    match numbers[..] {
        [live_objects, live_bytes, alloc_objects, alloc_bytes] => Ok(Counts {
            live_objects,
            live_bytes,
            alloc_objects,
            alloc_bytes,
        }),
        _ => Err(bad(
            line_number,
            format!("expected `a: b [c: d]`, found `{text}`"),
        )),
    }
}

fn parse_addresses(text: &str, line_number: usize) -> Result<Vec<u64>, String> {
    text.split_whitespace()
        .map(|word| {
            let digits = word.trim_start_matches("0x").trim_start_matches("0X");
            u64::from_str_radix(digits, 16)
                .map_err(|_| bad(line_number, format!("`{word}` is not a hex address")))
        })
        .collect()
}

fn parse_period(text: &str, line_number: usize) -> Result<u64, String> {
    let period: u64 = text
        .trim()
        .parse()
        .map_err(|_| bad(line_number, format!("bad sampling period `{text}`")))?;
    if period == 0 || !period.is_power_of_two() {
        return Err(bad(
            line_number,
            format!("sampling period {period} is not a power of two (lg_prof_sample)"),
        ));
    }
    Ok(period)
}

/// jemalloc `heap_v2/<period>`: per-thread totals with optional names, then
/// `@ addresses` lines each followed by `t*:` and `t<uid>:` count lines.
fn parse_jemalloc(text: &str) -> Result<Records, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
    let (_, header) = lines.next().ok_or("empty file")?;
    let period = parse_period(header.trim_start_matches("heap_v2/"), 1)?;
    let mut records = Records {
        period,
        ..Records::default()
    };
    let mut frames: Option<Vec<u64>> = None;
    let mut per_thread: Vec<(u32, Counts)> = Vec::new();
    let mut all_threads: Option<Counts> = None;
    for (number, line) in lines {
        if line.is_empty() {
            continue;
        }
        if let Some(addresses) = line.strip_prefix('@') {
            flush_jemalloc_stack(&mut records, frames.take(), &per_thread, all_threads);
            per_thread.clear();
            all_threads = None;
            frames = Some(parse_addresses(addresses, number)?);
        } else if let Some(rest) = line.strip_prefix("t*:") {
            let counts = parse_counts(rest, number)?;
            if frames.is_none() {
                records.header = counts;
            }
            all_threads = Some(counts);
        } else if let Some(rest) = line.strip_prefix('t') {
            let (uid, rest) = rest
                .split_once(':')
                .ok_or_else(|| bad(number, format!("unexpected `{line}`")))?;
            let uid: u32 = uid
                .parse()
                .map_err(|_| bad(number, format!("bad thread id in `{line}`")))?;
            let (counts_text, name) = split_thread_name(rest);
            let counts = parse_counts(counts_text, number)?;
            if frames.is_none() {
                records.threads.push(ThreadInfo {
                    serial: uid.saturating_add(1),
                    tid: uid,
                    name: name.to_string(),
                });
            } else {
                per_thread.push((uid, counts));
            }
        } else {
            return Err(bad(number, format!("unexpected `{line}`")));
        }
    }
    flush_jemalloc_stack(&mut records, frames, &per_thread, all_threads);
    Ok(records)
}

/// `N: N [N: N] name` → the counts and the name (jemalloc's
/// `prof.thread_name`).
fn split_thread_name(text: &str) -> (&str, &str) {
    match text.find(']') {
        Some(end) => (&text[..=end], text[end + 1..].trim()),
        None => (text, ""),
    }
}

/// One stack per thread line (the sum of the threads is the `t*` line);
/// without thread lines, the `t*` line under thread 0.
fn flush_jemalloc_stack(
    records: &mut Records,
    frames: Option<Vec<u64>>,
    per_thread: &[(u32, Counts)],
    all_threads: Option<Counts>,
) {
    let Some(frames) = frames else { return };
    if per_thread.len() == 1 || (per_thread.is_empty() && all_threads.is_some()) {
        let (uid, counts) = per_thread
            .first()
            .map(|&(uid, _)| (Some(uid), all_threads.unwrap_or(per_thread[0].1)))
            .unwrap_or((None, all_threads.unwrap_or_default()));
        let thread = uid.map_or(0, |u| u.saturating_add(1));
        let period = records.period;
        records.stacks.push(stack(frames, thread, counts, period));
        return;
    }
    for &(uid, counts) in per_thread {
        let period = records.period;
        records
            .stacks
            .push(stack(frames.clone(), uid.saturating_add(1), counts, period));
    }
}

/// A stack with the raw counts and their average-size weights.
fn stack(frames: Vec<u64>, thread: u32, counts: Counts, period: u64) -> Stack {
    Stack {
        live: legacy_weights(counts.live_objects, counts.live_bytes, period),
        alloc: legacy_weights(counts.alloc_objects, counts.alloc_bytes, period),
        frames,
        thread,
        epoch: 0,
        live_objects: counts.live_objects,
        live_bytes: counts.live_bytes,
        live_usable_bytes: counts.live_bytes,
        alloc_objects: counts.alloc_objects,
        alloc_bytes: counts.alloc_bytes,
    }
}

/// gperftools: `heap profile: a: b [c: d] @ heapprofile` (or
/// `@ heap_v2/<period>`), then `a: b [c: d] @ addresses` per stack.
fn parse_gperftools(text: &str) -> Result<Records, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
    let (_, header) = lines.next().ok_or("empty file")?;
    let header = header.trim_start_matches("heap profile:");
    let (counts, kind) = header
        .split_once('@')
        .ok_or_else(|| bad(1, "no `@ heapprofile` in the header"))?;
    let period = match kind.trim() {
        "heapprofile" => 1,
        other => match other.strip_prefix("heap_v2/") {
            Some(period) => parse_period(period, 1)?,
            None => return Err(bad(1, format!("unsupported heap profile type `{other}`"))),
        },
    };
    let mut records = Records {
        period,
        header: parse_counts(counts, 1)?,
        ..Records::default()
    };
    for (number, line) in lines {
        if line.is_empty() {
            continue;
        }
        let (counts, addresses) = line.split_once('@').ok_or_else(|| {
            bad(
                number,
                format!("expected `a: b [c: d] @ addresses`, found `{line}`"),
            )
        })?;
        let counts = parse_counts(counts, number)?;
        records.stacks.push(stack(
            parse_addresses(addresses, number)?,
            0,
            counts,
            period,
        ));
    }
    Ok(records)
}

/// One mapping of `/proc/self/maps`.
#[derive(Debug)]
struct Mapping {
    start: u64,
    end: u64,
    executable: bool,
    offset: u64,
    path: String,
}

fn parse_maps(text: &str) -> Result<Vec<Module>, String> {
    let mut by_path: BTreeMap<String, Vec<Mapping>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some(mapping) = parse_mapping(line) else {
            continue;
        };
        if !mapping.path.starts_with('/') {
            continue;
        }
        if !by_path.contains_key(&mapping.path) {
            order.push(mapping.path.clone());
        }
        by_path
            .entry(mapping.path.clone())
            .or_default()
            .push(mapping);
    }
    Ok(order
        .into_iter()
        .filter_map(|path| module_of(&path, &by_path[&path]))
        .collect())
}

/// `start-end perms offset dev inode path`.
fn parse_mapping(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let permissions = fields.next()?;
    let offset = fields.next()?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.collect::<Vec<_>>().join(" ");
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: permissions.contains('x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        path,
    })
}

/// A module from the mappings of one file: its executable ranges, its load
/// bias from the program headers (or, without the file, the start of its
/// offset-0 mapping), its build-id when the file is there.
fn module_of(path: &str, mappings: &[Mapping]) -> Option<Module> {
    let executable: Vec<&Mapping> = mappings.iter().filter(|m| m.executable).collect();
    let first = executable.first()?;
    let elf = ElfFacts::read(Path::new(path));
    let load_bias = elf
        .as_ref()
        .and_then(|facts| facts.address_of_offset(first.offset))
        .map(|address| first.start.wrapping_sub(address))
        .or_else(|| mappings.iter().find(|m| m.offset == 0).map(|m| m.start))
        .unwrap_or(first.start.wrapping_sub(first.offset));
    Some(Module {
        path: path.to_string(),
        build_id: elf.map(|facts| facts.build_id).unwrap_or_default(),
        load_bias,
        ranges: executable.iter().map(|m| (m.start, m.end)).collect(),
        first_epoch: 0,
        last_epoch: None,
    })
}

/// What the loader needs from the mapped file.
struct ElfFacts {
    build_id: Vec<u8>,
    /// `(p_offset, p_filesz, p_vaddr)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl ElfFacts {
    fn read(path: &Path) -> Option<ElfFacts> {
        use object::{Object, ObjectSegment};
        let file = crate::load::open_regular_file(path).ok()?;
        // SAFETY: a read-only map dropped before this function returns; a
        // file truncated underneath is the usual mmap caveat of symbolizers.
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let object = object::File::parse(&*map).ok()?;
        let segments = object
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        Some(ElfFacts {
            build_id: object
                .build_id()
                .ok()
                .flatten()
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
            segments,
        })
    }

    /// The ELF virtual address that file offset `offset` is loaded at.
    fn address_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(start, size, _)| offset >= start && offset - start < size)
            .map(|&(start, _, address)| address.wrapping_add(offset - start))
    }
}

/// True for the allocator libraries whose own frames sit at the leaf.
fn is_allocator_library(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    ["libjemalloc", "libtcmalloc", "libprofiler"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

fn into_dump(records: Records, modules: Vec<Module>, kind: ForeignKind, path: &Path) -> Dump {
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
        ForeignKind::Jemalloc => ("jemalloc heap_v2 profile", false),
        ForeignKind::Gperftools => ("gperftools heap profile", records.period == 1),
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
    let time_unix_ns = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
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
                let _ = parse(&bytes, kind, Path::new("x"));
            }
        }
    }

    #[test]
    fn bad_input_names_the_line() {
        let error = parse(
            b"heap_v2/4096\n  t*: 1: x [0: 0]\n",
            ForeignKind::Jemalloc,
            Path::new("x"),
        )
        .unwrap_err();
        assert!(error.starts_with("line 2:"), "{error}");
        let error = parse(b"heap_v2/1000\n", ForeignKind::Jemalloc, Path::new("x")).unwrap_err();
        assert!(error.contains("power of two"), "{error}");
        let error = parse(b"heap_v2/4096\n", ForeignKind::Jemalloc, Path::new("x")).unwrap_err();
        assert!(error.contains("MAPPED_LIBRARIES"), "{error}");
    }
}
