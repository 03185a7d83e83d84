//! The profiler's own stderr lines (`<heapsample>: ...`), and the numbers
//! of its leak summary.

/// The prefix of every line the profiler writes to stderr.
pub const HEAPSAMPLE_PREFIX: &str = "<heapsample>:";

/// The lines of `stderr` that start with `<heapsample>:`.
pub fn heapsample_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with(HEAPSAMPLE_PREFIX))
        .map(str::to_string)
        .collect()
}

/// The numbers of a `prof_leak` summary line
/// `<heapsample>: Leak approximation summary: ~N bytes, ~M objects, >= K contexts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeakSummary {
    /// ~N bytes.
    pub bytes: u64,
    /// ~M objects.
    pub objects: u64,
    /// >= K contexts.
    pub contexts: u64,
}

/// Parse a leak summary line (singular or plural units); `None` if `line`
/// is not one.
pub fn parse_leak_summary(line: &str) -> Option<LeakSummary> {
    let rest = line
        .strip_prefix(HEAPSAMPLE_PREFIX)?
        .trim_start()
        .strip_prefix("Leak approximation summary:")?;
    let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return None;
    }
    fn number(part: &str, lead: &str, unit: &str) -> Option<u64> {
        let p = part.strip_prefix(lead)?.trim_start();
        let (n, u) = p.split_once(' ')?;
        (u == unit || u == format!("{unit}s")).then_some(())?;
        n.parse().ok()
    }
    Some(LeakSummary {
        bytes: number(parts[0], "~", "byte")?,
        objects: number(parts[1], "~", "object")?,
        contexts: number(parts[2], ">=", "context")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_leak_lines() {
        let l = "<heapsample>: Leak approximation summary: ~1234 bytes, ~5 objects, >= 2 contexts";
        assert_eq!(
            parse_leak_summary(l),
            Some(LeakSummary {
                bytes: 1234,
                objects: 5,
                contexts: 2
            })
        );
        let l = "<heapsample>: Leak approximation summary: ~1 byte, ~1 object, >= 1 context";
        assert!(parse_leak_summary(l).is_some());
        assert!(parse_leak_summary("<heapsample>: something else").is_none());
    }
}
