//! The next allocator in symbol lookup order, found with
//! `dlsym(RTLD_NEXT, ...)` on first use.
//!
//! Owns the table of the next definitions of every interposed function and
//! the bootstrap arena that serves allocations made while `dlsym` itself runs
//! (before there is anything to forward to). `free` and `realloc` recognise
//! arena pointers and never hand them to the real allocator.
//!
//! Resolution happens inside the first hook call, which may come before the
//! shim's constructor (libstdc++ allocates first). It takes no lock the
//! program could hold: concurrent first callers spin until it is done.

use core::ffi::{CStr, c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};

use crate::{sys, tls};

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type MemalignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;
type UsableSizeFn = unsafe extern "C" fn(*mut c_void) -> usize;

/// A lazily resolved function pointer (transparent: the assembly fast paths
/// jump through it as a plain code pointer).
#[repr(transparent)]
pub struct NextFn {
    address: AtomicPtr<c_void>,
}

impl NextFn {
    const fn unresolved() -> Self {
        NextFn {
            address: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Unresolved, but already callable: `until_resolved` stands in.
    const fn standing_in(until_resolved: *mut c_void) -> Self {
        NextFn {
            address: AtomicPtr::new(until_resolved),
        }
    }

    /// The resolved address, or null if the symbol has no next definition.
    #[inline(always)]
    pub fn address(&self) -> *mut c_void {
        self.address.load(Ordering::Relaxed)
    }

    fn resolve(&self, name: &CStr) {
        self.address
            .store(sys::next_definition(name), Ordering::Relaxed);
    }
}

/// The next definitions of the malloc family.
pub struct NextAllocator {
    pub malloc: NextFn,
    pub free: NextFn,
    pub calloc: NextFn,
    pub realloc: NextFn,
    pub memalign: NextFn,
    pub posix_memalign: NextFn,
    pub aligned_alloc: NextFn,
    pub malloc_usable_size: NextFn,
}

/// Resolved once; read-only afterwards.
pub static NEXT: NextAllocator = NextAllocator {
    malloc: NextFn::unresolved(),
    // The shim's own frees come here even before anything is resolved
    // (the exported free through `routes::FREE_PASS`, which starts as the
    // same stand-in).
    free: NextFn::standing_in(free_until_resolved as FreeFn as *mut c_void),
    calloc: NextFn::unresolved(),
    realloc: NextFn::unresolved(),
    memalign: NextFn::unresolved(),
    posix_memalign: NextFn::unresolved(),
    aligned_alloc: NextFn::unresolved(),
    malloc_usable_size: NextFn::unresolved(),
};

const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const RESOLVED: u8 = 2;
static RESOLUTION: AtomicU8 = AtomicU8::new(UNRESOLVED);

/// True once the next allocator's functions are known.
#[inline(always)]
pub fn resolved() -> bool {
    RESOLUTION.load(Ordering::Acquire) == RESOLVED
}

/// Resolve the next allocator unless done. Returns false if the calling
/// thread is itself in the middle of resolving (then the bootstrap arena must
/// serve the request).
pub fn ensure_resolved() -> bool {
    loop {
        match RESOLUTION.compare_exchange(
            UNRESOLVED,
            RESOLVING,
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let _guard = tls::Guard::enter();
                tls::current().set_flag(tls::FLAG_RESOLVING, true);
                resolve_all();
                tls::current().set_flag(tls::FLAG_RESOLVING, false);
                RESOLUTION.store(RESOLVED, Ordering::Release);
                return true;
            }
            Err(RESOLVED) => return true,
            Err(_) if tls::current().flags.load(Ordering::Relaxed) & tls::FLAG_RESOLVING != 0 => {
                return false;
            }
            Err(_) => core::hint::spin_loop(),
        }
    }
}

fn resolve_all() {
    NEXT.malloc.resolve(c"malloc");
    NEXT.free.resolve(c"free");
    NEXT.calloc.resolve(c"calloc");
    NEXT.realloc.resolve(c"realloc");
    NEXT.memalign.resolve(c"memalign");
    NEXT.posix_memalign.resolve(c"posix_memalign");
    NEXT.aligned_alloc.resolve(c"aligned_alloc");
    NEXT.malloc_usable_size.resolve(c"malloc_usable_size");
}

/// The next `free` until it is known: resolve, then forward. A block of the
/// bootstrap arena is never released, and a free made while the calling
/// thread is itself resolving leaks its block (nothing to forward to yet).
/// Nothing is counted: the profiler has not started, so nothing of this
/// pointer was counted either.
///
/// # Safety
/// The C contract of `free`.
pub(crate) unsafe extern "C" fn free_until_resolved(pointer: *mut c_void) {
    if in_bootstrap_arena(pointer) || !ensure_resolved() {
        return;
    }
    // SAFETY: resolved just now; a pointer of the next allocator.
    unsafe { free(pointer) }
}

// The forwarding calls. Each assumes `resolved()`; the mandatory functions
// (malloc, free, calloc, realloc) exist in every C library.

/// The next `malloc`.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
#[inline(always)]
pub unsafe fn malloc(size: usize) -> *mut c_void {
    // SAFETY: resolved to the next definition of `malloc`, same signature.
    unsafe { core::mem::transmute::<*mut c_void, MallocFn>(NEXT.malloc.address())(size) }
}

/// The next `free`.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
#[inline(always)]
pub unsafe fn free(pointer: *mut c_void) {
    // SAFETY: resolved to the next definition of `free`, same signature.
    unsafe { core::mem::transmute::<*mut c_void, FreeFn>(NEXT.free.address())(pointer) }
}

/// The next `calloc`.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
#[inline(always)]
pub unsafe fn calloc(count: usize, size: usize) -> *mut c_void {
    // SAFETY: resolved to the next definition of `calloc`, same signature.
    unsafe { core::mem::transmute::<*mut c_void, CallocFn>(NEXT.calloc.address())(count, size) }
}

/// The next `realloc`.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
#[inline(always)]
pub unsafe fn realloc(pointer: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: resolved to the next definition of `realloc`, same signature.
    unsafe { core::mem::transmute::<*mut c_void, ReallocFn>(NEXT.realloc.address())(pointer, size) }
}

/// The next `memalign`, or `posix_memalign` where there is no `memalign`.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
pub unsafe fn memalign(alignment: usize, size: usize) -> *mut c_void {
    let address = NEXT.memalign.address();
    if !address.is_null() {
        // SAFETY: the next definition of `memalign`, same signature.
        return unsafe {
            core::mem::transmute::<*mut c_void, MemalignFn>(address)(alignment, size)
        };
    }
    let mut result = core::ptr::null_mut();
    // SAFETY: forwards to posix_memalign with a valid out pointer.
    match unsafe { posix_memalign(&mut result, alignment.max(8), size) } {
        0 => result,
        error => {
            crate::sys::set_errno(error);
            core::ptr::null_mut()
        }
    }
}

/// The next `posix_memalign`, or `memalign` where there is none.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
pub unsafe fn posix_memalign(out: *mut *mut c_void, alignment: usize, size: usize) -> c_int {
    let address = NEXT.posix_memalign.address();
    if !address.is_null() {
        // SAFETY: the next definition of `posix_memalign`, same signature.
        return unsafe {
            core::mem::transmute::<*mut c_void, PosixMemalignFn>(address)(out, alignment, size)
        };
    }
    if !alignment.is_power_of_two() || !alignment.is_multiple_of(core::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    // SAFETY: memalign's next definition exists when posix_memalign's does not
    // (checked by the caller's resolution); `out` is valid per the contract.
    unsafe {
        let pointer = memalign(alignment, size);
        if pointer.is_null() {
            return libc::ENOMEM;
        }
        *out = pointer;
    }
    0
}

/// The next `aligned_alloc`, or `memalign` where there is none.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
pub unsafe fn aligned_alloc(alignment: usize, size: usize) -> *mut c_void {
    let address = NEXT.aligned_alloc.address();
    if address.is_null() {
        // SAFETY: forwards to memalign, which accepts the same arguments.
        return unsafe { memalign(alignment, size) };
    }
    // SAFETY: the next definition of `aligned_alloc`, same signature.
    unsafe { core::mem::transmute::<*mut c_void, MemalignFn>(address)(alignment, size) }
}

/// The next `malloc_usable_size`, or 0 where the allocator has none.
///
/// # Safety
/// The C contract of the function; the next allocator must be resolved.
#[inline(always)]
pub unsafe fn usable_size(pointer: *mut c_void) -> usize {
    let address = NEXT.malloc_usable_size.address();
    if address.is_null() || pointer.is_null() {
        return 0;
    }
    // SAFETY: the next definition of `malloc_usable_size`, same signature.
    unsafe { core::mem::transmute::<*mut c_void, UsableSizeFn>(address)(pointer) }
}

// ---- the bootstrap arena ----

const ARENA_SIZE: usize = 256 * 1024;
const ARENA_ALIGN: usize = 16;

#[repr(C, align(4096))]
struct Arena([u8; ARENA_SIZE]);

static mut ARENA: Arena = Arena([0; ARENA_SIZE]);
static ARENA_USED: AtomicUsize = AtomicUsize::new(0);
/// The arena's pages are pinned in the live-sample filter (first use).
static ARENA_PINNED: AtomicBool = AtomicBool::new(false);

fn arena_base() -> usize {
    core::ptr::addr_of!(ARENA) as usize
}

/// True once the arena handed out anything.
pub fn bootstrap_used() -> bool {
    ARENA_USED.load(Ordering::Relaxed) != 0
}

/// True if `pointer` was handed out by the bootstrap arena.
#[inline(always)]
pub fn in_bootstrap_arena(pointer: *mut c_void) -> bool {
    (pointer as usize).wrapping_sub(arena_base()) < ARENA_SIZE
}

/// Allocate zeroed memory from the arena (never reused, so always zero).
/// Each block is preceded by its size. Returns null when the arena is full.
pub fn bootstrap_alloc(size: usize, alignment: usize) -> *mut c_void {
    if !ARENA_PINNED.swap(true, Ordering::Relaxed) {
        // From now on a free of any arena page takes free's route, which
        // recognises arena blocks and never passes them on.
        crate::live_table::LIVE.pin_pages(arena_base(), ARENA_SIZE);
    }
    let alignment = alignment.max(ARENA_ALIGN);
    let mut used = ARENA_USED.load(Ordering::Relaxed);
    loop {
        let start = (arena_base() + used + ARENA_ALIGN + alignment - 1) & !(alignment - 1);
        let end = start + size;
        if end > arena_base() + ARENA_SIZE {
            return core::ptr::null_mut();
        }
        match ARENA_USED.compare_exchange_weak(
            used,
            end - arena_base(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                // SAFETY: [start - 8, end) lies inside the arena and was just
                // reserved for this caller alone.
                unsafe { *((start - 8) as *mut usize) = size };
                return start as *mut c_void;
            }
            Err(now) => used = now,
        }
    }
}

/// The size recorded in front of an arena block.
///
/// # Safety
/// `pointer` was returned by [`bootstrap_alloc`] (not merely a pointer into
/// the arena): the word in front of it holds its size.
pub unsafe fn bootstrap_size(pointer: *mut c_void) -> usize {
    // SAFETY: per the contract, the size word bootstrap_alloc wrote in front
    // of the block, which nothing writes again.
    unsafe { *((pointer as usize - 8) as *const usize) }
}
