//! The one error type: a single line that names the file and says what is
//! wrong. `main` prints it and exits with status 2.

use std::fmt;
use std::path::Path;

/// A user-facing, one-line error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error about `path`: `"<path>: <what>"`.
    pub fn file(path: &Path, what: impl fmt::Display) -> Self {
        Error::new(format!("{}: {}", path.display(), what))
    }

    /// An error not tied to one file.
    pub fn new(message: impl Into<String>) -> Self {
        let message: String = message.into();
        Error {
            message: message.replace('\n', " "),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
