//! The module map: which objects were loaded where, and when.
//!
//! Owns the history of loaded objects as *epochs*. Every stack is stored with
//! the epoch in which it was captured; the epoch advances at each `dlclose`,
//! just after the map was refreshed, so an object that is later unloaded
//! stays in the dump with the range of epochs in which it was mapped and its
//! stacks still symbolize.
//!
//! Never runs inside malloc: refreshing walks `dl_iterate_phdr` (the loader
//! lock) and allocates. The sample path reads only the epoch counter.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use findshlibs::{Segment, SharedLibrary, SharedLibraryId, TargetSharedLibrary};
use heapsample_format::Module;

use crate::spin_lock::{LockClass, SpinLock};

static EPOCH: AtomicU32 = AtomicU32::new(0);
static HISTORY: SpinLock<Vec<Module>> = SpinLock::new(LockClass::Modules, Vec::new());

/// The current module epoch (read at each sample).
#[inline]
pub fn current_epoch() -> u32 {
    EPOCH.load(Relaxed)
}

struct Loaded {
    path: String,
    build_id: Vec<u8>,
    load_bias: u64,
    ranges: Vec<(u64, u64)>,
}

/// The real path of the main executable (empty if it cannot be read).
pub fn main_executable() -> String {
    std::fs::read_link("/proc/self/exe")
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn loaded_now() -> Vec<Loaded> {
    let mut loaded = Vec::new();
    let executable = main_executable();
    TargetSharedLibrary::each(|library| {
        let name = library.name().to_string_lossy().into_owned();
        let path = if name.is_empty() {
            executable.clone()
        } else {
            name
        };
        let build_id = match library.id() {
            Some(SharedLibraryId::GnuBuildId(bytes)) => bytes,
            _ => Vec::new(),
        };
        let ranges = library
            .segments()
            .filter(|segment| segment.is_code())
            .map(|segment| {
                let start = segment.actual_virtual_memory_address(library).0 as u64;
                (start, start + segment.len() as u64)
            })
            .collect();
        loaded.push(Loaded {
            path,
            build_id,
            load_bias: library.virtual_memory_bias().0 as u64,
            ranges,
        });
    });
    loaded
}

fn same_object(module: &Module, loaded: &Loaded) -> bool {
    module.load_bias == loaded.load_bias
        && module.path == loaded.path
        && module.build_id == loaded.build_id
}

/// Bring the history up to date with what is loaded now: objects seen for
/// the first time start in the current epoch, objects gone since the last
/// refresh end in the epoch before it.
pub fn refresh() {
    let loaded = loaded_now();
    let epoch = current_epoch();
    let mut history = HISTORY.lock();
    for module in history.iter_mut().filter(|m| m.last_epoch.is_none()) {
        if !loaded.iter().any(|object| same_object(module, object)) {
            module.last_epoch = Some(epoch.saturating_sub(1).max(module.first_epoch));
        }
    }
    for object in loaded {
        let known = history
            .iter()
            .any(|m| m.last_epoch.is_none() && same_object(m, &object));
        if !known {
            history.push(Module {
                path: object.path,
                build_id: object.build_id,
                load_bias: object.load_bias,
                ranges: object.ranges,
                first_epoch: epoch,
                last_epoch: None,
            });
        }
    }
}

/// Call before the real `dlclose`: records the map as it still is, then
/// starts a new epoch for the stacks captured from now on.
pub fn before_dlclose() {
    refresh();
    EPOCH.fetch_add(1, Relaxed);
    crate::backtrace::invalidate();
}

/// Call after the real `dlclose`: closes the epochs of unloaded objects.
pub fn after_dlclose() {
    // A capture racing with the unload may have cached rules for the
    // object's old addresses.
    crate::backtrace::invalidate();
    refresh();
}

/// The full history, refreshed first.
pub fn snapshot() -> Vec<Module> {
    refresh();
    HISTORY.lock().clone()
}

/// Hold the history lock across `fork`.
pub fn lock_for_fork() {
    HISTORY.lock_for_fork();
}

/// Release after `fork`, in parent or child.
///
/// # Safety
/// Only from the fork handlers after [`lock_for_fork`].
pub unsafe fn unlock_after_fork() {
    // SAFETY: per the contract.
    unsafe { HISTORY.force_unlock() };
}
