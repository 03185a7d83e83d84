//! jemalloc's `heap_v2/<period>` profiles (`jeprof.<pid>.<seq>.*.heap`).
//!
//! Owns the jemalloc text's structure: per-thread totals with optional
//! thread names, then per stack an `@ addresses` line and its count lines.
//! Never reads files, never panics on bad input.

use super::records::{
    Correction, Counts, Records, bad, parse_addresses, parse_counts, parse_period, stack,
    thread_stacks,
};
use heapsample_format::ThreadInfo;

/// jemalloc `heap_v2/<period>`: per-thread totals with optional names, then
/// `@ addresses` lines each followed by `t*:` and `t<uid>:` count lines.
pub fn parse_jemalloc(text: &str) -> Result<Records, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
    let (_, header) = lines.next().ok_or("empty file")?;
    let period = parse_period(header.trim_start_matches("heap_v2/"), 1)?;
    let mut records = Records {
        period,
        ..Records::default()
    };
    let mut frames: Option<Vec<u64>> = None;
    let mut per_thread: Vec<(u32, Counts)> = Vec::new();
    let mut all_threads: Option<Counts> = None;
    for (number, line) in lines {
        if line.is_empty() {
            continue;
        }
        if let Some(addresses) = line.strip_prefix('@') {
            flush_jemalloc_stack(&mut records, frames.take(), &per_thread, all_threads);
            per_thread.clear();
            all_threads = None;
            frames = Some(parse_addresses(addresses, number)?);
        } else if let Some(rest) = line.strip_prefix("t*:") {
            let counts = parse_counts(rest, number)?;
            if frames.is_none() {
                records.header = counts;
            }
            all_threads = Some(counts);
        } else if let Some(rest) = line.strip_prefix('t') {
            let (uid, rest) = rest
                .split_once(':')
                .ok_or_else(|| bad(number, format!("unexpected `{line}`")))?;
            let uid: u32 = uid
                .parse()
                .map_err(|_| bad(number, format!("bad thread id in `{line}`")))?;
            let (counts_text, name) = split_thread_name(rest);
            let counts = parse_counts(counts_text, number)?;
            if frames.is_none() {
                records.threads.push(ThreadInfo {
                    serial: uid.saturating_add(1),
                    tid: uid,
                    name: name.to_string(),
                });
            } else {
                per_thread.push((uid, counts));
            }
        } else {
            return Err(bad(number, format!("unexpected `{line}`")));
        }
    }
    flush_jemalloc_stack(&mut records, frames, &per_thread, all_threads);
    Ok(records)
}

/// `N: N [N: N] name` → the counts and the name (jemalloc's
/// `prof.thread_name`).
fn split_thread_name(text: &str) -> (&str, &str) {
    match text.find(']') {
        Some(end) => (&text[..=end], text[end + 1..].trim()),
        None => (text, ""),
    }
}

/// One stack per thread line, corrected as jeprof corrects the `t*` line
/// (see [`thread_stacks`]); without thread lines, the `t*` line under
/// thread 0.
fn flush_jemalloc_stack(
    records: &mut Records,
    frames: Option<Vec<u64>>,
    per_thread: &[(u32, Counts)],
    all_threads: Option<Counts>,
) {
    let Some(frames) = frames else { return };
    let correction = Correction::AverageSize(records.period);
    let threads: Vec<(u32, Counts)> = per_thread
        .iter()
        .map(|&(uid, counts)| (uid.saturating_add(1), counts))
        .collect();
    match (threads.as_slice(), all_threads) {
        ([], total) => {
            let total = total.unwrap_or_default();
            records.stacks.push(stack(frames, 0, total, correction));
        }
        (&[(thread, counts)], total) => {
            let total = total.unwrap_or(counts);
            records
                .stacks
                .push(stack(frames, thread, total, correction));
        }
        (threads, total) => {
            let total = total.unwrap_or_else(|| sum_counts(threads));
            records
                .stacks
                .extend(thread_stacks(&frames, total, threads, correction));
        }
    }
}

fn sum_counts(threads: &[(u32, Counts)]) -> Counts {
    threads
        .iter()
        .fold(Counts::default(), |sum, (_, c)| Counts {
            live_objects: sum.live_objects + c.live_objects,
            live_bytes: sum.live_bytes + c.live_bytes,
            alloc_objects: sum.alloc_objects + c.alloc_objects,
            alloc_bytes: sum.alloc_bytes + c.alloc_bytes,
        })
}
