//! The `heapdiff` command line: parses the arguments (clap, every
//! subcommand listed in `--help`), runs the library's pipeline for the
//! default command and `merge`, starts the server for `serve` and the
//! pusher for `push`, and turns
//! every failure into one line on stderr and exit status 2.
//!
//! `heapdiff DUMP` and `heapdiff --base A B` need no subcommand name: the
//! default command's options live at the top level, beside the
//! subcommands.

mod merge;
mod modules;
mod output;
mod progress_bar;
mod push;
mod serve;
mod show;
mod time;
mod view_args;

use clap::{Parser, Subcommand};
use heapdiff::pipeline::Notice;
use std::process::ExitCode;

/// Symbolize heapsample dumps offline and render flamegraphs, differential
/// flamegraphs, folded stacks, text reports, JSON, pprof profiles or the
/// interactive viewer; merge dumps; browse them in a browser.
#[derive(Parser, Debug)]
#[command(
    name = "heapdiff",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    show: show::ShowArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Browse dumps in a browser: list, timelines, flamegraphs, diffs, pprof.
    Serve(serve::ServeArgs),
    /// Sum dumps of many processes or hosts of the same program into one
    /// profile.
    Merge(merge::MergeArgs),
    /// How long freed memory lived per function and stack, and the
    /// temporary allocations (dumps with lifetimes, format 4).
    Lifetimes(time::LifetimesArgs),
    /// The age of live memory per function: live bytes by birth, and
    /// whether it is a leak, start-up state or a cache (format 4).
    Ages(time::AgesArgs),
    /// Rank leak candidates of one or several dumps of a process, with
    /// their growth rate; a CI gate with --fail-if-grows RATE.
    Leaks(time::LeaksArgs),
    /// Send each new dump once to Pyroscope and/or an OpenTelemetry
    /// Collector (OTLP profiles), following the directories as serve does.
    ///
    /// Each dump is built as `heapdiff --format pprof` builds it (sample
    /// types as Go's heap profiles) and sent once, whatever its file name:
    /// to Pyroscope's ingest API (`POST /ingest?name=EXE{host=…,pid=…,
    /// container=…}&format=pprof`) and as an OTLP profiles export (`POST
    /// /v1development/profiles`, protobuf). Requests wait in a queue on disk
    /// (the state directory) until a receiver takes them: a restart of the
    /// pusher or of a receiver loses nothing, a dump deleted after it was
    /// seen is still sent, a failing or silent receiver is retried with
    /// backoff, a refusal (4xx) is reported and not retried. Runs until
    /// SIGTERM or SIGINT (or, with --once, one round).
    Push(push::PushArgs),
    /// Where each module's names came from (a copy collected beside the
    /// dumps, a debug directory, its recorded path), or why there are none.
    Modules(modules::ModulesArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Serve(args)) => {
            heapdiff_serve::run(args.config()).map(|()| ExitCode::SUCCESS)
        }
        Some(Command::Merge(args)) => merge::run(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Lifetimes(args)) => time::run_lifetimes(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Ages(args)) => time::run_ages(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Leaks(args)) => time::run_leaks(args),
        Some(Command::Push(args)) => push::run(args).map_err(heapdiff::Error::new),
        Some(Command::Modules(args)) => modules::run(args).map(|()| ExitCode::SUCCESS),
        None => show::run(&cli.show),
    };
    match result {
        Ok(status) => status,
        Err(error) => {
            eprintln!("heapdiff: {error}");
            ExitCode::from(2)
        }
    }
}

/// A notice of the pipeline on stderr: `heapdiff: note: …` or
/// `heapdiff: warning: …`.
fn print_notice(notice: Notice) {
    eprintln!("heapdiff: {notice}");
}
