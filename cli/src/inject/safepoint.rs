//! Stopping one thread of a running process where it holds no lock of the
//! allocator, the loader or the profiler, so that a call made on it
//! (`dlopen`, which allocates, or one of the profiler's entry points) can
//! never wait for a lock its own thread holds.
//!
//! A thread is taken when, stopped, it is
//! - in code outside the C library, the loader, the allocator's object and
//!   the profiler (none of their locks is held by code outside them: the
//!   allocator calls no program code, and glibc runs no program code with
//!   the malloc locks held), or
//! - blocked in the C library in a system call of [`WAITS`] (the waits a
//!   server idles in and transfers the C library makes without a lock of
//!   its own), in a `futex` wait, or in `restart_syscall` (the kernel's
//!   continuation of a sleep, `poll` or futex wait an earlier stop
//!   interrupted), the last two on a word outside the data of those
//!   objects,
//!
//! and every signal handler running on it interrupted such a point (a
//! handler that interrupted `malloc` would make the call deadlock). The
//! handlers are found on its live call chain (`frames`: unwound from its
//! registers with its objects' CFI, through each signal frame), never from
//! stale words left on its stack; where that walk cannot reach the chain's
//! end, a plausible signal frame above it counts as a handler. Its stack
//! must also have room for the call.
//! Threads blocked in such waits are tried first (stopping them costs
//! them nothing); a thread that does not qualify is let go at once and
//! tried again a moment later. The other threads never stop.
//!
//! Never changes a thread it does not take: it only reads its registers
//! and memory before letting it go (`tracer` restarts its system call).

use std::time::{Duration, Instant};

use super::frames::End;
use super::landscape::Landscape;
use super::proc::{Blocked, Process};
use super::tracer::{self, StopError, Stopped};
use crate::Failure;

/// Where a signal frame (`struct rt_sigframe`: the return address, then
/// the `ucontext`, whose `uc_mcontext` starts 40 bytes in) keeps the
/// interrupted stack and instruction pointers.
const SAVED_RSP: usize = 8 + 40 + 15 * 8;
const SAVED_RIP: usize = SAVED_RSP + 8;
/// The `syscall` instruction.
const SYSCALL: [u8; 2] = [0x0f, 0x05];
const EINTR: i64 = libc::EINTR as i64;

/// Stack a call may need below the stopped thread's stack pointer.
pub const STACK_NEEDED: u64 = 256 * 1024;
/// Stack the scratch area takes below it (see `Session`).
const SCRATCH_NEEDED: u64 = 32 * 1024;

/// System calls in which a thread blocked in the C library holds none of
/// the locks (see the module documentation): the waits a server idles in
/// and the transfers a C library wrapper makes without a lock of its own.
/// `futex` and `restart_syscall` are checked apart.
const WAITS: &[i64] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_select,
    libc::SYS_pselect6,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_pause,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_connect,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_msgrcv,
    libc::SYS_flock,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigsuspend,
];
/// A futex wait is a safe point when its word lies outside the data of
/// the objects whose locks matter (a lock of the C library, the loader or
/// the allocator is a futex word in their data).
const FUTEX: i64 = libc::SYS_futex;
/// The kernel's continuation of a wait that a stop interrupted and that
/// keeps its deadline in the thread's restart block: `nanosleep`,
/// `clock_nanosleep` with a relative time, `poll` and `futex` waits with a
/// timeout. It is what a thread idles in after an earlier command stopped
/// it in one of those. Its arguments are still those of the interrupted
/// call, so it is judged as a futex wait is: its first argument must not
/// point into the data of the objects whose locks matter (for the other
/// three it is a clock id or a pointer to the program's own memory).
const RESTART: i64 = libc::SYS_restart_syscall;

impl Landscape {
    fn risky_at(&self, address: u64) -> bool {
        self.risky.iter().any(|&(s, e)| (s..e).contains(&address))
    }

    fn in_libc_code(&self, address: u64) -> bool {
        self.libc_code
            .iter()
            .any(|&(s, e)| (s..e).contains(&address))
    }

    /// Why `stopped` is no safe point, or None when it is one.
    fn unsafe_because(&self, stopped: &Stopped) -> Option<&'static str> {
        let registers = &stopped.registers;
        if let Some(why) = self.handler_unsafe(stopped) {
            return Some(why);
        }
        if !self.risky_at(registers.rip) {
            return None;
        }
        let number = registers.orig_rax as i64;
        let at_syscall = number >= 0 && self.after_syscall(stopped, registers.rip);
        if !self.in_libc_code(registers.rip) || !at_syscall {
            return Some("inside the C library, the loader, the allocator or the profiler");
        }
        if self.safe_wait(number, registers.rdi) {
            return None;
        }
        Some("in a system call the C library may make holding a lock")
    }

    /// Is the system call `number` with first argument `rdi` a wait the
    /// C library makes holding none of the locks?
    fn safe_wait(&self, number: i64, rdi: u64) -> bool {
        WAITS.contains(&number) || ((number == FUTEX || number == RESTART) && !self.risky_at(rdi))
    }

    /// Is the instruction before `rip` a `syscall`?
    fn after_syscall(&self, stopped: &Stopped, rip: u64) -> bool {
        stopped.read(rip.wrapping_sub(2), 2).ok().as_deref() == Some(&SYSCALL[..])
    }

    /// Why a signal handler running on the thread makes it no safe point.
    /// Handlers are found on the thread's live call chain (`frames`); each
    /// must have interrupted a safe point: code outside the risky objects,
    /// or the C library in a wait of the list: a `syscall` about to be
    /// restarted (the kernel rewound the instruction pointer to it and put
    /// the call's number back), or one that failed with EINTR (only a
    /// blocking wait fails so) whose first argument is no lock word of the
    /// risky objects. A PostgreSQL 15 postmaster, for one, starts its
    /// children from its SIGCHLD handler, which interrupted `select`: they
    /// run inside that handler all their lives.
    ///
    /// Where the walk cannot reach the chain's end (code without CFI), the
    /// stack above the last frame it reached is searched for a signal
    /// frame instead: a word holding the trampoline's address followed by
    /// a saved context whose stack pointer lies above it and whose
    /// instruction pointer lies in code (which a stale copy may pass: then
    /// the thread is let go and tried again later, never taken).
    fn handler_unsafe(&self, stopped: &Stopped) -> Option<&'static str> {
        let restorer = self.restorer?;
        let chain = self.walker.chain(stopped, restorer);
        for context in &chain.interrupted {
            if !self.risky_at(context.rip) {
                continue;
            }
            let restarting = stopped.read(context.rip, 2).ok().as_deref() == Some(&SYSCALL[..]);
            let failed = self.after_syscall(stopped, context.rip)
                && context.rax as i64 == -EINTR
                && !self.risky_at(context.rdi);
            let waiting = if restarting {
                self.safe_wait(context.rax as i64, context.rdi)
            } else {
                failed
            };
            if !self.in_libc_code(context.rip) || !waiting {
                return Some("in a signal handler that interrupted the C library outside a wait");
            }
        }
        let End::Unknown { stack } = chain.end else {
            return None;
        };
        self.signal_frame_above(stopped, stack, restorer)
            .then_some("in a signal handler, as far as its stack shows")
    }

    /// A plausible signal frame on the stack from `stack` up.
    fn signal_frame_above(&self, stopped: &Stopped, stack: u64, restorer: u64) -> bool {
        let end = self
            .maps
            .iter()
            .find(|m| m.contains(stack))
            .map_or(stack + 4096, |m| m.end);
        let start = stack & !7;
        let length = (end.saturating_sub(start)).min(64 * 1024) as usize;
        let Ok(words) = stopped.read(start, length) else {
            return false;
        };
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(words.get(at..at + 8)?.try_into().ok()?))
        };
        (0..words.len() / 8).any(|index| {
            let at = index * 8;
            let frame = start + at as u64;
            word(at) == Some(restorer)
                && word(at + SAVED_RSP).is_some_and(|rsp| rsp > frame)
                && word(at + SAVED_RIP)
                    .is_some_and(|rip| self.maps.iter().any(|m| m.executable && m.contains(rip)))
        })
    }

    /// Room on the thread's stack for a call: its mapping below the stack
    /// pointer (the main thread's `[stack]` grows on demand when the call
    /// runs, but the scratch area written from here must be mapped).
    fn stack_room(&self, stopped: &Stopped) -> bool {
        let rsp = stopped.registers.rsp;
        self.maps.iter().find(|m| m.contains(rsp)).is_some_and(|m| {
            let below = rsp - m.start;
            below >= STACK_NEEDED || (m.path == "[stack]" && below >= SCRATCH_NEEDED)
        })
    }
}

/// Threads to try, best first: those blocked in a wait (stopping them
/// costs them nothing), then the others.
fn candidates(process: Process) -> Vec<i32> {
    let mut threads: Vec<(u8, i32)> = process
        .threads()
        .into_iter()
        .map(|tid| {
            let rank = match process.blocked_in(tid) {
                Blocked::Syscall(n) if WAITS.contains(&n) || n == FUTEX || n == RESTART => 0,
                Blocked::Running => 1,
                _ => 2,
            };
            (rank, tid)
        })
        .collect();
    threads.sort_by_key(|&(rank, _)| rank);
    threads.into_iter().map(|(_, tid)| tid).collect()
}

/// The process exists and is not exiting.
fn alive(process: Process) -> bool {
    process.exists() && !matches!(process.state(), Some('Z' | 'X'))
}

fn exited(process: Process) -> Failure {
    Failure::new(format!(
        "process {} exited during the attach; nothing was left in it",
        process.0
    ))
}

/// Stop one thread of `process` at a safe point, within `timeout`.
/// `refused` explains a ptrace refusal.
pub fn stop_one(
    process: Process,
    landscape: &Landscape,
    timeout: Duration,
    refused: &dyn Fn(i32) -> Failure,
) -> Result<Stopped, Failure> {
    let deadline = Instant::now() + timeout;
    let mut last_reason = "no thread was found";
    let mut round: u64 = 0;
    loop {
        for tid in candidates(process) {
            match tracer::seize_and_stop(tid) {
                Ok(stopped) => {
                    let reason = landscape
                        .unsafe_because(&stopped)
                        .or_else(|| (!landscape.stack_room(&stopped)).then_some("short of stack"));
                    match reason {
                        None => return Ok(stopped),
                        Some(reason) => {
                            last_reason = reason;
                            stopped.release()?;
                        }
                    }
                }
                Err(StopError::Refused(errno)) => {
                    // A process that is exiting refuses to be traced.
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(if alive(process) {
                        refused(errno)
                    } else {
                        exited(process)
                    });
                }
                Err(StopError::GroupStop(signal)) => {
                    return Err(Failure::new(format!(
                        "process {} was stopped (signal {signal}) meanwhile; nothing was changed \
                         (continue it with kill -CONT {} and try again)",
                        process.0, process.0
                    )));
                }
                Err(StopError::Gone) => {}
            }
        }
        if !alive(process) {
            return Err(exited(process));
        }
        if Instant::now() >= deadline {
            return Err(Failure::new(format!(
                "no thread of process {} reached a safe point within {:.1} s (the last one tried \
                 was {last_reason}); nothing was changed",
                process.0,
                timeout.as_secs_f64()
            )));
        }
        round += 1;
        // A varying pause, so that the tries do not fall into step with a
        // loop of the program.
        std::thread::sleep(Duration::from_micros(500 + (round * 7919) % 1500));
    }
}
