//! What a dump says about itself, in the words reports use.
//!
//! Owns the names of the triggers; plain functions over the format's types.

use heapsample_format::Trigger;

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
