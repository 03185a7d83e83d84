//! `heapdiff merge A B ... -o OUT`: many dumps (processes or hosts running
//! the same program) summed into one profile.
//!
//! Owns the merge of corrected profiles: every dump is corrected with its
//! own sampling period, then the samples are pooled and the exact counters
//! summed. It renders through the ordinary renderers and writes through
//! `output`; it never changes how a single dump is read or corrected.

use crate::input::{load, merge_warnings};
use crate::model::merge::merged;
use crate::model::{BuildOptions, Metric, Profile};
use crate::output::{self, Destination};
use crate::render::html::{self, Side};
use crate::render::pprof::PprofOptions;
use crate::render::svg::SvgOptions;
use crate::render::{self, View};
use crate::symbols::{LocationId, LocationTable, NameStyle, SymbolizeOptions};
use crate::{Error, Result};
use clap::{Parser, ValueEnum};
use heapsample_format::Dump;
use std::path::PathBuf;

/// Sum dumps of many processes or hosts of the same program into one profile.
#[derive(Parser, Debug)]
#[command(name = "heapdiff merge")]
pub struct MergeArgs {
    /// The dumps to sum.
    #[arg(required = true, num_args = 1..)]
    pub dumps: Vec<PathBuf>,
    /// Output file, `-` for stdout (the default for text).
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = MergeFormat::Pprof)]
    pub format: MergeFormat,
    /// What svg and text measure (pprof and html carry all four).
    #[arg(short, long, value_enum, default_value_t = Metric::InuseSpace)]
    pub metric: Metric,
    /// Also look for modules and debug files here. Repeatable.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
    /// Keep the allocator's own frames at the leaf of each stack.
    #[arg(long)]
    pub keep_allocator_frames: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MergeFormat {
    Pprof,
    Svg,
    Html,
    Text,
}

/// Run `heapdiff merge` with `args` (without the program name).
pub fn run(args: MergeArgs) -> Result<()> {
    let dumps = args
        .dumps
        .iter()
        .map(|path| load(path).map(|input| input.dump))
        .collect::<Result<Vec<_>>>()?;
    warn_on_mixed_programs(&dumps);
    let mut table = LocationTable::default();
    let stacks: Vec<Vec<Vec<LocationId>>> = dumps.iter().map(|d| table.intern_dump(d)).collect();
    let options = SymbolizeOptions::with_debug_dirs(args.debug_dir.clone());
    table.symbolize(&options, &mut |w| eprintln!("heapdiff: warning: {w}"));
    table.assign_display_names(NameStyle::Short);
    let build = BuildOptions {
        keep_allocator_frames: args.keep_allocator_frames,
    };
    let name = format!("{} dumps merged", dumps.len());
    let bytes = match args.format {
        MergeFormat::Html => {
            let side = Side {
                parts: dumps.iter().zip(stacks.iter().map(Vec::as_slice)).collect(),
                name: name.clone(),
            };
            html::page(&html::model(&table, &side, None, build)).into_bytes()
        }
        format => {
            let merged = merged_profile(&dumps, &stacks, &table, build);
            let view = View {
                table: &table,
                new: &merged,
                new_name: &name,
                base: None,
                metric: args.metric,
            };
            render_merged(format, &view, &dumps, &args)?
        }
    };
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

fn render_merged(
    format: MergeFormat,
    view: &View<'_>,
    dumps: &[Dump],
    args: &MergeArgs,
) -> Result<Vec<u8>> {
    let fail = |why: String| Error::new(format!("merge: {why}"));
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
        MergeFormat::Html => unreachable!("html is rendered from the dumps"),
    }
}

fn warn_on_mixed_programs(dumps: &[Dump]) {
    let dumps: Vec<&Dump> = dumps.iter().collect();
    for warning in merge_warnings(&dumps) {
        eprintln!("heapdiff: warning: {warning}");
    }
}

/// Every dump estimated on its own, then pooled.
pub fn merged_profile(
    dumps: &[Dump],
    stacks: &[Vec<Vec<LocationId>>],
    table: &LocationTable,
    build: BuildOptions,
) -> Profile {
    merged(
        dumps
            .iter()
            .zip(stacks)
            .map(|(dump, stacks)| Profile::build(dump, stacks, table, build))
            .collect(),
    )
}
