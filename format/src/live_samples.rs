//! The live samples of a dump, one by one: which stack each is counted in,
//! which thread allocated it, when it was born, and its size.
//!
//! A live sample's identity within its process is (thread, birth): the shim
//! gives each thread's samples strictly increasing births (a sample born in
//! the same nanosecond as the thread's previous one is born a nanosecond
//! later), so two dumps of one process
//! ([`Process::id`](crate::Process::id)) can tell which live samples they
//! share.
//!
//! On the wire the samples are columns, in birth order, each birth as its
//! distance from the previous one: a sample costs about ten bytes where
//! whole records would cost twice that. The model keeps whole records.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One sampled object still live at the dump.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveSample {
    /// Index in [`Dump::stacks`](crate::Dump::stacks) of the stack (and
    /// thread record) it is counted in.
    pub stack: u32,
    /// The [`ThreadInfo::serial`](crate::ThreadInfo::serial) of the thread
    /// that allocated it (its stack's record may hold several threads'
    /// samples, "other threads").
    pub thread: u32,
    /// When it was allocated: nanoseconds since the profiler's start
    /// ([`Process::start_monotonic_ns`](crate::Process::start_monotonic_ns)).
    pub birth_ns: u64,
    /// Requested bytes.
    pub size: u64,
    /// Usable bytes as the allocator reported them, or 0 when not known.
    pub usable: u64,
}

impl LiveSample {
    /// Its identity within its process.
    pub fn identity(&self) -> (u32, u64) {
        (self.thread, self.birth_ns)
    }
}

/// The wire layout: one column per field, births as increments.
#[derive(Serialize, Deserialize)]
struct Columns {
    stack: Vec<u32>,
    thread: Vec<u32>,
    birth_step_ns: Vec<u64>,
    size: Vec<u64>,
    /// Usable bytes beyond the request, plus one; 0 when not known.
    slack: Vec<u64>,
}

/// Serialize the samples as [`Columns`], sorted by birth.
pub(crate) fn serialize<S: Serializer>(
    samples: &[LiveSample],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(|s| (s.birth_ns, s.thread, s.stack));
    let mut previous = 0;
    let columns = Columns {
        stack: sorted.iter().map(|s| s.stack).collect(),
        thread: sorted.iter().map(|s| s.thread).collect(),
        birth_step_ns: sorted
            .iter()
            .map(|s| {
                let step = s.birth_ns - previous;
                previous = s.birth_ns;
                step
            })
            .collect(),
        size: sorted.iter().map(|s| s.size).collect(),
        slack: sorted
            .iter()
            .map(|s| match s.usable.checked_sub(s.size) {
                Some(slack) if s.usable != 0 => slack.saturating_add(1),
                _ => 0,
            })
            .collect(),
    };
    columns.serialize(serializer)
}

/// Deserialize [`Columns`] back into samples: the columns must be equally
/// long, the births must not overflow, and samples born in the same
/// nanosecond come in the order [`serialize`] writes (thread, then stack).
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<LiveSample>, D::Error> {
    let columns = Columns::deserialize(deserializer)?;
    let count = columns.stack.len();
    let lengths = [
        columns.thread.len(),
        columns.birth_step_ns.len(),
        columns.size.len(),
        columns.slack.len(),
    ];
    if lengths.iter().any(|&len| len != count) {
        return Err(D::Error::custom("live-sample columns of different lengths"));
    }
    let mut birth = 0u64;
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        birth = birth
            .checked_add(columns.birth_step_ns[i])
            .ok_or_else(|| D::Error::custom("a live sample's birth overflows"))?;
        let size = columns.size[i];
        let usable = match columns.slack[i] {
            0 => 0,
            slack => size
                .checked_add(slack - 1)
                .ok_or_else(|| D::Error::custom("a live sample's usable size overflows"))?,
        };
        let sample = LiveSample {
            stack: columns.stack[i],
            thread: columns.thread[i],
            birth_ns: birth,
            size,
            usable,
        };
        if samples.last().is_some_and(|last: &LiveSample| {
            (last.birth_ns, last.thread, last.stack) > (birth, sample.thread, sample.stack)
        }) {
            return Err(D::Error::custom("live samples out of order"));
        }
        samples.push(sample);
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::config;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Holder(
        #[serde(serialize_with = "serialize", deserialize_with = "deserialize")] Vec<LiveSample>,
    );

    fn sample(stack: u32, thread: u32, birth_ns: u64, size: u64, usable: u64) -> LiveSample {
        LiveSample {
            stack,
            thread,
            birth_ns,
            size,
            usable,
        }
    }

    #[test]
    fn samples_travel_as_columns_in_birth_order() {
        let samples = vec![
            sample(3, 2, 9_000_000_000_000, 1 << 20, 1 << 20),
            sample(0, 1, 1_000, 24, 24),
            sample(1, 1, 1_500, 0, 24),
            sample(2, 1, 1_700, 100, 0),
        ];
        let bytes = bincode::serde::encode_to_vec(Holder(samples.clone()), config()).unwrap();
        let (Holder(back), _): (Holder, usize) =
            bincode::serde::decode_from_slice(&bytes, config()).unwrap();
        let mut sorted = samples;
        sorted.sort_by_key(|s| s.birth_ns);
        assert_eq!(back, sorted);
        // A few bytes a sample: the births are steps, the usable sizes slacks.
        assert!(bytes.len() <= 4 * 12, "{} bytes", bytes.len());
    }

    #[test]
    fn columns_of_different_lengths_are_an_error() {
        let columns = Columns {
            stack: vec![0, 0],
            thread: vec![1],
            birth_step_ns: vec![1, 2],
            size: vec![1, 2],
            slack: vec![0, 0],
        };
        let bytes = bincode::serde::encode_to_vec(&columns, config()).unwrap();
        let decoded: Result<(Holder, usize), _> =
            bincode::serde::decode_from_slice(&bytes, config());
        assert!(decoded.is_err());
        let overflowing = Columns {
            stack: vec![0, 0],
            thread: vec![1, 1],
            birth_step_ns: vec![u64::MAX, 2],
            size: vec![1, 2],
            slack: vec![0, 0],
        };
        let bytes = bincode::serde::encode_to_vec(&overflowing, config()).unwrap();
        let decoded: Result<(Holder, usize), _> =
            bincode::serde::decode_from_slice(&bytes, config());
        assert!(decoded.is_err());
    }
}
