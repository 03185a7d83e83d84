//! The default command, `heapdiff [--base BASE] DUMP`: one dump or a
//! comparison of two through the pipeline, rendered in one format, written
//! to a file or stdout, with a short summary and the CI gate's verdict.

use crate::output::{self, Destination};
use crate::print_notice;
use crate::view_args::{MetricArg, ViewArgs};
use clap::{Args, ValueEnum};
use heapdiff::compare::gate::{Threshold, judge};
use heapdiff::model::Metric;
use heapdiff::model::folding::{diff, folded};
use heapdiff::pipeline::{Loaded, Session, View};
use heapdiff::render::folded::DiffColumns;
use heapdiff::render::pprof::PprofOptions;
use heapdiff::render::svg::SvgOptions;
use heapdiff::render::{self, html};
use heapdiff::symbols::LocationTable;
use heapdiff::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The default command: one dump, or a comparison of two, in one format.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The dump to show (the "new" side of a comparison): a heapsample
    /// dump, or a jemalloc (`jeprof.*.heap`) or gperftools heap profile.
    #[arg(required = true)]
    pub dump: Option<PathBuf>,
    /// Compare against this earlier dump: show what grew and what shrank.
    #[arg(long, value_name = "DUMP")]
    base: Option<PathBuf>,
    /// What to measure.
    #[arg(short, long, value_enum, default_value_t = MetricArg(Metric::InuseSpace))]
    metric: MetricArg,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Svg)]
    format: Format,
    /// Output file, `-` for stdout. Default: svg, pprof and html next to the
    /// dump (`.svg`, `.diff.svg`, `.pb.gz`, `.diff.pb.gz`, `.html`,
    /// `.diff.html`), text and folded to stdout. A regular file is replaced
    /// atomically; a device, FIFO or descriptor (/dev/null, /dev/fd/N) is
    /// written into; a symbolic link is written through and kept.
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// Flamegraph title.
    #[arg(long)]
    title: Option<String>,
    /// Draw an icicle graph (roots at the top).
    #[arg(long)]
    inverted: bool,
    /// Omit flamegraph frames narrower than this many pixels.
    #[arg(long, value_name = "PIXELS")]
    min_width: Option<f64>,
    /// Rows per table in the text report.
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// Differential flamegraph sized by the base instead of the new dump, so
    /// stacks that vanished stay visible (red still means growth).
    #[arg(long)]
    negate: bool,
    /// Folded diff as `stack DELTA` (signed, as `jeprof --collapsed --base`)
    /// instead of the default `stack BASE NEW` that flame graph tools draw.
    #[arg(long)]
    delta: bool,
    /// Accepted for compatibility: `stack BASE NEW` is the default.
    #[arg(long, hide = true)]
    two_column: bool,
    /// Compare dumps of different programs anyway.
    #[arg(long)]
    allow_mismatch: bool,
    /// No summary on the terminal after writing a flamegraph or profile.
    #[arg(short, long)]
    quiet: bool,
    /// With --base: exit with status 1 when the live heap grew
    /// significantly and the 95 % interval's lower end exceeds SIZE (bytes,
    /// or with a unit: 512KiB, 5MB, 1GiB) or PCT of the base's live heap
    /// (10%). Exit status 0 otherwise; 2 stays "bad input".
    #[arg(long, value_name = "SIZE|PCT", requires = "base")]
    fail_if_grows: Option<Threshold>,
    #[command(flatten)]
    view: ViewArgs,
}

impl ShowArgs {
    /// The dump: clap requires it when no subcommand is given, the only
    /// case in which `run` is called.
    fn dump(&self) -> &Path {
        self.dump.as_deref().unwrap_or(Path::new(""))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Svg,
    Folded,
    Text,
    Pprof,
    /// The interactive viewer as one self-contained HTML file.
    Html,
    /// The machine-readable report (all metrics, 95 % intervals).
    Json,
}

/// Show the dump (or the comparison) `cli` names; the exit status is 1
/// only when `--fail-if-grows` fails.
pub fn run(cli: &ShowArgs) -> Result<ExitCode> {
    let dump = cli.dump().to_path_buf();
    let new = Loaded::read(dump.display().to_string(), &[dump])?;
    let base = cli
        .base
        .as_ref()
        .map(|base| Loaded::read(base.display().to_string(), std::slice::from_ref(base)))
        .transpose()?;
    let session = Session::open(
        LocationTable::default(),
        new,
        base,
        &cli.view.settings(cli.metric.0, cli.allow_mismatch),
        &mut print_notice,
    )?;
    let view = session.view();
    let destination = destination(cli);
    if matches!(cli.format, Format::Json) {
        // Streamed into the file: the report is never held whole.
        output::write_with(&destination, &|out| render::json::write(&view, out))?;
    } else {
        output::write(&destination, &render_output(cli, &view)?)?;
    }
    report_written(cli, &view, &destination);
    Ok(judge_growth(cli, &view))
}

/// `--fail-if-grows`: the verdict on stderr, exit status 1 when it fails.
fn judge_growth(cli: &ShowArgs, view: &View<'_>) -> ExitCode {
    let (Some(threshold), Some(base)) = (cli.fail_if_grows, view.base) else {
        return ExitCode::SUCCESS;
    };
    let verdict = judge(
        &base.profile,
        &view.new.profile,
        view.table,
        threshold,
        cli.top,
    );
    eprint!("heapdiff: {}", render::gate::message(&verdict));
    if verdict.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn render_output(cli: &ShowArgs, view: &View<'_>) -> Result<Vec<u8>> {
    let fail = |why: String| Error::file(cli.dump(), why);
    match cli.format {
        Format::Svg => {
            note_vanished_stacks(cli, view);
            render::svg::render(view, &svg_options(cli)).map_err(fail)
        }
        Format::Folded => {
            note_folded_view(cli, view);
            Ok(render::folded::render(view, diff_columns(cli)).into_bytes())
        }
        Format::Text => Ok(render::text::render(view, cli.top).into_bytes()),
        Format::Pprof => render::pprof::render(view, &pprof_options(cli, view)).map_err(fail),
        Format::Html => Ok(html_page(cli, view).into_bytes()),
        Format::Json => Ok(render::json::render(view).into_bytes()),
    }
}

fn html_page(cli: &ShowArgs, view: &View<'_>) -> String {
    let mut model = html::model(view);
    if let Some(title) = &cli.title {
        model.title = title.clone();
    }
    html::page(&model)
}

fn svg_options(cli: &ShowArgs) -> SvgOptions {
    SvgOptions {
        title: cli.title.clone(),
        inverted: cli.inverted,
        min_width: cli.min_width,
        negate: cli.negate,
    }
}

fn diff_columns(cli: &ShowArgs) -> DiffColumns {
    if cli.delta {
        DiffColumns::Delta
    } else {
        DiffColumns::BaseAndNew
    }
}

fn pprof_options(cli: &ShowArgs, view: &View<'_>) -> PprofOptions {
    let new_dump = view.new.first_dump();
    let mut comments = vec![format!("heapdiff of {}", cli.dump().display())];
    if let Some(base) = &cli.base {
        comments.push(format!("minus base {} (negated samples)", base.display()));
    }
    comments.push(format!("command line: {}", new_dump.command_line.join(" ")));
    comments.extend(new_dump.attach_note());
    PprofOptions {
        executable: new_dump.executable.clone(),
        time_unix_ns: new_dump.time_unix_ns,
        comments,
    }
}

/// Stacks of the base that are gone from the new dump have width 0 in the
/// default differential flamegraph: say so, and how to see them.
/// Folded stacks have no comment syntax (inferno and flamegraph.pl count
/// a line they cannot parse as invalid, and one ending in a number as a
/// stack), so the view's settings go to stderr instead.
fn note_folded_view(cli: &ShowArgs, view: &View<'_>) {
    if !cli.quiet {
        eprintln!("heapdiff: note: {}", view.spec.summary());
    }
}

fn note_vanished_stacks(cli: &ShowArgs, view: &View<'_>) {
    if cli.negate {
        return;
    }
    let Some(base) = view.base else { return };
    let base_stacks = folded(&base.profile, view.table, view.metric);
    let new_stacks = folded(&view.new.profile, view.table, view.metric);
    let vanished: Vec<f64> = diff(&base_stacks, &new_stacks)
        .values()
        .filter(|c| render::round(c.base) > 0 && render::round(c.new) <= 0)
        .map(|c| c.base)
        .collect();
    if !vanished.is_empty() {
        eprintln!(
            "heapdiff: note: {} stacks ({} {}) of the base are gone and have no width here; --negate sizes the graph by the base to show them",
            vanished.len(),
            render::round(vanished.iter().sum()),
            view.metric.unit()
        );
    }
}

fn destination(cli: &ShowArgs) -> Destination {
    match &cli.output {
        Some(path) => Destination::from_arg(path),
        None => match default_extension(cli) {
            Some(extension) => Destination::File(path_with_suffix(cli.dump(), extension)),
            None => Destination::Stdout,
        },
    }
}

/// Svg, pprof and html go next to the dump by default; text and folded to
/// stdout.
fn default_extension(cli: &ShowArgs) -> Option<&'static str> {
    let diff = cli.base.is_some();
    match (cli.format, diff) {
        (Format::Svg, false) => Some(".svg"),
        (Format::Svg, true) => Some(".diff.svg"),
        (Format::Pprof, false) => Some(".pb.gz"),
        (Format::Pprof, true) => Some(".diff.pb.gz"),
        (Format::Html, false) => Some(".html"),
        (Format::Html, true) => Some(".diff.html"),
        (Format::Folded | Format::Text | Format::Json, _) => None,
    }
}

fn path_with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// After writing a file: its path on stderr, and for svg and pprof a short
/// summary on stdout (on stderr when stdout carries the output).
fn report_written(cli: &ShowArgs, view: &View<'_>, destination: &Destination) {
    if let Destination::File(path) = destination {
        eprintln!("heapdiff: wrote {}", path.display());
    }
    if cli.quiet || !matches!(cli.format, Format::Svg | Format::Pprof | Format::Html) {
        return;
    }
    let summary = render::text::summary(view, 10);
    match destination {
        Destination::Stdout => eprint!("{summary}"),
        Destination::File(_) => print!("{summary}"),
    }
}
