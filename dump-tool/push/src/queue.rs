//! The pusher's state directory: what was seen and what waits to be sent,
//! kept across restarts of the pusher.
//!
//! - `seen`: the identity of every dump already taken in (one line each,
//!   appended after its requests are queued), so a dump is queued once;
//!   rewritten, smaller, to the dumps still on disk when it grows.
//! - `queue/NNNNNNNNNNNNNNNN.TARGET`: one request each, written whole
//!   (a temporary file renamed into place), removed once the receiver took
//!   it or refused it. A first line of JSON says where it goes; the body
//!   follows. Oldest first by number.
//! - `lock`: held (`flock`) while a pusher runs, so two pushers never share
//!   the state.
//!
//! Its files are never opened through a symbolic link: temporary files are
//! created new, `seen` and `lock` opened with `O_NOFOLLOW`.
//!
//! The queue is bounded in count and bytes; a request that would pass a
//! bound drops the oldest waiting ones, each with a line. A crash between a
//! receiver's answer and the removal of its file sends that request again
//! at the next start (at least once; `SIGTERM` and `SIGINT` stop between
//! requests, so a pusher stopped by them never sends one twice).

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where one queued request goes and what it carries.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Header {
    /// The dump's identity (`seen`'s key).
    pub key: String,
    /// The dump's id (its path below the directory given), for messages.
    pub dump: String,
    /// `pyroscope` or `otlp`.
    pub target: String,
    /// The query string (without `?`), empty for none.
    pub query: String,
    pub content_type: String,
}

/// One request waiting in the queue.
#[derive(Clone, Debug)]
pub struct Waiting {
    pub number: u64,
    pub header: Header,
    path: PathBuf,
    bytes: u64,
}

/// How much may wait.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub count: usize,
    pub bytes: u64,
}

/// The state directory, locked.
pub struct State {
    dir: PathBuf,
    seen: HashSet<String>,
    seen_lines: usize,
    seen_file: File,
    waiting: BTreeMap<u64, Waiting>,
    next: u64,
    bounds: Bounds,
    _lock: Flock<File>,
}

impl State {
    /// Open (creating) the state in `dir`; refused while another pusher
    /// holds it.
    pub fn open(dir: &Path, bounds: Bounds) -> Result<State, String> {
        let queue = dir.join("queue");
        fs::create_dir_all(&queue).map_err(|e| {
            format!(
                "cannot create the state directory {}: {e} (give another with --state DIR)",
                queue.display()
            )
        })?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(dir.join("lock"))
            .map_err(|e| format!("cannot open {}: {e}", dir.join("lock").display()))?;
        let lock = Flock::lock(lock, FlockArg::LockExclusiveNonblock).map_err(|_| {
            format!(
                "another heapdiff push uses the state directory {} (give each its own --state)",
                dir.display()
            )
        })?;
        let seen_path = dir.join("seen");
        let mut seen = HashSet::new();
        let mut seen_lines = 0;
        if let Ok(file) = File::open(&seen_path) {
            for line in BufReader::new(file).lines().map_while(Result::ok) {
                seen_lines += 1;
                if !line.is_empty() {
                    seen.insert(line);
                }
            }
        }
        let seen_file = OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&seen_path)
            .map_err(|e| format!("cannot open {}: {e}", seen_path.display()))?;
        let mut state = State {
            dir: dir.to_path_buf(),
            seen,
            seen_lines,
            seen_file,
            waiting: BTreeMap::new(),
            next: 0,
            bounds,
            _lock: lock,
        };
        state.load_queue()?;
        Ok(state)
    }

    /// The requests left by the last run (temporary files of a write it
    /// did not finish are removed).
    fn load_queue(&mut self) -> Result<(), String> {
        let queue = self.dir.join("queue");
        let entries =
            fs::read_dir(&queue).map_err(|e| format!("cannot read {}: {e}", queue.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                let _ = fs::remove_file(&path);
                continue;
            }
            let Some(number) = name.split('.').next().and_then(|n| n.parse::<u64>().ok()) else {
                continue;
            };
            match read_header(&path) {
                Ok((header, _)) => {
                    let bytes = entry.metadata().map_or(0, |m| m.len());
                    self.seen.insert(header.key.clone());
                    self.next = self.next.max(number + 1);
                    self.waiting.insert(
                        number,
                        Waiting {
                            number,
                            header,
                            path,
                            bytes,
                        },
                    );
                }
                Err(why) => {
                    eprintln!(
                        "heapdiff: push: {} is not a queued request ({why}); removed",
                        path.display()
                    );
                    let _ = fs::remove_file(&path);
                }
            }
        }
        Ok(())
    }

    pub fn seen(&self, key: &str) -> bool {
        self.seen.contains(key)
    }

    /// Queue the requests of one dump, then remember it as seen.
    pub fn enqueue(&mut self, key: &str, requests: Vec<(Header, Vec<u8>)>) -> Result<(), String> {
        for (header, body) in requests {
            let number = self.next;
            self.next += 1;
            let name = format!("{number:016}.{}", header.target);
            let path = self.dir.join("queue").join(&name);
            let temporary = self.dir.join("queue").join(format!(".{name}.tmp"));
            let mut bytes = serde_json::to_vec(&header).map_err(|e| e.to_string())?;
            bytes.push(b'\n');
            bytes.extend_from_slice(&body);
            write_whole(&temporary, &path, &bytes)
                .map_err(|e| format!("cannot queue in {}: {e}", path.display()))?;
            self.waiting.insert(
                number,
                Waiting {
                    number,
                    header,
                    path,
                    bytes: bytes.len() as u64,
                },
            );
            self.bound();
        }
        writeln!(self.seen_file, "{key}").map_err(|e| format!("cannot write seen: {e}"))?;
        self.seen.insert(key.to_string());
        self.seen_lines += 1;
        Ok(())
    }

    /// Drop the oldest requests while the queue passes a bound, one line
    /// each.
    fn bound(&mut self) {
        loop {
            let bytes: u64 = self.waiting.values().map(|w| w.bytes).sum();
            if self.waiting.len() <= self.bounds.count && bytes <= self.bounds.bytes {
                return;
            }
            let Some((_, oldest)) = self.waiting.pop_first() else {
                return;
            };
            eprintln!(
                "heapdiff: push queue over its bound ({} requests, {} bytes): dropped the oldest, {} for {}",
                self.bounds.count, self.bounds.bytes, oldest.header.dump, oldest.header.target
            );
            let _ = fs::remove_file(&oldest.path);
        }
    }

    /// The waiting requests, oldest first.
    pub fn waiting(&self) -> Vec<Waiting> {
        self.waiting.values().cloned().collect()
    }

    pub fn waiting_count(&self) -> usize {
        self.waiting.len()
    }

    /// The body of a waiting request.
    pub fn body(&self, waiting: &Waiting) -> Result<Vec<u8>, String> {
        read_header(&waiting.path).map(|(_, body)| body)
    }

    /// A request sent or given up: its file removed.
    pub fn done(&mut self, number: u64) {
        if let Some(waiting) = self.waiting.remove(&number) {
            let _ = fs::remove_file(&waiting.path);
        }
    }

    /// Forget the seen dumps that are neither on disk (`present`) nor
    /// waiting, once `seen` holds many more lines than that.
    pub fn compact(&mut self, present: &HashSet<String>) -> Result<(), String> {
        let waiting: HashSet<&String> = self.waiting.values().map(|w| &w.header.key).collect();
        let keep: Vec<String> = self
            .seen
            .iter()
            .filter(|key| present.contains(*key) || waiting.contains(key))
            .cloned()
            .collect();
        if self.seen_lines <= 2 * keep.len() + 1024 {
            return Ok(());
        }
        let path = self.dir.join("seen");
        let mut text = keep.join("\n");
        text.push('\n');
        write_whole(&self.dir.join(".seen.tmp"), &path, text.as_bytes())
            .map_err(|e| format!("cannot rewrite {}: {e}", path.display()))?;
        self.seen_file = OpenOptions::new()
            .append(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        self.seen_lines = keep.len();
        self.seen = keep.into_iter().collect();
        Ok(())
    }
}

/// Write `bytes` to `temporary` (a new file: a leftover is removed first,
/// never written through), flushed to disk, then rename it to `path`.
fn write_whole(temporary: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let _ = fs::remove_file(temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(temporary, path)
}

/// A queued file's header and body.
fn read_header(path: &Path) -> Result<(Header, Vec<u8>), String> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("no header line")?;
    let header: Header = serde_json::from_slice(&bytes[..end]).map_err(|e| e.to_string())?;
    Ok((header, bytes[end + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(key: &str) -> Header {
        Header {
            key: key.into(),
            dump: format!("{key}.prof"),
            target: "otlp".into(),
            query: String::new(),
            content_type: "application/x-protobuf".into(),
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("heapdiff-push-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn what_waits_and_what_was_seen_survive_a_restart() {
        let dir = temp_dir("restart");
        let bounds = Bounds {
            count: 10,
            bytes: 1 << 20,
        };
        {
            let mut state = State::open(&dir, bounds).unwrap();
            assert!(
                State::open(&dir, bounds).is_err(),
                "a second pusher is refused"
            );
            state
                .enqueue("a", vec![(header("a"), b"one".to_vec())])
                .unwrap();
            state
                .enqueue("b", vec![(header("b"), b"two".to_vec())])
                .unwrap();
            let first = state.waiting()[0].number;
            state.done(first);
        }
        let state = State::open(&dir, bounds).unwrap();
        assert!(state.seen("a") && state.seen("b") && !state.seen("c"));
        let waiting = state.waiting();
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].header, header("b"));
        assert_eq!(state.body(&waiting[0]).unwrap(), b"two");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_oldest_are_dropped_past_the_count_bound() {
        let dir = temp_dir("bound");
        let bounds = Bounds {
            count: 3,
            bytes: 1 << 20,
        };
        let mut state = State::open(&dir, bounds).unwrap();
        for key in ["a", "b", "c", "d", "e"] {
            state
                .enqueue(key, vec![(header(key), vec![0; 10])])
                .unwrap();
        }
        let keys: Vec<String> = state.waiting().into_iter().map(|w| w.header.key).collect();
        assert_eq!(keys, ["c", "d", "e"]);
        assert_eq!(fs::read_dir(dir.join("queue")).unwrap().count(), 3);
        assert!(state.seen("a"), "dropped, not to be queued again");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn seen_is_rewritten_to_the_dumps_still_there_once_it_grows() {
        let dir = temp_dir("compact");
        let bounds = Bounds {
            count: 10,
            bytes: 1 << 20,
        };
        {
            let mut state = State::open(&dir, bounds).unwrap();
            for i in 0..1100 {
                state.enqueue(&format!("k{i}"), Vec::new()).unwrap();
            }
            state
                .enqueue("waiting", vec![(header("waiting"), b"x".to_vec())])
                .unwrap();
            let present = HashSet::from(["k7".to_string()]);
            state.compact(&present).unwrap();
            assert!(state.seen("k7") && state.seen("waiting") && !state.seen("k8"));
            state.enqueue("k1100", Vec::new()).unwrap();
        }
        let state = State::open(&dir, bounds).unwrap();
        let seen = fs::read_to_string(dir.join("seen")).unwrap();
        assert_eq!(seen.lines().count(), 3, "{seen}");
        assert!(state.seen("k7") && state.seen("waiting") && state.seen("k1100"));
        assert!(!state.seen("k8"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
