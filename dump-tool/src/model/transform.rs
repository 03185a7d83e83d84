//! Views of a profile: focus, ignore, hide, extra allocator frames, the
//! grouping by program frame, a root frame per thread, a leaf frame per
//! size class.
//!
//! Owns [`Transforms`] and [`apply`], a plain function from a profile to the
//! profile every renderer then draws, so every format shows the same view.
//! Frames are matched by the name they show and by their full name.
//! Synthetic frames (threads, size classes) are interned in the
//! [`LocationTable`] as locations outside every module. Never reads files,
//! never changes the samples' values.

use super::frames::{FrameRef, line_of};
use super::metric::{Metric, Values};
use super::profile::{Profile, Sample};
use super::size_class::size_class;
use crate::symbols::LocationTable;
use regex::Regex;

/// What to show of a profile. The default shows everything as it is.
#[derive(Clone, Debug, Default)]
pub struct Transforms {
    /// Keep only stacks with a frame matching.
    pub focus: Option<Regex>,
    /// Drop stacks with a frame matching.
    pub ignore: Option<Regex>,
    /// Remove matching frames, keep the rest of the stack.
    pub hide: Option<Regex>,
    /// Treat matching frames at the leaf as allocator frames (dropped like
    /// `malloc`), in addition to the built-in list.
    pub allocator_frames: Option<Regex>,
    /// A root frame per thread name: `[thread NAME]`.
    pub by_thread: bool,
    /// A leaf frame per size class of the stack's mean object size,
    /// `[4–8 KiB]`, measured by the metric's side (in use or allocated).
    pub size_frames: bool,
    /// Group by program frame: the frames at the leaf that are not the
    /// program's own code ([`super::program_frame()`]) are dropped, so each
    /// stack's leaf is its program frame (a stack without one keeps its
    /// outermost frame).
    pub program_frames: bool,
}

impl Transforms {
    /// True if [`apply`] would return the profile unchanged.
    pub fn is_identity(&self) -> bool {
        self.focus.is_none()
            && self.ignore.is_none()
            && self.hide.is_none()
            && self.allocator_frames.is_none()
            && !self.by_thread
            && !self.size_frames
            && !self.program_frames
    }
}

/// The profile as `transforms` show it. `estimated` (and its variance and
/// sampled counts) becomes the sum of the samples kept, so percentages are
/// of what is shown.
pub fn apply(
    profile: &Profile,
    table: &mut LocationTable,
    transforms: &Transforms,
    metric: Metric,
) -> Profile {
    let mut samples = Vec::with_capacity(profile.samples.len());
    let (mut estimated, mut variance, mut sampled) =
        (Values::default(), Values::default(), Values::default());
    for sample in &profile.samples {
        let Some(sample) = transform_sample(sample, profile, table, transforms, metric) else {
            continue;
        };
        estimated.add(&sample.values);
        variance.add(&sample.variance);
        sampled.add(&sample.sampled);
        samples.push(sample);
    }
    Profile {
        samples,
        estimated,
        variance,
        sampled,
        ..profile.clone()
    }
}

fn transform_sample(
    sample: &Sample,
    profile: &Profile,
    table: &mut LocationTable,
    transforms: &Transforms,
    metric: Metric,
) -> Option<Sample> {
    let matches = |regex: &Regex, frame: &FrameRef| frame_matches(table, regex, *frame);
    let mut frames = sample.frames.clone();
    if let Some(allocator) = &transforms.allocator_frames {
        let wrappers = frames.iter().take_while(|f| matches(allocator, f)).count();
        frames.drain(..wrappers.min(frames.len().saturating_sub(1)));
    }
    if transforms.program_frames {
        let runtime = frames
            .iter()
            .take_while(|f| line_of(table, **f).is_some_and(|line| !line.program))
            .count();
        frames.drain(..runtime.min(frames.len().saturating_sub(1)));
    }
    if let Some(ignore) = &transforms.ignore
        && frames.iter().any(|f| matches(ignore, f))
    {
        return None;
    }
    if let Some(focus) = &transforms.focus
        && !frames.iter().any(|f| matches(focus, f))
    {
        return None;
    }
    if let Some(hide) = &transforms.hide {
        frames.retain(|f| !matches(hide, f));
    }
    if transforms.size_frames
        && let Some(size) = mean_size(&sample.values, metric)
    {
        let location = table.synthetic(&size_class(size));
        frames.insert(0, FrameRef::new(location, 0));
    }
    if transforms.by_thread {
        let location = table.synthetic(&thread_frame(profile, sample.thread));
        frames.push(FrameRef::new(location, 0));
    }
    Some(Sample {
        frames,
        ..sample.clone()
    })
}

/// True if the frame's shown name or full name matches.
fn frame_matches(table: &LocationTable, regex: &Regex, frame: FrameRef) -> bool {
    line_of(table, frame)
        .is_some_and(|line| regex.is_match(&line.display) || regex.is_match(&line.function))
}

/// `[thread NAME]`, `[thread tid N]` without a name, `[thread ?]` when the
/// dump does not know it. By name, not tid: a pool's threads group
/// together, and the same thread of two processes lines up in a diff
/// (pprof's `tid` label keeps the tids).
pub fn thread_frame(profile: &Profile, serial: u32) -> String {
    match profile.thread(serial) {
        Some(thread) if !thread.name.is_empty() => format!("[thread {}]", thread.name),
        Some(thread) => format!("[thread tid {}]", thread.tid),
        None => "[thread ?]".to_string(),
    }
}

/// The mean object size of a sample on the metric's side.
fn mean_size(values: &Values, metric: Metric) -> Option<f64> {
    let (objects, bytes) = match metric {
        Metric::InuseSpace | Metric::InuseObjects => (values.inuse_objects, values.inuse_space),
        Metric::AllocSpace | Metric::AllocObjects => (values.alloc_objects, values.alloc_space),
        Metric::TempSpace | Metric::TempObjects => (values.temp_objects, values.temp_space),
    };
    (objects > 0.0).then(|| bytes / objects)
}
