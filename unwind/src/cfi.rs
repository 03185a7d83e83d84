//! Computing the [`Rule`] for one code address from the loaded objects' `.eh_frame`.
//!
//! Owns the `_dl_find_object` lookup, the `.eh_frame_hdr` binary search and the
//! gimli evaluation of one FDE on fixed-size storage (about 4 KiB of stack).
//! `_dl_find_object` (glibc ≥ 2.35) is found with `dlsym` by [`init`], not linked, so the
//! library also loads on glibc 2.34 (RHEL 9), where every lookup then finds nothing.
//!
//! Runs inside malloc: it must never allocate, lock, make system calls or call
//! `dl_iterate_phdr`. `_dl_find_object` is documented by glibc as MT-, AS- and
//! AC-safe and is lock-free. Any input it does not understand becomes
//! [`Rule::Unsupported`], never a panic.

use core::ffi::{c_int, c_ulonglong, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

#[cfg(target_arch = "x86_64")]
use gimli::CfaRule;
use gimli::{
    BaseAddresses, EhFrame, EhFrameOffset, EndianSlice, LittleEndian, ReaderOffset, Register,
    RegisterRule, UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow,
};

#[cfg(target_arch = "x86_64")]
use crate::rule::CfaBase;
use crate::rule::Rule;

/// glibc 2.35 `struct dl_find_object` (`<dlfcn.h>`).
#[repr(C)]
struct DlFindObject {
    dlfo_flags: c_ulonglong,
    dlfo_map_start: *mut c_void,
    dlfo_map_end: *mut c_void,
    dlfo_link_map: *mut c_void,
    dlfo_eh_frame: *mut c_void,
    dlfo_reserved: [c_ulonglong; 7],
}

/// glibc ≥ 2.35: finds the object containing `address`; 0 on success, -1 if none.
type DlFindObjectFn = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> c_int;

static DL_FIND_OBJECT: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
const NOT_LOOKED_UP: u8 = 0;
const LOOKED_UP: u8 = 1;
static LOOKUP: AtomicU8 = AtomicU8::new(NOT_LOOKED_UP);

/// Look up `_dl_find_object`; true if this glibc has it. Call it once outside
/// `malloc`'s fast path (`dlsym` may take the loader lock and allocate); a capture
/// made before it looks the function up itself.
pub(crate) fn init() -> bool {
    if LOOKUP.load(Ordering::Acquire) == NOT_LOOKED_UP {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
        DL_FIND_OBJECT.store(found, Ordering::Relaxed);
        LOOKUP.store(LOOKED_UP, Ordering::Release);
    }
    !DL_FIND_OBJECT.load(Ordering::Relaxed).is_null()
}

/// DWARF register numbers on x86_64.
#[cfg(target_arch = "x86_64")]
const RBP: Register = Register(6);
#[cfg(target_arch = "x86_64")]
const RSP: Register = Register(7);
#[cfg(target_arch = "x86_64")]
const RETURN_ADDRESS: Register = Register(16);
/// The return-address column on aarch64: x30 (the link register).
#[cfg(target_arch = "aarch64")]
const RETURN_ADDRESS: Register = Register(30);

/// `.eh_frame_hdr` encodings the binary search understands (what GNU ld and lld emit).
const DW_EH_PE_PCREL_SDATA4: u8 = 0x1b;
const DW_EH_PE_UDATA4: u8 = 0x03;
const DW_EH_PE_DATAREL_SDATA4: u8 = 0x3b;

/// gimli storage that lives inside `UnwindContext` itself: no heap. 32 register rules
/// and 4 `DW_CFA_remember_state` levels are plenty for compiler-generated CFI; deeper
/// programs make gimli return an error, which becomes `Rule::Unsupported`.
pub(crate) struct FixedStorage;

impl<T: ReaderOffset> UnwindContextStorage<T> for FixedStorage {
    type Rules = [(Register, RegisterRule<T>); 32];
    type Stack = [UnwindTableRow<T, Self>; 4];
}

type Slice = EndianSlice<'static, LittleEndian>;

/// Computes the rule for `address`: an address inside the function whose frame is
/// being stepped (for a caller frame, its return address minus one). Where no
/// loaded object has an FDE for it, the sections a program registered with
/// libgcc are searched (`registered`).
pub(crate) fn rule_for_address(address: u64) -> Rule {
    match compute(address) {
        Ok(rule) => rule,
        Err(FdeMiss::None) => crate::registered::rule_for(address).unwrap_or(Rule::NoUnwindInfo),
        Err(FdeMiss::Unreadable) => Rule::Unsupported,
    }
}

/// A registered `.eh_frame` section: where it is, the bases its pointers may be
/// relative to, and the code its FDEs cover (`[low, high)`).
pub(crate) struct Section {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) text: u64,
    pub(crate) data: u64,
    pub(crate) low: u64,
    pub(crate) high: u64,
}

/// The longest registered section read.
const MAX_SECTION_BYTES: u64 = 256 << 20;

impl Section {
    /// The section at `start`, up to its zero terminator, with the range its
    /// FDEs cover; `None` if it is not understood (a 64-bit length, too long,
    /// an entry gimli cannot parse). Outside malloc, at registration.
    ///
    /// # Safety
    /// `start` is a section the program registered with libgcc: entries up
    /// to a zero length are readable.
    pub(crate) unsafe fn at(start: u64, text: u64, data: u64) -> Option<Section> {
        let mut len = 0u64;
        loop {
            // SAFETY: within the registered section, before its terminator.
            let entry = u64::from(unsafe { read_u32(start + len) });
            if entry == 0 {
                break;
            }
            len += 4 + entry;
            if entry == u64::from(u32::MAX) || len > MAX_SECTION_BYTES {
                return None;
            }
        }
        let mut section = Section {
            start,
            len,
            text,
            data,
            low: u64::MAX,
            high: 0,
        };
        // SAFETY: the section's entries, read above.
        let (eh_frame, bases) = unsafe { section.parts() }?;
        let mut entries = eh_frame.entries(&bases);
        while let Some(entry) = entries.next().ok()? {
            if let gimli::CieOrFde::Fde(partial) = entry {
                let fde = partial.parse(EhFrame::cie_from_offset).ok()?;
                section.low = section.low.min(fde.initial_address());
                section.high = section.high.max(fde.end_address());
            }
        }
        Some(section)
    }

    /// True if no FDE covers any code.
    pub(crate) fn is_empty(&self) -> bool {
        self.low >= self.high
    }

    /// The section for gimli, with its bases.
    ///
    /// # Safety
    /// `[start, start + len)` is readable for as long as the result is used.
    unsafe fn parts(&self) -> Option<(EhFrame<Slice>, BaseAddresses)> {
        let len = usize::try_from(self.len).ok()?;
        // SAFETY: guaranteed by the caller.
        let bytes: &'static [u8] =
            unsafe { core::slice::from_raw_parts(self.start as *const u8, len) };
        #[cfg(target_arch = "x86_64")]
        let eh_frame = EhFrame::from(Slice::new(bytes, LittleEndian));
        #[cfg(target_arch = "aarch64")]
        let mut eh_frame = EhFrame::from(Slice::new(bytes, LittleEndian));
        #[cfg(target_arch = "aarch64")]
        eh_frame.set_vendor(gimli::Vendor::AArch64);
        let bases = BaseAddresses::default()
            .set_eh_frame(self.start)
            .set_text(self.text)
            .set_got(self.data);
        Some((eh_frame, bases))
    }
}

/// The rule for `address` from the FDE of `section` that covers it: `None`
/// if none does, [`Rule::Unsupported`] if that FDE is not understood. A
/// linear search of the section's entries on fixed storage: no allocation.
///
/// # Safety
/// The section stays readable during the call (`registered`'s readers).
pub(crate) unsafe fn rule_in_section(section: &Section, address: u64) -> Option<Rule> {
    // SAFETY: forwarded from the caller.
    let (eh_frame, bases) = unsafe { section.parts() }?;
    let mut entries = eh_frame.entries(&bases);
    loop {
        match entries.next() {
            Ok(Some(gimli::CieOrFde::Fde(partial))) => {
                let Ok(fde) = partial.parse(EhFrame::cie_from_offset) else {
                    return Some(Rule::Unsupported);
                };
                if fde.contains(address) {
                    let found = ParsedFde {
                        fde,
                        eh_frame,
                        bases: bases.clone(),
                    };
                    return Some(found.rule(address).unwrap_or(Rule::Unsupported));
                }
            }
            Ok(Some(gimli::CieOrFde::Cie(_))) => {}
            Ok(None) => return None,
            Err(_) => return Some(Rule::Unsupported),
        }
    }
}

/// Why no rule was computed for an address.
enum FdeMiss {
    /// No loaded object has an FDE covering it: no object maps the address, it has no
    /// `.eh_frame_hdr`, or its table has no FDE covering the address.
    None,
    /// Unwind information this module does not read or the fast path cannot follow.
    Unreadable,
}

/// True if libgcc's `_Unwind_Backtrace` ends the walk at the frame whose return
/// address is `return_address` after reporting it, because no unwind information
/// covers `return_address - 1`: it has no registered FDE either, and the frame is not
/// the `rt_sigreturn` trampoline (libgcc's x86_64 fallback, which reads the code there).
#[cfg(target_arch = "x86_64")]
pub(crate) fn libgcc_stops_at(return_address: u64) -> bool {
    // Where the registered sections are all libgcc knows, the caller's rule
    // (no unwind information) already answers for libgcc's lookup.
    if !crate::registered::complete() && crate::libgcc::has_fde(return_address - 1) {
        return false;
    }
    // `mov $15, %rax; syscall`: 48 c7 c0 0f 00 00 00 0f 05.
    // SAFETY: a return address of the stack being walked: code the thread returns to,
    // which libgcc would read the same way.
    let (first, rest) = unsafe {
        (
            core::ptr::read_unaligned(return_address as *const u8),
            core::ptr::read_unaligned((return_address + 1) as *const u64),
        )
    };
    !(first == 0x48 && rest == 0x050f_0000_000f_c0c7)
}

fn compute(address: u64) -> Result<Rule, FdeMiss> {
    let eh_frame_hdr = find_eh_frame_hdr(address).ok_or(FdeMiss::None)?;
    let fde_address = find_fde_address(eh_frame_hdr, address)?;
    let found = parse_fde(eh_frame_hdr, fde_address).ok_or(FdeMiss::Unreadable)?;
    if !found.fde.contains(address) {
        return Err(FdeMiss::None);
    }
    found.rule(address).ok_or(FdeMiss::Unreadable)
}

/// A parsed FDE with what evaluating it needs.
struct ParsedFde {
    fde: gimli::FrameDescriptionEntry<Slice, usize>,
    eh_frame: EhFrame<Slice>,
    bases: BaseAddresses,
}

impl ParsedFde {
    /// The rule at `address`, which the FDE covers.
    fn rule(&self, address: u64) -> Option<Rule> {
        if self.fde.is_signal_trampoline()
            || self.fde.cie().return_address_register() != RETURN_ADDRESS
        {
            return None;
        }
        let mut context = UnwindContext::<usize, FixedStorage>::new_in();
        let row = self
            .fde
            .unwind_info_for_address(&self.eh_frame, &self.bases, &mut context, address)
            .ok()?;
        #[cfg(target_arch = "x86_64")]
        return rule_from_row(row);
        #[cfg(target_arch = "aarch64")]
        return crate::aarch64_walk::rule_from_row(row);
    }
}

/// Parses the FDE at `fde_address` of the object whose header is `eh_frame_hdr`.
fn parse_fde(eh_frame_hdr: u64, fde_address: u64) -> Option<ParsedFde> {
    // SAFETY: `eh_frame_hdr` was returned by `_dl_find_object` for a loaded object and
    // its `eh_frame_ptr` field was validated by `find_fde_address`.
    let eh_frame_start = unsafe { eh_frame_start(eh_frame_hdr) };
    if fde_address < eh_frame_start {
        return None;
    }
    // SAFETY: `fde_address` comes from the object's own FDE table and points at an FDE
    // inside its mapped, read-only `.eh_frame`.
    let fde_length = unsafe { read_u32(fde_address) };
    if fde_length == 0 || fde_length == u32::MAX {
        // A terminator, or a 64-bit DWARF length we do not expect in `.eh_frame`.
        return None;
    }
    // In `.eh_frame` an FDE's CIE pointer points backwards, so the CIE lies between
    // the section start and the FDE: the slice below covers both and nothing past the
    // FDE's end.
    let section_length = (fde_address - eh_frame_start)
        .checked_add(4 + u64::from(fde_length))
        .and_then(|length| usize::try_from(length).ok())?;
    // SAFETY: `[eh_frame_start, fde_address + 4 + fde_length)` is part of the object's
    // `.eh_frame`, mapped read-only for as long as the object is loaded (the profiler
    // calls `invalidate_all_caches` around `dlclose`, and code being unwound through is
    // not being unloaded).
    let section: &'static [u8] =
        unsafe { core::slice::from_raw_parts(eh_frame_start as *const u8, section_length) };
    #[cfg(target_arch = "x86_64")]
    let eh_frame = EhFrame::from(Slice::new(section, LittleEndian));
    #[cfg(target_arch = "aarch64")]
    let mut eh_frame = EhFrame::from(Slice::new(section, LittleEndian));
    // `DW_CFA_AARCH64_negate_ra_state` (0x2d) is read only under the AArch64 vendor.
    #[cfg(target_arch = "aarch64")]
    eh_frame.set_vendor(gimli::Vendor::AArch64);
    let bases = BaseAddresses::default()
        .set_eh_frame_hdr(eh_frame_hdr)
        .set_eh_frame(eh_frame_start);
    let fde = eh_frame
        .fde_from_offset(
            &bases,
            EhFrameOffset(usize::try_from(fde_address - eh_frame_start).ok()?),
            EhFrame::cie_from_offset,
        )
        .ok()?;
    Some(ParsedFde {
        fde,
        eh_frame,
        bases,
    })
}

/// Reduces a CFI row to a [`Rule`], or `None` if the fast path cannot follow it
/// (aarch64's reduction is `aarch64_walk`'s).
#[cfg(target_arch = "x86_64")]
fn rule_from_row(row: &UnwindTableRow<usize, FixedStorage>) -> Option<Rule> {
    match row.register(RETURN_ADDRESS) {
        Some(RegisterRule::Offset(-8)) => {}
        Some(RegisterRule::Undefined) => return Some(Rule::Outermost),
        _ => return None,
    }
    let (cfa_base, cfa_offset) = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if register == RSP => {
            (CfaBase::Rsp, offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if register == RBP => {
            (CfaBase::Rbp, offset)
        }
        _ => return None,
    };
    let saved_rbp_offset = match row.register(RBP) {
        None | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(offset)) => Some(i16::try_from(offset).ok()?),
        Some(_) => return None,
    };
    Some(Rule::step(
        cfa_base,
        i32::try_from(cfa_offset).ok()?,
        saved_rbp_offset,
    ))
}

/// The loaded object containing `address`, from glibc's lock-free lookup.
fn find_object(address: u64) -> Option<DlFindObject> {
    if !init() {
        return None;
    }
    // SAFETY: `init` stored the address of glibc's `_dl_find_object`, which has
    // this signature.
    let dl_find_object = unsafe {
        core::mem::transmute::<*mut c_void, DlFindObjectFn>(DL_FIND_OBJECT.load(Ordering::Relaxed))
    };
    let mut object = core::mem::MaybeUninit::<DlFindObject>::uninit();
    // SAFETY: `_dl_find_object` only writes the result struct, whose layout matches
    // glibc 2.35's; it is lock-free and async-signal-safe.
    let found = unsafe { dl_find_object(address as *mut c_void, object.as_mut_ptr()) };
    // SAFETY: on success glibc filled in the whole struct.
    (found == 0).then(|| unsafe { object.assume_init() })
}

/// The loaded object containing an address, as the shared rule cache tells
/// objects apart: its mapping and a key no other object mapped there has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectKey {
    /// Start of the object's mapping.
    pub start: u64,
    /// End of the object's mapping.
    pub end: u64,
    /// A hash of the mapping, the `.eh_frame_hdr` address and the object's
    /// name; never 0.
    pub key: u64,
}

/// The longest object name [`object_key`] reads.
const MAX_NAME_BYTES: usize = 4096;

/// [`ObjectKey`] of the object containing `address`. Two processes forked from
/// one another get the same key for an address only if they map the same object
/// (same name, same place) there, however each of them loaded it.
pub(crate) fn object_key(address: u64) -> Option<ObjectKey> {
    let object = find_object(address)?;
    let (start, end) = (object.dlfo_map_start as u64, object.dlfo_map_end as u64);
    let mut hash = Fnv::default();
    hash.add(&start.to_le_bytes());
    hash.add(&end.to_le_bytes());
    hash.add(&(object.dlfo_eh_frame as u64).to_le_bytes());
    // `struct link_map` (`<link.h>`) starts with `l_addr` and `l_name`.
    let link_map = object.dlfo_link_map.cast::<*const u8>();
    if !link_map.is_null() {
        // SAFETY: glibc's link map of a loaded object, whose public head is
        // `{ l_addr, l_name, ... }`; `l_name` is a NUL-terminated string (possibly
        // empty) that lives as long as the object stays loaded.
        let name = unsafe { *link_map.add(1) };
        for index in 0..MAX_NAME_BYTES {
            if name.is_null() {
                break;
            }
            // SAFETY: within the NUL-terminated `l_name`: the loop stops at its NUL.
            let byte = unsafe { *name.add(index) };
            if byte == 0 {
                break;
            }
            hash.add(&[byte]);
        }
    }
    Some(ObjectKey {
        start,
        end,
        key: hash.0 | 1,
    })
}

/// 64-bit FNV-1a.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// `[start, end)` of the mapping of the object containing `address`.
pub(crate) fn object_range(address: u64) -> Option<(u64, u64)> {
    let object = find_object(address)?;
    Some((object.dlfo_map_start as u64, object.dlfo_map_end as u64))
}

/// The address of the `.eh_frame_hdr` of the object containing `address`.
fn find_eh_frame_hdr(address: u64) -> Option<u64> {
    let eh_frame_hdr = find_object(address)?.dlfo_eh_frame as u64;
    (eh_frame_hdr != 0).then_some(eh_frame_hdr)
}

/// Binary-searches the `.eh_frame_hdr` table for the last FDE starting at or below
/// `address` and returns the FDE's address; a miss says whether the header uses
/// encodings we do not handle or no entry starts at or below `address`.
fn find_fde_address(eh_frame_hdr: u64, address: u64) -> Result<u64, FdeMiss> {
    // SAFETY: `eh_frame_hdr` is the PT_GNU_EH_FRAME segment of a loaded object; its
    // 12-byte fixed part is always present when the encodings below match.
    let header = unsafe { read_u32(eh_frame_hdr) }.to_le_bytes();
    let [
        version,
        eh_frame_ptr_encoding,
        fde_count_encoding,
        table_encoding,
    ] = header;
    if version != 1
        || eh_frame_ptr_encoding != DW_EH_PE_PCREL_SDATA4
        || fde_count_encoding != DW_EH_PE_UDATA4
        || table_encoding != DW_EH_PE_DATAREL_SDATA4
    {
        return Err(FdeMiss::Unreadable);
    }
    // SAFETY: as above; the FDE count follows the 4-byte `eh_frame_ptr`.
    let fde_count = u64::from(unsafe { read_u32(eh_frame_hdr + 8) });
    let table = eh_frame_hdr + 12;
    let target = address.wrapping_sub(eh_frame_hdr) as i64;
    // Entries are (initial location, FDE address), both i32 relative to the header,
    // sorted by initial location. Find the last entry starting at or below `target`.
    let entry_start = |index: u64| -> i64 {
        // SAFETY: `index < fde_count`, and the table holds `fde_count` 8-byte entries.
        i64::from(unsafe { read_u32(table + index * 8) } as i32)
    };
    let (mut low, mut high) = (0u64, fde_count);
    while low < high {
        let middle = low + (high - low) / 2;
        if entry_start(middle) <= target {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    let index = low.checked_sub(1).ok_or(FdeMiss::None)?;
    // SAFETY: `index < fde_count`.
    let fde_offset = i64::from(unsafe { read_u32(table + index * 8 + 4) } as i32);
    Ok(eh_frame_hdr.wrapping_add_signed(fde_offset))
}

/// The start of `.eh_frame`, from the header's pc-relative `eh_frame_ptr`.
///
/// # Safety
/// `eh_frame_hdr` must point at a valid `.eh_frame_hdr` whose `eh_frame_ptr` is
/// encoded as `DW_EH_PE_pcrel | DW_EH_PE_sdata4`.
unsafe fn eh_frame_start(eh_frame_hdr: u64) -> u64 {
    let field = eh_frame_hdr + 4;
    // SAFETY: the caller guarantees the field exists.
    let offset = unsafe { read_u32(field) } as i32;
    field.wrapping_add_signed(i64::from(offset))
}

/// Reads a little-endian u32 at `address`.
///
/// # Safety
/// `address..address + 4` must be readable.
unsafe fn read_u32(address: u64) -> u32 {
    // SAFETY: guaranteed by the caller; no alignment is assumed.
    unsafe { core::ptr::read_unaligned(address as *const u32) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gimli_context_fits_comfortably_on_the_stack() {
        let size = core::mem::size_of::<UnwindContext<usize, FixedStorage>>();
        assert!(size <= 8 * 1024, "UnwindContext is {size} bytes");
    }

    #[test]
    fn finds_a_step_rule_for_this_function() {
        let here = finds_a_step_rule_for_this_function as *const () as u64;
        assert!(matches!(rule_for_address(here + 1), Rule::Step { .. }));
    }

    #[test]
    fn unknown_addresses_have_no_unwind_info() {
        assert_eq!(rule_for_address(0), Rule::NoUnwindInfo);
        assert_eq!(rule_for_address(8), Rule::NoUnwindInfo);
    }
}
