//! `dlclose`: snapshot the module map before an object may be unloaded, so
//! stacks captured in it keep a module to symbolize against.

use core::ffi::{c_int, c_void};

use heapsample_recorder::sys::{ErrnoGuard, LazyNext};
use heapsample_recorder::{modules, state, tls};

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
static NEXT_DLCLOSE: LazyNext = LazyNext::new(c"dlclose");

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
