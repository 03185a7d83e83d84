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
//! warning each.

use crate::symbolize::debug_files::{SearchPaths, find_symbol_file};
use addr2line::Loader;
use heapsample_format::{Dump, Module};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::borrow::Cow;
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
    /// Demangled function name (Rust without the hash), or `module+0xoffset`.
    pub function: String,
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
        let loader = found.and_then(|path| {
            Loader::new(&path)
                .map(|loader| (path.clone(), loader))
                .map_err(|e| format!("cannot read symbols from {}: {e}", path.display()))
        });
        match loader {
            Ok((path, loader)) => {
                self.modules[module].symbols_from = Some(path);
                for &id in ids {
                    self.locations[id].lines = resolve(&loader, self.locations[id].file_address);
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
                self.locations[id].lines = vec![Line {
                    function: name,
                    file: None,
                    line: 0,
                }];
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
    let symbol = || loader.find_symbol(probe).map(demangle_symbol);
    if lines.is_empty() {
        if let Some(name) = symbol() {
            lines.push(Line {
                function: name,
                file: None,
                line: 0,
            });
        }
    } else if lines.iter().any(|l| l.function.is_empty()) {
        let fallback = symbol().unwrap_or_else(|| "??".to_string());
        for line in lines.iter_mut().filter(|l| l.function.is_empty()) {
            line.function = fallback.clone();
        }
    }
    lines
}

/// The DWARF frames at `probe`, innermost first; empty function names where
/// the debug info has none.
fn dwarf_frames(loader: &Loader, probe: u64) -> Vec<Line> {
    let mut lines = Vec::new();
    let Ok(mut frames) = loader.find_frames(probe) else {
        return lines;
    };
    while let Ok(Some(frame)) = frames.next() {
        let function = frame
            .function
            .as_ref()
            .and_then(|f| f.demangle().ok())
            .map(Cow::into_owned)
            .unwrap_or_default();
        let (file, line) = match &frame.location {
            Some(location) => (location.file.map(str::to_string), location.line),
            None => (None, None),
        };
        lines.push(Line {
            function,
            file,
            line: line.unwrap_or(0),
        });
    }
    lines
}

/// Demangle a symbol table name: Rust (legacy and v0, without the hash),
/// then C++, else the name as is.
pub fn demangle_symbol(name: &str) -> String {
    addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned()
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
