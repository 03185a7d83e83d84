//! A capture says whether its frames may hold the profiler's own code
//! (`set_own_code`): rules for return addresses in that code are marked when
//! they are cached, so a walk that steps through such a frame says so at no
//! cost to the others, and a caller need look for its own frames only then (and
//! in the frames the walk never looked up: the last one where the buffer
//! filled, and those replayed from the memo). Every capture must still equal
//! libgcc's.
//!
//! One test: `set_own_code` is process-wide (and forgets every cached rule).
#![cfg(target_arch = "x86_64")]

mod common;

use std::hint::black_box;

use common::{Capturer, assert_same_stack, chain, through_c, through_cfa_expression};
use heapsample_unwind::{capture_libgcc, set_own_code};

const MAX_FRAMES: usize = 64;

/// Captures with a fresh state (no memo to replay from), checks the frames
/// against libgcc's, and returns them with the capture's answer.
#[inline(never)]
fn capture_fresh(frames: &mut [u64]) -> (usize, bool) {
    let mut capturer = Capturer::new();
    let mut reference = [0u64; MAX_FRAMES];
    let len = capturer.capture(frames);
    let reference_len = capture_libgcc(&mut reference);
    let full = len == frames.len();
    // A full buffer compares only what both hold.
    let compared = if full {
        len.min(reference_len)
    } else {
        reference_len
    };
    assert_same_stack(
        &frames[..len.min(compared)],
        &reference[..compared],
        "fresh",
    );
    (len, capturer.local.may_hold_own_frames())
}

/// [`capture_fresh`] under a stack 12 Rust frames and 3 C frames deeper than
/// the test, from one place, so that every call captures the same stack.
#[inline(never)]
fn capture_under_stack(frames: &mut [u64]) -> (usize, bool) {
    let mut answer = (0, false);
    chain(6, &mut || {
        through_c(3, &mut || {
            black_box(chain(6, &mut || {
                answer = capture_fresh(frames);
                0
            }))
        })
    });
    answer
}

#[test]
fn a_capture_says_when_it_stepped_through_the_named_code() {
    // Nothing named first (no capture holds own frames), then each frame's
    // return address in turn (a range of one byte): a capture of the same stack
    // must say so, whichever frame it is (the last too: the walk ends at
    // `_start`, whose rule, "outermost", is looked up). One call site for all,
    // so that every capture sees the same stack.
    let mut first = [0u64; MAX_FRAMES];
    let mut len = MAX_FRAMES;
    let mut round = 0;
    while round <= len {
        // Opaque, so that the compiler does not peel the first round off the loop
        // (a second call site would change a frame).
        let named = black_box(round).checked_sub(1).map(|index| first[index]);
        match named {
            Some(address) => set_own_code(address, address + 1),
            None => set_own_code(0, 0),
        }
        let mut frames = [0u64; MAX_FRAMES];
        let (captured, own) = capture_under_stack(&mut frames);
        if named.is_none() {
            assert!(!own, "no own code named");
            assert!(captured > 20, "{captured} frames");
            (first, len) = (frames, captured);
        } else {
            assert_eq!(&frames[..captured], &first[..len], "the same stack");
            assert!(
                own,
                "frame {} of {captured} ({named:#x?}) is named",
                round - 1
            );
        }
        round += 1;
    }

    // Named code next to a frame but holding none: not reported.
    set_own_code(first[1] + 1, first[1] + 2);
    let mut frames = [0u64; MAX_FRAMES];
    assert!(
        !capture_under_stack(&mut frames).1,
        "a range holding no frame"
    );

    // A buffer that fills before the walk looks up the named frame (the last
    // it writes, or one beyond): not reported (the caller checks the last frame
    // itself).
    let last = 8;
    for named in [last, last + 2] {
        set_own_code(first[named], first[named] + 1);
        let mut frames = [0u64; MAX_FRAMES];
        let (captured, own) = capture_under_stack(&mut frames[..last + 1]);
        assert_eq!(captured, last + 1);
        assert!(!own, "frame {named} is not looked up");
    }

    // A capture redone by libgcc may hold anything.
    set_own_code(0, 0);
    through_cfa_expression(&mut || {
        let mut frames = [0u64; MAX_FRAMES];
        assert!(
            capture_fresh(&mut frames).1,
            "libgcc's frames are not looked up"
        );
        0
    });
}
