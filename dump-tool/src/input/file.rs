//! Opening input files: regular files only, opened without blocking, with
//! I/O errors in words a user reads.
//!
//! Owns every `open` of an input by path (dumps, and the ELF files a
//! foreign profile's module map names), and the checks and reads of a file
//! opened elsewhere (the server opens its dumps below its directories and
//! hands the file over). Never writes.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Open `path` for reading only if it is a regular file. The open itself
/// does not block (a FIFO or a device named in a dump must not hang the
/// tool), and only then is the file's type checked.
pub fn open_regular_file(path: &Path) -> Result<File, String> {
    /// O_NONBLOCK on Linux.
    const OPEN_NONBLOCK: i32 = 0o4000;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_NONBLOCK)
        .open(path)
        .map_err(|e| io_reason(&e))?;
    regular_file(file)
}

/// `file` if it is a regular file (opened by someone else, e.g. relative to
/// a directory it must stay in).
pub fn regular_file(file: File) -> Result<File, String> {
    let metadata = file.metadata().map_err(|e| io_reason(&e))?;
    if !metadata.is_file() {
        return Err(if metadata.is_dir() {
            "is a directory, not a file".to_string()
        } else {
            "not a regular file".to_string()
        });
    }
    Ok(file)
}

/// The whole of the open regular file `file`, refused when larger than
/// `limit` bytes (`what` names what the file should have been).
pub fn read_limited(mut file: File, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    let size = file.metadata().map_err(|e| io_reason(&e))?.len();
    if size > limit {
        return Err(format!("too large to be {what} ({size} bytes)"));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.by_ref()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_reason(&e))?;
    Ok(bytes)
}

fn io_reason(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "is a directory, not a dump".to_string(),
        _ => format!("cannot read: {error}"),
    }
}
