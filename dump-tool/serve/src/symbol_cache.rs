//! One symbol table shared by every request (views and series alike): an
//! address is symbolized once for the life of the server, and the table
//! starts over when it grows past a bound, so a long-running server's
//! memory stays bounded.

use heapdiff::Result;
use heapdiff::input::Input;
use heapdiff::pipeline::{Loaded, Series, Session, Settings};
use heapdiff::symbols::LocationTable;
use std::sync::Mutex;

/// The shared location table and its bound.
pub struct SymbolCache {
    table: Mutex<LocationTable>,
    max_locations: usize,
}

impl SymbolCache {
    /// An empty cache dropped whenever it holds more than `max_locations`.
    pub fn new(max_locations: usize) -> SymbolCache {
        SymbolCache {
            table: Mutex::new(LocationTable::default()),
            max_locations,
        }
    }

    /// How many addresses the table holds.
    pub fn locations(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .locations
            .len()
    }

    /// The shared table, locked for one session or series, started over
    /// first if it grew past the bound.
    fn bounded(&self) -> std::sync::MutexGuard<'_, LocationTable> {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if table.locations.len() > self.max_locations {
            *table = LocationTable::default();
        }
        table
    }

    /// Open the session of `new` (and `base`) in the shared table and run
    /// `f` on it; one session at a time. Notices go to stderr.
    pub fn with_session<T>(
        &self,
        new: Loaded,
        base: Option<Loaded>,
        settings: &Settings,
        f: impl FnOnce(&Session) -> T,
    ) -> Result<T> {
        let mut table = self.bounded();
        let session = Session::open(
            std::mem::take(&mut *table),
            new,
            base,
            settings,
            &mut |notice| eprintln!("heapdiff: {notice}"),
        )?;
        let result = f(&session);
        *table = session.into_table();
        Ok(result)
    }

    /// Build the series of `inputs` (oldest first) in the shared table and
    /// run `f` on it; one session or series at a time.
    pub fn with_series<T>(
        &self,
        inputs: Vec<Input>,
        settings: &Settings,
        f: impl FnOnce(&Series) -> T,
    ) -> T {
        let mut table = self.bounded();
        let series = Series::open(
            std::mem::take(&mut *table),
            inputs,
            settings,
            &mut |notice| eprintln!("heapdiff: {notice}"),
        );
        let result = f(&series);
        *table = series.into_table();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heapdiff::input::Input;
    use heapdiff::model::Metric;
    use heapdiff::model::folding::folded;
    use heapsample_format::{Dump, Stack, Trigger, legacy_weights};
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    /// A dump of one stack per frame list (addresses outside any module).
    fn loaded(name: &str, stacks: &[&[u64]]) -> Loaded {
        let stacks = stacks
            .iter()
            .map(|frames| Stack {
                frames: frames.to_vec(),
                thread: 1,
                live_objects: 1,
                live_bytes: 8,
                alloc_objects: 1,
                alloc_bytes: 8,
                live: legacy_weights(1, 8, 1),
                alloc: legacy_weights(1, 8, 1),
                ..Stack::default()
            })
            .collect();
        let dump = Dump {
            writer: "test".into(),
            pid: 1,
            executable: "/x".into(),
            time_unix_ns: 0,
            trigger: Trigger::Final,
            lg_sample_period: 0,
            stacks,
            ..heapsample_format::testing::dump()
        };
        let input = Input {
            path: PathBuf::from(name),
            dump,
            version: heapsample_format::VERSION,
            foreign: None,
        };
        Loaded::one(name.to_string(), input)
    }

    fn folded_of(session: &Session) -> BTreeMap<String, f64> {
        let view = session.view();
        folded(&view.new.profile, view.table, Metric::InuseSpace)
    }

    #[test]
    fn the_table_is_kept_until_it_grows_past_the_bound_then_starts_over() {
        let cache = SymbolCache::new(3);
        let settings = Settings::default();
        let big = || loaded("big", &[&[0x10, 0x20, 0x30], &[0x40, 0x50]]);
        let small = || loaded("small", &[&[0x10, 0x60]]);
        cache.with_session(big(), None, &settings, |_| ()).unwrap();
        assert_eq!(cache.locations(), 5);
        // Past the bound: the next session starts from an empty table, and
        // its view is what a fresh session shows.
        let reset = cache
            .with_session(small(), None, &settings, folded_of)
            .unwrap();
        assert_eq!(cache.locations(), 2);
        let fresh = SymbolCache::new(100)
            .with_session(small(), None, &settings, folded_of)
            .unwrap();
        assert_eq!(reset, fresh);
        assert_eq!(reset.get("0x60;0x10"), Some(&8.0));
        // Within the bound the table is kept: nothing new to intern.
        cache
            .with_session(small(), None, &settings, |_| ())
            .unwrap();
        assert_eq!(cache.locations(), 2);
        cache.with_session(big(), None, &settings, |_| ()).unwrap();
        assert_eq!(cache.locations(), 6, "0x10 is known already");
    }
}
