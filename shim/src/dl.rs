//! `dlopen` and `dlclose`: remember what a relative `dlopen` name meant when
//! it was given, and snapshot the module map before an object may be
//! unloaded, so stacks captured in it keep a module to symbolize against.
//! In a process the profiler is attached to, also redirect the malloc
//! family of each object a `dlopen` loaded, and forget the slots of what a
//! `dlclose` unloaded (`heapsample_recorder::takeover`).

use core::ffi::{c_char, c_int, c_void};

use heapsample_recorder::sys::{ErrnoGuard, LazyNext};
use heapsample_recorder::{modules, state, takeover, tls};

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
        // A libgcc_s an earlier dlopen brought in (C++ plugins, JITs).
        heapsample_recorder::backtrace::use_process_libgcc();
    }
    if state::profiling() {
        // The object may land where generated code without unwind
        // information was.
        heapsample_recorder::backtrace::before_load();
    }
    // Looked up like dlclose's, as the program's own call.
    NEXT_DLOPEN.get()
}

/// Called by [`dlopen`] when it returns while attached: redirect what it
/// loaded. Returns the handle unchanged.
unsafe extern "C" fn after_dlopen(handle: *mut c_void) -> *mut c_void {
    if !handle.is_null() {
        let _errno = ErrnoGuard::save();
        let _guard = tls::Guard::enter();
        takeover::after_dlopen(crate::attach::own_code());
    }
    handle
}

/// `dlopen` ends in a tail jump to the next definition, so that the loader
/// still sees the program's code as the caller (it searches the caller's
/// RUNPATH and loads into the caller's namespace).
///
/// While attached it must also get control back. It then calls the next
/// definition with a return address inside the caller's code page that
/// holds a `ret` (`takeover::return_gadget`), above its own continuation:
/// the loader still sees the caller, the `ret` comes back here, and what
/// was loaded is redirected before the caller gets the handle. Without
/// such a byte (or under a shadow stack) it calls the next definition
/// plainly (the loader then sees this library as the caller).
///
/// # Safety
/// The C contract of `dlopen`.
#[cfg(target_arch = "x86_64")]
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
        "cmp byte ptr [rip + {redirecting}], 0",
        "jne 3f",
        "jmp rax",
        "2:",
        "ret",
        // Attached: rax is the next dlopen, [rsp] the caller's return.
        "3:",
        "push rdi",
        "push rsi",
        "push rax",
        "mov rdi, [rsp + 24]",
        "call {gadget}",
        "mov r11, rax",
        "pop rax",
        "pop rsi",
        "pop rdi",
        "test r11, r11",
        "jz 4f",
        "lea r10, [rip + 5f]",
        "push r10",
        "push r11",
        "jmp rax",
        "4:",
        "sub rsp, 8",
        "call rax",
        "add rsp, 8",
        // Back from the next dlopen (through the gadget or the plain call),
        // with [rsp] the caller's return again.
        "5:",
        "push rax",
        "mov rdi, rax",
        "call {after}",
        "pop rax",
        "ret",
        before = sym before_dlopen,
        redirecting = sym takeover::REDIRECTING,
        gadget = sym takeover::return_gadget,
        after = sym after_dlopen,
    )
}

/// `dlopen` on aarch64: the same tail jump to the next definition with the
/// caller's x30 untouched, so the loader sees the program's code as the
/// caller. While attached (not supported on aarch64 yet, so never) it
/// calls the next definition plainly and redirects what it loaded.
///
/// # Safety
/// The C contract of `dlopen`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void {
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-32]!",
        "mov x29, sp",
        "stp x0, x1, [sp, #16]",
        "bl {before}",
        "mov x16, x0",
        "ldp x0, x1, [sp, #16]",
        "ldp x29, x30, [sp], #32",
        "cbz x16, 2f",
        "adrp x17, {redirecting}",
        "ldrb w17, [x17, :lo12:{redirecting}]",
        "cbnz w17, 3f",
        "br x16",
        "2:",
        "mov x0, xzr",
        "ret",
        // Attached: call the next dlopen, then redirect what it loaded.
        "3:",
        "stp x29, x30, [sp, #-16]!",
        "mov x29, sp",
        "blr x16",
        "bl {after}",
        "ldp x29, x30, [sp], #16",
        "ret",
        before = sym before_dlopen,
        redirecting = sym takeover::REDIRECTING,
        after = sym after_dlopen,
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
        takeover::after_dlclose();
    }
    result
}
