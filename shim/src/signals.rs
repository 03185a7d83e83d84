//! `sigaction` and `signal`: notice when the program takes over the signal
//! configured with `prof_signal` (signal dumps then stop, with one warning),
//! and forward the call unchanged. A child running in its parent's memory
//! (`vfork`, as Python's `subprocess` uses) that resets the signal before
//! `exec` changes nothing: the disposition it changes is its own.

use core::ffi::{c_int, c_void};

use heapsample_recorder::sys::{self, LazyNext};
use heapsample_recorder::{process, triggers};

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
        taking_over(signal);
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
    taking_over(signal);
    let address = NEXT_SIGNAL.get();
    if address.is_null() {
        sys::set_errno(libc::ENOSYS);
        return libc::SIG_ERR;
    }
    // SAFETY: the next definition of signal, same signature and arguments.
    unsafe { core::mem::transmute::<*mut c_void, SignalFn>(address)(signal, handler) }
}

/// The program sets the disposition of `signal`.
fn taking_over(signal: c_int) {
    if triggers::handles_dump_signal(signal) && !process::in_borrowed_memory() {
        triggers::on_program_sigaction(signal);
    }
}
