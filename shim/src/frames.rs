//! libgcc's frame registration, which JITs call to make their generated
//! code's unwind information known: `__register_frame*` and
//! `__deregister_frame*`, each forwarded to the next definition (the
//! process's libgcc_s), and each told to the walk
//! (`heapsample_recorder::backtrace::frames_registered`), which then steps
//! through those frames itself and never asks libgcc inside malloc: libgcc
//! takes its object mutex for every lookup once anything is registered, and
//! mallocs while holding it. A registration is remembered after libgcc's
//! own, and forgotten before libgcc's deregistration (which waits for any
//! walk still reading it), so the walk never reads a section the program
//! may have freed.
//!
//! The next definitions are found with `dlsym` at the first call, in the
//! program's call (outside malloc). Where none exists (no libgcc_s loaded)
//! the call does nothing, as it would have nothing to register with.

use core::ffi::c_void;

use heapsample_recorder::backtrace::{self, Registered};
use heapsample_recorder::sys::{ErrnoGuard, LazyNext};

type RegisterFn = unsafe extern "C" fn(*mut c_void);
type RegisterInfoFn = unsafe extern "C" fn(*mut c_void, *mut c_void);
type RegisterBasesFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void);
type DeregisterInfoFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;

static NEXT_REGISTER: LazyNext = LazyNext::new(c"__register_frame");
static NEXT_REGISTER_INFO: LazyNext = LazyNext::new(c"__register_frame_info");
static NEXT_REGISTER_INFO_BASES: LazyNext = LazyNext::new(c"__register_frame_info_bases");
static NEXT_REGISTER_TABLE: LazyNext = LazyNext::new(c"__register_frame_table");
static NEXT_REGISTER_INFO_TABLE: LazyNext = LazyNext::new(c"__register_frame_info_table");
static NEXT_REGISTER_INFO_TABLE_BASES: LazyNext =
    LazyNext::new(c"__register_frame_info_table_bases");
static NEXT_DEREGISTER: LazyNext = LazyNext::new(c"__deregister_frame");
static NEXT_DEREGISTER_INFO: LazyNext = LazyNext::new(c"__deregister_frame_info");
static NEXT_DEREGISTER_INFO_BASES: LazyNext = LazyNext::new(c"__deregister_frame_info_bases");

/// The next definition of `next` as a `T`, if there is one.
///
/// # Safety
/// `T` is the function pointer type of `next`'s C signature.
unsafe fn next<T: Copy>(next: &LazyNext) -> Option<T> {
    let address = next.get();
    // SAFETY: a non-null definition with the signature `T` names.
    (!address.is_null()).then(|| unsafe { core::mem::transmute_copy::<*mut c_void, T>(&address) })
}

/// Tell the walk about what libgcc just registered.
fn registered(begin: *mut c_void, how: Registered, text: *mut c_void, data: *mut c_void) {
    let _errno = ErrnoGuard::save();
    // SAFETY: `begin` is what the program registered with libgcc, which reads
    // it the same way until it is deregistered.
    unsafe { backtrace::frames_registered(begin as usize, how, text as usize, data as usize) };
}

/// Tell the walk to forget what the program is deregistering.
fn deregistering(begin: *mut c_void) {
    let _errno = ErrnoGuard::save();
    backtrace::frames_deregistering(begin as usize);
}

/// # Safety
/// libgcc's contract for `__register_frame`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __register_frame(begin: *mut c_void) {
    // SAFETY: the C signature of `__register_frame`.
    if let Some(real) = unsafe { next::<RegisterFn>(&NEXT_REGISTER) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin) };
        registered(
            begin,
            Registered::Section,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        );
    }
}

/// # Safety
/// libgcc's contract for `__register_frame_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __register_frame_info(begin: *mut c_void, object: *mut c_void) {
    // SAFETY: the C signature of `__register_frame_info`.
    if let Some(real) = unsafe { next::<RegisterInfoFn>(&NEXT_REGISTER_INFO) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin, object) };
        registered(
            begin,
            Registered::Section,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        );
    }
}

/// # Safety
/// libgcc's contract for `__register_frame_info_bases`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __register_frame_info_bases(
    begin: *mut c_void,
    object: *mut c_void,
    text: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: the C signature of `__register_frame_info_bases`.
    if let Some(real) = unsafe { next::<RegisterBasesFn>(&NEXT_REGISTER_INFO_BASES) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin, object, text, data) };
        registered(begin, Registered::Section, text, data);
    }
}

/// # Safety
/// libgcc's contract for `__register_frame_table`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __register_frame_table(begin: *mut c_void) {
    // SAFETY: the C signature of `__register_frame_table`.
    if let Some(real) = unsafe { next::<RegisterFn>(&NEXT_REGISTER_TABLE) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin) };
        registered(
            begin,
            Registered::Table,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        );
    }
}

/// # Safety
/// libgcc's contract for `__register_frame_info_table`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __register_frame_info_table(begin: *mut c_void, object: *mut c_void) {
    // SAFETY: the C signature of `__register_frame_info_table`.
    if let Some(real) = unsafe { next::<RegisterInfoFn>(&NEXT_REGISTER_INFO_TABLE) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin, object) };
        registered(
            begin,
            Registered::Table,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        );
    }
}

/// # Safety
/// libgcc's contract for `__register_frame_info_table_bases`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __register_frame_info_table_bases(
    begin: *mut c_void,
    object: *mut c_void,
    text: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: the C signature of `__register_frame_info_table_bases`.
    if let Some(real) = unsafe { next::<RegisterBasesFn>(&NEXT_REGISTER_INFO_TABLE_BASES) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin, object, text, data) };
        registered(begin, Registered::Table, text, data);
    }
}

/// # Safety
/// libgcc's contract for `__deregister_frame`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __deregister_frame(begin: *mut c_void) {
    deregistering(begin);
    // SAFETY: the C signature of `__deregister_frame`.
    if let Some(real) = unsafe { next::<RegisterFn>(&NEXT_DEREGISTER) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin) };
    }
}

/// # Safety
/// libgcc's contract for `__deregister_frame_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __deregister_frame_info(begin: *mut c_void) -> *mut c_void {
    deregistering(begin);
    // SAFETY: the C signature of `__deregister_frame_info`.
    match unsafe { next::<DeregisterInfoFn>(&NEXT_DEREGISTER_INFO) } {
        // SAFETY: forwarding the program's call.
        Some(real) => unsafe { real(begin) },
        None => core::ptr::null_mut(),
    }
}

/// # Safety
/// libgcc's contract for `__deregister_frame_info_bases`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __deregister_frame_info_bases(begin: *mut c_void) -> *mut c_void {
    deregistering(begin);
    // SAFETY: the C signature of `__deregister_frame_info_bases`.
    match unsafe { next::<DeregisterInfoFn>(&NEXT_DEREGISTER_INFO_BASES) } {
        // SAFETY: forwarding the program's call.
        Some(real) => unsafe { real(begin) },
        None => core::ptr::null_mut(),
    }
}
