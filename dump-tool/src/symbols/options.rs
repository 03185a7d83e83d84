//! How to symbolize: where to look for symbol files and where to report
//! progress.

use super::progress::ProgressCallback;
use std::path::PathBuf;

/// Where the symbols come from and how verbose to be.
#[derive(Clone, Debug, Default)]
pub struct SymbolizeOptions {
    /// Directories holding copies of modules and debug files collected by
    /// build-id (`DIR/.build-id/xx/yyyy` and `….debug`, as `heapsample
    /// collect` and `heapsample dump` leave them beside dumps), searched
    /// first of all: the dumps' own directories.
    pub collected_dirs: Vec<PathBuf>,
    /// Extra directories given with `--debug-dir`, searched next.
    pub debug_dirs: Vec<PathBuf>,
    /// The system debug root, normally `/usr/lib/debug`.
    pub system_debug_root: Option<PathBuf>,
    /// Where to report progress (None: nowhere).
    pub progress: Option<ProgressCallback>,
}

impl SymbolizeOptions {
    /// The defaults of the command line: `/usr/lib/debug` plus `debug_dirs`.
    pub fn with_debug_dirs(debug_dirs: Vec<PathBuf>) -> Self {
        SymbolizeOptions {
            collected_dirs: Vec::new(),
            debug_dirs,
            system_debug_root: Some(PathBuf::from("/usr/lib/debug")),
            progress: None,
        }
    }
}

impl SymbolizeOptions {
    /// These options with the directories of `dumps` searched first for
    /// collected copies (each directory once, in order).
    pub fn with_dump_directories<'a>(
        &self,
        dumps: impl IntoIterator<Item = &'a std::path::Path>,
    ) -> SymbolizeOptions {
        let mut options = self.clone();
        for dump in dumps {
            let dir = match dump.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if !options.collected_dirs.contains(&dir) {
                options.collected_dirs.push(dir);
            }
        }
        options
    }
}
