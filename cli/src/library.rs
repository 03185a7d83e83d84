//! Where `libheapsample.so` is: `--library` / `HEAPSAMPLE_LIBRARY`, or
//! beside this command (`target/release/` holds both after `cargo build`;
//! an installation puts them in one directory too).

use std::path::PathBuf;

use crate::Failure;

/// The library's file name.
pub const FILE_NAME: &str = "libheapsample.so";

/// The name of the sealed in-memory file the library is loaded from in a
/// process that cannot see it at its path (a container).
pub const MEMFD_NAME: &str = "libheapsample.so";

/// Is a mapping of the file named `name` (as `/proc/PID/maps` names it:
/// `memfd:` before an in-memory file, ` (deleted)` after a removed one)
/// the profiler library?
pub fn is_the_library(name: &str) -> bool {
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    name == FILE_NAME || name.strip_prefix("memfd:") == Some(MEMFD_NAME)
}

/// The library to load, as an absolute path to a regular file.
pub fn locate(given: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let path = match given {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .map(|dir| dir.join(FILE_NAME))
            .ok_or_else(|| Failure::new("cannot tell where this command lives"))?,
    };
    let path = std::path::absolute(&path)?;
    if !path.is_file() {
        return Err(Failure::new(format!(
            "the profiler library {} does not exist (build it with `cargo build --release`, \
             or name it with --library or HEAPSAMPLE_LIBRARY)",
            path.display()
        )));
    }
    Ok(path)
}
