//! Frames of a stack: locations expanded into function frames, the
//! allocator's own frames dropped at the leaf, and the names frames show.
//!
//! Owns [`FrameRef`], the rule for dropping allocator frames (the names
//! are in [`super::allocator`]) and the labels that keep two functions
//! apart where their short names are the same ([`FunctionNames`],
//! [`distinct_labels`]). Reads the symbolized [`LocationTable`]; never
//! changes it.

use super::allocator::is_allocator_function;
use crate::symbols::names::{Language, short_name_with_templates};
use crate::symbols::{Line, LocationId, LocationTable};
use std::collections::{HashMap, HashSet};

/// One function frame of a stack: line `line` of location `location`.
/// Eight bytes: a large profile holds millions of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameRef {
    location: u32,
    line: u32,
}

impl FrameRef {
    /// Line `line` of location `location` (both far below 2^32: a dump is
    /// at most 1 GiB).
    pub fn new(location: LocationId, line: usize) -> FrameRef {
        FrameRef {
            location: location as u32,
            line: line as u32,
        }
    }

    /// The location (return address) it is a function frame of.
    pub fn location(self) -> LocationId {
        self.location as LocationId
    }

    /// Which of the location's lines (0: the innermost inlined function).
    pub fn line(self) -> usize {
        self.line as usize
    }
}

/// Expand locations (leaf first) into function frames (leaf first,
/// inlined frames before their caller), dropping the allocator's own
/// frames at the leaf unless `keep_allocator`. The result is allocated at
/// its exact size.
pub fn frames_of(
    locations: impl Iterator<Item = LocationId> + Clone,
    table: &LocationTable,
    keep_allocator: bool,
) -> Vec<FrameRef> {
    let all = || {
        locations.clone().flat_map(|location| {
            let count = table.locations.get(location).map_or(0, |l| l.lines.len());
            (0..count).map(move |line| FrameRef::new(location, line))
        })
    };
    let total = all().count();
    let allocator_frames = if keep_allocator {
        0
    } else {
        all()
            .take_while(|frame| is_allocator_frame(table, *frame))
            .count()
    };
    // Never drop everything: a stack made only of allocator frames keeps its
    // outermost one.
    let keep_from = allocator_frames.min(total.saturating_sub(1));
    let mut frames = Vec::with_capacity(total - keep_from);
    frames.extend(all().skip(keep_from));
    frames
}

/// The symbolized line of a frame, `None` if the reference is stale.
pub fn line_of(table: &LocationTable, frame: FrameRef) -> Option<&Line> {
    table
        .locations
        .get(frame.location())
        .and_then(|location| location.lines.get(frame.line()))
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

/// A function's names, each followed by ` [module]` where two modules
/// define a function of that name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FunctionNames {
    /// The short name (`Pool<…>::take`).
    pub short: String,
    /// The whole signature, as far as the symbols give it (an inlined
    /// frame's DWARF name has no parameters).
    pub full: String,
    /// The short name with its template arguments (`Pool<Blob>::take`):
    /// what tells functions apart (two instantiations of a template), and
    /// the same for an inlined and an out-of-line frame of one function.
    pub templates: String,
}

impl FunctionNames {
    /// The names of the function of `line`.
    pub fn of(line: &Line) -> FunctionNames {
        let qualified = |name: &str| match &line.qualifier {
            Some(qualifier) => format!("{name} [{qualifier}]"),
            None => name.to_string(),
        };
        // Only C++ names are shortened: a short name that differs is C++.
        let templates = if line.short == line.function {
            line.function.clone()
        } else {
            short_name_with_templates(&line.function, Language::Cxx)
        };
        FunctionNames {
            short: qualified(&line.short),
            full: qualified(&line.function),
            templates: qualified(&templates),
        }
    }

    /// A name that stands for itself (`??`, a synthetic frame).
    pub fn plain(name: &str) -> FunctionNames {
        FunctionNames {
            short: name.to_string(),
            full: name.to_string(),
            templates: name.to_string(),
        }
    }
}

/// Short labels that never merge two functions (told apart by
/// [`FunctionNames::templates`]): each function's short name, except where
/// several share one (two instantiations of a template): those are
/// labelled by their names with template arguments.
pub fn distinct_labels(functions: &[FunctionNames]) -> Vec<String> {
    let mut by_short: HashMap<&str, HashSet<&str>> = HashMap::new();
    for names in functions {
        by_short
            .entry(names.short.as_str())
            .or_default()
            .insert(names.templates.as_str());
    }
    functions
        .iter()
        .map(|names| {
            if by_short[names.short.as_str()].len() == 1 {
                names.short.clone()
            } else {
                names.templates.clone()
            }
        })
        .collect()
}

/// The label of every function frame of some stacks, as the viewer
/// labels them: a short name that two instantiations of a template share
/// becomes the name with template arguments ([`distinct_labels`]); other
/// frames keep their display name (full names, module qualifiers).
#[derive(Clone, Debug, Default)]
pub struct FrameLabels {
    by_frame: HashMap<FrameRef, String>,
}

impl FrameLabels {
    /// The labels of the frames of `stacks`.
    pub fn of<'a>(
        table: &LocationTable,
        stacks: impl IntoIterator<Item = &'a [FrameRef]>,
    ) -> FrameLabels {
        let mut frames: HashSet<FrameRef> = HashSet::new();
        for stack in stacks {
            frames.extend(stack.iter().copied());
        }
        // Frames showing their short name, each with its names.
        let named: Vec<(FrameRef, FunctionNames)> = frames
            .into_iter()
            .filter_map(|frame| {
                let line = line_of(table, frame)?;
                let names = FunctionNames::of(line);
                (line.display == names.short).then_some((frame, names))
            })
            .collect();
        let mut functions: Vec<FunctionNames> = named.iter().map(|(_, n)| n.clone()).collect();
        functions.sort_by(|a, b| a.templates.cmp(&b.templates));
        functions.dedup_by(|a, b| a.templates == b.templates);
        let labels: HashMap<&str, String> = functions
            .iter()
            .map(|n| n.templates.as_str())
            .zip(distinct_labels(&functions))
            .collect();
        FrameLabels {
            by_frame: named
                .iter()
                .filter_map(|(frame, names)| {
                    let label = labels.get(names.templates.as_str())?;
                    (label != &names.short).then(|| (*frame, label.clone()))
                })
                .collect(),
        }
    }

    /// The label of `frame`: its display name unless two instantiations
    /// share it.
    pub fn get<'a>(&'a self, table: &'a LocationTable, frame: FrameRef) -> &'a str {
        match self.by_frame.get(&frame) {
            Some(label) => label,
            None => function_name(table, frame),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(short: &str, full: &str, templates: &str) -> FunctionNames {
        FunctionNames {
            short: short.into(),
            full: full.into(),
            templates: templates.into(),
        }
    }

    #[test]
    fn labels_stay_short_unless_two_functions_share_one() {
        let functions = [
            names(
                "Cache<…>::fill",
                "Cache<int>::fill(unsigned long)",
                "Cache<int>::fill",
            ),
            names(
                "Cache<…>::fill",
                "Cache<double>::fill(unsigned long)",
                "Cache<double>::fill",
            ),
            // Overloads share their name with template arguments (an
            // inlined frame's name has no parameters): one function, one
            // label.
            names("f", "f(int)", "f"),
            names("f", "f(double)", "f"),
            names("main", "main", "main"),
            names("main", "main", "main"),
        ];
        assert_eq!(
            distinct_labels(&functions),
            [
                "Cache<int>::fill",
                "Cache<double>::fill",
                "f",
                "f",
                "main",
                "main"
            ]
        );
    }
}
