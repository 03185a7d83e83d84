//! Stack capture for sampled allocations.
//!
//! Owns the choice of unwinder, the rule cache all threads share, its use of
//! each thread's private unwinding state (`tls::ThreadUnwinder`: a small rule
//! cache and the memo of its last walk) and the removal of the shim's own
//! frames. The default is `heapsample-unwind`: a thread's private cache in
//! front of one shared rule cache (a new thread starts warm), and the memo,
//! which replays the outer frames unchanged since the thread's previous
//! capture instead of stepping them (consecutive samples on a thread usually
//! share most of their stack). A thread without its private state (one that
//! is exiting) uses the shared cache alone. `prof_unwind:libgcc` selects
//! libgcc's `_Unwind_Backtrace`, which on glibc ≥ 2.35 also finds unwind
//! tables through the lock-free `_dl_find_object` and does not allocate, but
//! costs 2–10 µs per stack.
//!
//! The shared cache lives in `MAP_SHARED` memory, so every process forked
//! from this one uses it too: a fork-per-connection server computes the
//! rules of its connection code once, not once per child. Each entry names
//! the object its rule came from (mapping, `.eh_frame_hdr`, name), so a
//! process never uses a rule for another object that its relative had at
//! the same address, whether `dlopen`, `dlmopen` or glibc itself (NSS, iconv)
//! loaded it.
//!
//! A sample taken in a hook whose naked entry saved its rsp and rbp
//! ([`HookEntry`]: malloc's crossing route and, at short periods, calloc,
//! realloc and an `operator new` the shim counts) starts the walk at the
//! hook's caller: the profiler's own frames in between are never stepped.
//! Other entries (the aligned allocations, calls from inside the shim) walk
//! from the capture and drop the profiler's frames after. Frames of ours
//! further out (allocations under the shim's `dlopen` and `dlclose`) are
//! searched for only where the unwinder says it stepped through our code
//! (its cached rules for our object carry a mark) or could not tell.
//!
//! Each capture counts why its walk ended in the calling thread's block
//! (`walk_ends`): the whole stack, the frame limit (`prof_bt_max`), or code
//! without unwind information the walk could not leave.
//!
//! Runs inside malloc's slow path: no allocation, no locks of ours.

use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};

use heapsample_unwind::{Captured, Ending};

use crate::tls::{self, ThreadUnwinder};
use crate::walk_ends;

/// Where the hook that is taking a sample was entered: its rsp and rbp as its
/// naked entry saved them (before anything moved rsp or wrote rbp), or
/// unknown (rsp 0). Two words, so it travels in two registers down to the
/// capture.
#[derive(Clone, Copy, Debug)]
pub struct HookEntry {
    rsp: u64,
    rbp: u64,
}

impl HookEntry {
    /// No entry known: the capture walks from itself.
    pub const UNKNOWN: HookEntry = HookEntry { rsp: 0, rbp: 0 };

    /// The entry registers a hook's naked entry passed on (rsp 0: unknown).
    ///
    /// # Safety
    /// `rsp` and `rbp` are 0 or were rsp and rbp at the first instruction of
    /// a hook of the calling thread that has not returned yet and whose call
    /// tree every use of the result stays in.
    pub unsafe fn new(rsp: u64, rbp: u64) -> HookEntry {
        HookEntry { rsp, rbp }
    }

    fn known(self) -> Option<heapsample_unwind::FunctionEntry> {
        (self.rsp != 0).then_some(heapsample_unwind::FunctionEntry {
            rsp: self.rsp,
            rbp: self.rbp,
        })
    }
}

type SharedRules = heapsample_unwind::SharedRuleCache;

/// The rules every thread and every forked child uses, read through the
/// private view of a shared memory file ([`crate::sys::SharedViews`], so
/// that forked children inherit its mapped pages) and written through the
/// shared one; where memory files cannot be made, one `MAP_SHARED` mapping
/// (children then fault on each page they read). Made at the first sample (256 KiB,
/// touched as used); null before, and for good if it cannot be made (stacks
/// are then captured by libgcc).
static RULES: AtomicPtr<SharedRules> = AtomicPtr::new(core::ptr::null_mut());
static USE_LIBGCC: AtomicBool = AtomicBool::new(false);

/// The shared rules, unless stacks are captured by libgcc.
fn fast_rules() -> Option<&'static SharedRules> {
    if USE_LIBGCC.load(Relaxed) {
        return None;
    }
    shared_rules()
}

fn shared_rules() -> Option<&'static SharedRules> {
    // SAFETY: null, or set once by `make_rule_cache` to a zeroed mapping of the
    // cache's size that is never unmapped; all-zero memory is an empty cache.
    unsafe { RULES.load(Acquire).as_ref() }
}

/// Make the rule cache, where forked children will share it (at the first
/// sample: `table_setup`). False if it cannot be mapped: stacks are then
/// captured by libgcc.
pub fn make_rule_cache() -> bool {
    let bytes = SharedRules::size_in_bytes();
    if let Some(views) = crate::sys::map_shared_views(bytes) {
        let (read, write) = (
            views.read.cast::<SharedRules>(),
            views.write.cast::<SharedRules>(),
        );
        // SAFETY: both views map the same zeroed memory file, never unmapped;
        // all-zero memory is an empty cache.
        unsafe { (*read).set_write_view(&*write) };
        RULES.store(read, Release);
        return true;
    }
    let memory = crate::sys::map_shared_zeroed(bytes);
    RULES.store(memory.cast(), Release);
    !memory.is_null()
}

/// Use libgcc's unwinder instead of the cached one.
pub fn use_libgcc(on: bool) {
    USE_LIBGCC.store(on, Relaxed);
}

/// True when stacks are captured with libgcc's unwinder.
pub fn uses_libgcc() -> bool {
    USE_LIBGCC.load(Relaxed)
}

/// Answer libgcc questions (the fallback walk, frames a JIT registered) with
/// the process's own libgcc_s once it has one loaded: the copy linked into
/// the shim does not see frames registered with the process's copy. Called
/// at start-up and before each `dlopen`, so a libgcc_s that a `dlopen`
/// brought in is used from the next `dlopen` on. Outside malloc (it walks
/// the loaded objects and calls `dlsym`); cheap once found.
pub fn use_process_libgcc() {
    heapsample_unwind::use_process_libgcc();
}

/// Forget cached unwind rules (around `dlclose`).
pub fn invalidate() {
    heapsample_unwind::invalidate_all_caches();
}

/// An object may be loaded (`dlopen`) where code without unwind
/// information was seen: forget the rules that said so, if any was cached.
pub fn before_load() {
    heapsample_unwind::forget_code_without_unwind_info();
}

/// How a frame registration names its `.eh_frame` sections.
pub use heapsample_unwind::Registered;

/// The program registered frames with libgcc at `begin` (call after
/// libgcc did): the walk evaluates them itself, never asking libgcc inside
/// malloc. Outside malloc.
///
/// # Safety
/// `begin` is what the program registered, readable until it deregisters it.
pub unsafe fn frames_registered(begin: usize, how: Registered, text: usize, data: usize) {
    // SAFETY: forwarded from our caller's contract.
    unsafe { heapsample_unwind::register_frames(begin as u64, how, text as u64, data as u64) };
}

/// The program is deregistering the frames at `begin` (call before libgcc
/// does): no walk reads them once this returns. Outside malloc.
pub fn frames_deregistering(begin: usize) {
    heapsample_unwind::deregister_frames(begin as u64);
}

/// Every frame registration of the process goes through the shim's
/// interposed `__register_frame*` (it was preloaded, not loaded late).
pub fn sees_all_frame_registrations(on: bool) {
    heapsample_unwind::set_registrations_complete(on);
}

/// The address range of the object that contains the profiler's code.
static OWN_START: AtomicUsize = AtomicUsize::new(0);
static OWN_END: AtomicUsize = AtomicUsize::new(0);

/// Find the unwinder's glibc entry point and learn the profiler's own
/// address range, so its frames can be dropped (the shared rule cache is
/// made at the first sample: [`make_rule_cache`]).
/// Returns why the cached unwinder cannot work here (then use libgcc's).
pub fn init() -> Result<(), &'static str> {
    if !heapsample_unwind::init() {
        return Err("this glibc has no _dl_find_object (2.35+)");
    }
    if let Some((start, end)) = object_range(init as fn() -> Result<(), &'static str> as usize) {
        OWN_START.store(start, Relaxed);
        OWN_END.store(end, Relaxed);
        heapsample_unwind::set_own_code(start as u64, end as u64);
    }
    Ok(())
}

/// Capture the calling thread's return addresses, innermost first, without
/// the profiler's own frames, using only the shared rule cache: for a thread
/// past its exit flush (its walk is counted with the retired threads', as
/// the walk ended: such a thread captures into a small buffer of its stack,
/// which it keeps whole up to `prof_bt_max`). Returns where in `frames` they are.
#[inline(never)]
pub fn capture(frames: &mut [u64]) -> core::ops::Range<usize> {
    let captured = match fast_rules() {
        Some(rules) => heapsample_unwind::capture_shared_ending(rules, frames),
        None => libgcc_capture(frames),
    };
    walk_ends::count_retired(captured.ending);
    drop_own_frames(&mut frames[..captured.len])
}

/// [`capture`] through the calling thread's private state (its own rule
/// cache in front of the shared one, and the memo of its last walk, which
/// helps for captures of at most `FRAME_BUFFER_LEN` frames), from the
/// caller of the hook at `entry` when it is known; `unwinder` is the calling
/// thread's, and its walk is counted in the thread's block.
///
/// `frames` holds the frames kept (`prof_bt_max`) and
/// [`tls::OWN_FRAMES_SLACK`] more, for the profiler's own frames dropped
/// after: a stack that leaves more than the frames kept was cut.
#[inline(never)]
pub fn capture_with(
    unwinder: &mut ThreadUnwinder,
    frames: &mut [u64],
    entry: HookEntry,
) -> core::ops::Range<usize> {
    let (captured, replayed) = match (fast_rules(), entry.known()) {
        (None, _) => (libgcc_capture(frames), None),
        (Some(rules), Some(entry)) => {
            // SAFETY: `HookEntry::new`'s contract: the entry of a hook still
            // running on this thread, which called this capture.
            let captured = unsafe { unwinder.capture_from(rules, entry, frames) };
            (captured, Some(unwinder.replayed()))
        }
        (Some(rules), None) => (unwinder.capture(rules, frames), Some(unwinder.replayed())),
    };
    let range =
        drop_own_frames_unless_known(unwinder, &mut frames[..captured.len], captured, replayed);
    walk_ends::count(tls::current(), kept_ending(captured, &range, frames.len()));
    range
}

/// libgcc's capture of the calling thread's stack (`prof_unwind:libgcc`).
#[inline(always)]
fn libgcc_capture(frames: &mut [u64]) -> Captured {
    let len = heapsample_unwind::capture_libgcc(frames);
    heapsample_unwind::libgcc_captured(frames, len)
}

/// Why the stack kept of a capture into a buffer of `capacity` frames ended:
/// as its walk did, or at the frame limit if more frames than are kept
/// remain after the profiler's own (`range`).
#[inline(always)]
fn kept_ending(captured: Captured, range: &core::ops::Range<usize>, capacity: usize) -> Ending {
    if range.len() > capacity.saturating_sub(tls::OWN_FRAMES_SLACK) {
        Ending::FrameLimit
    } else {
        captured.ending
    }
}

/// The frames of `frames` that do not lie in the profiler's own object:
/// `frames[range]` after removing them in place. The profiler's frames are
/// normally innermost only (none when the walk started at a hook's caller),
/// and the rest is left where it is.
#[inline(always)]
fn drop_own_frames(frames: &mut [u64]) -> core::ops::Range<usize> {
    let (start, end) = (OWN_START.load(Relaxed) as u64, OWN_END.load(Relaxed) as u64);
    if !maybe_own_frame(frames, start, end) {
        return 0..frames.len();
    }
    drop_own_frames_found(frames, start, end)
}

/// [`drop_own_frames`] for a capture through `unwinder` (`replayed`: where it
/// put the frames it replayed from its memo; `None` for libgcc's capture).
/// Only the frames that may be the profiler's are looked at:
/// - none of those the unwinder stepped by a rule it looked up, unless it
///   says one of them was in the profiler's code
///   ([`ThreadUnwinder::may_hold_own_frames`], which also covers a libgcc
///   fallback): a rule for our code is marked when it is cached;
/// - the last frame where the buffer filled (its rule was never looked up);
/// - none of those replayed from the memo: frames earlier captures through
///   it returned, which were checked then;
/// - all of them where the walk ended in code without unwind information
///   (frames reached by frame pointers: the last one is not looked up).
///
/// A capture that holds a frame of ours makes the memo forget, so that it
/// only ever replays frames that passed.
#[inline(always)]
fn drop_own_frames_unless_known(
    unwinder: &mut ThreadUnwinder,
    frames: &mut [u64],
    captured: Captured,
    replayed: Option<core::ops::Range<usize>>,
) -> core::ops::Range<usize> {
    let (start, end) = (OWN_START.load(Relaxed) as u64, OWN_END.load(Relaxed) as u64);
    let maybe_own = match replayed {
        Some(_) if !unwinder.may_hold_own_frames() => match captured.ending {
            Ending::Outermost => false,
            Ending::FrameLimit => frames
                .last()
                .is_some_and(|&address| address.wrapping_sub(start) < end.wrapping_sub(start)),
            Ending::NoUnwindInfo | Ending::UnknownStack => maybe_own_frame(frames, start, end),
        },
        Some(replayed) if !replayed.is_empty() && replayed.end <= frames.len() => {
            maybe_own_frame(&frames[..replayed.start], start, end)
                || maybe_own_frame(&frames[replayed.end..], start, end)
        }
        _ => maybe_own_frame(frames, start, end),
    };
    if !maybe_own {
        return 0..frames.len();
    }
    let all = frames.len();
    let range = drop_own_frames_found(frames, start, end);
    if range != (0..all) {
        unwinder.forget();
    }
    range
}

/// False only if no frame lies in `[start, end)`: the common case, a walk
/// from a hook's caller, decided in one pass of subtractions and bit
/// operations the compiler turns into vector instructions. For a user-space
/// address `a` (below 2⁶³, as `start` and `end` are) bit 63 of `a - end` is
/// set exactly when `a < end`, and that of `a - start` exactly when
/// `a < start`; any other value at worst makes it true, and the exact check
/// follows.
///
/// The vector loop takes four frames at a time; where the count is no
/// multiple of four, the last four frames are taken again as one vector
/// instead of one at a time.
#[inline(always)]
fn maybe_own_frame(frames: &[u64], start: u64, end: u64) -> bool {
    let inside = |frames: &[u64]| {
        frames.iter().fold(0u64, |inside, &address| {
            inside | (address.wrapping_sub(end) & !address.wrapping_sub(start))
        })
    };
    let found = match frames.len().checked_sub(4) {
        Some(last) => {
            let (fours, _) = frames.as_chunks::<4>();
            let tail: &[u64; 4] = frames[last..].try_into().unwrap_or(&[0; 4]);
            inside(fours.as_flattened()) | inside(tail)
        }
        None => inside(frames),
    };
    found >> 63 != 0
}

/// [`drop_own_frames`] when some frame may be the profiler's.
#[cold]
#[inline(never)]
fn drop_own_frames_found(frames: &mut [u64], start: u64, end: u64) -> core::ops::Range<usize> {
    let span = end.wrapping_sub(start);
    let is_own = |address: u64| address.wrapping_sub(start) < span;
    let first = frames
        .iter()
        .position(|&address| !is_own(address))
        .unwrap_or(frames.len());
    if !frames[first..].iter().any(|&address| is_own(address)) {
        return first..frames.len();
    }
    let mut kept = first;
    for index in first..frames.len() {
        let address = frames[index];
        frames[kept] = address;
        kept += usize::from(!is_own(address));
    }
    first..kept
}

/// Start and end of the object containing `address`, lock-free.
pub fn object_range(address: usize) -> Option<(usize, usize)> {
    heapsample_unwind::object_range(address as u64)
        .map(|(start, end)| (start as usize, end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_frames_are_dropped_wherever_they_are() {
        OWN_START.store(100, Relaxed);
        OWN_END.store(200, Relaxed);
        let mut frames = [150, 160, 300, 400, 199, 500, 100, 600];
        let range = drop_own_frames(&mut frames);
        assert_eq!(&frames[range], &[300, 400, 500, 600]);
        let mut frames = [150, 300, 400];
        let range = drop_own_frames(&mut frames);
        assert_eq!(range, 1..3, "a leading run is skipped without copying");
        let mut frames = [300, 99, 200, 0x7fff_0000_0000];
        assert_eq!(drop_own_frames(&mut frames), 0..4, "none of ours");
        let mut frames = [150, 160];
        assert!(drop_own_frames(&mut frames).is_empty());
        // Counts that are no multiple of four: the tail's frames are seen too.
        for len in 1..=11 {
            for own in 0..len {
                let mut frames: Vec<u64> = (0..len).map(|index| 1000 + index).collect();
                frames[own as usize] = 150;
                let range = drop_own_frames(&mut frames);
                assert_eq!(range.len(), len as usize - 1, "{len} frames, ours at {own}");
                assert!(!frames[range].contains(&150));
            }
        }
        OWN_START.store(0, Relaxed);
        OWN_END.store(0, Relaxed);
    }
}
