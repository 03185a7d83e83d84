//! `capture_remembered` replays the unchanged outer frames of the previous capture; it
//! must still return exactly libgcc's frames: when the stack is unchanged, when only
//! its inner part changed, when an outer return address changed under an identical
//! inner frame state (the case replay must reject), when the buffer truncates, through
//! C frames, through a frame that needs libgcc, and on other threads.

mod common;

use std::hint::black_box;

use common::{
    Capturer, SHARED, assert_same_stack, chain, jit_stub, through_c, through_cfa_expression,
};
use heapsample_unwind::{capture_libgcc, capture_remembered};

const MAX_FRAMES: usize = 256;

impl Capturer {
    /// Captures with the memo and with libgcc at the same leaf and checks they agree.
    #[inline(never)]
    fn check(&mut self, what: &str) -> usize {
        let mut remembered = [0u64; MAX_FRAMES];
        let mut reference = [0u64; MAX_FRAMES];
        let len = self.capture(&mut remembered);
        let reference_len = capture_libgcc(&mut reference);
        assert_same_stack(&remembered[..len], &reference[..reference_len], what);
        len
    }
}

#[test]
fn repeated_captures_replay_and_match_libgcc() {
    let mut capturer = Capturer::new();
    for depth in [10, 30, 100] {
        for round in 0..black_box(4) {
            chain(depth, &mut || {
                capturer.check(&format!("depth {depth}, round {round}")) as u64
            });
        }
    }
    let counts = capturer.memo.counts();
    assert_eq!(counts.captures, 12);
    // The deep stacks' captures after the first replay (same outer frames); the
    // shallowest may be walked without the memo.
    assert!(counts.matches >= 6, "{counts:?}");
}

#[test]
fn inner_changes_keep_the_outer_part() {
    let mut capturer = Capturer::new();
    chain(20, &mut || {
        // A loop the compiler cannot unroll: one call site for every round.
        for round in 0..black_box(6) {
            // Alternate inner depths under the same outer 20 frames.
            let inner = if round % 2 == 0 { 3 } else { 9 };
            chain(inner, &mut || {
                capturer.check(&format!("inner {inner}, round {round}")) as u64
            });
        }
        0
    });
    let counts = capturer.memo.counts();
    // The first capture walks without the memo (it does not know the depth yet), the
    // second fills it, the other four replay.
    assert!(counts.matches >= 4, "{counts:?}");
    assert!(
        capturer.memo.replayed_frames() > 20,
        "{counts:?} replayed {}",
        capturer.memo.replayed_frames()
    );
}

/// `middle` and `inner` run at the same stack addresses whichever `via` called them,
/// so the inner frames' states are identical; only `middle`'s return address differs.
#[inline(never)]
fn via<const SITE: u64>(capturer: &mut Capturer, what: &str) -> u64 {
    let result = middle(capturer, what);
    black_box(result.wrapping_mul(SITE))
}

#[inline(never)]
fn middle(capturer: &mut Capturer, what: &str) -> u64 {
    let result = inner(capturer, what);
    black_box(result) + 1
}

#[inline(never)]
fn inner(capturer: &mut Capturer, what: &str) -> u64 {
    let result = capturer.check(what) as u64;
    black_box(result) + 1
}

#[test]
fn a_changed_outer_return_address_is_never_replayed() {
    let mut capturer = Capturer::new();
    chain(12, &mut || {
        for round in 0..black_box(8) {
            let what = format!("round {round}");
            // Two call sites of one caller: `via::<1>` and `via::<2>` start at the same
            // stack pointer and have the same frame layout.
            if black_box(round) % 2 == 0 {
                via::<1>(&mut capturer, &what);
            } else {
                via::<2>(&mut capturer, &what);
            }
        }
        0
    });
    let counts = capturer.memo.counts();
    assert!(
        counts.rejections >= 6,
        "the inner frames did not match with a changed caller: {counts:?}"
    );
}

#[test]
fn truncates_to_the_buffer_and_grows_back() {
    let mut capturer = Capturer::new();
    chain(40, &mut || {
        for round in 0..3 {
            let mut full = [0u64; MAX_FRAMES];
            let mut short = [0u64; 7];
            let mut reference = [0u64; MAX_FRAMES];
            let short_len =
                capture_remembered(&mut capturer.local, &SHARED, &mut capturer.memo, &mut short);
            let full_len =
                capture_remembered(&mut capturer.local, &SHARED, &mut capturer.memo, &mut full);
            let reference_len = capture_libgcc(&mut reference);
            assert_eq!(short_len, 7, "round {round}");
            assert_eq!(&short[1..], &reference[1..7], "round {round}");
            assert_same_stack(
                &full[..full_len],
                &reference[..reference_len],
                &format!("full after short, round {round}"),
            );
            assert_eq!(
                capture_remembered(&mut capturer.local, &SHARED, &mut capturer.memo, &mut []),
                0
            );
        }
        0
    });
}

#[test]
fn through_c_frames_and_fallbacks() {
    let mut capturer = Capturer::new();
    for round in 0..3 {
        chain(5, &mut || {
            through_c(9, &mut || {
                chain(7, &mut || {
                    capturer.check(&format!("through C, round {round}")) as u64
                })
            })
        });
        chain(3, &mut || {
            through_cfa_expression(&mut || {
                chain(4, &mut || {
                    capturer.check(&format!("CFA expression, round {round}")) as u64
                })
            })
        });
    }
    assert_eq!(
        capturer.local.fallbacks(),
        3,
        "each CFA-expression capture fell back"
    );
}

#[test]
fn on_threads_with_reused_memos() {
    let mut capturer = Capturer::new();
    for thread in 0..4 {
        capturer = std::thread::spawn(move || {
            for round in 0..3 {
                chain(8 + thread, &mut || {
                    capturer.check(&format!("thread {thread}, round {round}")) as u64
                });
            }
            capturer
        })
        .join()
        .expect("thread ran");
    }
}

thread_local! {
    static JIT_CAPTURER: core::cell::RefCell<Option<Capturer>> = const { core::cell::RefCell::new(None) };
}

extern "C" fn capture_under_jit() {
    JIT_CAPTURER.with(|capturer| {
        let mut capturer = capturer.borrow_mut();
        let capturer = capturer.as_mut().expect("set by the test");
        let mut frames = 0;
        chain(30, &mut || {
            frames = capturer.check("under code without unwind info");
            0
        });
        assert!(frames > 30, "{frames} frames");
    });
}

#[test]
fn stops_where_libgcc_stops_in_code_without_unwind_info() {
    let stub = jit_stub();
    JIT_CAPTURER.with(|capturer| *capturer.borrow_mut() = Some(Capturer::new()));
    for _ in 0..black_box(5) {
        chain(6, &mut || {
            stub(capture_under_jit);
            0
        });
    }
    JIT_CAPTURER.with(|capturer| {
        let capturer = capturer.borrow();
        let capturer = capturer.as_ref().expect("set above");
        assert_eq!(capturer.local.fallbacks(), 0, "libgcc was not needed");
        assert!(
            capturer.memo.counts().matches >= 2,
            "{:?}",
            capturer.memo.counts()
        );
    });
}
