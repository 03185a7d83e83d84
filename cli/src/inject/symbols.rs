//! Symbols of the objects a target process has loaded, read from their
//! files (through the process's own view of the file system) with
//! `object`, and placed at the addresses the process loaded them at.

use object::{Object, ObjectSegment, ObjectSymbol};

use super::proc::{Mapping, Process};
use crate::Failure;

/// An object the target has loaded: its file's contents and load bias.
pub struct LoadedObject {
    /// The path the process mapped it from.
    pub path: String,
    /// What its file addresses must be moved by.
    pub bias: u64,
    data: memmap2::Mmap,
}

/// Map the file `path` (read-only) if it is the file with inode `inode`.
fn map_file(path: &std::path::Path, inode: u64) -> Result<Option<memmap2::Mmap>, std::io::Error> {
    let file = std::fs::File::open(path)?;
    if std::os::unix::fs::MetadataExt::ino(&file.metadata()?) != inode {
        return Ok(None);
    }
    // SAFETY: a read-only private mapping of a library or program file,
    // which nothing is expected to truncate while it is read.
    Ok(Some(unsafe { memmap2::Mmap::map(&file)? }))
}

/// The file of `mapping`, mapped: the first of the places it can be opened
/// from here whose inode is the mapped one. Err: why none could be read;
/// Ok(None): the file there is another one (replaced on disk since).
fn map_mapped_file(
    process: Process,
    mapping: &Mapping,
) -> Result<Option<memmap2::Mmap>, std::io::Error> {
    let mut first_error = None;
    let mut replaced = false;
    for candidate in process.mapped_file_candidates(mapping) {
        match map_file(&candidate, mapping.inode) {
            Ok(Some(data)) => return Ok(Some(data)),
            Ok(None) => replaced = true,
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    match (replaced, first_error) {
        (true, _) | (false, None) => Ok(None),
        (false, Some(error)) => Err(error),
    }
}

/// Does the file of `mapping` (as `process` sees it) define `name` in its
/// dynamic symbols?
pub fn file_defines(process: Process, mapping: &Mapping, name: &str) -> bool {
    let Ok(Some(data)) = map_mapped_file(process, mapping) else {
        return false;
    };
    object::File::parse(&*data).is_ok_and(|file| {
        file.dynamic_symbols()
            .any(|s| s.is_definition() && s.name() == Ok(name))
    })
}

impl LoadedObject {
    /// The object of `mapping` (its offset-0 mapping in `maps`). The file
    /// is opened where the process's mapping can be reached from here
    /// ([`Process::mapped_file_candidates`]) and must be the one mapped
    /// (same inode): a library replaced on disk since is refused.
    pub fn open(
        process: Process,
        maps: &[Mapping],
        mapping: &Mapping,
    ) -> Result<LoadedObject, Failure> {
        let data = map_mapped_file(process, mapping)
            .map_err(|e| {
                Failure::new(format!(
                    "cannot read {} of process {}: {e}",
                    mapping.path, process.0
                ))
            })?
            .ok_or_else(|| {
                Failure::new(format!(
                    "{} of process {} was replaced on disk since the process loaded it",
                    mapping.path, process.0
                ))
            })?;
        let parsed = object::File::parse(&*data)
            .map_err(|e| Failure::new(format!("{} is not an ELF file: {e}", mapping.path)))?;
        let first_load = parsed.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        let base = maps
            .iter()
            .filter(|m| m.inode == mapping.inode && m.path == mapping.path)
            .map(|m| m.start)
            .min()
            .unwrap_or(mapping.start);
        Ok(LoadedObject {
            path: mapping.path.clone(),
            bias: base.wrapping_sub(first_load),
            data,
        })
    }

    fn parsed(&self) -> object::File<'_> {
        object::File::parse(&*self.data).expect("parsed when opened")
    }

    /// The address of the function or object `name` that this object
    /// defines in its dynamic symbol table.
    pub fn dynamic_symbol(&self, name: &str) -> Option<u64> {
        self.parsed()
            .dynamic_symbols()
            .find(|s| s.is_definition() && s.name() == Ok(name))
            .map(|s| self.bias.wrapping_add(s.address()))
    }

    /// The first of `names` this object defines, in its dynamic or (when
    /// not stripped) its full symbol table.
    pub fn defines_any(&self, names: &[&str]) -> Option<String> {
        let parsed = self.parsed();
        parsed
            .dynamic_symbols()
            .chain(parsed.symbols())
            .filter(|s| s.is_definition())
            .filter_map(|s| s.name().ok())
            .find(|name| names.contains(name))
            .map(str::to_string)
    }

    /// The address of the first occurrence of `bytes` in the object's
    /// executable segments.
    pub fn find_code(&self, bytes: &[u8]) -> Option<u64> {
        let parsed = self.parsed();
        for segment in parsed.segments() {
            let Ok(data) = segment.data() else { continue };
            if let Some(at) = data.windows(bytes.len()).position(|w| w == bytes) {
                let address = segment.address() + at as u64;
                if self.is_executable(address) {
                    return Some(self.bias.wrapping_add(address));
                }
            }
        }
        None
    }

    fn is_executable(&self, address: u64) -> bool {
        match self.parsed() {
            object::File::Elf64(elf) => {
                use object::read::elf::ProgramHeader;
                let endian = elf.endian();
                elf.elf_program_headers().iter().any(|h| {
                    h.p_type(endian) == object::elf::PT_LOAD
                        && h.p_flags(endian).contains(object::elf::PF_X)
                        && (h.p_vaddr(endian)..h.p_vaddr(endian) + h.p_memsz(endian))
                            .contains(&address)
                })
            }
            _ => false,
        }
    }

    /// True if the file names an interpreter (a dynamically linked program).
    pub fn has_interpreter(&self) -> bool {
        match self.parsed() {
            object::File::Elf64(elf) => {
                use object::read::elf::ProgramHeader;
                let endian = elf.endian();
                elf.elf_program_headers()
                    .iter()
                    .any(|h| h.p_type(endian) == object::elf::PT_INTERP)
            }
            _ => false,
        }
    }
}
