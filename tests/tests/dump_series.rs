//! `prof_dump_limit` and `prof_dump_bytes`: a process keeps its own dump
//! series within its bounds by removing older dumps of its own: never the
//! first, the largest heap, the newest or one a user asked for; never a
//! file it did not write; each removal logged in a later dump.

mod dump_series_common;

use std::collections::BTreeMap;
use std::time::Duration;

use dump_series_common::{own_dumps, start};
use heapsample_tests::TempDir;
use heapsample_tests::format::Trigger;

/// Polls come five times a dump, so every dump is seen.
const POLL: Duration = Duration::from_millis(200);
/// A run of N seconds ends well within this.
fn limit(seconds: u32) -> Duration {
    Duration::from_secs(u64::from(seconds) + 60)
}

#[test]
fn a_count_bound_keeps_the_first_the_peak_the_newest_and_the_asked_for() {
    let dir = TempDir::new("series-count");
    let series = start(dir.path(), 14, 5, 8, "prof_dump_limit:5");
    let watched = series.watch(POLL, limit(14), |names| {
        assert!(names.len() <= 5, "{names:?}");
    });
    watched.check_kept_and_logged(true);
    let left: Vec<_> = watched.left.iter().map(|f| f.name.clone()).collect();
    assert_eq!(left.len(), 5, "{left:?}");
    let trigger = |name: &String| watched.seen[name].trigger;
    assert!(
        left.iter().any(|n| trigger(n) == Trigger::Manual),
        "{left:?}"
    );
    assert_eq!(trigger(left.last().unwrap()), Trigger::Final, "{left:?}");
    // The kept dump with the largest heap was written while the program
    // held its peak.
    let peak = left
        .iter()
        .map(|name| &watched.seen[name])
        .max_by_key(|dump| dump.totals.live_usable_bytes)
        .unwrap();
    let (from, to) = watched.peak_ns;
    assert!(
        (from..=to).contains(&peak.time_unix_ns),
        "peak dump {} at {} outside {from}..{to}",
        peak.seq,
        peak.time_unix_ns
    );
    assert!(
        watched.seen.len() >= 12,
        "a dump a second: {:?}",
        watched.seen.keys()
    );
}

#[test]
fn a_byte_bound_keeps_the_series_within_its_bytes() {
    const BOUND: u64 = 12 << 10;
    let dir = TempDir::new("series-bytes");
    let path = dir.path().to_path_buf();
    let series = start(dir.path(), 16, 6, -1, "prof_dump_bytes:12k");
    let pid = series.pid();
    let mut largest_dump = 0;
    let mut most = 0;
    let watched = series.watch(POLL, limit(16), |_| {
        // Sizes at this moment (a name may go between list and stat).
        let sizes: Vec<u64> = own_dumps(&path, pid)
            .iter()
            .filter_map(|file| std::fs::metadata(&file.path).ok())
            .map(|meta| meta.len())
            .collect();
        largest_dump = largest_dump.max(sizes.iter().copied().max().unwrap_or(0));
        most = most.max(sizes.iter().sum::<u64>());
    });
    watched.check_kept_and_logged(true);
    let left: u64 = watched
        .left
        .iter()
        .map(|file| std::fs::metadata(&file.path).unwrap().len())
        .sum();
    assert!(left <= BOUND, "{left} bytes left over {BOUND}");
    // Room is made before a dump for one as large as the newest; a dump
    // larger than that passes the bound until it is written and the
    // series thinned, so a poll may see up to one dump over.
    assert!(most <= BOUND + largest_dump, "{most} bytes seen at once");
    assert!(
        watched.left.len() >= 4 && watched.seen.len() >= 14,
        "{} left of {}",
        watched.left.len(),
        watched.seen.len()
    );
}

#[test]
fn two_processes_sharing_a_directory_each_keep_their_own_bound() {
    let dir = TempDir::new("series-shared");
    let watchers: Vec<_> = [(4, "prof_dump_limit:4"), (6, "prof_dump_limit:6")]
        .into_iter()
        .map(|(bound, conf)| {
            let series = start(dir.path(), 12, 4, -1, conf);
            std::thread::spawn(move || {
                let watched = series.watch(POLL, limit(12), |names| {
                    assert!(names.len() <= bound, "{names:?}");
                });
                watched.check_kept_and_logged(true);
                (bound, watched.left.len(), watched.pid)
            })
        })
        .collect();
    for watcher in watchers {
        let (bound, left, pid) = watcher.join().expect("watcher");
        assert_eq!(left, bound, "process {pid} keeps its own {bound}");
    }
}

#[test]
fn files_the_process_did_not_write_are_never_touched() {
    let dir = TempDir::new("series-foreign");
    // Another process's dump name, and names of this series written by
    // someone else: one it will want later, one its own dump was replaced
    // by (same bytes, same size, another file).
    let foreign = dir.path().join("heapsample.1.000001.t1.prof");
    std::fs::write(&foreign, b"another process's dump").unwrap();
    let series = start(dir.path(), 12, 12, -1, "prof_dump_limit:3");
    let pid = series.pid();
    let ahead = dir.path().join(format!("heapsample.{pid}.000006.t6.prof"));
    std::fs::write(&ahead, b"planted before it was written").unwrap();
    let path = dir.path().to_path_buf();
    let mut replaced: Option<(std::path::PathBuf, Vec<u8>)> = None;
    let watched = series.watch(Duration::from_millis(50), limit(12), |names| {
        let own = names
            .iter()
            .filter(|name| !name.contains(".000006.t6."))
            .count();
        let extra = usize::from(replaced.is_some());
        assert!(own <= 3 + extra, "{names:?}");
        let first = names.iter().find(|name| name.contains(".000001.t1."));
        if let (None, Some(name)) = (&replaced, first) {
            let target = path.join(name);
            let Ok(bytes) = std::fs::read(&target) else {
                return;
            };
            let copy = path.join("replacement");
            std::fs::write(&copy, &bytes).unwrap();
            std::fs::rename(&copy, &target).unwrap();
            replaced = Some((target, bytes));
        }
    });
    assert_eq!(
        std::fs::read(&foreign).unwrap(),
        b"another process's dump",
        "the other process's dump"
    );
    assert_eq!(
        std::fs::read(&ahead).unwrap(),
        b"planted before it was written",
        "the planted name"
    );
    let (target, bytes) = replaced.expect("dump 1 was seen and replaced in time");
    assert_eq!(std::fs::read(&target).unwrap(), bytes, "the replaced dump");
    // The process wrote on beside them, within its bound (the replaced
    // one is not its own any more).
    let written: BTreeMap<u64, Trigger> = watched
        .left
        .iter()
        .filter(|file| file.path != ahead && file.path != target)
        .map(|file| (file.seq, watched.seen[&file.name].trigger))
        .collect();
    assert!(written.len() <= 3, "{written:?}");
    assert_eq!(
        written.values().last(),
        Some(&Trigger::Final),
        "{written:?}"
    );
    assert!(
        watched.left.iter().any(|file| file.generation.is_some()),
        "the taken name moved the process to a generation: {:?}",
        watched.left
    );
}
