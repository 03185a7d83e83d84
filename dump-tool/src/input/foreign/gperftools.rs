//! gperftools' heap profiles (`HEAPPROFILE=prefix`, `<prefix>.0001.heap`).
//!
//! Owns the gperftools text's structure: a header with the totals and the
//! profile type, then one `a: b [c: d] @ addresses` line per stack. Never
//! reads files, never panics on bad input.

use super::records::{
    Correction, Records, bad, parse_addresses, parse_counts, parse_period, stack,
};

/// gperftools: `heap profile: a: b [c: d] @ heapprofile` (or
/// `@ heap_v2/<period>`), then `a: b [c: d] @ addresses` per stack.
pub fn parse_gperftools(text: &str) -> Result<Records, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
    let (_, header) = lines.next().ok_or("empty file")?;
    let header = header.trim_start_matches("heap profile:");
    let (counts, kind) = header
        .split_once('@')
        .ok_or_else(|| bad(1, "no `@ heapprofile` in the header"))?;
    let (period, correction) = match kind.trim() {
        "heapprofile" => (1, Correction::None),
        other => match other.strip_prefix("heap_v2/") {
            Some(period) => {
                let period = parse_period(period, 1)?;
                (period, Correction::AverageSize(period))
            }
            None => return Err(bad(1, format!("unsupported heap profile type `{other}`"))),
        },
    };
    let mut records = Records {
        period,
        unsampled: correction == Correction::None,
        header: parse_counts(counts, 1)?,
        ..Records::default()
    };
    for (number, line) in lines {
        if line.is_empty() {
            continue;
        }
        let (counts, addresses) = line.split_once('@').ok_or_else(|| {
            bad(
                number,
                format!("expected `a: b [c: d] @ addresses`, found `{line}`"),
            )
        })?;
        let counts = parse_counts(counts, number)?;
        records.stacks.push(stack(
            parse_addresses(addresses, number)?,
            0,
            counts,
            correction,
        ));
    }
    Ok(records)
}
