//! The one-page nursery a table keeps beside its main part, where the thread
//! that survived a fork puts its new entries first (`tls::EntryPlace`).
//!
//! Owns the page's layout (a flag, then the slots), the probe order of a key
//! and the flag that tells lookups whether to probe at all. What a slot
//! holds and how it is claimed are the table's.
//!
//! Runs inside malloc: no allocation, no locks, no calls.

use core::sync::atomic::{AtomicU64, Ordering};

/// Slots a lookup or insertion probes.
const PROBES: usize = 16;

/// `N` slots of `T` after a flag, on one page of its own.
#[repr(C, align(4096))]
pub struct Nursery<T, const N: usize> {
    /// Nonzero once an entry was put here.
    used: AtomicU64,
    slots: [T; N],
}

impl<T, const N: usize> Nursery<T, N> {
    const ONE_PAGE: () = assert!(core::mem::size_of::<Self>() == 4096);

    /// A nursery of `slots`, never used.
    pub const fn new(slots: [T; N]) -> Self {
        let () = Self::ONE_PAGE;
        Nursery {
            used: AtomicU64::new(0),
            slots,
        }
    }

    /// True once an entry was put here: until then lookups need not probe.
    pub fn in_use(&self) -> bool {
        self.used.load(Ordering::Acquire) != 0
    }

    /// Note that an entry was put here (after it was).
    pub fn mark_used(&self) {
        if !self.in_use() {
            self.used.store(1, Ordering::Release);
        }
    }

    /// The slots an entry of `key` may occupy, in probe order.
    pub fn probes(&self, key: u64) -> impl Iterator<Item = &T> {
        let home = crate::sys::hash_word(key, 32) % N;
        (0..PROBES).map(move |probe| &self.slots[(home + probe) % N])
    }

    /// True if `slot` is one of this nursery's.
    pub fn holds(&self, slot: &T) -> bool {
        self.slots.as_ptr_range().contains(&(slot as *const T))
    }

    /// Every slot.
    pub fn slots(&self) -> &[T; N] {
        &self.slots
    }
}
