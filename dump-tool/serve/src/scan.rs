//! Finding the dumps below the roots: a walk of each directory given
//! (`MAX_DEPTH` levels below it, at most `MAX_ENTRIES` dumps in all),
//! through the roots' descriptors only ([`crate::roots`]). A directory is
//! walked once however many links lead to it, so links to `.` or to a
//! parent cost nothing; links out of the directory, hidden files and
//! temporary files are skipped. Dumps are `*.prof` (and foreign `*.heap`
//! profiles). Reads names and metadata only, never a file's contents.

use crate::roots::Root;
use nix::dir::{Dir, Type};
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, SFlag, fstat, fstatat};
use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How deep below a given directory dumps are looked for.
const MAX_DEPTH: usize = 4;
/// At most this many dumps are listed (the first found win).
pub const MAX_ENTRIES: usize = 100_000;

/// What tells two versions of a file apart: its identity, size and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    device: u64,
    inode: u64,
    size: i64,
    modified: (i64, i64),
}

impl Version {
    /// The version of the open file `file`, if it can be told.
    pub fn of_file(file: &std::fs::File) -> Option<Version> {
        fstat(file).ok().map(|stat| Version::of(&stat))
    }

    fn of(stat: &FileStat) -> Version {
        Version {
            device: stat.st_dev,
            inode: stat.st_ino,
            size: stat.st_size,
            modified: (stat.st_mtime, stat.st_mtime_nsec),
        }
    }
}

/// A dump file found below a root.
#[derive(Clone, Debug)]
pub struct Found {
    /// The id used in URLs: the root's prefix and the path below it.
    pub id: String,
    /// Which root (index in the roots given).
    pub root: usize,
    /// The path below the root.
    pub relative: PathBuf,
    pub version: Version,
}

/// Every dump below `roots`, in walk order.
pub fn scan(roots: &[Root]) -> Vec<Found> {
    let mut found = Vec::new();
    for (index, root) in roots.iter().enumerate() {
        let mut walk = Walk {
            root,
            index,
            visited: HashSet::new(),
            found: &mut found,
        };
        match &root.file {
            Some(name) => walk.single(name),
            None => {
                if let Ok(stat) = fstat(&root.directory) {
                    walk.visited.insert((stat.st_dev, stat.st_ino));
                }
                walk.directory(Path::new(""), 0);
            }
        }
    }
    found
}

/// True for names the shim writes dumps under (`.prof`) and those of
/// jemalloc and gperftools heap profiles (`.heap`); temporary and hidden
/// files are not dumps (yet).
pub fn is_dump_name(name: &str) -> bool {
    !name.starts_with('.')
        && !name.contains(".tmp")
        && (name.ends_with(".prof") || name.ends_with(".heap"))
}

/// One root's walk.
struct Walk<'a> {
    root: &'a Root,
    index: usize,
    /// Directories walked already, by (device, inode).
    visited: HashSet<(u64, u64)>,
    found: &'a mut Vec<Found>,
}

impl Walk<'_> {
    fn single(&mut self, name: &OsString) {
        if let Ok(stat) = fstatat(
            &self.root.directory,
            name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) && kind(&stat) == SFlag::S_IFREG
        {
            self.add(Path::new(name), &stat);
        }
    }

    fn add(&mut self, relative: &Path, stat: &FileStat) {
        self.found.push(Found {
            id: format!("{}{}", self.root.prefix, relative.to_string_lossy()),
            root: self.index,
            relative: relative.to_path_buf(),
            version: Version::of(stat),
        });
    }

    /// Walk the directory at `relative` below the root.
    fn directory(&mut self, relative: &Path, depth: usize) {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        let Ok(descriptor) = self.root.open_beneath(relative, flags) else {
            return;
        };
        let Ok(mut listing) = Dir::from_fd(descriptor) else {
            return;
        };
        let names: Vec<(OsString, Option<Type>)> = listing
            .iter()
            .filter_map(Result::ok)
            .filter(|entry| !entry.file_name().to_bytes().starts_with(b"."))
            .map(|entry| {
                let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
                (name.to_os_string(), entry.file_type())
            })
            .collect();
        for (name, file_type) in names {
            if self.found.len() >= MAX_ENTRIES {
                return;
            }
            let path = relative.join(&name);
            let stat = match file_type {
                // A link (or a file system that does not say): what it
                // leads to, if that is inside the root.
                Some(Type::Symlink) | None => self
                    .root
                    .open_beneath(&path, OFlag::O_PATH)
                    .ok()
                    .and_then(|target| fstat(&target).ok()),
                Some(_) => fstatat(&listing, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok(),
            };
            let Some(stat) = stat else { continue };
            match kind(&stat) {
                SFlag::S_IFDIR
                    if depth < MAX_DEPTH && self.visited.insert((stat.st_dev, stat.st_ino)) =>
                {
                    self.directory(&path, depth + 1);
                }
                SFlag::S_IFREG if is_dump_name(&name.to_string_lossy()) => self.add(&path, &stat),
                _ => {}
            }
        }
    }
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_names() {
        assert!(is_dump_name("heapsample.12.000001.i000001.prof"));
        assert!(!is_dump_name("heapsample.12.000001.f.prof.tmp.12"));
        assert!(!is_dump_name(".hidden.prof"));
        assert!(!is_dump_name("notes.txt"));
        assert!(is_dump_name("jeprof.4242.0.f.heap"));
    }

    #[test]
    fn links_to_walked_directories_cost_nothing() {
        let dir = std::env::temp_dir().join(format!("serve-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.prof"), b"a").unwrap();
        std::fs::write(dir.join("sub/b.prof"), b"b").unwrap();
        for i in 0..24 {
            std::os::unix::fs::symlink(".", dir.join(format!("l{i}"))).unwrap();
            std::os::unix::fs::symlink("..", dir.join(format!("sub/up{i}"))).unwrap();
        }
        let root = Root::open(&dir, 0, 1).unwrap();
        let mut ids: Vec<String> = scan(&[root]).into_iter().map(|f| f.id).collect();
        ids.sort();
        assert_eq!(ids, ["a.prof", "sub/b.prof"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
