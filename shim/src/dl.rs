//! `dlopen` and `dlclose`: remember what a relative `dlopen` name meant when
//! it was given, and snapshot the module map before an object may be
//! unloaded, so stacks captured in it keep a module to symbolize against.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use heapsample_recorder::{modules, profiler, tls};

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
static NEXT_DLCLOSE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static NEXT_DLOPEN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

fn next(slot: &AtomicPtr<c_void>, name: &core::ffi::CStr) -> *mut c_void {
    let mut address = slot.load(Relaxed);
    if address.is_null() {
        // SAFETY: dlsym with a valid name; not called inside malloc.
        address = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        slot.store(address, Relaxed);
    }
    address
}

fn next_dlclose() -> Option<DlcloseFn> {
    let address = next(&NEXT_DLCLOSE, c"dlclose");
    // SAFETY: the next definition of dlclose has this signature.
    (!address.is_null()).then(|| unsafe { core::mem::transmute::<*mut c_void, DlcloseFn>(address) })
}

/// Called by [`dlopen`] with its arguments: note the name, return the next
/// `dlopen` (null if there is none).
unsafe extern "C" fn before_dlopen(file: *const c_char) -> *mut c_void {
    if !file.is_null() && profiler::profiling() {
        let errno = heapsample_recorder::next_alloc::errno();
        let _guard = tls::Guard::enter();
        // SAFETY: dlopen's argument is a NUL-terminated string.
        modules::note_dlopen(unsafe { core::ffi::CStr::from_ptr(file) });
        heapsample_recorder::next_alloc::set_errno(errno);
    }
    next(&NEXT_DLOPEN, c"dlopen")
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
    let profiling = profiler::MODE.load(Relaxed) == profiler::MODE_PROFILING;
    if profiling {
        let _guard = tls::Guard::enter();
        modules::before_dlclose();
    }
    let Some(real) = next_dlclose() else {
        return -1;
    };
    // SAFETY: forwarding the caller's handle.
    let result = unsafe { real(handle) };
    if profiling {
        let errno = heapsample_recorder::next_alloc::errno();
        let _guard = tls::Guard::enter();
        modules::after_dlclose();
        heapsample_recorder::next_alloc::set_errno(errno);
    }
    result
}
