//! `heapdiff push`: its arguments, handed to the push crate.

use clap::Args;
use heapdiff::model::BuildOptions;
use heapdiff::pipeline::Settings;
use heapdiff::symbols::SymbolizeOptions;
use heapdiff_push::Config;
use heapdiff_push::queue::Bounds;
use heapdiff_push::targets::Target;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `heapdiff push`'s arguments (its help is the subcommand's doc in main.rs).
#[derive(Args, Debug)]
pub struct PushArgs {
    /// Directories to follow for dumps (and single dump files).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Pyroscope's base URL (http://host:4040); profiles go to /ingest,
    /// named after the executable with the labels host, pid, container.
    #[arg(long, value_name = "URL")]
    pub pyroscope: Option<String>,
    /// An OTLP/HTTP receiver's base URL (http://host:4318; profiles go to
    /// /v1development/profiles), or the whole endpoint when it has a path.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// A header sent with every request, `NAME: VALUE` (a tenant's
    /// `X-Scope-OrgID: team`, an `Authorization` checked by a proxy).
    /// Repeatable.
    #[arg(long, value_name = "NAME: VALUE")]
    pub header: Vec<String>,
    /// The state directory (what was seen, what waits). Default:
    /// `.heapdiff-push` in the first directory followed.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// At most this many requests wait; past it the oldest are dropped,
    /// each with a line.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_queue: usize,
    /// At most this many MiB wait on disk; past it the oldest are dropped.
    #[arg(long, default_value_t = 512, value_name = "MIB")]
    pub max_queue_mib: u64,
    /// Seconds between two scans of the directories.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub poll: f64,
    /// Seconds a request may take (connect, send, answer) before it is
    /// retried.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// The longest wait, in seconds, between attempts on a failing
    /// receiver (the wait starts at 1 s and doubles).
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub max_backoff: f64,
    /// Send what is there and what waits, once, then exit: 0 when nothing
    /// is left waiting, 1 otherwise.
    #[arg(long)]
    pub once: bool,
    /// Also look for modules and debug files here. Repeatable.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
    /// Keep the allocator's own frames at the leaf of each stack.
    #[arg(long)]
    pub keep_allocator_frames: bool,
}

pub fn run(args: &PushArgs) -> Result<ExitCode, String> {
    let mut targets = Vec::new();
    if let Some(url) = &args.pyroscope {
        targets.push(Target::pyroscope(url)?.with_headers(&args.header)?);
    }
    if let Some(url) = &args.otlp {
        targets.push(Target::otlp(url)?.with_headers(&args.header)?);
    }
    let seconds = |value: f64, what: &str| {
        Duration::try_from_secs_f64(value)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("--{what} {value}: a positive number of seconds"))
    };
    let mut symbolize = SymbolizeOptions::with_debug_dirs(args.debug_dir.clone());
    symbolize.progress = None;
    let state = match &args.state {
        Some(state) => state.clone(),
        None => {
            let first = &args.paths[0];
            let dir = if first.is_dir() {
                first.clone()
            } else {
                first.parent().map(PathBuf::from).unwrap_or_default()
            };
            dir.join(".heapdiff-push")
        }
    };
    let config = Config {
        paths: args.paths.clone(),
        targets,
        state,
        bounds: Bounds {
            count: args.max_queue.max(1),
            bytes: args.max_queue_mib.saturating_mul(1 << 20),
        },
        poll: seconds(args.poll, "poll")?,
        timeout: seconds(args.timeout, "timeout")?,
        max_backoff: seconds(args.max_backoff, "max-backoff")?,
        once: args.once,
        settings: Settings {
            symbolize,
            build: BuildOptions {
                keep_allocator_frames: args.keep_allocator_frames,
                ..BuildOptions::default()
            },
            ..Settings::default()
        },
    };
    let empty = heapdiff_push::run(config)?;
    Ok(if empty {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
