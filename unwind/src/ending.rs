//! Why a capture ended, and what a capture returns.
//!
//! Owns [`Ending`] and [`Captured`]: plain data that every walk (the fast one,
//! the memo's replay and libgcc's fallback) reports, so a profiler can count
//! how many stacks were cut short and why. No memory access, no allocation.

/// Why a capture's walk stopped where it did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Ending {
    /// It reached the outermost frame (an undefined return address, or libgcc's
    /// terminal zero return address): the stack is whole.
    #[default]
    Outermost = 0,
    /// The frame buffer was full: outer frames may have followed (a stack that
    /// ends exactly at the buffer's size counts here too).
    FrameLimit = 1,
    /// It reached code without unwind information whose frame pointer leads to no
    /// caller (JIT code, or code built without CFI that keeps no frame pointer).
    NoUnwindInfo = 2,
    /// It reached code without unwind information on a stack whose bounds are not
    /// known (an alternate signal stack, a coroutine's), where a frame-pointer
    /// step could read outside the stack, so none is taken.
    UnknownStack = 3,
}

impl Ending {
    /// Every ending, in the order of their discriminants.
    pub const ALL: [Ending; 4] = [
        Ending::Outermost,
        Ending::FrameLimit,
        Ending::NoUnwindInfo,
        Ending::UnknownStack,
    ];

    /// The ending's position in [`Ending::ALL`].
    #[inline(always)]
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a capture wrote: `frames[..len]`, and why it stopped there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Captured {
    /// Frames written.
    pub len: usize,
    /// Why the walk ended.
    pub ending: Ending,
}
