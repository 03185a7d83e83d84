//! The attach time of a dump of a process the profiler was attached to
//! (`heapsample attach`), carried in the dump's configuration string as one
//! more `key:value` item, so that dumps keep format version 3. Its in-use
//! values count only what was allocated since that time.

use crate::Dump;

/// The key of the attach time (nanoseconds since the Unix epoch) in
/// [`Dump::config`].
pub const ATTACHED_KEY: &str = "attached_unix_ns";

/// `config` with the attach time appended.
pub fn config_with_attach_time(config: &str, unix_ns: u64) -> String {
    if config.is_empty() {
        format!("{ATTACHED_KEY}:{unix_ns}")
    } else {
        format!("{config},{ATTACHED_KEY}:{unix_ns}")
    }
}

impl Dump {
    /// When the profiler was attached to the process, for a dump of an
    /// attached process (nanoseconds since the Unix epoch); `None` for a
    /// process profiled from its start.
    pub fn attached_unix_ns(&self) -> Option<u64> {
        self.config
            .split(',')
            .filter_map(|item| item.split_once(':'))
            .find(|(key, _)| *key == ATTACHED_KEY)
            .and_then(|(_, value)| value.parse().ok())
    }
}

impl Dump {
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

    #[test]
    fn the_attach_time_round_trips_through_the_config_string() {
        let mut dump = Dump {
            writer: String::new(),
            pid: 1,
            executable: String::new(),
            command_line: vec![],
            time_unix_ns: 0,
            trigger: crate::Trigger::Manual,
            seq: 0,
            trigger_seq: 0,
            lg_sample_period: 19,
            config: "prof:true".into(),
            modules: vec![],
            threads: vec![],
            stacks: vec![],
            totals: crate::Totals::default(),
        };
        assert_eq!(dump.attached_unix_ns(), None);
        assert_eq!(dump.attach_note(), None);
        dump.config = config_with_attach_time("prof:true,lg_prof_sample:19", 1_700_000_000_123);
        assert_eq!(dump.attached_unix_ns(), Some(1_700_000_000_123));
        dump.time_unix_ns = 1_700_000_000_123 + 2_500_000_000;
        assert!(
            dump.attach_note()
                .unwrap()
                .starts_with("attached 2.5 s before this dump")
        );
        assert_eq!(config_with_attach_time("", 5), format!("{ATTACHED_KEY}:5"));
    }
}
