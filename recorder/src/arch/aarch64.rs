//! aarch64: the generic timer's virtual count (`CNTVCT_EL0`), `svc #0`,
//! an atomic add, `uc_mcontext.pc/regs`.

use core::sync::atomic::{AtomicI64, Ordering::Relaxed};

/// The generic timer's virtual count.
#[inline(always)]
pub fn counter_ticks() -> u64 {
    let ticks: u64;
    // SAFETY: reads the virtual count register, which Linux lets user space
    // read; touches no memory or flags.
    unsafe {
        core::arch::asm!("mrs {}, cntvct_el0", out(reg) ticks, options(nomem, nostack, preserves_flags));
    }
    ticks
}

/// The generic timer is invariant by the architecture, but its rate is
/// often 25–100 MHz (10–40 ns per tick), at or past the conversion's bound,
/// and the vDSO reads that same counter already: the clock stays the vDSO's.
pub fn counter_is_invariant() -> bool {
    false
}

/// Ask once about the CPU's CRC instructions (HWCAP: no system call).
pub fn detect_crc_instructions() {
    let _ = std::arch::is_aarch64_feature_detected!("crc");
}

/// gettid by the `svc` instruction.
#[inline(always)]
pub fn gettid() -> u32 {
    let id: i64;
    // SAFETY: gettid takes no arguments and cannot fail; the kernel
    // returns in x0 and touches no memory of ours.
    unsafe {
        core::arch::asm!(
            "svc #0",
            in("x8") libc::SYS_gettid,
            lateout("x0") id,
            options(nostack, preserves_flags),
        );
    }
    id as u32
}

/// CLOCK_MONOTONIC in nanoseconds by the `svc` instruction, not the vDSO:
/// for a forked child's handler, whose first call into the vDSO (or into
/// libc's wrapper) would fault that code's page in.
#[inline(always)]
pub fn monotonic_ns_by_syscall() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec at the pointer, which is
    // ours; CLOCK_MONOTONIC always exists; the kernel returns in x0.
    unsafe {
        core::arch::asm!(
            "svc #0",
            in("x8") libc::SYS_clock_gettime,
            inlateout("x0") libc::CLOCK_MONOTONIC as i64 => _,
            in("x1") &mut now as *mut libc::timespec,
            options(nostack, preserves_flags),
        );
    }
    (now.tv_sec as u64).saturating_mul(1_000_000_000) + now.tv_nsec as u64
}

/// Add `delta` to `cell`; returns the value before. aarch64 has no
/// single-instruction add to memory without LSE, so an atomic one (a
/// load/store-exclusive pair that a signal handler's own change makes
/// retry): never lost, a few instructions more.
#[inline(always)]
pub fn add_on_the_only_thread(cell: &AtomicI64, delta: i64) -> i64 {
    cell.fetch_add(delta, Relaxed)
}

/// `svc #0`, little-endian.
const SYSCALL_INSTRUCTION: [u8; 4] = [0x01, 0x00, 0x00, 0xd4];

/// The interrupted instruction of a signal's saved context.
///
/// # Safety
/// `context` is the kernel's saved context of the interrupted thread.
pub unsafe fn interrupted_pc(context: *const libc::ucontext_t) -> usize {
    // SAFETY: per the contract.
    unsafe { (*context).uc_mcontext.pc as usize }
}

/// Was the thread blocked in a system call at `pc` (the kernel points the
/// saved pc at the `svc` to restart it, or just after it with `-EINTR` in
/// x0)?
///
/// # Safety
/// `context` as for [`interrupted_pc`]; `pc` lies in a mapped code segment
/// of a loaded object, at least four bytes from its start.
pub unsafe fn stopped_in_syscall(context: *const libc::ucontext_t, pc: usize) -> bool {
    // SAFETY: per the contract.
    let (at, before, result) = unsafe {
        (
            core::ptr::read_unaligned(pc as *const [u8; 4]),
            core::ptr::read_unaligned((pc - 4) as *const [u8; 4]),
            (*context).uc_mcontext.regs[0] as i64,
        )
    };
    at == SYSCALL_INSTRUCTION || (before == SYSCALL_INSTRUCTION && result == -(libc::EINTR as i64))
}
