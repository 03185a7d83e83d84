//! Shared helpers for heapsample-unwind's integration tests: deep Rust call chains,
//! C frames from `tests/csrc/foreign_frames.c`, code without unwind information, a
//! thread's state for the remembering captures, and stack comparison.

#![allow(dead_code)]

use core::ffi::{c_int, c_void};

use heapsample_unwind::{FunctionEntry, RuleCache, SharedRuleCache, StackMemo};

/// The shared rule cache of a test binary.
pub static SHARED: SharedRuleCache = SharedRuleCache::new();

/// A thread's private state for `capture_remembered` and `capture_remembered_from`.
pub struct Capturer {
    pub local: Box<RuleCache<64>>,
    pub memo: Box<StackMemo>,
}

impl Capturer {
    pub fn new() -> Capturer {
        Capturer {
            local: RuleCache::<64>::new_boxed(),
            memo: Box::new(StackMemo::new()),
        }
    }

    /// `capture_remembered` with this state.
    #[inline(always)]
    pub fn capture(&mut self, frames: &mut [u64]) -> usize {
        heapsample_unwind::capture_remembered(&mut self.local, &SHARED, &mut self.memo, frames)
    }

    /// `capture_remembered_from` with this state.
    ///
    /// # Safety
    /// As for `capture_remembered_from`.
    #[inline(always)]
    pub unsafe fn capture_from(&mut self, entry: FunctionEntry, frames: &mut [u64]) -> usize {
        // SAFETY: forwarded.
        unsafe {
            heapsample_unwind::capture_remembered_from(
                &mut self.local,
                &SHARED,
                &mut self.memo,
                entry,
                frames,
            )
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/chain.rs"));

pub type CCallback = extern "C" fn(arg: *mut c_void) -> u64;

unsafe extern "C" {
    /// `depth` C frames (plain and rbp-based), then `callback(arg)`.
    pub fn hs_c_chain(depth: c_int, callback: CCallback, arg: *mut c_void) -> u64;
    /// One C frame whose CFA is a DWARF expression, then `callback(arg)`.
    pub fn hs_c_cfa_expression(callback: CCallback, arg: *mut c_void) -> u64;
}

/// Calls `leaf` from C code: `c_depth` C frames sit between this call and `leaf`.
pub fn through_c(c_depth: i32, leaf: &mut dyn FnMut() -> u64) -> u64 {
    extern "C" fn trampoline(arg: *mut c_void) -> u64 {
        // SAFETY: `arg` is the `&mut &mut dyn FnMut` passed below, alive for the call.
        let leaf = unsafe { &mut *arg.cast::<&mut dyn FnMut() -> u64>() };
        leaf()
    }
    let mut leaf = leaf;
    // SAFETY: the C code only passes `arg` through to `trampoline`.
    unsafe { hs_c_chain(c_depth, trampoline, (&raw mut leaf).cast()) }
}

/// Calls `leaf` under a C frame whose CFA is given by a DWARF expression.
pub fn through_cfa_expression(leaf: &mut dyn FnMut() -> u64) -> u64 {
    extern "C" fn trampoline(arg: *mut c_void) -> u64 {
        // SAFETY: as in `through_c`.
        let leaf = unsafe { &mut *arg.cast::<&mut dyn FnMut() -> u64>() };
        leaf()
    }
    let mut leaf = leaf;
    // SAFETY: as in `through_c`.
    unsafe { hs_c_cfa_expression(trampoline, (&raw mut leaf).cast()) }
}

/// Asserts that a fast capture equals libgcc's capture taken right next to it.
///
/// The two calls sit at different call sites of the same leaf, so their first frame
/// (the return address into the leaf) differs by a few bytes; every other frame must
/// be identical.
pub fn assert_same_stack(fast: &[u64], libgcc: &[u64], what: &str) {
    assert!(
        fast.len() == libgcc.len(),
        "{what}: fast unwinder gave {} frames, libgcc {}\nfast:   {fast:x?}\nlibgcc: {libgcc:x?}",
        fast.len(),
        libgcc.len()
    );
    assert!(!fast.is_empty(), "{what}: empty stack");
    assert!(
        fast[0].abs_diff(libgcc[0]) < 256,
        "{what}: first frames are not in the same function: {:x} vs {:x}",
        fast[0],
        libgcc[0]
    );
    assert_eq!(&fast[1..], &libgcc[1..], "{what}: frames differ");
}

/// Machine code without unwind information, like a JIT's that keeps no frame
/// pointer: `push rbp; xor ebp, ebp; call rdi; pop rbp; ret`, in an anonymous
/// executable mapping. rbp is 0 while it calls, so the walk cannot step past it.
pub fn jit_stub() -> extern "C" fn(extern "C" fn()) {
    const CODE: [u8; 7] = [0x55, 0x31, 0xed, 0xff, 0xd7, 0x5d, 0xc3];
    // SAFETY: the code is a complete function with the C ABI taking one function
    // pointer.
    unsafe { core::mem::transmute::<*mut u8, extern "C" fn(extern "C" fn())>(executable(&CODE)) }
}

/// Like [`jit_stub`], but keeping frame pointers as V8, CPython's perf trampolines
/// and the JVM with `-XX:+PreserveFramePointer` do: `push rbp; mov rbp, rsp;
/// call rdi; pop rbp; ret`. The return address of its call is the mapping's
/// address + 6.
pub fn jit_stub_with_frame_pointer() -> extern "C" fn(extern "C" fn()) {
    const CODE: [u8; 8] = [0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3];
    // SAFETY: as in `jit_stub`.
    unsafe { core::mem::transmute::<*mut u8, extern "C" fn(extern "C" fn())>(executable(&CODE)) }
}

/// CPython 3.12's perf trampoline (no frame pointer, no unwind information):
/// `sub rsp, 8; call rdi; add rsp, 8; ret`. The return address of its call is
/// the mapping's address + 6.
pub fn jit_stub_like_cpython_trampoline() -> extern "C" fn(extern "C" fn()) {
    const CODE: [u8; 11] = [
        0x48, 0x83, 0xec, 0x08, 0xff, 0xd7, 0x48, 0x83, 0xc4, 0x08, 0xc3,
    ];
    // SAFETY: as in `jit_stub`.
    unsafe { core::mem::transmute::<*mut u8, extern "C" fn(extern "C" fn())>(executable(&CODE)) }
}

/// Code without unwind information that calls `rdi` with rbp set to its second
/// argument (a corrupt frame chain): `push rbp; mov rbp, rsi; call rdi; pop rbp;
/// ret`. The return address of its call is the mapping's address + 6.
pub fn jit_stub_with_rbp() -> extern "C" fn(extern "C" fn(), u64) {
    const CODE: [u8; 8] = [0x55, 0x48, 0x89, 0xf5, 0xff, 0xd7, 0x5d, 0xc3];
    // SAFETY: as in `jit_stub`, with a second integer argument.
    unsafe {
        core::mem::transmute::<*mut u8, extern "C" fn(extern "C" fn(), u64)>(executable(&CODE))
    }
}

/// `code` copied into a fresh anonymous executable mapping (never unmapped).
fn executable(code: &[u8]) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping; checked below.
    let page = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED);
    assert!(code.len() <= 4096);
    // SAFETY: the mapping holds 4096 writable bytes.
    unsafe { core::ptr::copy_nonoverlapping(code.as_ptr(), page.cast::<u8>(), code.len()) };
    page.cast()
}
