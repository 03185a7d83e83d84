//! `heapsample`: run a program under the profiler, attach the profiler to a
//! running process, and control a profiled process.
//!
//! - `run` (`run.rs`): start a command with `libheapsample.so` preloaded.
//! - `attach`, `detach` (`attach.rs`): load the profiler into a running
//!   process and take over its malloc family, or give it back.
//! - `dump`, `start`, `stop`, `status` (`control.rs`): work on any process
//!   running the profiler, preloaded or attached.
//! - `collect` (`collect.rs`): copy the modules a dump directory's stacks
//!   need, by build-id, so that they symbolize on another machine.
//! - `container.rs`: where an attached process in a container writes its
//!   dumps, and bringing them to the host's directory.
//!
//! Every operation on another process goes through `inject/`: ptrace, one
//! thread stopped at a point where it holds no allocator or loader lock,
//! and a call of one of the library's exported entry points in it. Nothing
//! is left behind in the target: no thread, no descriptor, no signal.

mod attach;
mod collect;
mod container;
mod control;
// On aarch64 every command that stops a thread refuses (`inject/unsupported.rs`):
// what only that path uses is built but unused there.
#[cfg_attr(
    not(target_arch = "x86_64"),
    allow(dead_code, unreachable_code, unused_variables)
)]
mod inject;
mod library;
mod options;
mod output_dir;
mod run;
mod runtime_names;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A sampling heap profiler for native Linux programs.
#[derive(Parser)]
#[command(name = "heapsample", version, about, long_about = None)]
struct Cli {
    /// The profiler library (default: libheapsample.so beside this command).
    #[arg(long, global = true, env = "HEAPSAMPLE_LIBRARY", value_name = "PATH")]
    library: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command under the profiler: `heapsample run -o DIR -- CMD ARGS...`
    Run(run::RunArgs),
    /// Load the profiler into a running process and start sampling now.
    Attach(attach::AttachArgs),
    /// Stop profiling an attached process and give its calls back.
    Detach(control::PidArgs),
    /// Write a dump of a profiled process now; prints its path.
    Dump(control::PidArgs),
    /// Resume sampling in a profiled process.
    Start(control::PidArgs),
    /// Pause sampling in a profiled process (its dumps keep what was sampled).
    Stop(control::PidArgs),
    /// Show whether and how a process is profiled.
    Status(control::PidArgs),
    /// Copy what the dumps in DIR need to be named anywhere (each module
    /// and its debug file, by build-id, into DIR/.build-id).
    Collect(collect::CollectArgs),
}

/// A failure: one line for the user, and the exit status.
pub struct Failure {
    pub message: String,
    pub status: u8,
}

impl Failure {
    /// A failure with exit status 1.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            status: 1,
        }
    }
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(error: E) -> Failure {
        Failure::new(error.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let library = cli.library.clone();
    let result = match cli.command {
        Command::Run(args) => run::run(library, args),
        Command::Attach(args) => attach::attach(library, args),
        Command::Detach(args) => control::detach(args),
        Command::Dump(args) => control::dump(args),
        Command::Start(args) => control::set_active(args, true),
        Command::Stop(args) => control::set_active(args, false),
        Command::Status(args) => control::status(args),
        Command::Collect(args) => collect::run(args),
    };
    match result {
        Ok(status) => ExitCode::from(status),
        Err(failure) => {
            eprintln!("heapsample: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}
