//! Atomic replacement of a regular file (or creation where nothing is): a
//! temporary file next to it, created exclusively without following links,
//! written, given the old file's permission bits, synced, then renamed over
//! the name. A reader sees the old file or the whole new one, never a part,
//! and a failure leaves the old file and no temporary behind.

use super::{Body, Outcome, reason, same_file};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags, openat, renameat, renameat2};
use nix::sys::stat::{FileStat, Mode, fchmod, fstatat};
use nix::unistd::{AccessFlags, UnlinkatFlags, faccessat, unlinkat};
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;

/// Temporary names tried before giving up (one per stale leftover).
const TEMPORARY_NAMES: usize = 16;

/// Replace `name` in `directory` (the regular file `old`, or nothing) with
/// what `body` writes.
pub(super) fn replace(
    directory: &OwnedFd,
    name: &OsString,
    old: Option<&FileStat>,
    body: Body<'_>,
) -> Result<Outcome, String> {
    if old.is_some() {
        faccessat(
            directory,
            name.as_os_str(),
            AccessFlags::W_OK,
            AtFlags::AT_EACCESS,
        )
        .map_err(|e| reason("cannot write", e))?;
    }
    let (temporary, file) = create_temporary(directory, name)?;
    let result = fill(file, old, body).and_then(|()| rename(directory, &temporary, name, old));
    if !matches!(result, Ok(Outcome::Written)) {
        let _ = unlinkat(directory, temporary.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    result
}

/// `.<name>.heapdiff-<pid>[-<n>].tmp`, created (never opened if it exists).
fn create_temporary(directory: &OwnedFd, name: &OsString) -> Result<(OsString, File), String> {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(0o666);
    for attempt in 0..TEMPORARY_NAMES {
        let mut temporary = OsString::from(".");
        temporary.push(name);
        temporary.push(format!(".heapdiff-{}", std::process::id()));
        if attempt > 0 {
            temporary.push(format!("-{attempt}"));
        }
        temporary.push(".tmp");
        match openat(directory, temporary.as_os_str(), flags, mode) {
            Ok(fd) => return Ok((temporary, File::from(fd))),
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(reason("cannot create a temporary file beside it", e)),
        }
    }
    Err("cannot create a temporary file beside it: every name is taken".to_string())
}

fn fill(mut file: File, old: Option<&FileStat>, body: Body<'_>) -> Result<(), String> {
    let write = |e: std::io::Error| format!("cannot write: {e}");
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut file);
    body(&mut buffered)
        .and_then(|()| buffered.flush())
        .map_err(write)?;
    drop(buffered);
    if let Some(old) = old {
        fchmod(&file, Mode::from_bits_truncate(old.st_mode & 0o777))
            .map_err(|e| reason("cannot set the permissions", e))?;
    }
    file.sync_all().map_err(write)
}

/// Rename `temporary` over `name` if what is there is still what was
/// looked at: nothing (`RENAME_NOREPLACE`), or the same regular file.
fn rename(
    directory: &OwnedFd,
    temporary: &OsString,
    name: &OsString,
    old: Option<&FileStat>,
) -> Result<Outcome, String> {
    let renamed = match old {
        None => match renameat2(
            directory,
            temporary.as_os_str(),
            directory,
            name.as_os_str(),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Err(Errno::EEXIST) => return Ok(Outcome::Changed),
            // A file system without RENAME_NOREPLACE.
            Err(Errno::EINVAL) => renameat(
                directory,
                temporary.as_os_str(),
                directory,
                name.as_os_str(),
            ),
            other => other,
        },
        Some(old) => {
            match fstatat(directory, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(now) if same_file(&now, old) => {}
                _ => return Ok(Outcome::Changed),
            }
            renameat(
                directory,
                temporary.as_os_str(),
                directory,
                name.as_os_str(),
            )
        }
    };
    renamed.map_err(|e| reason("cannot write", e))?;
    Ok(Outcome::Written)
}

#[cfg(test)]
mod tests {
    use super::super::write_path;

    #[test]
    fn writes_and_replaces_without_leftovers() {
        let dir = std::env::temp_dir().join(format!("heapdiff-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.svg");
        write_path(&path, &|out: &mut dyn std::io::Write| {
            out.write_all(b"first")
        })
        .unwrap();
        write_path(&path, &|out: &mut dyn std::io::Write| {
            out.write_all(b"second")
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(entries.len(), 1, "temporary file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
