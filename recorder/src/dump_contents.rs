//! What a dump holds: a [`Dump`] assembled from the tables as they are now.
//!
//! Owns the reading of every table a dump covers (stacks and their records,
//! the module map and its contexts, the thread list, the exact counters)
//! into one value, and the process facts it carries (command line, time,
//! identity, the clocks' origin, the attach time).
//! Naming, numbering and writing the file are `writer`'s and `dump_file`'s.
//!
//! Never runs inside malloc: it allocates, takes the module map's and the
//! thread registry's locks for copies, and reads `/proc`.

use core::sync::atomic::Ordering::Relaxed;

use heapsample_format::{Dump, Process, ThreadInfo, Totals, Trigger};

use crate::stack_table::{OTHER_THREADS, STACKS};
use crate::{modules, process, state, sys, threads};

/// The name in the dump's thread list of the samples whose thread the stack
/// table no longer tells apart.
pub const OTHER_THREADS_NAME: &str = "other threads";

/// Build the profile from the tables as they are now, unnumbered (`seq`
/// and `trigger_seq` 0: the writer numbers the dumps it writes).
pub fn assemble(trigger: Trigger) -> Dump {
    let config = state::config();
    let exact = threads::exact_counts();
    let mut contexts = modules::Contexts::new();
    let stacks = STACKS.snapshot(
        config.prof_accum,
        crate::sampling::samples_every_allocation(),
        &mut |objects| contexts.number(objects),
    );
    let mut thread_list = threads::thread_infos();
    if stacks.iter().any(|stack| stack.thread == OTHER_THREADS) {
        thread_list.push(ThreadInfo {
            serial: OTHER_THREADS,
            tid: 0,
            name: OTHER_THREADS_NAME.to_string(),
        });
    }
    Dump {
        writer: concat!("heapsample ", env!("CARGO_PKG_VERSION")).to_string(),
        pid: std::process::id(),
        executable: modules::main_executable(),
        command_line: command_line(),
        time_unix_ns: sys::clock_ns(libc::CLOCK_REALTIME),
        trigger,
        seq: 0,
        trigger_seq: 0,
        lg_sample_period: crate::sampling::lg_period(),
        config: config.describe(),
        modules: contexts.modules(),
        threads: thread_list,
        stacks,
        totals: Totals {
            allocations: exact.allocations,
            frees: config.prof_exact.then_some(exact.frees),
            bytes_allocated: exact.bytes_allocated,
            live_usable_bytes: config
                .prof_exact
                .then_some(exact.live_usable_bytes.max(0) as u64),
            samples_taken: state::samples_taken(),
            samples_dropped: state::samples_dropped(),
            samples_live: crate::live_table::LIVE.live_count(),
            threads_seen: exact.threads_seen,
            profiler_bytes: sys::MAPPED_BYTES.load(Relaxed),
            resets: state::resets(),
            dropped: heapsample_format::Weights::default(),
        },
        process: {
            let (id, parent_id) = process::identity();
            let (start_monotonic_ns, start_unix_ns) = state::start_time();
            Process {
                id,
                parent_id,
                start_monotonic_ns,
                start_unix_ns,
                dump_monotonic_ns: sys::clock_ns(libc::CLOCK_MONOTONIC),
                attach_unix_ns: crate::attachment::attached_unix_ns(),
            }
        },
        bytes_per_call: heapsample_format::BYTES_PER_CALL as u32,
        live_samples: Vec::new(),
        peak: None,
    }
}

fn command_line() -> Vec<String> {
    read_proc_file(c"/proc/self/cmdline")
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

/// A small /proc file read whole with plain `read`s (no `stat` to size the
/// buffer first: a forked child's exit dump reads it, and counts each call).
fn read_proc_file(path: &core::ffi::CStr) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4096);
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return bytes;
    }
    loop {
        if bytes.len() == bytes.capacity() {
            bytes.reserve(bytes.capacity());
        }
        let spare = bytes.spare_capacity_mut();
        // SAFETY: reading into the vector's spare capacity from our fd.
        let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), spare.len()) };
        if n < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        // SAFETY: `n` more bytes were just initialised by read.
        unsafe { bytes.set_len(bytes.len() + n as usize) };
    }
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    bytes
}
