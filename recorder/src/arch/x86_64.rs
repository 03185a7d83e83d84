//! x86_64: `rdtsc`, `cpuid`, the `syscall` instruction (gettid, the
//! monotonic clock), `xadd`, `gregs`.

use core::sync::atomic::AtomicI64;

/// The time stamp counter.
#[inline(always)]
pub fn counter_ticks() -> u64 {
    // SAFETY: rdtsc has no preconditions and only reads the time stamp
    // counter (the sampler's seed reads it too).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The counter ticks at one rate in every state and on every core.
pub fn counter_is_invariant() -> bool {
    use core::arch::x86_64::__cpuid;
    // The extended leaf is read only where the highest one says it exists.
    __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

/// Ask once about the CPU's CRC instructions (`cpuid`s, costly in a VM).
pub fn detect_crc_instructions() {
    let _ = std::is_x86_feature_detected!("pclmulqdq");
}

/// gettid by the `syscall` instruction.
#[inline(always)]
pub fn gettid() -> u32 {
    let id: i64;
    // SAFETY: gettid takes no arguments and cannot fail; the kernel
    // clobbers only rcx and r11 and touches no memory of ours.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_gettid => id,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags),
        );
    }
    id as u32
}

/// CLOCK_MONOTONIC in nanoseconds by the `syscall` instruction, not the
/// vDSO: for a forked child's handler, whose first call into the vDSO (or
/// into libc's wrapper) would fault that code's page in.
#[inline(always)]
pub fn monotonic_ns_by_syscall() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec at the pointer, which is
    // ours; CLOCK_MONOTONIC always exists; the kernel clobbers only rcx and
    // r11.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_clock_gettime => _,
            in("rdi") libc::CLOCK_MONOTONIC as i64,
            in("rsi") &mut now as *mut libc::timespec,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags),
        );
    }
    (now.tv_sec as u64).saturating_mul(1_000_000_000) + now.tv_nsec as u64
}

/// Add `delta` to `cell` where no other thread can run, without a locked
/// instruction; returns the value before. One `xadd`: a signal handler runs
/// before or after it, never between a load and a store.
#[inline(always)]
pub fn add_on_the_only_thread(cell: &AtomicI64, delta: i64) -> i64 {
    let mut before = delta;
    // SAFETY: `cell` points to a live, aligned i64; one instruction reads
    // and writes it, touching nothing else.
    unsafe {
        core::arch::asm!(
            "xadd qword ptr [{cell}], {value}",
            cell = in(reg) cell.as_ptr(),
            value = inout(reg) before,
            options(nostack),
        );
    }
    before
}

const SYSCALL_INSTRUCTION: [u8; 2] = [0x0f, 0x05];

/// The interrupted instruction of a signal's saved context.
///
/// # Safety
/// `context` is the kernel's saved context of the interrupted thread.
pub unsafe fn interrupted_pc(context: *const libc::ucontext_t) -> usize {
    // SAFETY: per the contract.
    unsafe { (*context).uc_mcontext.gregs[libc::REG_RIP as usize] as usize }
}

/// Was the thread blocked in a system call at `pc` (the kernel points the
/// saved instruction at the `syscall` to restart it, or just after it with
/// `-EINTR` in rax)?
///
/// # Safety
/// `context` as for [`interrupted_pc`]; `pc` lies in a mapped code segment
/// of a loaded object, at least two bytes from its start.
pub unsafe fn stopped_in_syscall(context: *const libc::ucontext_t, pc: usize) -> bool {
    // SAFETY: per the contract.
    let (at, before, result) = unsafe {
        (
            core::ptr::read_unaligned(pc as *const [u8; 2]),
            core::ptr::read_unaligned((pc - 2) as *const [u8; 2]),
            (*context).uc_mcontext.gregs[libc::REG_RAX as usize],
        )
    };
    at == SYSCALL_INSTRUCTION || (before == SYSCALL_INSTRUCTION && result == -(libc::EINTR as i64))
}
