//! Writing one dump file atomically, and what killed writers leave behind.
//!
//! Owns the file protocol. A dump is encoded as it is written (no encoded
//! copy in memory) into a temporary file next to its final name, created
//! `O_EXCL | O_NOFOLLOW` with mode 0600 and locked with `flock` while it is
//! written, then moved to the final name, so a crash or a full disk never
//! leaves a partial file under a final name. An explicit final name may
//! replace a regular file or a symbolic link (never what it points to) and
//! nothing else; an automatic one replaces nothing.
//!
//! Temporary files come from a pool of names per *base* (the prefix of
//! automatic dumps, or the explicit path): `<base>.tmp.<k>`, `k` from 0. A
//! writer takes the first name that is free. A name that holds a file no
//! writer has locked is what a killed writer left: the writer that meets it
//! removes it and takes the name. So the next dump with the same base
//! removes what a killed dump left, whatever the pids (a container's first
//! process is pid 1 every time), at a cost that grows with the number of
//! dumps being written at that moment, never with the size of the
//! directory. The lock decides: a file is stale exactly when no process
//! holds its lock, which a writer holds from before its file could be
//! found until the file has its final name.
//!
//! Failures are one `<heapsample>:` warning per kind.
//!
//! Never runs inside malloc: it allocates and does I/O.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use heapsample_format::Dump;

use crate::warn::Kind;
use crate::{sys, syscalls};

/// Why a dump was not written, as an errno value.
pub type Errno = i32;

/// Temporary names per base: more dumps with one base at the same moment
/// than this fail (with a warning).
const TEMPORARY_SLOTS: usize = 1024;

/// What may be at the final name already.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A regular file or a symbolic link is replaced (the link itself, not
    /// what it points to); anything else refuses the dump with `EINVAL`.
    Replace,
    /// Nothing: an existing name fails with `EEXIST`, without a warning.
    NoReplace,
}

/// What failed ("create", "write", ...) and the errno.
type Failure = (&'static str, Errno);

const RENAME_STAGE: &str = "rename into place";
/// The final name exists and must not be replaced.
const EXISTS_STAGE: &str = "exists";

/// Write `dump` to a temporary file of the pool of `base` (encoded as it is
/// written: no encoded copy is held in memory), then move it to `target` as
/// `placement` allows. On failure nothing is left under either name and one
/// warning per kind of failure is printed.
pub fn write_atomically(
    base: &str,
    target: &str,
    dump: &Dump,
    placement: Placement,
) -> Result<(), Errno> {
    let (Ok(base_c), Ok(target_c)) = (CString::new(base), CString::new(target)) else {
        crate::warn!(
            Kind::DumpOther,
            "cannot write dump {target:?}: the name contains a NUL byte"
        );
        return Err(libc::EINVAL);
    };
    if placement == Placement::Replace && !replaceable(&target_c) {
        crate::warn!(
            Kind::DumpOther,
            "cannot write dump {target:?}: it exists and is not a regular file; the dump is refused"
        );
        return Err(libc::EINVAL);
    }
    let Err((stage, errno)) = write_through_temporary(&base_c, &target_c, dump, placement) else {
        return Ok(());
    };
    if stage == EXISTS_STAGE {
        return Err(errno);
    }
    let kind = if stage == RENAME_STAGE {
        Kind::DumpRename
    } else {
        Kind::of_dump_error(errno)
    };
    crate::warn!(
        kind,
        "cannot {stage} dump {target:?}: {}; the program goes on, later dumps will retry",
        std::io::Error::from_raw_os_error(errno)
    );
    Err(errno)
}

fn write_through_temporary(
    base: &CStr,
    target: &CStr,
    dump: &Dump,
    placement: Placement,
) -> Result<(), Failure> {
    let temporary = Temporary::take(base)?;
    let written = write_encoded(temporary.fd, dump).map_err(|errno| ("write", errno));
    let placed = written.and_then(|()| {
        pause_point(&temporary.path);
        place(&temporary.path, target, placement)
    });
    temporary.finish(placed.is_ok());
    placed
}

/// A temporary file this process created and holds locked.
struct Temporary {
    path: CString,
    fd: i32,
}

impl Temporary {
    /// Take the first free name of `base`'s pool, removing stale files met
    /// on the way.
    fn take(base: &CStr) -> Result<Temporary, Failure> {
        for slot in 0..TEMPORARY_SLOTS {
            let mut path = base.to_bytes().to_vec();
            path.extend_from_slice(format!(".tmp.{slot}").as_bytes());
            let path = CString::new(path).map_err(|_| ("create", libc::EINVAL))?;
            // A stale file at this name is removed once, then the name retried.
            for _ in 0..2 {
                match Self::create_locked(&path) {
                    Ok(Some(fd)) => return Ok(Temporary { path, fd }),
                    Ok(None) => break, // taken by a live writer: the next name
                    Err(libc::EEXIST) if remove_if_stale(&path) => continue,
                    Err(libc::EEXIST) => break,
                    Err(errno) => return Err(("create", errno)),
                }
            }
        }
        Err(("create", libc::EBUSY))
    }

    /// Create `path` and lock it: the descriptor, None if the name was lost
    /// to another process on the way, or the errno of the creation.
    fn create_locked(path: &CStr) -> Result<Option<i32>, Errno> {
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe { syscalls::open(path.as_ptr(), flags, 0o600) };
        if fd < 0 {
            return Err(sys::errno());
        }
        // Between the creation and the lock another writer may have found
        // the file unlocked, taken it for stale and removed it: holding the
        // lock with the name still ours, nobody removes it any more.
        // SAFETY: fd is ours and open.
        let locked = unsafe { syscalls::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if locked && names(path, fd) {
            return Ok(Some(fd));
        }
        // SAFETY: fd is ours and open.
        unsafe { libc::close(fd) };
        Ok(None)
    }

    /// Close (releasing the lock); if the file was not put in place, remove
    /// it first (its name is still ours while the lock is held).
    fn finish(self, placed: bool) {
        if !placed {
            // SAFETY: a valid path; unlink removes the name, never follows it.
            unsafe { syscalls::unlink(self.path.as_ptr()) };
        }
        // SAFETY: fd is ours and open.
        unsafe { libc::close(self.fd) };
    }
}

/// True if `path` names the file open as `fd` (not a file that replaced it).
fn names(path: &CStr, fd: i32) -> bool {
    let (Some(named), Some(open)) = (syscalls::lstat_of(path), fstat(fd)) else {
        return false;
    };
    (named.st_dev, named.st_ino) == (open.st_dev, open.st_ino)
}

/// Remove `path` if it is a regular file no writer holds locked (a killed
/// writer's); true if the name may now be free.
fn remove_if_stale(path: &CStr) -> bool {
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { syscalls::open(path.as_ptr(), flags, 0) };
    if fd < 0 {
        return sys::errno() == libc::ENOENT;
    }
    let regular = fstat(fd).is_some_and(|status| status.st_mode & libc::S_IFMT == libc::S_IFREG);
    // SAFETY: fd is ours and open.
    let unlocked = regular && unsafe { syscalls::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0;
    // Holding its lock, and the name still the file's: nobody else removes
    // or writes it. (Another remover could still unlink it and a writer
    // create a new file there between this check and the unlink; the
    // writer would then fail to rename, warn and retry at its next dump.)
    // SAFETY: a valid path; unlink removes the name, never follows it.
    let removed = unlocked && names(path, fd) && unsafe { syscalls::unlink(path.as_ptr()) } == 0;
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    removed
}

fn fstat(fd: i32) -> Option<libc::stat> {
    // SAFETY: a valid descriptor and out pointer.
    unsafe {
        let mut status: libc::stat = core::mem::zeroed();
        (syscalls::fstat(fd, &mut status) == 0).then_some(status)
    }
}

/// True if `target` does not exist, or is a regular file or a symbolic
/// link: never replace a device node, a FIFO, a socket or a directory (a
/// dump to `/dev/null` as root would replace the system's).
fn replaceable(target: &CStr) -> bool {
    syscalls::lstat_of(target)
        .is_none_or(|status| matches!(status.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFLNK))
}

/// Move the written temporary file to `target`.
fn place(temporary: &CStr, target: &CStr, placement: Placement) -> Result<(), Failure> {
    if placement == Placement::Replace {
        // SAFETY: valid NUL-terminated paths.
        return match unsafe { syscalls::rename(temporary.as_ptr(), target.as_ptr()) } {
            0 => Ok(()),
            _ => Err((RENAME_STAGE, sys::errno())),
        };
    }
    // SAFETY: valid NUL-terminated paths, relative to the working directory.
    let renamed = unsafe {
        syscalls::renameat2(
            libc::AT_FDCWD,
            temporary.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    match (renamed, sys::errno()) {
        (0, _) => Ok(()),
        (_, libc::EEXIST) => Err((EXISTS_STAGE, libc::EEXIST)),
        // The file system cannot rename without replacing: a hard link
        // fails on an existing name as well; then the temporary name goes.
        (_, libc::EINVAL | libc::ENOSYS) => {
            // SAFETY: valid NUL-terminated paths.
            match unsafe { syscalls::link(temporary.as_ptr(), target.as_ptr()) } {
                0 => {
                    // SAFETY: a valid path, still ours (its lock is held).
                    unsafe { syscalls::unlink(temporary.as_ptr()) };
                    Ok(())
                }
                _ if sys::errno() == libc::EEXIST => Err((EXISTS_STAGE, libc::EEXIST)),
                _ => Err((RENAME_STAGE, sys::errno())),
            }
        }
        (_, errno) => Err((RENAME_STAGE, errno)),
    }
}

/// Environment variable of the test pause point: a path.
pub const PAUSE_VARIABLE: &str = "HEAPSAMPLE_TEST_PAUSE_BEFORE_PLACING";

/// A pause point for tests. With [`PAUSE_VARIABLE`] set to a path, a dump
/// whose temporary file is complete, and still locked, writes that file's
/// name into the path and waits there until the process is killed, so a
/// test can find a dump at that moment without racing it. Without the
/// variable (read once per process) it costs a load per dump.
fn pause_point(temporary: &CStr) {
    static MARKER: OnceLock<Option<std::ffi::OsString>> = OnceLock::new();
    let Some(marker) = MARKER.get_or_init(|| std::env::var_os(PAUSE_VARIABLE)) else {
        return;
    };
    let _ = std::fs::write(marker, temporary.to_bytes());
    loop {
        // SAFETY: waits for a signal; nothing else.
        unsafe { syscalls::pause() };
    }
}

/// Encode `dump` into `fd` (the encoder writes it in chunks).
fn write_encoded(fd: i32, dump: &Dump) -> Result<(), Errno> {
    heapsample_format::encode_to(dump, &mut Descriptor(fd))
        .map_err(|error| error.raw_os_error().unwrap_or(libc::EIO))
}

/// A file descriptor this module keeps open and closes itself, as a
/// writer (`std::fs::File` would close it when dropped).
struct Descriptor(i32);

impl std::io::Write for Descriptor {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        write_all(self.0, bytes).map_err(std::io::Error::from_raw_os_error)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::io::Seek for Descriptor {
    fn seek(&mut self, position: std::io::SeekFrom) -> std::io::Result<u64> {
        let (offset, whence) = match position {
            std::io::SeekFrom::Start(offset) => (offset as i64, libc::SEEK_SET),
            std::io::SeekFrom::End(offset) => (offset, libc::SEEK_END),
            std::io::SeekFrom::Current(offset) => (offset, libc::SEEK_CUR),
        };
        // SAFETY: repositions our own open descriptor.
        match unsafe { syscalls::lseek(self.0, offset, whence) } {
            -1 => Err(std::io::Error::from_raw_os_error(sys::errno())),
            at => Ok(at as u64),
        }
    }
}

fn write_all(fd: i32, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        // SAFETY: writes from a valid slice to our fd.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let errno = sys::errno();
            if errno == libc::EINTR {
                continue;
            }
            return Err(errno);
        }
        if n == 0 {
            return Err(libc::EIO);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(label: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("dump-file-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn c(path: &std::path::Path) -> CString {
        CString::new(path.to_str().unwrap()).unwrap()
    }

    /// Names are taken in order; a name held by a live writer (locked) is
    /// skipped, one a killed writer left (unlocked) is removed and reused.
    #[test]
    fn temporaries_skip_held_names_and_reuse_stale_ones() {
        let dir = temp_dir("pool");
        let base = c(&dir.join("d"));
        let first = Temporary::take(&base).unwrap();
        assert!(first.path.to_str().unwrap().ends_with("d.tmp.0"));
        let second = Temporary::take(&base).unwrap();
        assert!(second.path.to_str().unwrap().ends_with("d.tmp.1"));
        // A killed writer's file: present, unlocked.
        std::fs::write(dir.join("d.tmp.2"), "partial").unwrap();
        // SAFETY: fd is open; dropping the lock as a killed writer would.
        unsafe { libc::flock(first.fd, libc::LOCK_UN) };
        let third = Temporary::take(&base).unwrap();
        assert!(
            third.path.to_str().unwrap().ends_with("d.tmp.0"),
            "the unlocked one is stale"
        );
        let fourth = Temporary::take(&base).unwrap();
        assert!(fourth.path.to_str().unwrap().ends_with("d.tmp.2"));
        assert_eq!(std::fs::metadata(dir.join("d.tmp.2")).unwrap().len(), 0);
        for temporary in [second, third, fourth] {
            temporary.finish(false);
        }
        // SAFETY: fd is ours and open.
        unsafe { libc::close(first.fd) };
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What is not a regular file at a pool name is left alone.
    #[test]
    fn other_files_at_a_pool_name_are_left_alone() {
        let dir = temp_dir("others");
        std::fs::create_dir(dir.join("d.tmp.0")).unwrap();
        std::os::unix::fs::symlink("/nonexistent", dir.join("d.tmp.1")).unwrap();
        let temporary = Temporary::take(&c(&dir.join("d"))).unwrap();
        assert!(temporary.path.to_str().unwrap().ends_with("d.tmp.2"));
        temporary.finish(false);
        assert!(dir.join("d.tmp.0").is_dir());
        assert!(dir.join("d.tmp.1").symlink_metadata().unwrap().is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
