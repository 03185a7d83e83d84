//! A service left on: `prof_interval_s:1,prof_dump_limit:50` for ten
//! minutes. Cheap on CPU (the program allocates 64 KiB a second), so
//! `scripts/test.sh` starts this binary in the background at its start
//! and counts its result at the end (the main run filters it out).

mod dump_series_common;

use std::time::Duration;

use dump_series_common::start;
use heapsample_tests::TempDir;
use heapsample_tests::format::Trigger;

const LIMIT: usize = 50;

/// Ten minutes of a dump a second, watched every 3 s: never more than 50
/// dumps; the first, the largest heap, the newest and the asked-for one
/// always there; every logged removal a name that vanished; the kept
/// series spread over the run.
///
/// The spread bound, from the rule (remove the dump whose removal leaves
/// the smallest gap): the widest gap `G` at the end was made by a removal
/// from a full series of 50 dumps (49 gaps) that picked the smallest sum
/// of two neighbouring gaps among the dumps that may go. Pairing the gaps
/// two by two gives 24 disjoint pairs, of which the two interior dumps
/// kept for good (largest heap, the asked-for one) spoil at most two: 22
/// pairs each summing to `G` or more, and gaps only grow later, so
/// `22 G ≤ span`, i.e. `G ≤ 2 span / (50 − 6)`, 2.2 times the even spacing
/// `span / 49` (the rule's own simulation reaches 1.96: the unit test
/// `a_thinned_series_stays_spread`). It holds for any dump times, so a
/// loaded machine's late ticks cannot fail it.
#[test]
fn dump_series_ten_minutes() {
    let dir = TempDir::new("series-long");
    let series = start(dir.path(), 600, 200, 400, "prof_dump_limit:50");
    let watched = series.watch(Duration::from_secs(3), Duration::from_secs(900), |names| {
        assert!(names.len() <= LIMIT, "{} dumps: {names:?}", names.len());
    });
    watched.check_kept_and_logged(false);
    let kept: Vec<_> = watched
        .left
        .iter()
        .map(|file| &watched.seen[&file.name])
        .collect();
    assert_eq!(kept.len(), LIMIT, "{:?}", watched.left);
    assert_eq!(kept.last().unwrap().trigger, Trigger::Final);
    assert!(kept.iter().any(|dump| dump.trigger == Trigger::Manual));
    let written = kept.last().unwrap().seq + 1;
    assert!(
        written >= 300,
        "only {written} dumps written in ten minutes"
    );
    let times: Vec<u64> = kept.iter().map(|dump| dump.time_unix_ns).collect();
    let span = times[LIMIT - 1] - times[0];
    let widest = times
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap();
    let bound = 2 * span / (LIMIT as u64 - 6);
    assert!(
        widest <= bound,
        "widest gap {:.1} s over the bound {:.1} s (span {:.1} s): {times:?}",
        widest as f64 / 1e9,
        bound as f64 / 1e9,
        span as f64 / 1e9
    );
    assert!(
        span >= 550_000_000_000,
        "the kept series spans the run: {:.1} s",
        span as f64 / 1e9
    );
    eprintln!(
        "{written} dumps written, {LIMIT} kept; widest gap {:.1} s, even spacing {:.1} s",
        widest as f64 / 1e9,
        span as f64 / 49e9
    );
}
