//! What the jemalloc and gperftools texts have in common: the counts
//! `a: b [c: d]`, hex address lists, the sampling period, and the stack a
//! count line becomes (raw counts with their average-size weights).
//!
//! Owns [`Records`], the parsed form both formats produce. Plain text
//! parsing: never reads files, never panics on bad input (every problem is
//! an error naming the line).

use heapsample_format::{Stack, ThreadInfo, legacy_weights};

/// What both formats give: a sampling period, threads, stacks, and totals
/// when the header has them.
#[derive(Debug, Default)]
pub struct Records {
    pub period: u64,
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

/// A stack with the raw counts and their average-size weights.
pub fn stack(frames: Vec<u64>, thread: u32, counts: Counts, period: u64) -> Stack {
    Stack {
        live: legacy_weights(counts.live_objects, counts.live_bytes, period),
        alloc: legacy_weights(counts.alloc_objects, counts.alloc_bytes, period),
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
