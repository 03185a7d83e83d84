//! bincode 2 as every body uses it: the configuration the writer encodes
//! with, and the one bounded decode of a whole body that every version's
//! reader calls. A leaf above the errors only.

use crate::error::DecodeError;
use serde::Deserialize;

/// bincode's configuration for bodies.
pub(crate) fn config() -> bincode::config::Configuration {
    bincode::config::standard()
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
