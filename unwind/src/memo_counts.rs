//! The counters of a thread's stack memo ([`crate::StackMemo`]), for tests
//! and benchmarks: the same on every architecture (always zero where the walk
//! keeps no memo). Plain data.

/// Counters of a [`StackMemo`](crate::StackMemo).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MemoCounts {
    /// Captures through the memo.
    pub captures: u64,
    /// Captures that reached a remembered frame state and started replaying.
    pub matches: u64,
    /// Replays stopped early because a remembered slot had changed.
    pub rejections: u64,
}
