//! `capture_remembered_from` starts at the caller of a hooked function, from the rsp and
//! rbp that function saved at its entry (as the shim's malloc does). It must return
//! exactly libgcc's frames from that caller outwards: repeated and with the memo
//! replaying, with changing depths inside the hook and outside it, through C frames,
//! through a frame that needs libgcc (the fallback drops the hook's frames too), and
//! when the caller is code without unwind information. Frames between the entry and
//! the capture are never stepped, so even one that would need libgcc costs no fallback.

mod common;

use std::hint::black_box;

use common::{Capturer, assert_same_stack, chain, jit_stub, through_c, through_cfa_expression};
use heapsample_unwind::{FunctionEntry, capture_libgcc};

const MAX_FRAMES: usize = 256;

/// What the hook's body does: how many frames to add below the entry, whether one of
/// them needs libgcc, and where the capture goes.
struct Request<'a> {
    capturer: &'a mut Capturer,
    inner_depth: usize,
    inner_cfa_expression: bool,
    /// The capture's buffer length.
    limit: usize,
    frames: Vec<u64>,
}

impl<'a> Request<'a> {
    fn new(capturer: &'a mut Capturer, inner_depth: usize, inner_cfa_expression: bool) -> Self {
        Request {
            capturer,
            inner_depth,
            inner_cfa_expression,
            limit: MAX_FRAMES,
            frames: Vec::new(),
        }
    }
}

/// A hooked function as the shim writes one: saves rsp and rbp at its entry in the
/// next argument registers and jumps to the body, which gets its return address.
#[unsafe(naked)]
extern "C" fn hooked(request: *mut Request<'_>) -> usize {
    core::arch::naked_asm!(
        "mov rsi, rsp",
        "mov rdx, rbp",
        "jmp {body}",
        body = sym hooked_body,
    )
}

extern "C" fn hooked_body(request: *mut Request<'_>, rsp: u64, rbp: u64) -> usize {
    // SAFETY: `call_hooked` passes a live, exclusive `Request`.
    let request = unsafe { &mut *request };
    let entry = FunctionEntry { rsp, rbp };
    let limit = request.limit;
    let mut capture = || {
        let mut frames = [0u64; MAX_FRAMES];
        let capturer = &mut *request.capturer;
        // SAFETY: `entry` is this call's entry; `hooked` has not returned.
        let len = unsafe { capturer.capture_from(entry, &mut frames[..limit]) };
        request.frames = frames[..len].to_vec();
        len as u64
    };
    let depth = request.inner_depth;
    if request.inner_cfa_expression {
        chain(depth, &mut || through_cfa_expression(&mut capture))
    } else {
        chain(depth, &mut capture)
    };
    black_box(request.frames.len())
}

/// Calls the hook from here and compares its capture with libgcc's capture of this
/// function's stack.
#[inline(never)]
fn call_hooked(capturer: &mut Capturer, inner_depth: usize, cfa: bool, what: &str) -> usize {
    let mut reference = [0u64; MAX_FRAMES];
    let reference_len = capture_libgcc(&mut reference);
    let mut request = Request::new(capturer, inner_depth, cfa);
    let len = hooked(&mut request);
    assert_same_stack(&request.frames, &reference[..reference_len], what);
    black_box(len)
}

#[test]
fn starts_at_the_hooks_caller_and_matches_libgcc() {
    let mut capturer = Capturer::new();
    for depth in [3, 10, 30, 100] {
        for round in 0..black_box(4) {
            let inner = [2, 9][round % 2];
            chain(depth, &mut || {
                call_hooked(
                    &mut capturer,
                    inner,
                    false,
                    &format!("depth {depth}, inner {inner}, round {round}"),
                ) as u64
            });
        }
    }
    let counts = capturer.memo.counts();
    assert_eq!(counts.captures, 16);
    // The deep stacks' captures after the first of each depth replay, whatever the
    // depth inside the hook.
    assert!(counts.matches >= 5, "{counts:?}");
    assert_eq!(capturer.local.fallbacks(), 0);
}

#[test]
fn frames_inside_the_hook_are_never_stepped() {
    let mut capturer = Capturer::new();
    for round in 0..black_box(3) {
        chain(5, &mut || {
            call_hooked(&mut capturer, 4, true, &format!("round {round}")) as u64
        });
    }
    assert_eq!(
        capturer.local.fallbacks(),
        0,
        "the CFA-expression frame inside the hook was stepped"
    );
}

#[test]
fn through_c_frames_and_fallbacks_outside_the_hook() {
    let mut capturer = Capturer::new();
    for round in 0..3 {
        chain(5, &mut || {
            through_c(9, &mut || {
                chain(7, &mut || {
                    call_hooked(
                        &mut capturer,
                        3,
                        false,
                        &format!("through C, round {round}"),
                    ) as u64
                })
            })
        });
        chain(3, &mut || {
            through_cfa_expression(&mut || {
                chain(4, &mut || {
                    call_hooked(
                        &mut capturer,
                        3,
                        false,
                        &format!("CFA expression outside, round {round}"),
                    ) as u64
                })
            })
        });
    }
    assert_eq!(
        capturer.local.fallbacks(),
        3,
        "each capture under the CFA-expression frame fell back"
    );
}

#[test]
fn truncates_to_the_buffer() {
    let mut capturer = Capturer::new();
    chain(12, &mut || {
        for round in 0..black_box(3) {
            let mut full = Vec::new();
            for limit in [MAX_FRAMES, 1, 7, 0] {
                let mut request = Request::new(&mut capturer, 2, false);
                request.limit = limit;
                hooked(&mut request);
                let frames = request.frames;
                if limit == MAX_FRAMES {
                    assert!(frames.len() > 12, "{frames:x?}");
                    full = frames;
                } else if limit > 0 {
                    // The loop may be unrolled: the call sites, so the first frames,
                    // may differ.
                    let what = format!("limit {limit}, round {round}");
                    assert_eq!(frames.len(), limit, "{what}");
                    assert!(frames[0].abs_diff(full[0]) < 4096, "{what}");
                    assert_eq!(frames[1..], full[1..limit], "{what}");
                } else {
                    assert!(frames.is_empty());
                }
            }
        }
        0
    });
}

thread_local! {
    static JIT_CAPTURER: core::cell::RefCell<Option<Capturer>> =
        const { core::cell::RefCell::new(None) };
}

/// A hooked function called by the JIT stub.
#[unsafe(naked)]
extern "C" fn hooked_from_jit() {
    core::arch::naked_asm!(
        "mov rsi, rsp",
        "mov rdx, rbp",
        "jmp {body}",
        body = sym hooked_from_jit_body,
    )
}

extern "C" fn hooked_from_jit_body(_function: u64, rsp: u64, rbp: u64) {
    JIT_CAPTURER.with(|capturer| {
        let mut capturer = capturer.borrow_mut();
        let capturer = capturer.as_mut().expect("set by the test");
        chain(4, &mut || {
            let mut frames = [0u64; MAX_FRAMES];
            let mut reference = [0u64; MAX_FRAMES];
            // SAFETY: this call's entry; `hooked_from_jit` has not returned.
            let len = unsafe { capturer.capture_from(FunctionEntry { rsp, rbp }, &mut frames) };
            let reference_len = capture_libgcc(&mut reference);
            // SAFETY: `rsp` points at the live return address of this call.
            let return_address = unsafe { *(rsp as *const u64) };
            let reference = &reference[..reference_len];
            let from = reference
                .iter()
                .position(|&frame| frame == return_address)
                .expect("libgcc reports the stub's frame");
            assert_eq!(&frames[..len], &reference[from..]);
            assert_eq!(len, 1, "libgcc stops after the stub's frame");
            0
        });
    });
}

#[test]
fn a_caller_without_unwind_info_is_reported_and_ends_the_stack() {
    let stub = jit_stub();
    JIT_CAPTURER.with(|capturer| *capturer.borrow_mut() = Some(Capturer::new()));
    for _ in 0..black_box(3) {
        chain(6, &mut || {
            stub(hooked_from_jit);
            0
        });
    }
    JIT_CAPTURER.with(|capturer| {
        let capturer = capturer.borrow();
        let capturer = capturer.as_ref().expect("set above");
        assert_eq!(capturer.local.fallbacks(), 0, "libgcc was not needed");
    });
}

#[test]
fn an_entry_not_on_this_stack_gives_the_whole_stack() {
    let mut capturer = Capturer::new();
    chain(10, &mut || {
        let mut frames = [0u64; MAX_FRAMES];
        let mut reference = [0u64; MAX_FRAMES];
        let entry = FunctionEntry { rsp: 8, rbp: 0 };
        // SAFETY: an entry below the capture's stack pointer is refused before any
        // memory is read.
        let len = unsafe { capturer.capture_from(entry, &mut frames) };
        let reference_len = capture_libgcc(&mut reference);
        assert_same_stack(&frames[..len], &reference[..reference_len], "refused entry");
        0
    });
}
