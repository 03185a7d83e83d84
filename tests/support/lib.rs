//! Support library for heapsample's end-to-end tests.
//!
//! The tests run real processes under `LD_PRELOAD=libheapsample.so` and check
//! what they print and the dumps they leave. This crate holds everything they
//! share, one module per job, all re-exported here (`use heapsample_tests::*`):
//!
//! - [`locate`]: where things are: [`workspace_root`], [`target_dir`],
//!   [`shim_path`], [`heapdiff_path`], [`programs_dir`], [`jemalloc_path`];
//! - [`programs`]: building the test programs of `tests/programs/`:
//!   [`compile_c`], [`compile_cxx`], [`compile_rust`] (cached by a hash of
//!   source and flags), [`build_shared_library`];
//! - [`run`]: running a command with or without the shim, in a fresh
//!   directory, with a timeout: [`Run`] and its result [`Outcome`] (stdout,
//!   stderr, exit status, pid, and the dump files left behind, decoded);
//!   [`assert_same_behaviour`];
//! - [`temp_dir`]: fresh directories, [`TempDir`];
//! - [`dump_files`]: dump file names and contents: [`DumpFile`];
//! - [`symbols`]: [`Symbols`] maps return addresses to the program's
//!   functions with `nm`;
//! - [`aggregate`]: dump counts per function: [`per_function`];
//! - [`reports`]: the programs' own reports: [`SiteReport`],
//!   [`parse_sites`], and their comparison with a dump;
//! - [`profiler_lines`]: the profiler's own stderr lines
//!   ([`heapsample_lines`], the leak summary);
//! - [`tools`]: `heapdiff` and `go tool pprof` on the profiler's output;
//! - [`binomial`]: the binomial law's lower tail, for coverage counts over
//!   runs: [`binomial_below`], [`least_count`];
//! - [`prerequisite`]: what a test needs from the machine, and the one way
//!   to skip when it is missing ([`skip`]), counted by the test command.
//!
//! Everything here panics with a message that says what went wrong: these are
//! test helpers, and a panic is a test failure with an explanation.
//!
//! Environment knobs: `CARGO_TARGET_DIR` (where the shim was built),
//! `HEAPSAMPLE_SHIM` (another build of the shim, e.g. the debug one),
//! `HEAPSAMPLE_TEST_KEEP=1` (keep the temporary directories for inspection),
//! `HEAPSAMPLE_REQUIRE_PREREQUISITES=1` and `HEAPSAMPLE_SKIP_LOG` (see
//! [`prerequisite`]).

pub use heapsample_format as format;

pub mod aggregate;
pub mod binomial;
pub mod dump_files;
pub mod locate;
pub mod prerequisite;
pub mod profiler_lines;
pub mod programs;
pub mod reports;
pub mod run;
pub mod symbols;
pub mod temp_dir;
pub mod tools;

pub use aggregate::*;
pub use binomial::*;
pub use dump_files::*;
pub use locate::*;
pub use prerequisite::{Missing, skip};
pub use profiler_lines::*;
pub use programs::*;
pub use reports::*;
pub use run::*;
pub use symbols::*;
pub use temp_dir::*;
pub use tools::*;
