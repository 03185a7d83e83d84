//! `heapdiff merge A B ... -o OUT`: many dumps (processes or hosts running
//! the same program) summed into one profile.
//!
//! Owns the command's arguments and outputs; the dumps go through the one
//! pipeline as one side of several dumps (each corrected with its own
//! sampling period, then pooled: `model::merge`), render through the
//! ordinary renderers and are written through `output`.

use crate::output::{self, Destination};
use crate::print_notice;
use crate::view_args::{MetricArg, ViewArgs};
use clap::{Args, ValueEnum};
use heapdiff::model::Metric;
use heapdiff::pipeline::{Loaded, Session, View};
use heapdiff::render::pprof::PprofOptions;
use heapdiff::render::svg::SvgOptions;
use heapdiff::render::{self, html};
use heapdiff::symbols::LocationTable;
use heapdiff::{Error, Result};
use std::path::PathBuf;

/// Sum dumps of many processes or hosts of the same program into one
/// profile (pprof, svg, html or text).
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The dumps to sum.
    #[arg(required = true, num_args = 1..)]
    pub dumps: Vec<PathBuf>,
    /// Output file, `-` for stdout (the default for text); written as the
    /// default command's `-o` is.
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = MergeFormat::Pprof)]
    pub format: MergeFormat,
    /// What svg and text measure (pprof and html carry all four).
    #[arg(short, long, value_enum, default_value_t = MetricArg(Metric::InuseSpace))]
    pub metric: MetricArg,
    #[command(flatten)]
    pub view: ViewArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MergeFormat {
    Pprof,
    Svg,
    Html,
    Text,
}

/// Run `heapdiff merge`.
pub fn run(args: &MergeArgs) -> Result<()> {
    let name = format!("{} dumps merged", args.dumps.len());
    let loaded = Loaded::read(name.clone(), &args.dumps)?;
    let settings = args.view.settings(args.metric.0, false);
    let session = Session::open(
        LocationTable::default(),
        loaded,
        None,
        &settings,
        &mut print_notice,
    )?;
    let bytes = render_merged(args.format, &session.view(), args)?;
    let destination = match &args.output {
        Some(path) => Destination::from_arg(path),
        None if args.format == MergeFormat::Text => Destination::Stdout,
        None => return Err(Error::new("merge: name the output file with -o PATH")),
    };
    output::write(&destination, &bytes)?;
    if let Destination::File(path) = &destination {
        eprintln!("heapdiff: wrote {} ({name})", path.display());
    }
    Ok(())
}

fn render_merged(format: MergeFormat, view: &View<'_>, args: &MergeArgs) -> Result<Vec<u8>> {
    let fail = |why: String| Error::new(format!("merge: {why}"));
    let dumps: Vec<_> = view.new.inputs().iter().map(|input| &input.dump).collect();
    match format {
        MergeFormat::Pprof => {
            let mut comments = vec![format!("heapdiff merge of {} dumps", dumps.len())];
            comments.extend(args.dumps.iter().map(|p| p.display().to_string()));
            let options = PprofOptions {
                executable: dumps[0].executable.clone(),
                time_unix_ns: dumps.iter().map(|d| d.time_unix_ns).max().unwrap_or(0),
                comments,
            };
            render::pprof::render(view, &options).map_err(fail)
        }
        MergeFormat::Svg => render::svg::render(view, &SvgOptions::default()).map_err(fail),
        MergeFormat::Text => Ok(render::text::render(view, 20).into_bytes()),
        MergeFormat::Html => Ok(html::page(&html::model(view)).into_bytes()),
    }
}
