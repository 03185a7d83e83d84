//! The options that shape a view, shared by the default command and
//! `merge`: they become the pipeline's [`Settings`].

use clap::Args;
use clap::builder::PossibleValue;
use heapdiff::model::{BirthRange, BuildOptions, Metric, NotMine, TimePoint, Transforms};
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
    /// A temporary allocation (`-m temp-space`, `-m temp-objects`, the
    /// lifetime reports) is one freed within DURATION (`1ms`, `250us`,
    /// `2s`), rounded up to a lifetime bucket's edge (powers of two of
    /// microseconds: 1ms counts lifetimes under 1.024 ms).
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_duration)]
    pub temporary: u64,
    /// In-use values count only memory born at or after T: a duration since
    /// the profiler's start (`30s`, `1m 30s`) or a wall-clock time
    /// (`2026-11-26T00:12:00Z`, `@1764115920` in seconds since the epoch).
    /// Needs dumps with births (format 4).
    #[arg(long, value_name = "T", value_parser = parse_time_point)]
    pub born_after: Option<TimePoint>,
    /// In-use values count only memory born before T (as --born-after).
    #[arg(long, value_name = "T", value_parser = parse_time_point)]
    pub born_before: Option<TimePoint>,
    /// Also treat as not the program's own code, when naming each ranked
    /// function's program frame: a module (an entry with `/` or `.so`: a
    /// path's start, `/opt/vendor/`, or a file name's start,
    /// `libvendor.so`) or a function name prefix (`absl::`, `g_`).
    /// Repeatable; added to the built-in system libraries and runtimes.
    #[arg(long, value_name = "PREFIX|MODULE")]
    pub not_mine: Vec<String>,
    /// Every named frame is the program's own (no runtime or system
    /// library is skipped when naming program frames).
    #[arg(long)]
    pub all_mine: bool,
    /// Group by program frame: the runtime's and system libraries' frames
    /// at the leaf are dropped, so every table ranks the program's
    /// functions that called into them (bottom-up by program frame).
    #[arg(long, value_name = "GROUPING", value_parser = ["program-frame"])]
    pub group: Option<String>,
}

impl ViewArgs {
    /// The pipeline's settings for a view measuring `metric`.
    pub fn settings(&self, metric: Metric, allow_mismatch: bool) -> Settings {
        Settings {
            symbolize: SymbolizeOptions {
                progress: crate::progress_bar::on_terminal(),
                ..SymbolizeOptions::with_debug_dirs(self.debug_dir.clone())
            },
            names: if self.full_names {
                NameStyle::Full
            } else {
                NameStyle::Short
            },
            build: BuildOptions {
                keep_allocator_frames: self.keep_allocator_frames,
                temporary_ns: self.temporary,
                born: BirthRange {
                    after: self.born_after,
                    before: self.born_before,
                },
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
                program_frames: self.group.is_some(),
            },
            metric,
            allow_mismatch,
            not_mine: NotMine {
                extra: self.not_mine.clone(),
                all_mine: self.all_mine,
            },
        }
    }
}

/// A duration in nanoseconds (`1ms`, `250us`, `2s`, `1m 30s`).
pub fn parse_duration(text: &str) -> Result<u64, String> {
    humantime::parse_duration(text.trim())
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .map_err(|e| format!("{text:?} is not a duration such as 1ms, 30s or 1m 30s: {e}"))
}

/// A moment: a duration since the profiler's start, `@SECONDS` since the
/// epoch, or an RFC 3339 wall-clock time.
fn parse_time_point(text: &str) -> Result<TimePoint, String> {
    let text = text.trim();
    if let Some(seconds) = text.strip_prefix('@') {
        let seconds: f64 = seconds
            .parse()
            .map_err(|_| format!("{text:?}: @ takes seconds since the Unix epoch"))?;
        return Ok(TimePoint::Unix((seconds * 1e9) as u64));
    }
    if let Ok(ns) = parse_duration(text) {
        return Ok(TimePoint::SinceStart(ns));
    }
    let time = humantime::parse_rfc3339_weak(text).map_err(|_| {
        format!(
            "{text:?} is neither a duration since the start (30s, 1m 30s) nor a time (2026-11-26T00:12:00Z, @1764115920)"
        )
    })?;
    let since_epoch = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("{text:?} is before 1970"))?;
    Ok(TimePoint::Unix(
        u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX),
    ))
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
        const ALL: [MetricArg; 6] = [
            MetricArg(Metric::EVERY[0]),
            MetricArg(Metric::EVERY[1]),
            MetricArg(Metric::EVERY[2]),
            MetricArg(Metric::EVERY[3]),
            MetricArg(Metric::EVERY[4]),
            MetricArg(Metric::EVERY[5]),
        ];
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.description()))
    }
}
