//! What the push tests share: the receiver, the `.proto`-driven decoder,
//! the pusher as a process, and dumps of real programs.

#![allow(dead_code)]

pub mod proto_wire;
pub mod receiver;

use flate2::read::GzDecoder;
use heapdiff::render::pprof::PbProfile;
use heapsample_tests::*;
use prost::Message;
use proto_wire::Schema;
use receiver::Arrival;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const OTLP_PATH: &str = "/v1development/profiles";

/// `heapdiff push` running, its stderr kept in a file.
pub struct Pusher {
    child: Child,
    stderr: PathBuf,
}

impl Pusher {
    pub fn start(args: &[&str], log: &Path) -> Pusher {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(heapdiff_path())
            .arg("push")
            .args(args)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start heapdiff push");
        Pusher {
            child,
            stderr: log.to_path_buf(),
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGTERM, and its exit status (within 20 s).
    pub fn stop(mut self) -> ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the pusher ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `heapdiff push ARGS` to its end: exit status and stderr.
pub fn push_once(args: &[&str]) -> (ExitStatus, String) {
    let output = Command::new(heapdiff_path())
        .arg("push")
        .args(args)
        .arg("--once")
        .output()
        .expect("run heapdiff push");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Wait (up to 60 s) until `done`; `what` and `context()` on failure.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Copy `file` into `dir` as a writer would: whole, under a hidden name,
/// then renamed.
pub fn place(file: &Path, dir: &Path) -> PathBuf {
    let name = file.file_name().unwrap().to_str().unwrap();
    let hidden = dir.join(format!(".{name}.tmp"));
    std::fs::copy(file, &hidden).unwrap();
    let target = dir.join(name);
    std::fs::rename(&hidden, &target).unwrap();
    target
}

/// Many dumps of a real program: `trig_interval` allocating 60 MiB with a
/// dump per MiB and the dumps of its barrier (about 170 in all; 125–131
/// measured at 45 MiB), sorted by name (by sequence).
pub fn interval_dumps() -> (Outcome, Vec<PathBuf>) {
    let program = compile_c("trig_interval.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .args(["60", "4096"])
        .with_shim()
        .prof_conf("lg_prof_interval:20,prof_signal:USR1,prof_final:true")
        .run();
    outcome.assert_success();
    let mut files: Vec<PathBuf> = outcome.dump_files().into_iter().map(|f| f.path).collect();
    files.sort();
    (outcome, files)
}

/// The wall-clock time of the dump in `file`.
pub fn dump_time(file: &Path) -> u64 {
    DumpFile::parse(file)
        .expect("a dump file")
        .decode()
        .time_unix_ns
}

/// The pprof profile of a Pyroscope request (gzipped `profile.proto`).
pub fn pprof_of(body: &[u8]) -> PbProfile {
    let mut bytes = Vec::new();
    GzDecoder::new(body)
        .read_to_end(&mut bytes)
        .expect("gzipped");
    PbProfile::decode(bytes.as_slice()).expect("a pprof profile")
}

/// The vendored OTLP definitions, read by the test's own decoder.
pub fn otlp_schema() -> Schema {
    let proto = workspace_root().join("dump-tool/proto/opentelemetry/proto");
    Schema::read(&[
        &proto.join("collector/profiles/v1development/profiles_service.proto"),
        &proto.join("profiles/v1development/profiles.proto"),
        &proto.join("common/v1/common.proto"),
        &proto.join("resource/v1/resource.proto"),
    ])
}

/// An OTLP request decoded by the `.proto` files (its body gzipped, as
/// its `Content-Encoding` says).
pub fn otlp_of(schema: &Schema, arrival: &Arrival) -> Value {
    let encoding = arrival.headers.get("content-encoding").map(String::as_str);
    assert_eq!(encoding, Some("gzip"), "OTLP bodies are sent gzipped");
    let mut body = Vec::new();
    GzDecoder::new(arrival.body.as_slice())
        .read_to_end(&mut body)
        .expect("gzipped");
    schema
        .decode("ExportProfilesServiceRequest", &body)
        .unwrap_or_else(|why| panic!("the OTLP body disagrees with the .proto files: {why}"))
}

/// The profiles of an OTLP request (one resource, one scope).
pub fn otlp_profiles(request: &Value) -> &Vec<Value> {
    request["resource_profiles"][0]["scope_profiles"][0]["profiles"]
        .as_array()
        .expect("profiles")
}

/// An OTLP request's dump time (its profiles' `time_unix_nano`).
pub fn otlp_time(request: &Value) -> u64 {
    otlp_profiles(request)[0]["time_unix_nano"]
        .as_u64()
        .unwrap()
}
