//! One address → its function frames, through `addr2line`: the DWARF
//! frames (inlined ones first) with files and lines, else the symbol table.
//!
//! Owns the choice of names between DWARF and the symbol table. Reads only
//! through the [`Loader`] it is given.

use super::location::Line;
use super::names::{self, Language};
use addr2line::Loader;

/// Resolve one return address: look up `address - 1` (inside the call
/// instruction) for its inlined frames, falling back to the symbol table.
pub fn resolve(loader: &Loader, return_address: u64) -> Vec<Line> {
    let probe = return_address.saturating_sub(1);
    let mut lines = dwarf_frames(loader, probe);
    let symbol = || loader.find_symbol(probe).map(names::demangle);
    if lines.is_empty() {
        if let Some((name, language)) = symbol() {
            lines.push(Line::named(name, language, None, 0));
        }
    } else if lines.iter().any(|l| l.function.is_empty()) {
        let (name, language) = symbol().unwrap_or_else(|| ("??".to_string(), Language::Other));
        for line in lines.iter_mut().filter(|l| l.function.is_empty()) {
            *line = Line::named(name.clone(), language, line.file.take(), line.line);
        }
    } else if let Some(outermost) = lines.last_mut()
        && let Some((name, Language::Cxx)) = symbol()
    {
        qualify_from_symbol(outermost, name);
    }
    lines
}

/// DWARF may name a function by its bare `DW_AT_name` (`operator()`,
/// `make_sessions`) where the symbol table has the qualified name
/// (`main::{lambda(int)#1}::operator()`, `(anonymous namespace)::make_sessions`):
/// take the symbol's name for the outermost (not inlined) frame when it is
/// that function.
fn qualify_from_symbol(outermost: &mut Line, symbol: String) {
    let bare = &outermost.function;
    if bare.is_empty() || bare.contains("::") {
        return;
    }
    let short = names::short_name(&symbol, Language::Cxx);
    if short.ends_with(&format!("::{bare}")) {
        let (file, line) = (outermost.file.take(), outermost.line);
        *outermost = Line::named(symbol, Language::Cxx, file, line);
    }
}

/// The DWARF frames at `probe`, innermost first; empty function names where
/// the debug info has none.
fn dwarf_frames(loader: &Loader, probe: u64) -> Vec<Line> {
    let mut lines = Vec::new();
    let Ok(mut frames) = loader.find_frames(probe) else {
        return lines;
    };
    while let Ok(Some(frame)) = frames.next() {
        let (function, language) = frame
            .function
            .as_ref()
            .and_then(|f| Some((f.raw_name().ok()?, f.language)))
            .map(|(raw, language)| dwarf_name(&raw, language))
            .unwrap_or_else(|| (String::new(), Language::Other));
        let (file, line) = match &frame.location {
            Some(location) => (location.file.map(str::to_string), location.line),
            None => (None, None),
        };
        lines.push(Line::named(function, language, file, line.unwrap_or(0)));
    }
    lines
}

/// A DWARF function name (a linkage name, or the plain `DW_AT_name`) in the
/// language of its compilation unit.
fn dwarf_name(raw: &str, language: Option<addr2line::gimli::DwLang>) -> (String, Language) {
    let (name, demangled_as) = names::demangle(raw);
    if demangled_as != Language::Other {
        return (name, demangled_as);
    }
    let cxx = language.is_some_and(|l| {
        let name = l.static_string().unwrap_or_default();
        name.starts_with("DW_LANG_C_plus_plus")
    });
    (name, if cxx { Language::Cxx } else { Language::Other })
}
