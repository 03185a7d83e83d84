//! The location table: every distinct address of the dumps interned once,
//! then symbolized.
//!
//! Owns the [`LocationTable`]: every address is interned as a
//! [`LocationId`], keyed by module identity (path and build-id) and file
//! address, so base and new share locations even when ASLR put the module
//! elsewhere. [`LocationTable::symbolize`] opens each module once
//! (`debug_files` finds the file holding its symbols and checks the
//! build-id) and resolves its addresses in address order. Modules that
//! cannot be symbolized give `module+0xoffset` frames and one warning each;
//! so do modules whose debug info is missing (names then come from the
//! symbol table, without file and line). Synthetic frames (a thread root,
//! a size class) are locations outside every module, and so are frames in
//! runtime-generated code, one per name the dump's runtime section gives.

use super::debug_files::{SearchPaths, SymbolFile, file_offset_of, find_symbol_file};
use super::interned::{InternedStacks, StacksBuilder};
use super::location::{Line, Location, LocationId, ModuleId};
use super::module::ModuleRecord;
use super::options::SymbolizeOptions;
use super::progress::Counter;
use super::resolve::resolve;
use super::runtime;
use addr2line::Loader;
use ahash::AHashMap;
use heapsample_format::FrameKind;
use heapsample_format::{Dump, Module};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Every distinct address of the dumps, interned, then symbolized.
#[derive(Debug, Default)]
pub struct LocationTable {
    pub locations: Vec<Location>,
    pub modules: Vec<ModuleRecord>,
    /// (ahash: interning hashes every frame of every stack, and SipHash
    /// was a third of building a large view.)
    location_index: AHashMap<(Option<ModuleId>, u64), LocationId>,
    module_index: HashMap<(String, Vec<u8>), ModuleId>,
    synthetic_names: HashMap<String, LocationId>,
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
    pub fn intern_dump(&mut self, dump: &Dump) -> InternedStacks {
        // Each module a frame falls in is interned once, not once per frame.
        let mut modules: Vec<Option<ModuleId>> = vec![None; dump.modules.len()];
        let mut interned = StacksBuilder::default();
        let mut ids = Vec::new();
        for stack in &dump.stacks {
            ids.clear();
            ids.extend(
                stack
                    .frames
                    .iter()
                    .map(|&address| self.intern(dump, &mut modules, address, stack.epoch)),
            );
            interned.push(&ids);
        }
        interned.finish()
    }

    /// [`LocationTable::intern_dump`], then each stack's frames released
    /// (left empty): the interned stacks hold them from then on, at half
    /// the bytes and in one allocation. For a session's own dumps, which
    /// nothing reads frames from again.
    pub fn intern_and_release_frames(&mut self, dump: &mut Dump) -> InternedStacks {
        let interned = self.intern_dump(dump);
        for stack in &mut dump.stacks {
            stack.frames = Vec::new();
        }
        interned
    }

    fn intern(
        &mut self,
        dump: &Dump,
        modules: &mut [Option<ModuleId>],
        address: u64,
        epoch: u32,
    ) -> LocationId {
        // The file address uses this dump's load bias: the same library sits
        // elsewhere in another process (ASLR), yet maps to the same location.
        let found = dump.modules.iter().position(|m| m.contains(address, epoch));
        if found.is_none() {
            if let Some(symbol) = runtime::symbol_for(dump, address) {
                return self.runtime_location(&symbol.name, symbol.kind);
            }
            if let Some(name) = runtime::unnamed(dump) {
                return self.synthetic(&name);
            }
        }
        let file_address =
            found.map_or(address, |m| address.wrapping_sub(dump.modules[m].load_bias));
        let module =
            found.map(|m| *modules[m].get_or_insert_with(|| self.intern_module(&dump.modules[m])));
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
        let by_module = self.locations_by_module();
        let unresolved = by_module.iter().map(|(_, ids)| ids.len()).sum();
        let mut progress = Counter::new(options.progress.as_ref(), unresolved);
        let mut stats = SymbolizeStats {
            addresses: self.locations.len(),
            ..SymbolizeStats::default()
        };
        for (module, ids) in by_module {
            match module {
                Some(module) => {
                    if self.symbolize_module(module, &ids, options, warn, &mut progress) {
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
        progress: &mut Counter<'_>,
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
                record.names_from = names_from(&symbols, options);
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
                self.modules[module].names_from = format!("no names: {why}");
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

    /// A frame in runtime-generated code that the runtime named `name` in its
    /// dump: one location per name and kind (an address reused for other code
    /// between two dumps is two locations), resolved, with the cleaned name.
    fn runtime_location(&mut self, name: &str, kind: FrameKind) -> LocationId {
        let key = format!("{}\0{name}", runtime::kind_name(kind));
        if let Some(&id) = self.synthetic_names.get(&key) {
            return id;
        }
        let clean = runtime::clean(name, kind);
        let mut line = Line::plain(clean.function);
        line.file = clean.file;
        line.line = clean.line;
        line.kind = kind;
        let id = self.locations.len();
        self.locations.push(Location {
            module: None,
            address: 0,
            file_address: 0,
            lines: vec![line],
            resolved: true,
        });
        self.synthetic_names.insert(key, id);
        id
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

/// Where a module's names came from, in words: a collected copy beside
/// the dumps, a `--debug-dir`, the system's debug directory, or the file
/// at its recorded path; with or without file and line.
fn names_from(symbols: &SymbolFile, options: &SymbolizeOptions) -> String {
    let path = &symbols.path;
    let place = if options
        .collected_dirs
        .iter()
        .any(|dir| path.starts_with(dir.join(".build-id")))
    {
        "a copy collected beside the dumps"
    } else if options.debug_dirs.iter().any(|dir| path.starts_with(dir)) {
        "a --debug-dir"
    } else if options
        .system_debug_root
        .as_ref()
        .is_some_and(|root| path.starts_with(root))
    {
        "the system's debug directory"
    } else {
        "the file at its recorded path"
    };
    let detail = if symbols.missing_debug_info.is_some() {
        "symbol table only, no file and line"
    } else {
        "with file and line"
    };
    format!("{place} ({}), {detail}", path.display())
}
