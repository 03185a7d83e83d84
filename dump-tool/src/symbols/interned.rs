//! The stacks of one dump as interned locations, in one flat table.
//!
//! Owns [`InternedStacks`]: per stack of a dump, in the dump's order, its
//! [`LocationId`]s innermost first, all stacks one after the other in one
//! vector of four-byte ids (a stack is a range of it). A large dump has
//! tens of thousands of stacks of tens of frames: one allocation for all
//! of them instead of one per stack, and half the bytes of a `usize` per
//! frame. Plain data; no I/O.

use super::location::LocationId;

/// Per stack of a dump, its locations, innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InternedStacks {
    /// Every stack's location ids, one stack after the other.
    locations: Vec<u32>,
    /// Where each stack ends in `locations`.
    ends: Vec<u32>,
}

impl InternedStacks {
    /// Room for `stacks` stacks of `frames` frames in all.
    pub fn with_capacity(stacks: usize, frames: usize) -> InternedStacks {
        InternedStacks {
            locations: Vec::with_capacity(frames),
            ends: Vec::with_capacity(stacks),
        }
    }

    /// The number of stacks.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True without any stack.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The locations of stack `index`, innermost first (empty past the
    /// last stack).
    pub fn get(&self, index: usize) -> &[u32] {
        let Some(&end) = self.ends.get(index) else {
            return &[];
        };
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.locations[start as usize..end as usize]
    }

    /// Every stack's locations, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u32]> + '_ {
        (0..self.len()).map(|index| self.get(index))
    }

    /// Append a stack. A dump is at most 1 GiB and a frame takes at least
    /// a byte of it, so ids and ends fit in 32 bits.
    pub fn push(&mut self, locations: impl IntoIterator<Item = LocationId>) {
        self.locations
            .extend(locations.into_iter().map(|id| id as u32));
        self.ends.push(self.locations.len() as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_come_back_in_order() {
        let mut stacks = InternedStacks::default();
        stacks.push([3, 1, 2]);
        stacks.push([]);
        stacks.push([7]);
        assert_eq!(stacks.len(), 3);
        let all: Vec<&[u32]> = stacks.iter().collect();
        assert_eq!(all, [&[3, 1, 2][..], &[], &[7]]);
        assert_eq!(stacks.get(3), &[] as &[u32]);
    }
}
