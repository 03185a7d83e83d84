//! Pages, profiles and growth reports already built, kept for the next
//! request that names the same dumps in the same versions: a second visit
//! to a large dump costs a copy, not a symbolization and a build.
//!
//! Bounded in bytes, least recently used dropped first; a value larger than
//! a quarter of the bound is not kept. Keys name the dumps' ids and file
//! versions (see `work::cache_key`), so a rewritten dump is built anew, and
//! a kept value is sent only while its dumps still open below their roots
//! (`work::kept`).

use axum::body::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;

/// Built responses by key, within a byte bound.
pub struct BuiltCache {
    inner: Mutex<Inner>,
    max_bytes: usize,
}

#[derive(Default)]
struct Inner {
    values: HashMap<String, (Bytes, u64)>,
    bytes: usize,
    clock: u64,
}

impl BuiltCache {
    pub fn new(max_bytes: usize) -> BuiltCache {
        BuiltCache {
            inner: Mutex::new(Inner::default()),
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value kept under `key`, now the most recently used.
    pub fn get(&self, key: &str) -> Option<Bytes> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let (value, used) = inner.values.get_mut(key)?;
        *used = now;
        Some(value.clone())
    }

    /// Keep `value` under `key`, dropping the least recently used values
    /// until the bound holds.
    pub fn put(&self, key: String, value: Bytes) {
        if value.len() > self.max_bytes / 4 {
            return;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        inner.bytes += value.len();
        if let Some((old, _)) = inner.values.insert(key, (value, now)) {
            inner.bytes -= old.len();
        }
        while inner.bytes > self.max_bytes {
            let Some(oldest) = inner
                .values
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            if let Some((old, _)) = inner.values.remove(&oldest) {
                inner.bytes -= old.len();
            }
        }
    }

    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_goes_first_and_the_bound_holds() {
        let cache = BuiltCache::new(40);
        cache.put("a".into(), Bytes::from(vec![0; 10]));
        cache.put("b".into(), Bytes::from(vec![0; 10]));
        cache.put("c".into(), Bytes::from(vec![0; 10]));
        assert!(
            cache.get("a").is_some(),
            "a used again: b is now the oldest"
        );
        cache.put("d".into(), Bytes::from(vec![0; 10]));
        cache.put("e".into(), Bytes::from(vec![0; 10]));
        assert!(cache.get("b").is_none());
        assert!(cache.get("a").is_some() && cache.get("e").is_some());
        assert!(cache.bytes() <= 40);
        cache.put("huge".into(), Bytes::from(vec![0; 11]));
        assert!(cache.get("huge").is_none(), "over a quarter of the bound");
        cache.put("a".into(), Bytes::from(vec![0; 5]));
        assert_eq!(cache.get("a").unwrap().len(), 5, "replaced");
    }
}
