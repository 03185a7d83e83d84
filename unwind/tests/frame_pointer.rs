//! Walks through code without unwind information (a JIT's, in an anonymous
//! executable mapping): by the frame-pointer chain where the code keeps one, back to
//! the unwind tables once in code that has them, with every capture function; and a
//! corrupt chain (rbp anywhere: null, unaligned, below the stack pointer, above the
//! stack, a loop, garbage return addresses) ends the walk without a fault.

mod common;

use std::cell::RefCell;
use std::hint::black_box;

use common::{
    Capturer, SHARED, chain, jit_stub_like_cpython_trampoline, jit_stub_with_frame_pointer,
    jit_stub_with_rbp,
};
use heapsample_unwind::{RuleCache, capture, capture_libgcc, capture_shared};

const MAX_FRAMES: usize = 256;

/// What a callback under the stub captured: by each fast capture function, then
/// libgcc's.
#[derive(Default)]
struct Captured {
    fast: Vec<Vec<u64>>,
    libgcc: Vec<u64>,
}

thread_local! {
    static CAPTURER: RefCell<Option<Capturer>> = const { RefCell::new(None) };
    static CAPTURED: RefCell<Captured> = RefCell::new(Captured::default());
}

/// Captures with every fast capture function and with libgcc.
extern "C" fn capture_everything() {
    let mut remembered = [0u64; MAX_FRAMES];
    let len = CAPTURER.with(|capturer| {
        capturer
            .borrow_mut()
            .as_mut()
            .expect("set by the test")
            .capture(&mut remembered)
    });
    let mut private = [0u64; MAX_FRAMES];
    let mut cache = RuleCache::<64>::new_boxed();
    let private_len = capture(&mut cache, &mut private);
    let mut shared = [0u64; MAX_FRAMES];
    let shared_len = capture_shared(&SHARED, &mut shared);
    let mut reference = [0u64; MAX_FRAMES];
    let reference_len = capture_libgcc(&mut reference);
    CAPTURED.with(|captured| {
        *captured.borrow_mut() = Captured {
            fast: vec![
                remembered[..len].to_vec(),
                private[..private_len].to_vec(),
                shared[..shared_len].to_vec(),
            ],
            libgcc: reference[..reference_len].to_vec(),
        }
    });
}

fn take_captured() -> Captured {
    CAPTURED.with(|captured| std::mem::take(&mut *captured.borrow_mut()))
}

#[test]
fn the_walk_steps_through_jit_code_with_frame_pointers_and_goes_on_with_cfi() {
    through_stub(jit_stub_with_frame_pointer());
}

#[test]
fn the_walk_steps_through_a_trampoline_by_its_epilogue() {
    through_stub(jit_stub_like_cpython_trampoline());
}

/// Captures under `stub` (whose call returns to its address + 6) and checks the
/// fast captures go on above it as libgcc sees the stack from the stub's caller.
fn through_stub(stub: extern "C" fn(extern "C" fn())) {
    let stub_return = stub as usize as u64 + 6;
    CAPTURER.with(|capturer| *capturer.borrow_mut() = Some(Capturer::new()));
    // Several rounds: the remembering capture's later rounds replay.
    for round in 0..black_box(4) {
        chain(25, &mut || {
            let mut outer = [0u64; MAX_FRAMES];
            let outer_len = capture_libgcc(&mut outer);
            let outer = &outer[..outer_len];
            stub(capture_everything);
            let captured = take_captured();
            // libgcc stops after the stub's frame.
            assert_eq!(captured.libgcc.last(), Some(&stub_return), "round {round}");
            let at = captured.libgcc.len() - 1;
            for (which, fast) in captured.fast.iter().enumerate() {
                let what = format!("round {round}, capture {which}");
                assert!(fast.len() > at + 25, "{what}: {} frames", fast.len());
                assert!(fast[0].abs_diff(captured.libgcc[0]) < 4096, "{what}");
                assert_eq!(fast[1..=at], captured.libgcc[1..], "{what}: below the stub");
                // Above the stub: the closure that called it, then its callers,
                // exactly as libgcc sees them from the closure.
                assert!(
                    fast[at + 1].abs_diff(outer[0]) < 4096,
                    "{what}: the stub's caller"
                );
                assert_eq!(fast[at + 2..], outer[1..], "{what}: above the stub");
            }
            0
        });
    }
}

#[test]
fn a_corrupt_frame_chain_ends_the_walk_without_a_fault() {
    let stub = jit_stub_with_rbp();
    let stub_return = stub as usize as u64 + 6;
    CAPTURER.with(|capturer| *capturer.borrow_mut() = Some(Capturer::new()));
    chain(10, &mut || {
        let here = &black_box(0u64) as *const u64 as u64;
        // Frames on this stack, above the callback's: a chain whose return
        // addresses are not code (tiny, unmapped), a loop onto itself, and one
        // that ends at a null saved rbp.
        let mut fake = [0u64; 8];
        let base = fake.as_ptr() as u64;
        fake[0] = base + 16; // saved rbp: the next fake frame
        fake[1] = 0xdead_0000; // a return address in unmapped memory
        fake[2] = base + 32;
        fake[3] = 0x0bad_0000_0000;
        fake[4] = base + 32; // a loop onto itself
        fake[5] = 0x0bad_1000_0000;
        fake[6] = 0;
        fake[7] = 5; // too small to be code
        let fake = black_box(fake);
        let hostile: [(u64, &[u64]); 10] = [
            (0, &[]),
            (1, &[]),
            (8, &[]),
            (0xdead_beef_0000, &[]),
            (u64::MAX - 7, &[]),
            (here - 4096, &[]),
            (here & !7, &[]),
            (base + 48, &[]),
            (base + 32, &[0x0bad_1000_0000]),
            (base, &[0xdead_0000, 0x0bad_0000_0000, 0x0bad_1000_0000]),
        ];
        for (rbp, expected_above) in hostile {
            stub(capture_everything, rbp);
            let captured = take_captured();
            assert_eq!(captured.libgcc.last(), Some(&stub_return));
            let at = captured.libgcc.len() - 1;
            for (which, fast) in captured.fast.iter().enumerate() {
                let what = format!("rbp {rbp:#x}, capture {which}: {fast:x?}");
                assert_eq!(fast[1..=at], captured.libgcc[1..], "{what}");
                if rbp == here & !7 {
                    // Some word of this frame: whatever it held, the walk went on
                    // from it without a fault.
                    continue;
                }
                assert_eq!(&fast[at + 1..], expected_above, "{what}");
            }
        }
        black_box(&fake);
        0
    });
}
