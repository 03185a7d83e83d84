//! The paths given on the command line, held open, and the only way to
//! open anything below them: relative to a directory's descriptor, never
//! out of it.
//!
//! A directory given is opened once at start (the path may reach it
//! through links; from then on the descriptor is that directory, whatever
//! is renamed or swapped later). Every open below it resolves its relative
//! path with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, at the
//! moment of the open: `..` past the directory, absolute paths and
//! symbolic links that lead out of it, at any component, fail; relative
//! links that stay inside work. Where the kernel has no `openat2` (before
//! Linux 5.6, or a sandbox that forbids it), each component is opened with
//! `O_NOFOLLOW` instead and `..` is refused, so no link is followed at all.
//! A single dump given on the command line is its directory and its name.

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat, openat2};
use nix::sys::stat::Mode;
use std::ffi::OsString;
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

/// A path given on the command line.
#[derive(Debug)]
pub struct Root {
    /// The directory given, or the one the dump given is in.
    pub directory: OwnedFd,
    /// The dump's name when a single dump was given.
    pub file: Option<OsString>,
    /// Prefix of the ids of its dumps (empty with a single root).
    pub prefix: String,
}

impl Root {
    /// Open `path` (the `index`th of `count` paths); a path that does not
    /// exist, or is neither a directory nor a regular file, is an error
    /// naming it.
    pub fn open(path: &Path, index: usize, count: usize) -> Result<Root, String> {
        let fail = |why: &dyn fmt::Display| format!("{}: {why}", path.display());
        let canonical = path.canonicalize().map_err(|e| fail(&e))?;
        let prefix = if count > 1 {
            format!("{index}/")
        } else {
            String::new()
        };
        let directory_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        if canonical.is_dir() {
            let directory =
                open(&canonical, directory_flags, Mode::empty()).map_err(|e| fail(&e.desc()))?;
            return Ok(Root {
                directory,
                file: None,
                prefix,
            });
        }
        if !canonical.is_file() {
            return Err(fail(&"neither a directory nor a dump file"));
        }
        let (Some(parent), Some(name)) = (canonical.parent(), canonical.file_name()) else {
            return Err(fail(&"not a file"));
        };
        let directory =
            open(parent, directory_flags, Mode::empty()).map_err(|e| fail(&e.desc()))?;
        Ok(Root {
            directory,
            file: Some(name.to_os_string()),
            prefix,
        })
    }

    /// Open `relative` below this root with `flags` (`O_CLOEXEC` and
    /// `O_NOCTTY` added), never out of it.
    pub fn open_beneath(&self, relative: &Path, flags: OFlag) -> Result<OwnedFd, Refused> {
        open_beneath(&self.directory, relative, flags)
    }
}

/// Why a file below a root could not be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Nothing there (any more).
    Missing,
    /// The path leads out of the directory (a link out of it, or `..`),
    /// or through a link where links are not followed.
    Outside,
    /// Any other failure of the open.
    Failed(Errno),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Missing => f.write_str("no longer exists"),
            Refused::Outside => f.write_str("leads out of the served directories"),
            Refused::Failed(Errno::EACCES) => f.write_str("permission denied"),
            Refused::Failed(errno) => write!(f, "cannot open: {}", errno.desc()),
        }
    }
}

impl From<Errno> for Refused {
    fn from(errno: Errno) -> Refused {
        match errno {
            Errno::ENOENT => Refused::Missing,
            Errno::EXDEV | Errno::ELOOP => Refused::Outside,
            errno => Refused::Failed(errno),
        }
    }
}

/// Open `relative` below `directory` without leaving it (see the module
/// docs).
pub fn open_beneath(
    directory: &OwnedFd,
    relative: &Path,
    flags: OFlag,
) -> Result<OwnedFd, Refused> {
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    let flags = flags | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    match openat2(directory, relative, how) {
        // No openat2 here (an older kernel, or a seccomp filter).
        Err(Errno::ENOSYS | Errno::EPERM) => open_without_links(directory, relative, flags),
        result => result.map_err(Refused::from),
    }
}

/// The fallback: one component at a time, none of them a link, no `..`.
fn open_without_links(
    directory: &OwnedFd,
    relative: &Path,
    flags: OFlag,
) -> Result<OwnedFd, Refused> {
    let mut names: Vec<PathBuf> = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(PathBuf::from(name)),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Refused::Outside);
            }
        }
    }
    let Some(last) = names.pop() else {
        return openat(directory, ".", flags, Mode::empty()).map_err(Refused::from);
    };
    let step = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut current: Option<OwnedFd> = None;
    for name in &names {
        let next = openat(
            current.as_ref().unwrap_or(directory),
            name,
            step,
            Mode::empty(),
        )
        .map_err(|e| Refused::from(link_is_outside(e)))?;
        current = Some(next);
    }
    openat(
        current.as_ref().unwrap_or(directory),
        &last,
        flags | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|e| Refused::from(link_is_outside(e)))
}

/// With `O_NOFOLLOW`, a link fails with `ELOOP` (the last component) or
/// `ENOTDIR` (a directory component): both mean "through a link".
fn link_is_outside(errno: Errno) -> Errno {
    match errno {
        Errno::ENOTDIR => Errno::ELOOP,
        errno => errno,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("serve-roots-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/sub")).unwrap();
        std::fs::write(dir.join("root/sub/a.prof"), b"a").unwrap();
        std::fs::write(dir.join("outside.prof"), b"x").unwrap();
        std::os::unix::fs::symlink("sub/a.prof", dir.join("root/inside.prof")).unwrap();
        std::os::unix::fs::symlink("../outside.prof", dir.join("root/up.prof")).unwrap();
        std::os::unix::fs::symlink(dir.join("outside.prof"), dir.join("root/abs.prof")).unwrap();
        std::os::unix::fs::symlink(&dir, dir.join("root/up-dir")).unwrap();
        dir
    }

    #[test]
    fn both_ways_refuse_everything_out_of_the_directory() {
        let dir = scratch("out");
        let root = Root::open(&dir.join("root"), 0, 1).unwrap();
        let read = OFlag::O_RDONLY;
        let outside = [
            "up.prof",
            "abs.prof",
            "up-dir/outside.prof",
            "../outside.prof",
            "sub/../../outside.prof",
        ];
        for path in outside {
            let beneath = root.open_beneath(Path::new(path), read).map(drop);
            assert_eq!(beneath, Err(Refused::Outside), "openat2 {path}");
            let walked = open_without_links(&root.directory, Path::new(path), read).map(drop);
            assert!(walked.is_err(), "walk {path}");
        }
        assert!(root.open_beneath(Path::new("sub/a.prof"), read).is_ok());
        assert!(root.open_beneath(Path::new("inside.prof"), read).is_ok());
        assert!(open_without_links(&root.directory, Path::new("sub/a.prof"), read).is_ok());
        assert_eq!(
            open_without_links(&root.directory, Path::new("inside.prof"), read).map(drop),
            Err(Refused::Outside),
            "the walk follows no link at all"
        );
        assert_eq!(
            root.open_beneath(Path::new("gone.prof"), read).map(drop),
            Err(Refused::Missing)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
