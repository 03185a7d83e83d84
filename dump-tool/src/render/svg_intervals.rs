//! Intervals in the flamegraph: each frame's tooltip gets the 95 % interval
//! of that frame's own value (the stacks through it; for a comparison, the
//! interval of its change and whether it is significant), and in a
//! differential flamegraph the frames whose change is within sampling noise
//! are desaturated.
//!
//! Works on the SVG inferno wrote, after `svg` added its details: every
//! frame is `<g><title>NAME[\nDETAILS] (VALUE…)</title><rect … y="…"
//! fill="rgb(r,g,b)" fg:x="…" fg:w="…"/>…</g>`. A frame is a stack prefix:
//! its path is found from the geometry (its parent is the frame one row
//! nearer the root whose `[fg:x, fg:x + fg:w)` holds its `fg:x`) and looked
//! up in a trie of the profile's stacks. The note becomes one more line
//! before the value, which stays last (inferno's script strips that last
//! parenthesised group). Frames whose path is not found are left as they are.

use super::bounds::bracket;
use super::xml::{escape, unescape};
use crate::compare::{ChangeSums, Comparison};
use crate::model::folding::folded_frame;
use crate::model::{FrameRef, Metric, Sample, function_name};
use crate::pipeline::View;
use crate::stats::Estimate;
use crate::symbols::LocationTable;
use ahash::AHashMap;

/// `svg` with interval notes in its tooltips (and muted noise frames).
pub fn annotate(svg: Vec<u8>, view: &View<'_>) -> Vec<u8> {
    let Ok(svg) = String::from_utf8(svg) else {
        return Vec::new();
    };
    let frames = parse_frames(&svg);
    let notes_of = Notes::of(view);
    let nodes = frame_paths(&frames, 0, |&node, name| notes_of.child(node, name));
    let notes: Vec<Option<Note>> = nodes
        .iter()
        .map(|node| node.and_then(|node| notes_of.note(node)))
        .collect();
    rewrite(&svg, &frames, &notes)
}

/// One frame as drawn.
struct Frame {
    /// Byte range of the title text in the SVG.
    title: (usize, usize),
    /// Where the value part of the title (` (…)`) starts, in the title.
    counts_at: usize,
    name: String,
    y: f64,
    x: u64,
    width: u64,
}

fn parse_frames(svg: &str) -> Vec<Frame> {
    const OPEN: &str = "<g><title>";
    let mut frames = Vec::new();
    let mut at = 0;
    while let Some(found) = svg[at..].find(OPEN) {
        let start = at + found + OPEN.len();
        let Some(length) = svg[start..].find("</title>") else {
            break;
        };
        let title = &svg[start..start + length];
        at = start + length;
        let rect_end = svg[at..].find("/>").map_or(svg.len(), |e| at + e);
        let rect = &svg[at..rect_end];
        let (Some(counts_at), Some(y), Some(x), Some(width)) = (
            title.rfind(" ("),
            attribute(rect, " y=\""),
            attribute(rect, " fg:x=\""),
            attribute(rect, " fg:w=\""),
        ) else {
            continue;
        };
        let name = title[..counts_at].split('\n').next().unwrap_or_default();
        frames.push(Frame {
            title: (start, start + length),
            counts_at,
            name: unescape(name),
            y,
            x: x as u64,
            width: width as u64,
        });
    }
    frames
}

fn attribute(element: &str, key: &str) -> Option<f64> {
    let start = element.find(key)? + key.len();
    let length = element[start..].find('"')?;
    element[start..start + length].parse().ok()
}

/// Each frame's path of names from the root, as `child` extends it from
/// `root` (the `all` frame's) name by name, or None when the geometry does
/// not say or `child` knows no such name.
fn frame_paths<P: Clone>(
    frames: &[Frame],
    root: P,
    child_of: impl Fn(&P, &str) -> Option<P>,
) -> Vec<Option<P>> {
    // The widest `all` frame (a function may be called `all` too).
    let root_frame = (0..frames.len())
        .filter(|&i| frames[i].name == "all")
        .max_by_key(|&i| frames[i].width);
    let Some(root_frame) = root_frame else {
        return frames.iter().map(|_| None).collect();
    };
    // Rows ordered from the root: the root's row is the lowest (flame) or
    // the highest (icicle) on the page.
    let mut rows: Vec<f64> = frames.iter().map(|f| f.y).collect();
    rows.sort_by(|a, b| a.total_cmp(b));
    rows.dedup();
    if rows.last() == Some(&frames[root_frame].y) {
        rows.reverse();
    }
    let depth_of = |frame: &Frame| rows.iter().position(|&y| y == frame.y);
    let mut by_depth: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
    for (index, frame) in frames.iter().enumerate() {
        if let Some(depth) = depth_of(frame) {
            by_depth[depth].push(index);
        }
    }
    let mut paths: Vec<Option<P>> = frames.iter().map(|_| None).collect();
    paths[root_frame] = Some(root);
    // Each row's frames by position: a child's parent is the last frame of
    // the row below it that starts at or before the child.
    for row in &mut by_depth {
        row.sort_by_key(|&index| frames[index].x);
    }
    for depth in 1..by_depth.len() {
        for &child_frame in &by_depth[depth] {
            let x = frames[child_frame].x;
            let parents = &by_depth[depth - 1];
            let before = parents.partition_point(|&p| frames[p].x <= x);
            let parent = parents[..before].last().copied().filter(|&p| {
                let f = &frames[p];
                x < f.x + f.width.max(1)
            });
            let path = parent
                .and_then(|p| paths[p].as_ref())
                .and_then(|path| child_of(path, &frames[child_frame].name));
            paths[child_frame] = path;
        }
    }
    paths
}

/// What to add to one frame.
struct Note {
    text: String,
    muted: bool,
}

/// Sums over every stack prefix: estimates of one side, or for a
/// comparison what both sides add to a change. Names are interned: a node's
/// children are keyed by the name's number, each frame's name is made once.
/// Each sample is added at its stack's own node, then every node's sum is
/// added to its parent's once (a child is numbered after its parent): one
/// addition per sample and per node, not one per frame of every sample.
struct StackTrie<T> {
    children: AHashMap<(usize, u32), usize>,
    /// Every folded frame name, numbered.
    names: AHashMap<String, u32>,
    /// Per node.
    values: Vec<T>,
}

impl<T: Copy> StackTrie<T> {
    /// Each sample's `value` credited to every prefix of its stack.
    fn of<'a>(
        samples: impl IntoIterator<Item = (&'a Sample, T)>,
        zero: T,
        table: &LocationTable,
        plus: impl Fn(&T, &T) -> T,
    ) -> StackTrie<T> {
        let mut trie = StackTrie {
            children: AHashMap::new(),
            names: AHashMap::new(),
            values: vec![zero],
        };
        let mut parents = vec![0usize];
        let mut frame_names: AHashMap<FrameRef, u32> = AHashMap::new();
        let mut path = Vec::new();
        for (sample, value) in samples {
            path.clear();
            if sample.frames.is_empty() {
                path.push(trie.name("[no frames]"));
            }
            for &frame in sample.frames.iter().rev() {
                let id = match frame_names.get(&frame) {
                    Some(&id) => id,
                    None => {
                        let id = trie.name(&folded_frame(function_name(table, frame)));
                        frame_names.insert(frame, id);
                        id
                    }
                };
                path.push(id);
            }
            let mut node = 0;
            for &name in &path {
                let next = trie.values.len();
                let parent = node;
                node = *trie.children.entry((parent, name)).or_insert(next);
                if node == next {
                    trie.values.push(zero);
                    parents.push(parent);
                }
            }
            trie.values[node] = plus(&trie.values[node], &value);
        }
        for node in (1..trie.values.len()).rev() {
            let parent = parents[node];
            trie.values[parent] = plus(&trie.values[parent], &trie.values[node]);
        }
        trie
    }

    /// The number of a folded frame name.
    fn name(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.insert(name.to_string(), id);
        id
    }

    /// The node of `name` called from `node` (0: the root).
    fn child(&self, node: usize, name: &str) -> Option<usize> {
        let name = *self.names.get(name)?;
        self.children.get(&(node, name)).copied()
    }
}

/// The note of each frame path: its interval, or its change's.
enum Notes<'a> {
    Single(StackTrie<Estimate>, Metric),
    Changes(StackTrie<ChangeSums>, Comparison<'a>, Metric),
}

impl<'a> Notes<'a> {
    fn of(view: &View<'a>) -> Notes<'a> {
        let metric = view.metric;
        let new = &view.new.profile;
        match view.base {
            None => Notes::Single(
                StackTrie::of(
                    new.samples.iter().map(|s| (s, s.estimate(metric))),
                    Estimate::zero(new.sampling(metric)),
                    view.table,
                    Estimate::plus,
                ),
                metric,
            ),
            Some(base) => {
                let comparison = Comparison::of(&base.profile, new);
                let trie = StackTrie::of(
                    comparison.contributions(metric),
                    comparison.zero(metric),
                    view.table,
                    ChangeSums::plus,
                );
                Notes::Changes(trie, comparison, metric)
            }
        }
    }

    /// The node of `name` called from `node` (0: the root).
    fn child(&self, node: usize, name: &str) -> Option<usize> {
        match self {
            Notes::Single(trie, _) => trie.child(node, name),
            Notes::Changes(trie, _, _) => trie.child(node, name),
        }
    }

    fn note(&self, node: usize) -> Option<Note> {
        match self {
            Notes::Single(trie, metric) => {
                let new = *trie.values.get(node)?;
                Some(Note {
                    text: format!(
                        "95 %: {} {}{}",
                        bracket(&new.interval()),
                        metric.unit(),
                        confidence(new.low_confidence())
                    ),
                    muted: false,
                })
            }
            Notes::Changes(trie, comparison, metric) => {
                let delta = comparison.delta(trie.values.get(node)?, *metric);
                let significant = delta.significant();
                Some(Note {
                    text: format!(
                        "changed {:+.0} {}, 95 %: {}, {}{}",
                        delta.value(),
                        metric.unit(),
                        bracket(&delta.interval()),
                        if significant {
                            "significant"
                        } else {
                            "within sampling noise"
                        },
                        confidence(delta.low_confidence())
                    ),
                    muted: !significant,
                })
            }
        }
    }
}

/// The words after a low-confidence value's interval.
fn confidence(low: bool) -> &'static str {
    if low {
        " (low confidence: objects too small to be sampled may dominate it)"
    } else {
        ""
    }
}

/// The SVG with each noted frame's title extended (and its fill muted).
fn rewrite(svg: &str, frames: &[Frame], notes: &[Option<Note>]) -> Vec<u8> {
    let mut out = String::with_capacity(svg.len() + svg.len() / 4);
    let mut copied = 0;
    for (frame, note) in frames.iter().zip(notes) {
        let Some(note) = note else { continue };
        let (start, end) = frame.title;
        let open = start - "<g><title>".len();
        out.push_str(&svg[copied..open]);
        out.push_str(if note.muted {
            "<g class=\"noise\"><title>"
        } else {
            "<g><title>"
        });
        let title = &svg[start..end];
        out.push_str(&title[..frame.counts_at]);
        out.push('\n');
        out.push_str(&escape(&note.text));
        out.push_str(&title[frame.counts_at..]);
        copied = end;
        if note.muted {
            copied = end + desaturate_next_fill(&svg[end..], &mut out);
        }
    }
    out.push_str(&svg[copied..]);
    out.into_bytes()
}

/// Copy `rest` up to and including the frame's `fill="rgb(r,g,b` with the
/// colour moved three quarters of the way to its grey; returns how many
/// bytes of `rest` were consumed.
fn desaturate_next_fill(rest: &str, out: &mut String) -> usize {
    const FILL: &str = "fill=\"rgb(";
    let end_of_frame = rest.find("</g>").unwrap_or(rest.len());
    let Some(at) = rest[..end_of_frame].find(FILL) else {
        return 0;
    };
    let values_start = at + FILL.len();
    let Some(values_len) = rest[values_start..].find(")\"") else {
        return 0;
    };
    let channels: Vec<f64> = rest[values_start..values_start + values_len]
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    if channels.len() != 3 {
        return 0;
    }
    let grey = channels.iter().sum::<f64>() / 3.0;
    let muted: Vec<String> = channels
        .iter()
        .map(|c| format!("{:.0}", grey + (c - grey) * 0.25))
        .collect();
    out.push_str(&rest[..values_start]);
    out.push_str(&muted.join(","));
    values_start + values_len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desaturates_only_the_frames_fill() {
        let mut out = String::new();
        let rest = "<rect x=\"0\" fill=\"rgb(255,100,100)\" fg:w=\"3\"/></g><g>";
        let used = desaturate_next_fill(rest, &mut out);
        out.push_str(&rest[used..]);
        assert_eq!(
            out,
            "<rect x=\"0\" fill=\"rgb(178,139,139)\" fg:w=\"3\"/></g><g>"
        );
    }

    fn frame(title: &str, y: u32, x: u32, w: u32) -> String {
        format!(
            "<g><title>{title}</title><rect x=\"0%\" y=\"{y}\" width=\"1%\" height=\"15\" fill=\"rgb(1,2,3)\" fg:x=\"{x}\" fg:w=\"{w}\"/><text></text></g>"
        )
    }

    #[test]
    fn paths_follow_the_geometry_in_both_directions() {
        for (root_y, step) in [(100i32, -16i32), (20, 16)] {
            let row = |depth: i32| (root_y + depth * step) as u32;
            let svg = [
                frame("all (10 bytes, 100%)", row(0), 0, 10),
                frame("main\nx.c:1 (10 bytes, 100%)", row(1), 0, 10),
                frame("f&lt;int&gt; (6 bytes, 60%)", row(2), 0, 6),
                frame("g (4 bytes, 40%)", row(2), 6, 4),
                frame("leaf (4 bytes, 40%)", row(3), 6, 4),
            ]
            .concat();
            let frames = parse_frames(&svg);
            let paths = frame_paths(&frames, String::new(), |path, name| {
                Some(if path.is_empty() {
                    name.to_string()
                } else {
                    format!("{path};{name}")
                })
            });
            let names = |i: usize| paths[i].clone().unwrap();
            assert_eq!(names(0), "");
            assert_eq!(names(1), "main");
            assert_eq!(names(2), "main;f<int>");
            assert_eq!(names(4), "main;g;leaf");
        }
    }
}
