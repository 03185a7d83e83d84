//! Frames a program registered with libgcc (`__register_frame*`: JITs such as
//! LLVM's), remembered in the profiler's own memory, so that the walk never
//! has to ask libgcc about them.
//!
//! Why: once anything is registered, every libgcc FDE lookup
//! (`_Unwind_Find_FDE`, and so `_Unwind_Backtrace`) takes libgcc's object
//! mutex, and libgcc calls `malloc` while it holds it (the first lookup after
//! a registration sorts the object's FDEs into arrays it mallocs). A sample
//! taken in that `malloc` whose walk asked libgcc again would wait for
//! itself. Here the interposed registration functions (the shim's) record
//! each registered `.eh_frame` section, its extent and the code range its
//! FDEs cover, and the walk evaluates those FDEs itself (`cfi`).
//!
//! Owns the table of registered sections and whether it is complete: every
//! registration of the process went through [`register`] (the shim was
//! preloaded, and no registration failed to fit or to parse). Only then may
//! a code address that neither a loaded object nor this table covers be
//! cached as [`crate::rule::Rule::NoUnwindInfo`] and stepped without asking
//! libgcc; otherwise the walk asks libgcc as before and caches nothing for
//! such addresses.
//!
//! Inside malloc ([`rule_for`], [`complete`]): loads, a scan of at most
//! [`MAX_SECTIONS`] entries, and the evaluation of one section's FDEs; no
//! lock, no system call, no allocation. A reader announces itself in
//! [`READERS`] and never waits. [`register`] and [`deregister`] run in the
//! program's own calls, outside malloc: they serialize on a flag, and
//! [`deregister`] removes the entry, bumps the caches' generation and then
//! waits until no reader that could have seen the entry is still reading the
//! section, before libgcc forgets it and the program frees it. (Like
//! libgcc's own, they are not async-signal-safe: a handler that deregisters
//! frames while its thread is inside the walk's read would wait for good.)
//! A forked child starts with no reader and no writer
//! ([`after_fork_in_child`], registered at the first registration).

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

use crate::cfi::{self, Section};
use crate::rule::Rule;

/// Registered sections remembered; a program registering more (at once)
/// makes the table incomplete.
pub(crate) const MAX_SECTIONS: usize = 1024;

/// One registered `.eh_frame` section; `key` 0 is a free slot.
struct Entry {
    /// The pointer the program registered it with (what deregistering names).
    key: AtomicU64,
    start: AtomicU64,
    len: AtomicU64,
    /// The text and data bases given with `__register_frame_info_bases`.
    text: AtomicU64,
    data: AtomicU64,
    /// `[low, high)`: from the lowest FDE start to the highest FDE end.
    low: AtomicU64,
    high: AtomicU64,
}

impl Entry {
    const fn free() -> Entry {
        Entry {
            key: AtomicU64::new(0),
            start: AtomicU64::new(0),
            len: AtomicU64::new(0),
            text: AtomicU64::new(0),
            data: AtomicU64::new(0),
            low: AtomicU64::new(0),
            high: AtomicU64::new(0),
        }
    }
}

static ENTRIES: [Entry; MAX_SECTIONS] = [const { Entry::free() }; MAX_SECTIONS];
/// Slots `[0, IN_USE)` may hold entries (the scan's bound; never shrinks).
static IN_USE: AtomicUsize = AtomicUsize::new(0);
/// Walks reading the table and the sections it names.
static READERS: AtomicUsize = AtomicUsize::new(0);
/// Serializes [`register`] and [`deregister`]: taken (true) by one of them.
static WRITING: AtomicBool = AtomicBool::new(false);
/// Registers [`after_fork_in_child`] once, at the first registration.
static AT_FORK: Once = Once::new();

/// [`WRITING`] held until dropped.
struct Writing;

impl Writing {
    /// Waits (outside malloc, in the program's registration call) for the
    /// other registration calls to finish.
    fn take() -> Writing {
        while WRITING
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        Writing
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        WRITING.store(false, Ordering::Release);
    }
}

/// In a forked child only the forking thread goes on: the readers and the
/// writer the parent's other threads counted are gone. (A child's
/// half-written entry is harmless: an entry is seen only once its key is
/// stored, after its fields, and one being removed already has key 0.)
extern "C" fn after_fork_in_child() {
    READERS.store(0, Ordering::SeqCst);
    WRITING.store(false, Ordering::Release);
}
/// Set by [`set_complete`]: every registration goes through [`register`].
static SEES_ALL: AtomicBool = AtomicBool::new(false);
/// A registration could not be remembered (the table full, or a section
/// not understood): libgcc knows frames this table does not.
static MISSED: AtomicBool = AtomicBool::new(false);

/// Say whether every registration of the process goes through [`register`]
/// (true for a preloaded shim, whose exports interpose libgcc's; false when
/// loaded late, where registrations go straight to libgcc).
pub fn set_complete(on: bool) {
    SEES_ALL.store(on, Ordering::Release);
}

/// True if a code address this table and the loaded objects do not cover
/// has no unwind information libgcc knows either.
#[inline]
pub(crate) fn complete() -> bool {
    SEES_ALL.load(Ordering::Acquire) && !MISSED.load(Ordering::Acquire)
}

/// True if a section was ever registered through [`register`], or libgcc
/// may know sections this table does not.
pub(crate) fn any() -> bool {
    IN_USE.load(Ordering::Acquire) != 0 || !complete()
}

/// How a registration names its sections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registered {
    /// `begin` is one `.eh_frame` section, ended by a zero length
    /// (`__register_frame`, `__register_frame_info*`).
    Section,
    /// `begin` is a null-ended array of such sections
    /// (`__register_frame_table`, `__register_frame_info_table*`).
    Table,
}

/// Remember what the program registered with libgcc at `begin` (call after
/// libgcc's own registration returned), with the bases
/// `__register_frame_info_bases` gives (0 otherwise). Outside malloc.
///
/// # Safety
/// `begin` is what the program passed to libgcc, which reads it as this
/// crate does: valid until the program deregisters it.
pub unsafe fn register(begin: u64, how: Registered, text: u64, data: u64) {
    if begin == 0 {
        return;
    }
    AT_FORK.call_once(|| {
        // SAFETY: a handler with the C ABI that touches only atomics.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    });
    let _writing = Writing::take();
    let mut remembered = true;
    let mut add = |start: u64| {
        // SAFETY: a section the program registered (this function's contract).
        match unsafe { Section::at(start, text, data) } {
            Some(section) if section.is_empty() => {}
            Some(section) => remembered &= insert(begin, &section),
            None => remembered = false,
        }
    };
    match how {
        Registered::Section => add(begin),
        Registered::Table => {
            for index in 0..MAX_SECTIONS as u64 {
                // SAFETY: a null-ended array of section pointers (the contract).
                let start = unsafe { core::ptr::read_unaligned((begin + index * 8) as *const u64) };
                if start == 0 {
                    break;
                }
                add(start);
            }
        }
    }
    if !remembered {
        MISSED.store(true, Ordering::Release);
    }
    crate::cache::invalidate_all_caches();
}

/// Puts `section` in a free slot under `key`; false if the table is full.
fn insert(key: u64, section: &Section) -> bool {
    // libgcc's `__register_frame` registers through `__register_frame_info`,
    // both interposed: the second call finds the section remembered.
    let in_use = IN_USE.load(Ordering::Relaxed);
    if ENTRIES[..in_use].iter().any(|entry| {
        entry.key.load(Ordering::Relaxed) == key
            && entry.start.load(Ordering::Relaxed) == section.start
    }) {
        return true;
    }
    let Some(slot) = ENTRIES
        .iter()
        .position(|entry| entry.key.load(Ordering::Relaxed) == 0)
    else {
        return false;
    };
    let entry = &ENTRIES[slot];
    entry.start.store(section.start, Ordering::Relaxed);
    entry.len.store(section.len, Ordering::Relaxed);
    entry.text.store(section.text, Ordering::Relaxed);
    entry.data.store(section.data, Ordering::Relaxed);
    entry.low.store(section.low, Ordering::Relaxed);
    entry.high.store(section.high, Ordering::Relaxed);
    entry.key.store(key, Ordering::SeqCst);
    IN_USE.fetch_max(slot + 1, Ordering::SeqCst);
    true
}

/// Forget what the program registered at `begin` (call before libgcc's own
/// deregistration): once this returns, no walk reads its sections.
/// Outside malloc.
pub fn deregister(begin: u64) {
    let _writing = Writing::take();
    let mut removed = false;
    for entry in &ENTRIES[..IN_USE.load(Ordering::SeqCst)] {
        if entry.key.load(Ordering::Relaxed) == begin {
            entry.key.store(0, Ordering::SeqCst);
            removed = true;
        }
    }
    if !removed {
        return;
    }
    crate::cache::invalidate_all_caches();
    // A reader that saw the entry announced itself before it loaded the
    // key (both sequentially consistent), so it is counted here until it is
    // done with the section.
    while READERS.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// The rule for `address` from a registered section's FDE, or `None` if no
/// registered FDE covers it. Inside malloc: see the module docs.
pub(crate) fn rule_for(address: u64) -> Option<Rule> {
    let in_use = IN_USE.load(Ordering::Acquire);
    if in_use == 0 {
        return None;
    }
    READERS.fetch_add(1, Ordering::SeqCst);
    let mut found = None;
    for entry in &ENTRIES[..in_use] {
        if entry.key.load(Ordering::SeqCst) == 0
            || !(entry.low.load(Ordering::Relaxed)..entry.high.load(Ordering::Relaxed))
                .contains(&address)
        {
            continue;
        }
        let section = Section {
            start: entry.start.load(Ordering::Relaxed),
            len: entry.len.load(Ordering::Relaxed),
            text: entry.text.load(Ordering::Relaxed),
            data: entry.data.load(Ordering::Relaxed),
            low: 0,
            high: 0,
        };
        // SAFETY: a registered section, not yet deregistered when its key was
        // read; `deregister` waits for this reader before it returns.
        found = unsafe { cfi::rule_in_section(&section, address) };
        if found.is_some() {
            break;
        }
    }
    // Saturating: a fork from a signal handler that interrupted this read
    // starts the child's count at 0 (`after_fork_in_child`).
    let _ = READERS.fetch_update(Ordering::Release, Ordering::Relaxed, |readers| {
        Some(readers.saturating_sub(1))
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.eh_frame` section with one FDE covering `[code, code + 16)`:
    /// `push rbp` at 0, then CFA = rsp + 16 and rbp saved at CFA − 16
    /// (augmentation "", so addresses are absolute).
    pub(crate) fn one_fde(code: u64) -> Vec<u8> {
        let mut cie = vec![0, 0, 0, 0, 1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1];
        while !(cie.len() + 4).is_multiple_of(8) {
            cie.push(0);
        }
        let mut section = (cie.len() as u32).to_le_bytes().to_vec();
        section.extend(&cie);
        let mut fde = ((section.len() + 4) as u32).to_le_bytes().to_vec();
        fde.extend(code.to_le_bytes());
        fde.extend(16u64.to_le_bytes());
        fde.extend([0x41, 0x0e, 16, 0x86, 2]);
        while !(fde.len() + 4).is_multiple_of(8) {
            fde.push(0);
        }
        section.extend((fde.len() as u32).to_le_bytes());
        section.extend(&fde);
        section.extend([0, 0, 0, 0]);
        section
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_registered_fde_gives_its_rule_until_deregistered() {
        let code = 0x7000_1234_0000u64;
        let section = one_fde(code);
        let begin = section.as_ptr() as u64;
        let generation = crate::cache::current_generation();
        assert_eq!(rule_for(code + 5), None);
        // SAFETY: a section that outlives its registration.
        unsafe { register(begin, Registered::Section, 0, 0) };
        assert!(crate::cache::current_generation() > generation);
        let expected = Rule::step(crate::rule::CfaBase::Rsp, 16, Some(-16));
        assert_eq!(rule_for(code + 5), Some(expected));
        assert_eq!(rule_for(code + 16), None, "past the FDE");
        assert_eq!(
            crate::cfi::rule_for_address(code + 5),
            expected,
            "the walk's rule"
        );
        let generation = crate::cache::current_generation();
        deregister(begin);
        assert!(crate::cache::current_generation() > generation);
        assert_eq!(rule_for(code + 5), None);
        assert_eq!(crate::cfi::rule_for_address(code + 5), Rule::NoUnwindInfo);
    }

    #[test]
    fn a_table_of_sections_is_registered_and_deregistered_together() {
        let (first, second) = (0x7100_0000_0000u64, 0x7200_0000_0000u64);
        let sections = [one_fde(first), one_fde(second)];
        let table = [sections[0].as_ptr() as u64, sections[1].as_ptr() as u64, 0];
        let begin = table.as_ptr() as u64;
        // SAFETY: sections and table outlive the registration.
        unsafe { register(begin, Registered::Table, 0, 0) };
        assert!(rule_for(first + 1).is_some() && rule_for(second + 1).is_some());
        deregister(begin);
        assert!(rule_for(first + 1).is_none() && rule_for(second + 1).is_none());
        assert!(!MISSED.load(Ordering::Relaxed), "both sections understood");
    }
}
