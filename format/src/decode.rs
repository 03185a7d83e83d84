//! Reading a dump: the header checked, the body decoded by the module of
//! its version (see `versions`) into the model, and the result validated.
//! Never panics; memory stays proportional to the file's size whatever it
//! claims.

use crate::error::DecodeError;
use crate::header::checked_body;
use crate::model::{Dump, Weights};
use crate::versions;
use serde::Deserialize;

/// Parse complete file contents. Never panics; every failure is a
/// [`DecodeError`] that says what is wrong. A dump of an older version is
/// converted (see [`LEGACY_VERSION`](crate::LEGACY_VERSION));
/// [`decode_versioned`] tells which version it was.
pub fn decode(file: &[u8]) -> Result<Dump, DecodeError> {
    decode_versioned(file).map(|(dump, _)| dump)
}

/// [`decode`], also returning the format version the file was written in.
pub fn decode_versioned(file: &[u8]) -> Result<(Dump, u32), DecodeError> {
    let (version, body) = checked_body(file)?;
    let dump = versions::decode_body(version, body)?;
    validate(&dump)?;
    Ok((dump, version))
}

/// Every weight of a decoded dump is finite and not negative: the
/// estimators downstream rely on it.
fn validate(dump: &Dump) -> Result<(), DecodeError> {
    let bad_weight = dump.stacks.iter().position(|stack| {
        [stack.live, stack.alloc]
            .iter()
            .flat_map(Weights::as_array)
            .any(|value| !value.is_finite() || value < 0.0)
    });
    match bad_weight {
        Some(index) => Err(DecodeError::Body(format!(
            "stack {index} has a negative or non-finite weight"
        ))),
        None => Ok(()),
    }
}

/// The most bytes decoding may claim for strings and byte buffers, which
/// bincode allocates at the length the data announces. Real dumps hold a few
/// hundred KiB of strings (paths, command line, thread names); the limit
/// turns a lying length into an error instead of a huge allocation.
const DECODE_CLAIM_LIMIT: usize = 64 << 20;

fn decode_config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<DECODE_CLAIM_LIMIT>,
> {
    bincode::config::standard().with_limit::<DECODE_CLAIM_LIMIT>()
}

/// Decode a whole body as one `T` (a version's layout). Memory stays
/// proportional to the body's size: serde preallocates at most 1 MiB per
/// sequence whatever length the data claims, every element consumes at
/// least one input byte, so a lying length runs out of input (an error)
/// long before it can exhaust memory; strings are borrowed from the input
/// (their length checked against it) before being copied, and
/// [`DECODE_CLAIM_LIMIT`] caps anything bincode would still allocate at a
/// claimed length.
pub(crate) fn decode_exactly<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, DecodeError> {
    let (dump, used) = bincode::serde::borrow_decode_from_slice::<T, _>(body, decode_config())
        .map_err(|e| DecodeError::Body(e.to_string()))?;
    if used != body.len() {
        return Err(DecodeError::Body(format!(
            "{} bytes left over after the profile",
            body.len() - used
        )));
    }
    Ok(dump)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{config, encode};
    use crate::model::Totals;
    use crate::test_dumps::{file_with_body, sample_dump};
    use crate::versions::VERSION;

    #[test]
    fn round_trip() {
        let dump = sample_dump();
        assert_eq!(decode(&encode(&dump)).unwrap(), dump);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode(&sample_dump());
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes decoded"
            );
        }
    }

    #[test]
    fn every_bit_flip_is_an_error() {
        let bytes = encode(&sample_dump());
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[i] ^= 1 << bit;
                assert!(
                    decode(&damaged).is_err(),
                    "flip of bit {bit} in byte {i} decoded"
                );
            }
        }
    }

    #[test]
    fn huge_claimed_length_fails_fast() {
        // A valid header and checksum around a body that claims 2^60 stacks.
        let mut body = bincode::serde::encode_to_vec(sample_dump(), config()).unwrap();
        // Replace the body by its prefix up to the stacks length and a huge varint.
        let prefix_len = {
            let mut d = sample_dump();
            d.stacks.clear();
            d.totals = Totals::default();
            let b = bincode::serde::encode_to_vec(&d, config()).unwrap();
            // the stacks length (0, one byte) sits before the totals (10 bytes of zero varints + Options None)
            b.len() - 11
        };
        body.truncate(prefix_len - 1);
        body.push(253); // u64 varint marker
        body.extend_from_slice(&(1u64 << 60).to_le_bytes());
        body.extend_from_slice(&[0u8; 1000]);
        let file = file_with_body(VERSION, &body);
        let started = std::time::Instant::now();
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
        assert!(started.elapsed().as_secs() < 5);
    }

    #[test]
    fn huge_string_length_is_an_error_not_an_allocation() {
        // The body starts with the `writer` string: claim 2^60 bytes for it.
        let mut body = vec![255u8];
        body.extend_from_slice(&(1u128 << 60).to_le_bytes());
        body.extend_from_slice(&[b'x'; 64]);
        let file = file_with_body(VERSION, &body);
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
        // And 2^40, which would be allocated if it were not for the limit.
        let mut body = vec![253u8];
        body.extend_from_slice(&(1u64 << 40).to_le_bytes());
        body.extend_from_slice(&[b'x'; 64]);
        let file = file_with_body(VERSION, &body);
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
    }

    #[test]
    fn foreign_and_version() {
        assert_eq!(decode(b""), Err(DecodeError::TooShort { len: 0 }));
        assert_eq!(
            decode(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
            Err(DecodeError::Foreign)
        );
        let mut bytes = encode(&sample_dump());
        bytes[8] = 9;
        assert_eq!(
            decode(&bytes),
            Err(DecodeError::UnsupportedVersion { found: 9 })
        );
        assert_eq!(
            DecodeError::UnsupportedVersion { found: 9 }.to_string(),
            "dump format version 9 is not supported (this heapdiff reads versions 2 and 3)"
        );
    }
}
