//! Why a dump was written, and the letter of its file name.
//!
//! Plain data: no I/O.

use serde::{Deserialize, Serialize};

/// What made the shim write a dump. The letter is the one used in file names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trigger {
    /// At exit (`prof_final`): `<prefix>.<pid>.<seq>.f.prof`.
    Final,
    /// Every 2^`lg_prof_interval` bytes allocated: `...i<iseq>.prof`.
    Interval,
    /// A new high-water mark of the live heap (`prof_gdump`): `...u<useq>.prof`.
    HighWater,
    /// `heapsample_dump()` called by the program: `...m<mseq>.prof`.
    Manual,
    /// The configured signal (`prof_signal`): `...s<sseq>.prof`.
    Signal,
    /// The cgroup's memory use crossed `prof_oom_pct` of its limit:
    /// `...o<oseq>.prof`.
    MemoryLimit,
    /// Every `prof_interval_s` seconds of wall time: `...t<tseq>.prof`
    /// (format 5 on).
    Time,
}

impl Trigger {
    /// The letter used in automatic file names.
    pub fn letter(self) -> char {
        match self {
            Trigger::Final => 'f',
            Trigger::Interval => 'i',
            Trigger::HighWater => 'u',
            Trigger::Manual => 'm',
            Trigger::Signal => 's',
            Trigger::MemoryLimit => 'o',
            Trigger::Time => 't',
        }
    }
}
