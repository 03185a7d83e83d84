//! Offline symbolization: raw return addresses → locations with their
//! (inlined) functions, files and lines.
//!
//! Owns the [`LocationTable`]: every distinct address of every dump is
//! interned once as a [`LocationId`], keyed by module identity (path and
//! build-id) and file address, so base and new share locations even when
//! ASLR put the module elsewhere. [`LocationTable::symbolize`] then opens
//! each module once (`debug_files` finds the file holding its symbols and
//! checks the build-id) and resolves its addresses in address order.
//! Modules that cannot be symbolized give `module+0xoffset` frames and one
//! warning each; so do modules whose debug info is missing (names then come
//! from the symbol table, without file and line).
//!
//! Each line keeps its full demangled name, its short form
//! ([`crate::names`]) and the name the text formats show
//! ([`LocationTable::assign_display_names`]): short or full, qualified by
//! its module when two modules define the same name.

use crate::names::{self, Language};
use crate::symbolize::debug_files::{SearchPaths, file_offset_of, find_symbol_file};
use addr2line::Loader;
use heapsample_format::{Dump, Module};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub mod debug_files;

/// Index into [`LocationTable::locations`].
pub type LocationId = usize;
/// Index into [`LocationTable::modules`].
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
    /// [`LocationTable::assign_display_names`], `function` until then.
    pub display: String,
    /// The module's name when another module defines a function of the
    /// same name (then `display` ends with ` [module]`).
    pub qualifier: Option<String>,
    /// Source file, if the debug info names one.
    pub file: Option<String>,
    /// Source line, 0 if unknown.
    pub line: u32,
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
        }
    }

    /// A line for a demangled `full` name of `language`.
    fn named(full: String, language: Language, file: Option<String>, line: u32) -> Line {
        let short = names::short_name(&full, language);
        Line {
            display: full.clone(),
            qualifier: None,
            function: full,
            short,
            file,
            line,
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
    /// True when those symbols include DWARF (files, lines, inlining).
    pub has_debug_info: bool,
    /// The file offset that `memory_start` maps, from the module's program
    /// headers, once symbolized.
    pub file_offset: Option<u64>,
}

impl ModuleRecord {
    fn from_module(module: &Module) -> Self {
        let memory_start = module.ranges.iter().map(|r| r.0).min().unwrap_or(0);
        let memory_limit = module.ranges.iter().map(|r| r.1).max().unwrap_or(0);
        ModuleRecord {
            path: module.path.clone(),
            build_id: module.build_id.clone(),
            memory_start,
            memory_limit,
            load_bias: module.load_bias,
            symbols_from: None,
            has_debug_info: false,
            file_offset: None,
        }
    }

    /// The file name without directories, used in `module+0xoffset`.
    pub fn short_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

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

/// Every distinct address of the dumps, interned, then symbolized.
#[derive(Debug, Default)]
pub struct LocationTable {
    pub locations: Vec<Location>,
    pub modules: Vec<ModuleRecord>,
    location_index: HashMap<(Option<ModuleId>, u64), LocationId>,
    module_index: HashMap<(String, Vec<u8>), ModuleId>,
    synthetic_names: HashMap<String, LocationId>,
}

/// Which name of a function the text formats show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NameStyle {
    /// No parameter lists, template arguments collapsed.
    #[default]
    Short,
    /// The whole demangled signature.
    Full,
}

/// Statistics of one `symbolize` call.
#[derive(Debug, Default, Clone, Copy)]
pub struct SymbolizeStats {
    pub addresses: usize,
    pub modules_loaded: usize,
    pub elapsed: Duration,
}

impl LocationTable {
    /// Intern every frame of every stack of `dump`; returns, per stack, its
    /// locations innermost first.
    pub fn intern_dump(&mut self, dump: &Dump) -> Vec<Vec<LocationId>> {
        dump.stacks
            .iter()
            .map(|stack| {
                stack
                    .frames
                    .iter()
                    .map(|&address| self.intern(dump, address, stack.epoch))
                    .collect()
            })
            .collect()
    }

    fn intern(&mut self, dump: &Dump, address: u64, epoch: u32) -> LocationId {
        // The file address uses this dump's load bias: the same library sits
        // elsewhere in another process (ASLR), yet maps to the same location.
        let found = dump.module_for(address, epoch);
        let file_address = found.map_or(address, |m| address.wrapping_sub(m.load_bias));
        let module = found.map(|m| self.intern_module(m));
        let next_id = self.locations.len();
        let id = *self
            .location_index
            .entry((module, file_address))
            .or_insert(next_id);
        if id == next_id {
            self.locations.push(Location {
                module,
                address,
                file_address,
                lines: Vec::new(),
                resolved: false,
            });
        }
        id
    }

    fn intern_module(&mut self, module: &Module) -> ModuleId {
        let key = (module.path.clone(), module.build_id.clone());
        let next_id = self.modules.len();
        let id = *self.module_index.entry(key).or_insert(next_id);
        if id == next_id {
            self.modules.push(ModuleRecord::from_module(module));
        }
        id
    }

    /// Resolve every interned location not resolved yet. Warnings (one per module that cannot
    /// be symbolized) go to `warn`.
    pub fn symbolize(
        &mut self,
        options: &SymbolizeOptions,
        warn: &mut dyn FnMut(String),
    ) -> SymbolizeStats {
        let started = Instant::now();
        let progress = Progress::new(options.progress, self.locations.len());
        let by_module = self.locations_by_module();
        let mut stats = SymbolizeStats {
            addresses: self.locations.len(),
            ..SymbolizeStats::default()
        };
        for (module, ids) in by_module {
            match module {
                Some(module) => {
                    if self.symbolize_module(module, &ids, options, warn, &progress) {
                        stats.modules_loaded += 1;
                    }
                }
                None => {
                    self.name_unresolved(&ids);
                    progress.tick(ids.len());
                }
            }
        }
        progress.finish();
        stats.elapsed = started.elapsed();
        stats
    }

    /// Location ids grouped by module, each group sorted by file address.
    fn locations_by_module(&self) -> Vec<(Option<ModuleId>, Vec<LocationId>)> {
        let mut groups: HashMap<Option<ModuleId>, Vec<LocationId>> = HashMap::new();
        // Locations symbolized by an earlier call keep their lines.
        for (id, location) in self.locations.iter().enumerate() {
            if !location.lines.is_empty() {
                continue;
            }
            groups.entry(location.module).or_default().push(id);
        }
        let mut groups: Vec<_> = groups.into_iter().collect();
        groups.sort_by_key(|(module, _)| *module);
        for (_, ids) in &mut groups {
            ids.sort_by_key(|&id| self.locations[id].file_address);
        }
        groups
    }

    /// Returns true if the module's symbols were loaded.
    fn symbolize_module(
        &mut self,
        module: ModuleId,
        ids: &[LocationId],
        options: &SymbolizeOptions,
        warn: &mut dyn FnMut(String),
        progress: &Progress,
    ) -> bool {
        let search = SearchPaths::from_options(options);
        let found = find_symbol_file(&self.modules[module], &search);
        let loader = found.and_then(|symbols| {
            Loader::new(&symbols.path)
                .map(|loader| (symbols.clone(), loader))
                .map_err(|e| format!("cannot read symbols from {}: {e}", symbols.path.display()))
        });
        match loader {
            Ok((symbols, loader)) => {
                if let Some(looked_for) = &symbols.missing_debug_info {
                    warn(format!(
                        "{}: no debug info found ({looked_for}); names come from the symbol table of {}, without file and line",
                        self.modules[module].path,
                        symbols.path.display()
                    ));
                }
                let record = &mut self.modules[module];
                record.has_debug_info = symbols.missing_debug_info.is_none();
                record.file_offset = symbols.binary.as_deref().and_then(|binary| {
                    file_offset_of(binary, record.memory_start.wrapping_sub(record.load_bias))
                });
                record.symbols_from = Some(symbols.path);
                for &id in ids {
                    let lines = resolve(&loader, self.locations[id].file_address);
                    self.locations[id].resolved = !lines.is_empty();
                    self.locations[id].lines = lines;
                    progress.tick(1);
                }
                self.name_unresolved(ids);
                true
            }
            Err(why) => {
                warn(format!(
                    "{}: {why}; its frames are shown as {}+0xOFFSET",
                    self.modules[module].path,
                    self.modules[module].short_name()
                ));
                self.name_unresolved(ids);
                progress.tick(ids.len());
                false
            }
        }
    }

    /// Give `module+0xoffset` names to locations that resolved to nothing.
    fn name_unresolved(&mut self, ids: &[LocationId]) {
        for &id in ids {
            if self.locations[id].lines.is_empty() {
                let name = self.placeholder_name(id);
                self.locations[id].lines = vec![Line::plain(name)];
            }
        }
    }

    /// A frame that stands for no address (a thread root, a size class):
    /// a resolved location outside every module, named `name`, interned
    /// once per name.
    pub fn synthetic(&mut self, name: &str) -> LocationId {
        if let Some(&id) = self.synthetic_names.get(name) {
            return id;
        }
        let id = self.locations.len();
        self.locations.push(Location {
            module: None,
            address: 0,
            file_address: 0,
            lines: vec![Line::plain(name.to_string())],
            resolved: true,
        });
        self.synthetic_names.insert(name.to_string(), id);
        id
    }

    /// True for frames made by [`LocationTable::synthetic`].
    pub fn is_synthetic(&self, id: LocationId) -> bool {
        self.locations
            .get(id)
            .is_some_and(|l| l.resolved && l.module.is_none() && l.address == 0)
    }

    /// Set the name every line shows in folded stacks, flamegraphs and the
    /// text report: the short or the full name, followed by ` [module]`
    /// when functions of two modules would otherwise share it (so they are
    /// never merged).
    pub fn assign_display_names(&mut self, style: NameStyle) {
        let base = |line: &Line| match style {
            NameStyle::Short => line.short.clone(),
            NameStyle::Full => line.function.clone(),
        };
        let mut modules_of: HashMap<String, Vec<Option<ModuleId>>> = HashMap::new();
        for location in self.locations.iter().filter(|l| l.resolved) {
            for line in &location.lines {
                let modules = modules_of.entry(base(line)).or_default();
                if !modules.contains(&location.module) {
                    modules.push(location.module);
                }
            }
        }
        let module_names: Vec<String> = self
            .modules
            .iter()
            .map(|m| m.short_name().to_string())
            .collect();
        for location in &mut self.locations {
            let qualifier = location
                .module
                .map(|m| module_names[m].as_str())
                .unwrap_or("?");
            for line in &mut location.lines {
                let name = base(line);
                let shared = location.resolved
                    && modules_of
                        .get(&name)
                        .is_some_and(|modules| modules.len() > 1);
                line.qualifier = shared.then(|| qualifier.to_string());
                line.display = if shared {
                    format!("{name} [{qualifier}]")
                } else {
                    name
                };
            }
        }
    }

    /// `libfoo.so+0x1234` for a module, `0x7f001234` without one.
    fn placeholder_name(&self, id: LocationId) -> String {
        let location = &self.locations[id];
        match location.module {
            Some(module) => format!(
                "{}+{:#x}",
                self.modules[module].short_name(),
                location.file_address
            ),
            None => format!("{:#x}", location.address),
        }
    }
}

/// Resolve one return address: look up `address - 1` (inside the call
/// instruction) for its inlined frames, falling back to the symbol table.
fn resolve(loader: &Loader, return_address: u64) -> Vec<Line> {
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

/// Demangle a symbol table name: Rust (legacy and v0, without the hash),
/// then C++ (as `c++filt`), else the name as is.
pub fn demangle_symbol(name: &str) -> String {
    names::demangle(name).0
}

/// A progress bar on stderr that appears only when stderr is a terminal and
/// the work has taken longer than a moment.
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: std::cell::Cell<bool>,
}

const PROGRESS_DELAY: Duration = Duration::from_millis(500);

impl Progress {
    fn new(wanted: bool, total: usize) -> Self {
        let bar = (wanted && std::io::stderr().is_terminal()).then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::hidden());
            if let Ok(style) =
                ProgressStyle::with_template("symbolizing {bar:30} {pos}/{len} addresses ({eta})")
            {
                bar.set_style(style);
            }
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            shown: std::cell::Cell::new(false),
        }
    }

    fn tick(&self, done: usize) {
        if let Some(bar) = &self.bar {
            if !self.shown.get() && self.started.elapsed() > PROGRESS_DELAY {
                bar.set_draw_target(ProgressDrawTarget::stderr());
                self.shown.set(true);
            }
            bar.inc(done as u64);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Lowercase hex of a build-id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
