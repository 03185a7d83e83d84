//! Finding the file that holds a module's symbols, and checking it is the
//! file that was loaded.
//!
//! Order (first match wins, every candidate's build-id must equal the dump's
//! when the dump has one):
//! 1. the module itself: its collected copy `DIR/.build-id/xx/yyyy` in
//!    each dump's directory, then `--debug-dir DIR/<basename>` for each
//!    DIR, then its recorded path; if it carries DWARF it is used directly;
//! 2. a separate debug file by build-id: `DIR/.build-id/xx/yyyy.debug` in
//!    each dump's directory, each `--debug-dir` and the system root
//!    `/usr/lib/debug`;
//! 3. a separate debug file by `.gnu_debuglink`: next to the module, in its
//!    `.debug/` subdirectory, in each `--debug-dir`, and under the system
//!    root followed by the module's directory;
//! 4. the module without DWARF (symbol table names only).

use super::module::{ModuleRecord, hex};
use super::options::SymbolizeOptions;
use crate::input::file::open_regular_file;
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};

/// Where to look for modules and debug files.
#[derive(Clone, Debug, Default)]
pub struct SearchPaths {
    pub collected: Vec<PathBuf>,
    pub debug_dirs: Vec<PathBuf>,
    pub system_root: Option<PathBuf>,
}

impl SearchPaths {
    pub fn from_options(options: &SymbolizeOptions) -> Self {
        SearchPaths {
            collected: options.collected_dirs.clone(),
            debug_dirs: options.debug_dirs.clone(),
            system_root: options.system_debug_root.clone(),
        }
    }

    fn debug_roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.debug_dirs.iter().chain(self.system_root.iter())
    }

    /// The roots searched by build-id for debug files: the collected
    /// copies first.
    fn build_id_roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.collected.iter().chain(self.debug_roots())
    }
}

/// What the symbol search needs to know about one object file.
#[derive(Debug)]
struct ObjectInfo {
    build_id: Option<Vec<u8>>,
    debuglink: Option<String>,
    has_dwarf: bool,
}

/// The file symbols are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolFile {
    pub path: PathBuf,
    /// The module's own file, when found (its program headers give file
    /// offsets).
    pub binary: Option<PathBuf>,
    /// Set when the file has no DWARF and no separate debug file was found:
    /// what was looked for, for the warning.
    pub missing_debug_info: Option<String>,
}

/// The file to load symbols from, or why there is none.
pub fn find_symbol_file(module: &ModuleRecord, search: &SearchPaths) -> Result<SymbolFile, String> {
    let mut mismatch = None;
    let binary = find_module_file(module, search, &mut mismatch);
    if let Some((path, info)) = &binary
        && info.has_dwarf
    {
        return Ok(SymbolFile {
            path: path.clone(),
            binary: Some(path.clone()),
            missing_debug_info: None,
        });
    }
    let debuglink = binary.as_ref().and_then(|(_, info)| info.debuglink.clone());
    let debuglink = debuglink.as_deref();
    if let Some(path) = find_debug_file(module, search, debuglink, &mut mismatch) {
        return Ok(SymbolFile {
            path,
            binary: binary.map(|(path, _)| path),
            missing_debug_info: None,
        });
    }
    match (binary, mismatch) {
        (Some((path, _)), _) => Ok(SymbolFile {
            missing_debug_info: Some(looked_for(module, &path, search, debuglink)),
            binary: Some(path.clone()),
            path,
        }),
        (None, Some(why)) => Err(why),
        (None, None) => Err(not_found_reason(module, search)),
    }
}

/// Where debug info was looked for: DWARF in the module, its build-id
/// under each debug root, its debuglink name in gdb's places.
fn looked_for(
    module: &ModuleRecord,
    binary: &Path,
    search: &SearchPaths,
    debuglink: Option<&str>,
) -> String {
    let mut places = vec![format!("no DWARF in {}", binary.display())];
    let by_id = build_id_candidates(&module.build_id, search);
    if by_id.is_empty() {
        places.push("no build-id to look up".to_string());
    } else {
        let list: Vec<String> = by_id.iter().map(|p| p.display().to_string()).collect();
        places.push(format!(
            "build-id {}: {}",
            hex(&module.build_id),
            list.join(", ")
        ));
    }
    match debuglink {
        Some(name) => {
            let list: Vec<String> = debuglink_candidates(Path::new(&module.path), name, search)
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            places.push(format!("debuglink {name}: {}", list.join(", ")));
        }
        None => places.push("no .gnu_debuglink".to_string()),
    }
    places.join("; ")
}

fn not_found_reason(module: &ModuleRecord, search: &SearchPaths) -> String {
    let mut reason = "not found".to_string();
    if !module.build_id.is_empty() {
        let roots: Vec<String> = search
            .build_id_roots()
            .map(|root| format!("{}/.build-id", root.display()))
            .collect();
        if !roots.is_empty() {
            reason.push_str(&format!(
                " (no debug file for build-id {} under {} either)",
                hex(&module.build_id),
                roots.join(", ")
            ));
        }
    }
    reason
}

/// The loaded object itself: by basename in each `--debug-dir`, then its path.
fn find_module_file(
    module: &ModuleRecord,
    search: &SearchPaths,
    mismatch: &mut Option<String>,
) -> Option<(PathBuf, ObjectInfo)> {
    let recorded = PathBuf::from(&module.path);
    let basename = recorded.file_name().map(PathBuf::from);
    let collected = heapsample_format::build_id_path(&module.build_id, "");
    let candidates = search
        .collected
        .iter()
        .filter_map(|dir| collected.as_ref().map(|name| dir.join(name)))
        .chain(
            search
                .debug_dirs
                .iter()
                .filter_map(|dir| basename.as_ref().map(|name| dir.join(name))),
        )
        .chain(std::iter::once(recorded.clone()));
    for candidate in candidates {
        if let Some(info) = verified_object(&candidate, &module.build_id, mismatch) {
            return Some((candidate, info));
        }
    }
    None
}

/// A separate debug file, by build-id first, then by debuglink name.
fn find_debug_file(
    module: &ModuleRecord,
    search: &SearchPaths,
    debuglink: Option<&str>,
    mismatch: &mut Option<String>,
) -> Option<PathBuf> {
    let mut candidates = build_id_candidates(&module.build_id, search);
    if let Some(name) = debuglink {
        candidates.extend(debuglink_candidates(Path::new(&module.path), name, search));
    }
    candidates.into_iter().find(|candidate| {
        verified_object(candidate, &module.build_id, mismatch).is_some_and(|info| info.has_dwarf)
    })
}

/// `ROOT/.build-id/xx/yyyy….debug` for the collected copies' directories
/// and each debug root.
fn build_id_candidates(build_id: &[u8], search: &SearchPaths) -> Vec<PathBuf> {
    let Some(relative) = heapsample_format::build_id_path(build_id, ".debug") else {
        return Vec::new();
    };
    search
        .build_id_roots()
        .map(|root| root.join(&relative))
        .collect()
}

/// The places gdb looks for a `.gnu_debuglink` name.
fn debuglink_candidates(module_path: &Path, name: &str, search: &SearchPaths) -> Vec<PathBuf> {
    let directory = module_path.parent().unwrap_or(Path::new("/"));
    let mut candidates = vec![directory.join(name), directory.join(".debug").join(name)];
    candidates.extend(search.debug_dirs.iter().map(|dir| dir.join(name)));
    if let Some(root) = &search.system_root {
        let relative = directory.strip_prefix("/").unwrap_or(directory);
        candidates.push(root.join(relative).join(name));
    }
    candidates
}

/// Parse `path` and check its build-id against `expected` (when known).
/// A mismatch is remembered in `mismatch` for the warning.
fn verified_object(
    path: &Path,
    expected: &[u8],
    mismatch: &mut Option<String>,
) -> Option<ObjectInfo> {
    let info = read_object_info(path).ok()?;
    if expected.is_empty() || info.build_id.as_deref() == Some(expected) {
        return Some(info);
    }
    if mismatch.is_none() {
        let found = info
            .build_id
            .as_deref()
            .map_or_else(|| "none".to_string(), hex);
        *mismatch = Some(format!(
            "build-id mismatch: the dump recorded {}, {} has {}",
            hex(expected),
            path.display(),
            found
        ));
    }
    None
}

/// The file offset of the ELF virtual address `address` in `path`: the
/// `PT_LOAD` segment holding it maps file bytes at `p_offset` to `p_vaddr`.
pub fn file_offset_of(path: &Path, address: u64) -> Option<u64> {
    use object::ObjectSegment;
    let file = open_regular_file(path).ok()?;
    // SAFETY: read-only map dropped before return, see `read_object_info`.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let object = object::File::parse(&*map).ok()?;
    object.segments().find_map(|segment| {
        let (offset, size) = segment.file_range();
        let start = segment.address();
        (address >= start && address - start < size.max(segment.size()))
            .then(|| offset.wrapping_add(address - start))
    })
}

fn read_object_info(path: &Path) -> Result<ObjectInfo, String> {
    let file = open_regular_file(path)?;
    // SAFETY: the map is read-only and dropped before this function returns;
    // a file truncated underneath us is the usual mmap caveat that every
    // symbolizer (addr2line's own Loader included) accepts.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| e.to_string())?;
    let object = object::File::parse(&*map).map_err(|e| e.to_string())?;
    let build_id = object.build_id().ok().flatten().map(<[u8]>::to_vec);
    let debuglink = object
        .gnu_debuglink()
        .ok()
        .flatten()
        .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
    let has_dwarf = object
        .section_by_name(".debug_info")
        .is_some_and(|section| section.size() > 0);
    Ok(ObjectInfo {
        build_id,
        debuglink,
        has_dwarf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_path_layout() {
        let search = SearchPaths {
            collected: vec![PathBuf::from("/dumps")],
            debug_dirs: vec![PathBuf::from("/d")],
            system_root: Some(PathBuf::from("/usr/lib/debug")),
        };
        let candidates = build_id_candidates(&[0xab, 0xcd, 0xef, 0x01], &search);
        assert_eq!(
            candidates,
            vec![
                PathBuf::from("/dumps/.build-id/ab/cdef01.debug"),
                PathBuf::from("/d/.build-id/ab/cdef01.debug"),
                PathBuf::from("/usr/lib/debug/.build-id/ab/cdef01.debug"),
            ]
        );
        assert!(build_id_candidates(&[], &search).is_empty());
    }

    #[test]
    fn debuglink_path_layout() {
        let search = SearchPaths {
            collected: vec![],
            debug_dirs: vec![PathBuf::from("/d")],
            system_root: Some(PathBuf::from("/usr/lib/debug")),
        };
        let candidates =
            debuglink_candidates(Path::new("/opt/app/bin/prog"), "prog.debug", &search);
        assert_eq!(
            candidates,
            vec![
                PathBuf::from("/opt/app/bin/prog.debug"),
                PathBuf::from("/opt/app/bin/.debug/prog.debug"),
                PathBuf::from("/d/prog.debug"),
                PathBuf::from("/usr/lib/debug/opt/app/bin/prog.debug"),
            ]
        );
    }
}
