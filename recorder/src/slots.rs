//! Relocation slots of loaded objects: find those through which an object
//! reaches one of a set of functions (the malloc family, C++ `operator
//! new`/`delete`, `dlopen`/`dlclose`) and point them at the profiler's
//! definitions, or back.
//!
//! Owns the list of rewritten slots with the value each held before. A
//! slot is a `JUMP_SLOT` (PLT calls), a `GLOB_DAT` (calls without a PLT,
//! and addresses taken) or an absolute `R_X86_64_64` without addend (a
//! function pointer in data) whose symbol is one of the names. It is
//! rewritten only if it holds the definition the process's global scope
//! gives that name (what the profiler forwards to), or, for a `JUMP_SLOT`,
//! a lazy-binding stub inside its own object: a slot bound elsewhere (an
//! `RTLD_DEFAULT`-bypassing `RTLD_DEEPBIND` library, another allocator) is
//! left alone. Slots in read-only pages (RELRO) are made writable for the
//! store and given back their protection (read from `/proc/self/maps`).
//!
//! Slots are written while `dl_iterate_phdr` holds the loader's lock, so
//! no object can be unloaded under the store; a slot is restored only if
//! its object is still the one that was rewritten and it still holds the
//! profiler's function. The profiler's own object, the dynamic loader and
//! the vDSO are never touched.
//!
//! Never runs inside malloc: walks the loader's list, reads `/proc`,
//! calls `mprotect`, allocates.

use core::ffi::{CStr, c_int, c_void};
use std::sync::Mutex;

use object::LittleEndian as LE;
use object::elf;

/// One function whose slots are redirected.
#[derive(Clone, Debug)]
pub struct Redirect {
    /// The symbol name.
    pub name: &'static CStr,
    /// The profiler's definition.
    pub hook: usize,
    /// The definition the process's global scope gives the name (0: none).
    pub target: usize,
}

/// A slot as it was before it was rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rewritten {
    slot: usize,
    original: usize,
    hook: usize,
    object: ObjectId,
    /// The slot's function releases memory (restored last).
    releasing: bool,
}

/// A loaded object: its load bias and a hash of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ObjectId {
    bias: usize,
    name_hash: u64,
}

static REWRITTEN: Mutex<Vec<Rewritten>> = Mutex::new(Vec::new());

/// Objects whose slots are never rewritten: load biases of the profiler's
/// own object, the loader and the vDSO.
#[derive(Clone, Copy, Debug)]
pub struct Untouchable {
    pub own: usize,
    pub loader: usize,
    pub vdso: usize,
}

impl Untouchable {
    /// The profiler's own object (the one holding `own_code`), the
    /// dynamic loader and the vDSO of this process.
    pub fn of_this_process(own_code: usize) -> Untouchable {
        // SAFETY: getauxval has no preconditions.
        let (loader, vdso) = unsafe {
            (
                libc::getauxval(libc::AT_BASE) as usize,
                libc::getauxval(libc::AT_SYSINFO_EHDR) as usize,
            )
        };
        Untouchable {
            own: object_base(own_code).unwrap_or(usize::MAX),
            loader,
            vdso,
        }
    }

    fn contains(&self, bias: usize, first_segment: usize) -> bool {
        [self.own, self.loader, self.vdso]
            .iter()
            .any(|&b| b != 0 && (b == bias || b == first_segment))
    }
}

/// The load address (`dli_fbase`) of the object holding `address`.
fn object_base(address: usize) -> Option<usize> {
    // SAFETY: a zeroed Dl_info is a valid out-parameter.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: any address may be asked about.
    let found = unsafe { libc::dladdr(address as *const c_void, &mut info) };
    (found != 0).then_some(info.dli_fbase as usize)
}

/// Which slots a pass rewrites.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Only those of functions that release memory (free, realloc,
    /// `operator delete`, dlclose): rewritten first, so that no block the
    /// profiler samples is released behind its back while the others are
    /// being rewritten.
    Releasing,
    /// Every one.
    All,
}

/// Does `name` release memory?
fn releases(name: &[u8]) -> bool {
    matches!(name, b"free" | b"realloc" | b"reallocarray" | b"dlclose") || name.starts_with(b"_Zd")
}

/// Is the object holding `first` earlier in the loader's list (load
/// order) than the one holding `second`? `None` if either is not found.
pub fn loaded_before(first: usize, second: usize) -> Option<bool> {
    let mut seen: (Option<usize>, Option<usize>) = (None, None);
    let mut position = 0;
    for_each_object(&mut |object| {
        let contains = |address: usize| {
            object.loads().any(|h| {
                let start = object.bias + h.p_vaddr.get(LE) as usize;
                (start..start + h.p_memsz.get(LE) as usize).contains(&address)
            })
        };
        if seen.0.is_none() && contains(first) {
            seen.0 = Some(position);
        }
        if seen.1.is_none() && contains(second) {
            seen.1 = Some(position);
        }
        position += 1;
    });
    Some(seen.0? < seen.1?)
}

/// Rewrite the slots of every loaded object (but the untouchable ones)
/// that reach a function of `redirects` and are not rewritten yet. Returns
/// the number of slots rewritten.
pub fn redirect(redirects: &[Redirect], untouchable: Untouchable, pass: Pass) -> usize {
    let mut rewritten = lock();
    let protections = Protections::read();
    let mut walk = Walk {
        redirects,
        untouchable,
        pass,
        protections: &protections,
        rewritten: &mut rewritten,
        count: 0,
    };
    for_each_object(&mut |object| walk.object(object));
    walk.count
}

/// Give every rewritten slot whose object is still loaded, and which still
/// holds the profiler's function, its value from before: those of
/// releasing functions last, so that no block the profiler sampled is
/// released behind its back meanwhile. Returns the number restored; the
/// list is empty afterwards.
pub fn restore_all() -> usize {
    let mut rewritten = lock();
    let protections = Protections::read();
    let mut restored = 0;
    for releasing in [false, true] {
        for_each_object(&mut |object| {
            let id = object.id();
            for entry in rewritten
                .iter()
                .filter(|e| e.object == id && e.releasing == releasing)
            {
                // SAFETY: the slot lies in this loaded object (it was found
                // in its relocations), which cannot be unloaded during the
                // walk.
                if unsafe { read_slot(entry.slot) } == entry.hook
                    && protections.store(entry.slot, entry.original)
                {
                    restored += 1;
                }
            }
        });
    }
    rewritten.clear();
    restored
}

/// Forget the slots of objects that are no longer loaded (after a
/// `dlclose`): their memory may now belong to another object.
pub fn forget_unloaded() {
    let mut rewritten = lock();
    let mut loaded = Vec::new();
    for_each_object(&mut |object| loaded.push(object.id()));
    rewritten.retain(|entry| loaded.contains(&entry.object));
}

/// Slots rewritten now.
pub fn rewritten_count() -> usize {
    lock().len()
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Rewritten>> {
    REWRITTEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---- walking the loaded objects ----

/// One object as `dl_iterate_phdr` reports it.
struct Object<'a> {
    bias: usize,
    name: &'a [u8],
    headers: &'a [elf::ProgramHeader64<LE>],
}

impl Object<'_> {
    fn id(&self) -> ObjectId {
        ObjectId {
            bias: self.bias,
            name_hash: self.name.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            }),
        }
    }

    /// `[start, end)` of the object's loaded segments.
    fn span(&self) -> (usize, usize) {
        let mut span = (usize::MAX, 0);
        for header in self.loads() {
            let start = self.bias + header.p_vaddr.get(LE) as usize;
            span.0 = span.0.min(start);
            span.1 = span.1.max(start + header.p_memsz.get(LE) as usize);
        }
        span
    }

    fn loads(&self) -> impl Iterator<Item = &elf::ProgramHeader64<LE>> {
        self.headers
            .iter()
            .filter(|h| h.p_type.get(LE) == elf::PT_LOAD)
    }

    fn dynamic(&self) -> Option<Dynamic> {
        let header = self
            .headers
            .iter()
            .find(|h| h.p_type.get(LE) == elf::PT_DYNAMIC)?;
        Dynamic::read(self, self.bias + header.p_vaddr.get(LE) as usize)
    }
}

/// Calls `visit` for each loaded object, under the loader's lock.
fn for_each_object(visit: &mut dyn FnMut(&Object)) {
    unsafe extern "C" fn callback(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `&mut dyn FnMut` passed below, alive for
        // the call; `info` is the loader's description of a loaded object.
        unsafe {
            let visit = &mut *(data as *mut &mut dyn FnMut(&Object));
            let info = &*info;
            let name = if info.dlpi_name.is_null() {
                &[][..]
            } else {
                CStr::from_ptr(info.dlpi_name).to_bytes()
            };
            let headers = if info.dlpi_phdr.is_null() {
                &[][..]
            } else {
                core::slice::from_raw_parts(
                    info.dlpi_phdr.cast::<elf::ProgramHeader64<LE>>(),
                    info.dlpi_phnum as usize,
                )
            };
            visit(&Object {
                bias: info.dlpi_addr as usize,
                name,
                headers,
            });
        }
        0
    }
    let mut visit = visit;
    // SAFETY: the callback only reads what the loader passes and calls
    // `visit`, which outlives the walk.
    unsafe {
        libc::dl_iterate_phdr(
            Some(callback),
            (&mut visit as *mut &mut dyn FnMut(&Object)).cast(),
        )
    };
}

/// The definition of `name` that the process's global scope gives a
/// call (the first loaded object, in load order, whose dynamic symbols
/// define it), or 0. Unlike `dlsym(RTLD_DEFAULT)`, never the canonical
/// PLT entry of a non-PIE executable that takes the function's address
/// (an undefined symbol with a value), which only jumps through the
/// executable's own slot.
pub fn global_definition(name: &CStr, untouchable: Untouchable) -> usize {
    let mut found = 0;
    for_each_object(&mut |object| {
        if found != 0 {
            return;
        }
        let span = object.span();
        if span.0 == usize::MAX || untouchable.contains(object.bias, span.0) {
            return;
        }
        if let Some(value) = object.dynamic().and_then(|d| d.defined(name.to_bytes())) {
            found = object.bias + value;
        }
    });
    found
}

/// The parts of an object's dynamic section that name its relocations
/// and let its symbols be looked up.
struct Dynamic {
    symbols: usize,
    strings: usize,
    strings_size: usize,
    tables: [(usize, usize); 2],
    /// DT_GNU_HASH, or 0.
    gnu_hash: usize,
    /// DT_HASH, or 0.
    sysv_hash: usize,
}

impl Dynamic {
    /// Reads the dynamic section at `address` of `object`.
    fn read(object: &Object, address: usize) -> Option<Dynamic> {
        let (mut symbols, mut strings, mut strings_size) = (0, 0, 0);
        let (mut plt, mut plt_size, mut rela, mut rela_size) = (0, 0, 0, 0);
        let (mut gnu_hash, mut sysv_hash) = (0, 0);
        let mut entry = address as *const elf::Dyn64<LE>;
        loop {
            // SAFETY: the dynamic section is mapped with its object and
            // ends with DT_NULL.
            let dynamic = unsafe { &*entry };
            let value = dynamic.d_val.get(LE) as usize;
            match dynamic.d_tag.get(LE) {
                elf::DT_NULL => break,
                elf::DT_SYMTAB => symbols = value,
                elf::DT_STRTAB => strings = value,
                elf::DT_STRSZ => strings_size = value,
                elf::DT_JMPREL => plt = value,
                elf::DT_PLTRELSZ => plt_size = value,
                elf::DT_RELA => rela = value,
                elf::DT_RELASZ => rela_size = value,
                elf::DT_GNU_HASH => gnu_hash = value,
                elf::DT_HASH => sysv_hash = value,
                elf::DT_PLTREL if value != elf::DT_RELA.0 as usize => return None,
                _ => {}
            }
            // SAFETY: still inside the section (DT_NULL not reached).
            entry = unsafe { entry.add(1) };
        }
        if symbols == 0 || strings == 0 {
            return None;
        }
        // The loader makes most addresses absolute in place; where it did
        // not (an address below the load bias), add the bias.
        let absolute = |value: usize| {
            if value != 0 && value < object.bias {
                value + object.bias
            } else {
                value
            }
        };
        Some(Dynamic {
            symbols: absolute(symbols),
            strings: absolute(strings),
            strings_size,
            tables: [(absolute(plt), plt_size), (absolute(rela), rela_size)],
            gnu_hash: absolute(gnu_hash),
            sysv_hash: absolute(sysv_hash),
        })
    }

    /// The value of the function `name` if this object defines it.
    fn defined(&self, name: &[u8]) -> Option<usize> {
        let index = if self.gnu_hash != 0 {
            self.gnu_lookup(name)?
        } else if self.sysv_hash != 0 {
            self.sysv_lookup(name)?
        } else {
            return None;
        };
        let symbol = self.symbol(index);
        let kind = symbol.st_type();
        let defined = symbol.st_shndx.get(LE) != elf::SHN_UNDEF && symbol.st_value.get(LE) != 0;
        (defined && kind == elf::STT_FUNC).then(|| symbol.st_value.get(LE) as usize)
    }

    /// The index of `name` through the GNU hash table.
    fn gnu_lookup(&self, name: &[u8]) -> Option<u32> {
        let table = self.gnu_hash as *const u32;
        // SAFETY: the table's header, mapped with its object.
        let (buckets, first, bloom_words) =
            unsafe { (*table as usize, *table.add(1), *table.add(2) as usize) };
        if buckets == 0 {
            return None;
        }
        let hash = name.iter().fold(5381u32, |h, &c| {
            h.wrapping_mul(33).wrapping_add(u32::from(c))
        });
        // SAFETY: the bucket array follows the header and the 64-bit bloom
        // words; the chain follows the buckets, one word per symbol from
        // `first` on, and ends with a word whose low bit is set.
        unsafe {
            let bucket_array = table.add(4 + 2 * bloom_words);
            let mut index = *bucket_array.add(hash as usize % buckets);
            if index < first {
                return None;
            }
            let chain = bucket_array.add(buckets);
            loop {
                let entry = *chain.add((index - first) as usize);
                if entry | 1 == hash | 1 && self.symbol_name(index) == name {
                    return Some(index);
                }
                if entry & 1 != 0 {
                    return None;
                }
                index += 1;
            }
        }
    }

    /// The index of `name` through the System V hash table.
    fn sysv_lookup(&self, name: &[u8]) -> Option<u32> {
        let table = self.sysv_hash as *const u32;
        let hash = name.iter().fold(0u32, |h, &c| {
            let h = (h << 4).wrapping_add(u32::from(c));
            (h ^ ((h & 0xf000_0000) >> 24)) & 0x0fff_ffff
        });
        // SAFETY: nbucket, nchain, then the buckets and the chain, mapped
        // with the object; chains end at index 0.
        unsafe {
            let buckets = *table as usize;
            if buckets == 0 {
                return None;
            }
            let mut index = *table.add(2 + hash as usize % buckets);
            let chain = table.add(2 + buckets);
            while index != 0 {
                if self.symbol_name(index) == name {
                    return Some(index);
                }
                index = *chain.add(index as usize);
            }
        }
        None
    }

    fn symbol(&self, index: u32) -> &elf::Sym64<LE> {
        // SAFETY: indices come from the object's relocations or hash
        // tables, which name symbols of its mapped table.
        unsafe { &*(self.symbols as *const elf::Sym64<LE>).add(index as usize) }
    }

    /// The relocations of both tables.
    fn relocations(&self) -> impl Iterator<Item = &elf::Rela64<LE>> {
        self.tables
            .iter()
            .filter(|(start, _)| *start != 0)
            .flat_map(|&(start, size)| {
                let count = size / core::mem::size_of::<elf::Rela64<LE>>();
                // SAFETY: the table is mapped with its object; `size` is the
                // loader's own bound.
                unsafe { core::slice::from_raw_parts(start as *const elf::Rela64<LE>, count) }
            })
    }

    /// The name of symbol `index`.
    fn symbol_name(&self, index: u32) -> &[u8] {
        let offset = self.symbol(index).st_name.get(LE) as usize;
        if offset >= self.strings_size {
            return &[];
        }
        // SAFETY: a NUL-terminated name inside the mapped string table.
        unsafe { CStr::from_ptr((self.strings + offset) as *const core::ffi::c_char) }.to_bytes()
    }
}

struct Walk<'a> {
    redirects: &'a [Redirect],
    untouchable: Untouchable,
    pass: Pass,
    protections: &'a Protections,
    rewritten: &'a mut Vec<Rewritten>,
    count: usize,
}

impl Walk<'_> {
    fn object(&mut self, object: &Object) {
        let span = object.span();
        if span.0 == usize::MAX || self.untouchable.contains(object.bias, span.0) {
            return;
        }
        let Some(dynamic) = object.dynamic() else {
            return;
        };
        let id = object.id();
        for relocation in dynamic.relocations() {
            let kind = relocation.r_type(LE, false);
            let lazy_allowed = match kind {
                elf::R_X86_64_JUMP_SLOT => true,
                elf::R_X86_64_GLOB_DAT => false,
                elf::R_X86_64_64 if relocation.r_addend.get(LE) == 0 => false,
                _ => continue,
            };
            let symbol = relocation.r_sym(LE, false);
            if symbol == 0 {
                continue;
            }
            let name = dynamic.symbol_name(symbol);
            if self.pass == Pass::Releasing && !releases(name) {
                continue;
            }
            let Some(redirect) = self.redirects.iter().find(|r| r.name.to_bytes() == name) else {
                continue;
            };
            let slot = object.bias + relocation.r_offset.get(LE) as usize;
            // SAFETY: a relocation's slot lies in its (loaded) object.
            let value = unsafe { read_slot(slot) };
            let bound_to_target = redirect.target != 0 && value == redirect.target;
            let lazy = lazy_allowed
                && redirect.target != 0
                && value >= span.0
                && value < span.1
                // SAFETY: inside the object's loaded segments.
                && unsafe { is_lazy_stub(value) };
            if (bound_to_target || lazy) && self.protections.store(slot, redirect.hook) {
                self.rewritten.retain(|e| e.slot != slot);
                self.rewritten.push(Rewritten {
                    slot,
                    original: value,
                    hook: redirect.hook,
                    object: id,
                    releasing: releases(name),
                });
                self.count += 1;
            }
        }
    }
}

/// Does `code` begin a lazy-binding PLT stub (`push imm32` then a jump,
/// with an `endbr64` before it in IBT-enabled PLTs)? A `JUMP_SLOT` not yet
/// bound points there, where one bound to a function of its own object
/// points at that function.
///
/// # Safety
/// `code` is readable for 9 bytes (inside a loaded object).
unsafe fn is_lazy_stub(code: usize) -> bool {
    // SAFETY: per the contract.
    let bytes = unsafe { core::ptr::read_unaligned(code as *const [u8; 9]) };
    let after_endbr = if bytes[..4] == [0xf3, 0x0f, 0x1e, 0xfa] {
        4
    } else {
        0
    };
    let rest = &bytes[after_endbr..];
    rest[0] == 0x68 && (after_endbr == 4 || rest[5] == 0xe9 || rest[5..7] == [0xf2, 0xe9])
}

/// Reads a slot.
///
/// # Safety
/// `slot` is a mapped, aligned word.
unsafe fn read_slot(slot: usize) -> usize {
    // SAFETY: per the contract; atomic, as other threads may store.
    unsafe {
        (*(slot as *const core::sync::atomic::AtomicUsize))
            .load(core::sync::atomic::Ordering::Acquire)
    }
}

/// The protection of the process's mappings, to make a read-only slot
/// writable for one store.
struct Protections {
    /// `(start, end, PROT_*)`, sorted by start.
    ranges: Vec<(usize, usize, c_int)>,
}

const PAGE: usize = 4096;

impl Protections {
    fn read() -> Protections {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        Protections {
            ranges: maps.lines().filter_map(parse_maps_line).collect(),
        }
    }

    /// Stores `value` into `slot`, making its page writable for the store
    /// if it is not. False if the slot's mapping is unknown or cannot be
    /// made writable.
    fn store(&self, slot: usize, value: usize) -> bool {
        let Some(&(_, _, protection)) = self
            .ranges
            .iter()
            .find(|&&(start, end, _)| slot >= start && slot + 8 <= end)
        else {
            return false;
        };
        let page = (slot & !(PAGE - 1)) as *mut c_void;
        let writable = protection & libc::PROT_WRITE != 0;
        let set_protection = |protection| {
            // SAFETY: the page is mapped (it is in the maps); only its
            // protection changes, and it is given back below.
            unsafe { crate::syscalls::mprotect(page, PAGE, protection) }
        };
        if !writable && set_protection(protection | libc::PROT_WRITE) != 0 {
            return false;
        }
        // SAFETY: a mapped, aligned, now writable word; atomic, since other
        // threads call through it.
        unsafe {
            (*(slot as *const core::sync::atomic::AtomicUsize))
                .store(value, core::sync::atomic::Ordering::Release)
        };
        if !writable {
            set_protection(protection);
        }
        true
    }
}

/// `start-end perms ...` of `/proc/self/maps`.
fn parse_maps_line(line: &str) -> Option<(usize, usize, c_int)> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    let mut protection = 0;
    for (at, flag) in [
        (0, libc::PROT_READ),
        (1, libc::PROT_WRITE),
        (2, libc::PROT_EXEC),
    ] {
        if perms.get(at).is_some_and(|&c| c != b'-') {
            protection |= flag;
        }
    }
    Some((
        usize::from_str_radix(start, 16).ok()?,
        usize::from_str_radix(end, 16).ok()?,
        protection,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_ranges_and_protections() {
        let line = "7f00a000-7f00c000 r--p 00000000 08:01 1234  /usr/lib/libc.so.6";
        assert_eq!(
            parse_maps_line(line),
            Some((0x7f00a000, 0x7f00c000, libc::PROT_READ))
        );
        let line = "7f00c000-7f00d000 rw-p 00000000 00:00 0";
        assert_eq!(
            parse_maps_line(line),
            Some((0x7f00c000, 0x7f00d000, libc::PROT_READ | libc::PROT_WRITE))
        );
    }

    #[test]
    fn releasing_functions_go_first() {
        assert!(releases(b"free") && releases(b"_ZdlPvm") && releases(b"dlclose"));
        assert!(!releases(b"malloc") && !releases(b"_Znwm") && !releases(b"dlopen"));
    }

    /// The walk over the test runner's own objects finds no slot of a
    /// name nobody imports (rewriting a real slot here would break the
    /// runner; the end-to-end tests rewrite real ones).
    #[test]
    fn a_name_nobody_imports_rewrites_nothing() {
        let untouchable = Untouchable::of_this_process(object_base as fn(usize) -> _ as usize);
        let redirects = [Redirect {
            name: c"heapsample_imported_by_nobody",
            hook: 1,
            target: 2,
        }];
        assert_eq!(redirect(&redirects, untouchable, Pass::All), 0);
        assert_eq!(rewritten_count(), 0);
        assert_eq!(restore_all(), 0);
    }
}
