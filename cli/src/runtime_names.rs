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
//! For `heapsample attach`, `dump` and `detach` on a JVM, asks it for a fresh
//! perf map with `jcmd PID Compiler.perfmap` ([`refresh_jvm_perf_map`]).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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

/// Asks the JVM `pid` for a perf map of its compiled code (`jcmd PID
/// Compiler.perfmap`, which rewrites `/tmp/perf-PID.map`), so that the dump
/// about to be written names its Java methods. Does nothing for a process
/// that is not a JVM. Must run before the process is stopped for tracing:
/// the JVM answers on one of its own threads. A failure is one line and the
/// dump goes on (its Java frames then say `[jit]`).
pub fn refresh_jvm_perf_map(pid: i32) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    if !maps.lines().any(|line| line.ends_with("/libjvm.so")) {
        return;
    }
    let jcmd = jcmd_beside(pid).unwrap_or_else(|| "jcmd".into());
    let outcome = Command::new(&jcmd)
        .args([&pid.to_string(), "Compiler.perfmap"])
        .env_remove("LD_PRELOAD")
        .env_remove("JAVA_TOOL_OPTIONS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| error.to_string())
        .and_then(|child| wait_bounded(child, Duration::from_secs(JCMD_SECONDS)));
    if let Err(why) = outcome {
        eprintln!(
            "heapsample: `{} {pid} Compiler.perfmap` failed ({why}): the dump's Java frames show as [jit]",
            jcmd.display()
        );
    }
}

/// How long `jcmd` may take (it starts a JVM of its own: about a second).
const JCMD_SECONDS: u64 = 20;

/// The `jcmd` of the JDK the process `pid` runs, beside its `java`.
fn jcmd_beside(pid: i32) -> Option<std::path::PathBuf> {
    let java = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let jcmd = java.parent()?.join("jcmd");
    jcmd.exists().then_some(jcmd)
}

/// Waits for `child` at most `limit` (then kills it); why it failed if it
/// did not succeed.
fn wait_bounded(mut child: std::process::Child, limit: Duration) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
            if status.success() {
                return Ok(());
            }
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                use std::io::Read;
                let _ = pipe.read_to_string(&mut stderr);
            }
            let first = stderr.lines().next().unwrap_or("").trim();
            return Err(format!("{status}: {first}"));
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no answer in {} s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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
