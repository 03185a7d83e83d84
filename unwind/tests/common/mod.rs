//! Shared helpers for heapsample-unwind's integration tests: deep Rust call chains,
//! C frames from `tests/csrc/foreign_frames.c`, and stack comparison.

#![allow(dead_code)]

use core::ffi::{c_int, c_void};

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
