//! C++ `operator new` / `operator delete`.
//!
//! With libstdc++'s definitions these reach the shim through `malloc` and
//! `free` anyway, so the exports here only forward: each export is a single
//! `jmp` through its route, which starts at a resolver and, once the next
//! definition is known to need no counting, points straight at it (like a
//! lazily bound PLT slot). jemalloc and tcmalloc
//! define their own operators, which mostly do not call `malloc`; when the
//! next definition lives in the same object as the next `malloc`, the export
//! counts the allocation itself, unless the operator called back into the
//! interposed malloc family (jemalloc's aligned `new` calls `aligned_alloc`
//! through its PLT), which counted it already. Each allocation is counted
//! once.
//!
//! The exports use the "C-unwind" ABI: a throwing `operator new` unwinds
//! through them to the program's handler.

use core::ffi::{CStr, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

/// Where an operator's export jumps: its resolving (and, when needed,
/// counting) wrapper at first, the next definition once nothing is left to
/// count.
type Route = AtomicPtr<()>;

use heapsample_recorder::{backtrace, contracts, cxx, next_alloc, routes, state};

const UNKNOWN: u8 = 0;
const FORWARD_ONLY: u8 = 1;
const COUNT_HERE: u8 = 2;

/// The next definition of one operator, resolved on first use.
struct CxxSymbol {
    name: &'static str,
    address: AtomicPtr<c_void>,
    counting: AtomicU8,
}

impl CxxSymbol {
    const fn new(name: &'static str) -> Self {
        CxxSymbol {
            name,
            address: AtomicPtr::new(core::ptr::null_mut()),
            counting: AtomicU8::new(UNKNOWN),
        }
    }

    /// The next definition and whether this export must count, or None when
    /// no later object defines the operator.
    fn get(&self) -> Option<(*mut c_void, bool)> {
        let known = self.counting.load(Ordering::Acquire);
        if known != UNKNOWN {
            let address = self.address.load(Ordering::Relaxed);
            return (!address.is_null()).then_some((address, known == COUNT_HERE));
        }
        routes::start();
        let Ok(name) = CStr::from_bytes_with_nul(self.name.as_bytes()) else {
            return None;
        };
        // SAFETY: dlsym with a NUL-terminated name.
        let address = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        let counting = if !address.is_null() && same_object_as_malloc(address) {
            COUNT_HERE
        } else {
            FORWARD_ONLY
        };
        self.address.store(address, Ordering::Relaxed);
        self.counting.store(counting, Ordering::Release);
        (!address.is_null()).then_some((address, counting == COUNT_HERE))
    }
}

fn same_object_as_malloc(address: *mut c_void) -> bool {
    let malloc = next_alloc::NEXT.malloc.address() as usize;
    match (
        backtrace::object_range(address as usize),
        backtrace::object_range(malloc),
    ) {
        (Some(operator), Some(allocator)) => operator == allocator,
        _ => false,
    }
}

fn out_of_memory() -> ! {
    // Only reached when no C++ runtime defines the operator, so there is no
    // std::bad_alloc to throw: fail like an uncaught one would.
    std::process::abort()
}

macro_rules! operator_new {
    ($export:ident ( $($arg:ident : $ty:ty),* ), nothrow: $nothrow:expr, aligned: $align:expr) => {
        /// # Safety
        /// The C++ contract of this operator.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $export(size: usize $(, $arg: $ty)*) -> *mut c_void {
            core::arch::naked_asm!("jmp qword ptr [rip + {route}]", route = sym $export::ROUTE)
        }

        #[allow(non_snake_case)]
        mod $export {
            use super::*;

            type Signature = unsafe extern "C-unwind" fn(usize $(, $ty)*) -> *mut c_void;
            pub static ROUTE: Route = Route::new(wrapper as Signature as *mut ());
            static NEXT: CxxSymbol = CxxSymbol::new(concat!(stringify!($export), "\0"));

            /// Resolve, then forward (and count, when the next definition
            /// does not reach the interposed malloc family).
            unsafe extern "C-unwind" fn wrapper(size: usize $(, $arg: $ty)*) -> *mut c_void {
                let Some((address, count_here)) = NEXT.get() else {
                    let alignment: usize = $align;
                    // SAFETY: plain C allocation as a fallback.
                    let pointer = unsafe {
                        if alignment > 16 { contracts::memalign(alignment, size) } else { routes::malloc(size) }
                    };
                    if pointer.is_null() && !$nothrow {
                        out_of_memory();
                    }
                    return pointer;
                };
                // SAFETY: the next definition of this operator has this signature.
                let real = unsafe { core::mem::transmute::<*mut c_void, Signature>(address) };
                if !count_here || !state::profiling() {
                    ROUTE.store(address.cast(), Ordering::Release);
                    // SAFETY: forwarding the caller's arguments.
                    return unsafe { real(size $(, $arg)*) };
                }
                let call = cxx::external_call_begin();
                // SAFETY: forwarding the caller's arguments.
                let pointer = unsafe { real(size $(, $arg)*) };
                // SAFETY: just returned by the next operator new.
                unsafe { cxx::count_external_alloc(call, pointer, size) };
                pointer
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
            core::arch::naked_asm!("jmp qword ptr [rip + {route}]", route = sym $export::ROUTE)
        }

        #[allow(non_snake_case)]
        mod $export {
            use super::*;

            type Signature = unsafe extern "C-unwind" fn(*mut c_void $(, $ty)*);
            pub static ROUTE: Route = Route::new(wrapper as Signature as *mut ());
            static NEXT: CxxSymbol = CxxSymbol::new(concat!(stringify!($export), "\0"));

            /// Resolve, then forward (and count, when the next definition
            /// does not reach the interposed malloc family).
            unsafe extern "C-unwind" fn wrapper(pointer: *mut c_void $(, $arg: $ty)*) {
                let Some((address, count_here)) = NEXT.get() else {
                    // SAFETY: memory from the fallback of operator new (malloc).
                    return unsafe { routes::free(pointer) };
                };
                // SAFETY: the next definition of this operator has this signature.
                let real = unsafe { core::mem::transmute::<*mut c_void, Signature>(address) };
                if !count_here || !state::profiling() {
                    ROUTE.store(address.cast(), Ordering::Release);
                    // SAFETY: forwarding the caller's arguments.
                    return unsafe { real(pointer $(, $arg)*) };
                }
                // SAFETY: the caller's live pointer, released right after.
                let call = unsafe { cxx::external_free_begin(pointer) };
                // SAFETY: forwarding the caller's arguments.
                unsafe { real(pointer $(, $arg)*) };
                cxx::external_free_end(call);
            }
        }
    };
}

type NoThrow = *const c_void;

operator_new!(_Znwm(), nothrow: false, aligned: 0);
operator_new!(_Znam(), nothrow: false, aligned: 0);
operator_new!(_ZnwmRKSt9nothrow_t(tag: NoThrow), nothrow: true, aligned: 0);
operator_new!(_ZnamRKSt9nothrow_t(tag: NoThrow), nothrow: true, aligned: 0);
operator_new!(_ZnwmSt11align_val_t(alignment: usize), nothrow: false, aligned: alignment);
operator_new!(_ZnamSt11align_val_t(alignment: usize), nothrow: false, aligned: alignment);
operator_new!(_ZnwmSt11align_val_tRKSt9nothrow_t(alignment: usize, tag: NoThrow), nothrow: true, aligned: alignment);
operator_new!(_ZnamSt11align_val_tRKSt9nothrow_t(alignment: usize, tag: NoThrow), nothrow: true, aligned: alignment);

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
