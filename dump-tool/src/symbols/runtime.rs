//! Frames in code a language runtime generated: the names the dump carries
//! for them ([`heapsample_format::RuntimeFrames`]) cleaned of each runtime's
//! spelling, and what an unnamed one says instead of a bare address.
//!
//! Owns the cleaning ([`clean`]: CPython's `py::make_record:/path/leak.py`
//! becomes `make_record (leak.py)`, V8's `LazyCompile:*handleRequest
//! /path/leak.js:12` `handleRequest (leak.js)` whatever its tier mark, the JVM's
//! `LRtLeak;::makeCompressor` `RtLeak.makeCompressor`). Plain functions over
//! strings and the dump: no I/O.

use heapsample_format::{Dump, FrameKind, RuntimeSymbol};

/// A runtime frame's name as shown, its source file and line (0: unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanName {
    pub function: String,
    pub file: Option<String>,
    pub line: u32,
}

/// The dump's runtime symbol for a return address, if its call lies in one.
pub fn symbol_for(dump: &Dump, return_address: u64) -> Option<&RuntimeSymbol> {
    let address = return_address.wrapping_sub(1);
    let symbols = &dump.runtime.symbols;
    let after = symbols.partition_point(|symbol| symbol.start <= address);
    symbols[..after]
        .iter()
        .rev()
        .find(|symbol| address - symbol.start < symbol.size)
}

/// What a frame outside every module and every runtime symbol says: `[jit]`
/// when the dump has the runtime's names (this code was not among them),
/// `[python: no perf map]` (or node's, java's) when the process is a runtime
/// that published none; `None` for other programs (the address is shown).
pub fn unnamed(dump: &Dump) -> Option<String> {
    if !dump.runtime.sources.is_empty() {
        return Some("[jit]".to_string());
    }
    let runtime = runtime_of(dump)?;
    Some(format!("[{runtime}: no perf map]"))
}

/// How to get names for a runtime that published none (one line), for a
/// dump of a recognized runtime without a perf map or jitdump.
pub fn how_to_name(dump: &Dump) -> Option<String> {
    if !dump.runtime.sources.is_empty() {
        return None;
    }
    let how = match runtime_of(dump)? {
        "python" => {
            "CPython 3.12 or later with -X perf or PYTHONPERFSUPPORT=1 (3.11 and older have no perf support)"
        }
        "node" => "node --perf-basic-prof --interpreted-frames-native-stack (or --perf-prof)",
        _ => {
            "java -XX:+PreserveFramePointer, and -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit or jcmd PID Compiler.perfmap"
        }
    };
    Some(format!(
        "{} published no names for its generated code: its frames show as [{}: no perf map]; `heapsample run` turns names on, or start it with {how}",
        dump.executable,
        runtime_of(dump)?
    ))
}

/// The runtime a dump's process runs, by its modules and executable.
fn runtime_of(dump: &Dump) -> Option<&'static str> {
    let paths = dump
        .modules
        .iter()
        .map(|module| module.path.as_str())
        .chain([dump.executable.as_str()]);
    for path in paths {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.starts_with("libpython") || name.starts_with("python") {
            return Some("python");
        }
        if name == "node" || name.starts_with("libnode") {
            return Some("node");
        }
        if name == "libjvm.so" {
            return Some("java");
        }
    }
    None
}

/// `name` (as the runtime wrote it) as shown.
pub fn clean(name: &str, kind: FrameKind) -> CleanName {
    match kind {
        // The JVM's template interpreter: one region for every interpreted
        // method, whose names the JVM does not publish.
        FrameKind::Interpreter if name == "Interpreter" => plain("[java: interpreted]"),
        FrameKind::Python => python(name),
        FrameKind::JavaScript => javascript(name),
        FrameKind::Java => java(name),
        _ => plain(name),
    }
}

fn plain(name: &str) -> CleanName {
    CleanName {
        function: name.to_string(),
        file: None,
        line: 0,
    }
}

/// `py::FUNCTION:FILE`.
fn python(name: &str) -> CleanName {
    let rest = name.strip_prefix("py::").unwrap_or(name);
    let Some((function, file)) = rest.split_once(':') else {
        return plain(rest);
    };
    CleanName {
        function: format!("{function} ({})", base_name(file)),
        file: Some(file.to_string()),
        line: 0,
    }
}

/// `KIND:[*~]FUNCTION FILE:LINE[:COLUMN]`.
fn javascript(name: &str) -> CleanName {
    let rest = name.split_once(':').map_or(name, |(_, rest)| rest);
    // V8's tier marks: `~` interpreted, `^` baseline, `+` Maglev, `*` TurboFan.
    let rest = rest.trim_start_matches(['*', '~', '^', '+']);
    let (function, location) = rest.split_once(' ').unwrap_or((rest, ""));
    let function = if function.is_empty() {
        "(anonymous)"
    } else {
        function
    };
    if location.is_empty() {
        return plain(function);
    }
    // `FILE:LINE:COLUMN` or `FILE:LINE`: the line is the last number taken off.
    let (mut file, mut line) = (location, 0);
    for _ in 0..2 {
        match file.rsplit_once(':') {
            Some((head, tail)) if tail.parse::<u32>().is_ok() => {
                line = tail.parse().unwrap_or(0);
                file = head;
            }
            _ => break,
        }
    }
    CleanName {
        function: format!("{function} ({})", base_name(file)),
        file: Some(file.to_string()),
        line,
    }
}

/// `LPACKAGE/CLASS;::METHOD` or `PACKAGE.CLASS::METHOD`, a signature after,
/// or the JVM's own `RETURN_TYPE PACKAGE.CLASS.METHOD(PARAMETERS)`.
fn java(name: &str) -> CleanName {
    let name = name.split_once('(').map_or(name, |(head, _)| head);
    let name = name.rsplit_once(' ').map_or(name, |(_, method)| method);
    let Some((class, method)) = name.rsplit_once("::") else {
        return plain(name);
    };
    let class = class
        .strip_prefix('L')
        .and_then(|class| class.strip_suffix(';'))
        .unwrap_or(class)
        .replace('/', ".");
    plain(&format!("{class}.{method}"))
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The folded-stack suffix of a frame of `kind` (async-profiler's, which
/// inferno's Java palette colours): `_[j]` for generated code of every
/// language, `_[i]` for the interpreter; none for native code.
pub fn folded_suffix(kind: FrameKind) -> &'static str {
    match kind {
        FrameKind::Native => "",
        FrameKind::Interpreter => "_[i]",
        FrameKind::Python | FrameKind::JavaScript | FrameKind::Java | FrameKind::Jit => "_[j]",
    }
}

/// The kind's name in json and pprof.
pub fn kind_name(kind: FrameKind) -> &'static str {
    match kind {
        FrameKind::Native => "native",
        FrameKind::Interpreter => "interpreter",
        FrameKind::Python => "python",
        FrameKind::JavaScript => "javascript",
        FrameKind::Java => "java",
        FrameKind::Jit => "jit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(name: &str, kind: FrameKind) -> (String, Option<String>, u32) {
        let clean = clean(name, kind);
        (clean.function, clean.file, clean.line)
    }

    #[test]
    fn each_runtimes_spelling_is_cleaned() {
        assert_eq!(
            shown("py::make_record:/tmp/x/rt_leak.py", FrameKind::Python),
            (
                "make_record (rt_leak.py)".into(),
                Some("/tmp/x/rt_leak.py".into()),
                0
            )
        );
        assert_eq!(
            shown(
                "LazyCompile:*handleRequest /tmp/x/leak.js:12",
                FrameKind::JavaScript
            ),
            (
                "handleRequest (leak.js)".into(),
                Some("/tmp/x/leak.js".into()),
                12
            )
        );
        assert_eq!(
            shown(
                "JS:~handleRequest /tmp/x/leak.js:12:3",
                FrameKind::JavaScript
            ),
            (
                "handleRequest (leak.js)".into(),
                Some("/tmp/x/leak.js".into()),
                12
            )
        );
        assert_eq!(
            shown("JS:^makeBuffer /tmp/x/leak.js:3:20", FrameKind::JavaScript).0,
            "makeBuffer (leak.js)"
        );
        assert_eq!(
            shown("JS:* /tmp/leak.js:1", FrameKind::JavaScript).0,
            "(anonymous) (leak.js)"
        );
        assert_eq!(
            shown("LRtLeak;::makeCompressor", FrameKind::Java).0,
            "RtLeak.makeCompressor"
        );
        assert_eq!(
            shown("RtLeak::makeCompressor", FrameKind::Java).0,
            "RtLeak.makeCompressor"
        );
        assert_eq!(
            shown("Ljava/util/zip/Deflater;::init(IIZ)J", FrameKind::Java).0,
            "java.util.zip.Deflater.init"
        );
        assert_eq!(
            shown("void RtLeak.handleRequest(int)", FrameKind::Java).0,
            "RtLeak.handleRequest"
        );
        assert_eq!(
            shown(
                "java.util.zip.Deflater RtLeak.makeCompressor(int)",
                FrameKind::Java
            )
            .0,
            "RtLeak.makeCompressor"
        );
        assert_eq!(
            shown("Interpreter", FrameKind::Interpreter).0,
            "[java: interpreted]"
        );
        assert_eq!(shown("Builtin:CEntry", FrameKind::Jit).0, "Builtin:CEntry");
    }
}
