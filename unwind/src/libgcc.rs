//! The libgcc `_Unwind_Backtrace` binding: the reference unwinder and the fallback.
//!
//! Owns the ~20-line `extern "C"` declaration of libgcc's backtrace API, the choice of
//! which copy of libgcc answers (the process's own libgcc_s once [`use_process_libgcc`]
//! found one, else the copy linked in, which `libheapsample.so` carries statically) and
//! the callback that copies instruction pointers into a caller's slice.
//!
//! Runs inside malloc: it must never allocate or lock on its own. (libgcc itself finds
//! FDEs through `_dl_find_object` on glibc ≥ 2.35 and does not allocate, unless a
//! program registered frames with it: see `registered`.) Only
//! [`use_process_libgcc`] runs outside malloc.

use core::ffi::{CStr, c_char, c_int, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Opaque `struct _Unwind_Context`.
#[repr(C)]
struct UnwindContext {
    _opaque: [u8; 0],
}

/// `_Unwind_Reason_Code` values used here.
const URC_NO_REASON: c_int = 0;
const URC_NORMAL_STOP: c_int = 4;

type TraceFn = extern "C" fn(context: *mut UnwindContext, arg: *mut c_void) -> c_int;

/// `struct dwarf_eh_bases` (unwind-dw2-fde.h).
#[repr(C)]
struct DwarfEhBases {
    tbase: *mut c_void,
    dbase: *mut c_void,
    func: *mut c_void,
}

#[link(name = "gcc_s")]
unsafe extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(context: *mut UnwindContext) -> usize;
    fn _Unwind_GetCFA(context: *mut UnwindContext) -> usize;
    fn _Unwind_Find_FDE(pc: *mut c_void, bases: *mut DwarfEhBases) -> *const c_void;
}

/// The entry points of one copy of libgcc (a context one copy made is only read by the
/// same copy).
struct Libgcc {
    backtrace: BacktraceFn,
    get_ip: ContextFn,
    get_cfa: ContextFn,
    find_fde: FindFdeFn,
}

type BacktraceFn = unsafe extern "C" fn(TraceFn, *mut c_void) -> c_int;
type ContextFn = unsafe extern "C" fn(*mut UnwindContext) -> usize;
type FindFdeFn = unsafe extern "C" fn(*mut c_void, *mut DwarfEhBases) -> *const c_void;

/// The copy linked in.
static LINKED: Libgcc = Libgcc {
    backtrace: _Unwind_Backtrace,
    get_ip: _Unwind_GetIP,
    get_cfa: _Unwind_GetCFA,
    find_fde: _Unwind_Find_FDE,
};
/// The process's own libgcc_s, once found.
static PROCESS: OnceLock<Libgcc> = OnceLock::new();
/// `[start, end)` of the process's libgcc_s mapping, once found.
static PROCESS_START: AtomicU64 = AtomicU64::new(0);
static PROCESS_END: AtomicU64 = AtomicU64::new(0);
/// How far above the stack pointer [`may_hold_its_lock`] looks for libgcc's
/// frames: the profiler's own frames between the allocation and the
/// fallback take a few KiB.
const LOCK_HOLDER_REACH: u64 = 64 << 10;
/// The copy in use: [`LINKED`] or [`PROCESS`].
static IN_USE: AtomicPtr<Libgcc> = AtomicPtr::new((&raw const LINKED).cast_mut());

fn libgcc() -> &'static Libgcc {
    // SAFETY: IN_USE points to LINKED or to PROCESS's value, both static and never
    // changed once published.
    unsafe { &*IN_USE.load(Ordering::Acquire) }
}

/// Answer with the process's own libgcc_s where it has one loaded (C++ and Rust programs
/// do), instead of the copy linked in: frames a JIT registered with `__register_frame*`
/// are only in the list of the copy it called. Returns whether it does. Outside
/// `malloc`: walks the loaded objects (`dl_iterate_phdr`, the loader lock) and looks the
/// symbols up with `dlsym`, which may allocate.
pub fn use_process_libgcc() -> bool {
    if PROCESS.get().is_some() {
        return true;
    }
    if !libgcc_s_loaded() {
        return false;
    }
    let find = |name: &CStr| {
        // SAFETY: dlsym with a NUL-terminated name in the global scope.
        let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        (!address.is_null()).then_some(address)
    };
    let (Some(backtrace), Some(get_ip), Some(get_cfa), Some(find_fde)) = (
        find(c"_Unwind_Backtrace"),
        find(c"_Unwind_GetIP"),
        find(c"_Unwind_GetCFA"),
        find(c"_Unwind_Find_FDE"),
    ) else {
        return false;
    };
    // SAFETY: the loaded libgcc's definitions of these functions, whose signatures are
    // the ones declared above.
    let found = unsafe {
        Libgcc {
            backtrace: core::mem::transmute::<*mut c_void, BacktraceFn>(backtrace),
            get_ip: core::mem::transmute::<*mut c_void, ContextFn>(get_ip),
            get_cfa: core::mem::transmute::<*mut c_void, ContextFn>(get_cfa),
            find_fde: core::mem::transmute::<*mut c_void, FindFdeFn>(find_fde),
        }
    };
    if let Some((start, end)) = crate::cfi::object_range(find_fde as u64) {
        PROCESS_START.store(start, Ordering::Relaxed);
        PROCESS_END.store(end, Ordering::Relaxed);
    }
    let process = PROCESS.get_or_init(|| found);
    IN_USE.store((process as *const Libgcc).cast_mut(), Ordering::Release);
    true
}

/// True if this thread may hold libgcc's object mutex, so that the fallback
/// walk, whose every FDE lookup takes it once frames are registered, would
/// wait for itself: the process's libgcc_s answers, frames may be registered
/// with it (`registered`), and a return address into it lies on this
/// thread's stack within [`LOCK_HOLDER_REACH`] above the stack pointer
/// (libgcc mallocs under the mutex only in its own FDE lookup, whose frames
/// are then right above the allocation's). A stale word can make it say so
/// wrongly: the capture then ends early, never waits. Inside malloc: reads
/// only this thread's stack, below its top.
#[inline(never)]
pub(crate) fn may_hold_its_lock() -> bool {
    let Some(process) = PROCESS.get() else {
        return false;
    };
    if !core::ptr::eq(libgcc(), process) || !crate::registered::any() {
        return false;
    }
    let (start, end) = (
        PROCESS_START.load(Ordering::Relaxed),
        PROCESS_END.load(Ordering::Relaxed),
    );
    let here = core::hint::black_box(0u64);
    let low = (&raw const here as u64 + 7) & !7;
    #[cfg(target_arch = "x86_64")]
    let top = crate::walk::stack_top(low);
    #[cfg(target_arch = "aarch64")]
    let top = crate::aarch64_walk::stack_top(low);
    if top == u64::MAX {
        // Another stack (a signal stack): its bounds are unknown, so assume the worst.
        return true;
    }
    let high = top.min(low.saturating_add(LOCK_HOLDER_REACH));
    (low..high).step_by(8).any(|slot| {
        // SAFETY: 8-aligned, between this frame and the top of this thread's
        // own mapped stack.
        let word = unsafe { core::ptr::read_volatile(slot as *const u64) };
        (start..end).contains(&word)
    })
}

/// True if an object named `libgcc_s.so.1` is loaded (checked before any `dlsym`, whose
/// failure allocates an error message).
fn libgcc_s_loaded() -> bool {
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        found: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid entry for the duration of the call.
        let name: *const c_char = unsafe { (*info).dlpi_name };
        if name.is_null() {
            return 0;
        }
        // SAFETY: the loader's NUL-terminated name of the object.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        let is_libgcc_s = name
            .rsplit(|&b| b == b'/')
            .next()
            .is_some_and(|file| file == b"libgcc_s.so.1");
        // SAFETY: `found` is the `bool` passed below, alive for the walk.
        unsafe { *found.cast::<bool>() |= is_libgcc_s };
        c_int::from(is_libgcc_s)
    }
    let mut found = false;
    // SAFETY: the callback only reads the entries it is given and writes `found`.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut found).cast()) };
    found
}

/// True if libgcc knows an FDE for `address`: its own lookup, which also sees frames a
/// JIT registered with `__register_frame*` (it takes libgcc's object mutex only if any
/// were, and then mallocs under it at the first lookup after a registration). Asked
/// inside malloc only where `registered` may not know every registration.
pub(crate) fn has_fde(address: u64) -> bool {
    let mut bases = DwarfEhBases {
        tbase: core::ptr::null_mut(),
        dbase: core::ptr::null_mut(),
        func: core::ptr::null_mut(),
    };
    // SAFETY: libgcc only reads its own tables and writes `bases`.
    !unsafe { (libgcc().find_fde)(address as *mut c_void, &mut bases) }.is_null()
}

/// What the trace callback needs: where to write, and which frames to drop first.
struct TraceState<'a> {
    /// The copy of libgcc making the walk (its contexts are only read by itself).
    libgcc: &'static Libgcc,
    frames: &'a mut [u64],
    written: usize,
    frames_to_skip: usize,
    /// Frames are dropped until one whose stack pointer is this (0: none is).
    start_at_rsp: u64,
}

extern "C" fn record_frame(context: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `&mut TraceState` passed to `_Unwind_Backtrace` by
    // `backtrace` below, alive and not otherwise borrowed for the whole call.
    let state = unsafe { &mut *arg.cast::<TraceState<'_>>() };
    // SAFETY: libgcc passes a valid context for the duration of the callback.
    let ip = unsafe { (state.libgcc.get_ip)(context) } as u64;
    if ip == 0 {
        // libgcc's terminal pseudo-frame after the outermost one.
        return URC_NORMAL_STOP;
    }
    if state.frames_to_skip > 0 {
        state.frames_to_skip -= 1;
        return URC_NO_REASON;
    }
    // In a trace callback the context's CFA is the one of the frame it called: this
    // frame's stack pointer at the call.
    if state.start_at_rsp != 0 {
        // SAFETY: as above.
        if unsafe { (state.libgcc.get_cfa)(context) } as u64 != state.start_at_rsp {
            return URC_NO_REASON;
        }
        state.start_at_rsp = 0;
    }
    let Some(slot) = state.frames.get_mut(state.written) else {
        return URC_NORMAL_STOP;
    };
    *slot = ip;
    state.written += 1;
    if state.written == state.frames.len() {
        URC_NORMAL_STOP
    } else {
        URC_NO_REASON
    }
}

/// Writes the instruction pointers of the current stack into `frames`, innermost first,
/// after dropping the first `frames_to_skip` of them. The first IP libgcc reports is
/// the one inside `backtrace` itself, the second one is inside its caller, and so on.
///
/// Returns the number written. Never inlined, so the skip count is predictable.
#[inline(never)]
pub(crate) fn backtrace(frames: &mut [u64], frames_to_skip: usize) -> usize {
    trace(frames, frames_to_skip, 0)
}

/// Like [`backtrace`], but starts at the frame whose stack pointer is `rsp`: given the
/// stack pointer of a function's caller after the call returns (the function's CFA),
/// the first frame written is that caller's. If no frame has it, writes the frames
/// from the caller of `backtrace_from`'s caller on (not a tail call, see
/// `crate::finish`).
#[inline(never)]
pub(crate) fn backtrace_from(frames: &mut [u64], rsp: u64) -> usize {
    match trace(frames, 0, rsp) {
        0 => trace(frames, 2, 0),
        written => core::hint::black_box(written),
    }
}

#[inline(always)]
fn trace(frames: &mut [u64], frames_to_skip: usize, start_at_rsp: u64) -> usize {
    if frames.is_empty() {
        return 0;
    }
    let libgcc = libgcc();
    let mut state = TraceState {
        libgcc,
        frames,
        written: 0,
        frames_to_skip,
        start_at_rsp,
    };
    // SAFETY: `record_frame` only dereferences `arg` as the `TraceState` created above,
    // which outlives the call. The return code only says why the walk stopped.
    unsafe {
        (libgcc.backtrace)(record_frame, (&raw mut state).cast::<c_void>());
    }
    core::hint::black_box(state.written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn walk() -> Vec<u64> {
        let mut frames = [0u64; 64];
        let written = trace(&mut frames, 0, 0);
        frames[..written].to_vec()
    }

    /// A test binary has libgcc_s loaded: the switch finds it, and walks and
    /// FDE lookups through the functions it found answer as before.
    #[test]
    fn the_process_libgcc_is_found_and_answers_alike() {
        let mut walks = Vec::new();
        let mut fde_found = Vec::new();
        for switch in [false, true] {
            if switch {
                assert!(use_process_libgcc(), "libgcc_s.so.1 is loaded here");
                assert!(use_process_libgcc(), "a second call finds it again");
            }
            walks.push(walk());
            fde_found.push(has_fde(walk as fn() -> Vec<u64> as usize as u64));
        }
        // The innermost frames are this test's two call sites (the loop may be
        // unrolled); from the test's caller on the walks are the same.
        assert!(walks[0].len() > 3, "{:x?}", walks[0]);
        assert_eq!(walks[0].len(), walks[1].len());
        assert_eq!(walks[0][2..], walks[1][2..]);
        assert_eq!(fde_found, [true, true]);
        assert!(libgcc_s_loaded());
    }
}
