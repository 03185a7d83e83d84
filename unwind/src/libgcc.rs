//! The libgcc `_Unwind_Backtrace` binding: the reference unwinder and the fallback.
//!
//! Owns the ~20-line `extern "C"` declaration of libgcc_s's backtrace API and the
//! callback that copies instruction pointers into a caller's slice.
//!
//! Runs inside malloc: it must never allocate or lock on its own. (libgcc itself finds
//! FDEs through `_dl_find_object` on glibc ≥ 2.35 and does not allocate.)

use core::ffi::{c_int, c_void};

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

/// True if libgcc knows an FDE for `address`: its own lookup, which also sees frames a
/// JIT registered with `__register_frame*` (it takes libgcc's object mutex only if any
/// were).
pub(crate) fn has_fde(address: u64) -> bool {
    let mut bases = DwarfEhBases {
        tbase: core::ptr::null_mut(),
        dbase: core::ptr::null_mut(),
        func: core::ptr::null_mut(),
    };
    // SAFETY: libgcc only reads its own tables and writes `bases`.
    !unsafe { _Unwind_Find_FDE(address as *mut c_void, &mut bases) }.is_null()
}

/// What the trace callback needs: where to write, and which frames to drop first.
struct TraceState<'a> {
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
    let ip = unsafe { _Unwind_GetIP(context) } as u64;
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
        if unsafe { _Unwind_GetCFA(context) } as u64 != state.start_at_rsp {
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
    let mut state = TraceState {
        frames,
        written: 0,
        frames_to_skip,
        start_at_rsp,
    };
    // SAFETY: `record_frame` only dereferences `arg` as the `TraceState` created above,
    // which outlives the call. The return code only says why the walk stopped.
    unsafe {
        _Unwind_Backtrace(record_frame, (&raw mut state).cast::<c_void>());
    }
    core::hint::black_box(state.written)
}
