//! The `MAPPED_LIBRARIES:` section (the process's `/proc/self/maps`) as
//! modules: executable mappings become modules, their load bias and
//! build-id read from the file when it still exists.
//!
//! Owns reading those ELF files (read-only, through
//! [`crate::input::file::open_regular_file`]); never panics on bad input.

use crate::input::file::open_regular_file;
use heapsample_format::Module;
use std::collections::BTreeMap;
use std::path::Path;

/// One mapping of `/proc/self/maps`.
#[derive(Debug)]
struct Mapping {
    start: u64,
    end: u64,
    executable: bool,
    offset: u64,
    path: String,
}

pub fn parse_maps(text: &str) -> Result<Vec<Module>, String> {
    let mut by_path: BTreeMap<String, Vec<Mapping>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some(mapping) = parse_mapping(line) else {
            continue;
        };
        if !mapping.path.starts_with('/') {
            continue;
        }
        if !by_path.contains_key(&mapping.path) {
            order.push(mapping.path.clone());
        }
        by_path
            .entry(mapping.path.clone())
            .or_default()
            .push(mapping);
    }
    Ok(order
        .into_iter()
        .filter_map(|path| module_of(&path, &by_path[&path]))
        .collect())
}

/// `start-end perms offset dev inode path`.
fn parse_mapping(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let permissions = fields.next()?;
    let offset = fields.next()?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.collect::<Vec<_>>().join(" ");
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: permissions.contains('x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        path,
    })
}

/// A module from the mappings of one file: its executable ranges, its load
/// bias from the program headers (or, without the file, the start of its
/// offset-0 mapping), its build-id when the file is there.
fn module_of(path: &str, mappings: &[Mapping]) -> Option<Module> {
    let executable: Vec<&Mapping> = mappings.iter().filter(|m| m.executable).collect();
    let first = executable.first()?;
    let elf = ElfFacts::read(Path::new(path));
    let load_bias = elf
        .as_ref()
        .and_then(|facts| facts.address_of_offset(first.offset))
        .map(|address| first.start.wrapping_sub(address))
        .or_else(|| mappings.iter().find(|m| m.offset == 0).map(|m| m.start))
        .unwrap_or(first.start.wrapping_sub(first.offset));
    Some(Module {
        path: path.to_string(),
        build_id: elf.map(|facts| facts.build_id).unwrap_or_default(),
        load_bias,
        ranges: executable.iter().map(|m| (m.start, m.end)).collect(),
        first_epoch: 0,
        last_epoch: None,
    })
}

/// What the loader needs from the mapped file.
struct ElfFacts {
    build_id: Vec<u8>,
    /// `(p_offset, p_filesz, p_vaddr)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl ElfFacts {
    fn read(path: &Path) -> Option<ElfFacts> {
        use object::{Object, ObjectSegment};
        let file = open_regular_file(path).ok()?;
        // SAFETY: a read-only map dropped before this function returns; a
        // file truncated underneath is the usual mmap caveat of symbolizers.
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let object = object::File::parse(&*map).ok()?;
        let segments = object
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        Some(ElfFacts {
            build_id: object
                .build_id()
                .ok()
                .flatten()
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
            segments,
        })
    }

    /// The ELF virtual address that file offset `offset` is loaded at.
    fn address_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(start, size, _)| offset >= start && offset - start < size)
            .map(|&(start, _, address)| address.wrapping_add(offset - start))
    }
}
