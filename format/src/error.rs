//! Why a file could not be read as a dump: one variant per way it can be
//! wrong, each displayed as one line that says what is wrong.

use crate::file_layout::{HEADER_LEN, READABLE_VERSIONS};
use std::fmt;

/// Why a file could not be read as a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the fixed header.
    TooShort { len: usize },
    /// The magic bytes are wrong: not a heapsample dump.
    Foreign,
    /// A version this reader does not know.
    UnsupportedVersion { found: u32 },
    /// The header claims an impossible body size.
    BodyTooLarge { claimed: u64 },
    /// Fewer body bytes than the header announces.
    Truncated { expected: u64, found: u64 },
    /// Bytes after the announced body.
    TrailingBytes { extra: u64 },
    /// The body's checksum does not match: the file was damaged.
    Checksum { expected: u32, found: u32 },
    /// The body passed the checksum but does not decode (a writer bug).
    Body(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooShort { len } if *len == 0 => write!(f, "empty file"),
            DecodeError::TooShort { len } => write!(
                f,
                "too short to be a heapsample dump ({len} bytes, the header alone is {HEADER_LEN})"
            ),
            DecodeError::Foreign => write!(f, "not a heapsample dump (wrong magic bytes)"),
            DecodeError::UnsupportedVersion { found } => write!(
                f,
                "dump format version {found} is not supported (this heapdiff reads versions {})",
                readable_versions()
            ),
            DecodeError::BodyTooLarge { claimed } => {
                write!(f, "corrupt header: claims a body of {claimed} bytes")
            }
            DecodeError::Truncated { expected, found } => write!(
                f,
                "truncated: the header announces {expected} body bytes, the file has {found}"
            ),
            DecodeError::TrailingBytes { extra } => {
                write!(f, "corrupt: {extra} unexpected bytes after the body")
            }
            DecodeError::Checksum { expected, found } => write!(
                f,
                "corrupt: body checksum is {found:#010x}, the header says {expected:#010x}"
            ),
            DecodeError::Body(why) => write!(f, "corrupt body: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The versions read, as "2 and 3" (or "2, 3 and 4").
fn readable_versions() -> String {
    let names: Vec<String> = READABLE_VERSIONS.iter().map(u32::to_string).collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}
