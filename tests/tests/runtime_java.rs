//! Java frames above native allocations: `heapsample run java ...` adds
//! `-XX:+PreserveFramePointer` and a perf map at exit (`DumpPerfMapAtExit`)
//! through `JAVA_TOOL_OPTIONS`; the walk steps through the JVM's code by the
//! frame pointer, and heapdiff shows the compiled methods that leak zlib
//! streams (`RtLeak.handleRequest` calling `RtLeak.makeCompressor`, then
//! `java.util.zip.Deflater.init` and zlib's `deflateInit2_`) in call order,
//! with their kind, alike in folded and json. The program is
//! tests/programs/RtLeak.java.
//!
//! The JVM's perf map names compiled methods only: the interpreter is one
//! region, so an interpreted method's frame says `[java: interpreted]`
//! (never a bare address). Its compilers inline small methods, which then
//! vanish from the stacks as they do for `perf`: the test keeps
//! `makeCompressor` out of line (`-XX:CompileCommand=dontinline`) to see both.
//!
//! Attached to a running JVM (started with `-XX:+PreserveFramePointer` and
//! nothing else), `heapsample dump` asks it for a perf map
//! (`jcmd PID Compiler.perfmap`) first: the dump names the same methods.

use heapsample_format::FrameKind;
use heapsample_tests::locate::{path_str, programs_dir, target_dir};
use heapsample_tests::prerequisite::{Missing, skip};
use heapsample_tests::run::Run;
use heapsample_tests::tools::heapdiff_ok;
use heapsample_tests::{TempDir, dump_files_in};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const HANDLE: &str = "RtLeak.handleRequest";
const MAKE: &str = "RtLeak.makeCompressor";
const JNI: &str = "Java_java_util_zip_Deflater_init";
const ZLIB: &str = "deflateInit2_";
const INTERPRETED: &str = "[java: interpreted]";

/// The JDK's `java` and `javac`, or the missing prerequisite reported.
fn jdk() -> Option<(&'static Path, &'static Path)> {
    let (java, javac) = (Path::new("/usr/bin/java"), Path::new("/usr/bin/javac"));
    let jcmd = Path::new("/usr/bin/jcmd");
    if !java.exists() || !javac.exists() || !jcmd.exists() {
        skip(Missing::Software(
            "OpenJDK is not installed (apt-get install openjdk-17-jdk-headless)",
        ));
        return None;
    }
    Some((java, javac))
}

/// tests/programs/RtLeak.java compiled into a directory of its own.
fn compile(javac: &Path) -> TempDir {
    let classes = TempDir::new("rt-java-classes");
    let compiled = Command::new(javac)
        .args(["-d", path_str(classes.path())])
        .arg(programs_dir().join("RtLeak.java"))
        .env_remove("JAVA_TOOL_OPTIONS")
        .output()
        .expect("run javac");
    assert!(compiled.status.success(), "javac: {compiled:?}");
    classes
}

/// The JVM's flags for the test: `makeCompressor` kept out of line.
const NO_INLINING: [&str; 2] = [
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=dontinline,RtLeak::makeCompressor",
];

#[test]
fn java_methods_are_named_in_call_order() {
    let Some((java, javac)) = jdk() else {
        return;
    };
    let classes = compile(javac);
    let out = TempDir::new("rt-java-dumps");
    let heapsample = target_dir().join("release").join("heapsample");
    let outcome = Run::new(&heapsample)
        .args(["run", "-o", path_str(out.path()), "--lg-sample", "16", "--"])
        .arg(java)
        .args(NO_INLINING)
        .args(["-cp", path_str(classes.path()), "RtLeak"])
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("kept 200 compressors"),
        "{}",
        outcome.context()
    );
    let files = dump_files_in(out.path());
    assert_eq!(files.len(), 1, "one exit dump: {files:?}");
    let file = &files[0];
    let dump = file.decode();
    let map = format!("/tmp/perf-{}.map", file.pid);
    let _ = std::fs::remove_file(&map);
    assert_eq!(dump.runtime.sources, [map], "{}", outcome.context());
    for method in ["RtLeak.handleRequest(", "RtLeak.makeCompressor("] {
        assert!(
            dump.runtime
                .symbols
                .iter()
                .any(|symbol| symbol.kind == FrameKind::Java && symbol.name.contains(method)),
            "{method} not among the dump's runtime symbols: {:?}",
            dump.runtime.symbols
        );
    }
    check_names(path_str(&file.path));
}

/// The leak's stacks in the dump at `path` name the methods in call order,
/// with their kinds, in folded and json.
fn check_names(path: &str) {
    // folded: the leak's stacks end in zlib under the JNI function; the
    // compiled methods carry `_[j]`, the interpreter `_[i]`; no bare address;
    // makeCompressor, wherever shown, is called by handleRequest.
    let folded = heapdiff_ok(&[path, "-m", "alloc-space", "-f", "folded"]);
    let leaks: Vec<Vec<&str>> = folded
        .lines()
        .filter_map(|line| line.rsplit_once(' ').map(|(stack, _)| stack))
        .filter(|stack| stack.ends_with(&format!("{JNI};{ZLIB}")))
        .map(|stack| stack.split(';').collect())
        .collect();
    assert!(!leaks.is_empty(), "no stack reaches {ZLIB} through {JNI}");
    let mut in_order = 0;
    for frames in &leaks {
        let stack = frames.join(";");
        assert!(!stack.contains("0x"), "no bare address: {stack}");
        let at = |name: &str| frames.iter().position(|frame| *frame == name);
        let (handle, make) = (at(&format!("{HANDLE}_[j]")), at(&format!("{MAKE}_[j]")));
        // makeCompressor's caller is handleRequest, compiled (named) or
        // still interpreted (then `[java: interpreted]`).
        if let Some(make) = make {
            let caller = frames[make - 1];
            assert!(
                caller == format!("{HANDLE}_[j]") || caller == format!("{INTERPRETED}_[i]"),
                "{MAKE} called from {caller}: {stack}"
            );
            in_order += usize::from(handle == Some(make - 1));
        }
        if let (Some(handle), Some(make)) = (handle, make) {
            assert!(handle < make, "{stack}");
        }
        for frame in frames {
            if frame.starts_with(INTERPRETED) {
                assert_eq!(*frame, format!("{INTERPRETED}_[i]"), "{stack}");
            }
        }
    }
    assert!(
        in_order > 0,
        "no stack shows {HANDLE} calling {MAKE}: {leaks:#?}"
    );

    // json: the same names, each with its kind.
    let json: serde_json::Value =
        serde_json::from_str(&heapdiff_ok(&[path, "-m", "alloc-space", "-f", "json"]))
            .expect("heapdiff's json parses");
    let names = json["names"].as_array().expect("names");
    let kinds = json["name_kinds"].as_array().expect("name_kinds");
    let kind_of = |wanted: &str| {
        let index = names.iter().position(|name| name == wanted);
        index.map(|index| kinds[index].as_str().expect("a kind"))
    };
    assert_eq!(kind_of(HANDLE), Some("java"));
    assert_eq!(kind_of(MAKE), Some("java"));
    assert_eq!(kind_of(INTERPRETED), Some("interpreter"));
    assert_eq!(kind_of(ZLIB), Some("native"));
}

#[test]
fn a_dump_of_an_attached_jvm_asks_it_for_its_names() {
    let Some((java, javac)) = jdk() else {
        return;
    };
    let classes = compile(javac);
    let mut jvm = Command::new(java)
        .arg("-XX:+PreserveFramePointer")
        .args(NO_INLINING)
        .args(["-cp", path_str(classes.path()), "RtLeak", "20000", "wait"])
        .env_remove("JAVA_TOOL_OPTIONS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start java");
    let pid = jvm.id().to_string();
    let mut stdin = jvm.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(jvm.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read ready");
    assert_eq!(line.trim(), "ready");
    let out = TempDir::new("rt-java-attach");
    let heapsample = target_dir().join("release").join("heapsample");
    let command = |args: &[&str]| {
        let output = Command::new(&heapsample)
            .args(args)
            .output()
            .expect("run heapsample");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let errors = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "heapsample {args:?}: {text}{errors}"
        );
        assert!(!errors.contains("Compiler.perfmap"), "{errors}");
        text
    };
    command(&[
        "attach",
        &pid,
        "-o",
        path_str(out.path()),
        "--lg-sample",
        "16",
    ]);
    writeln!(stdin, "go").expect("start the leak");
    line.clear();
    stdout.read_line(&mut line).expect("read kept");
    assert_eq!(line.trim(), "kept 200 compressors");
    let written = command(&["dump", &pid]);
    command(&["detach", &pid]);
    writeln!(stdin, "bye").expect("end the program");
    drop(stdin);
    assert!(jvm.wait().expect("wait for java").success());
    let map = format!("/tmp/perf-{pid}.map");
    let _ = std::fs::remove_file(&map);
    let path = Path::new(written.trim());
    let file = dump_files_in(out.path())
        .into_iter()
        .find(|file| file.path == path)
        .unwrap_or_else(|| panic!("{written} not among the dumps"));
    assert_eq!(file.decode().runtime.sources, [map]);
    check_names(path_str(path));
}
