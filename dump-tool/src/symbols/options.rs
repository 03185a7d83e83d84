//! How to symbolize: where to look for symbol files and whether to show
//! progress.

use std::path::PathBuf;

/// Where the symbols come from and how verbose to be.
#[derive(Clone, Debug, Default)]
pub struct SymbolizeOptions {
    /// Extra directories given with `--debug-dir`, searched first.
    pub debug_dirs: Vec<PathBuf>,
    /// The system debug root, normally `/usr/lib/debug`.
    pub system_debug_root: Option<PathBuf>,
    /// Show a progress bar on stderr when it is a terminal and slow.
    pub progress: bool,
}

impl SymbolizeOptions {
    /// The defaults of the command line: `/usr/lib/debug` plus `debug_dirs`.
    pub fn with_debug_dirs(debug_dirs: Vec<PathBuf>) -> Self {
        SymbolizeOptions {
            debug_dirs,
            system_debug_root: Some(PathBuf::from("/usr/lib/debug")),
            progress: true,
        }
    }
}
