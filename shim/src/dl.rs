//! `dlopen` and `dlclose`: remember what a relative `dlopen` name meant when
//! it was given, and snapshot the module map before an object may be
//! unloaded, so stacks captured in it keep a module to symbolize against.

use core::ffi::{c_char, c_int, c_void};

use heapsample_recorder::sys::{ErrnoGuard, LazyNext};
use heapsample_recorder::{modules, state, tls};

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
static NEXT_DLCLOSE: LazyNext = LazyNext::new(c"dlclose");
static NEXT_DLOPEN: LazyNext = LazyNext::new(c"dlopen");

/// Called by [`dlopen`] with its arguments: note the name, return the next
/// `dlopen` (null if there is none).
unsafe extern "C" fn before_dlopen(file: *const c_char) -> *mut c_void {
    if !file.is_null() && state::profiling() {
        let _errno = ErrnoGuard::save();
        let _guard = tls::Guard::enter();
        // SAFETY: dlopen's argument is a NUL-terminated string.
        modules::note_dlopen(unsafe { core::ffi::CStr::from_ptr(file) });
    }
    // Looked up like dlclose's, as the program's own call.
    NEXT_DLOPEN.get()
}

/// `dlopen` ends in a tail jump to the next definition, so that the loader
/// still sees the program's code as the caller (it searches the caller's
/// RUNPATH and loads into the caller's namespace).
///
/// # Safety
/// The C contract of `dlopen`.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void {
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {before}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "ret",
        before = sym before_dlopen,
    )
}

/// # Safety
/// The C contract of `dlclose`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let profiling = state::profiling();
    if profiling {
        let _guard = tls::Guard::enter();
        modules::before_dlclose();
    }
    let address = NEXT_DLCLOSE.get();
    if address.is_null() {
        return -1;
    }
    // SAFETY: the next definition of dlclose has this signature.
    let real = unsafe { core::mem::transmute::<*mut c_void, DlcloseFn>(address) };
    // SAFETY: forwarding the caller's handle.
    let result = unsafe { real(handle) };
    if profiling {
        let _errno = ErrnoGuard::save();
        let _guard = tls::Guard::enter();
        modules::after_dlclose();
    }
    result
}
