//! Small ids for loaded objects at their places, handed out inside malloc.
//!
//! Owns a bounded, insert-only table of *object instances*: an object
//! mapped at one place, as glibc's lock-free `_dl_find_object` tells them
//! apart (`heapsample_unwind::object_key`: the mapping, the `.eh_frame_hdr`
//! address and the name). The same library loaded again at the same place
//! is the same instance, however often it was loaded; another library at
//! that place is another instance. A stack's key holds the ids of the
//! instances its frames lie in (`modules::objects_of`), so a frame keeps
//! its meaning after its object is unloaded and the address reused, and
//! `modules` resolves each id to its path and build-id while the object is
//! still loaded.
//!
//! Runs inside malloc (a sample's first capture of a stack): no allocation,
//! no lock. Lookups and inserts are atomics on static tables; two threads
//! inserting one instance at once may give it two ids, which only costs an
//! entry. At most [`MAX_OBJECTS`] instances: later ones get no id.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Instances the table can hold.
pub const MAX_OBJECTS: usize = 4096;
const INDEX_SLOTS: usize = 2 * MAX_OBJECTS;
/// An index slot a thread is filling in.
const CLAIMED: u32 = u32::MAX;

/// One object instance.
struct Instance {
    key: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
}

/// Id + 1 of an instance (0: empty, [`CLAIMED`]: being filled in).
static INDEX: [AtomicU32; INDEX_SLOTS] = [const { AtomicU32::new(0) }; INDEX_SLOTS];
static INSTANCES: [Instance; MAX_OBJECTS] = [const {
    Instance {
        key: AtomicU64::new(0),
        start: AtomicU64::new(0),
        end: AtomicU64::new(0),
    }
}; MAX_OBJECTS];
/// Ids handed out (may pass [`MAX_OBJECTS`] by the number of racing
/// inserters; those get none).
static COUNT: AtomicU32 = AtomicU32::new(0);

/// The id of the object instance that holds `address`, given one if new;
/// None if no loaded object holds it (code generated at run time) or the
/// table is full.
pub fn id_of(address: u64) -> Option<(u32, core::ops::Range<u64>)> {
    let object = heapsample_unwind::object_key(address)?;
    let id = find_or_insert(object.key, object.start, object.end)?;
    Some((id, object.start..object.end))
}

fn find_or_insert(key: u64, start: u64, end: u64) -> Option<u32> {
    let home = crate::sys::hash_word(key, INDEX_SLOTS.trailing_zeros());
    for step in 0..INDEX_SLOTS {
        let slot = &INDEX[(home + step) % INDEX_SLOTS];
        match slot.load(Ordering::Acquire) {
            0 if COUNT.load(Ordering::Relaxed) as usize >= MAX_OBJECTS => return None,
            0 => {
                if slot
                    .compare_exchange(0, CLAIMED, Ordering::Acquire, Ordering::Acquire)
                    .is_ok()
                {
                    return insert(slot, key, start, end);
                }
            }
            CLAIMED => {}
            id_plus_one => {
                let instance = &INSTANCES[(id_plus_one - 1) as usize];
                if instance.key.load(Ordering::Relaxed) == key
                    && instance.start.load(Ordering::Relaxed) == start
                {
                    return Some(id_plus_one - 1);
                }
            }
        }
    }
    None
}

/// Fill in a claimed index slot with a new instance.
fn insert(slot: &AtomicU32, key: u64, start: u64, end: u64) -> Option<u32> {
    let id = COUNT.fetch_add(1, Ordering::Relaxed);
    let Some(instance) = INSTANCES.get(id as usize) else {
        slot.store(0, Ordering::Release);
        return None;
    };
    instance.start.store(start, Ordering::Relaxed);
    instance.end.store(end, Ordering::Relaxed);
    instance.key.store(key, Ordering::Release);
    slot.store(id + 1, Ordering::Release);
    Some(id)
}

/// Ids handed out so far: every id below is in use (its instance may not
/// be filled in yet, see [`get`]).
pub fn count() -> u32 {
    COUNT.load(Ordering::Acquire).min(MAX_OBJECTS as u32)
}

/// Instance `id` as (key, mapping), once filled in.
pub fn get(id: u32) -> Option<(u64, core::ops::Range<u64>)> {
    let instance = INSTANCES.get(id as usize)?;
    let key = instance.key.load(Ordering::Acquire);
    (key != 0).then(|| {
        (
            key,
            instance.start.load(Ordering::Relaxed)..instance.end.load(Ordering::Relaxed),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objects_of_this_process_get_stable_ids() {
        assert!(heapsample_unwind::init());
        let in_test = the_objects_of_this_process_get_stable_ids as fn() as *const () as u64;
        let in_libc = libc::malloc as *const () as u64;
        let (a, range_a) = id_of(in_test).unwrap();
        let (b, range_b) = id_of(in_libc).unwrap();
        assert_ne!(a, b);
        assert!(range_a.contains(&in_test) && range_b.contains(&in_libc));
        assert_eq!(id_of(in_test + 1).map(|(id, _)| id), Some(a));
        assert_eq!(get(a).map(|(_, range)| range), Some(range_a));
        assert!(count() > a.max(b));
        let heap = Box::new(0u64);
        assert_eq!(id_of(&*heap as *const u64 as u64), None);
    }
}
