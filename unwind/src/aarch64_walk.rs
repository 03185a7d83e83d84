//! The project's own stack walk on aarch64: DWARF CFI steps with x29, x30 and
//! sp, return addresses with pointer-authentication bits stripped, and the
//! `rt_sigreturn` trampoline's signal frame.
//!
//! Owns the aarch64 register state of a walk and the reduction of a CFI row to
//! one step (CFA = sp or x29 plus an offset; x30, the return-address column,
//! and x29 saved at CFA offsets or kept in their registers). Anything else
//! (CFA expressions, other register rules, values off the stack) makes the
//! walk give up with `None`, and the caller captures with libgcc instead:
//! correctness beats speed. Rules are computed for every frame (no rule cache
//! or memo yet on aarch64).
//!
//! Runs inside malloc: no allocation, no lock, no system call; it reads only
//! the calling thread's stack between its stack pointer and a bound, and
//! code bytes at a return address (to recognise the trampoline).

use gimli::{CfaRule, Register, RegisterRule, UnwindTableRow};

use crate::cfi::{self, FixedStorage};

/// DWARF register numbers on aarch64.
const X29: Register = Register(29);
const X30: Register = Register(30);
const SP: Register = Register(31);
/// gimli's pseudo-register toggled by `DW_CFA_AARCH64_negate_ra_state`.
const RA_SIGN_STATE: Register = gimli::AArch64::RA_SIGN_STATE;

/// The user virtual-address bits of Linux on aarch64 (48-bit VA): a return
/// address signed by `paciasp` carries its authentication code above them,
/// and the top byte may carry a tag (TBI). Masking them is what `xpaclri`
/// does for a 48-bit VA; a 52-bit user VA (only on request) is not handled.
const VA_MASK: u64 = (1 << 48) - 1;

/// The largest frame a step accepts, as on x86_64.
const MAX_FRAME_BYTES: u64 = 64 << 20;
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
struct Registers {
    /// The frame's program counter: a return address, or an exact address
    /// for the first frame and a frame a signal interrupted.
    pc: u64,
    /// True if `pc` is exact (its rule is looked up at `pc`, not `pc - 1`).
    exact: bool,
    sp: u64,
    x29: u64,
    /// x30 where it is known (the first frame, a signal-interrupted frame).
    x30: Option<u64>,
}

/// One frame's step, reduced from its CFI row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// CFA = (x29 if `cfa_from_x29`, else sp) + `cfa_offset`; x30 at CFA +
    /// `x30_offset` or (None) still in x30; x29 at CFA + `x29_offset` or
    /// unchanged.
    Registers {
        cfa_from_x29: bool,
        cfa_offset: i64,
        x30_offset: Option<i64>,
        x29_offset: Option<i64>,
    },
    /// The return address is undefined: the outermost frame.
    Outermost,
}

/// Reduces a CFI row to a [`Step`], or `None` if the walk cannot follow it.
fn reduce(
    row: &UnwindTableRow<usize, FixedStorage>,
    signal_frame: bool,
    return_address: Register,
) -> Option<Step> {
    if signal_frame || return_address != X30 {
        return None;
    }
    match row.register(RA_SIGN_STATE) {
        None | Some(RegisterRule::Constant(0 | 1)) => {}
        Some(_) => return None,
    }
    let x30_offset = match row.register(X30) {
        None | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(offset)) => Some(offset),
        Some(RegisterRule::Undefined) => return Some(Step::Outermost),
        Some(_) => return None,
    };
    let (cfa_from_x29, cfa_offset) = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if register == SP => (false, offset),
        CfaRule::RegisterAndOffset { register, offset } if register == X29 => (true, offset),
        _ => return None,
    };
    let x29_offset = match row.register(X29) {
        None | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(offset)) => Some(offset),
        Some(_) => return None,
    };
    Some(Step::Registers {
        cfa_from_x29,
        cfa_offset,
        x30_offset,
        x29_offset,
    })
}

/// The highest address a walk from `sp` reads below, as on x86_64: for a
/// thread glibc created, its descriptor (`pthread_self`, a read of
/// `TPIDR_EL0`), which sits above its stack in the stack block; for the main
/// thread, the end of the page of its initial stack pointer; `u64::MAX` on
/// any other stack, whose frames stay bounded by `MAX_FRAME_BYTES` each.
fn stack_top(sp: u64) -> u64 {
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
fn read_between(address: u64, low: u64, high: u64) -> Option<u64> {
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

/// The caller's registers, `Some(None)` at the outermost frame, `None` if the
/// walk cannot go on.
fn caller(regs: &Registers, top: u64) -> Option<Option<Registers>> {
    if !regs.exact && is_sigreturn(regs.pc) {
        return interrupted(regs, top).map(Some);
    }
    let lookup = if regs.exact { regs.pc } else { regs.pc - 1 };
    let step = cfi::reduce_row(lookup, reduce)?;
    let Step::Registers {
        cfa_from_x29,
        cfa_offset,
        x30_offset,
        x29_offset,
    } = step
    else {
        return Some(None);
    };
    let base = if cfa_from_x29 { regs.x29 } else { regs.sp };
    let cfa = base.checked_add_signed(cfa_offset)?;
    if cfa < regs.sp || cfa - regs.sp > MAX_FRAME_BYTES || cfa > top {
        return None;
    }
    // Saved registers lie in the frame's own area, below the CFA.
    let read = |offset: i64| read_between(cfa.checked_add_signed(offset)?, regs.sp, cfa);
    let return_address = match x30_offset {
        Some(offset) => read(offset)?,
        None => regs.x30?,
    } & VA_MASK;
    let x29 = match x29_offset {
        Some(offset) => read(offset)?,
        None => regs.x29,
    };
    if return_address == 0 {
        return Some(None);
    }
    Some(Some(Registers {
        pc: return_address,
        exact: false,
        sp: cfa,
        x29,
        x30: None,
    }))
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
        x30: Some(read(SIGFRAME_REGS + 30 * 8)?),
    })
}

/// Walks the stack of the calling function's caller with the project's own
/// steps: `frames[0]` is the address this call returns to, as for every
/// `capture*`. `None` if some frame could not be stepped (use libgcc then);
/// a walk that ends in code without unwind information also gives `None`.
#[inline(never)]
pub fn capture_walked(frames: &mut [u64]) -> Option<usize> {
    walk_skipping(frames, 0)
}

/// [`capture_walked`] that first drops the `skip` innermost return
/// addresses (1: the caller's own, so that `frames[0]` is its caller's).
#[inline(never)]
pub(crate) fn capture_skipping(frames: &mut [u64], skip: usize) -> Option<usize> {
    walk_skipping(frames, skip)
}

/// The project's walk from the caller of the function whose entry sp is
/// `entry_sp` (its CFA): `frames[0]` is that function's return address, as
/// libgcc's `backtrace_from` gives it. `None` if no frame has that CFA or
/// some frame could not be stepped.
#[inline(never)]
pub(crate) fn capture_from_entry(frames: &mut [u64], entry_sp: u64) -> Option<usize> {
    let written = walk(frames, usize::MAX, entry_sp)?;
    (written > 0).then_some(written)
}

/// The walk from the function this is inlined into.
#[inline(always)]
fn walk_skipping(frames: &mut [u64], skip: usize) -> Option<usize> {
    walk(frames, skip, 0)
}

/// The walk from the function this is inlined into, dropping the `skip`
/// innermost return addresses, or (`entry_sp` not 0) every one before the
/// step whose CFA is `entry_sp`.
#[inline(always)]
fn walk(frames: &mut [u64], mut skip: usize, entry_sp: u64) -> Option<usize> {
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
    let top = stack_top(sp);
    let mut regs = Registers {
        pc,
        exact: true,
        sp,
        x29,
        x30: Some(x30),
    };
    let mut written = 0;
    while written < frames.len() {
        let Some(next) = caller(&regs, top)? else {
            break;
        };
        if skip > 0 && next.sp == entry_sp {
            skip = 0;
        }
        if skip > 0 {
            skip -= 1;
        } else {
            frames[written] = next.pc;
            written += 1;
        }
        regs = next;
    }
    Some(core::hint::black_box(written))
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
        let step = cfi::reduce_row(here + 4, reduce);
        assert!(matches!(step, Some(Step::Registers { .. })), "{step:?}");
        assert_eq!(cfi::reduce_row(8, reduce), None);
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
