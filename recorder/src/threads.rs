//! Threads: setup on a thread's first allocation, the registry the dump sums
//! exact counters over, and the flush when a thread exits.
//!
//! Owns the per-thread cold state ([`ThreadExt`], pooled so that 1,000
//! short-lived threads reuse a handful of blocks), the registry of live
//! threads' hot blocks, the counters of threads that have exited, and the
//! pthread key whose destructor folds a thread's counters into those.
//!
//! Runs in malloc's slow path (set-up, first sample, allocations after the
//! exit flush) and in thread teardown (flush): takes the registry lock
//! (rank `Threads`), allocates only through the shim's own heap (mmap, never
//! the profiled allocator; its lock ranks above), makes the syscalls gettid
//! and prctl at a thread's first sample, and never calls the interposed
//! functions while holding the lock. Dumps take the lock for a copy of the
//! counters and of the thread list.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

use heapsample_format::ThreadInfo;

use crate::spin_lock::{LockClass, SpinLock};
use crate::tls::{self, ThreadExt, ThreadState};

/// Counters of threads that have exited (or of a fork parent's threads).
struct Retired {
    allocations: AtomicU64,
    frees: AtomicU64,
    bytes_allocated: AtomicU64,
}

static RETIRED: Retired = Retired {
    allocations: AtomicU64::new(0),
    frees: AtomicU64::new(0),
    bytes_allocated: AtomicU64::new(0),
};

struct Registry {
    /// Hot blocks of threads that are set up and have not exited.
    live: Vec<&'static ThreadState>,
    /// Every thread that took a sample.
    infos: Vec<ThreadInfo>,
    /// Cold blocks of exited threads, ready for reuse. Boxed because each
    /// travels to and from a thread as a raw pointer.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<ThreadExt>>,
}

static REGISTRY: SpinLock<Registry> = SpinLock::new(
    LockClass::Threads,
    Registry {
        live: Vec::new(),
        infos: Vec::new(),
        spare: Vec::new(),
    },
);

static NEXT_SERIAL: AtomicU32 = AtomicU32::new(1);
static THREADS_SEEN: AtomicU64 = AtomicU64::new(0);
static EXIT_KEY: AtomicU32 = AtomicU32::new(0);
static EXIT_KEY_READY: AtomicBool = AtomicBool::new(false);

/// How many times a thread's exit flush runs: glibc runs key destructors
/// for up to PTHREAD_DESTRUCTOR_ITERATIONS (4) rounds, and other keys'
/// destructors may allocate in each of them.
const EXIT_FLUSH_ROUNDS: u32 = 4;

/// Create the pthread key whose destructor flushes an exiting thread.
pub fn create_exit_key() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: valid out pointer and a destructor with the C ABI.
    if unsafe { libc::pthread_key_create(&mut key, Some(on_thread_exit)) } == 0 {
        EXIT_KEY.store(key, Relaxed);
        EXIT_KEY_READY.store(true, Relaxed);
    }
}

/// Set up the calling thread: serial number, random seed, cold block,
/// registration, exit flush. Called under the thread's guard.
pub fn setup_current(state: &'static ThreadState) {
    let serial = NEXT_SERIAL.fetch_add(1, Relaxed);
    state.serial.store(serial, Relaxed);
    THREADS_SEEN.fetch_add(1, Relaxed);
    let ext = {
        let mut registry = REGISTRY.lock();
        registry.live.push(state);
        registry.spare.pop()
    };
    let mut ext = ext.unwrap_or_else(ThreadExt::new_boxed);
    ext.reset();
    ext.unwinder
        .set_computed_only(!crate::sampling_law::samples_often());
    state.ext.store(Box::into_raw(ext), Relaxed);
    arm_exit_flush(1);
}

fn arm_exit_flush(round: u32) {
    if EXIT_KEY_READY.load(Relaxed) {
        // SAFETY: the key was created; the value only needs to be non-null.
        unsafe { libc::pthread_setspecific(EXIT_KEY.load(Relaxed), round as usize as *const _) };
    }
}

/// Record the calling thread in the dump's thread list, once, at its first
/// sample (so the list holds only threads that appear in stacks, and its
/// name is the one the program gave it by then).
#[inline(always)]
pub fn list_current(state: &ThreadState) {
    if state.flags.load(Relaxed) & tls::FLAG_LISTED == 0 {
        list_new(state);
    }
}

/// [`list_current`] the first time (errno saved: `prctl`, and the own
/// heap's `mmap`).
#[cold]
#[inline(never)]
fn list_new(state: &ThreadState) {
    let _errno = crate::sys::ErrnoGuard::save();
    state.set_flag(tls::FLAG_LISTED, true);
    let info = ThreadInfo {
        serial: state.serial.load(Relaxed),
        tid: crate::spin_lock::thread_id(),
        name: current_name(),
    };
    REGISTRY.lock().infos.push(info);
}

fn current_name() -> String {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL-terminated.
    unsafe { crate::syscalls::thread_name(&mut name) };
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..len]).into_owned()
}

/// Move a thread's counters into the retired totals and zero them.
fn fold_into_retired(state: &ThreadState) {
    let allocations = state.allocations.swap(0, Relaxed);
    let units = state.sampler.take_units_used();
    RETIRED.allocations.fetch_add(allocations, Relaxed);
    RETIRED
        .frees
        .fetch_add(state.frees.swap(0, Relaxed), Relaxed);
    RETIRED
        .bytes_allocated
        .fetch_add(units.wrapping_sub(allocations), Relaxed);
    crate::walk_ends::fold_into_retired(state);
}

/// The exit flush (pthread key destructor): fold the thread's counters into
/// the retired totals, unregister it and return its cold block to the pool.
/// Allocations that happen later in the thread's teardown are still counted
/// in its block and folded by the next round.
extern "C" fn on_thread_exit(value: *mut libc::c_void) {
    let round = value as usize as u32;
    let state = tls::current();
    let _guard = tls::Guard::enter();
    {
        let mut registry = REGISTRY.lock();
        fold_into_retired(state);
        if round == 1 {
            registry.live.retain(|&live| !core::ptr::eq(live, state));
            let ext = state.ext.swap(core::ptr::null_mut(), Relaxed);
            if !ext.is_null() {
                // SAFETY: `ext` came from Box::into_raw in setup_current and
                // was just detached from the thread.
                registry.spare.push(unsafe { Box::from_raw(ext) });
            }
        }
    }
    if round < EXIT_FLUSH_ROUNDS {
        arm_exit_flush(round + 1);
    } else {
        // No later round will fold what is still to come: from now on every
        // allocation takes the slow path, which folds at once.
        state.set_flag(tls::FLAG_FINAL_FLUSH, true);
        state.sampler.stop();
    }
}

/// Slow path of an allocation made after the thread's last exit flush:
/// fold its counters into the process totals right away and keep the
/// countdown at zero. Returns true if the allocation should be sampled
/// (decided independently, with the countdown's law).
pub fn after_final_flush(state: &ThreadState, size: usize) -> bool {
    {
        let _registry = REGISTRY.lock();
        fold_into_retired(state);
    }
    state.sampler.stop();
    state.sampler.sample_independently(size)
}

/// Exact counters summed over live and exited threads.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactCounts {
    pub allocations: u64,
    pub frees: u64,
    pub bytes_allocated: u64,
    pub live_usable_bytes: i64,
    pub threads_seen: u64,
}

/// Sum the exact counters of every thread, counted from the attach in a
/// process the profiler was attached to (see `attachment`).
pub fn exact_counts() -> ExactCounts {
    let mut counts = exact_counts_total();
    (counts.allocations, counts.frees, counts.bytes_allocated) =
        crate::attachment::since_attach(counts.allocations, counts.frees, counts.bytes_allocated);
    counts
}

/// Sum the exact counters of every thread since the library started.
pub fn exact_counts_total() -> ExactCounts {
    let registry = REGISTRY.lock();
    let mut counts = ExactCounts {
        allocations: RETIRED.allocations.load(Relaxed),
        frees: RETIRED.frees.load(Relaxed),
        bytes_allocated: RETIRED.bytes_allocated.load(Relaxed),
        live_usable_bytes: crate::state::exact_live(),
        threads_seen: THREADS_SEEN.load(Relaxed),
    };
    for state in &registry.live {
        counts.allocations += state.allocations.load(Relaxed);
        counts.frees += state.frees.load(Relaxed);
        counts.bytes_allocated += state.bytes_allocated();
    }
    counts
}

/// How the walks of every thread's samples ended (since the last reset).
pub fn walk_ends() -> heapsample_format::WalkEnds {
    let registry = REGISTRY.lock();
    crate::walk_ends::sum(registry.live.iter().copied())
}

/// Forget how the walks so far ended (`heapsample_reset`).
pub fn forget_walk_ends() {
    let registry = REGISTRY.lock();
    crate::walk_ends::forget(registry.live.iter().copied());
}

/// Every thread that took a sample.
pub fn thread_infos() -> Vec<ThreadInfo> {
    REGISTRY.lock().infos.clone()
}

/// Hold the registry across `fork`.
pub fn lock_for_fork() {
    REGISTRY.lock_for_fork();
}

/// Release the registry in the fork parent.
///
/// # Safety
/// Only from the parent's fork handler after [`lock_for_fork`].
pub unsafe fn unlock_in_parent() {
    // SAFETY: per the contract.
    unsafe { REGISTRY.force_unlock() };
}

/// In the fork child: only the forking thread survives. The other threads'
/// counters (copied into the child with their memory) become retired history,
/// so the child's totals describe its whole heap without counting anything
/// twice.
///
/// # Safety
/// Only from the child's fork handler after [`lock_for_fork`].
pub unsafe fn reset_in_child() {
    // SAFETY: the forking thread held the lock; nobody else exists.
    unsafe { REGISTRY.force_unlock() };
    let me = tls::current();
    // In place: a fork handler that allocates costs every child a page fault.
    REGISTRY.lock().live.retain(|&state| {
        let survives = core::ptr::eq(state, me);
        if !survives {
            fold_into_retired(state);
        }
        survives
    });
}
