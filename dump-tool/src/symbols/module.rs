//! The modules (executables and shared objects) symbols come from.
//!
//! Owns [`ModuleRecord`]: a module's identity (path, build-id), where it
//! was mapped, and where its symbols were found once symbolized. No I/O.

use heapsample_format::Module;
use std::path::PathBuf;

/// A loaded object, identified by path and build-id.
#[derive(Clone, Debug)]
pub struct ModuleRecord {
    pub path: String,
    pub build_id: Vec<u8>,
    /// Lowest runtime start of its executable ranges (first dump seen).
    pub memory_start: u64,
    /// Highest runtime end of its executable ranges.
    pub memory_limit: u64,
    pub load_bias: u64,
    /// The file symbols came from, once symbolized.
    pub symbols_from: Option<PathBuf>,
    /// Where its names came from, or why there are none, in words (empty
    /// until symbolized).
    pub names_from: String,
    /// True when those symbols include DWARF (files, lines, inlining).
    pub has_debug_info: bool,
    /// The file offset that `memory_start` maps, from the module's program
    /// headers, once symbolized.
    pub file_offset: Option<u64>,
}

impl ModuleRecord {
    pub fn from_module(module: &Module) -> Self {
        let memory_start = module.ranges.iter().map(|r| r.0).min().unwrap_or(0);
        let memory_limit = module.ranges.iter().map(|r| r.1).max().unwrap_or(0);
        ModuleRecord {
            path: module.path.clone(),
            build_id: module.build_id.clone(),
            memory_start,
            memory_limit,
            load_bias: module.load_bias,
            symbols_from: None,
            names_from: String::new(),
            has_debug_info: false,
            file_offset: None,
        }
    }

    /// The file name without directories, used in `module+0xoffset`.
    pub fn short_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// Lowercase hex of a build-id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
