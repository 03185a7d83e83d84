//! The fast stack walk: start registers, stepping with cached rules, stop conditions.
//!
//! Owns the `asm!` that reads rip/rsp/rbp, the two ways a walk starts (at the
//! capture's own frame, or at the caller of a function whose entry registers were
//! saved: [`FunctionEntry`]) and the loop that applies [`Rule`]s. It only reads stack
//! memory that the rules point at after checking it lies between the current stack
//! pointer and a bounded distance above it, and below the top of the thread's stack
//! where [`stack_top`] knows it: a wrong rule (code unloaded and replaced behind the
//! profiler's back, a corrupt cache entry) then ends the walk instead of reading past
//! the stack.
//!
//! Runs inside malloc: no allocation, no locks, no system calls. Work is bounded by
//! `frames.len()` steps.

use crate::cache::RuleStore;
use crate::cfi;
use crate::ending::Ending;
use crate::rule::{MAX_FRAME_BYTES, OWN_CODE, Rule, StepBits, is_outermost};

/// No thread's stack is deeper than this: a stack pointer farther below a thread's
/// descriptor or the main thread's initial stack pointer is on another stack.
const MAX_STACK_BYTES: u64 = 1 << 32;

unsafe extern "C" {
    /// glibc's record of the main thread's initial stack pointer (`ld.so`).
    static __libc_stack_end: *const core::ffi::c_void;
}

/// The highest address a walk from `rsp` may read below: for a thread glibc created,
/// its descriptor, which sits at the top of its stack block (above its stack and
/// static TLS, also for a stack the program gave it); for the main thread, the end of
/// the page of its initial stack pointer (its outermost frame lies below). `u64::MAX`
/// on any other stack (an alternate signal stack, a coroutine's below neither), whose
/// frames stay bounded by `MAX_FRAME_BYTES` each only. Everything between `rsp` and
/// the top is the thread's own mapped stack.
#[inline(always)]
pub(crate) fn stack_top(rsp: u64) -> u64 {
    let descriptor: u64;
    // SAFETY: reads the thread descriptor's pointer to itself, at offset 16 of the
    // thread control block `fs` points to (x86_64 glibc's `tcbhead_t.self`, what
    // `pthread_self` returns); touches no other memory.
    unsafe {
        core::arch::asm!(
            "mov {}, qword ptr fs:[16]",
            out(reg) descriptor,
            options(nostack, readonly, preserves_flags),
        );
    }
    if rsp < descriptor && descriptor - rsp <= MAX_STACK_BYTES {
        return descriptor;
    }
    // SAFETY: a plain read of glibc's variable, set before any code of ours runs.
    let initial = unsafe { __libc_stack_end } as u64;
    if rsp < initial && initial - rsp <= MAX_STACK_BYTES {
        return (initial | 0xfff) + 1;
    }
    u64::MAX
}

/// The registers the fast path tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Registers {
    /// An address inside the function whose frame this is (exact, not a return address).
    pub(crate) pc: u64,
    pub(crate) rsp: u64,
    pub(crate) rbp: u64,
}

impl Registers {
    /// The registers at this point of the function this is inlined into.
    ///
    /// Must be inlined into the `capture*` function, so that the frame being described
    /// is that function's, whose frame stays live (and unchanged above `rsp`) while
    /// the walk runs.
    #[inline(always)]
    pub(crate) fn current() -> Registers {
        let (pc, rsp, rbp): (u64, u64, u64);
        // SAFETY: reads three registers into outputs; touches no memory or flags.
        // rbp is read first; it can never be an operand register.
        unsafe {
            core::arch::asm!(
                "mov {rbp}, rbp",
                "mov {rsp}, rsp",
                "lea {pc}, [rip]",
                rbp = out(reg) rbp,
                rsp = out(reg) rsp,
                pc = out(reg) pc,
                options(nomem, nostack, preserves_flags),
            );
        }
        Registers { pc, rsp, rbp }
    }
}

/// The registers of a function at its entry, before it touched the stack: `rsp`
/// points at the return address its call pushed, and `rbp` is still its caller's.
///
/// An interposed function that saves them (two `mov`s before its first instruction
/// that moves rsp or writes rbp) lets a capture made further down its call tree start
/// at its caller, so the frames in between are never stepped: the caller's registers
/// are exactly what stepping out of those frames would compute (rbp is callee-saved
/// and restored from the slots their CFI names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct FunctionEntry {
    /// rsp at the entry: the address of the return address.
    pub rsp: u64,
    /// rbp at the entry (the caller's).
    pub rbp: u64,
}

impl FunctionEntry {
    /// The caller's frame, if `self.rsp` is a plausible entry of a function still
    /// running on this stack: 8-aligned, above `current_rsp` (the capture's own
    /// stack pointer) and within a frame's reach of it. Reads the return address.
    #[inline(always)]
    pub(crate) fn caller(&self, current_rsp: u64) -> Option<Registers> {
        let rsp = self.rsp;
        // `current_rsp < rsp <= current_rsp + MAX_FRAME_BYTES` in one unsigned
        // compare: the distance less one wraps to a huge value where `rsp` is
        // not above `current_rsp`.
        let distance = rsp.wrapping_sub(current_rsp).wrapping_sub(1);
        if distance >= MAX_FRAME_BYTES || !rsp.is_multiple_of(8) {
            return None;
        }
        // SAFETY: `current_rsp < rsp`, within a bounded distance: the slot lies in the
        // live stack of a function that is still running (it called the capture,
        // directly or not), per `capture_remembered_from`'s contract.
        let return_address = unsafe { read_stack(rsp) };
        if return_address == 0 {
            return None;
        }
        Some(Registers {
            pc: return_address,
            rsp: rsp + 8,
            rbp: self.rbp,
        })
    }
}

/// Where a walk starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Start {
    /// The capture's own frame (`pc` exact, inside it): not reported.
    Here(Registers),
    /// A caller's frame (`pc` is a return address): reported as the first frame.
    Caller(Registers),
}

impl Start {
    /// The first frame to step from, its lookup address, and the frames written for
    /// the start itself (the caller's return address, if there is room).
    #[inline(always)]
    pub(crate) fn begin(self, frames: &mut [u64]) -> (Registers, u64, usize) {
        match self {
            // The capture's frame is described by its exact pc.
            Start::Here(regs) => (regs, regs.pc, 0),
            // Callers' frames by their return address minus one, which lies inside the
            // call instruction.
            Start::Caller(regs) => match frames.first_mut() {
                Some(first) => {
                    *first = regs.pc;
                    (regs, regs.pc - 1, 1)
                }
                None => (regs, regs.pc - 1, 0),
            },
        }
    }
}

/// How a fast walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalkEnd {
    /// Reached the outermost frame, a zero return address, filled `frames`, or
    /// stopped in code without unwind information: the count of frames written and
    /// which of those it was.
    Complete(usize, Ending),
    /// Stopped somewhere the fast path cannot follow; `frames` holds garbage.
    NeedsFallback,
}

/// What one step from a frame found.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// The caller's frame: its registers (`pc` is the return address), the stack slot
    /// its rbp was restored from (0 if rbp was carried over unchanged), and whether the
    /// CFA was computed from rbp.
    Caller {
        regs: Registers,
        rbp_slot: u64,
        cfa_from_rbp: bool,
    },
    /// The frame is the outermost one (its return address is undefined).
    Outermost,
    /// The return address slot at `slot` holds 0: libgcc's terminal zero frame.
    ZeroReturn { slot: u64, cfa_from_rbp: bool },
    /// No unwind information covers the frame and libgcc stops after reporting it.
    NoUnwindInfo,
    /// The fast path cannot follow this frame.
    Unsupported,
}

/// Steps from the frame described by `regs` to its caller. `lookup_address` is
/// `regs.pc` for the capture's own frame and `regs.pc - 1` for callers' frames.
///
/// Reads at most two stack slots, both between `regs.rsp` and a bounded distance above
/// it, and below `top` ([`stack_top`]). The result is a function of `regs`, `top`, the
/// rule for `lookup_address` (fixed for a cache generation) and the values in those
/// two slots only; `StackMemo`'s replay relies on that. A rule marked as the
/// profiler's own code is taken like any other, and noted in `store`
/// ([`RuleStore::note_own_code`]); [`plain_steps`] leaves such frames to this step.
#[inline(always)]
pub(crate) fn step<S: RuleStore>(
    store: &mut S,
    regs: &Registers,
    lookup_address: u64,
    top: u64,
    via_frame_pointer: bool,
) -> Step {
    let mut bits = store.rule_bits(lookup_address);
    if StepBits::of(bits).is_none() && bits & OWN_CODE != 0 {
        bits = own_code_bits(store, bits);
    }
    let Some(rule) = StepBits::of(bits) else {
        return other_step(Rule::decode(bits), regs, lookup_address, via_frame_pointer);
    };
    let cfa_from_rbp = rule.cfa_from_rbp();
    let Some(cfa) = caller_cfa(rule, regs.rsp, regs.rbp, top) else {
        return Step::Unsupported;
    };
    // SAFETY: `regs.rsp <= cfa - 8 < cfa <= top` (`caller_cfa`): the slot lies in
    // the live part of the stack between the stack pointer of a frame we already
    // stepped into (or our own) and its CFA, as described by the frame's CFI.
    let return_address = unsafe { read_stack(cfa - 8) };
    let (rbp, rbp_slot) = match rule.saved_rbp_offset() {
        None => (regs.rbp, 0),
        Some(offset) => {
            let slot = cfa.wrapping_add_signed(offset);
            // SAFETY: `regs.rsp <= slot < cfa`, 8-aligned (`caller_cfa`).
            (unsafe { read_stack(slot) }, slot)
        }
    };
    if return_address == 0 {
        return Step::ZeroReturn {
            slot: cfa - 8,
            cfa_from_rbp,
        };
    }
    Step::Caller {
        regs: Registers {
            pc: return_address,
            rsp: cfa,
            rbp,
        },
        rbp_slot,
        cfa_from_rbp,
    }
}

/// `bits` marked [`OWN_CODE`], without the mark, after noting in `store` that
/// the walk steps through the profiler's own code.
#[cold]
#[inline(never)]
fn own_code_bits<S: RuleStore>(store: &mut S, bits: u64) -> u64 {
    store.note_own_code();
    bits & !OWN_CODE
}

/// The CFA (the caller's stack pointer) that `rule` gives for a frame whose
/// registers are `rsp` and `rbp`, if the step stays inside the frame and below
/// `top`: the CFA 8-aligned, at least 8 bytes above rsp (the return address lies
/// between) and within [`MAX_FRAME_BYTES`], and a saved rbp's slot 8-aligned
/// between rsp and CFA−8. A rule from rsp was bounded so when it was made
/// ([`Rule::step`]), so only the top is checked for it; one from rbp is checked
/// here, as rbp can hold anything.
#[inline(always)]
fn caller_cfa(rule: StepBits, rsp: u64, rbp: u64, top: u64) -> Option<u64> {
    let cfa = if rule.cfa_from_rbp() {
        let cfa = rbp.wrapping_add_signed(rule.cfa_offset());
        // One unsigned compare does both bounds: `height - 8` wraps to a huge value
        // below 8. (rsp never comes near 2⁶⁴: it starts at a real stack pointer and
        // grows by at most `MAX_FRAME_BYTES` per step.)
        let height = cfa.wrapping_sub(rsp);
        if !cfa.is_multiple_of(8) || height.wrapping_sub(8) > MAX_FRAME_BYTES - 8 {
            return None;
        }
        if let Some(offset) = rule.saved_rbp_offset() {
            // `rsp <= slot <= cfa - 8`, in one unsigned compare as above.
            let slot = cfa.wrapping_add_signed(offset);
            if slot.wrapping_sub(rsp) > height - 8 || !slot.is_multiple_of(8) {
                return None;
            }
        }
        cfa
    } else {
        rsp.wrapping_add_signed(rule.cfa_offset())
    };
    (cfa <= top).then_some(cfa)
}

/// [`step`] for a frame whose rule is not a plain step (`None`: no rule at all).
///
/// A frame reached by a frame-pointer step (`via_frame_pointer`) may hold any
/// address the stack held: its code is never read, only looked up. libgcc is
/// asked about frames a JIT registered only where `registered` does not know
/// them all (the rule already says whether any loaded object or registered
/// section covers the address).
#[cold]
#[inline(never)]
fn other_step(
    rule: Option<Rule>,
    regs: &Registers,
    lookup_address: u64,
    via_frame_pointer: bool,
) -> Step {
    match rule {
        Some(Rule::Outermost) => Step::Outermost,
        // Not the capture's own frame (whose code has unwind information).
        Some(Rule::NoUnwindInfo) if lookup_address != regs.pc => {
            let stops = if via_frame_pointer {
                crate::registered::complete() || !crate::libgcc::has_fde(lookup_address)
            } else {
                cfi::libgcc_stops_at(regs.pc)
            };
            if stops {
                Step::NoUnwindInfo
            } else {
                Step::Unsupported
            }
        }
        _ => Step::Unsupported,
    }
}

/// The lowest return address a frame-pointer step accepts: below it lies the
/// unmapped first page, so the value is not a return address but data.
const MIN_RETURN_ADDRESS: u64 = 0x1000;

/// The caller of a frame in code without unwind information (JIT code, an
/// interpreter's trampoline), by the frame-pointer chain: x86_64's `push rbp;
/// mov rbp, rsp` prologue leaves rbp pointing at the caller's rbp, with the return
/// address above it. Every x86_64 specific of the walk through such code is here.
///
/// Only where the thread's stack top is known, and only if rbp lies 8-aligned
/// between `regs.rsp` and that top (everything between is the thread's mapped
/// stack), so a corrupt or reused rbp never makes the walk read outside the stack;
/// the caller's stack pointer is above this frame's, so a chain cannot loop. `None`
/// ends the walk: rbp is not a frame pointer there, or the chain ends.
///
/// `code_readable`: the frame's pc came from a step by unwind tables (a real
/// return address), so its code may be read: a stub that keeps no frame pointer
/// but returns by `add rsp, N; ret` (CPython 3.12's perf trampolines: `sub rsp, 8;
/// call; add rsp, 8; ret`) is stepped by that epilogue instead, rbp unchanged.
#[inline]
pub(crate) fn step_without_cfi(
    regs: &Registers,
    top: u64,
    code_readable: bool,
) -> Option<Registers> {
    if code_readable && let Some(pop) = stack_adjustment_before_ret(regs.pc) {
        let cfa = regs.rsp + pop + 8;
        if top == u64::MAX || cfa > top {
            return None;
        }
        // SAFETY: `regs.rsp < cfa <= top`: the slot lies in the thread's mapped stack.
        let return_address = unsafe { read_stack(cfa - 8) };
        return (return_address >= MIN_RETURN_ADDRESS).then_some(Registers {
            pc: return_address,
            rsp: cfa,
            rbp: regs.rbp,
        });
    }
    frame_pointer_step(regs, top)
}

/// N if the code at `pc` is `add rsp, N; ret` (`48 83 c4 N c3`, N a multiple of 8
/// below 128).
fn stack_adjustment_before_ret(pc: u64) -> Option<u64> {
    // SAFETY: a return address found by unwind tables: code the thread returns to,
    // read as `cfi::libgcc_stops_at` reads it.
    let code = unsafe { core::ptr::read_unaligned(pc as *const [u8; 5]) };
    match code {
        [0x48, 0x83, 0xc4, n, 0xc3] if n % 8 == 0 && n < 0x80 => Some(u64::from(n)),
        _ => None,
    }
}

/// The frame-pointer step of [`step_without_cfi`].
#[inline]
pub(crate) fn frame_pointer_step(regs: &Registers, top: u64) -> Option<Registers> {
    let rbp = regs.rbp;
    if top == u64::MAX
        || !rbp.is_multiple_of(8)
        || rbp < regs.rsp
        || rbp - regs.rsp > MAX_FRAME_BYTES
        || top < 16
        || rbp > top - 16
    {
        return None;
    }
    // SAFETY: `regs.rsp <= rbp < rbp + 16 <= top`: both slots lie in the thread's
    // mapped stack (see `stack_top`).
    let (saved_rbp, return_address) = unsafe { (read_stack(rbp), read_stack(rbp + 8)) };
    if return_address < MIN_RETURN_ADDRESS {
        return None;
    }
    Some(Registers {
        pc: return_address,
        rsp: rbp + 16,
        rbp: saved_rbp,
    })
}

/// Walks from `start` outwards, writing each return address to `frames`.
#[inline(always)]
pub(crate) fn walk<S: RuleStore>(start: Start, store: &mut S, frames: &mut [u64]) -> WalkEnd {
    let (regs, lookup_address, written) = start.begin(frames);
    let at = Cursor {
        regs,
        lookup_address,
        written,
    };
    walk_from(at, store, stack_top(regs.rsp), frames, false)
}

/// The loop of [`walk`] from `at`; `via_frame_pointer` if `at` was reached by a
/// [`frame_pointer_step`].
#[inline(always)]
fn walk_from<S: RuleStore>(
    mut at: Cursor,
    store: &mut S,
    top: u64,
    frames: &mut [u64],
    mut via_frame_pointer: bool,
) -> WalkEnd {
    loop {
        let before = at.written;
        if plain_steps(store, &mut at, top, frames) {
            return WalkEnd::Complete(at.written, Ending::Outermost);
        }
        if at.written == frames.len() {
            return WalkEnd::Complete(at.written, Ending::FrameLimit);
        }
        via_frame_pointer &= at.written == before;
        match step(store, &at.regs, at.lookup_address, top, via_frame_pointer) {
            Step::Caller { regs: caller, .. } => {
                at.advance(caller, frames);
                via_frame_pointer = false;
            }
            // A zero return address is what libgcc reports as its terminal frame.
            Step::Outermost | Step::ZeroReturn { .. } => {
                return WalkEnd::Complete(at.written, Ending::Outermost);
            }
            Step::NoUnwindInfo => match step_without_cfi(&at.regs, top, !via_frame_pointer) {
                Some(caller) => {
                    at.advance(caller, frames);
                    via_frame_pointer = true;
                }
                None => return WalkEnd::Complete(at.written, stranded(top)),
            },
            Step::Unsupported => return WalkEnd::NeedsFallback,
        }
    }
}

/// Goes on from a frame in code without unwind information (at which a step
/// returned [`Step::NoUnwindInfo`]) by [`frame_pointer_step`]s, then as [`walk`]
/// does once back in code with unwind information. `frames` must have room for one
/// more frame.
#[cold]
#[inline(never)]
pub(crate) fn walk_on_without_cfi<S: RuleStore>(
    mut at: Cursor,
    store: &mut S,
    top: u64,
    frames: &mut [u64],
) -> WalkEnd {
    match step_without_cfi(&at.regs, top, true) {
        Some(caller) => {
            at.advance(caller, frames);
            walk_from(at, store, top, frames, true)
        }
        None => WalkEnd::Complete(at.written, stranded(top)),
    }
}

/// Why a walk ends in code without unwind information from which
/// [`step_without_cfi`] found no caller: no frame-pointer step is taken on a stack
/// whose top is unknown; elsewhere the code keeps no usable frame pointer.
#[inline]
pub(crate) fn stranded(top: u64) -> Ending {
    if top == u64::MAX {
        Ending::UnknownStack
    } else {
        Ending::NoUnwindInfo
    }
}

/// Where a walk is: the frame to step from, its lookup address and the frames
/// written so far.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor {
    pub(crate) regs: Registers,
    pub(crate) lookup_address: u64,
    pub(crate) written: usize,
}

impl Cursor {
    /// Moves to `caller` (a step's result), writing its return address.
    #[inline(always)]
    pub(crate) fn advance(&mut self, caller: Registers, frames: &mut [u64]) {
        frames[self.written] = caller.pc;
        self.written += 1;
        self.regs = caller;
        self.lookup_address = caller.pc - 1;
    }
}

/// Takes [`step`]s from `at` while each is a plain step to a caller (a rule that
/// computes the CFA from rsp or rbp, a nonzero return address, every bound met) and
/// `frames` has room, writing each return address. Stops at the first frame whose
/// step is anything else: returns true if that is the outermost frame (the walk is
/// complete, as [`Step::Outermost`] ends it), false for [`step`] to take it. It reads
/// the same slots in the same order as [`step`], so a walk through here is the walk
/// of [`step`]s. The registers live in locals, so a frame costs a rule lookup and a
/// few compares.
#[inline(always)]
pub(crate) fn plain_steps<S: RuleStore>(
    store: &mut S,
    at: &mut Cursor,
    top: u64,
    frames: &mut [u64],
) -> bool {
    let (mut pc, mut rsp, mut rbp) = (at.regs.pc, at.regs.rsp, at.regs.rbp);
    let (mut lookup_address, mut written) = (at.lookup_address, at.written);
    let mut outermost = false;
    while written < frames.len() {
        let bits = store.rule_bits(lookup_address);
        let Some(rule) = StepBits::of(bits) else {
            outermost = is_outermost(bits);
            break;
        };
        let Some(cfa) = caller_cfa(rule, rsp, rbp, top) else {
            break;
        };
        // SAFETY: as in `step`.
        let return_address = unsafe { read_stack(cfa - 8) };
        if return_address == 0 {
            break;
        }
        if let Some(offset) = rule.saved_rbp_offset() {
            // SAFETY: as in `step`.
            rbp = unsafe { read_stack(cfa.wrapping_add_signed(offset)) };
        }
        frames[written] = return_address;
        written += 1;
        (pc, rsp) = (return_address, cfa);
        lookup_address = return_address - 1;
    }
    *at = Cursor {
        regs: Registers { pc, rsp, rbp },
        lookup_address,
        written,
    };
    outermost
}

/// Reads one stack slot.
///
/// # Safety
/// `address` must be 8-aligned and inside a live stack frame of the current thread.
#[inline(always)]
pub(crate) unsafe fn read_stack(address: u64) -> u64 {
    // SAFETY: guaranteed by the caller. Volatile: this memory belongs to frames the
    // compiler does not know we are looking at.
    unsafe { core::ptr::read_volatile(address as *const u64) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::CfaBase;

    #[test]
    fn a_threads_stack_ends_at_its_descriptor() {
        let rsp = Registers::current().rsp;
        let top = stack_top(rsp);
        // SAFETY: no preconditions.
        assert_eq!(top, unsafe { libc::pthread_self() } as u64);
        let local = core::hint::black_box(7u64);
        let address = &local as *const u64 as u64;
        assert!(rsp <= address && address < top);
        // The whole range is this thread's mapped stack: the last word below the top
        // reads.
        // SAFETY: below the descriptor, within this thread's stack block.
        let _ = unsafe { read_stack(top - 8) };
    }

    #[test]
    fn an_entry_is_taken_only_above_the_capture_and_within_a_frame() {
        let stack = [0x1234u64, 0x5678, 0];
        let current = stack.as_ptr() as u64 - 8;
        let entry = |rsp: u64| FunctionEntry { rsp, rbp: 99 }.caller(current);
        let caller = entry(current + 16).expect("a return address 16 bytes up");
        assert_eq!(
            (caller.pc, caller.rsp, caller.rbp),
            (0x5678, current + 24, 99)
        );
        assert!(entry(current + 24).is_none(), "a zero return address");
        // Refused before any memory is read.
        for rsp in [
            current,
            current - 8,
            current + 12,
            current + MAX_FRAME_BYTES + 8,
            current.wrapping_add(u64::MAX - 7),
        ] {
            assert!(entry(rsp).is_none(), "{:#x} from {current:#x}", rsp);
        }
    }

    #[test]
    fn a_rule_pointing_above_the_stack_top_ends_the_walk() {
        let regs = Registers {
            pc: 0x1000,
            rsp: 0x7000,
            rbp: 0,
        };
        let rule = Rule::Step {
            cfa_base: CfaBase::Rsp,
            cfa_offset: 64,
            saved_rbp_offset: None,
        };
        let step = step(&mut OneRule(rule), &regs, 0xfff, 0x7000 + 32, false);
        assert!(matches!(step, Step::Unsupported), "{step:?}");
    }

    /// A store that has one rule for every address.
    struct OneRule(Rule);

    impl RuleStore for OneRule {
        fn get(&mut self, _address: u64) -> Option<Rule> {
            Some(self.0)
        }

        fn put(&mut self, _address: u64, _rule: Rule) {}
    }

    /// One step from a frame whose stack is `stack` (rsp, and rbp too for a CFA from
    /// rbp, 77 otherwise), with the CFA at `cfa_offset` from `base` and, if given, the
    /// saved rbp at that offset from the CFA: a rule from rsp made as the unwind
    /// tables' are ([`Rule::step`], which bounds it), one from rbp as it is.
    fn step_over(
        base: CfaBase,
        stack: &[u64; 8],
        cfa_offset: i32,
        saved_rbp_offset: Option<i16>,
    ) -> Step {
        let rule = match base {
            CfaBase::Rsp => Rule::step(base, cfa_offset, saved_rbp_offset),
            CfaBase::Rbp => Rule::Step {
                cfa_base: base,
                cfa_offset,
                saved_rbp_offset,
            },
        };
        let rsp = stack.as_ptr() as u64;
        let rbp = if base == CfaBase::Rbp { rsp } else { 77 };
        let regs = Registers {
            pc: 0x1000,
            rsp,
            rbp,
        };
        step(&mut OneRule(rule), &regs, 0xfff, u64::MAX, false)
    }

    fn caller(step: Step) -> Option<(u64, u64)> {
        match step {
            Step::Caller { regs, .. } => Some((regs.pc, regs.rbp)),
            _ => None,
        }
    }

    #[test]
    fn the_cfa_and_the_saved_rbp_stay_between_rsp_and_the_cfa() {
        let stack = [10, 11, 12, 13, 14, 15, 16, 17u64];
        for base in [CfaBase::Rsp, CfaBase::Rbp] {
            let unchanged = if base == CfaBase::Rbp {
                stack.as_ptr() as u64
            } else {
                77
            };
            let over = |cfa_offset, saved_rbp_offset| {
                caller(step_over(base, &stack, cfa_offset, saved_rbp_offset))
            };
            assert_eq!(over(8, None), Some((10, unchanged)));
            assert_eq!(over(64, None), Some((17, unchanged)));
            assert_eq!(over(32, Some(-16)), Some((13, 12)));
            assert_eq!(over(32, Some(-8)), Some((13, 13)));
            assert_eq!(over(32, Some(-32)), Some((13, 10)));
            let refused = [
                (0, None),
                (-8, None),
                (12, None),
                (i32::MAX, None),
                ((MAX_FRAME_BYTES + 8) as i32, None),
                (32, Some(0)),
                (32, Some(-40)),
                (32, Some(-12)),
            ];
            for (cfa_offset, saved_rbp_offset) in refused {
                assert!(
                    matches!(
                        step_over(base, &stack, cfa_offset, saved_rbp_offset),
                        Step::Unsupported
                    ),
                    "CFA at {base:?}{cfa_offset:+}, rbp at CFA{saved_rbp_offset:+?}"
                );
            }
        }
    }
}
