//! `heapdiff merge A B ... -o OUT`: many dumps (processes or hosts running
//! the same program) summed into one profile.
//!
//! Owns the merge of corrected profiles: every dump is corrected with its
//! own sampling period, then the samples are pooled and the exact counters
//! summed. It renders through the ordinary renderers and writes through
//! `output`; it never changes how a single dump is read or corrected.

use crate::load::load_dump;
use crate::output::{self, Destination};
use crate::profile::{BuildOptions, Metric, Profile, Values};
use crate::render::html::{self, Side};
use crate::render::pprof::PprofOptions;
use crate::render::svg::SvgOptions;
use crate::render::{self, View};
use crate::symbolize::{LocationId, LocationTable, NameStyle, SymbolizeOptions};
use crate::{Error, Result};
use clap::{Parser, ValueEnum};
use heapsample_format::{Dump, ThreadInfo, Totals};
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
        .map(|path| load_dump(path))
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
    let first = &dumps[0].executable;
    if let Some(other) = dumps.iter().find(|d| &d.executable != first) {
        eprintln!(
            "heapdiff: warning: merging dumps of different programs ({first} and {}): functions of the same name add up",
            other.executable
        );
    }
    if dumps
        .iter()
        .any(|d| d.lg_sample_period != dumps[0].lg_sample_period)
    {
        eprintln!(
            "heapdiff: warning: sampling periods differ between the dumps; each is corrected with its own"
        );
    }
}

/// Every dump estimated on its own, the samples pooled, estimates,
/// variances (independent processes) and counters summed.
pub fn merged_profile(
    dumps: &[Dump],
    stacks: &[Vec<Vec<LocationId>>],
    table: &LocationTable,
    build: BuildOptions,
) -> Profile {
    let profiles: Vec<Profile> = dumps
        .iter()
        .zip(stacks)
        .map(|(dump, stacks)| Profile::build(dump, stacks, table, build))
        .collect();
    let mut sums = [Values::default(); 3];
    for profile in &profiles {
        let parts = [&profile.estimated, &profile.variance, &profile.sampled];
        for (sum, part) in sums.iter_mut().zip(parts) {
            sum.inuse_objects += part.inuse_objects;
            sum.inuse_space += part.inuse_space;
            sum.alloc_objects += part.alloc_objects;
            sum.alloc_space += part.alloc_space;
        }
    }
    let [estimated, variance, sampled] = sums;
    // Thread serials are per process: shift each dump's past the previous.
    let mut threads = Vec::new();
    let mut offset = 0;
    let mut profiles = profiles;
    for profile in &mut profiles {
        for sample in &mut profile.samples {
            sample.thread += offset;
        }
        threads.extend(profile.threads.iter().map(|t| ThreadInfo {
            serial: t.serial + offset,
            ..t.clone()
        }));
        offset += profile.threads.iter().map(|t| t.serial).max().unwrap_or(0) + 1;
    }
    Profile {
        threads,
        period: profiles.first().map_or(1, |p| p.period),
        totals: sum_totals(dumps.iter().map(|d| &d.totals)),
        origin: profiles
            .first()
            .map(|p| p.origin.clone())
            .unwrap_or_default(),
        samples: profiles.into_iter().flat_map(|p| p.samples).collect(),
        estimated,
        variance,
        sampled,
    }
}

/// Exact counters of several processes added up; a counter recorded by
/// some dumps only is the sum of those that recorded it.
pub fn sum_totals<'a>(all: impl IntoIterator<Item = &'a Totals>) -> Totals {
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    let mut sum = Totals::default();
    for t in all {
        sum.allocations += t.allocations;
        sum.frees = add(sum.frees, t.frees);
        sum.bytes_allocated += t.bytes_allocated;
        sum.live_usable_bytes = add(sum.live_usable_bytes, t.live_usable_bytes);
        sum.samples_taken += t.samples_taken;
        sum.samples_dropped += t.samples_dropped;
        sum.samples_live += t.samples_live;
        sum.threads_seen += t.threads_seen;
        sum.profiler_bytes += t.profiler_bytes;
        sum.resets += t.resets;
    }
    sum
}
