//! The module map: which objects were loaded where, and when.
//!
//! Owns the history of loaded objects as *epochs*. Every stack is stored with
//! the epoch in which it was captured; at a `dlclose` the epoch advances if
//! a stack was captured in it, so an object that is later unloaded stays in
//! the dump with the range of epochs in which it was mapped and its stacks
//! still symbolize.
//!
//! The history stays small in programs that load and unload objects in a
//! loop: a refresh costs one `dl_iterate_phdr` step when the loader's
//! add/remove counters did not move, and O(loaded + remembered objects)
//! when they did; an object that is loaded again at the same address reuses
//! its entry when no other object took that address in between; an object
//! loaded and unloaded within one epoch leaves no entry at all. The epoch
//! only advances past one in which a stack with a frame outside the
//! program's own objects was captured, so the history grows at most with
//! such stacks, which the stack table stores anyway.
//!
//! Paths are absolute: a relative name the program gave `dlopen` is
//! resolved against the working directory at the time of the call
//! ([`note_dlopen`]), other relative names against the working directory at
//! the first refresh that sees the object.
//!
//! Never runs inside malloc: refreshing walks `dl_iterate_phdr` (the loader
//! lock) and allocates. The sample path only reads the epoch and marks it
//! used when a stack has a frame in an object that may be unloaded
//! ([`epoch_for`]).

use core::ffi::{CStr, c_int, c_void};
use core::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
    Ordering::SeqCst,
};
use std::sync::OnceLock;

use findshlibs::{Segment, SharedLibrary, SharedLibraryId, TargetSharedLibrary};
use heapsample_format::Module;

use crate::spin_lock::{LockClass, SpinLock};

static EPOCH: AtomicU32 = AtomicU32::new(0);
/// One more than the last epoch in which a stack was captured (0: none).
static LAST_USED_EPOCH: AtomicU32 = AtomicU32::new(0);
static HISTORY: SpinLock<History> = SpinLock::new(LockClass::Modules, History::new());
/// Set at the program's first `dlopen`: until then nothing can be unloaded
/// and samples need not look at their frames.
static DLOPEN_CALLED: AtomicBool = AtomicBool::new(false);
/// At most this many relative `dlopen` names are remembered (the oldest go).
const MAX_DLOPEN_NAMES: usize = 256;

/// One remembered object: the module as dumped, and the name the loader
/// knows it by (relative names stay as the loader has them, to match).
struct Entry {
    module: Module,
    loader_name: String,
}

impl Entry {
    fn key(&self) -> Key {
        (
            self.module.load_bias,
            name_hash(self.loader_name.as_bytes()),
        )
    }
}

struct History {
    entries: Vec<Entry>,
    /// The loader's (adds, subs) counters at the last refresh; None before.
    loader_counts: Option<(u64, u64)>,
    /// Relative names given to `dlopen`, with what they meant then.
    dlopen_names: Vec<(String, String)>,
}

impl History {
    const fn new() -> Self {
        History {
            entries: Vec::new(),
            loader_counts: None,
            dlopen_names: Vec::new(),
        }
    }

    /// The keys of the objects loaded at the last refresh, sorted.
    fn loaded_keys(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .entries
            .iter()
            .filter(|entry| entry.module.last_epoch.is_none())
            .map(Entry::key)
            .collect();
        keys.sort_unstable();
        keys
    }
}

/// The current module epoch.
#[inline]
pub fn current_epoch() -> u32 {
    EPOCH.load(Relaxed)
}

/// The epoch to store with a stack just captured. If one of its frames lies
/// outside the objects loaded with the program (so in an object that may be
/// unloaded), the epoch is marked used, so the next `dlclose` starts a new
/// one; stacks only in objects that stay never make the history grow.
/// Called at sample events.
#[inline]
pub fn epoch_for(frames: &[u64]) -> u32 {
    let epoch = EPOCH.load(SeqCst);
    if DLOPEN_CALLED.load(Relaxed)
        && LAST_USED_EPOCH.load(Relaxed) != epoch + 1
        && !PERMANENT.contains_all(frames)
    {
        LAST_USED_EPOCH.fetch_max(epoch + 1, SeqCst);
    }
    epoch
}

/// Code ranges of the objects loaded with the program (never unloaded),
/// readable inside malloc without a lock; written once, by the first
/// refresh. Until then no address counts as permanent.
struct PermanentRanges {
    count: AtomicU32,
    ranges: [(AtomicU64, AtomicU64); Self::MAX],
}

impl PermanentRanges {
    const MAX: usize = 64;

    fn contains_all(&self, frames: &[u64]) -> bool {
        let ranges = &self.ranges[..self.count.load(Acquire) as usize];
        frames.iter().all(|&address| {
            ranges
                .iter()
                .any(|(start, end)| address >= start.load(Relaxed) && address < end.load(Relaxed))
        })
    }

    fn publish(&self, ranges: &[(u64, u64)]) {
        let count = ranges.len().min(Self::MAX);
        for (slot, &(start, end)) in self.ranges.iter().zip(&ranges[..count]) {
            slot.0.store(start, Relaxed);
            slot.1.store(end, Relaxed);
        }
        self.count.store(count as u32, Release);
    }
}

static PERMANENT: PermanentRanges = PermanentRanges {
    count: AtomicU32::new(0),
    ranges: [const { (AtomicU64::new(0), AtomicU64::new(0)) }; PermanentRanges::MAX],
};

fn epoch_used(epoch: u32) -> bool {
    LAST_USED_EPOCH.load(SeqCst) > epoch
}

struct Loaded {
    loader_name: String,
    build_id: Vec<u8>,
    load_bias: u64,
    ranges: Vec<(u64, u64)>,
}

/// The real path of the main executable (empty if it cannot be read); read
/// once, as it does not change until `exec`.
pub fn main_executable() -> String {
    static EXECUTABLE: OnceLock<String> = OnceLock::new();
    EXECUTABLE
        .get_or_init(|| {
            std::fs::read_link("/proc/self/exe")
                .map(|path| path.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .clone()
}

/// The loader's counters of objects added and removed so far.
fn loader_counts() -> (u64, u64) {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _: usize, out: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid entry; `out` is the tuple below.
        unsafe { *out.cast::<(u64, u64)>() = ((*info).dlpi_adds, (*info).dlpi_subs) };
        1 // the counters are the same in every entry: stop
    }
    let mut counts = (0u64, 0u64);
    // SAFETY: a valid callback and a pointer to a live tuple.
    unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut counts).cast()) };
    counts
}

fn loaded_now() -> Vec<Loaded> {
    let mut loaded = Vec::new();
    TargetSharedLibrary::each(|library| {
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
            loader_name: library.name().to_string_lossy().into_owned(),
            build_id,
            load_bias: library.virtual_memory_bias().0 as u64,
            ranges,
        });
    });
    loaded
}

/// The absolute path of an object the loader calls `loader_name`.
fn absolute_path(loader_name: &str, dlopen_names: &[(String, String)]) -> String {
    if loader_name.is_empty() {
        return main_executable();
    }
    if loader_name.starts_with('/') || !loader_name.contains('/') {
        return loader_name.to_string(); // absolute, or not a path (the vdso)
    }
    dlopen_names
        .iter()
        .rev()
        .find(|(name, _)| name == loader_name)
        .map(|(_, path)| path.clone())
        .unwrap_or_else(|| resolve_in_working_directory(loader_name))
}

fn resolve_in_working_directory(name: &str) -> String {
    std::path::absolute(name)
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_else(|_| name.to_string())
}

/// The program is about to `dlopen(name)` (call at every such call): from
/// now on samples check for frames in objects that may be unloaded; remember
/// what a relative name means in the current working directory (the loader
/// keeps it relative).
pub fn note_dlopen(name: &CStr) {
    DLOPEN_CALLED.store(true, Relaxed);
    let bytes = name.to_bytes();
    if bytes.first() == Some(&b'/') || !bytes.contains(&b'/') {
        return; // absolute, or searched for (the loader stores the path found)
    }
    let name = name.to_string_lossy().into_owned();
    let absolute = resolve_in_working_directory(&name);
    let mut history = HISTORY.lock();
    let names = &mut history.dlopen_names;
    names.retain(|(known, _)| *known != name);
    if names.len() >= MAX_DLOPEN_NAMES {
        names.remove(0);
    }
    names.push((name, absolute));
}

fn same_object(entry: &Entry, loaded: &Loaded) -> bool {
    entry.module.load_bias == loaded.load_bias
        && entry.loader_name == loaded.loader_name
        && entry.module.build_id == loaded.build_id
}

fn overlaps(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    a.iter()
        .any(|&(start, end)| b.iter().any(|&(s, e)| start < e && s < end))
}

/// May `entries[index]` (unloaded since its last epoch) stand for the same
/// object loaded again now? Only if no other object mapped any of its
/// addresses in the epochs in between (their stacks would become ambiguous).
fn reusable(entries: &[Entry], index: usize, loaded: &Loaded) -> bool {
    let candidate = &entries[index].module;
    let Some(last) = candidate.last_epoch else {
        return false;
    };
    if !same_object(&entries[index], loaded) || candidate.ranges != loaded.ranges {
        return false;
    }
    !entries.iter().enumerate().any(|(other, entry)| {
        other != index
            && entry.module.last_epoch.is_none_or(|end| end > last)
            && overlaps(&entry.module.ranges, &candidate.ranges)
    })
}

/// Bring the history up to date with what is loaded now: objects seen for
/// the first time start in the current epoch, objects gone since the last
/// refresh end in the last epoch they may have stacks in.
pub fn refresh() {
    update(true);
}

/// [`refresh`], or with `add` false only retire what was unloaded: new
/// objects may wait while no stack was captured in the epoch, since every
/// new epoch starts with a full refresh.
fn update(add: bool) {
    let counts = loader_counts();
    if HISTORY.lock().loader_counts == Some(counts) {
        return;
    }
    let now = loaded_keys();
    let appeared = {
        let history = HISTORY.lock();
        let known = history.loaded_keys();
        now.iter().any(|key| known.binary_search(key).is_err())
    };
    // Reading build-ids and segments is only needed for new objects.
    let details = if appeared && add {
        loaded_now()
    } else {
        Vec::new()
    };
    let epoch = current_epoch();
    let used = epoch_used(epoch);
    let mut history = HISTORY.lock();
    history.entries.retain_mut(|entry| {
        if entry.module.last_epoch.is_some() || now.binary_search(&entry.key()).is_ok() {
            return true;
        }
        if used {
            entry.module.last_epoch = Some(epoch);
        } else if entry.module.first_epoch == epoch {
            return false; // never mapped while a stack was captured
        } else {
            entry.module.last_epoch = Some(epoch - 1);
        }
        true
    });
    let first = history.loader_counts.is_none();
    if appeared && !add {
        return; // not up to date: the next refresh looks again
    }
    history.loader_counts = Some(counts);
    let known = history.loaded_keys();
    for object in &details {
        let key = (object.load_bias, name_hash(object.loader_name.as_bytes()));
        if known.binary_search(&key).is_err() {
            let History {
                entries,
                dlopen_names,
                ..
            } = &mut *history;
            add_or_reuse(entries, dlopen_names, object, epoch);
        }
    }
    if first {
        let ranges: Vec<(u64, u64)> = details
            .iter()
            .flat_map(|object| object.ranges.iter().copied())
            .collect();
        PERMANENT.publish(&ranges);
    }
}

/// What identifies a loaded object: its load bias and a hash of the name
/// the loader knows it by.
type Key = (u64, u64);

fn name_hash(name: &[u8]) -> u64 {
    name.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The keys of every object loaded now, sorted; read without parsing the
/// objects or copying their names.
fn loaded_keys() -> Vec<Key> {
    unsafe extern "C" fn collect(
        info: *mut libc::dl_phdr_info,
        _: usize,
        out: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid entry whose name, if not null,
        // is a NUL-terminated string; `out` is the vector below.
        unsafe {
            let info = &*info;
            let mut name = if info.dlpi_name.is_null() {
                &[][..]
            } else {
                CStr::from_ptr(info.dlpi_name).to_bytes()
            };
            let executable;
            if name.is_empty() {
                // findshlibs names the program by its path, as [`loaded_now`] sees it.
                executable = main_executable();
                name = executable.as_bytes();
            }
            (*out.cast::<Vec<Key>>()).push((info.dlpi_addr, name_hash(name)));
        }
        0
    }
    let mut keys: Vec<Key> = Vec::with_capacity(64);
    // SAFETY: a valid callback and a pointer to a live vector.
    unsafe { libc::dl_iterate_phdr(Some(collect), (&raw mut keys).cast()) };
    keys.sort_unstable();
    keys
}

fn add_or_reuse(
    entries: &mut Vec<Entry>,
    dlopen_names: &[(String, String)],
    object: &Loaded,
    epoch: u32,
) {
    let reuse = (0..entries.len())
        .rev()
        .find(|&index| reusable(entries, index, object));
    match reuse {
        Some(index) => entries[index].module.last_epoch = None,
        None => entries.push(Entry {
            module: Module {
                path: absolute_path(&object.loader_name, dlopen_names),
                build_id: object.build_id.clone(),
                load_bias: object.load_bias,
                ranges: object.ranges.clone(),
                first_epoch: epoch,
                last_epoch: None,
            },
            loader_name: object.loader_name.clone(),
        }),
    }
}

/// Call before the real `dlclose`: if a stack was captured in this epoch,
/// records the map as it still is and starts a new epoch for the stacks
/// captured from now on.
pub fn before_dlclose() {
    // Without a stack captured in this epoch, objects loaded and unloaded
    // in it need no entry: the map is brought up to date after the unload.
    if epoch_used(current_epoch()) {
        refresh();
        let _history = HISTORY.lock(); // one dlclose at a time decides
        let epoch = current_epoch();
        if epoch_used(epoch) {
            EPOCH.store(epoch + 1, SeqCst);
        }
    }
    crate::backtrace::invalidate();
}

/// Call after the real `dlclose`: closes the epochs of unloaded objects.
pub fn after_dlclose() {
    // A capture racing with the unload may have cached rules for the
    // object's old addresses.
    crate::backtrace::invalidate();
    update(epoch_used(current_epoch()));
}

/// The full history, refreshed first.
pub fn snapshot() -> Vec<Module> {
    refresh();
    HISTORY
        .lock()
        .entries
        .iter()
        .map(|entry| entry.module.clone())
        .collect()
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
