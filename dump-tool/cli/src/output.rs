//! Writing results: to stdout, or to the path given with `-o` (or the
//! default path next to the dump), by what is at that path:
//!
//! - nothing, or a regular file the user may write: written to a temporary
//!   file in the same directory, synced and renamed over the name
//!   ([`replace`]), so a reader never sees half a file; a replaced file
//!   keeps its permission bits;
//! - a character device (`/dev/null`, a terminal) or a FIFO: opened without
//!   creating or truncating anything, and written into;
//! - `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N`:
//!   written into descriptor N itself, as the shell left it (its offset and
//!   append mode kept; the pipe of `-o >(cmd)` is such a descriptor);
//! - a symbolic link: written through, never replaced: what it points to is
//!   treated by these rules (a regular file is replaced in its own
//!   directory and the link still points to it); a link to nothing is
//!   refused, as heapdiff creates no file through a link;
//! - anything else (a directory, a block device, a socket): refused.
//!
//! Owns every write of an output file. Never replaces anything but a
//! regular file: the directory is opened once and every step is taken
//! relative to it, the temporary file is created exclusively and without
//! following links, and what is at the name is looked at again just before
//! the rename (which uses `RENAME_NOREPLACE` where nothing was, so nothing
//! that appeared meanwhile is replaced). A target that changes between the
//! look and the write is looked at again, a few times at most.

mod replace;

use heapdiff::{Error, Result};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// Where a rendered result goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    File(PathBuf),
}

impl Destination {
    /// `-` means stdout, and so do the names of descriptor 1
    /// (`/dev/stdout`, `/dev/fd/1`), so the summary printed after writing a
    /// file never mixes with the output.
    pub fn from_arg(arg: &Path) -> Self {
        if arg == Path::new("-") || descriptor_named(arg) == Some(1) {
            Destination::Stdout
        } else {
            Destination::File(arg.to_path_buf())
        }
    }
}

/// What is written: a function writing the whole output into a writer,
/// called once per attempt (so an output too large to hold in memory is
/// streamed into the file, never built first).
pub type Body<'a> = &'a dyn Fn(&mut dyn Write) -> std::io::Result<()>;

/// Write `bytes` to `destination`.
pub fn write(destination: &Destination, bytes: &[u8]) -> Result<()> {
    write_with(destination, &|out| out.write_all(bytes))
}

/// Write what `body` writes to `destination`, as [`write`] writes bytes.
pub fn write_with(destination: &Destination, body: Body<'_>) -> Result<()> {
    match destination {
        Destination::Stdout => write_all(&mut std::io::stdout().lock(), body)
            .map_err(|why| Error::new(format!("cannot write to stdout: {why}"))),
        Destination::File(path) => write_path(path, body).map_err(|why| Error::file(path, why)),
    }
}

/// How often a target that changed between the look and the write is
/// looked at again.
const ATTEMPTS: usize = 3;

/// What the write found at the path.
enum Outcome {
    Written,
    /// What was at the path changed meanwhile: look again.
    Changed,
}

/// Write `body` to the file, device, FIFO, descriptor or link at `path`;
/// the error is the reason, without the path.
pub fn write_path(path: &Path, body: Body<'_>) -> std::result::Result<(), String> {
    if let Some(descriptor) = descriptor_named(path) {
        return write_descriptor(descriptor, body);
    }
    for _ in 0..ATTEMPTS {
        if let Outcome::Written = write_once(path, body)? {
            return Ok(());
        }
    }
    Err("kept changing while being written (another program is replacing it?)".to_string())
}

fn write_once(path: &Path, body: Body<'_>) -> std::result::Result<Outcome, String> {
    let (directory, name) = open_parent(path)?;
    match look(&directory, &name)? {
        Target::Nothing => replace::replace(&directory, &name, None, body),
        Target::Regular(old) => replace::replace(&directory, &name, Some(&old), body),
        Target::Stream(seen) => {
            let flags = OFlag::O_WRONLY | OFlag::O_NOCTTY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let file = openat(&directory, name.as_os_str(), flags, Mode::empty())
                .map_err(|e| reason("cannot open", e))?;
            write_into(file, &seen, body)
        }
        Target::Link => write_through(path, body),
    }
}

/// What is at a name, by the kind of write it gets.
enum Target {
    Nothing,
    Regular(FileStat),
    /// A character device or a FIFO.
    Stream(FileStat),
    Link,
}

/// What is at `name` in `directory`, without following a link; the kinds
/// heapdiff never writes are refused here.
fn look(directory: &OwnedFd, name: &OsString) -> std::result::Result<Target, String> {
    let stat = match fstatat(directory, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::ENOENT) => return Ok(Target::Nothing),
        Err(e) => return Err(reason("cannot look at it", e)),
    };
    match kind(&stat) {
        SFlag::S_IFREG => Ok(Target::Regular(stat)),
        SFlag::S_IFCHR | SFlag::S_IFIFO => Ok(Target::Stream(stat)),
        SFlag::S_IFLNK => Ok(Target::Link),
        other => Err(refusal(other)),
    }
}

/// A symbolic link: its target gets the write, by the same rules; the
/// link stays as it is.
fn write_through(path: &Path, body: Body<'_>) -> std::result::Result<Outcome, String> {
    let target = match open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(target) => target,
        Err(Errno::ENOENT) => {
            return Err("a symbolic link to nothing: heapdiff writes through links but creates no file through them".to_string());
        }
        Err(e) => return Err(reason("cannot follow the symbolic link", e)),
    };
    let stat = fstat(&target).map_err(|e| reason("cannot look at it", e))?;
    match kind(&stat) {
        SFlag::S_IFREG => {
            // The link's target, replaced in its own directory if it is
            // still the file the kernel found through the link.
            let real = std::fs::canonicalize(path)
                .map_err(|e| format!("cannot resolve the symbolic link: {e}"))?;
            let (directory, name) = open_parent(&real)?;
            match look(&directory, &name)? {
                Target::Regular(now) if same_file(&now, &stat) => {
                    replace::replace(&directory, &name, Some(&now), body)
                }
                _ => Ok(Outcome::Changed),
            }
        }
        SFlag::S_IFCHR | SFlag::S_IFIFO => {
            let flags = OFlag::O_WRONLY | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
            let file = open(path, flags, Mode::empty()).map_err(|e| reason("cannot open", e))?;
            write_into(file, &stat, body)
        }
        other => Err(format!("a symbolic link to what {}", refusal(other))),
    }
}

/// Write into an opened device or FIFO if it is the one looked at.
fn write_into(
    file: OwnedFd,
    seen: &FileStat,
    body: Body<'_>,
) -> std::result::Result<Outcome, String> {
    let opened = fstat(&file).map_err(|e| reason("cannot look at it", e))?;
    if !same_file(&opened, seen) {
        return Ok(Outcome::Changed);
    }
    write_all(&mut File::from(file), body).map_err(|e| format!("cannot write: {e}"))?;
    Ok(Outcome::Written)
}

/// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N` and
/// `/proc/thread-self/fd/N`: the descriptor they name.
fn descriptor_named(path: &Path) -> Option<RawFd> {
    let text = path.to_str()?;
    match text {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let number = ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number.parse().ok()
}

/// Write into a copy of an inherited descriptor (the original stays open
/// for whoever else writes to it).
fn write_descriptor(descriptor: RawFd, body: Body<'_>) -> std::result::Result<(), String> {
    // SAFETY: F_DUPFD_CLOEXEC reads no memory; on a number that is not an
    // open descriptor it fails with EBADF.
    let copy = unsafe { libc::fcntl(descriptor, libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        return Err(match Errno::last() {
            Errno::EBADF => format!("descriptor {descriptor} is not open"),
            e => reason("cannot use the descriptor", e),
        });
    }
    // SAFETY: `copy` is a new descriptor that nothing else owns.
    let mut file = unsafe { File::from_raw_fd(copy) };
    write_all(&mut file, body).map_err(|e| format!("cannot write: {e}"))
}

/// Write and flush; a reader that stopped early (`heapdiff -f folded x |
/// head`, a FIFO's reader that left) is not an error.
fn write_all(out: &mut impl Write, body: Body<'_>) -> std::io::Result<()> {
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, out);
    match body(&mut buffered).and_then(|()| buffered.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => result,
    }
}

/// The directory `path` is in, opened (following links, as any path given
/// by the user is), and the name inside it.
fn open_parent(path: &Path) -> std::result::Result<(OwnedFd, OsString), String> {
    let name = path
        .file_name()
        .ok_or_else(|| "names a directory, not a file".to_string())?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let directory = open(parent, flags, Mode::empty()).map_err(|e| match e {
        Errno::ENOENT => "cannot write: no such directory".to_string(),
        Errno::ENOTDIR => "cannot write: a part of the path is not a directory".to_string(),
        e => reason("cannot write into its directory", e),
    })?;
    Ok((directory, name.to_os_string()))
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

fn same_file(a: &FileStat, b: &FileStat) -> bool {
    (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
}

/// Why heapdiff does not write to a file of this kind.
fn refusal(kind: SFlag) -> String {
    let what = match kind {
        SFlag::S_IFDIR => return "is a directory: name a file inside it".to_string(),
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFSOCK => "a socket",
        _ => "not a file",
    };
    format!(
        "is {what}: heapdiff writes only into regular files, character devices (/dev/null), FIFOs and descriptors (/dev/fd/N)"
    )
}

/// A system call's failure in words: permission, or the errno's text.
fn reason(doing: &str, errno: Errno) -> String {
    match errno {
        Errno::EACCES | Errno::EPERM => "permission denied".to_string(),
        Errno::ELOOP => "too many levels of symbolic links".to_string(),
        e => format!("{doing}: {}", e.desc()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_names() {
        assert_eq!(descriptor_named(Path::new("/dev/stdout")), Some(1));
        assert_eq!(descriptor_named(Path::new("/dev/stderr")), Some(2));
        assert_eq!(descriptor_named(Path::new("/dev/fd/63")), Some(63));
        assert_eq!(descriptor_named(Path::new("/proc/self/fd/3")), Some(3));
        assert_eq!(descriptor_named(Path::new("/dev/fd/+3")), None);
        assert_eq!(descriptor_named(Path::new("/dev/fd/")), None);
        assert_eq!(descriptor_named(Path::new("dev/stdout")), None);
        assert_eq!(
            Destination::from_arg(Path::new("/dev/fd/1")),
            Destination::Stdout
        );
    }

    #[test]
    fn unwritable_directory_is_one_line_error() {
        let destination = Destination::File("/nonexistent-dir/x/out.svg".into());
        let text = write(&destination, b"x").unwrap_err().to_string();
        assert_eq!(
            text,
            "/nonexistent-dir/x/out.svg: cannot write: no such directory"
        );
    }

    #[test]
    fn a_closed_descriptor_is_one_line_error() {
        let text = write_path(Path::new("/dev/fd/999999"), &|out: &mut dyn Write| {
            out.write_all(b"x")
        })
        .unwrap_err();
        assert_eq!(text, "descriptor 999999 is not open");
    }
}
