//! The attach time of a dump of a process the profiler was attached to
//! (`heapsample attach`): from format 4 on a field of its own
//! ([`Process::attach_unix_ns`](crate::Process::attach_unix_ns)); a
//! version-3 dump carried it in its configuration string as one more
//! `key:value` item ([`ATTACHED_KEY`]), which the reader of version 3 turns
//! into that field. Its in-use values count only what was allocated since
//! that time.

use crate::Dump;

/// The key of the attach time (nanoseconds since the Unix epoch) in the
/// configuration string of a version-3 dump.
pub const ATTACHED_KEY: &str = "attached_unix_ns";

/// The attach time a configuration string (`key:value,...`) of a
/// version-3 dump records, if any.
pub(crate) fn attach_time_in_config(config: &str) -> Option<u64> {
    config
        .split(',')
        .filter_map(|item| item.split_once(':'))
        .find(|(key, _)| *key == ATTACHED_KEY)
        .and_then(|(_, value)| value.parse().ok())
}

impl Dump {
    /// When the profiler was attached to the process (nanoseconds since
    /// the Unix epoch); `None` for a process profiled from its start.
    pub fn attached_unix_ns(&self) -> Option<u64> {
        self.process.attach_unix_ns
    }

    /// For a dump of an attached process, what its in-use values mean, in
    /// one sentence for every view (text, JSON, pprof, the viewer); `None`
    /// for a process profiled from its start.
    pub fn attach_note(&self) -> Option<String> {
        let attached = self.attached_unix_ns()?;
        let before = self.time_unix_ns.saturating_sub(attached) as f64 / 1e9;
        Some(format!(
            "attached {before:.1} s before this dump: in-use counts what was allocated since the \
             attach and is still live, allocations and exact counters count from the attach"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dumps::sample_dump;

    #[test]
    fn the_attach_time_is_a_field_and_read_from_a_version_3_config() {
        let mut dump = sample_dump();
        dump.process.attach_unix_ns = None;
        assert_eq!(dump.attached_unix_ns(), None);
        assert_eq!(dump.attach_note(), None);
        dump.process.attach_unix_ns = Some(1_700_000_000_123);
        dump.time_unix_ns = 1_700_000_000_123 + 2_500_000_000;
        assert!(
            dump.attach_note()
                .unwrap()
                .starts_with("attached 2.5 s before this dump")
        );
        assert_eq!(
            attach_time_in_config("prof:true,attached_unix_ns:1700000000123,lg_prof_sample:19"),
            Some(1_700_000_000_123)
        );
        assert_eq!(attach_time_in_config("prof:true"), None);
        assert_eq!(attach_time_in_config("attached_unix_ns:x"), None);
    }
}
