//! The routes: where the exported malloc, free, calloc and realloc go when
//! their fast path declines, chosen once the mode is known, and the paths
//! behind them.
//!
//! Owns the route table and the paths for each mode: the crossing
//! allocation, the possibly sampled free, the profiled calloc and realloc,
//! `prof_exact`'s malloc and free, and the `*_other` paths for start-up,
//! `prof_exact`'s calloc and realloc and the bootstrap arena. Rules kept
//! here: a live sample is forgotten before its memory is released (and
//! re-inserted if realloc fails); pointers from the bootstrap arena never
//! reach the real allocator; calloc overflow before start-up gives NULL +
//! ENOMEM.
//!
//! Runs inside malloc: no lock, no syscall, no allocation on these paths
//! (start-up and the sample event, reached from here, have their own rules).
//! Each path opens a hook scope (`spin_lock::enter_hook`): debug builds check
//! there which of the profiler's locks may be held and taken.

use core::ffi::c_void;
use core::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use crate::backtrace::HookEntry;
use crate::call_accounting::{after_alloc, after_alloc_any, give_back_units};
use crate::live_table::LIVE;
use crate::next_alloc::{self, in_bootstrap_arena};
use crate::state::{
    self, MODE_ARENA_IN_USE, MODE_PASS_THROUGH, MODE_PROFILING, MODE_PROFILING_EXACT,
};
use crate::tls::{self, ThreadState};
use crate::{call_accounting, sample_event, spin_lock, startup};

/// Start the profiler if nobody has (see `startup`), pointing the routes at
/// the paths for the mode it chooses. Returns false when the request must
/// be served from the bootstrap arena.
pub fn start() -> bool {
    startup::start(set_routes)
}

/// The state is not known yet: start the profiler. Returns false when the
/// request must be served from the bootstrap arena.
#[cold]
#[inline(never)]
pub fn start_or_bootstrap() -> bool {
    start()
}

// ---- routes: where each hook goes ----
//
// Each of malloc, free, calloc and realloc has a route, a function pointer
// chosen once the mode is known, taken only when its assembly fast path
// (`fast_path`) declines: malloc's, calloc's and realloc's route is then the
// crossing allocation (or a possibly sampled old block) while profiling, the
// next allocator under `prof:false`; free's is the possibly sampled free, the
// next free under `prof:false`. Start-up uses the `*_other` paths;
// `prof_exact` its own malloc and free (the `*_other` ones once the arena is
// in use) and the `*_other` calloc and realloc.
//
// The allocating fast paths enter their route with the request's countdown
// units taken (malloc always; calloc unless the product overflowed; realloc
// unless the size is 0): every route of theirs but the next allocator's
// gives them back first (`give_back_units`) and counts the allocation once
// it succeeded. Rust callers inside the shim mirror the fast path
// (`malloc`, `contracts::calloc`, `contracts::realloc`).
//
// The profiling routes are entered by a jump from the naked exports, so rsp
// and rbp are still as at the export's entry. `malloc_crossing`,
// `calloc_profiled_with_entry` and `realloc_profiled_with_entry` are naked
// stubs that pass them on (`HookEntry`) to their body, so a sample's stack
// walk starts at the hook's caller instead of stepping the profiler's own
// frames. A stub costs three instructions per call of its route, which the
// fast paths take only at a crossing. Called from inside the shim, the
// stub's own entry is the one passed: the walk then starts at the shim's
// caller, whose frames the capture drops.

/// A counting `operator new` (`cxx`), which has no fast path of its own,
/// passes its entry on only at periods up to 2^this bytes. A sample that starts at the hook's caller skips 3–4 stepped frames
/// (300–400 instructions, python at `lg_prof_sample:0`); the stub costs 3
/// per call, which pays once about one call in a hundred is sampled, i.e.
/// periods of about a hundred times the typical request.
pub const ENTRY_STUB_MAX_LG: u32 = 12;

/// A naked route `$name` with the C signature `($($arg: $ty),*)` that puts
/// rsp and rbp in the next two argument registers (`$rsp`, `$rbp`) and
/// jumps to `$body`, which takes them after the C arguments.
macro_rules! route_with_entry {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $body:ident, $rsp:tt, $rbp:tt) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> *mut c_void {
            core::arch::naked_asm!(
                concat!("mov ", $rsp, ", rsp"),
                concat!("mov ", $rbp, ", rbp"),
                "jmp {body}",
                body = sym $body,
            )
        }

        $(#[$doc])*
        #[cfg(target_arch = "aarch64")]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> *mut c_void {
            core::arch::naked_asm!(
                concat!("mov ", $crate::entry_register!($rsp), ", sp"),
                concat!("mov ", $crate::entry_register!($rbp), ", x29"),
                "b {body}",
                body = sym $body,
            )
        }
    };
}

/// The aarch64 argument register in the position of an x86_64 one (the
/// entry stubs name the registers that follow a C signature's arguments).
#[doc(hidden)]
#[macro_export]
macro_rules! entry_register {
    ("rsi") => {
        "x1"
    };
    ("rdx") => {
        "x2"
    };
    ("rcx") => {
        "x3"
    };
    ("r8") => {
        "x4"
    };
    ("r9") => {
        "x5"
    };
}

pub type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
pub type FreeFn = unsafe extern "C" fn(*mut c_void);
pub type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
pub type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;

/// Where `malloc` goes now.
pub static MALLOC_ROUTE: AtomicPtr<()> = AtomicPtr::new(malloc_other as MallocFn as *mut ());
/// Where `free` goes now.
pub static FREE_ROUTE: AtomicPtr<()> = AtomicPtr::new(free_other as FreeFn as *mut ());
/// Where `free` goes when the page filter says nothing of the pointer: the
/// next `free` (until it is resolved, a stand-in that resolves it first),
/// or free's route under `prof_exact`, which counts every free.
pub static FREE_PASS: AtomicPtr<()> =
    AtomicPtr::new(next_alloc::free_until_resolved as FreeFn as *mut ());
/// Where `calloc` goes now.
pub static CALLOC_ROUTE: AtomicPtr<()> = AtomicPtr::new(calloc_other as CallocFn as *mut ());
/// Where `realloc` goes now.
pub static REALLOC_ROUTE: AtomicPtr<()> = AtomicPtr::new(realloc_other as ReallocFn as *mut ());

/// Point the hooks at the paths for `mode` (called once the mode is set).
/// Once the bootstrap arena has served a block, a free or realloc may
/// receive an arena pointer: those keep paths that recognise it.
pub fn set_routes(mode: u8) {
    let arena_in_use = mode & MODE_ARENA_IN_USE != 0;
    let next = &next_alloc::NEXT;
    let (free_other, realloc_other): (*mut (), *mut ()) = (
        free_other as FreeFn as *mut (),
        realloc_other as ReallocFn as *mut (),
    );
    let (malloc, free, calloc, realloc): (*mut (), *mut (), *mut (), *mut ()) =
        match mode & !MODE_ARENA_IN_USE {
            MODE_PASS_THROUGH if arena_in_use => (
                next.malloc.address().cast(),
                free_other,
                next.calloc.address().cast(),
                realloc_other,
            ),
            MODE_PASS_THROUGH => (
                next.malloc.address().cast(),
                next.free.address().cast(),
                next.calloc.address().cast(),
                next.realloc.address().cast(),
            ),
            MODE_PROFILING => (
                malloc_crossing as MallocFn as *mut (),
                free_maybe_sampled as FreeFn as *mut (),
                calloc_profiled_with_entry as CallocFn as *mut (),
                if arena_in_use {
                    realloc_other
                } else {
                    realloc_profiled_with_entry as ReallocFn as *mut ()
                },
            ),
            // prof_exact: every call takes its route, which counts usable
            // bytes and frees (the allocating fast paths always decline: the
            // countdown stays 0; free's pass is its route, `FREE_PASS`);
            // malloc and free have routes of their own, the arena's blocks
            // the `*_other` paths.
            MODE_PROFILING_EXACT if !arena_in_use => (
                malloc_exact as MallocFn as *mut (),
                free_exact as FreeFn as *mut (),
                calloc_other as CallocFn as *mut (),
                realloc_other,
            ),
            MODE_PROFILING_EXACT => (
                malloc_other as MallocFn as *mut (),
                free_other,
                calloc_other as CallocFn as *mut (),
                realloc_other,
            ),
            // No mode chosen: the start-up paths stay.
            _ => return,
        };
    let pass = if mode & !MODE_ARENA_IN_USE == MODE_PROFILING_EXACT {
        free
    } else {
        next.free.address().cast()
    };
    MALLOC_ROUTE.store(malloc, Relaxed);
    FREE_ROUTE.store(free, Relaxed);
    FREE_PASS.store(pass, Relaxed);
    CALLOC_ROUTE.store(calloc, Relaxed);
    REALLOC_ROUTE.store(realloc, Relaxed);
}

/// `malloc` for callers inside the shim: what the exported `malloc`
/// (`fast_path::malloc_entry!`) does, in Rust.
///
/// # Safety
/// The C contract of `malloc`.
pub unsafe fn malloc(size: usize) -> *mut c_void {
    let state = tls::current();
    if state.sampler.take(size) {
        ThreadState::bump(&state.allocations, 1);
        // SAFETY: a positive countdown means the profiler is running, so the
        // next allocator is resolved.
        return unsafe { next_alloc::malloc(size) };
    }
    // SAFETY: a route is always a function with malloc's signature.
    unsafe { core::mem::transmute::<*mut (), MallocFn>(MALLOC_ROUTE.load(Relaxed))(size) }
}

/// `calloc`'s fast path in Rust, the aarch64 export: what
/// `fast_path::calloc_entry!` does on x86_64 (a product that overflows
/// takes the route before any unit is taken; a crossing takes it with the
/// units taken).
///
/// # Safety
/// The C contract of `calloc`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn calloc_fast(count: usize, size: usize) -> *mut c_void {
    if let Some(bytes) = count.checked_mul(size) {
        let state = tls::current();
        if state.sampler.take(bytes) {
            ThreadState::bump(&state.allocations, 1);
            // SAFETY: a positive countdown means the profiler is running,
            // so the next allocator is resolved.
            return unsafe { next_alloc::calloc(count, size) };
        }
    }
    // SAFETY: a route is always a function with calloc's signature.
    unsafe { core::mem::transmute::<*mut (), CallocFn>(CALLOC_ROUTE.load(Relaxed))(count, size) }
}

/// `realloc`'s fast path in Rust, the aarch64 export: what
/// `fast_path::realloc_entry!` does on x86_64 (a size of 0 takes the route
/// before any unit is taken; a crossing, or an old block whose page the
/// live-sample filter marks, takes it with the units taken).
///
/// # Safety
/// The C contract of `realloc`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn realloc_fast(pointer: *mut c_void, size: usize) -> *mut c_void {
    if size != 0 {
        let state = tls::current();
        if state.sampler.take(size) && !LIVE.free_takes_route(pointer as usize) {
            ThreadState::bump(&state.allocations, 1);
            // SAFETY: a positive countdown means the profiler is running,
            // so the next allocator is resolved; the old block is not one
            // of ours (the filter would have sent it to the route).
            return unsafe { next_alloc::realloc(pointer, size) };
        }
    }
    // SAFETY: a route is always a function with realloc's signature.
    unsafe {
        core::mem::transmute::<*mut (), ReallocFn>(REALLOC_ROUTE.load(Relaxed))(pointer, size)
    }
}

route_with_entry!(
    /// malloc's route while profiling, for the allocation that crosses the
    /// countdown (or finds it at 0): allocate, then count (and sample) only
    /// if it succeeded.
    ///
    /// # Safety
    /// The C contract of `malloc`; the next allocator is resolved.
    malloc_crossing(size: usize) -> malloc_crossing_from, "rsi", "rdx"
);

/// [`malloc_crossing`]'s body, given its entry registers.
#[cold]
#[inline(never)]
unsafe extern "C" fn malloc_crossing_from(size: usize, rsp: u64, rbp: u64) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    give_back_units(size);
    // SAFETY: resolved before MODE was set.
    let pointer = unsafe { next_alloc::malloc(size) };
    // SAFETY: returned by the next allocator just now; the registers of the
    // route's entry, which is running.
    unsafe { after_alloc(pointer, size, HookEntry::new(rsp, rbp)) };
    pointer
}

/// Any mode but the two plain ones: not started, or the arena is in use.
#[cold]
#[inline(never)]
unsafe extern "C" fn malloc_other(size: usize) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    give_back_units(size);
    if !state::started() && !start_or_bootstrap() {
        return next_alloc::bootstrap_alloc(size, 16);
    }
    // SAFETY: started, so the next allocator is resolved.
    let pointer = unsafe { next_alloc::malloc(size) };
    if state::profiling() {
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(pointer, size, HookEntry::UNKNOWN) };
    }
    pointer
}

/// malloc's route under `prof_exact` (the arena not in use): what
/// [`malloc_other`] does there, without its tests of the mode.
#[cold]
#[inline(never)]
unsafe extern "C" fn malloc_exact(size: usize) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    let state = tls::current();
    state.sampler.give_back(size);
    // SAFETY: resolved before MODE was set.
    let pointer = unsafe { next_alloc::malloc(size) };
    // SAFETY: returned by the next allocator just now, by this thread.
    unsafe { call_accounting::after_alloc_exact(state, pointer, size) };
    pointer
}

/// free's route under `prof_exact` (the arena not in use, so no pointer is
/// its): what [`free_other`] does there, without its tests of the mode.
#[cold]
#[inline(never)]
unsafe extern "C" fn free_exact(pointer: *mut c_void) {
    let _hook = spin_lock::enter_hook();
    if !pointer.is_null() {
        // SAFETY: a live pointer of the next allocator, released below.
        unsafe { call_accounting::before_free_exact(pointer) };
    }
    // SAFETY: resolved before MODE was set; released once.
    unsafe { next_alloc::free(pointer) }
}

/// `free` for callers inside the shim: what the exported `free`
/// (`fast_path::free_entry!`) does, in Rust.
///
/// # Safety
/// The C contract of `free`.
pub unsafe fn free(pointer: *mut c_void) {
    let to = if LIVE.free_takes_route(pointer as usize) {
        &FREE_ROUTE
    } else {
        &FREE_PASS
    };
    // SAFETY: a route and the pass are always functions with free's
    // signature.
    unsafe { core::mem::transmute::<*mut (), FreeFn>(to.load(Relaxed))(pointer) }
}

/// free's route while profiling, taken when the page filter hits: forget
/// the sample, then release. Arena blocks are never released.
///
/// # Safety
/// The C contract of `free`; the next allocator is resolved.
#[cold]
#[inline(never)]
pub unsafe extern "C" fn free_maybe_sampled(pointer: *mut c_void) {
    let _hook = spin_lock::enter_hook();
    if pointer.is_null() || in_bootstrap_arena(pointer) {
        return;
    }
    // SAFETY: a live allocation; the real free comes after.
    let _ = unsafe { sample_event::on_sampled_free(pointer) };
    // SAFETY: a pointer of the next allocator, released once.
    unsafe { next_alloc::free(pointer) }
}

/// free's route at start-up, under `prof_exact`, and with the arena in use
/// under `prof:false`; also the next `free` until that is resolved.
///
/// # Safety
/// The C contract of `free`.
#[cold]
#[inline(never)]
pub unsafe extern "C" fn free_other(pointer: *mut c_void) {
    let _hook = spin_lock::enter_hook();
    if in_bootstrap_arena(pointer) {
        return;
    }
    if !state::started() && !start_or_bootstrap() {
        return;
    }
    if state::profiling() && !pointer.is_null() {
        // SAFETY: a live pointer of the next allocator, released below.
        unsafe { call_accounting::before_free_any(pointer) };
    }
    // SAFETY: started, so the next allocator is resolved; released once.
    unsafe { next_alloc::free(pointer) }
}

route_with_entry!(
    /// calloc's route while profiling.
    ///
    /// # Safety
    /// The C contract of `calloc`; the next allocator is resolved.
    calloc_profiled_with_entry(count: usize, size: usize) -> calloc_profiled_from, "rdx", "rcx"
);

/// [`calloc_profiled_with_entry`]'s body, given its entry registers.
#[inline(never)]
unsafe extern "C" fn calloc_profiled_from(
    count: usize,
    size: usize,
    rsp: u64,
    rbp: u64,
) -> *mut c_void {
    // SAFETY: forwarded; the registers of the route's entry, which is running.
    unsafe { calloc_counted(count, size, HookEntry::new(rsp, rbp)) }
}

/// The profiled calloc, in the hook entered at `entry`.
///
/// # Safety
/// The C contract of `calloc`; the next allocator is resolved.
#[inline(always)]
unsafe fn calloc_counted(count: usize, size: usize, entry: HookEntry) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    give_back_calloc_units(count, size);
    // SAFETY: resolved before MODE was set.
    let pointer = unsafe { next_alloc::calloc(count, size) };
    // SAFETY: returned by the next allocator just now.
    unsafe { after_alloc(pointer, count.wrapping_mul(size), entry) };
    pointer
}

#[cold]
#[inline(never)]
unsafe extern "C" fn calloc_other(count: usize, size: usize) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    give_back_calloc_units(count, size);
    if !state::started() && !start_or_bootstrap() {
        return match count.checked_mul(size) {
            Some(bytes) => next_alloc::bootstrap_alloc(bytes, 16),
            None => enomem(),
        };
    }
    // SAFETY: started, so the next allocator is resolved.
    let pointer = unsafe { next_alloc::calloc(count, size) };
    if state::profiling() {
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(pointer, count.wrapping_mul(size), HookEntry::UNKNOWN) };
    }
    pointer
}

/// calloc's fast path took the product's units unless it overflowed.
#[inline(always)]
fn give_back_calloc_units(count: usize, size: usize) {
    if let Some(bytes) = count.checked_mul(size) {
        give_back_units(bytes);
    }
}

/// realloc's fast path took the new size's units unless it is 0.
#[inline(always)]
fn give_back_realloc_units(size: usize) {
    if size != 0 {
        give_back_units(size);
    }
}

pub fn enomem() -> *mut c_void {
    crate::sys::set_errno(libc::ENOMEM);
    core::ptr::null_mut()
}

#[cold]
#[inline(never)]
unsafe extern "C" fn realloc_other(pointer: *mut c_void, size: usize) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    give_back_realloc_units(size);
    if !pointer.is_null() && in_bootstrap_arena(pointer) {
        // SAFETY: moving a bootstrap block into the real allocator.
        return unsafe { realloc_from_bootstrap(pointer, size) };
    }
    if !state::started() && !start_or_bootstrap() {
        return if pointer.is_null() {
            next_alloc::bootstrap_alloc(size, 16)
        } else {
            core::ptr::null_mut()
        };
    }
    if state::profiling() {
        // SAFETY: started (resolved, mode set); realloc's contract, forwarded.
        return unsafe { realloc_profiled(pointer, size) };
    }
    // SAFETY: started, so the next allocator is resolved.
    unsafe { next_alloc::realloc(pointer, size) }
}

/// realloc while profiling, for a caller without an entry to pass.
///
/// # Safety
/// The C contract of `realloc`; the next allocator is resolved.
unsafe extern "C" fn realloc_profiled(pointer: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { realloc_counted(pointer, size, HookEntry::UNKNOWN) }
}

route_with_entry!(
    /// realloc's route while profiling.
    ///
    /// # Safety
    /// The C contract of `realloc`; the next allocator is resolved.
    realloc_profiled_with_entry(pointer: *mut c_void, size: usize) -> realloc_profiled_from, "rdx", "rcx"
);

/// [`realloc_profiled_with_entry`]'s body, given its entry registers.
unsafe extern "C" fn realloc_profiled_from(
    pointer: *mut c_void,
    size: usize,
    rsp: u64,
    rbp: u64,
) -> *mut c_void {
    give_back_realloc_units(size);
    // SAFETY: forwarded; the registers of the route's entry, which is running.
    unsafe { realloc_counted(pointer, size, HookEntry::new(rsp, rbp)) }
}

/// The profiled realloc, in the hook entered at `entry`.
///
/// # Safety
/// The C contract of `realloc`; the next allocator is resolved.
#[inline(always)]
unsafe fn realloc_counted(pointer: *mut c_void, size: usize, entry: HookEntry) -> *mut c_void {
    let _hook = spin_lock::enter_hook();
    if pointer.is_null() {
        // SAFETY: realloc(NULL, n) as the allocator defines it.
        let result = unsafe { next_alloc::realloc(pointer, size) };
        // SAFETY: returned by the next allocator just now.
        unsafe { after_alloc_any(result, size, entry) };
        return result;
    }
    let old_usable = if state::exact() {
        // SAFETY: a live allocation.
        unsafe { next_alloc::usable_size(pointer) }
    } else {
        0
    };
    // A sampled object is forgotten before the allocator may release it.
    let sampled = if LIVE.may_contain(pointer as usize) {
        // SAFETY: still allocated.
        take_live_sample(pointer)
    } else {
        None
    };
    // SAFETY: the C contract, forwarded.
    let result = unsafe { next_alloc::realloc(pointer, size) };
    if result.is_null() && size != 0 {
        // Failed: the old block is untouched and still sampled.
        if let Some(sample) = sampled {
            // Back where its slot was most likely taken from.
            let _ = LIVE.insert(pointer as usize, sample, crate::tls::EntryPlace::Main);
        }
        return result;
    }
    if state::exact() {
        let state = tls::current();
        ThreadState::bump(&state.frees, 1);
        state::exact_live_down(old_usable as u64);
    }
    if let Some(sample) = sampled {
        sample_event::release(sample);
    }
    // SAFETY: returned by the next allocator just now.
    unsafe { after_alloc_any(result, size, entry) };
    result
}

#[cold]
fn take_live_sample(pointer: *mut c_void) -> Option<crate::live_table::LiveSample> {
    // SAFETY: the pointer is still allocated.
    LIVE.remove(pointer as usize)
        .map(|sample| unsafe { sample_event::with_usable(sample, pointer) })
}

/// realloc of a block of the bootstrap arena: a new block of the real
/// allocator with its bytes (the arena block is never released).
///
/// # Safety
/// `pointer` is a live block of the bootstrap arena; realloc's contract.
#[cold]
unsafe fn realloc_from_bootstrap(pointer: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: malloc's contract.
    let result = unsafe { malloc(size) };
    if !result.is_null() {
        // SAFETY: a live allocation (realloc's contract) in the arena is
        // one of its blocks.
        let old_size = unsafe { next_alloc::bootstrap_size(pointer) };
        // SAFETY: both blocks hold at least min(old, new) bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(pointer.cast::<u8>(), result.cast(), old_size.min(size))
        };
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> [*mut (); 4] {
        [
            MALLOC_ROUTE.load(Relaxed),
            FREE_ROUTE.load(Relaxed),
            CALLOC_ROUTE.load(Relaxed),
            REALLOC_ROUTE.load(Relaxed),
        ]
    }

    fn pass() -> *mut () {
        FREE_PASS.load(Relaxed)
    }

    /// Every mode's routes, named (the only test of this crate's unit tests
    /// that sets them; the profiler is not started here).
    #[test]
    fn each_mode_has_its_routes() {
        let _period = crate::sampling_law::tests::PERIOD_LOCK.lock();
        let other = [
            malloc_other as MallocFn as *mut (),
            free_other as FreeFn as *mut (),
            calloc_other as CallocFn as *mut (),
            realloc_other as ReallocFn as *mut (),
        ];
        assert_eq!(routes(), other, "before start-up");
        let stand_in = next_alloc::free_until_resolved as FreeFn as *mut ();
        assert_eq!(pass(), stand_in, "before start-up");
        let next = &next_alloc::NEXT;
        let next_routes = [
            next.malloc.address().cast(),
            next.free.address().cast(),
            next.calloc.address().cast(),
            next.realloc.address().cast(),
        ];
        let profiled = [
            malloc_crossing as MallocFn as *mut (),
            free_maybe_sampled as FreeFn as *mut (),
            calloc_profiled_with_entry as CallocFn as *mut (),
            realloc_profiled_with_entry as ReallocFn as *mut (),
        ];
        set_routes(MODE_PASS_THROUGH);
        assert_eq!(routes(), next_routes, "prof:false goes straight on");
        assert_eq!(pass(), next_routes[1]);
        set_routes(MODE_PASS_THROUGH | MODE_ARENA_IN_USE);
        assert_eq!(
            routes(),
            [next_routes[0], other[1], next_routes[2], other[3]],
            "arena blocks must never reach the next free or realloc"
        );
        set_routes(MODE_PROFILING);
        assert_eq!(routes(), profiled);
        assert_eq!(pass(), next_routes[1], "unsampled frees go straight on");
        set_routes(MODE_PROFILING | MODE_ARENA_IN_USE);
        assert_eq!(routes(), [profiled[0], profiled[1], profiled[2], other[3]]);
        set_routes(MODE_PROFILING_EXACT);
        assert_eq!(
            routes(),
            [
                malloc_exact as MallocFn as *mut (),
                free_exact as FreeFn as *mut (),
                other[2],
                other[3]
            ],
            "prof_exact counts on its own malloc and free, the *_other paths"
        );
        assert_eq!(
            pass(),
            free_exact as FreeFn as *mut (),
            "every free counted"
        );
        set_routes(MODE_PROFILING_EXACT | MODE_ARENA_IN_USE);
        assert_eq!(routes(), other);
        assert_eq!(pass(), other[1]);
    }
}
