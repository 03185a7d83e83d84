//! The symbolized form of an address: a [`Location`] with its [`Line`]s
//! (one per function frame, inlined frames first).
//!
//! Owns these plain types and how a line's names are derived from a
//! demangled name ([`super::names`]). No I/O.

use super::names::{self, Language};
use heapsample_format::FrameKind;

/// Index into `LocationTable::locations`.
pub type LocationId = usize;
/// Index into `LocationTable::modules`.
pub type ModuleId = usize;
/// One function frame of a location: innermost inlined frames come first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Full demangled function name (Rust without the hash), or
    /// `module+0xoffset`.
    pub function: String,
    /// The short form of `function` (see [`names::short_name`]).
    pub short: String,
    /// The name folded stacks, flamegraphs and the text report show: set by
    /// `LocationTable::assign_display_names`, `function` until then.
    pub display: String,
    /// The module's name when another module defines a function of the
    /// same name (then `display` ends with ` [module]`).
    pub qualifier: Option<String>,
    /// Source file, if the debug info names one.
    pub file: Option<String>,
    /// Source line, 0 if unknown.
    pub line: u32,
    /// The program's own code rather than a system library, the language
    /// runtime or the standard library: set by
    /// `model::program_frame::NotMine::classify`; until then true for a
    /// named function, false for a placeholder or synthetic frame.
    pub program: bool,
    /// What kind of code the frame is in (native unless a runtime named it).
    pub kind: FrameKind,
}

/// A distinct return address.
#[derive(Clone, Debug)]
pub struct Location {
    /// The module it belongs to, `None` if no module mapped it.
    pub module: Option<ModuleId>,
    /// The return address as first seen at run time.
    pub address: u64,
    /// The return address in the module file's own address space.
    pub file_address: u64,
    /// Functions, innermost (inlined) first; filled by `symbolize`.
    pub lines: Vec<Line>,
    /// False when no symbol was found and `lines` holds a placeholder.
    pub resolved: bool,
}

impl Line {
    /// A line whose names are all `name` (placeholders, synthetic frames).
    pub fn plain(name: String) -> Line {
        Line {
            short: name.clone(),
            display: name.clone(),
            qualifier: None,
            function: name,
            file: None,
            line: 0,
            program: false,
            kind: FrameKind::Native,
        }
    }

    /// A line for a demangled `full` name of `language`.
    pub fn named(full: String, language: Language, file: Option<String>, line: u32) -> Line {
        let short = names::short_name(&full, language);
        Line {
            display: full.clone(),
            qualifier: None,
            function: full,
            short,
            file,
            line,
            program: true,
            kind: FrameKind::Native,
        }
    }

    /// `file:line`, `file`, or `None`.
    pub fn source(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(if self.line > 0 {
            format!("{file}:{}", self.line)
        } else {
            file.to_string()
        })
    }
}
