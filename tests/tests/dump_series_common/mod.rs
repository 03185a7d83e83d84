//! A bounded dump series watched while it is written: `dump_series.c`
//! runs under the shim with `prof_interval_s:1` and a bound, and the test
//! lists the directory every `poll` until the program exits, decoding each
//! dump it has not seen yet (so it sees every dump that lived longer than a
//! poll, and the names that vanished, and when).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use heapsample_tests::format::Dump;
use heapsample_tests::{BuildOptions, DumpFile, compile_c, dump_files_in, shim_path};

/// What the program says and what the directory held.
pub struct Watched {
    /// The program's pid.
    pub pid: u32,
    /// When the program held its peak heap (wall clock, ns since the epoch).
    pub peak_ns: (u64, u64),
    /// The process's dump names at each poll (and once more after it exited).
    pub polls: Vec<Vec<String>>,
    /// Every dump of the process seen, by name.
    pub seen: BTreeMap<String, Dump>,
    /// Its dumps left at the end.
    pub left: Vec<DumpFile>,
    /// The program's stderr.
    pub stderr: String,
}

/// A running program of the series.
pub struct Series {
    child: std::process::Child,
    dir: PathBuf,
}

/// Start `dump_series SECONDS PEAK MANUAL` writing into `dir` with
/// `prof_interval_s:1,lg_prof_sample:12,prof_exact:true` and `bounds`
/// (e.g. `prof_dump_limit:5`).
pub fn start(dir: &Path, seconds: u32, peak: u32, manual: i32, bounds: &str) -> Series {
    let program = compile_c("dump_series.c", &BuildOptions::no_pie());
    let child = Command::new(&program.path)
        .args([seconds.to_string(), peak.to_string(), manual.to_string()])
        .current_dir(dir)
        .env("LD_PRELOAD", shim_path())
        .env(
            "PROF_CONF",
            format!(
                "prof_interval_s:1,lg_prof_sample:12,prof_exact:true,{bounds},prof_prefix:{}/heapsample",
                dir.display()
            ),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dump_series starts");
    Series {
        child,
        dir: dir.to_path_buf(),
    }
}

impl Series {
    /// The program's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Poll until the program exits (at most `limit`), calling `each` with
    /// the poll's names of this process; then read what it printed.
    pub fn watch(
        mut self,
        poll: Duration,
        limit: Duration,
        mut each: impl FnMut(&[String]),
    ) -> Watched {
        let pid = self.child.id();
        let started = Instant::now();
        let mut watched = Watched {
            pid,
            peak_ns: (0, 0),
            polls: Vec::new(),
            seen: BTreeMap::new(),
            left: Vec::new(),
            stderr: String::new(),
        };
        loop {
            let exited = self.child.try_wait().expect("try_wait").is_some();
            let mut files = own_dumps(&self.dir, pid);
            // A dump may go between the listing and the read: then it was
            // seen too briefly to count, and this poll came after it went.
            files.retain(|file| {
                if watched.seen.contains_key(&file.name) {
                    return true;
                }
                let Ok(bytes) = std::fs::read(&file.path) else {
                    return false;
                };
                // What does not decode is not the profiler's (a test's
                // planted file): the caller checks those by name.
                if let Ok(dump) = heapsample_tests::format::decode(&bytes) {
                    watched.seen.insert(file.name.clone(), dump);
                }
                true
            });
            let names: Vec<String> = files.iter().map(|file| file.name.clone()).collect();
            each(&names);
            watched.polls.push(names);
            if exited {
                watched.left = files;
                break;
            }
            if started.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("dump_series ran past {limit:?}");
            }
            std::thread::sleep(poll);
        }
        let output = self.child.wait_with_output().expect("output");
        watched.stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "{:?}: {}",
            output.status,
            watched.stderr
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let times: Vec<u64> = stdout
            .trim()
            .strip_prefix("peak ")
            .expect("the program prints its peak")
            .split(' ')
            .map(|t| (t.parse::<f64>().expect("a time") * 1e9) as u64)
            .collect();
        watched.peak_ns = (times[0], times[1]);
        watched
    }
}

/// The dumps of process `pid` in `dir`, in the order written.
pub fn own_dumps(dir: &Path, pid: u32) -> Vec<DumpFile> {
    let mut files: Vec<DumpFile> = dump_files_in(dir)
        .into_iter()
        .filter(|file| file.pid == pid)
        .collect();
    files.sort_by_key(|file| file.seq);
    files
}

impl Watched {
    fn dump(&self, name: &str) -> &Dump {
        self.seen
            .get(name)
            .unwrap_or_else(|| panic!("{name} was never seen"))
    }

    /// What must hold of every bounded series: at each poll the first
    /// dump and the newest seen so far are there and the dump with the
    /// largest live heap of all seen so far too; every name that vanished
    /// is listed once in a later dump's `removed_dumps`, and every listed
    /// name vanished (with `complete_logs`: when polls come often enough
    /// to see every dump, every vanished name is logged too).
    pub fn check_kept_and_logged(&self, complete_logs: bool) {
        let mut newest_seq = 0;
        let mut largest: Option<(u64, &str)> = None;
        let mut vanished: BTreeMap<String, usize> = BTreeMap::new();
        let mut previous: Vec<String> = Vec::new();
        for (at, names) in self.polls.iter().enumerate() {
            for name in &previous {
                if !names.contains(name) {
                    vanished.insert(name.clone(), at);
                }
            }
            previous = names.clone();
            let Some(first) = names.first() else {
                continue;
            };
            assert_eq!(
                self.dump(first).seq,
                0,
                "poll {at}: the first dump went: {names:?}"
            );
            for name in names {
                let dump = self.dump(name);
                newest_seq = newest_seq.max(dump.seq);
                let heap = dump.totals.live_usable_bytes.expect("prof_exact");
                if largest.is_none_or(|(most, _)| heap > most) {
                    largest = Some((heap, self.name_of(dump.seq)));
                }
            }
            let last = self.dump(names.last().unwrap());
            assert_eq!(
                last.seq, newest_seq,
                "poll {at}: the newest went: {names:?}"
            );
            let (_, peak) = largest.unwrap();
            assert!(
                names.iter().any(|name| name == peak),
                "poll {at}: {peak} (largest heap) went: {names:?}"
            );
        }
        let mut logged: BTreeMap<String, u64> = BTreeMap::new();
        for dump in self.seen.values() {
            for removed in &dump.removed_dumps {
                assert!(
                    removed.seq < dump.seq,
                    "{} logged in dump {}",
                    removed.file_name,
                    dump.seq
                );
                let before = logged.insert(removed.file_name.clone(), removed.seq);
                assert!(before.is_none(), "{} logged twice", removed.file_name);
                let vanished_dump = self.seen.get(&removed.file_name);
                if let Some(gone) = vanished_dump {
                    assert_eq!(
                        (gone.seq, gone.trigger, gone.time_unix_ns),
                        (removed.seq, removed.trigger, removed.time_unix_ns),
                        "{}",
                        removed.file_name
                    );
                }
            }
        }
        for name in logged.keys() {
            assert!(
                vanished.contains_key(name) || !self.seen.contains_key(name),
                "{name} logged as removed but still there"
            );
        }
        if complete_logs {
            // A dump that logs removals may itself be removed before a
            // poll sees it; with polls 5 times as often as dumps (each
            // lives a second at least) none is missed, unless a loaded
            // machine holds the watcher off its core for over a second.
            // So a name that vanished between two polls must be logged,
            // unless a dump written between those polls (a sequence number
            // above the newest of the earlier poll, up to the newest of the
            // later) was never seen: that one may hold the log. What
            // vanished at the last poll (after the exit) may have gone
            // after the exit dump, which no dump follows to log it.
            let last = self.polls.len() - 1;
            let seqs: std::collections::BTreeSet<u64> =
                self.seen.values().map(|dump| dump.seq).collect();
            let newest = seqs.last().copied().unwrap_or(0);
            let unseen: Vec<u64> = (0..=newest).filter(|seq| !seqs.contains(seq)).collect();
            let newest_at: Vec<u64> = self
                .polls
                .iter()
                .map(|names| {
                    let seqs = names.iter().filter_map(|name| self.seen.get(name));
                    seqs.map(|dump| dump.seq).max().unwrap_or(0)
                })
                .collect();
            let excused = |at: usize| {
                at > 0
                    && unseen
                        .iter()
                        .any(|&seq| seq > newest_at[at - 1] && seq <= newest_at[at])
            };
            let unlogged: Vec<&String> = vanished
                .iter()
                .filter(|(name, at)| **at < last && !logged.contains_key(*name) && !excused(**at))
                .map(|(name, _)| name)
                .collect();
            assert!(unlogged.is_empty(), "removed without a log: {unlogged:?}");
            if !unseen.is_empty() {
                eprintln!("dumps no poll saw: {unseen:?}");
            }
        }
    }

    fn name_of(&self, seq: u64) -> &str {
        self.seen
            .iter()
            .find(|(_, dump)| dump.seq == seq)
            .map(|(name, _)| name.as_str())
            .unwrap()
    }
}
