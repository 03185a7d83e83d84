//! Every capture says why its walk ended, and says it alike whether it stepped,
//! replayed its memo or fell back to libgcc: the outermost frame of a whole
//! stack, the frame buffer's size, or code without unwind information whose
//! frame pointer leads nowhere (a JIT stub that keeps none, in an anonymous
//! executable mapping).

mod common;

use std::cell::RefCell;

use common::{SHARED, chain, jit_stub, jit_stub_with_frame_pointer};
use heapsample_unwind::{
    Ending, PrivateUnwinder, capture_libgcc, capture_shared_ending, libgcc_captured,
};

const MAX_FRAMES: usize = 256;

/// A thread's private state, as the profiler keeps one per thread.
type Unwinder = PrivateUnwinder<64, MAX_FRAMES>;

thread_local! {
    static UNWINDER: RefCell<Option<Box<Unwinder>>> = const { RefCell::new(None) };
    /// Endings of the last [`capture_all`]: remembered, shared, libgcc's, and the
    /// lengths of the remembered and libgcc captures.
    static SEEN: RefCell<Vec<(Ending, usize)>> = const { RefCell::new(Vec::new()) };
}

fn new_unwinder() -> Box<Unwinder> {
    let layout = std::alloc::Layout::new::<Unwinder>();
    // SAFETY: a non-zero size; all-zero memory is a valid empty unwinder.
    let memory = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Unwinder>();
    assert!(!memory.is_null());
    // SAFETY: allocated with the unwinder's layout, zeroed.
    unsafe { Box::from_raw(memory) }
}

/// Captures into `capacity` frames with the remembering capture, the shared one and
/// libgcc, recording each ending and length.
fn capture_all(capacity: usize) {
    let mut frames = [0u64; MAX_FRAMES];
    let frames = &mut frames[..capacity];
    let remembered = UNWINDER.with(|unwinder| {
        unwinder
            .borrow_mut()
            .get_or_insert_with(new_unwinder)
            .capture(&SHARED, frames)
    });
    let shared = capture_shared_ending(&SHARED, frames);
    let len = capture_libgcc(frames);
    let libgcc = libgcc_captured(frames, len);
    SEEN.with(|seen| {
        *seen.borrow_mut() = [remembered, shared, libgcc]
            .iter()
            .map(|captured| (captured.ending, captured.len))
            .collect();
    });
}

fn seen() -> Vec<(Ending, usize)> {
    SEEN.with(|seen| std::mem::take(&mut *seen.borrow_mut()))
}

thread_local! {
    static CAPACITY: RefCell<usize> = const { RefCell::new(MAX_FRAMES) };
}

extern "C" fn capture_at_capacity() {
    capture_all(CAPACITY.with(|capacity| *capacity.borrow()));
}

/// Runs `test` on a thread of its own (glibc's: its stack's top is known).
fn on_thread(test: impl FnOnce() + Send + 'static) {
    std::thread::spawn(test).join().expect("the test thread");
}

#[test]
fn a_whole_stack_ends_at_the_outermost_frame_for_every_capture() {
    on_thread(|| {
        // Several rounds at two depths: later rounds replay the memo.
        for round in 0..6 {
            chain(20 + (round % 2) * 7, &mut || {
                capture_all(MAX_FRAMES);
                0
            });
            for (which, (ending, len)) in seen().into_iter().enumerate() {
                assert_eq!(ending, Ending::Outermost, "round {round}, capture {which}");
                assert!(len > 20, "round {round}, capture {which}: {len} frames");
            }
        }
        let matches = UNWINDER.with(|unwinder| unwinder.borrow().as_ref().unwrap().memo_counts());
        assert!(matches.matches >= 4, "later rounds replayed: {matches:?}");
    });
}

#[test]
fn a_full_buffer_is_the_frame_limit_for_every_capture() {
    on_thread(|| {
        for capacity in [1, 5, 12] {
            for round in 0..4 {
                chain(30, &mut || {
                    capture_all(capacity);
                    0
                });
                for (which, (ending, len)) in seen().into_iter().enumerate() {
                    let what = format!("capacity {capacity}, round {round}, capture {which}");
                    assert_eq!(ending, Ending::FrameLimit, "{what}");
                    assert_eq!(len, capacity, "{what}");
                }
            }
        }
    });
}

#[test]
fn code_without_unwind_information_or_frame_pointer_ends_the_walk_so() {
    on_thread(|| {
        let stub = jit_stub();
        for round in 0..4 {
            chain(18, &mut || {
                stub(capture_at_capacity);
                0
            });
            for (which, (ending, _)) in seen().into_iter().enumerate() {
                assert_eq!(
                    ending,
                    Ending::NoUnwindInfo,
                    "round {round}, capture {which}"
                );
            }
        }
    });
}

#[test]
fn a_frame_pointer_step_through_such_code_goes_on_to_the_outermost_frame() {
    on_thread(|| {
        let stub = jit_stub_with_frame_pointer();
        for round in 0..4 {
            chain(18, &mut || {
                stub(capture_at_capacity);
                0
            });
            let seen = seen();
            // The fast captures step over the stub by its frame pointer; libgcc
            // stops at it.
            assert_eq!(seen[0].0, Ending::Outermost, "round {round}: {seen:?}");
            assert_eq!(seen[1].0, Ending::Outermost, "round {round}: {seen:?}");
            assert_eq!(seen[2].0, Ending::NoUnwindInfo, "round {round}: {seen:?}");
            assert!(seen[0].1 > seen[2].1, "round {round}: {seen:?}");
        }
    });
}
