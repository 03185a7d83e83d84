//! `heapsample detach|dump|start|stop|status PID`: work on a process that
//! runs the profiler, preloaded or attached, by calling the library's
//! entry points on one of its threads stopped at a safe point (`inject`):
//! no signal, no thread, no descriptor is involved or left behind.

use std::time::Duration;

use clap::Args;

use crate::Failure;
use crate::container::Outpost;
use crate::inject::{self, Target};

#[derive(Args)]
pub struct PidArgs {
    /// The process.
    pid: i32,
    /// Seconds to wait for a thread of the process to reach a safe point.
    #[arg(long, default_value = "5", value_name = "SECONDS")]
    timeout: f64,
}

impl PidArgs {
    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout.max(0.0))
    }
}

/// How the profiler is in a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Preloaded at start-up.
    Preloaded,
    /// Loaded late, never attached.
    Loaded,
    /// Attached.
    Attached,
    /// Attached once, detached since.
    Detached,
}

/// What `heapsample_status` said.
pub struct Status {
    pub mode: Mode,
    pub text: String,
}

/// The profiled process `pid`, inspected; fails if it does not run the
/// profiler.
fn profiled(pid: i32) -> Result<Target, Failure> {
    let target = Target::inspect(pid)?;
    if target.profiler().is_none() {
        return Err(Failure::new(format!(
            "process {pid} ({}) is not profiled (start it with `heapsample run`, or `heapsample attach {pid}`)",
            target.name
        )));
    }
    Ok(target)
}

/// Call the entry point `name(buffer, size, extra...)` and return its
/// result and the text it wrote.
fn call_with_buffer(
    target: &mut Target,
    timeout: Duration,
    name: &str,
) -> Result<(i32, String), Failure> {
    let ((status, text), _, _) = inject::with_session(target, timeout, |session, target| {
        let entry = target.profiler_entry(name)?;
        let buffer = session.buffer(8192)?;
        let status = session.call(entry, &[buffer, 8192])?;
        Ok((status as i32, session.read_string(buffer, 8192)?))
    })?;
    Ok((status, text))
}

/// The profiler's status in `target` (which has the library loaded).
pub fn status_of(target: &mut Target, timeout: Duration) -> Result<Status, Failure> {
    let (_, text) = call_with_buffer(target, timeout, "heapsample_status")?;
    let mode = match text.lines().next().and_then(|l| l.strip_prefix("mode: ")) {
        Some("attached") => Mode::Attached,
        Some("detached") => Mode::Detached,
        Some("loaded") => Mode::Loaded,
        _ => Mode::Preloaded,
    };
    Ok(Status { mode, text })
}

pub fn status(args: PidArgs) -> Result<u8, Failure> {
    let mut target = profiled(args.pid)?;
    let status = status_of(&mut target, args.timeout())?;
    println!("process: {}", target.process.describe(&target.name));
    if let Some(outpost) = Outpost::of(target.process) {
        println!(
            "dumps: written in {} inside its container, brought to {} at each dump and at detach",
            outpost.inside.display(),
            outpost.host_dir.display()
        );
    }
    let attached_at = status
        .text
        .lines()
        .find_map(|l| l.strip_prefix("attached_unix_ns: "))
        .and_then(|ns| ns.parse::<u64>().ok());
    let since = match (status.mode, attached_at) {
        (Mode::Attached, Some(at)) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            Some(format!(
                "attached {:.1} s ago",
                now.saturating_sub(at) as f64 / 1e9
            ))
        }
        (Mode::Preloaded, _) => target
            .process
            .age_seconds()
            .map(|age| format!("profiled since its start, {age:.1} s ago")),
        _ => None,
    };
    if let Some(since) = since {
        println!("since: {since}");
    }
    print!("{}", status.text);
    Ok(0)
}

pub fn detach(args: PidArgs) -> Result<u8, Failure> {
    crate::runtime_names::refresh_jvm_perf_map(args.pid);
    let mut target = profiled(args.pid)?;
    let (status, text) = call_with_buffer(&mut target, args.timeout(), "heapsample_detach")?;
    if status != 0 {
        return Err(Failure::new(format!("process {}: {text}", args.pid)));
    }
    if let Some(outpost) = Outpost::of(target.process) {
        let moved = outpost.bring_home(target.process)?;
        outpost.remove(target.process);
        if !moved.is_empty() {
            println!(
                "heapsample: {} dumps brought from the container into {}",
                moved.len(),
                outpost.host_dir.display()
            );
        }
    }
    println!(
        "heapsample: detached from process {}: {text}; the library stays loaded and inert",
        target.process.describe(&target.name)
    );
    Ok(0)
}

pub fn dump(args: PidArgs) -> Result<u8, Failure> {
    crate::runtime_names::refresh_jvm_perf_map(args.pid);
    let mut target = profiled(args.pid)?;
    let (status, text) = call_with_buffer(&mut target, args.timeout(), "heapsample_dump_named")?;
    if status != 0 {
        return Err(Failure::new(format!(
            "process {} ({}) wrote no dump: {text}",
            args.pid, target.name
        )));
    }
    match Outpost::of(target.process) {
        Some(outpost) => {
            let moved = outpost.bring_home(target.process)?;
            let written = std::path::Path::new(text.trim());
            let here = moved
                .iter()
                .find(|(inside, _)| inside == written)
                .map_or_else(
                    || {
                        outpost
                            .host_dir
                            .join(written.file_name().unwrap_or_default())
                    },
                    |(_, host)| host.clone(),
                );
            println!("{}", here.display());
        }
        None => println!("{text}"),
    }
    Ok(0)
}

pub fn set_active(args: PidArgs, on: bool) -> Result<u8, Failure> {
    let mut target = profiled(args.pid)?;
    let timeout = args.timeout();
    let status = status_of(&mut target, timeout)?;
    if status.mode == Mode::Detached || status.mode == Mode::Loaded {
        return Err(Failure::new(format!(
            "process {} ({}) is not attached: `heapsample attach {}` first",
            args.pid, target.name, args.pid
        )));
    }
    let (previous, _, _) = inject::with_session(&mut target, timeout, |session, target| {
        let entry = target.profiler_entry("heapsample_set_active")?;
        session.call(entry, &[u64::from(on)])
    })?;
    let word = if on { "started" } else { "stopped" };
    let was = match previous as i32 {
        1 => "it was sampling",
        0 => "it was not sampling",
        _ => "profiling is off in it",
    };
    println!(
        "heapsample: sampling {word} in process {} ({}); {was}",
        args.pid, target.name
    );
    Ok(0)
}
