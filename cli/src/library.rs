//! Where `libheapsample.so` is: `--library` / `HEAPSAMPLE_LIBRARY`, or
//! beside this command (`target/release/` holds both after `cargo build`;
//! an installation puts them in one directory too).

use std::path::PathBuf;

use crate::Failure;

/// The library's file name.
pub const FILE_NAME: &str = "libheapsample.so";

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
