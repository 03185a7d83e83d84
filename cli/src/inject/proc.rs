//! What `/proc` says about a process without stopping it: its mappings,
//! threads, owner, tracer and state, and what each thread is blocked in.

use std::path::{Path, PathBuf};

use crate::Failure;

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    pub offset: u64,
    pub inode: u64,
    /// The file or pseudo-file (`[stack]`, `[vdso]`), or empty.
    pub path: String,
}

impl Mapping {
    /// True if `address` lies inside.
    pub fn contains(&self, address: u64) -> bool {
        (self.start..self.end).contains(&address)
    }

    /// The file name of the mapped file.
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or("")
    }
}

fn parse_mapping(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let _device = fields.next()?;
    let inode = fields.next()?.parse().ok()?;
    let path = fields.next().unwrap_or("").trim_start().to_string();
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: perms.get(2) == Some(&b'x'),
        offset,
        inode,
        path,
    })
}

/// A process, by pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Process(pub i32);

impl Process {
    fn dir(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}", self.0))
    }

    /// Does the process exist (and is it a process, not a thread id)?
    pub fn exists(&self) -> bool {
        self.0 > 0
            && std::fs::read_to_string(self.dir().join("status"))
                .ok()
                .and_then(|s| field(&s, "Tgid:").map(|t| t == self.0.to_string()))
                .unwrap_or(false)
    }

    /// Its mappings.
    pub fn maps(&self) -> Result<Vec<Mapping>, std::io::Error> {
        let text = std::fs::read_to_string(self.dir().join("maps"))?;
        Ok(text.lines().filter_map(parse_mapping).collect())
    }

    /// The value of a field of `/proc/PID/status` (e.g. `TracerPid:`).
    pub fn status_field(&self, name: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.dir().join("status")).ok()?;
        field(&text, name).map(str::to_string)
    }

    /// The real user id of the process.
    pub fn uid(&self) -> Option<u32> {
        self.status_field("Uid:")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// When it started, in clock ticks since boot (with the pid, what tells
    /// it from a later process that reused the pid).
    pub fn start_ticks(&self) -> Option<u64> {
        let stat = std::fs::read_to_string(self.dir().join("stat")).ok()?;
        stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(19)?
            .parse()
            .ok()
    }

    /// The credentials it creates files with: its file-system user and
    /// group and its supplementary groups.
    pub fn credentials(&self) -> Option<Credentials> {
        let text = std::fs::read_to_string(self.dir().join("status")).ok()?;
        let fourth = |name: &str| -> Option<u32> {
            field(&text, name)?.split_whitespace().nth(3)?.parse().ok()
        };
        Some(Credentials {
            uid: fourth("Uid:")?,
            gid: fourth("Gid:")?,
            groups: field(&text, "Groups:")
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect(),
        })
    }

    /// The pid of its tracer, or 0.
    pub fn tracer(&self) -> i32 {
        self.status_field("TracerPid:")
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    }

    /// Its state letter (`R`, `S`, `D`, `T`, `t`, `Z`...).
    pub fn state(&self) -> Option<char> {
        self.status_field("State:")?.chars().next()
    }

    /// Seconds since it started (`/proc/PID/stat` against `/proc/uptime`).
    pub fn age_seconds(&self) -> Option<f64> {
        let ticks = self.start_ticks()? as f64;
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        Some(uptime - ticks / per_second)
    }

    /// Its command name.
    pub fn name(&self) -> String {
        self.status_field("Name:").unwrap_or_default()
    }

    /// Its thread ids, the main thread first.
    pub fn threads(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = std::fs::read_dir(self.dir().join("task"))
            .map(|dir| {
                dir.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort_by_key(|&tid| (tid != self.0, tid));
        ids
    }

    /// What thread `tid` is doing, from `/proc/PID/task/TID/syscall`.
    pub fn blocked_in(&self, tid: i32) -> Blocked {
        let path = self.dir().join(format!("task/{tid}/syscall"));
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut fields = text.split_whitespace();
        match fields.next() {
            Some("running") | None => Blocked::Running,
            Some(number) => match number.parse::<i64>() {
                Ok(number) if number >= 0 => Blocked::Syscall(number),
                _ => Blocked::Other,
            },
        }
    }

    /// Where `path` (as the process sees it) is in this process's view of
    /// the file system.
    pub fn root_path(&self, path: &Path) -> PathBuf {
        let relative = path.strip_prefix("/").unwrap_or(path);
        self.dir().join("root").join(relative)
    }

    /// Where the file of `mapping` may be opened from here, best first: the
    /// kernel's own link to the mapped file (`/proc/PID/map_files/`, exact
    /// whatever the namespaces and root; it needs CAP_SYS_ADMIN or
    /// CAP_CHECKPOINT_RESTORE), the path through the process's root (its
    /// own mount namespace), and the path as `maps` prints it (which the
    /// kernel makes relative to the reader's root: a chrooted process's
    /// files are printed with their path here). The caller checks the
    /// inode.
    pub fn mapped_file_candidates(&self, mapping: &Mapping) -> Vec<PathBuf> {
        let path = Path::new(
            mapping
                .path
                .strip_suffix(" (deleted)")
                .unwrap_or(&mapping.path),
        );
        vec![
            self.dir()
                .join("map_files")
                .join(format!("{:x}-{:x}", mapping.start, mapping.end)),
            self.root_path(path),
            path.to_path_buf(),
        ]
    }

    /// The process's pid in each PID namespace it is in, outermost first
    /// (`NSpid`): one entry outside any container.
    pub fn namespace_pids(&self) -> Vec<i32> {
        self.status_field("NSpid:")
            .map(|pids| {
                pids.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `PID (NAME)`, with the pid inside its container when it has one
    /// there (`4242 (leak, pid 1 in its container)`).
    pub fn describe(&self, name: &str) -> String {
        match self.namespace_pids().last() {
            Some(&inner) if self.namespace_pids().len() > 1 => {
                format!("{} ({name}, pid {inner} in its container)", self.0)
            }
            _ => format!("{} ({name})", self.0),
        }
    }
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .map(str::trim)
}

/// A process's file-system credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// What a thread is doing, as far as `/proc` says without stopping it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Running (or runnable).
    Running,
    /// Blocked in this system call.
    Syscall(i64),
    /// Blocked, not in a system call (a page fault, a stop).
    Other,
}

/// The capability's bit number (linux/capability.h).
const CAP_SYS_PTRACE: u32 = 19;

/// The caller's effective capabilities include `CAP_SYS_PTRACE`.
pub fn have_cap_sys_ptrace() -> bool {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    field(&text, "CapEff:")
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}

/// Yama's `ptrace_scope`, where the kernel has Yama.
pub fn yama_scope() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Fails with the process gone.
pub fn gone(process: Process) -> Failure {
    Failure::new(format!(
        "process {} exited during the operation; nothing was left in it",
        process.0
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let m = parse_mapping(
            "7f1c2a400000-7f1c2a428000 r-xp 00028000 08:01 1319522                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(
            (m.start, m.end, m.offset, m.inode),
            (0x7f1c2a400000, 0x7f1c2a428000, 0x28000, 1319522)
        );
        assert!(m.executable);
        assert_eq!(m.file_name(), "libc.so.6");
        let anon = parse_mapping("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(anon.path, "");
    }

    #[test]
    fn this_process_is_seen() {
        let me = Process(std::process::id() as i32);
        assert!(me.exists());
        assert_eq!(me.threads()[0], me.0);
        assert!(
            me.maps()
                .unwrap()
                .iter()
                .any(|m| m.path.ends_with("libc.so.6"))
        );
    }
}
