//! The time reports: `heapdiff lifetimes DUMP`, `heapdiff ages DUMP` and
//! `heapdiff leaks DUMP...` (text or JSON, to stdout or `-o`), the last one
//! a CI gate with `--fail-if-grows RATE`.
//!
//! Owns the commands' arguments; the dumps go through the pipeline
//! (`pipeline::time`) and the time renderers.

use crate::output::{self, Destination};
use crate::print_notice;
use crate::view_args::ViewArgs;
use clap::{Args, ValueEnum};
use heapdiff::Result;
use heapdiff::compare::ages::failing;
use heapdiff::compare::gate::Threshold;
use heapdiff::input::load;
use heapdiff::model::Metric;
use heapdiff::pipeline::time::{
    DEFAULT_AGE_SLICES, exit_left_out, leaks, lifetimes, live_ages, live_ages_by_stack,
    open_series, peak, process_summary, require_loaded, series_peak, series_times,
};
use heapdiff::pipeline::{Loaded, Session};
use heapdiff::render::{time_json, time_text};
use heapdiff::symbols::LocationTable;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimeFormat {
    Text,
    Json,
}

/// Where and how a time report goes.
#[derive(Args, Debug)]
pub struct TimeOutput {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = TimeFormat::Text)]
    format: TimeFormat,
    /// Output file, `-` (the default) for stdout.
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// Functions shown in the text report.
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
}

impl TimeOutput {
    fn write(&self, text: String) -> Result<()> {
        let destination = self
            .output
            .as_ref()
            .map_or(Destination::Stdout, |p| Destination::from_arg(p));
        output::write(&destination, text.as_bytes())?;
        if let Destination::File(path) = &destination {
            eprintln!("heapdiff: wrote {}", path.display());
        }
        Ok(())
    }
}

/// How long freed memory lived, per allocating function and stack: objects
/// and bytes per lifetime bucket, and the temporary allocations.
#[derive(Args, Debug)]
pub struct LifetimesArgs {
    /// The dump (several are summed).
    #[arg(required = true, num_args = 1..)]
    dumps: Vec<PathBuf>,
    #[command(flatten)]
    out: TimeOutput,
    #[command(flatten)]
    view: ViewArgs,
}

/// The age of live memory per allocating function: live bytes by birth,
/// and whether it is accumulating (a leak candidate), start-up state or
/// recent only (a cache or working set), with the evidence.
#[derive(Args, Debug)]
pub struct AgesArgs {
    /// The dump (several are summed).
    #[arg(required = true, num_args = 1..)]
    dumps: Vec<PathBuf>,
    /// Birth slices of the run.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_AGE_SLICES,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    slices: u16,
    #[command(flatten)]
    out: TimeOutput,
    #[command(flatten)]
    view: ViewArgs,
}

/// Rank leak candidates: functions whose live memory accumulates (from the
/// births in the last dump) or grows across the dumps of one process, with
/// their growth rate and its interval.
#[derive(Args, Debug)]
pub struct LeaksArgs {
    /// Dumps of one process (any order: they are ordered by time).
    #[arg(required = true, num_args = 1..)]
    dumps: Vec<PathBuf>,
    /// Exit with status 1 when a function grows faster than RATE bytes per
    /// second (`0`, `4KiB`, `1MB`): the lower end of its rate's 95 %
    /// interval above RATE, and it is accumulating (one dump) or its growth
    /// across the dumps significant.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    fail_if_grows: Option<f64>,
    #[command(flatten)]
    out: TimeOutput,
    #[command(flatten)]
    view: ViewArgs,
}

fn parse_rate(text: &str) -> std::result::Result<f64, String> {
    let text = text.trim();
    let bytes = text.strip_suffix("/s").unwrap_or(text);
    match bytes.parse::<Threshold>()? {
        Threshold::Bytes(b) => Ok(b),
        Threshold::Percent(_) => Err(format!("{text:?}: a rate is bytes per second (4KiB, 1MB)")),
    }
}

/// The dumps through the pipeline, refused first (one line) when they lack
/// the births or lifetimes the report (`what`) needs.
fn open(dumps: &[PathBuf], view: &ViewArgs, needs: (bool, bool), what: &str) -> Result<Session> {
    let name = dumps
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    let loaded = Loaded::read(name, dumps)?;
    require_loaded(&loaded, needs.0, needs.1, what)?;
    Session::open(
        LocationTable::default(),
        loaded,
        None,
        &view.settings(Metric::InuseSpace, false),
        &mut print_notice,
    )
}

/// `heapdiff lifetimes`.
pub fn run_lifetimes(args: &LifetimesArgs) -> Result<()> {
    let session = open(
        &args.dumps,
        &args.view,
        (false, true),
        "the lifetime report",
    )?;
    let view = session.view();
    let report = lifetimes(&view);
    let name = &view.new.name;
    args.out.write(match args.out.format {
        TimeFormat::Text => time_text::lifetimes(name, &report, args.out.top),
        TimeFormat::Json => time_json::lifetimes(name, &report),
    })
}

/// `heapdiff ages`.
pub fn run_ages(args: &AgesArgs) -> Result<()> {
    let session = open(&args.dumps, &args.view, (true, false), "the age report")?;
    let view = session.view();
    let ages = live_ages(&view, usize::from(args.slices));
    let name = &view.new.name;
    let peak = peak(&[&view.new.profile]).map(|p| (p, name.as_str()));
    args.out.write(match args.out.format {
        TimeFormat::Text => time_text::ages(name, &ages, peak, args.out.top),
        TimeFormat::Json => {
            let stacks = live_ages_by_stack(&view, usize::from(args.slices));
            time_json::ages(name, &ages, &stacks, peak)
        }
    })
}

/// `heapdiff leaks`: exit status 1 when `--fail-if-grows` fails.
pub fn run_leaks(args: &LeaksArgs) -> Result<ExitCode> {
    let inputs = args
        .dumps
        .iter()
        .map(|path| load(path))
        .collect::<Result<Vec<_>>>()?;
    let settings = args.view.settings(Metric::InuseSpace, false);
    let series = open_series(
        LocationTable::default(),
        inputs,
        &settings,
        &mut print_notice,
    )?;
    if let [side] = series.sides()
        && !side.profile.time.births
    {
        return Err(heapdiff::Error::new(format!(
            "{}: one dump without births cannot show a leak: give several dumps of the process, or a format-4 dump with births",
            side.name
        )));
    }
    let rows = leaks(&series);
    let failing = args
        .fail_if_grows
        .map(|rate| failing(&rows, rate))
        .unwrap_or_default();
    let names: Vec<String> = series.sides().iter().map(|s| s.name.clone()).collect();
    let (origin, dumps_at_ns) = series_times(&series);
    let peak = series_peak(&series).map(|p| (p, names[p.nearest].as_str()));
    let exit = exit_left_out(&series);
    // The process summary of a series (one dump tells no story of it).
    let summary = (names.len() > 1).then(|| process_summary(&series, &rows));
    let mut lines = exit.map_or_else(String::new, |e| time_text::exit_line(&e, &names));
    if let Some(summary) = &summary {
        lines.push_str(&time_text::summary_lines(summary, &names));
    }
    args.out.write(match args.out.format {
        TimeFormat::Text => time_text::leaks(
            origin.scope,
            names.len(),
            &rows,
            &failing,
            peak,
            Some(lines),
            args.out.top,
        ),
        TimeFormat::Json => time_json::leaks(
            (origin, &dumps_at_ns),
            &names,
            &rows,
            &failing,
            peak,
            exit.as_ref(),
            summary.as_ref(),
        ),
    })?;
    let Some(rate) = args.fail_if_grows else {
        return Ok(ExitCode::SUCCESS);
    };
    if failing.is_empty() {
        eprintln!("heapdiff: no function grows faster than {rate} bytes/s (95 % confidence)");
        Ok(ExitCode::SUCCESS)
    } else {
        let names: Vec<&str> = failing.iter().map(|r| r.name.as_str()).collect();
        eprintln!(
            "heapdiff: FAIL: {} grow faster than {rate} bytes/s: {}",
            failing.len(),
            names.join(", ")
        );
        Ok(ExitCode::from(1))
    }
}
