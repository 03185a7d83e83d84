//! The module map: which loaded object each frame of a dump's stacks lies
//! in, however often objects were loaded, unloaded and replaced.
//!
//! Owns the objects loaded with the program (the *permanent* ones, never
//! unloaded: a frame in them needs no id, and their code ranges are
//! readable inside malloc), the details (path, build-id, load bias, code
//! ranges) of the object instances `object_ids` hands out, the
//! *generation* that tells threads when a stack they remember must be
//! looked up again, and the module contexts a dump is written with.
//!
//! A stack's key holds the instance ids of its frames outside the permanent
//! objects ([`objects_of`]): the same library at the same place is one
//! instance however often it was loaded, so a plugin loop makes no new
//! stacks and no new instances. A dump names each distinct set of ids a
//! *context* (the format's epoch: 0 is the permanent objects alone), and
//! each instance's module covers the contexts whose stacks have frames in
//! it, so a frame symbolizes against the object it was captured in. A
//! `dlclose` costs O(1) unless an instance new since the last one must be
//! resolved (one walk of the loaded objects, while it is still loaded);
//! memory and dump size grow with the instances stacks refer to (at most
//! `object_ids::MAX_OBJECTS`), never with the number of loads. Frames in
//! code no loaded object holds (generated at run time), or in instances
//! past that bound, are marked [`UNRESOLVED`]: they stay unsymbolized rather
//! than being taken for another object.
//!
//! Paths are absolute: a relative name the program gave `dlopen` is
//! resolved against the working directory at the time of the call
//! ([`note_dlopen`]), other relative names against the working directory
//! when the instance is resolved.
//!
//! Limits: an object loaded before the profiler's constructor ran is taken
//! for permanent; an object glibc unloads itself (without the program's
//! `dlclose`, as `iconv` may) does not start a new generation, so a thread
//! may take a frame of what is later loaded at its place for it.
//!
//! Runs inside malloc only in [`objects_of`] (through [`LazyObjectIds`])
//! and [`generation`] (atomics, `_dl_find_object`, no lock). Everything
//! else walks `dl_iterate_phdr` (the loader lock) and allocates, outside
//! malloc.

use core::ffi::CStr;
use core::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
    Ordering::SeqCst,
};
use std::collections::BTreeMap;
use std::sync::OnceLock;

use findshlibs::{Segment, SharedLibrary, SharedLibraryId, TargetSharedLibrary};
use heapsample_format::Module;

use crate::object_ids;
use crate::spin_lock::{LockClass, SpinLock};

/// The object id of frames no instance holds (sorts after every real id).
pub const UNRESOLVED: u32 = u32::MAX;
/// Distinct object ids a stack keeps; frames in further objects count as
/// [`UNRESOLVED`].
pub const MAX_OBJECTS_PER_STACK: usize = 16;

/// Advanced at a `dlclose` once a stack with frames outside the permanent
/// objects was looked up in the current generation: a thread's memory of
/// such a stack is only good within the generation it was made in.
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// Set when such a stack is looked up; cleared when the generation moves.
static GENERATION_USED: AtomicBool = AtomicBool::new(false);
static HISTORY: SpinLock<History> = SpinLock::new(LockClass::Modules, History::new());
/// Instance ids below this were tried by [`refresh`] (read without the lock
/// so that a `dlclose` with nothing new to resolve costs three loads).
static RESOLVED_UP_TO: AtomicU32 = AtomicU32::new(0);
/// Set once the first refresh recorded the permanent objects.
static STARTED: AtomicBool = AtomicBool::new(false);
/// At most this many relative `dlopen` names are remembered (the oldest go).
const MAX_DLOPEN_NAMES: usize = 256;

struct History {
    /// The objects loaded with the program; empty before the first refresh.
    permanent: Vec<Module>,
    /// Per instance id below `RESOLVED_UP_TO`: its module (epochs unset), or
    /// None if it was gone before it could be resolved.
    instances: Vec<Option<Module>>,
    /// Relative names given to `dlopen`, with what they meant then.
    dlopen_names: Vec<(String, String)>,
}

impl History {
    const fn new() -> Self {
        History {
            permanent: Vec::new(),
            instances: Vec::new(),
            dlopen_names: Vec::new(),
        }
    }
}

/// The current generation.
#[inline]
pub fn generation() -> u32 {
    GENERATION.load(SeqCst)
}

/// A stack's object ids: one per distinct object outside the permanent ones
/// its frames lie in, sorted; at most [`MAX_OBJECTS_PER_STACK`].
pub struct ObjectIds {
    ids: [u32; MAX_OBJECTS_PER_STACK],
    len: usize,
}

impl ObjectIds {
    /// None yet.
    pub const fn new() -> Self {
        ObjectIds {
            ids: [0; MAX_OBJECTS_PER_STACK],
            len: 0,
        }
    }

    /// The ids, sorted.
    pub fn as_slice(&self) -> &[u32] {
        &self.ids[..self.len]
    }

    fn add(&mut self, id: u32) {
        let known = &self.ids[..self.len];
        if known.contains(&id) {
            return;
        }
        if self.len == MAX_OBJECTS_PER_STACK {
            self.ids[MAX_OBJECTS_PER_STACK - 1] = UNRESOLVED;
        } else {
            self.ids[self.len] = id;
            self.len += 1;
        }
        self.ids[..self.len].sort_unstable();
    }
}

impl Default for ObjectIds {
    fn default() -> Self {
        Self::new()
    }
}

/// The object ids of a stack just captured, looked up when the stack table
/// asks for them (a stack it knows whose frames all lie in the permanent
/// objects is found without them).
pub struct LazyObjectIds<'a> {
    frames: &'a [u64],
    ids: Option<ObjectIds>,
}

impl<'a> LazyObjectIds<'a> {
    /// The ids of `frames`, not looked up yet.
    pub fn new(frames: &'a [u64]) -> Self {
        LazyObjectIds { frames, ids: None }
    }
}

impl crate::stack_table::Objects for LazyObjectIds<'_> {
    fn ids(&mut self) -> &[u32] {
        let frames = self.frames;
        self.ids
            .get_or_insert_with(|| objects_of(frames))
            .as_slice()
    }
}

/// The object ids of a stack just captured ([`ObjectIds`]). If a frame lies
/// outside the permanent objects, the generation is marked used, so the
/// next `dlclose` starts a new one.
pub fn objects_of(frames: &[u64]) -> ObjectIds {
    let mut ids = ObjectIds::new();
    let mut last: Option<(u32, core::ops::Range<u64>)> = None;
    // Consecutive frames mostly lie in one object: try its range first.
    let mut permanent = 0..0;
    for &frame in frames {
        if permanent.contains(&frame) {
            continue;
        }
        if let Some(range) = PERMANENT.range_of(frame) {
            permanent = range;
            continue;
        }
        let id = match &last {
            Some((id, range)) if range.contains(&frame) => *id,
            _ => match object_ids::id_of(frame) {
                Some((id, range)) => {
                    last = Some((id, range));
                    id
                }
                None => UNRESOLVED,
            },
        };
        ids.add(id);
    }
    if ids.len > 0 && !GENERATION_USED.load(Relaxed) {
        GENERATION_USED.store(true, SeqCst);
    }
    ids
}

/// Code ranges of the objects loaded with the program (never unloaded),
/// sorted, readable inside malloc without a lock; written once, by the
/// first refresh. Until then no address counts as permanent.
struct PermanentRanges {
    count: AtomicU32,
    ranges: [(AtomicU64, AtomicU64); Self::MAX],
}

impl PermanentRanges {
    const MAX: usize = 256;

    /// The range that holds `address`, if one does.
    fn range_of(&self, address: u64) -> Option<core::ops::Range<u64>> {
        let ranges = &self.ranges[..self.count.load(Acquire) as usize];
        // The last range starting at or below the address.
        let after = ranges.partition_point(|(start, _)| start.load(Relaxed) <= address);
        let (start, end) = ranges.get(after.checked_sub(1)?)?;
        let range = start.load(Relaxed)..end.load(Relaxed);
        range.contains(&address).then_some(range)
    }

    fn publish(&self, ranges: &mut [(u64, u64)]) {
        ranges.sort_unstable();
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

/// A loaded object as the loader lists it.
struct Loaded {
    loader_name: String,
    build_id: Vec<u8>,
    load_bias: u64,
    ranges: Vec<(u64, u64)>,
    /// `object_ids`' key of the object (0 if `_dl_find_object` does not
    /// know it).
    key: u64,
}

fn loaded_now() -> Vec<Loaded> {
    let mut loaded = Vec::new();
    TargetSharedLibrary::each(|library| {
        let build_id = match library.id() {
            Some(SharedLibraryId::GnuBuildId(bytes)) => bytes,
            _ => Vec::new(),
        };
        let ranges: Vec<(u64, u64)> = library
            .segments()
            .filter(|segment| segment.is_code())
            .map(|segment| {
                let start = segment.actual_virtual_memory_address(library).0 as u64;
                (start, start + segment.len() as u64)
            })
            .collect();
        let key = ranges
            .first()
            .and_then(|&(start, _)| heapsample_unwind::object_key(start))
            .map_or(0, |object| object.key);
        loaded.push(Loaded {
            loader_name: library.name().to_string_lossy().into_owned(),
            build_id,
            load_bias: library.virtual_memory_bias().0 as u64,
            ranges,
            key,
        });
    });
    loaded
}

impl Loaded {
    fn module(&self, dlopen_names: &[(String, String)]) -> Module {
        Module {
            path: absolute_path(&self.loader_name, dlopen_names),
            build_id: self.build_id.clone(),
            load_bias: self.load_bias,
            ranges: self.ranges.clone(),
            first_epoch: 0,
            last_epoch: None,
        }
    }
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

/// The program is about to `dlopen(name)` (call at every such call):
/// remember what a relative name means in the current working directory
/// (the loader keeps it relative).
pub fn note_dlopen(name: &CStr) {
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

/// Bring the map up to date: the first call records the objects loaded
/// with the program; every call resolves the instances handed out since
/// the last one (their objects are loaded: nothing unloads one without a
/// `dlclose`, which refreshes first). Cheap when there is nothing new.
pub fn refresh() {
    if STARTED.load(Acquire) && object_ids::count() == RESOLVED_UP_TO.load(Acquire) {
        return;
    }
    let loaded = loaded_now();
    let mut history = HISTORY.lock();
    if !STARTED.load(Acquire) {
        let mut ranges: Vec<(u64, u64)> = loaded
            .iter()
            .flat_map(|object| object.ranges.iter().copied())
            .collect();
        PERMANENT.publish(&mut ranges);
        let dlopen_names = std::mem::take(&mut history.dlopen_names);
        history.permanent = loaded.iter().map(|o| o.module(&dlopen_names)).collect();
        history.dlopen_names = dlopen_names;
        STARTED.store(true, Release);
    }
    resolve_instances(&mut history, &loaded);
}

/// Resolve each instance handed out since the last call against the
/// objects loaded now (stop at one not filled in yet: a later call does it).
fn resolve_instances(history: &mut History, loaded: &[Loaded]) {
    let History {
        instances,
        dlopen_names,
        ..
    } = history;
    for id in instances.len() as u32..object_ids::count() {
        let Some((key, range)) = object_ids::get(id) else {
            break;
        };
        let module = loaded
            .iter()
            .find(|object| {
                object.key == key
                    && object
                        .ranges
                        .iter()
                        .all(|&(start, end)| start >= range.start && end <= range.end)
            })
            .map(|object| object.module(dlopen_names));
        instances.push(module);
    }
    RESOLVED_UP_TO.store(instances.len() as u32, Release);
}

/// Call before the real `dlclose`: resolve new instances while their object
/// is still loaded, and if a stack with frames outside the permanent
/// objects was looked up in this generation, start a new one, so that no
/// thread takes a frame in an object loaded later at the same place for
/// the one it remembers.
pub fn before_dlclose() {
    refresh();
    if GENERATION_USED.swap(false, SeqCst) {
        GENERATION.fetch_add(1, SeqCst);
    }
    crate::backtrace::invalidate();
}

/// Call after the real `dlclose`.
pub fn after_dlclose() {
    // A capture racing with the unload may have cached rules for the
    // object's old addresses.
    crate::backtrace::invalidate();
}

/// The module contexts of one dump: a number for each distinct set of
/// object ids its stacks have (the stacks' epoch), and the modules with the
/// contexts they cover.
pub struct Contexts {
    /// Context number - 1 of each set of ids met so far.
    numbers: BTreeMap<Vec<u32>, u32>,
}

impl Contexts {
    /// No context yet; brings the map up to date.
    pub fn new() -> Self {
        refresh();
        Contexts {
            numbers: BTreeMap::new(),
        }
    }

    /// The context of a stack with these object ids (0 for none).
    pub fn number(&mut self, objects: &[u64]) -> u32 {
        if objects.is_empty() {
            return 0;
        }
        let ids: Vec<u32> = objects.iter().map(|&id| id as u32).collect();
        let next = self.numbers.len() as u32 + 1;
        *self.numbers.entry(ids).or_insert(next)
    }

    /// The permanent objects (in every context), then each resolved
    /// instance once per run of consecutive contexts that hold it.
    pub fn modules(&self) -> Vec<Module> {
        let mut contexts_of: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (ids, &number) in &self.numbers {
            for &id in ids.iter().filter(|&&id| id != UNRESOLVED) {
                contexts_of.entry(id).or_default().push(number);
            }
        }
        let history = HISTORY.lock();
        let mut modules = history.permanent.clone();
        for (id, mut numbers) in contexts_of {
            let Some(Some(module)) = history.instances.get(id as usize) else {
                continue;
            };
            numbers.sort_unstable();
            for run in numbers.chunk_by(|a, b| b - a == 1) {
                modules.push(Module {
                    first_epoch: run[0],
                    last_epoch: Some(run[run.len() - 1]),
                    ..module.clone()
                });
            }
        }
        modules
    }
}

impl Default for Contexts {
    fn default() -> Self {
        Self::new()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_are_sorted_distinct_and_bounded() {
        let mut ids = ObjectIds::new();
        for id in [5, 3, 5, UNRESOLVED, 3] {
            ids.add(id);
        }
        assert_eq!(ids.as_slice(), [3, 5, UNRESOLVED]);
        let mut many = ObjectIds::new();
        for id in 0..40 {
            many.add(id);
        }
        assert_eq!(many.as_slice().len(), MAX_OBJECTS_PER_STACK);
        assert_eq!(many.as_slice().last(), Some(&UNRESOLVED));
    }

    #[test]
    fn permanent_ranges_are_found_by_bisection() {
        let ranges = PermanentRanges {
            count: AtomicU32::new(0),
            ranges: [const { (AtomicU64::new(0), AtomicU64::new(0)) }; PermanentRanges::MAX],
        };
        assert_eq!(ranges.range_of(5), None);
        ranges.publish(&mut [(100, 200), (10, 20), (300, 301)]);
        for (address, inside) in [
            (9, None),
            (10, Some(10..20)),
            (19, Some(10..20)),
            (20, None),
        ] {
            assert_eq!(ranges.range_of(address), inside, "{address}");
        }
        assert_eq!(ranges.range_of(150), Some(100..200));
        assert_eq!(ranges.range_of(300), Some(300..301));
        assert_eq!(
            (ranges.range_of(301), ranges.range_of(u64::MAX)),
            (None, None)
        );
    }
}
