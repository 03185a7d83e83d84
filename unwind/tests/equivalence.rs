//! The fast unwinder must return exactly libgcc's return addresses: at several depths,
//! warm and cold, through C frames, through frames it cannot handle (fallback), in a
//! signal handler and on concurrent threads. (Invalidation has its own test binary,
//! because it clears the caches other tests here count misses in.)

mod common;

use common::{assert_same_stack, chain, through_c, through_cfa_expression};
use heapsample_unwind::{
    RuleCache, SharedRuleCache, capture, capture_layered, capture_libgcc, capture_shared,
};

const MAX_FRAMES: usize = 256;

static SHARED: SharedRuleCache = SharedRuleCache::new();

/// The stacks one leaf sees with each method.
struct Captures {
    private: Vec<u64>,
    shared: Vec<u64>,
    layered: Vec<u64>,
    libgcc: Vec<u64>,
}

impl Captures {
    fn assert_all_match(&self, what: &str) {
        assert_same_stack(
            &self.private,
            &self.libgcc,
            &format!("{what} (private cache)"),
        );
        assert_same_stack(
            &self.shared,
            &self.libgcc,
            &format!("{what} (shared cache)"),
        );
        assert_same_stack(
            &self.layered,
            &self.libgcc,
            &format!("{what} (layered cache)"),
        );
    }
}

/// Captures with every method at the same depth of the same leaf.
#[inline(never)]
fn capture_all(private: &mut RuleCache, small: &mut RuleCache<64>) -> Captures {
    let mut buffers = [[0u64; MAX_FRAMES]; 4];
    let [a, b, c, d] = &mut buffers;
    let private_len = capture(private, a);
    let shared_len = capture_shared(&SHARED, b);
    let layered_len = capture_layered(small, &SHARED, c);
    let libgcc_len = capture_libgcc(d);
    Captures {
        private: a[..private_len].to_vec(),
        shared: b[..shared_len].to_vec(),
        layered: c[..layered_len].to_vec(),
        libgcc: d[..libgcc_len].to_vec(),
    }
}

fn captures_at_depth(depth: usize, private: &mut RuleCache, small: &mut RuleCache<64>) -> Captures {
    let mut result = None;
    chain(depth, &mut || {
        result = Some(capture_all(private, small));
        0
    });
    result.expect("leaf ran")
}

#[test]
fn matches_libgcc_at_depths_10_30_100_cold_and_warm() {
    let mut private = <RuleCache>::new_boxed();
    let mut small = RuleCache::<64>::new_boxed();
    for depth in [10, 30, 100] {
        for round in 0..3 {
            let captures = captures_at_depth(depth, &mut private, &mut small);
            captures.assert_all_match(&format!("depth {depth}, round {round}"));
            assert!(
                captures.libgcc.len() > depth,
                "depth {depth}: only {} frames",
                captures.libgcc.len()
            );
        }
    }
    assert_eq!(private.fallbacks(), 0, "plain Rust stacks need no fallback");
}

#[test]
fn warm_captures_compute_nothing() {
    let mut private = <RuleCache>::new_boxed();
    let mut small = RuleCache::<64>::new_boxed();
    let mut misses_after = Vec::new();
    // One call site, so every round sees the same return addresses.
    for _ in 0..std::hint::black_box(3) {
        captures_at_depth(30, &mut private, &mut small);
        misses_after.push(private.misses());
    }
    assert!(misses_after[0] > 30);
    assert_eq!(
        misses_after[1], misses_after[0],
        "a warm capture recomputed rules"
    );
    assert_eq!(
        misses_after[2], misses_after[0],
        "a warm capture recomputed rules"
    );
}

#[test]
fn truncates_to_the_buffer_length() {
    let mut private = <RuleCache>::new_boxed();
    chain(40, &mut || {
        let mut full = [0u64; MAX_FRAMES];
        let full_len = capture(&mut private, &mut full);
        let mut short = [0u64; 7];
        assert_eq!(capture(&mut private, &mut short), 7);
        assert_eq!(&short[1..], &full[1..7]);
        let mut short_libgcc = [0u64; 7];
        assert_eq!(capture_libgcc(&mut short_libgcc), 7);
        assert_eq!(&short_libgcc[1..], &full[1..7]);
        assert_eq!(capture(&mut private, &mut []), 0);
        assert_eq!(capture_libgcc(&mut []), 0);
        assert!(full_len > 40);
        0
    });
}

#[test]
fn matches_libgcc_through_c_frames_without_fallback() {
    let mut private = <RuleCache>::new_boxed();
    let mut small = RuleCache::<64>::new_boxed();
    for round in 0..2 {
        let mut result = None;
        chain(5, &mut || {
            through_c(9, &mut || {
                chain(7, &mut || {
                    result = Some(capture_all(&mut private, &mut small));
                    0
                })
            })
        });
        let captures = result.expect("leaf ran");
        captures.assert_all_match(&format!("through C, round {round}"));
        assert!(captures.libgcc.len() > 5 + 9 + 7);
    }
    assert_eq!(
        private.fallbacks(),
        0,
        "C frames with rsp/rbp CFAs need no fallback"
    );
}

#[test]
fn falls_back_to_libgcc_on_a_cfa_expression() {
    let mut private = <RuleCache>::new_boxed();
    let mut small = RuleCache::<64>::new_boxed();
    for round in 0..2 {
        let mut result = None;
        chain(4, &mut || {
            through_cfa_expression(&mut || {
                chain(3, &mut || {
                    result = Some(capture_all(&mut private, &mut small));
                    0
                })
            })
        });
        let captures = result.expect("leaf ran");
        captures.assert_all_match(&format!("CFA expression, round {round}"));
    }
    assert_eq!(private.fallbacks(), 2, "each capture fell back once");
}

mod signal_handler {
    use super::*;
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// What the handler captured; written only by the handler, read after it returns.
    struct HandlerState {
        cache: RuleCache<256>,
        fast: [u64; MAX_FRAMES],
        fast_len: usize,
        libgcc: [u64; MAX_FRAMES],
        libgcc_len: usize,
    }

    struct HandlerCell(UnsafeCell<HandlerState>);

    // SAFETY: only the test thread raises the signal, synchronously, and reads the state
    // after `raise` returns; there is never concurrent access.
    unsafe impl Sync for HandlerCell {}

    static STATE: HandlerCell = HandlerCell(UnsafeCell::new(HandlerState {
        cache: RuleCache::new(),
        fast: [0; MAX_FRAMES],
        fast_len: 0,
        libgcc: [0; MAX_FRAMES],
        libgcc_len: 0,
    }));
    static HANDLER_RAN: AtomicBool = AtomicBool::new(false);

    extern "C" fn handler(_signal: libc::c_int) {
        // SAFETY: see `HandlerCell`: nothing else accesses the state meanwhile.
        let state = unsafe { &mut *STATE.0.get() };
        state.fast_len = capture(&mut state.cache, &mut state.fast);
        state.libgcc_len = capture_libgcc(&mut state.libgcc);
        HANDLER_RAN.store(true, Ordering::SeqCst);
    }

    #[test]
    fn matches_libgcc_inside_a_signal_handler() {
        // SAFETY: installs a handler for SIGUSR2 (used by nothing else in this test
        // binary); `sigaction` is plain data.
        unsafe {
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction = handler as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGUSR2, &action, core::ptr::null_mut()),
                0
            );
        }
        chain(6, &mut || {
            // SAFETY: raises the signal on this thread; the handler is installed.
            unsafe { libc::raise(libc::SIGUSR2) };
            0
        });
        assert!(HANDLER_RAN.load(Ordering::SeqCst));
        // SAFETY: the handler has returned; see `HandlerCell`.
        let state = unsafe { &*STATE.0.get() };
        let fast = &state.fast[..state.fast_len];
        let libgcc = &state.libgcc[..state.libgcc_len];
        assert!(libgcc.len() > 8, "libgcc unwound through the signal frame");
        assert_same_stack(fast, libgcc, "signal handler");
        assert_eq!(
            state.cache.fallbacks(),
            1,
            "the signal frame needs the fallback"
        );
    }
}

#[test]
fn matches_libgcc_on_two_threads_concurrently() {
    let threads: Vec<_> = (0..2)
        .map(|thread| {
            std::thread::spawn(move || {
                let mut private = <RuleCache>::new_boxed();
                let mut small = RuleCache::<64>::new_boxed();
                for iteration in 0..300 {
                    let depth = [10, 30, 100, 3, 57][(iteration + thread) % 5];
                    let captures = if iteration % 3 == 0 {
                        let mut result = None;
                        through_c(3 + (iteration % 4) as i32, &mut || {
                            result = Some(captures_at_depth(depth, &mut private, &mut small));
                            0
                        });
                        result.expect("leaf ran")
                    } else {
                        captures_at_depth(depth, &mut private, &mut small)
                    };
                    captures.assert_all_match(&format!(
                        "thread {thread}, iteration {iteration}, depth {depth}"
                    ));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread passed");
    }
}
