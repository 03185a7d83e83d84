//! `dlclose`: snapshot the module map before an object may be unloaded, so
//! stacks captured in it keep a module to symbolize against.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use heapsample_recorder::{modules, state, tls};

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
static NEXT_DLCLOSE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

fn next_dlclose() -> Option<DlcloseFn> {
    let mut address = NEXT_DLCLOSE.load(Relaxed);
    if address.is_null() {
        // SAFETY: dlsym with a valid name; not called inside malloc.
        address = unsafe { libc::dlsym(libc::RTLD_NEXT, c"dlclose".as_ptr()) };
        NEXT_DLCLOSE.store(address, Relaxed);
    }
    // SAFETY: the next definition of dlclose has this signature.
    (!address.is_null()).then(|| unsafe { core::mem::transmute::<*mut c_void, DlcloseFn>(address) })
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
