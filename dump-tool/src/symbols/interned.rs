//! The stacks of one dump as interned locations, sharing their common
//! callers.
//!
//! Owns [`InternedStacks`]: per stack of a dump, in the dump's order, its
//! [`LocationId`]s innermost first, kept as a tree of calls (a node is a
//! location and the node of its caller; a stack is its innermost node).
//! Stacks share their outer frames (`main`, the event loop, the request
//! handler): a large dump of tens of thousands of stacks of tens of frames
//! becomes a few nodes per stack, eight bytes each, instead of a list of
//! ids per stack. Plain data; no I/O.

use super::location::LocationId;
use ahash::AHashMap;

/// No node: the caller of an outermost frame, the stack of no frame.
const NONE: u32 = u32::MAX;

/// Per stack of a dump, its locations, innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InternedStacks {
    /// Per node: the node of its caller ([`NONE`] for an outermost frame)
    /// and its location.
    nodes: Vec<(u32, u32)>,
    /// Per stack: its innermost node ([`NONE`] without frames).
    stacks: Vec<u32>,
}

/// One stack's locations, innermost first.
#[derive(Clone)]
pub struct StackLocations<'a> {
    nodes: &'a [(u32, u32)],
    next: u32,
}

impl Iterator for StackLocations<'_> {
    type Item = LocationId;

    fn next(&mut self) -> Option<LocationId> {
        let &(caller, location) = self.nodes.get(self.next as usize)?;
        self.next = caller;
        Some(location as LocationId)
    }
}

impl InternedStacks {
    /// The number of stacks.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    /// True without any stack.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// The locations of stack `index`, innermost first (none past the
    /// last stack).
    pub fn get(&self, index: usize) -> StackLocations<'_> {
        StackLocations {
            nodes: &self.nodes,
            next: self.stacks.get(index).copied().unwrap_or(NONE),
        }
    }

    /// A number that two stacks share exactly when their locations are the
    /// same.
    pub fn identity(&self, index: usize) -> u32 {
        self.stacks.get(index).copied().unwrap_or(NONE)
    }

    /// Every stack's locations, in order.
    pub fn iter(&self) -> impl Iterator<Item = StackLocations<'_>> + '_ {
        (0..self.len()).map(|index| self.get(index))
    }
}

/// Builds [`InternedStacks`] stack by stack.
#[derive(Default)]
pub struct StacksBuilder {
    stacks: InternedStacks,
    /// (caller node, location) → node.
    index: AHashMap<(u32, u32), u32>,
}

impl StacksBuilder {
    /// Append a stack given innermost first. A dump is at most 1 GiB and a
    /// frame takes at least a byte of it, so ids and nodes fit in 32 bits.
    pub fn push(&mut self, innermost_first: &[LocationId]) {
        let mut node = NONE;
        for &location in innermost_first.iter().rev() {
            let next = self.stacks.nodes.len() as u32;
            node = *self
                .index
                .entry((node, location as u32))
                .or_insert_with(|| {
                    self.stacks.nodes.push((node, location as u32));
                    next
                });
        }
        self.stacks.stacks.push(node);
    }

    /// The stacks pushed, in order.
    pub fn finish(mut self) -> InternedStacks {
        self.stacks.nodes.shrink_to_fit();
        self.stacks.stacks.shrink_to_fit();
        self.stacks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_come_back_in_order_sharing_their_callers() {
        let mut builder = StacksBuilder::default();
        builder.push(&[3, 1, 2]);
        builder.push(&[]);
        builder.push(&[7]);
        builder.push(&[4, 1, 2]);
        builder.push(&[3, 1, 2]);
        let stacks = builder.finish();
        assert_eq!(stacks.len(), 5);
        let all: Vec<Vec<LocationId>> = stacks.iter().map(Iterator::collect).collect();
        assert_eq!(
            all,
            [vec![3, 1, 2], vec![], vec![7], vec![4, 1, 2], vec![3, 1, 2]]
        );
        assert_eq!(stacks.get(5).count(), 0);
        // 2, 1, 3, 7, 4: the callers 2 and 1 are shared.
        assert_eq!(stacks.nodes.len(), 5);
        assert_eq!(stacks.identity(0), stacks.identity(4));
        assert_ne!(stacks.identity(0), stacks.identity(3));
    }
}
