//! Names of runtime-generated code for a dump: the process's perf map
//! (`/tmp/perf-PID.map`, written by CPython ≥ 3.12 with `-X perf`, Node.js with
//! `--perf-basic-prof`, the JVM through `jcmd PID Compiler.perfmap`) and its
//! jitdump (`jit-PID.dump`, Node.js `--perf-prof`: [`crate::jitdump`]), read when
//! a dump is assembled, and the entries the dump's frames fall in copied into
//! it ([`heapsample_format::RuntimeFrames`]), so the dump never depends on the
//! file still being there or unchanged.
//!
//! Owns the parsed map and jitdump, each kept between dumps and parsed again only when the
//! file's size or modification time changed (a rewritten map gives the next
//! dump its new names). Each line is `START SIZE NAME`, hexadecimal, with or
//! without `0x`; where entries overlap (code freed and reused, an appended
//! entry for moved code) the later line wins, as for perf.
//!
//! Never runs inside malloc: it opens and reads a file, allocates and takes a
//! lock of its own (dump assembly only).

use std::collections::BTreeSet;
use std::sync::Mutex;

use heapsample_format::{FrameKind, RuntimeFrames, RuntimeSymbol, Stack};

/// One perf map entry: its region, name and line number (later lines win).
#[derive(Clone, Debug)]
struct Entry {
    start: u64,
    end: u64,
    line: usize,
    name: String,
}

/// A parsed perf map and the file state it was parsed from.
struct Parsed {
    path: String,
    size: u64,
    mtime_ns: i128,
    /// Sorted by start, then line.
    entries: Vec<Entry>,
    /// The largest entry, which bounds how far back a lookup scans.
    longest: u64,
}

static PERF_MAP: Mutex<Option<Parsed>> = Mutex::new(None);
static JITDUMP: Mutex<Option<Parsed>> = Mutex::new(None);

/// The runtime frames of a dump of this process whose stacks are `stacks`.
pub fn runtime_frames(stacks: &[Stack]) -> RuntimeFrames {
    let pid = std::process::id();
    // The set of the dump's addresses is built only once a map is found:
    // most processes have neither file.
    let mut addresses: Option<BTreeSet<u64>> = None;
    let mut frames = RuntimeFrames::default();
    let perf_map = Some(format!("/tmp/perf-{pid}.map"));
    let sources = [
        (&PERF_MAP, perf_map, parse as fn(&[u8]) -> Vec<Entry>),
        (&JITDUMP, crate::jitdump::find(pid), parse_jitdump),
    ];
    for (state, path, parse) in sources {
        // Not `lock`: in a forked child, a dump that another thread of the
        // parent was assembling at the fork left this lock held for ever
        // (the dump lock is reset in the child, this one cannot be). Whoever
        // finds it held parses the file afresh instead of waiting.
        let mut own = None;
        let mut held = match state.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        let parsed: &mut Option<Parsed> = match held.as_mut() {
            Some(guard) => guard,
            None => &mut own,
        };
        let Some(path) = path else {
            *parsed = None;
            continue;
        };
        if !refresh(parsed, &path, parse) {
            continue;
        }
        if let Some(map) = parsed.as_ref() {
            let addresses = addresses.get_or_insert_with(|| {
                stacks
                    .iter()
                    .flat_map(|stack| stack.frames.iter().copied())
                    .collect()
            });
            frames.symbols.extend(symbols_for(map, addresses));
            frames.sources.push(path);
        }
    }
    frames.symbols.sort_by_key(|symbol| symbol.start);
    frames
}

/// Parses the file at `path` again if its size or modification time
/// changed; false if there is none (or it cannot be read).
fn refresh(parsed: &mut Option<Parsed>, path: &str, parse: fn(&[u8]) -> Vec<Entry>) -> bool {
    let Ok(metadata) = std::fs::metadata(path) else {
        *parsed = None;
        return false;
    };
    use std::os::unix::fs::MetadataExt;
    let mtime_ns = i128::from(metadata.mtime()) * 1_000_000_000 + i128::from(metadata.mtime_nsec());
    if let Some(current) = parsed
        && current.path == path
        && current.size == metadata.len()
        && current.mtime_ns == mtime_ns
    {
        return true;
    }
    let Ok(text) = std::fs::read(path) else {
        *parsed = None;
        return false;
    };
    let entries = parse(&text);
    let longest = entries
        .iter()
        .map(|entry| entry.end - entry.start)
        .max()
        .unwrap_or(0);
    *parsed = Some(Parsed {
        path: path.to_string(),
        size: text.len() as u64,
        mtime_ns,
        entries,
        longest,
    });
    true
}

/// The entries of a jitdump, sorted by start then record.
fn parse_jitdump(bytes: &[u8]) -> Vec<Entry> {
    let mut entries: Vec<Entry> = crate::jitdump::parse(bytes)
        .into_iter()
        .enumerate()
        .filter_map(|(line, region)| {
            Some(Entry {
                start: region.start,
                end: region.start.checked_add(region.size)?,
                line,
                name: region.name,
            })
        })
        .collect();
    entries.sort_by_key(|entry| (entry.start, entry.line));
    entries
}

/// The entries of a perf map's text, sorted by start then line; malformed
/// lines (a line being written as the map is read) are skipped.
fn parse(text: &[u8]) -> Vec<Entry> {
    let mut entries: Vec<Entry> = text
        .split(|&byte| byte == b'\n')
        .enumerate()
        .filter_map(|(line, bytes)| {
            let text = std::str::from_utf8(bytes).ok()?;
            let (start, rest) = text.split_once(' ')?;
            let (size, name) = rest.split_once(' ')?;
            let start = hex(start)?;
            let size = hex(size)?;
            let end = start.checked_add(size)?;
            (size > 0 && !name.is_empty()).then(|| Entry {
                start,
                end,
                line,
                name: name.trim_end().to_string(),
            })
        })
        .collect();
    entries.sort_by_key(|entry| (entry.start, entry.line));
    entries
}

fn hex(text: &str) -> Option<u64> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    u64::from_str_radix(digits, 16).ok()
}

/// The named regions `addresses` (return addresses) fall in, by start.
fn symbols_for(map: &Parsed, addresses: &BTreeSet<u64>) -> Vec<RuntimeSymbol> {
    let mut found: Vec<&Entry> = addresses
        .iter()
        .filter_map(|&address| lookup(map, address.wrapping_sub(1)))
        .collect();
    found.sort_by_key(|entry| (entry.start, entry.line));
    found.dedup_by_key(|entry| (entry.start, entry.line));
    found
        .into_iter()
        .map(|entry| RuntimeSymbol {
            start: entry.start,
            size: entry.end - entry.start,
            name: entry.name.clone(),
            kind: kind_of(&entry.name),
        })
        .collect()
}

/// The latest entry containing `address`.
fn lookup(map: &Parsed, address: u64) -> Option<&Entry> {
    let after = map.entries.partition_point(|entry| entry.start <= address);
    map.entries[..after]
        .iter()
        .rev()
        .take_while(|entry| address - entry.start < map.longest)
        .filter(|entry| address < entry.end)
        .max_by_key(|entry| entry.line)
}

/// The language of a perf map name, by each runtime's spelling.
pub fn kind_of(name: &str) -> FrameKind {
    const JAVASCRIPT: [&str; 6] = [
        "JS:",
        "LazyCompile:",
        "Function:",
        "Script:",
        "Eval:",
        "RegExp:",
    ];
    if name.starts_with("py::") {
        FrameKind::Python
    } else if JAVASCRIPT.iter().any(|prefix| name.starts_with(prefix)) {
        FrameKind::JavaScript
    } else if name.starts_with("BytecodeHandler:")
        || name.starts_with("Builtin:Interpreter")
        || name == "Interpreter"
        || name.starts_with("py::trampoline")
    {
        FrameKind::Interpreter
    } else if (name.contains("::") && !name.contains(' ')) || is_jvm_method(name) {
        FrameKind::Java
    } else {
        FrameKind::Jit
    }
}

/// The JVM's own spelling of a compiled method (`Compiler.perfmap`,
/// `DumpPerfMapAtExit`): `RETURN_TYPE package.Class.method(PARAMETERS)`.
fn is_jvm_method(name: &str) -> bool {
    let Some((head, _)) = name.split_once('(') else {
        return false;
    };
    let Some((returns, method)) = head.split_once(' ') else {
        return false;
    };
    name.ends_with(')')
        && !returns.is_empty()
        && method.contains('.')
        && !method.contains(' ')
        && !method.contains("::")
        && !returns.contains('[')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Parsed {
        let entries = parse(text.as_bytes());
        let longest = entries
            .iter()
            .map(|entry| entry.end - entry.start)
            .max()
            .unwrap_or(0);
        Parsed {
            path: String::new(),
            size: 0,
            mtime_ns: 0,
            entries,
            longest,
        }
    }

    #[test]
    fn later_lines_win_and_bad_lines_are_skipped() {
        let map = parsed(
            "1000 100 py::old:/a.py\nnonsense\n0x1080 0x10 py::new:/b.py\n2000 10 JS:*f /x.js:1\n2000 1",
        );
        assert_eq!(
            lookup(&map, 0x1010).map(|e| e.name.as_str()),
            Some("py::old:/a.py")
        );
        assert_eq!(
            lookup(&map, 0x1085).map(|e| e.name.as_str()),
            Some("py::new:/b.py")
        );
        assert_eq!(
            lookup(&map, 0x1095).map(|e| e.name.as_str()),
            Some("py::old:/a.py")
        );
        assert_eq!(
            lookup(&map, 0x2005).map(|e| e.name.as_str()),
            Some("JS:*f /x.js:1")
        );
        assert!(lookup(&map, 0x2010).is_none());
        assert!(lookup(&map, 0xfff).is_none());
    }

    #[test]
    fn kinds_follow_each_runtimes_spelling() {
        assert_eq!(
            kind_of("py::make_record:/tmp/rt_leak.py"),
            FrameKind::Python
        );
        assert_eq!(
            kind_of("LazyCompile:*handleRequest /tmp/leak.js:12"),
            FrameKind::JavaScript
        );
        assert_eq!(
            kind_of("JS:~handleRequest /tmp/leak.js:12"),
            FrameKind::JavaScript
        );
        assert_eq!(kind_of("LRtLeak;::makeCompressor"), FrameKind::Java);
        assert_eq!(kind_of("RtLeak::makeCompressor"), FrameKind::Java);
        assert_eq!(kind_of("void RtLeak.handleRequest(int)"), FrameKind::Java);
        assert_eq!(
            kind_of("void java.util.zip.Deflater.<init>(int, boolean)"),
            FrameKind::Java
        );
        assert_eq!(kind_of("StubRoutines (1)"), FrameKind::Jit);
        assert_eq!(kind_of("Interpreter"), FrameKind::Interpreter);
        assert_eq!(kind_of("Builtin:CEntry_Return1"), FrameKind::Jit);
    }
}
