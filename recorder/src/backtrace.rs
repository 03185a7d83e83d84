//! Stack capture for sampled allocations.
//!
//! Owns the call into the unwinder and the removal of the shim's own frames.
//! Uses libgcc's `_Unwind_Backtrace`, which on glibc ≥ 2.35 finds unwind
//! tables through the lock-free `_dl_find_object` and does not allocate.
//!
//! Runs inside malloc's slow path: no allocation, no locks of ours.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *mut c_void,
    eh_frame: *mut c_void,
    reserved: [u64; 7],
}

unsafe extern "C" {
    fn _dl_find_object(address: *mut c_void, result: *mut DlFindObject) -> c_int;
    fn _Unwind_Backtrace(
        trace: extern "C" fn(*mut c_void, *mut c_void) -> c_int,
        argument: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(context: *mut c_void) -> usize;
}

const URC_NO_REASON: c_int = 0;
const URC_END_OF_STACK: c_int = 5;

/// The address range of the object that contains the profiler's code.
static OWN_START: AtomicUsize = AtomicUsize::new(0);
static OWN_END: AtomicUsize = AtomicUsize::new(0);

/// Learn the profiler's own address range, so its frames can be dropped.
pub fn init() {
    if let Some((start, end)) = object_range(init as fn() as usize) {
        set_own_range(start, end);
    }
}

/// Set the range whose frames are dropped (tests use this to keep their own).
pub fn set_own_range(start: usize, end: usize) {
    OWN_START.store(start, Relaxed);
    OWN_END.store(end, Relaxed);
}

fn is_own(address: usize) -> bool {
    address >= OWN_START.load(Relaxed) && address < OWN_END.load(Relaxed)
}

struct Collector<'a> {
    frames: &'a mut [u64],
    len: usize,
}

extern "C" fn collect_frame(context: *mut c_void, argument: *mut c_void) -> c_int {
    // SAFETY: `argument` is the Collector passed to _Unwind_Backtrace below,
    // alive for the whole walk.
    let collector = unsafe { &mut *argument.cast::<Collector>() };
    // SAFETY: `context` is the unwinder's live frame context.
    let address = unsafe { _Unwind_GetIP(context) };
    if address == 0 {
        return URC_END_OF_STACK;
    }
    if is_own(address) {
        return URC_NO_REASON;
    }
    if collector.len == collector.frames.len() {
        return URC_END_OF_STACK;
    }
    collector.frames[collector.len] = address as u64;
    collector.len += 1;
    URC_NO_REASON
}

/// Capture the calling thread's return addresses, innermost first, without
/// the profiler's own frames. Returns how many were written to `frames`.
#[inline(never)]
pub fn capture(frames: &mut [u64]) -> usize {
    let mut collector = Collector { frames, len: 0 };
    // SAFETY: the callback only touches the collector we pass.
    unsafe {
        _Unwind_Backtrace(collect_frame, (&mut collector as *mut Collector).cast());
    }
    collector.len
}

/// Start and end of the object containing `address`, lock-free.
pub fn object_range(address: usize) -> Option<(usize, usize)> {
    let mut found = DlFindObject {
        flags: 0,
        map_start: core::ptr::null_mut(),
        map_end: core::ptr::null_mut(),
        link_map: core::ptr::null_mut(),
        eh_frame: core::ptr::null_mut(),
        reserved: [0; 7],
    };
    // SAFETY: as in init.
    (unsafe { _dl_find_object(address as *mut c_void, &mut found) } == 0)
        .then_some((found.map_start as usize, found.map_end as usize))
}
