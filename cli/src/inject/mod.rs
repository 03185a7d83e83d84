//! Working inside another process without gdb.
//!
//! - `proc`: what `/proc` says (mappings, threads, owner, tracer), read
//!   without stopping anything.
//! - `symbols`: the dynamic symbols of the objects it loaded, from their
//!   files (`object`), placed where it loaded them.
//! - `frames`: a stopped thread's call chain, unwound with its objects'
//!   CFI (is a signal handler running on it?).
//! - `landscape`: the ranges whose locks matter and the threads' walker,
//!   known before anything is stopped.
//! - `safepoint`: stopping one thread where it holds no allocator, loader
//!   or profiler lock.
//! - `tracer`: ptrace on that thread: calls, memory, and letting it go as
//!   it was, with its signals delivered.
//!
//! [`Target::inspect`] refuses, before anything is stopped, what cannot
//! work (no such process, no permission to trace, another tracer, a
//! statically linked or non-glibc program, an allocator linked into the
//! program, a stopped process); [`Session`] then stops one thread, calls
//! functions on it and lets it go.

#[cfg(target_arch = "x86_64")]
mod frames;
mod landscape;
mod proc;
#[cfg(target_arch = "x86_64")]
mod safepoint;
mod symbols;
#[cfg(target_arch = "x86_64")]
mod tracer;
#[cfg(not(target_arch = "x86_64"))]
mod unsupported;
#[cfg(not(target_arch = "x86_64"))]
use unsupported as frames;
#[cfg(not(target_arch = "x86_64"))]
use unsupported as safepoint;
#[cfg(not(target_arch = "x86_64"))]
use unsupported as tracer;

use std::path::Path;
use std::time::{Duration, Instant};

use landscape::Landscape;
use proc::Mapping;
pub use proc::{Credentials, Process};
use symbols::LoadedObject;

use crate::Failure;

/// The allocators whose entry points in a program's own symbols mean it
/// allocates without `malloc` (linked in statically).
const STATIC_ALLOCATORS: &[&str] = &[
    "_rjem_malloc",
    "je_malloc",
    "mi_malloc",
    "tc_malloc",
    "rpmalloc",
    "snmalloc_malloc",
];

/// A process to work in, inspected.
pub struct Target {
    pub process: Process,
    pub name: String,
    maps: Vec<Mapping>,
    libc: LoadedObject,
    landscape: Landscape,
}

impl Target {
    /// Inspect `pid`: every refusal that needs no stop happens here.
    pub fn inspect(pid: i32) -> Result<Target, Failure> {
        let process = Process(pid);
        if !process.exists() {
            return Err(Failure::new(format!("no process {pid}")));
        }
        #[cfg(not(target_arch = "x86_64"))]
        return Err(unsupported::refusal(process));
        let name = process.name();
        let maps = process
            .maps()
            .map_err(|e| refusal(process, e.raw_os_error().unwrap_or(libc::EACCES)))?;
        // Its files are read through /proc/PID/map_files or /proc/PID/root,
        // which need the permission to trace it.
        if let Err(error) = std::fs::read_link(format!("/proc/{pid}/root")) {
            return Err(refusal(
                process,
                error.raw_os_error().unwrap_or(libc::EACCES),
            ));
        }
        let tracer = process.tracer();
        if tracer != 0 {
            return Err(traced_by(process, tracer));
        }
        if matches!(process.state(), Some('T' | 't')) {
            return Err(Failure::new(format!(
                "process {pid} ({name}) is stopped; continue it (kill -CONT {pid}) and try again"
            )));
        }
        let program_path = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let executable = maps
            .iter()
            .filter(|m| m.offset == 0 && !m.path.starts_with('[') && !m.path.is_empty())
            .find(|m| Path::new(&m.path) == program_path)
            .or_else(|| {
                maps.iter()
                    .find(|m| m.offset == 0 && m.path.starts_with('/'))
            })
            .ok_or_else(|| Failure::new(format!("process {pid} ({name}) maps no program file")))?;
        let program = LoadedObject::open(process, &maps, executable)?;
        let find = |wanted: &dyn Fn(&str) -> bool| {
            maps.iter()
                .find(|m| m.offset == 0 && wanted(m.file_name()))
                .cloned()
        };
        let libc_mapping = find(&|name| name.starts_with("libc.so"));
        let loader_mapping = find(&|name| name.starts_with("ld-linux"));
        if maps.iter().any(|m| m.path.contains("musl")) {
            return Err(Failure::new(format!(
                "process {pid} ({name}) runs on musl, not glibc: attach needs glibc's loader"
            )));
        }
        let (Some(libc_mapping), Some(loader_mapping)) = (libc_mapping, loader_mapping) else {
            let why = if program.has_interpreter() {
                "does not run on glibc"
            } else {
                "is statically linked (no dynamic loader to load the profiler)"
            };
            return Err(Failure::new(format!("process {pid} ({name}) {why}")));
        };
        let libc = LoadedObject::open(process, &maps, &libc_mapping)?;
        if libc.dynamic_symbol("dlopen").is_none()
            || libc.dynamic_symbol("_dl_find_object").is_none()
        {
            return Err(Failure::new(format!(
                "process {pid} ({name}) runs on a glibc older than 2.35, which the profiler needs"
            )));
        }
        if let Some(allocator) = program
            .dynamic_symbol("malloc")
            .map(|_| "malloc".to_string())
            .or_else(|| program.defines_any(STATIC_ALLOCATORS))
        {
            return Err(Failure::new(format!(
                "process {pid} ({name}) has its allocator linked into the program ({allocator} in {}): \
                 attach sees only calls of a shared C library's malloc",
                program.path
            )));
        }
        let landscape = landscape(process, &maps, &libc, [&libc_mapping, &loader_mapping]);
        Ok(Target {
            process,
            name,
            maps,
            libc,
            landscape,
        })
    }

    /// The profiler library's mapping in the process, if it is loaded.
    pub fn profiler(&self) -> Option<&Mapping> {
        self.maps
            .iter()
            .find(|m| m.offset == 0 && crate::library::is_the_library(m.file_name()))
    }

    /// Does the process see `library` at the same path (its own mount
    /// namespace may differ)?
    pub fn sees(&self, library: &Path) -> bool {
        let ours = std::fs::metadata(library);
        let theirs = std::fs::metadata(self.process.root_path(library));
        match (ours, theirs) {
            (Ok(a), Ok(b)) => {
                use std::os::unix::fs::MetadataExt;
                a.ino() == b.ino() && a.dev() == b.dev()
            }
            _ => false,
        }
    }

    /// Read the mappings again (after the library was loaded).
    pub fn refresh(&mut self) -> Result<(), Failure> {
        self.maps = self.process.maps().map_err(|_| proc::gone(self.process))?;
        Ok(())
    }

    /// The address of `name` in the profiler library loaded in the process.
    pub fn profiler_entry(&self, name: &str) -> Result<u64, Failure> {
        let mapping = self
            .profiler()
            .ok_or_else(|| Failure::new("the profiler library is not loaded in the process"))?;
        LoadedObject::open(self.process, &self.maps, mapping)?
            .dynamic_symbol(name)
            .ok_or_else(|| {
                Failure::new(format!(
                    "the profiler library loaded in process {} has no {name} (an older version?)",
                    self.process.0
                ))
            })
    }
}

/// What to know about the process's code to find a safe point. The
/// objects whose locks matter: the C library, the loader, the profiler,
/// and any other object that defines `malloc` (jemalloc, tcmalloc...).
fn landscape(
    process: Process,
    maps: &[Mapping],
    libc: &LoadedObject,
    core: [&Mapping; 2],
) -> Landscape {
    let mut risky_inodes: Vec<u64> = core.iter().map(|m| m.inode).collect();
    for mapping in maps.iter().filter(|m| m.offset == 0 && m.inode != 0) {
        if risky_inodes.contains(&mapping.inode) {
            continue;
        }
        if crate::library::is_the_library(mapping.file_name())
            || symbols::file_defines(process, mapping, "malloc")
        {
            risky_inodes.push(mapping.inode);
        }
    }
    // Each object's mappings, and the anonymous one right after its last
    // (its .bss: the C library's stdio and malloc locks live there).
    let mut risky: Vec<(u64, u64)> = Vec::new();
    for (at, mapping) in maps.iter().enumerate() {
        if mapping.inode != 0 && risky_inodes.contains(&mapping.inode) {
            risky.push((mapping.start, mapping.end));
            if let Some(next) = maps
                .get(at + 1)
                .filter(|n| n.inode == 0 && n.path.is_empty() && n.start == mapping.end)
            {
                risky.push((next.start, next.end));
            }
        }
    }
    let libc_code = maps
        .iter()
        .filter(|m| m.inode == core[0].inode && m.executable)
        .map(|m| (m.start, m.end))
        .collect();
    // mov rax, 15 (rt_sigreturn); syscall
    let restorer = libc.find_code(&[0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05]);
    Landscape {
        risky,
        libc_code,
        restorer,
        maps: maps.to_vec(),
        walker: frames::Walker::new(process, maps),
    }
}

/// Why ptrace (or reading the process's maps) was refused, in one line.
pub fn refusal(process: Process, errno: i32) -> Failure {
    let tracer = process.tracer();
    if tracer != 0 {
        return traced_by(process, tracer);
    }
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let other_owner = process.uid().filter(|&uid| uid != me);
    let reason = explain_refusal(
        other_owner,
        proc::have_cap_sys_ptrace(),
        proc::yama_scope(),
        errno,
    );
    Failure::new(format!(
        "cannot trace process {} ({}): {reason}; nothing was changed",
        process.0,
        process.name()
    ))
}

/// The reason for a ptrace refusal, from what the system says: the
/// process's owner when it is another user, whether this command has
/// `CAP_SYS_PTRACE`, Yama's `ptrace_scope` and the error.
fn explain_refusal(
    other_owner: Option<u32>,
    capable: bool,
    yama: Option<u32>,
    errno: i32,
) -> String {
    if let (Some(uid), false) = (other_owner, capable) {
        return format!(
            "it belongs to another user (uid {uid}) and this command lacks CAP_SYS_PTRACE \
             (run it as that user or as root; in a container, add the capability, e.g. \
             docker --cap-add=SYS_PTRACE)"
        );
    }
    match yama {
        Some(3) => "Yama's ptrace_scope is 3: no process may trace another".to_string(),
        Some(2) if !capable => {
            "Yama's ptrace_scope is 2: only a process with CAP_SYS_PTRACE may trace (run as root)"
                .to_string()
        }
        Some(1) if !capable => "Yama's ptrace_scope is 1: only a parent may trace its descendants \
             (run as root, or set /proc/sys/kernel/yama/ptrace_scope to 0)"
            .to_string(),
        _ if !capable => "this command lacks CAP_SYS_PTRACE (in a container, add the capability, \
             e.g. docker --cap-add=SYS_PTRACE), or the process is not dumpable (setuid)"
            .to_string(),
        _ => format!(
            "the kernel refused ({}): the process may not be dumpable (setuid, or \
             prctl(PR_SET_DUMPABLE, 0)), or a security module forbids tracing it",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

fn traced_by(process: Process, tracer: i32) -> Failure {
    let tracer_name = Process(tracer).name();
    Failure::new(format!(
        "process {} ({}) is traced by process {tracer} ({tracer_name}) already; only one tracer \
         may attach (stop the debugger or tracer first); nothing was changed",
        process.0,
        process.name()
    ))
}

/// Bytes of the scratch area below the stopped thread's red zone (strings
/// passed in, buffers written by the call).
const SCRATCH: u64 = 16 * 1024;

/// One thread of the target stopped at a safe point, to call functions on.
pub struct Session {
    stopped: tracer::Stopped,
    /// The scratch area's next free byte (growing up) and its end.
    next: u64,
    end: u64,
    /// The stack pointer for calls (below the scratch area).
    call_stack: u64,
    /// When the thread stopped.
    pub stopped_at: Instant,
}

impl Session {
    /// Stop a thread of `target` at a safe point within `timeout`.
    pub fn begin(target: &Target, timeout: Duration) -> Result<Session, Failure> {
        let process = target.process;
        let stopped = safepoint::stop_one(process, &target.landscape, timeout, &|errno| {
            refusal(process, errno)
        })?;
        let end = (stopped.stack_pointer() - 128) & !15;
        let start = end - SCRATCH;
        Ok(Session {
            stopped,
            next: start,
            end,
            call_stack: (start - 256) & !15,
            stopped_at: Instant::now(),
        })
    }

    /// The thread used.
    pub fn thread(&self) -> i32 {
        self.stopped.tid()
    }

    /// Copy `bytes` into the scratch area; returns their address.
    pub fn put(&mut self, bytes: &[u8]) -> Result<u64, Failure> {
        let address = self.next;
        let size = (bytes.len() as u64 + 15) & !15;
        if address + size > self.end {
            return Err(Failure::new("the scratch area is full"));
        }
        self.stopped.write(address, bytes)?;
        self.next += size;
        Ok(address)
    }

    /// A C string in the scratch area.
    pub fn put_string(&mut self, text: &str) -> Result<u64, Failure> {
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(0);
        self.put(&bytes)
    }

    /// A zeroed buffer of `size` bytes in the scratch area.
    pub fn buffer(&mut self, size: usize) -> Result<u64, Failure> {
        self.put(&vec![0; size])
    }

    /// The C string at `address` (at most `max` bytes).
    pub fn read_string(&self, address: u64, max: usize) -> Result<String, Failure> {
        let bytes = self.stopped.read(address, max)?;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }

    /// Call the function at `address` with `arguments`.
    pub fn call(&mut self, address: u64, arguments: &[u64]) -> Result<u64, Failure> {
        self.stopped.call(address, arguments, self.call_stack)
    }

    /// Call a function of the C library by name.
    pub fn call_libc(
        &mut self,
        target: &Target,
        name: &str,
        arguments: &[u64],
    ) -> Result<u64, Failure> {
        let address = target
            .libc
            .dynamic_symbol(name)
            .ok_or_else(|| Failure::new(format!("the process's C library has no {name}")))?;
        self.call(address, arguments)
    }

    /// Let the thread go as it was; returns how long it was stopped.
    pub fn end(self) -> Result<Duration, Failure> {
        let stopped_for = self.stopped_at.elapsed();
        self.stopped.release()?;
        Ok(stopped_for)
    }
}

/// Run `work` on a thread of the process stopped at a safe point, and let
/// it go whatever `work` returned. Meanwhile this command holds back the
/// signals that would end it (an interrupt, a hang-up, a termination): had
/// it ended in the middle of a call, the kernel would let the thread go on
/// from wherever the call was. They take effect once the thread is let go.
pub fn with_session<T>(
    target: &mut Target,
    timeout: Duration,
    work: impl FnOnce(&mut Session, &mut Target) -> Result<T, Failure>,
) -> Result<(T, Duration, i32), Failure> {
    let held = HeldSignals::hold();
    let result = (|| {
        let mut session = Session::begin(target, timeout)?;
        let thread = session.thread();
        let result = work(&mut session, target);
        let stopped_for = session.end();
        let value = result?;
        Ok((value, stopped_for?, thread))
    })();
    drop(held);
    result
}

/// The terminating signals blocked in this command, until dropped.
struct HeldSignals(libc::sigset_t);

impl HeldSignals {
    fn hold() -> HeldSignals {
        // SAFETY: sigset operations on local sets, and this thread's mask.
        unsafe {
            let mut held: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut held);
            for signal in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGTSTP,
            ] {
                libc::sigaddset(&mut held, signal);
            }
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &held, &mut previous);
            HeldSignals(previous)
        }
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        // SAFETY: restoring this thread's own previous mask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_their_cause() {
        let eperm = libc::EPERM;
        assert!(
            explain_refusal(Some(65534), false, Some(0), eperm)
                .contains("another user (uid 65534)")
        );
        assert!(explain_refusal(None, false, Some(1), eperm).contains("ptrace_scope is 1"));
        assert!(explain_refusal(None, false, Some(2), eperm).contains("ptrace_scope is 2"));
        assert!(explain_refusal(None, true, Some(3), eperm).contains("ptrace_scope is 3"));
        assert!(explain_refusal(None, false, None, eperm).contains("lacks CAP_SYS_PTRACE"));
        assert!(explain_refusal(None, true, Some(1), eperm).contains("not be dumpable"));
    }
}
