//! The project's own stack walk on aarch64: DWARF CFI steps with x29, x30 and
//! sp, return addresses with pointer-authentication bits stripped, and the
//! `rt_sigreturn` trampoline's signal frame.
//!
//! Owns the aarch64 register state of a walk, the reduction of a CFI row to
//! the crate's [`Rule`] (CFA = sp or x29 plus an offset; x30, the
//! return-address column, and x29 saved at CFA offsets or kept in their
//! registers; whether the return address is signed) and the step that applies
//! a rule. Rules come from the same caches as on x86_64 ([`RuleStore`]: the
//! private, shared and layered ones), so a warm frame costs a cache probe and
//! a few loads. Anything else (CFA expressions, other register rules, values
//! off the stack) makes the walk give up with `None`, and the caller captures
//! with libgcc instead: correctness beats speed.
//!
//! Runs inside malloc: no allocation, no lock, no system call; it reads only
//! the calling thread's stack between its stack pointer and a bound, and
//! code bytes at a return address whose rule is no step (to recognise the
//! trampoline).

use gimli::{CfaRule, Register, RegisterRule, UnwindTableRow};

use crate::cache::RuleStore;
use crate::cfi::FixedStorage;
use crate::rule::{
    CfaBase, MAX_FRAME_BYTES, ReturnAddress, Rule, StepBits, encodable_offsets, is_outermost,
};

/// DWARF register numbers on aarch64 (x30 is the return-address column: the
/// CFI reader checks it).
const X29: Register = Register(29);
const X30: Register = Register(30);
const SP: Register = Register(31);
/// gimli's pseudo-register toggled by `DW_CFA_AARCH64_negate_ra_state`.
const RA_SIGN_STATE: Register = gimli::AArch64::RA_SIGN_STATE;

/// The user virtual-address bits of Linux on aarch64 (48-bit VA): a return
/// address signed by `paciasp` carries its authentication code above them,
/// and the top byte may carry a tag (TBI). Masking them is what `xpaclri`
/// does for a 48-bit VA; a 52-bit user VA (only on request) is not handled.
pub(crate) const VA_MASK: u64 = (1 << 48) - 1;

/// The largest distance from a stack pointer to its stack's top.
const MAX_STACK_BYTES: u64 = 1 << 32;

/// `mov x8, #139` (`__NR_rt_sigreturn`) and `svc #0`: the signal trampoline,
/// the vDSO's `__kernel_rt_sigreturn` (and qemu-user's copy of it).
const MOV_X8_RT_SIGRETURN: u32 = 0xd280_1168;
const SVC_0: u32 = 0xd400_0001;

/// Offsets in the kernel's `struct rt_sigframe { siginfo_t info; struct
/// ucontext uc; }` at the interrupted handler's entry sp: `siginfo_t` is 128
/// bytes, `uc_mcontext` is at 176 in `ucontext` and `regs[31]`, `sp`, `pc`
/// follow its 8-byte `fault_address`.
const SIGFRAME_REGS: u64 = 128 + 176 + 8;
const SIGFRAME_SP: u64 = SIGFRAME_REGS + 31 * 8;
const SIGFRAME_PC: u64 = SIGFRAME_SP + 8;

unsafe extern "C" {
    static __libc_stack_end: *const core::ffi::c_void;
}

/// The registers a walk tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Registers {
    /// The frame's program counter: a return address, or an exact address
    /// for the first frame and a frame a signal interrupted.
    pub(crate) pc: u64,
    /// True if `pc` is exact (its rule is looked up at `pc`, not `pc - 1`).
    pub(crate) exact: bool,
    pub(crate) sp: u64,
    pub(crate) x29: u64,
    /// x30 where it is known (the first frame, a signal-interrupted frame),
    /// else 0 (a rule that needs it then gives up).
    pub(crate) x30: u64,
}

impl Registers {
    /// The address whose rule steps this frame.
    #[inline(always)]
    pub(crate) fn lookup_address(&self) -> u64 {
        if self.exact { self.pc } else { self.pc - 1 }
    }
}

/// Reduces a CFI row (of an FDE that is no signal frame, with x30 as its
/// return-address column) to a [`Rule`], or `None` if the walk cannot follow it.
pub(crate) fn rule_from_row(row: &UnwindTableRow<usize, FixedStorage>) -> Option<Rule> {
    let signed = match row.register(RA_SIGN_STATE) {
        None | Some(RegisterRule::Constant(0)) => false,
        Some(RegisterRule::Constant(1)) => true,
        Some(_) => return None,
    };
    let saved_at = match row.register(X30) {
        None | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(offset)) => Some(offset),
        Some(RegisterRule::Undefined) => return Some(Rule::Outermost),
        Some(_) => return None,
    };
    let (cfa_base, cfa_offset) = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if register == SP => (CfaBase::Rsp, offset),
        CfaRule::RegisterAndOffset { register, offset } if register == X29 => {
            (CfaBase::Rbp, offset)
        }
        _ => return None,
    };
    let saved_rbp_offset = match row.register(X29) {
        None | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(offset)) => Some(offset),
        Some(_) => return None,
    };
    if !encodable_offsets(saved_at, saved_rbp_offset) {
        return None;
    }
    Some(Rule::Step {
        cfa_base,
        cfa_offset: i32::try_from(cfa_offset).ok()?,
        saved_rbp_offset: saved_rbp_offset.map(|offset| offset as i16),
        return_address: ReturnAddress {
            saved_at: saved_at.map(|offset| offset as i16),
            signed,
        },
    })
}

/// The highest address a walk from `sp` reads below, as on x86_64: for a
/// thread glibc created, its descriptor (`pthread_self`, a read of
/// `TPIDR_EL0`), which sits above its stack in the stack block; for the main
/// thread, the end of the page of its initial stack pointer; `u64::MAX` on
/// any other stack, whose frames stay bounded by `MAX_FRAME_BYTES` each.
pub(crate) fn stack_top(sp: u64) -> u64 {
    // SAFETY: `pthread_self` reads the thread pointer only: no lock, no call.
    let descriptor = unsafe { libc::pthread_self() } as u64;
    if sp < descriptor && descriptor - sp <= MAX_STACK_BYTES {
        return descriptor;
    }
    // SAFETY: a plain read of glibc's variable, set before any code of ours runs.
    let initial = unsafe { __libc_stack_end } as u64;
    if sp < initial && initial - sp <= MAX_STACK_BYTES {
        (initial | 0xfff) + 1
    } else {
        u64::MAX
    }
}

/// Reads the stack word at `address` if it lies in `[low, high)` and is aligned.
#[inline(always)]
pub(crate) fn read_between(address: u64, low: u64, high: u64) -> Option<u64> {
    if address < low || address.checked_add(8)? > high || address % 8 != 0 {
        return None;
    }
    // SAFETY: `[low, high)` is part of this thread's stack above its current
    // stack pointer (the caller's bounds), mapped and not being written.
    Some(unsafe { core::ptr::read_volatile(address as *const u64) })
}

/// True if `pc` is the start of the signal trampoline.
fn is_sigreturn(pc: u64) -> bool {
    if pc % 4 != 0 {
        return false;
    }
    // SAFETY: a return address of the stack being walked: code the thread
    // returns to, mapped executable (and readable, as libgcc reads it too).
    let words = unsafe {
        [
            core::ptr::read_unaligned(pc as *const u32),
            core::ptr::read_unaligned((pc + 4) as *const u32),
        ]
    };
    words == [MOV_X8_RT_SIGRETURN, SVC_0]
}

/// What one step from a frame found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// The caller's registers; `x29_slot` is the stack slot x29 was restored
    /// from (0 if it was carried over), `ra_slot` the one the return address was
    /// read from (0 if it came from a register), `cfa_from_x29` whether the CFA
    /// was computed from x29.
    Caller {
        regs: Registers,
        ra_slot: u64,
        x29_slot: u64,
        cfa_from_x29: bool,
    },
    /// The outermost frame (an undefined return address, or 0 read at
    /// `ra_slot`; 0 if that 0 came from a register).
    Outermost { ra_slot: u64 },
    /// The walk cannot go on (libgcc's turn).
    GiveUp,
}

/// Steps from the frame `regs` to its caller with the rule `store` has for it.
///
/// Reads at most two stack slots, both between `regs.sp` and the CFA, below
/// `top`: the result is a function of `regs`, `top`, the rule (fixed for a
/// cache generation) and those slots' values, as on x86_64 (the memo relies
/// on it). A frame whose rule is no step is the trampoline's or gives up.
#[inline(always)]
pub(crate) fn step<S: RuleStore>(store: &mut S, regs: &Registers, top: u64) -> Next {
    let bits = store.rule_bits(regs.lookup_address());
    let Some(rule) = StepBits::of(bits) else {
        return other_step(bits, regs, top);
    };
    let cfa_from_x29 = rule.cfa_from_rbp();
    let base = if cfa_from_x29 { regs.x29 } else { regs.sp };
    let cfa = base.wrapping_add_signed(rule.cfa_offset());
    // `sp <= cfa <= sp + MAX_FRAME_BYTES` in one unsigned compare.
    if cfa.wrapping_sub(regs.sp) > MAX_FRAME_BYTES || cfa > top {
        return Next::GiveUp;
    }
    // Saved registers lie in the frame's own area, below the CFA.
    let slot = |offset: i64| {
        let address = cfa.wrapping_add_signed(offset);
        let value = read_between(address, regs.sp, cfa)?;
        Some((value, address))
    };
    let (raw, ra_slot) = match rule.return_address_offset() {
        Some(offset) => match slot(offset) {
            Some(found) => found,
            None => return Next::GiveUp,
        },
        None if regs.x30 != 0 => (regs.x30, 0),
        None => return Next::GiveUp,
    };
    let (x29, x29_slot) = match rule.saved_rbp_offset() {
        Some(offset) => match slot(offset) {
            Some(found) => found,
            None => return Next::GiveUp,
        },
        None => (regs.x29, 0),
    };
    let return_address = raw & VA_MASK;
    if return_address == 0 {
        return Next::Outermost { ra_slot };
    }
    Next::Caller {
        regs: Registers {
            pc: return_address,
            exact: false,
            sp: cfa,
            x29,
            x30: 0,
        },
        ra_slot,
        x29_slot,
        cfa_from_x29,
    }
}

/// [`step`] for a frame whose rule is no step: the outermost frame, the
/// signal trampoline (the interrupted frame's registers are read from the
/// signal frame), or anything the walk cannot follow.
#[cold]
#[inline(never)]
fn other_step(bits: u64, regs: &Registers, top: u64) -> Next {
    if is_outermost(bits) {
        return Next::Outermost { ra_slot: 0 };
    }
    if regs.exact || !is_sigreturn(regs.pc) {
        return Next::GiveUp;
    }
    match interrupted(regs, top) {
        Some(regs) => Next::Caller {
            regs,
            ra_slot: 0,
            x29_slot: 0,
            cfa_from_x29: false,
        },
        None => Next::GiveUp,
    }
}

/// The registers of the frame a signal interrupted, from the signal frame
/// at the trampoline frame's sp.
fn interrupted(regs: &Registers, top: u64) -> Option<Registers> {
    let frame = regs.sp;
    let end = frame.checked_add(SIGFRAME_PC + 8)?;
    if end > top {
        return None;
    }
    let read = |offset: u64| read_between(frame + offset, frame, end);
    Some(Registers {
        pc: read(SIGFRAME_PC)? & VA_MASK,
        exact: true,
        sp: read(SIGFRAME_SP)?,
        x29: read(SIGFRAME_REGS + 29 * 8)?,
        x30: read(SIGFRAME_REGS + 30 * 8)?,
    })
}

/// The registers of the function this is inlined into, at this point.
#[inline(always)]
pub(crate) fn current_registers() -> Registers {
    let (pc, sp, x29, x30): (u64, u64, u64, u64);
    // SAFETY: reads the program counter, sp, x29 and x30 into registers;
    // touches no memory.
    unsafe {
        core::arch::asm!(
            "adr {pc}, .",
            "mov {sp}, sp",
            "mov {fp}, x29",
            "mov {lr}, x30",
            pc = out(reg) pc,
            sp = out(reg) sp,
            fp = out(reg) x29,
            lr = out(reg) x30,
            options(nomem, nostack, preserves_flags),
        );
    }
    Registers {
        pc,
        exact: true,
        sp,
        x29,
        x30,
    }
}

/// Where a walk starts reporting frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// After dropping this many return addresses (0: the first step's, the
    /// address the function the walk is inlined into returns to).
    After(usize),
    /// From the step whose CFA is this sp (a function's entry sp: its return
    /// address is the first frame).
    FromCfa(u64),
}

/// At most this many frames are stepped before the first one reported.
const MAX_UNREPORTED: usize = 256;

/// Walks from `regs` (the frame of the capture function the walk is inlined
/// into) with rules from `store`, writing the return addresses `report`
/// selects: `None` if some frame could not be stepped (use libgcc then).
#[inline(always)]
pub(crate) fn walk<S: RuleStore>(
    store: &mut S,
    regs: Registers,
    report: Report,
    frames: &mut [u64],
) -> Option<usize> {
    let top = stack_top(regs.sp);
    let Some(regs) = first_reported(store, regs, report, top)? else {
        return Some(0);
    };
    let Some(first) = frames.first_mut() else {
        return Some(0);
    };
    *first = regs.pc;
    walk_on(store, regs, top, frames, 1)
}

/// Steps from `regs` to the first frame `report` selects: `Some(None)` if the
/// outermost frame comes first, `None` if a frame cannot be stepped.
#[inline(always)]
pub(crate) fn first_reported<S: RuleStore>(
    store: &mut S,
    mut regs: Registers,
    report: Report,
    top: u64,
) -> Option<Option<Registers>> {
    let mut skip = match report {
        Report::After(skip) => skip,
        Report::FromCfa(_) => MAX_UNREPORTED,
    };
    loop {
        regs = match step(store, &regs, top) {
            Next::Caller { regs, .. } => regs,
            Next::Outermost { .. } => return Some(None),
            Next::GiveUp => return None,
        };
        let first = match report {
            Report::After(_) => skip == 0,
            Report::FromCfa(sp) => regs.sp == sp,
        };
        if first {
            return Some(Some(regs));
        }
        skip = skip.checked_sub(1)?;
    }
}

/// Walks on from `regs` (whose pc is `frames[written - 1]`) to the end of
/// the stack or of `frames`: the frames written, `None` if a frame cannot be
/// stepped.
#[inline(always)]
pub(crate) fn walk_on<S: RuleStore>(
    store: &mut S,
    mut regs: Registers,
    top: u64,
    frames: &mut [u64],
    mut written: usize,
) -> Option<usize> {
    while written < frames.len() {
        // A frame a signal interrupted (exact pc, x30 known) takes a full step.
        if !regs.exact {
            written = plain_steps(store, &mut regs, top, frames, written);
            if written == frames.len() {
                break;
            }
        }
        regs = match step(store, &regs, top) {
            Next::Caller { regs, .. } => regs,
            Next::Outermost { .. } => break,
            Next::GiveUp => return None,
        };
        frames[written] = regs.pc;
        written += 1;
    }
    Some(written)
}

/// One plain step from a frame reached by a step (its pc a return address, x30
/// unknown): what [`step`] gives for a step rule with the return address saved,
/// every bound met and a nonzero return address; `None` for anything else
/// (left to [`step`]). Reads the same slots as [`step`] with the same bounds.
#[inline(always)]
pub(crate) fn plain_step<S: RuleStore>(
    store: &mut S,
    pc: u64,
    sp: u64,
    x29: u64,
    top: u64,
) -> Option<Stepped> {
    let rule = StepBits::of(store.rule_bits(pc - 1))?;
    let ra_offset = rule.return_address_offset()?;
    let base = if rule.cfa_from_rbp() { x29 } else { sp };
    let cfa = base.wrapping_add_signed(rule.cfa_offset());
    if cfa.wrapping_sub(sp) > MAX_FRAME_BYTES || cfa > top {
        return None;
    }
    let ra_slot = cfa.wrapping_add_signed(ra_offset);
    if ra_slot < sp || ra_slot + 8 > cfa || ra_slot % 8 != 0 {
        return None;
    }
    // SAFETY: `sp <= ra_slot < ra_slot + 8 <= cfa <= top`: in this thread's
    // stack, as in `read_between`.
    let return_address = unsafe { core::ptr::read_volatile(ra_slot as *const u64) } & VA_MASK;
    if return_address == 0 {
        return None;
    }
    let (x29, x29_slot) = match rule.saved_rbp_offset() {
        Some(offset) => {
            let slot = cfa.wrapping_add_signed(offset);
            if slot < sp || slot + 8 > cfa || slot % 8 != 0 {
                return None;
            }
            // SAFETY: as above.
            (
                unsafe { core::ptr::read_volatile(slot as *const u64) },
                slot,
            )
        }
        None => (x29, 0),
    };
    Some(Stepped {
        pc: return_address,
        sp: cfa,
        x29,
        ra_slot,
        x29_slot,
    })
}

/// The caller's registers after a [`plain_step`], and the slots the step read
/// its return address and (if not 0) its x29 from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Stepped {
    pub(crate) pc: u64,
    pub(crate) sp: u64,
    pub(crate) x29: u64,
    pub(crate) ra_slot: u64,
    pub(crate) x29_slot: u64,
}

impl Stepped {
    /// The frame's registers.
    #[inline(always)]
    pub(crate) fn registers(&self) -> Registers {
        Registers {
            pc: self.pc,
            exact: false,
            sp: self.sp,
            x29: self.x29,
            x30: 0,
        }
    }
}

/// Takes [`step`]s from `regs` (a frame reached by a step: its pc is a return
/// address, x30 unknown) while each is a plain one (a step rule with the
/// return address saved, a nonzero return address, every bound met) and
/// `frames` has room, writing each return address from `frames[written]` on:
/// the new count. The registers live in locals, so a frame costs a rule
/// lookup and a few compares. It reads the same slots as [`step`] with the
/// same bounds, so a walk through here is the walk of [`step`]s; the first
/// frame that is anything else is left to [`step`].
#[inline(always)]
fn plain_steps<S: RuleStore>(
    store: &mut S,
    regs: &mut Registers,
    top: u64,
    frames: &mut [u64],
    mut written: usize,
) -> usize {
    let (mut pc, mut sp, mut x29) = (regs.pc, regs.sp, regs.x29);
    while written < frames.len() {
        let Some(caller) = plain_step(store, pc, sp, x29, top) else {
            break;
        };
        frames[written] = caller.pc;
        written += 1;
        (pc, sp, x29) = (caller.pc, caller.sp, caller.x29);
    }
    *regs = Registers {
        pc,
        exact: false,
        sp,
        x29,
        x30: 0,
    };
    written
}

/// Walks the stack of the calling function's caller with the project's own
/// steps, computing every rule (no cache): `frames[0]` is the address this
/// call returns to, as for every `capture*`. `None` if some frame could not
/// be stepped (use libgcc then); a walk that ends in code without unwind
/// information also gives `None`.
#[inline(never)]
pub fn capture_walked(frames: &mut [u64]) -> Option<usize> {
    let regs = current_registers();
    let written = walk(&mut Uncached, regs, Report::After(0), frames);
    core::hint::black_box(written)
}

/// A rule store that keeps nothing: every rule is computed.
struct Uncached;

impl RuleStore for Uncached {
    fn get(&mut self, _address: u64) -> Option<Rule> {
        None
    }

    fn put(&mut self, _address: u64, _rule: Rule) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn both(depth: u32, walked: &mut [u64; 64], libgcc: &mut [u64; 64]) -> (Option<usize>, usize) {
        if depth > 0 {
            let result = both(depth - 1, walked, libgcc);
            return core::hint::black_box(result);
        }
        let own = capture_walked(walked);
        let theirs = crate::libgcc::backtrace(libgcc, 1);
        (own, theirs)
    }

    #[test]
    fn the_walk_agrees_with_libgcc_above_the_capture() {
        let (mut walked, mut libgcc) = ([0; 64], [0; 64]);
        let (own, theirs) = both(6, &mut walked, &mut libgcc);
        let own = own.expect("the project's walk stepped every frame");
        // frames[0] of each is a different call site in `both`; the callers agree.
        assert!(own >= 8, "{own} frames");
        assert_eq!(&walked[1..own], &libgcc[1..theirs.min(own)]);
        assert_eq!(
            own,
            theirs,
            "{:x?} vs {:x?}",
            &walked[..own],
            &libgcc[..theirs]
        );
    }

    #[test]
    fn this_function_has_a_step_from_sp_or_x29() {
        let here = this_function_has_a_step_from_sp_or_x29 as *const () as u64;
        let rule = crate::cfi::rule_for_address(here + 4);
        assert!(matches!(rule, Rule::Step { .. }), "{rule:?}");
        assert_eq!(crate::cfi::rule_for_address(8), Rule::NoUnwindInfo);
    }

    #[test]
    fn reading_outside_the_bounds_is_refused() {
        let word = 7u64;
        let address = &word as *const u64 as u64;
        assert_eq!(read_between(address, address, address + 8), Some(7));
        assert_eq!(read_between(address, address + 8, address + 16), None);
        assert_eq!(read_between(address + 1, address, address + 16), None);
    }

    static mut IN_HANDLER: ([u64; 64], Option<usize>, [u64; 64], usize) =
        ([0; 64], None, [0; 64], 0);

    extern "C" fn handler(_signal: libc::c_int) {
        // SAFETY: the only writer, on this thread, while the test waits in `raise`.
        unsafe {
            let state = &mut *core::ptr::addr_of_mut!(IN_HANDLER);
            state.1 = capture_walked(&mut state.0);
            state.3 = crate::libgcc::backtrace(&mut state.2, 1);
        }
    }

    #[test]
    fn a_signal_handlers_walk_goes_through_the_trampoline() {
        // SAFETY: installs a handler for SIGUSR2, which nothing else in the tests uses.
        unsafe {
            libc::signal(libc::SIGUSR2, handler as *const () as libc::sighandler_t);
            libc::raise(libc::SIGUSR2);
        }
        // SAFETY: the handler has returned.
        let (walked, own, libgcc, theirs) = unsafe { *core::ptr::addr_of!(IN_HANDLER) };
        let own = own.expect("stepped through the signal frame");
        assert!(own > 4, "{own} frames");
        assert!(
            (0..own).any(|index| is_sigreturn(walked[index])),
            "the trampoline is a frame: {:x?}",
            &walked[..own]
        );
        assert_eq!(&walked[1..own], &libgcc[1..theirs.min(own)]);
        assert_eq!(own, theirs);
    }
}
