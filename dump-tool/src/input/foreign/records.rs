//! What the jemalloc and gperftools texts have in common: the counts
//! `a: b [c: d]`, hex address lists, the sampling period, and the stack a
//! count line becomes (raw counts with the average-size weights jeprof and
//! pprof give them).
//!
//! Owns [`Records`], the parsed form both formats produce. Plain text
//! parsing: never reads files, never panics on bad input (every problem is
//! an error naming the line).

use heapsample_format::{Stack, ThreadInfo, Weights};

/// What both formats give: a sampling period, threads, stacks, and totals
/// when the header has them.
#[derive(Debug, Default)]
pub struct Records {
    pub period: u64,
    /// True for a profile of every allocation (gperftools'
    /// `@ heapprofile`): its counts are the truth, uncorrected.
    pub unsampled: bool,
    pub threads: Vec<ThreadInfo>,
    pub stacks: Vec<Stack>,
    pub header: Counts,
}

/// `live_objects: live_bytes [alloc_objects: alloc_bytes]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub live_objects: u64,
    pub live_bytes: u64,
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
}

pub fn bad(line_number: usize, why: impl std::fmt::Display) -> String {
    format!("line {line_number}: {why}")
}

/// `a: b [c: d]` with any spacing.
pub fn parse_counts(text: &str, line_number: usize) -> Result<Counts, String> {
    let cleaned: String = text
        .chars()
        .map(|c| if matches!(c, ':' | '[' | ']') { ' ' } else { c })
        .collect();
    let numbers: Vec<u64> = cleaned
        .split_whitespace()
        .map(|n| n.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            bad(
                line_number,
                format!("expected `a: b [c: d]`, found `{text}`"),
            )
        })?;
    match numbers[..] {
        [live_objects, live_bytes, alloc_objects, alloc_bytes] => Ok(Counts {
            live_objects,
            live_bytes,
            alloc_objects,
            alloc_bytes,
        }),
        _ => Err(bad(
            line_number,
            format!("expected `a: b [c: d]`, found `{text}`"),
        )),
    }
}

pub fn parse_addresses(text: &str, line_number: usize) -> Result<Vec<u64>, String> {
    text.split_whitespace()
        .map(|word| {
            let digits = word.trim_start_matches("0x").trim_start_matches("0X");
            u64::from_str_radix(digits, 16)
                .map_err(|_| bad(line_number, format!("`{word}` is not a hex address")))
        })
        .collect()
}

pub fn parse_period(text: &str, line_number: usize) -> Result<u64, String> {
    let period: u64 = text
        .trim()
        .parse()
        .map_err(|_| bad(line_number, format!("bad sampling period `{text}`")))?;
    if period == 0 || !period.is_power_of_two() {
        return Err(bad(
            line_number,
            format!("sampling period {period} is not a power of two (lg_prof_sample)"),
        ));
    }
    Ok(period)
}

/// How a profile's counts become estimates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Correction {
    /// Every allocation was recorded: the counts are the truth.
    None,
    /// `heap_v2/<period>`: jeprof's and pprof's average-size correction
    /// (`AdjustSamples`) at that period.
    AverageSize(u64),
}

/// A stack with the raw counts and their corrected weights.
pub fn stack(frames: Vec<u64>, thread: u32, counts: Counts, correction: Correction) -> Stack {
    Stack {
        live: weights(counts.live_objects, counts.live_bytes, correction),
        alloc: weights(counts.alloc_objects, counts.alloc_bytes, correction),
        frames,
        thread,
        epoch: 0,
        live_objects: counts.live_objects,
        live_bytes: counts.live_bytes,
        live_usable_bytes: counts.live_bytes,
        alloc_objects: counts.alloc_objects,
        alloc_bytes: counts.alloc_bytes,
        lifetimes: Vec::new(),
    }
}

/// `objects` sampled objects of `bytes` bytes, corrected: jeprof's
/// `AdjustSamples` scales both by `1 / (1 − exp(−(b/n)/R))` at every
/// period, 1 included: jemalloc 5.3 samples every allocation at
/// `lg_prof_sample:0` but still writes its counts divided by that factor
/// (its `prof_unbias` writes whatever jeprof's correction turns into its
/// own unbiased sums), so the correction is what restores them (+0.03 % on
/// 8-byte objects). The variances are those of `n` objects of the average
/// size (0 where every allocation was sampled).
fn weights(objects: u64, bytes: u64, correction: Correction) -> Weights {
    let (n, b) = (objects as f64, bytes as f64);
    let Correction::AverageSize(period) = correction else {
        return Weights {
            objects: n,
            bytes: b,
            ..Weights::default()
        };
    };
    if objects == 0 {
        return Weights::default();
    }
    let average = b / n;
    let p = -(-average / period as f64).exp_m1();
    if p.is_nan() || p <= 0.0 {
        return Weights::default();
    }
    let spread = if period <= 1 {
        0.0
    } else {
        (1.0 - p) / (p * p)
    };
    Weights {
        objects: n / p,
        bytes: b / p,
        objects_variance: n * spread,
        bytes_variance: n * average * average * spread,
    }
}

/// One stack allocated by several threads (jemalloc's per-thread lines
/// under its `t*` line): jeprof corrects the `t*` counts with the stack's
/// average size, and so is every thread's share here, each thread's own
/// correction scaled so that the threads add up to the `t*` line's. (Each
/// line is written rounded after jemalloc divides its unbiased sums by that
/// line's own factor, so correcting every thread line by its own average
/// recovers the same sums in theory, but the roundings of small per-thread
/// counts add up: up to 0.9 % apart from jeprof on stacks of many threads.)
pub fn thread_stacks(
    frames: &[u64],
    total: Counts,
    threads: &[(u32, Counts)],
    correction: Correction,
) -> Vec<Stack> {
    let mut stacks: Vec<Stack> = threads
        .iter()
        .map(|&(thread, counts)| stack(frames.to_vec(), thread, counts, correction))
        .collect();
    let whole = stack(frames.to_vec(), 0, total, correction);
    let sum = stacks.iter().fold(
        (Weights::default(), Weights::default()),
        |(live, alloc), s| (live.plus(&s.live), alloc.plus(&s.alloc)),
    );
    for stack in &mut stacks {
        stack.live = scaled_to(&stack.live, &sum.0, &whole.live);
        stack.alloc = scaled_to(&stack.alloc, &sum.1, &whole.alloc);
    }
    stacks
}

/// `part` of `sum`, each of its four sums scaled by `whole / sum`.
fn scaled_to(part: &Weights, sum: &Weights, whole: &Weights) -> Weights {
    let [p, s, w] = [part, sum, whole].map(Weights::as_array);
    let share = |i: usize| if s[i] > 0.0 { p[i] * w[i] / s[i] } else { 0.0 };
    Weights {
        objects: share(0),
        bytes: share(1),
        objects_variance: share(2),
        bytes_variance: share(3),
    }
}
