//! The fixed 24-byte header in front of every body: magic, version, CRC-32
//! and length of the body. Reading it tells a foreign file, an unknown
//! version, a truncated file and a damaged body apart before anything is
//! decoded.

use crate::error::DecodeError;
use crate::file_layout::{HEADER_LEN, MAGIC, MAX_BODY_LEN, READABLE_VERSIONS};

/// The header of a body of `len` bytes with checksum `crc`, in `version`.
pub(crate) fn header(version: u32, crc: u32, len: u64) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&version.to_le_bytes());
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    header[16..24].copy_from_slice(&len.to_le_bytes());
    header
}

/// The version and the checked body of complete file contents: the magic
/// is ours, the version one this crate reads, the body exactly as long as
/// announced and its checksum right.
pub(crate) fn checked_body(file: &[u8]) -> Result<(u32, &[u8]), DecodeError> {
    if file.len() < HEADER_LEN {
        if file.len() >= 8 && file[..8] != MAGIC {
            return Err(DecodeError::Foreign);
        }
        return Err(DecodeError::TooShort { len: file.len() });
    }
    if file[..8] != MAGIC {
        return Err(DecodeError::Foreign);
    }
    let version = le_u32(&file[8..12]);
    if !READABLE_VERSIONS.contains(&version) {
        return Err(DecodeError::UnsupportedVersion { found: version });
    }
    let expected_crc = le_u32(&file[12..16]);
    let body_len = le_u64(&file[16..24]);
    if body_len > MAX_BODY_LEN {
        return Err(DecodeError::BodyTooLarge { claimed: body_len });
    }
    let body = &file[HEADER_LEN..];
    let found = body.len() as u64;
    if found < body_len {
        return Err(DecodeError::Truncated {
            expected: body_len,
            found,
        });
    }
    if found > body_len {
        return Err(DecodeError::TrailingBytes {
            extra: found - body_len,
        });
    }
    let crc = crc32fast::hash(body);
    if crc != expected_crc {
        return Err(DecodeError::Checksum {
            expected: expected_crc,
            found: crc,
        });
    }
    Ok((version, body))
}

fn le_u32(bytes: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[..4]);
    u32::from_le_bytes(b)
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(b)
}
