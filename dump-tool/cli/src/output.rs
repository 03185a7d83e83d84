//! Writing results: to stdout, or atomically to a file (a temporary file in
//! the same directory, then a rename), so a reader never sees half a file.

use heapdiff::{Error, Result};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where a rendered result goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    File(PathBuf),
}

impl Destination {
    /// `-` means stdout.
    pub fn from_arg(arg: &Path) -> Self {
        if arg == Path::new("-") {
            Destination::Stdout
        } else {
            Destination::File(arg.to_path_buf())
        }
    }
}

/// Write `bytes` to `destination`.
pub fn write(destination: &Destination, bytes: &[u8]) -> Result<()> {
    match destination {
        Destination::Stdout => write_stdout(bytes),
        Destination::File(path) => write_atomically(path, bytes),
    }
}

/// A reader that stopped early (`heapdiff -f folded x | head`) is not an
/// error.
fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::new(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// Write to a temporary file next to `path`, sync it, rename it over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let temporary = temporary_path(path);
    let result = write_file(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&temporary);
        return Err(Error::file(path, format!("cannot write: {e}")));
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// `.<name>.heapdiff-<pid>.tmp` in the same directory as `path`.
fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let temporary = format!(".{name}.heapdiff-{}.tmp", std::process::id());
    match path.parent() {
        Some(parent) => parent.join(temporary),
        None => PathBuf::from(temporary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_replaces_without_leftovers() {
        let dir = std::env::temp_dir().join(format!("heapdiff-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.svg");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(entries.len(), 1, "temporary file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unwritable_directory_is_one_line_error() {
        let error = write_atomically(Path::new("/nonexistent-dir/x/out.svg"), b"x").unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("/nonexistent-dir/x/out.svg: cannot write"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }
}
