//! `sigaction` and `signal`: notice when the program takes over the signal
//! configured with `prof_signal` (signal dumps then stop, with one warning),
//! and forward the call unchanged.

use core::ffi::{c_int, c_void};

use heapsample_recorder::sys::{self, LazyNext};
use heapsample_recorder::triggers;

type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

static NEXT_SIGACTION: LazyNext = LazyNext::new(c"sigaction");
static NEXT_SIGNAL: LazyNext = LazyNext::new(c"signal");

/// # Safety
/// The C contract of `sigaction`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    signal: c_int,
    action: *const libc::sigaction,
    old_action: *mut libc::sigaction,
) -> c_int {
    if !action.is_null() {
        triggers::on_program_sigaction(signal);
    }
    let address = NEXT_SIGACTION.get();
    if address.is_null() {
        sys::set_errno(libc::ENOSYS);
        return -1;
    }
    // SAFETY: the next definition of sigaction, same signature and arguments.
    unsafe { core::mem::transmute::<*mut c_void, SigactionFn>(address)(signal, action, old_action) }
}

/// # Safety
/// The C contract of `signal`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(signal: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    triggers::on_program_sigaction(signal);
    let address = NEXT_SIGNAL.get();
    if address.is_null() {
        sys::set_errno(libc::ENOSYS);
        return libc::SIG_ERR;
    }
    // SAFETY: the next definition of signal, same signature and arguments.
    unsafe { core::mem::transmute::<*mut c_void, SignalFn>(address)(signal, handler) }
}
