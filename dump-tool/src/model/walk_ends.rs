//! How the walks of the sampled stacks ended (format 5's `runtime.walk_ends`):
//! summed over a view's dumps, and the one sentence a report prints when some
//! stacks were cut short, saying why and what to do about it.
//!
//! Plain data: no I/O.

use heapsample_format::{Dump, WalkEnds};

/// The walk endings of `dumps` together (each dump counts its own process's
/// samples, as its exact counters do).
pub fn sum<'a>(dumps: impl IntoIterator<Item = &'a Dump>) -> WalkEnds {
    dumps
        .into_iter()
        .map(|dump| dump.runtime.walk_ends)
        .fold(WalkEnds::default(), |sum, ends| WalkEnds {
            complete: sum.complete + ends.complete,
            depth_limit: sum.depth_limit + ends.depth_limit,
            no_unwind_info: sum.no_unwind_info + ends.no_unwind_info,
            unreadable_stack: sum.unreadable_stack + ends.unreadable_stack,
        })
}

/// Walks counted in all.
pub fn walks(ends: &WalkEnds) -> u64 {
    ends.complete + ends.depth_limit + ends.no_unwind_info + ends.unreadable_stack
}

/// Walks that ended before the outermost frame.
pub fn early(ends: &WalkEnds) -> u64 {
    ends.depth_limit + ends.no_unwind_info + ends.unreadable_stack
}

/// "N of M sampled stacks ended early: …" with each reason and its remedy, or
/// `None` when every walk reached the outermost frame (or the dump does not say).
pub fn early_sentence(ends: &WalkEnds) -> Option<String> {
    let early = early(ends);
    if early == 0 {
        return None;
    }
    let reasons = [
        (
            ends.no_unwind_info,
            "in code without unwind information that keeps no frame pointer (JIT code, \
             assembly without CFI: build with -fasynchronous-unwind-tables or \
             -fno-omit-frame-pointer; run node with --perf-basic-prof, java with \
             -XX:+PreserveFramePointer)",
        ),
        (
            ends.depth_limit,
            "at the frame limit (raise prof_bt_max, at most 256)",
        ),
        (
            ends.unreadable_stack,
            "in code without unwind information on a stack of unknown bounds (an \
             alternate signal stack or a coroutine's), where no frame-pointer step is safe",
        ),
    ];
    let parts: Vec<String> = reasons
        .iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, why)| format!("{count} {why}"))
        .collect();
    Some(format!(
        "{early} of {} sampled stacks ended early, their outer frames missing: {}",
        walks(ends),
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_walks_say_nothing_and_early_ones_say_why() {
        let whole = WalkEnds {
            complete: 40,
            ..WalkEnds::default()
        };
        assert_eq!(early_sentence(&whole), None);
        assert_eq!(early_sentence(&WalkEnds::default()), None);
        let ends = WalkEnds {
            complete: 90,
            depth_limit: 3,
            no_unwind_info: 7,
            unreadable_stack: 0,
        };
        let sentence = early_sentence(&ends).unwrap();
        assert!(
            sentence.starts_with("10 of 100 sampled stacks ended early"),
            "{sentence}"
        );
        let unwind = sentence
            .find("7 in code without unwind information")
            .unwrap();
        let limit = sentence
            .find("3 at the frame limit (raise prof_bt_max")
            .unwrap();
        assert!(unwind < limit, "{sentence}");
        assert!(!sentence.contains("0 in code"), "{sentence}");
    }

    #[test]
    fn dumps_add_up() {
        let mut one = heapsample_format::testing::dump();
        one.runtime.walk_ends.complete = 5;
        one.runtime.walk_ends.no_unwind_info = 2;
        let mut two = heapsample_format::testing::dump();
        two.runtime.walk_ends.complete = 1;
        two.runtime.walk_ends.unreadable_stack = 4;
        let sum = sum([&one, &two]);
        assert_eq!(
            sum,
            WalkEnds {
                complete: 6,
                depth_limit: 0,
                no_unwind_info: 2,
                unreadable_stack: 4
            }
        );
        assert_eq!((walks(&sum), early(&sum)), (12, 6));
    }
}
