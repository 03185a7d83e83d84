//! The live heap in words: the estimate from the samples, and how the
//! exact counter (usable bytes) relates to it
//! ([`crate::model::live_heap`]'s reconciliation). The viewer's footer and
//! the dump list of `heapdiff serve` show these sentences.

use crate::model::live_heap::{Agreement, LiveHeap};
use crate::stats::Interval;

/// `1.50 KiB`, `12.3 MiB`, `512 B`: binary units, as the viewer prints
/// them (`assets/viewer/format.js`).
pub fn human_bytes(value: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let sign = if value < 0.0 { "-" } else { "" };
    let mut x = value.abs();
    let mut unit = 0;
    while x >= 1024.0 && unit < UNITS.len() - 1 {
        x /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{sign}{x:.0} B")
    } else if x < 10.0 {
        format!("{sign}{x:.2} {}", UNITS[unit])
    } else {
        format!("{sign}{x:.1} {}", UNITS[unit])
    }
}

fn range(interval: &Interval) -> String {
    format!(
        "[{}, {}]",
        human_bytes(interval.low),
        human_bytes(interval.high)
    )
}

/// One or two sentences: what the samples say, then the exact counter.
pub fn words(live: &LiveHeap, period: u64) -> String {
    let requested = &live.requested;
    let mut text = if live.every_allocation_sampled {
        format!(
            "Live heap {} requested, exact (every allocation sampled).",
            human_bytes(requested.estimate)
        )
    } else if live.sampled_objects == 0 {
        format!(
            "No sampled object is live: the estimate is 0 B, but objects much smaller than the sampling period ({} on average) are rarely sampled.",
            human_bytes(period as f64)
        )
    } else {
        format!(
            "Live heap ≈ {} requested, 95 % interval {}, from {} sampled objects.",
            human_bytes(requested.estimate),
            range(requested),
            live.sampled_objects
        )
    };
    let exact = live.exact_usable.map(|e| human_bytes(e as f64));
    let usable = |u: &Interval| {
        let ratio = live.usable_per_requested.unwrap_or(1.0);
        if live.every_allocation_sampled {
            format!(
                "the samples hold {} usable ({ratio:.3} usable bytes per requested byte)",
                human_bytes(u.estimate)
            )
        } else {
            format!(
                "the sampled objects hold {ratio:.3} usable bytes per requested byte, so the estimate is {} usable, {}",
                human_bytes(u.estimate),
                range(u)
            )
        }
    };
    let sentence = match (live.agreement(), exact, live.usable) {
        (Agreement::NotCounted, ..) | (_, None, _) => String::new(),
        (Agreement::NoLiveSample, Some(exact), _) => format!(
            " The exact counter says {exact} usable bytes are live: memory no sample caught."
        ),
        (Agreement::Within, Some(exact), Some(u)) => format!(
            " The exact counter, {exact}, counts usable bytes (what the allocator reserved, rounded up to its size classes) and agrees: {}.",
            usable(&u)
        ),
        (Agreement::ExactAbove(by), Some(exact), Some(u)) => format!(
            " The exact counter, {exact}, counts usable bytes (what the allocator reserved, rounded up to its size classes): {}; the counter is {} above that, live memory no sampled object accounts for (such as allocations made before sampling started, or the profiler's own).",
            usable(&u),
            human_bytes(by)
        ),
        (Agreement::ExactBelow(by), Some(exact), Some(u)) => format!(
            " The exact counter, {exact}, counts usable bytes: {}; the counter is {} below that range, which a 95 % interval misses about once in 20 dumps.",
            usable(&u),
            human_bytes(by)
        ),
        (_, Some(_), None) => String::new(),
    };
    text.push_str(&sentence);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_like_the_viewer() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(1536.0), "1.50 KiB");
        assert_eq!(human_bytes(63_590.0), "62.1 KiB");
        assert_eq!(human_bytes(-2.0 * 1048576.0), "-2.00 MiB");
    }

    fn interval(estimate: f64, low: f64, high: f64) -> Interval {
        Interval {
            estimate,
            low,
            high,
        }
    }

    #[test]
    fn an_empty_estimate_is_never_called_exact_at_a_sparse_period() {
        let live = LiveHeap {
            requested: interval(0.0, 0.0, 0.0),
            sampled_objects: 0,
            every_allocation_sampled: false,
            usable_per_requested: None,
            usable: None,
            exact_usable: Some(63_590),
        };
        let text = words(&live, 524_288);
        assert!(!text.contains("exact ("), "{text}");
        assert!(text.contains("No sampled object is live"), "{text}");
        assert!(text.contains("62.1 KiB usable bytes are live"), "{text}");
    }

    #[test]
    fn the_usable_ratio_reconciles_the_counter() {
        let live = LiveHeap {
            requested: interval(1000.0, 1000.0, 1000.0),
            sampled_objects: 10,
            every_allocation_sampled: true,
            usable_per_requested: Some(1.04),
            usable: Some(interval(1040.0, 1040.0, 1040.0)),
            exact_usable: Some(1090),
        };
        let text = words(&live, 1);
        assert!(
            text.starts_with("Live heap 1000 B requested, exact"),
            "{text}"
        );
        assert!(text.contains("50 B above that"), "{text}");
    }
}
