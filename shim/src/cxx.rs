//! C++ `operator new`/`delete` under their mangled names. Each export is a
//! single `jmp` through its route; the wrapper behind it, and the rules for
//! counting, are `heapsample_recorder::cxx`.
//!
//! The exports use the "C-unwind" ABI: a throwing `operator new` unwinds
//! through them to the program's handler. A counting `operator new`
//! wrapper also has a naked stub that passes rsp and rbp at the export's
//! entry on in the next two argument registers (`$rsp`, `$rbp`), so that
//! its samples' stacks start at the caller.

use core::ffi::c_void;

use heapsample_recorder::backtrace::HookEntry;
use heapsample_recorder::cxx::{self, NewCall, NextOperator, OperatorRoute};

/// A naked export's body: a tail jump through the route in `$route` (its
/// first word), leaving every argument register as the caller set it.
#[cfg(target_arch = "x86_64")]
macro_rules! jump_through_route {
    ($route:path) => {
        core::arch::naked_asm!("jmp qword ptr [rip + {route}]", route = sym $route)
    };
}

/// A naked export's body: a tail jump through the route in `$route` (its
/// first word), leaving every argument register and x30 as the caller set
/// them (x16 is the intra-procedure-call scratch register).
#[cfg(target_arch = "aarch64")]
macro_rules! jump_through_route {
    ($route:path) => {
        core::arch::naked_asm!(
            "adrp x16, {route}",
            "ldr x16, [x16, :lo12:{route}]",
            "br x16",
            route = sym $route,
        )
    };
}

macro_rules! operator_new {
    ($export:ident ( $($arg:ident : $ty:ty),* ), nothrow: $nothrow:expr, aligned: $align:expr, entry in $rsp:tt, $rbp:tt) => {
        /// # Safety
        /// The C++ contract of this operator.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $export(size: usize $(, $arg: $ty)*) -> *mut c_void {
            jump_through_route!($export::ROUTE)
        }

        #[allow(non_snake_case)]
        mod $export {
            use super::*;

            type Signature = unsafe extern "C-unwind" fn(usize $(, $ty)*) -> *mut c_void;
            pub static ROUTE: OperatorRoute = OperatorRoute::new(wrapper as Signature as *mut ());
            static NEXT: NextOperator = NextOperator::new(concat!(stringify!($export), "\0"));

            unsafe extern "C-unwind" fn wrapper(size: usize $(, $arg: $ty)*) -> *mut c_void {
                // SAFETY: forwarded; no entry.
                unsafe { body(size $(, $arg)*, HookEntry::UNKNOWN) }
            }

            #[cfg(target_arch = "x86_64")]
            #[unsafe(naked)]
            unsafe extern "C-unwind" fn wrapper_with_entry(size: usize $(, $arg: $ty)*) -> *mut c_void {
                core::arch::naked_asm!(
                    concat!("mov ", $rsp, ", rsp"),
                    concat!("mov ", $rbp, ", rbp"),
                    "jmp {body}",
                    body = sym wrapper_from,
                )
            }

            #[cfg(target_arch = "aarch64")]
            #[unsafe(naked)]
            unsafe extern "C-unwind" fn wrapper_with_entry(size: usize $(, $arg: $ty)*) -> *mut c_void {
                core::arch::naked_asm!(
                    concat!("mov ", heapsample_recorder::entry_register!($rsp), ", sp"),
                    concat!("mov ", heapsample_recorder::entry_register!($rbp), ", x29"),
                    "b {body}",
                    body = sym wrapper_from,
                )
            }

            unsafe extern "C-unwind" fn wrapper_from(size: usize $(, $arg: $ty)*, rsp: u64, rbp: u64) -> *mut c_void {
                // SAFETY: forwarded; the registers of the export's entry,
                // which is running.
                unsafe { body(size $(, $arg)*, HookEntry::new(rsp, rbp)) }
            }

            #[inline(always)]
            unsafe fn body(size: usize $(, $arg: $ty)*, entry: HookEntry) -> *mut c_void {
                let forward = |address: *mut c_void| {
                    // SAFETY: the next definition of this operator has this
                    // signature; forwarding the caller's arguments.
                    unsafe { core::mem::transmute::<*mut c_void, Signature>(address)(size $(, $arg)*) }
                };
                let call = NewCall { entry, with_entry: wrapper_with_entry as Signature as *mut () };
                // SAFETY: `forward` calls the next definition as required;
                // the entry per our caller.
                unsafe { cxx::operator_new(&NEXT, &ROUTE, size, $align, $nothrow, forward, call) }
            }
        }
    };
}

macro_rules! operator_delete {
    ($export:ident ( $($arg:ident : $ty:ty),* )) => {
        /// # Safety
        /// The C++ contract of this operator.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $export(pointer: *mut c_void $(, $arg: $ty)*) {
            jump_through_route!($export::ROUTE)
        }

        #[allow(non_snake_case)]
        mod $export {
            use super::*;

            type Signature = unsafe extern "C-unwind" fn(*mut c_void $(, $ty)*);
            pub static ROUTE: OperatorRoute = OperatorRoute::new(wrapper as Signature as *mut ());
            static NEXT: NextOperator = NextOperator::new(concat!(stringify!($export), "\0"));

            unsafe extern "C-unwind" fn wrapper(pointer: *mut c_void $(, $arg: $ty)*) {
                let forward = |address: *mut c_void| {
                    // SAFETY: the next definition of this operator has this
                    // signature; forwarding the caller's arguments.
                    unsafe { core::mem::transmute::<*mut c_void, Signature>(address)(pointer $(, $arg)*) }
                };
                // SAFETY: `forward` calls the next definition as required.
                unsafe { cxx::operator_delete(&NEXT, &ROUTE, pointer, forward) }
            }
        }
    };
}

type NoThrow = *const c_void;

operator_new!(_Znwm(), nothrow: false, aligned: 0, entry in "rsi", "rdx");
operator_new!(_Znam(), nothrow: false, aligned: 0, entry in "rsi", "rdx");
operator_new!(_ZnwmRKSt9nothrow_t(tag: NoThrow), nothrow: true, aligned: 0, entry in "rdx", "rcx");
operator_new!(_ZnamRKSt9nothrow_t(tag: NoThrow), nothrow: true, aligned: 0, entry in "rdx", "rcx");
operator_new!(_ZnwmSt11align_val_t(alignment: usize), nothrow: false, aligned: alignment, entry in "rdx", "rcx");
operator_new!(_ZnamSt11align_val_t(alignment: usize), nothrow: false, aligned: alignment, entry in "rdx", "rcx");
operator_new!(_ZnwmSt11align_val_tRKSt9nothrow_t(alignment: usize, tag: NoThrow), nothrow: true, aligned: alignment, entry in "rcx", "r8");
operator_new!(_ZnamSt11align_val_tRKSt9nothrow_t(alignment: usize, tag: NoThrow), nothrow: true, aligned: alignment, entry in "rcx", "r8");

operator_delete!(_ZdlPv());
operator_delete!(_ZdaPv());
operator_delete!(_ZdlPvm(size: usize));
operator_delete!(_ZdaPvm(size: usize));
operator_delete!(_ZdlPvSt11align_val_t(alignment: usize));
operator_delete!(_ZdaPvSt11align_val_t(alignment: usize));
operator_delete!(_ZdlPvmSt11align_val_t(size: usize, alignment: usize));
operator_delete!(_ZdaPvmSt11align_val_t(size: usize, alignment: usize));
operator_delete!(_ZdlPvRKSt9nothrow_t(tag: NoThrow));
operator_delete!(_ZdaPvRKSt9nothrow_t(tag: NoThrow));
operator_delete!(_ZdlPvSt11align_val_tRKSt9nothrow_t(alignment: usize, tag: NoThrow));
operator_delete!(_ZdaPvSt11align_val_tRKSt9nothrow_t(alignment: usize, tag: NoThrow));
