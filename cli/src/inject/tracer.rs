//! One thread of another process under ptrace: seized and stopped
//! (`PTRACE_SEIZE` + `PTRACE_INTERRUPT`, so no signal is sent), made to
//! call functions of the process, and let go exactly as it was.
//!
//! - A signal that arrives for the thread before it stops is delivered
//!   then and there (`PTRACE_CONT` with the signal), never swallowed.
//! - While it runs a call, the thread blocks every signal but the
//!   synchronous ones (`PTRACE_SETSIGMASK`): signals sent meanwhile stay
//!   pending, or go to another thread, and are delivered once its mask is
//!   given back. (A blocked fault would make the kernel reset the
//!   program's handler, so faults stay unblocked.)
//! - A call returns to address 0: the fault stops the thread before any
//!   handler sees it, and it is discarded.
//! - The thread's registers and mask are given back before it is let go.
//!   A system call the stop interrupted restarts then as after a signal
//!   with no handler: the stop left `-ERESTART*` in `rax` and the call's
//!   number in `orig_rax`, the calls made meanwhile ran with `orig_rax`
//!   at -1 (nothing to restart), and once the saved registers are back the
//!   kernel, leaving the stop, puts the number back in `rax` and moves
//!   `rip` back 2 bytes onto the `syscall` instruction (or, for
//!   `-ERESTART_RESTARTBLOCK`, makes it `restart_syscall`, which resumes a
//!   sleep, `poll` or futex wait at its deadline from the thread's restart
//!   block, untouched by the calls: none of them is interrupted). So the
//!   wait goes on with its deadline, as many times in a row as it is
//!   stopped. The waits the kernel fails with `EINTR` on any stop
//!   (`FAIL_ON_STOP`) restart instead, which they would have done had
//!   nothing stopped them (their timeout then counts again in full).

use std::io::{IoSlice, IoSliceMut};

use libc::{c_int, c_void, pid_t};
use nix::sys::ptrace;
use nix::sys::uio::{RemoteIoVec, process_vm_readv, process_vm_writev};
use nix::unistd::Pid;

use crate::Failure;

pub type Registers = libc::user_regs_struct;

const PTRACE_EVENT_STOP: c_int = 128;
const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;
const EINTR: i64 = 4;
const ERESTARTNOHAND: i64 = 514;
/// The waits that return EINTR when a stop interrupts them, where the
/// others restart (`signal(7)`: "interfaces not restarted after a stop").
/// Given back to the program, they restart instead, as they would have
/// had nothing stopped them (with their timeout counted again in full:
/// the kernel keeps no deadline for them).
const FAIL_ON_STOP: [i64; 6] = [
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_semop,
    libc::SYS_semtimedop,
];

/// Why a seize or an interrupt failed.
pub enum StopError {
    /// ptrace refused (errno).
    Refused(i32),
    /// The thread or process is gone.
    Gone,
    /// The process was stopped (by SIGSTOP or the like) meanwhile.
    GroupStop(i32),
}

/// A thread seized with `PTRACE_SEIZE`, stopped.
pub struct Stopped {
    pub tid: pid_t,
    /// Its registers when it stopped.
    pub registers: Registers,
    mask: u64,
    masked: bool,
}

fn raw_ptrace(request: libc::c_uint, tid: pid_t, addr: usize, data: usize) -> Result<i64, i32> {
    // SAFETY: ptrace requests with plain integers or pointers to our own
    // memory, per each request's contract at the call sites.
    let result = unsafe { libc::ptrace(request, tid, addr as *mut c_void, data as *mut c_void) };
    if result == -1 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(result)
    }
}

/// What `waitpid` reported for a traced thread.
enum Event {
    /// An interrupt stop (`PTRACE_EVENT_STOP` with SIGTRAP).
    Interrupted,
    /// A group stop with this stop signal.
    GroupStop(i32),
    /// A signal-delivery stop with this signal.
    Signal(i32),
    /// Another ptrace event.
    Other,
    /// Exited or killed.
    Gone,
}

fn wait(tid: pid_t) -> Event {
    let mut status = 0;
    loop {
        // SAFETY: waiting for a thread we trace, into a local.
        let waited = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
        if waited == tid {
            break;
        }
        if waited == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Event::Gone;
    }
    if !libc::WIFSTOPPED(status) {
        return Event::Gone;
    }
    let signal = libc::WSTOPSIG(status);
    match status >> 16 {
        0 => Event::Signal(signal),
        PTRACE_EVENT_STOP if signal == libc::SIGTRAP => Event::Interrupted,
        PTRACE_EVENT_STOP => Event::GroupStop(signal),
        _ => Event::Other,
    }
}

/// Seize thread `tid` and stop it. Signals that arrive meanwhile are
/// delivered.
pub fn seize_and_stop(tid: pid_t) -> Result<Stopped, StopError> {
    raw_ptrace(libc::PTRACE_SEIZE, tid, 0, 0).map_err(|errno| match errno {
        libc::ESRCH => StopError::Gone,
        errno => StopError::Refused(errno),
    })?;
    let stopped = stop(tid);
    if stopped.is_err() {
        let _ = raw_ptrace(libc::PTRACE_DETACH, tid, 0, 0);
    }
    stopped
}

fn stop(tid: pid_t) -> Result<Stopped, StopError> {
    raw_ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0).map_err(|_| StopError::Gone)?;
    loop {
        match wait(tid) {
            Event::Interrupted => break,
            Event::GroupStop(signal) => return Err(StopError::GroupStop(signal)),
            Event::Signal(signal) => {
                // Not ours: deliver it now; the interrupt stop follows.
                raw_ptrace(libc::PTRACE_CONT, tid, 0, signal as usize)
                    .map_err(|_| StopError::Gone)?;
            }
            Event::Other => {
                raw_ptrace(libc::PTRACE_CONT, tid, 0, 0).map_err(|_| StopError::Gone)?;
            }
            Event::Gone => return Err(StopError::Gone),
        }
    }
    let registers = ptrace::getregs(Pid::from_raw(tid)).map_err(|_| StopError::Gone)?;
    let mut mask: u64 = 0;
    raw_ptrace(PTRACE_GETSIGMASK, tid, 8, &mut mask as *mut u64 as usize)
        .map_err(|_| StopError::Gone)?;
    Ok(Stopped {
        tid,
        registers,
        mask,
        masked: false,
    })
}

/// Signals a thread keeps unblocked while it runs a call: faults (blocking
/// one would make the kernel reset the program's handler) and the two that
/// cannot be blocked.
fn call_mask() -> u64 {
    let unblocked = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGKILL,
        libc::SIGSTOP,
    ];
    unblocked
        .iter()
        .fold(u64::MAX, |mask, &signal| mask & !(1u64 << (signal - 1)))
}

impl Stopped {
    /// Its thread id.
    pub fn tid(&self) -> pid_t {
        self.tid
    }

    /// Its stack pointer when it stopped.
    pub fn stack_pointer(&self) -> u64 {
        self.registers.rsp
    }

    /// Let go of the thread as it was.
    pub fn release(mut self) -> Result<(), Failure> {
        let mut registers = self.registers;
        if FAIL_ON_STOP.contains(&(registers.orig_rax as i64)) && registers.rax as i64 == -EINTR {
            registers.rax = (-ERESTARTNOHAND) as u64;
        }
        let restored = ptrace::setregs(Pid::from_raw(self.tid), registers);
        if self.masked {
            let _ = raw_ptrace(
                PTRACE_SETSIGMASK,
                self.tid,
                8,
                &mut self.mask as *mut u64 as usize,
            );
        }
        let detached = raw_ptrace(libc::PTRACE_DETACH, self.tid, 0, 0);
        match (restored, detached) {
            (Ok(()), Ok(_)) => Ok(()),
            _ => Err(Failure::new(format!(
                "thread {} exited during the operation",
                self.tid
            ))),
        }
    }

    /// Read `len` bytes of the process at `address`.
    pub fn read(&self, address: u64, len: usize) -> Result<Vec<u8>, Failure> {
        let mut buffer = vec![0u8; len];
        let remote = [RemoteIoVec {
            base: address as usize,
            len,
        }];
        let done = process_vm_readv(
            Pid::from_raw(self.tid),
            &mut [IoSliceMut::new(&mut buffer)],
            &remote,
        )
        .map_err(|e| Failure::new(format!("cannot read the process's memory: {e}")))?;
        buffer.truncate(done);
        Ok(buffer)
    }

    /// Write `bytes` into the process at `address`.
    pub fn write(&self, address: u64, bytes: &[u8]) -> Result<(), Failure> {
        let remote = [RemoteIoVec {
            base: address as usize,
            len: bytes.len(),
        }];
        let done = process_vm_writev(Pid::from_raw(self.tid), &[IoSlice::new(bytes)], &remote)
            .map_err(|e| Failure::new(format!("cannot write the process's memory: {e}")))?;
        if done != bytes.len() {
            return Err(Failure::new("short write into the process's memory"));
        }
        Ok(())
    }

    /// Call `function(arguments...)` on the thread, with `stack` as its
    /// stack pointer (16-byte aligned, below the thread's red zone), and
    /// return what it returned. The thread's registers are not given back
    /// here ([`Stopped::release`] does).
    pub fn call(&mut self, function: u64, arguments: &[u64], stack: u64) -> Result<u64, Failure> {
        let pid = Pid::from_raw(self.tid);
        if !self.masked {
            let mut mask = call_mask();
            raw_ptrace(
                PTRACE_SETSIGMASK,
                self.tid,
                8,
                &mut mask as *mut u64 as usize,
            )
            .map_err(|_| Failure::new("cannot block the thread's signals"))?;
            self.masked = true;
        }
        let return_to: u64 = 0;
        let entry_stack = stack - 8;
        self.write(entry_stack, &return_to.to_ne_bytes())?;
        let mut registers = self.registers;
        registers.rip = function;
        registers.rsp = entry_stack;
        registers.rax = 0;
        registers.orig_rax = u64::MAX; // no system call to restart
        registers.eflags &= !0x400; // the ABI's direction flag, clear
        let argument_registers = [
            &mut registers.rdi,
            &mut registers.rsi,
            &mut registers.rdx,
            &mut registers.rcx,
            &mut registers.r8,
            &mut registers.r9,
        ];
        for (register, &value) in argument_registers.into_iter().zip(arguments) {
            *register = value;
        }
        ptrace::setregs(pid, registers).map_err(|_| Failure::new("the thread exited"))?;
        raw_ptrace(libc::PTRACE_CONT, self.tid, 0, 0)
            .map_err(|_| Failure::new("the thread exited"))?;
        let started = std::time::Instant::now();
        let mut warned = false;
        loop {
            match wait(self.tid) {
                Event::Signal(libc::SIGSEGV) => {
                    let now =
                        ptrace::getregs(pid).map_err(|_| Failure::new("the thread exited"))?;
                    if now.rip == return_to {
                        return Ok(now.rax);
                    }
                    return Err(self.fault(libc::SIGSEGV, now.rip));
                }
                Event::Signal(signal) if call_mask() & (1u64 << (signal - 1)) == 0 => {
                    let now =
                        ptrace::getregs(pid).map_err(|_| Failure::new("the thread exited"))?;
                    return Err(self.fault(signal, now.rip));
                }
                Event::Signal(signal) => {
                    // Cannot be (it is blocked); deliver it all the same.
                    raw_ptrace(libc::PTRACE_CONT, self.tid, 0, signal as usize)
                        .map_err(|_| Failure::new("the thread exited"))?;
                }
                Event::GroupStop(_) | Event::Interrupted | Event::Other => {
                    raw_ptrace(libc::PTRACE_CONT, self.tid, 0, 0)
                        .map_err(|_| Failure::new("the thread exited"))?;
                }
                Event::Gone => return Err(Failure::new("the process exited during the operation")),
            }
            if !warned && started.elapsed().as_secs() >= 10 {
                eprintln!(
                    "heapsample: still waiting for the call in thread {}",
                    self.tid
                );
                warned = true;
            }
        }
    }

    fn fault(&self, signal: i32, rip: u64) -> Failure {
        Failure::new(format!(
            "the call in thread {} faulted (signal {signal} at {rip:#x}); the thread was given back as it was",
            self.tid
        ))
    }
}
