//! Frames of a stack: locations expanded into function frames, the
//! allocator's own frames dropped at the leaf, and the names frames show.
//!
//! Owns [`FrameRef`] and the rule for dropping allocator frames (the names
//! are in [`super::allocator`]). Reads the symbolized [`LocationTable`];
//! never changes it.

use super::allocator::is_allocator_function;
use crate::symbols::{Line, LocationId, LocationTable};

/// One function frame of a stack: line `line` of location `location`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameRef {
    pub location: LocationId,
    pub line: usize,
}

/// Expand locations (leaf first) into function frames (leaf first,
/// inlined frames before their caller), dropping the allocator's own
/// frames at the leaf unless `keep_allocator`.
pub fn frames_of(
    locations: &[LocationId],
    table: &LocationTable,
    keep_allocator: bool,
) -> Vec<FrameRef> {
    let frames: Vec<FrameRef> = locations
        .iter()
        .flat_map(|&location| {
            let count = table.locations.get(location).map_or(0, |l| l.lines.len());
            (0..count).map(move |line| FrameRef { location, line })
        })
        .collect();
    if keep_allocator {
        return frames;
    }
    let allocator_frames = frames
        .iter()
        .take_while(|frame| is_allocator_frame(table, **frame))
        .count();
    // Never drop everything: a stack made only of allocator frames keeps its
    // outermost one.
    let keep_from = allocator_frames.min(frames.len().saturating_sub(1));
    frames[keep_from..].to_vec()
}

/// The symbolized line of a frame, `None` if the reference is stale.
pub fn line_of(table: &LocationTable, frame: FrameRef) -> Option<&Line> {
    table
        .locations
        .get(frame.location)
        .and_then(|location| location.lines.get(frame.line))
}

/// True if the frame is one of the allocator's own functions, by its full
/// name (whatever name style is shown).
pub fn is_allocator_frame(table: &LocationTable, frame: FrameRef) -> bool {
    line_of(table, frame).is_some_and(|line| is_allocator_function(&line.function))
}

/// The name a frame shows ("??" if the reference is stale): its display
/// name (see [`LocationTable::assign_display_names`]).
pub fn function_name(table: &LocationTable, frame: FrameRef) -> &str {
    line_of(table, frame).map_or("??", |line| line.display.as_str())
}
