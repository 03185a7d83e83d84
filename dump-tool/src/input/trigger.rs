//! What a dump says about itself, in the words reports use.
//!
//! Owns the names of the triggers and the words for where a process ran;
//! plain functions over the format's types.

use heapsample_format::{Dump, Trigger};

/// The trigger's name in reports (`final`, `interval`, ...).
pub fn trigger_name(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::Final => "final",
        Trigger::Interval => "interval",
        Trigger::HighWater => "high-water",
        Trigger::Manual => "manual",
        Trigger::Signal => "signal",
        Trigger::MemoryLimit => "memory-limit",
        Trigger::Time => "time",
    }
}

/// Where the dump's process ran, in one line (`pid 4242 on host web-1,
/// pid 1 in its PID namespace, cgroup /kubepods/…, aarch64`); None for a
/// dump that does not say (before format 5, foreign profiles).
pub fn where_it_ran(dump: &Dump) -> Option<String> {
    let context = &dump.context;
    if context.architecture.is_empty() {
        return None;
    }
    let mut words = format!("pid {}", dump.pid);
    if !context.hostname.is_empty() {
        words.push_str(&format!(" on host {}", context.hostname));
    }
    if let Some(inner) = context.ns_pids.last().filter(|_| context.ns_pids.len() > 1) {
        words.push_str(&format!(", pid {inner} in its PID namespace"));
    }
    if !context.cgroup.is_empty() && context.cgroup != "/" {
        words.push_str(&format!(", cgroup {}", context.cgroup));
    }
    words.push_str(&format!(", {}", context.architecture));
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heapsample_format::ProcessContext;

    #[test]
    fn a_container_process_is_named_by_both_pids_and_its_cgroup() {
        let mut dump = heapsample_format::testing::dump();
        assert_eq!(where_it_ran(&dump), None);
        dump.pid = 4242;
        dump.context = ProcessContext {
            architecture: "x86_64".into(),
            hostname: "web-1".into(),
            cgroup: "/kubepods/pod-7".into(),
            ns_pids: vec![4242, 1],
            ..ProcessContext::default()
        };
        assert_eq!(
            where_it_ran(&dump).unwrap(),
            "pid 4242 on host web-1, pid 1 in its PID namespace, cgroup /kubepods/pod-7, x86_64"
        );
    }
}
