//! An attached process that does not share the launcher's view of the file
//! system (another mount namespace or root: a container) cannot write its
//! dumps into the host's `-o` directory. It writes them into a private
//! directory inside its own file system (`/tmp`, `/dev/shm` or `/var/tmp`,
//! the first that is writable there: `heapsample.<host pid>`, owned by the
//! process's user), and the launcher brings them into the host's
//! directory at each `heapsample dump` and at `detach`, with the modules
//! their stacks need (`collect`), leaving nothing behind after `detach`.
//!
//! Which host directory a process's dumps go to is kept on the host, in a
//! small file per process (`$TMPDIR/heapsample-attached/PID-START`), never
//! in the process's file system.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::Failure;
use crate::inject::Process;

/// The directories inside the process's file system tried for its dumps.
const INSIDE_CANDIDATES: &[&str] = &["/tmp", "/dev/shm", "/var/tmp"];

/// Copy no module larger than this into the host's directory.
const COLLECT_LIMIT: u64 = 256 << 20;

/// Where an attached process in a container writes its dumps, and where
/// they go on the host.
pub struct Outpost {
    /// The host's `-o` directory.
    pub host_dir: PathBuf,
    /// The directory inside the process's file system.
    pub inside: PathBuf,
}

/// Does `process` see the file system as this command does (same root,
/// same mount namespace)?
pub fn shares_our_files(process: Process) -> bool {
    let same =
        |ours: &str, theirs: String| match (std::fs::metadata(ours), std::fs::metadata(theirs)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
    same("/", format!("/proc/{}/root/", process.0))
        && same("/proc/self/ns/mnt", format!("/proc/{}/ns/mnt", process.0))
}

/// The host-side record of where `process`'s dumps go.
fn state_file(process: Process) -> Option<PathBuf> {
    let start = process.start_ticks()?;
    Some(
        std::env::temp_dir()
            .join("heapsample-attached")
            .join(format!("{}-{start}", process.0)),
    )
}

/// Make the directory inside `process`'s file system for its dumps, owned
/// by its user, and record that they go to `host_dir`.
pub fn prepare(process: Process, host_dir: &Path) -> Result<Outpost, Failure> {
    let (uid, gid) = process
        .credentials()
        .map_or((0, 0), |credentials| (credentials.uid, credentials.gid));
    let name = format!("heapsample.{}", process.0);
    let mut why_not = Vec::new();
    for candidate in INSIDE_CANDIDATES {
        let inside = Path::new(candidate).join(&name);
        let here = process.root_path(&inside);
        match make_private_directory(&here, uid, gid) {
            Ok(()) => {
                let outpost = Outpost {
                    host_dir: host_dir.to_path_buf(),
                    inside,
                };
                outpost.record(process)?;
                return Ok(outpost);
            }
            Err(e) => why_not.push(format!("{candidate}: {e}")),
        }
    }
    Err(Failure::new(format!(
        "process {} has no writable /tmp, /dev/shm or /var/tmp to write its dumps in ({}): \
         mount a writable tmpfs at /tmp in its container (an emptyDir in Kubernetes); \
         nothing was changed",
        process.0,
        why_not.join("; ")
    )))
}

fn make_private_directory(here: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let parent = here.parent().unwrap_or(Path::new("/"));
    if !parent.is_dir() {
        return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
    }
    match std::fs::DirBuilder::new().mode(0o700).create(here) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && here.is_dir() => {}
        Err(e) => return Err(e),
    }
    std::os::unix::fs::chown(here, Some(uid), Some(gid))?;
    std::fs::set_permissions(here, std::fs::Permissions::from_mode(0o700))
}

impl Outpost {
    fn record(&self, process: Process) -> Result<(), Failure> {
        let Some(file) = state_file(process) else {
            return Err(Failure::new(format!("process {} is gone", process.0)));
        };
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let text = format!("{}\n{}\n", self.host_dir.display(), self.inside.display());
        std::fs::write(&file, text)
            .map_err(|e| Failure::new(format!("cannot write {}: {e}", file.display())))
    }

    /// The outpost of `process`, if it was attached in a container.
    pub fn of(process: Process) -> Option<Outpost> {
        let text = std::fs::read_to_string(state_file(process)?).ok()?;
        let mut lines = text.lines();
        Some(Outpost {
            host_dir: PathBuf::from(lines.next()?),
            inside: PathBuf::from(lines.next()?),
        })
    }

    /// The `prof_prefix` the process writes its dumps with.
    pub fn prefix(&self) -> String {
        format!("{}/{}", self.inside.display(), crate::options::DUMP_BASE)
    }

    /// Move every complete dump written inside the process's file system
    /// into the host's directory (never replacing a file there), and copy
    /// the modules their stacks need beside them. The dumps now on the
    /// host, by their names inside.
    pub fn bring_home(&self, process: Process) -> Result<Vec<(PathBuf, PathBuf)>, Failure> {
        crate::options::ensure_directory(&self.host_dir)?;
        let here = process.root_path(&self.inside);
        let mut moved = Vec::new();
        let entries = std::fs::read_dir(&here)
            .map_err(|e| Failure::new(format!("cannot list {}: {e}", here.display())))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is_dump = name.to_string_lossy().ends_with(".prof");
            if !is_dump || !entry.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let Some(to) = self.host_name(process, &name.to_string_lossy()) else {
                continue;
            };
            move_file(&entry.path(), &to)?;
            moved.push((self.inside.join(&name), to));
        }
        if !moved.is_empty() {
            let root = process.root_path(Path::new("/"));
            crate::collect::collect(&self.host_dir, &root, COLLECT_LIMIT)?;
        }
        Ok(moved)
    }

    /// The host's name for a dump named `name` inside: the container's pid
    /// replaced by the host's (`heapsample.1.000003.m2.prof` of host pid
    /// 4242 is `heapsample.4242.000003.m2.prof`), with `_N` added after the
    /// pid when that name is taken (a dump is never replaced); None when
    /// no free name is found.
    fn host_name(&self, process: Process, name: &str) -> Option<PathBuf> {
        let base = crate::options::DUMP_BASE;
        let rest = name
            .strip_prefix(base)
            .and_then(|r| r.strip_prefix('.'))
            .and_then(|r| r.split_once('.'))
            .map(|(_, rest)| rest);
        let Some(rest) = rest else {
            let to = self.host_dir.join(name);
            return (!to.exists()).then_some(to);
        };
        (0..1000).find_map(|generation| {
            let tag = match generation {
                0 => process.0.to_string(),
                n => format!("{}_{n}", process.0),
            };
            let to = self.host_dir.join(format!("{base}.{tag}.{rest}"));
            (!to.exists()).then_some(to)
        })
    }

    /// Remove the directory inside the process's file system (once its
    /// dumps are home) and the host's record.
    pub fn remove(&self, process: Process) {
        let _ = std::fs::remove_dir(process.root_path(&self.inside));
        if let Some(file) = state_file(process) {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Copy `from` to `to` (`collect::place`: a temporary name beside it,
/// linked into place, so no reader sees half a dump and nothing is
/// replaced), then remove `from`.
fn move_file(from: &Path, to: &Path) -> Result<(), Failure> {
    let placed = std::fs::read(from).and_then(|bytes| crate::collect::place(to, &bytes));
    match placed {
        Ok(true) => {}
        Ok(false) => {
            return Err(Failure::new(format!(
                "cannot bring {} home: {} exists",
                from.display(),
                to.display()
            )));
        }
        Err(e) => {
            return Err(Failure::new(format!(
                "cannot bring {} home: {e}",
                from.display()
            )));
        }
    }
    std::fs::remove_file(from)
        .map_err(|e| Failure::new(format!("cannot remove {}: {e}", from.display())))
}
