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
use core::ptr::null_mut;

use heapsample_recorder::backtrace::{self, Registered};
use heapsample_recorder::sys::{ErrnoGuard, LazyNext};

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

/// The exported registration function `$name(begin, $args…)` (all
/// pointers): libgcc's (the next definition of `$symbol`) first, then the
/// walk told of `begin` as `$how`, with the bases `$text` and `$data`.
macro_rules! registration {
    ($name:ident, $symbol:literal, $how:expr, ($($arg:ident),*), $text:expr, $data:expr) => {
        /// # Safety
        /// libgcc's contract for the function of this name.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(begin: *mut c_void $(, $arg: *mut c_void)*) {
            static NEXT: LazyNext = LazyNext::new($symbol);
            type Real = unsafe extern "C" fn(*mut c_void $(, registration!(@pointer $arg))*);
            // SAFETY: `Real` is the C signature of the function of this name.
            if let Some(real) = unsafe { next::<Real>(&NEXT) } {
                // SAFETY: forwarding the program's call.
                unsafe { real(begin $(, $arg)*) };
                registered(begin, $how, $text, $data);
            }
        }
    };
    (@pointer $arg:ident) => { *mut c_void };
}

registration!(
    __register_frame,
    c"__register_frame",
    Registered::Section,
    (),
    null_mut(),
    null_mut()
);
registration!(
    __register_frame_info,
    c"__register_frame_info",
    Registered::Section,
    (object),
    null_mut(),
    null_mut()
);
registration!(
    __register_frame_info_bases,
    c"__register_frame_info_bases",
    Registered::Section,
    (object, text, data),
    text,
    data
);
registration!(
    __register_frame_table,
    c"__register_frame_table",
    Registered::Table,
    (),
    null_mut(),
    null_mut()
);
registration!(
    __register_frame_info_table,
    c"__register_frame_info_table",
    Registered::Table,
    (object),
    null_mut(),
    null_mut()
);
registration!(
    __register_frame_info_table_bases,
    c"__register_frame_info_table_bases",
    Registered::Table,
    (object, text, data),
    text,
    data
);

/// # Safety
/// libgcc's contract for `__deregister_frame`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __deregister_frame(begin: *mut c_void) {
    static NEXT: LazyNext = LazyNext::new(c"__deregister_frame");
    deregistering(begin);
    // SAFETY: the C signature of `__deregister_frame`.
    if let Some(real) = unsafe { next::<unsafe extern "C" fn(*mut c_void)>(&NEXT) } {
        // SAFETY: forwarding the program's call.
        unsafe { real(begin) };
    }
}

/// The exported `$name(begin) -> object`: the walk forgets `begin`, then
/// libgcc (the next definition of `$symbol`) deregisters it.
macro_rules! deregistration {
    ($name:ident, $symbol:literal) => {
        /// # Safety
        /// libgcc's contract for the function of this name.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(begin: *mut c_void) -> *mut c_void {
            static NEXT: LazyNext = LazyNext::new($symbol);
            type Real = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
            deregistering(begin);
            // SAFETY: `Real` is the C signature of the function of this name.
            match unsafe { next::<Real>(&NEXT) } {
                // SAFETY: forwarding the program's call.
                Some(real) => unsafe { real(begin) },
                None => null_mut(),
            }
        }
    };
}

deregistration!(__deregister_frame_info, c"__deregister_frame_info");
deregistration!(
    __deregister_frame_info_bases,
    c"__deregister_frame_info_bases"
);
