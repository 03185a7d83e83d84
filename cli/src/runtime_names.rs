//! Switching on a runtime's perf support for `heapsample run`, so that the
//! dumps name the frames of Python, JavaScript and Java code (the shim reads
//! the perf map `/tmp/perf-PID.map` the runtime then writes).
//!
//! Owns recognizing the command (by its program's name) and the switch of
//! each runtime: CPython ≥ 3.12 `PYTHONPERFSUPPORT=1`; Node.js
//! `--perf-basic-prof --interpreted-frames-native-stack` through
//! `NODE_OPTIONS`; the JVM `-XX:+PreserveFramePointer
//! -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit` through
//! `JAVA_TOOL_OPTIONS`. A variable the user set is extended, never replaced
//! (`PYTHONPERFSUPPORT` is left as set). Runs the interpreter once to ask a
//! Python its version (before 3.12 it has no perf support: one line says so).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// The runtimes `heapsample run` recognizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Python,
    Node,
    Java,
}

/// The runtime `program` is, by its file name (`python3.12`, `node`, `java`).
pub fn recognize(program: &OsStr) -> Option<Runtime> {
    let name = Path::new(program).file_name()?.to_str()?;
    if name.starts_with("python") {
        Some(Runtime::Python)
    } else if name == "node" || name == "nodejs" {
        Some(Runtime::Node)
    } else if name == "java" {
        Some(Runtime::Java)
    } else {
        None
    }
}

/// Switches on the perf support of the runtime `program` is, if any.
pub fn switch_on(program: &OsStr, command: &mut Command) {
    match recognize(program) {
        Some(Runtime::Python) => {
            if !python_has_perf_support(program) {
                eprintln!(
                    "<heapsample>: {} has no perf support (CPython 3.12 or later has): Python functions show as the interpreter's frames",
                    Path::new(program).display()
                );
                return;
            }
            if std::env::var_os("PYTHONPERFSUPPORT").is_none() {
                command.env("PYTHONPERFSUPPORT", "1");
            }
        }
        Some(Runtime::Node) => {
            extend(
                command,
                "NODE_OPTIONS",
                "--perf-basic-prof --interpreted-frames-native-stack",
            );
        }
        Some(Runtime::Java) => extend(
            command,
            "JAVA_TOOL_OPTIONS",
            "-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit",
        ),
        None => {}
    }
}

/// `variable` as the command would inherit it, with `options` appended.
fn extend(command: &mut Command, variable: &str, options: &str) {
    let mut value = std::env::var_os(variable).unwrap_or_default();
    if !value.is_empty() {
        value.push(" ");
    }
    value.push(options);
    command.env(variable, value);
}

/// True if the Python `program` is CPython 3.12 or later (asked once).
fn python_has_perf_support(program: &OsStr) -> bool {
    let asked = Command::new(program)
        .args(["-c", "import sys; print(int(sys.version_info >= (3, 12)))"])
        .env_remove("LD_PRELOAD")
        .output();
    asked.is_ok_and(|output| {
        output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "1"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_recognized_by_name() {
        assert_eq!(
            recognize(OsStr::new("/usr/bin/python3.12")),
            Some(Runtime::Python)
        );
        assert_eq!(recognize(OsStr::new("node")), Some(Runtime::Node));
        assert_eq!(
            recognize(OsStr::new("/opt/jdk/bin/java")),
            Some(Runtime::Java)
        );
        assert_eq!(recognize(OsStr::new("./server")), None);
    }
}
