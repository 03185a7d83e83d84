//! The options that shape a view, shared by the default command and
//! `merge`: they become the pipeline's [`Settings`].

use clap::Args;
use clap::builder::PossibleValue;
use heapdiff::model::{BuildOptions, Metric, Transforms};
use heapdiff::pipeline::Settings;
use heapdiff::symbols::{NameStyle, SymbolizeOptions};
use regex::Regex;
use std::path::PathBuf;

/// How to symbolize, build and transform the dumps.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "View")]
pub struct ViewArgs {
    /// Also look for modules and debug files here (by basename, by
    /// `.build-id/xx/yyyy.debug`, by `.gnu_debuglink` name). Repeatable.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
    /// Keep the allocator's own frames (malloc, operator new, __rust_alloc…)
    /// at the leaf of each stack.
    #[arg(long)]
    pub keep_allocator_frames: bool,
    /// Show whole signatures (return type, parameters, template arguments)
    /// instead of short names such as `std::vector<…>::push_back`.
    #[arg(long)]
    pub full_names: bool,
    /// Keep only stacks with a frame whose name matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub focus: Option<Regex>,
    /// Drop stacks with a frame whose name matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub ignore: Option<Regex>,
    /// Remove frames whose name matches REGEX, keeping the rest of the stack.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub hide: Option<Regex>,
    /// Treat leaf frames matching REGEX as allocator frames (wrappers such
    /// as `PyObject_Malloc|xmalloc|g_malloc`), in addition to the built-in list.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub allocator_frames: Option<Regex>,
    /// A root frame per thread name (`[thread NAME]`, `[thread tid N]` for
    /// an unnamed thread).
    #[arg(long)]
    pub by_thread: bool,
    /// A leaf frame per size class of the stack's mean object size
    /// (`[4–8 KiB]`).
    #[arg(long)]
    pub size_frames: bool,
}

impl ViewArgs {
    /// The pipeline's settings for a view measuring `metric`.
    pub fn settings(&self, metric: Metric, allow_mismatch: bool) -> Settings {
        Settings {
            symbolize: SymbolizeOptions::with_debug_dirs(self.debug_dir.clone()),
            names: if self.full_names {
                NameStyle::Full
            } else {
                NameStyle::Short
            },
            build: BuildOptions {
                keep_allocator_frames: self.keep_allocator_frames,
            },
            transforms: Transforms {
                focus: self.focus.clone(),
                ignore: self.ignore.clone(),
                hide: self.hide.clone(),
                allocator_frames: self
                    .allocator_frames
                    .clone()
                    .filter(|_| !self.keep_allocator_frames),
                by_thread: self.by_thread,
                size_frames: self.size_frames,
            },
            metric,
            allow_mismatch,
        }
    }
}

fn parse_regex(text: &str) -> Result<Regex, String> {
    Regex::new(text).map_err(|e| format!("not a valid regular expression: {e}"))
}

/// A [`Metric`] as a command-line value (`inuse-space`, …), spelled and
/// described by the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricArg(pub Metric);

impl clap::ValueEnum for MetricArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [MetricArg; 4] = [
            MetricArg(Metric::ALL[0]),
            MetricArg(Metric::ALL[1]),
            MetricArg(Metric::ALL[2]),
            MetricArg(Metric::ALL[3]),
        ];
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.description()))
    }
}
